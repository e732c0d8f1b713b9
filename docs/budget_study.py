"""The chunk-budget study of docs/python.md: how the prefill chunk budget (--max-batched-tokens)
trades TTFT against the inter-token stalls of the running decodes, for Qwen3-32B on 8 x
TEST_DEVICE with 16k-token prompts, and which budget serves the most tokens/s under a 50 ms TPOT.

    pip install . matplotlib pandas
    python docs/budget_study.py docs/budget-study.png
"""

import sys

import matplotlib

matplotlib.use("Agg")  # no display needed
import matplotlib.pyplot as plt

import throughput_optimizer as t

BUDGETS = [1024, 2048, 4096, 8192, 16384]
TPOT_LIMIT_MS = 50

# One planning run: every budget searched on its own, then each layout of the top table
# re-simulated at one common load with every budget (sweep_all_layouts), so that the rows of a
# layout differ only in the budget.
report = t.plan(
    "Qwen/Qwen3-32B",
    device="TEST_DEVICE",
    num_devices=8,
    input_length=16000,
    output_length=1000,
    tpot_limit_ms=TPOT_LIMIT_MS,
    compile=True,
    causal_attention=True,
    max_batched_tokens=BUDGETS,
    sweep_all_layouts=True,
    tp_sizes=[8, 4],
)
study = t.sweeps(report)  # a DataFrame: one row per layout and budget
print(study[["parallel", "batch_size", "budget", "ttft_ms", "itl_p99_ms", "tpot_ms", "feasible", "best_batch", "best_throughput"]].to_string(index=False))

best = report["devices"][0]["phases"][0]["best"][0]
print(f"best: {best['parallel']} batch {best['batch_size']}, budget {best['max_batched_tokens']}: {best['throughput']:.2f} tokens/s")

fig, (latency, tpot, throughput) = plt.subplots(1, 3, figsize=(16, 4.6))
for (parallel, rows), color in zip(study.groupby("parallel", sort=False), ["tab:blue", "tab:orange"]):
    layout = f"{parallel.split(' |')[0]}, batch {rows['batch_size'].iloc[0]}"
    latency.plot(rows["budget"], rows["ttft_ms"], "o-", color=color, label=f"TTFT mean, {layout}")
    latency.plot(rows["budget"], rows["itl_p99_ms"], "s--", color=color, label=f"ITL p99, {layout}")
    tpot.plot(rows["budget"], rows["tpot_ms"], "o-", color=color, label=layout)
    throughput.plot(rows["budget"], rows["best_throughput"], "o-", color=color, label=parallel.split(" |")[0])
    for budget, value, batch in zip(rows["budget"], rows["best_throughput"], rows["best_batch"]):
        throughput.annotate(f"b{batch}", (budget, value), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)
tpot.axhline(TPOT_LIMIT_MS, color="gray", linestyle=":", label=f"TPOT limit {TPOT_LIMIT_MS} ms")

latency.set(title="Latency at the common load", ylabel="ms")
tpot.set(title="Mean TPOT at the common load", ylabel="ms")
throughput.set(title="Best throughput under the TPOT limit", ylabel="output tokens/s")
for ax in (latency, tpot, throughput):
    ax.set_xscale("log", base=2)
    ax.set_xticks(BUDGETS, [str(b) for b in BUDGETS])
    ax.set_xlabel("chunk budget (max_batched_tokens)")
    ax.grid(alpha=0.3)
    ax.margins(y=0.12)
latency.set_ylim(0, 1.6 * study["ttft_ms"].max())  # room for the legend above the curves
for ax in (latency, tpot, throughput):
    ax.legend(loc="upper left" if ax is not throughput else "upper right", ncol=2 if ax is latency else 1, fontsize=7.5 if ax is latency else 8)
fig.suptitle("Qwen3-32B on 8 x TEST_DEVICE, 16000 in / 1000 out: the chunk-budget study")
fig.tight_layout()
fig.savefig(sys.argv[1] if len(sys.argv) > 1 else "budget-study.png", dpi=110)
