"""Checks of scripts/profile_kernels.py that need no GPU: the --smoke run writes AIConfigurator's
layout with exactly its columns and dtypes, the budget stops a run cleanly, GPU names map to
AIC's system keys, and the collective sweep works end to end (over gloo on CPU).

Run with `python -m pytest scripts/test_profile_kernels.py` or plain
`python scripts/test_profile_kernels.py`; both need torch, pandas and pyarrow.
"""

import os
import sys
import tempfile
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import profile_kernels as pk  # noqa: E402

# AIC's own tables (aiconfigurator-core 0.12.0, h200_sxm) read with pandas: column order and dtype.
TEXT = "str"  # pandas >= 3 reads arrow strings as "str"; older pandas says "object"
AIC_COMMON = [("framework", TEXT), ("version", TEXT), ("device", TEXT), ("op_name", TEXT),
              ("kernel_source", TEXT)]
AIC_ATTENTION = AIC_COMMON + [
    ("batch_size", "int64"), ("isl", "int64"), ("num_heads", "int64"),
    ("num_key_value_heads", "int64"), ("head_dim", "int64"), ("beam_width", "int64"),
    ("attn_dtype", TEXT), ("kv_cache_dtype", TEXT), ("step", "int64"), ("window_size", "int64"),
    ("latency", "float64")]
AIC_SCHEMAS = {
    "gemm_perf": AIC_COMMON + [("gemm_dtype", TEXT), ("m", "int64"), ("n", "int64"),
                               ("k", "int64"), ("latency", "float64")],
    "context_attention_perf": AIC_ATTENTION,
    "generation_attention_perf": AIC_ATTENTION,
    "moe_perf": AIC_COMMON + [
        ("moe_dtype", TEXT), ("num_tokens", "int64"), ("hidden_size", "int64"),
        ("inter_size", "int64"), ("topk", "int64"), ("num_experts", "int64"),
        ("moe_tp_size", "int64"), ("moe_ep_size", "int64"), ("distribution", TEXT),
        ("latency", "float64")],
    "nccl_perf": AIC_COMMON + [("nccl_dtype", TEXT), ("num_gpus", "int64"),
                               ("message_size", "int64"), ("latency", "float64")],
}
FAMILY = {"gemm_perf": "gemm", "context_attention_perf": "attention",
          "generation_attention_perf": "attention", "moe_perf": "moe", "nccl_perf": "comm"}


def check_table(system_dir, table):
    import pandas as pd
    version = pk.torch.__version__.split("+")[0]
    folder = os.path.join(system_dir, FAMILY[table], "torch", version)
    df = pd.read_parquet(os.path.join(folder, table + ".parquet"))
    got = [(c, "str" if str(t) in ("object", "string", "str") else str(t))
           for c, t in df.dtypes.items()]
    assert got == AIC_SCHEMAS[table], (table, got)
    assert len(df) > 0 and (df["latency"] > 0).all(), table
    assert set(df["framework"]) == {"torch"} and set(df["version"]) == {version}
    with open(os.path.join(folder, "collection_meta.yaml")) as f:
        meta = f.read()
    assert "framework: torch" in meta and f"  {table}:" in meta
    return df


def test_smoke_writes_aic_tables():
    with tempfile.TemporaryDirectory() as out:
        t0 = time.monotonic()
        assert pk.main(["--smoke", "--out", out, "--system", "testbox"]) == 0
        assert time.monotonic() - t0 < 120
        system_dir = os.path.join(out, "testbox")
        for table in ["gemm_perf", "context_attention_perf", "generation_attention_perf",
                      "moe_perf"]:
            df = check_table(system_dir, table)
            if table == "generation_attention_perf":  # AIC: isl 1, step = KV length - 1
                assert set(df["isl"]) == {1} and set(df["step"]) == {63, 127}
            if table == "moe_perf":
                assert set(df["moe_ep_size"]) == {1, 8}
        assert "bfloat16" in set(check_table(system_dir, "gemm_perf")["gemm_dtype"])
        with open(os.path.join(system_dir, "README.txt")) as f:
            readme = f.read()
        assert "engine 'torch'" in readme and "comm: skipped" in readme


def test_zero_budget_measures_nothing_and_says_so():
    with tempfile.TemporaryDirectory() as out:
        pk.main(["--smoke", "--out", out, "--system", "x", "--budget-minutes", "0",
                 "--ops", "gemm,moe"])
        with open(os.path.join(out, "x", "README.txt")) as f:
            readme = f.read()
        assert "gemm_perf: budget reached after 0 of" in readme
        assert not os.path.exists(os.path.join(out, "x", "gemm"))


def test_system_names():
    cases = {"NVIDIA H100 80GB HBM3": "h100_sxm", "NVIDIA H100 PCIe": "h100_pcie",
             "NVIDIA H200": "h200_sxm", "NVIDIA B200": "b200_sxm", "NVIDIA GB200": "gb200",
             "NVIDIA B300 SXM6 AC": "b300_sxm", "NVIDIA L40S": "l40s", "NVIDIA L4": "l4",
             "NVIDIA A100-SXM4-80GB": "a100_sxm",
             "NVIDIA RTX PRO 6000 Blackwell Server Edition": "rtx_pro_6000_server",
             "NVIDIA GeForce RTX 4090": "geforce_rtx_4090"}
    for name, system in cases.items():
        assert pk.system_name(name) == system, name


def test_comm_sweep_over_gloo():
    with tempfile.TemporaryDirectory() as out:
        args = types.SimpleNamespace(smoke=True, system="x", out=out, replays=10, no_graphs=False)
        run = pk.Run(args)
        os.makedirs(run.out)
        rows, status = pk.comm_rows(run, time.monotonic() + 120, backend="gloo", worlds=(2,))
        assert status == "complete" and len(rows) == 6
        pk.write_table(run, "nccl_perf", rows)
        pk.write_meta(run, {"nccl_perf": (status, len(rows))})
        df = check_table(run.out, "nccl_perf")
        assert set(df["op_name"]) == {"all_reduce", "all_gather", "reduce_scatter"}
        assert set(df["num_gpus"]) == {2} and set(df["nccl_dtype"]) == {"half"}


if __name__ == "__main__":
    for name, fn in list(globals().items()):
        if name.startswith("test_"):
            fn()
            print("ok", name)
