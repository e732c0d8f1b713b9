"""The Python package against the binary: the same command line gives the same report, errors
keep the binary's message and exit-code kind, and a long run stops on Ctrl-C.

The binary is `$THROUGHPUT_OPTIMIZER_BIN` (a test fails when it names no file), else
target/release (then target/debug) of this checkout; the tests that compare with it are skipped
when none is built."""

from __future__ import annotations

import _thread
import json
import math
import os
import signal
import subprocess
import threading
import time
import warnings
from pathlib import Path

import pytest

import throughput_optimizer as t

REPO = Path(__file__).resolve().parents[2]

# The README's headline example.
HEADLINE = ["Qwen/Qwen3-32B", "--device", "TEST_DEVICE", "--num-devices", "8", "--input-length", "3500",
            "--output-length", "1500", "--compile", "--tpot-limits", "50"]  # fmt: skip
# The user guide's P/D-ratio example.
PD_RATIO = ["deepseek-ai/DeepSeek-V3.1", "--input-length", "3500", "--output-length", "1500", "--compile",
            "--enable-optimize-prefill-decode-ratio", "--prefill-devices-per-instance", "16",
            "--decode-devices-per-instance", "16", "--num-devices", "64", "--ttft-limits", "2000",
            "--tpot-limits", "50"]  # fmt: skip
# A search of several seconds on one thread (about 5 s in a release build on a 2-core machine):
# Kimi K2 on 384 devices of five kinds, aggregated against P/D.
LONG = dict(device=["ATLAS_800_A2_376T_64G", "A100_SXM_80G", "H100_SXM", "H200_SXM", "B200"], num_devices=384,
            input_length=3500, output_length=1500, tpot_limit_ms=50, compare_disagg=True, jobs=1)  # fmt: skip


def binary() -> Path:
    named = os.environ.get("THROUGHPUT_OPTIMIZER_BIN")
    if named:
        # Named (as .ci/run does): a missing binary fails the tests instead of skipping them.
        assert Path(named).is_file(), f"THROUGHPUT_OPTIMIZER_BIN={named} is not a file"
        return Path(named)
    candidates = [str(REPO / "target" / p / "throughput-optimizer") for p in ("release", "debug")]
    for c in candidates:
        if c and Path(c).is_file():
            return Path(c)
    pytest.skip("no throughput-optimizer binary built (cargo build --release)")


def cli(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(binary()), *argv], capture_output=True, text=True, timeout=300)


def records(table) -> list[dict]:
    """A table as a list of dicts, whether pandas made it a DataFrame or not (a DataFrame's
    missing values, NaN, back to the list's None)."""
    if not hasattr(table, "to_dict"):
        return table
    return [{k: None if isinstance(v, float) and math.isnan(v) else v for k, v in r.items()} for r in table.to_dict("records")]


@pytest.mark.parametrize("argv", [HEADLINE, PD_RATIO], ids=["headline", "pd-ratio"])
def test_run_returns_what_the_binary_prints(argv):
    argv = [*argv, "--output", "json"]
    out = cli(argv)
    assert out.returncode == 0, out.stderr
    # Fails if run() renders or rounds the report differently from the binary.
    assert t.run(argv) == json.loads(out.stdout)


def test_plan_gives_the_readme_headline_figure():
    report = t.plan("Qwen/Qwen3-32B", device="TEST_DEVICE", num_devices=8, input_length=3500, output_length=1500,
                    compile=True, tpot_limit_ms=50)  # fmt: skip
    assert report["schema_version"] == 2
    assert round(report["devices"][0]["phases"][0]["best"][0]["throughput"], 2) == 3260.27
    # Fails if plan() builds a command line other than the README's.
    assert report == t.run([*HEADLINE, "--output", "json"])


def test_options_are_long_flags():
    # Multi-value flags take lists, switches True, one-value flags their value.
    report = t.plan("Qwen/Qwen3-32B", device="TEST_DEVICE", num_devices=8, input_length=3500, output_length=1500,
                    tpot_limit_ms=50, tp_sizes=[4, 8], serving_engine="vllm", quiet=True)  # fmt: skip
    assert {r["layout.tp"] for r in records(t.rows(report))} == {4, 8}
    assert report["devices"][0]["serving"]["engine"] == "vllm"


def test_a_usage_error_carries_the_binary_message():
    argv = [*HEADLINE, "--tpot-limits", "-5"]
    out = cli(argv)
    assert out.returncode == 2
    with pytest.raises(t.UsageError) as e:
        t.run(argv)
    # clap's own errors (the message and its usage lines) are kept as the binary prints them.
    assert out.stderr.startswith("error: ") and str(e.value) == out.stderr[len("error: ") :].rstrip()
    assert e.value.exit_code == 2 and isinstance(e.value, (t.Error, ValueError))


def test_a_validation_error_names_its_flag():
    with pytest.raises(t.UsageError) as e:
        t.plan("Qwen/Qwen3-32B", device="NO_SUCH_DEVICE", num_devices=8, input_length=3500, output_length=1500)
    out = cli(["Qwen/Qwen3-32B", "--device", "NO_SUCH_DEVICE", "--num-devices", "8", "--input-length", "3500",
               "--output-length", "1500", "--output", "json"])  # fmt: skip
    assert out.returncode == 2 and out.stderr == f"error: {e.value}\n"
    with pytest.raises(t.UsageError) as e:
        t.plan("Qwen/Qwen3-32B", device="TEST_DEVICE", num_devices=8, input_length=3500, output_length=1500, jobs=2000)
    assert e.value.field == "--jobs" and str(e.value).startswith("--jobs 2000: ")
    with pytest.raises(t.UsageError, match="no_such_option"):
        t.plan("Qwen/Qwen3-32B", device="TEST_DEVICE", no_such_option=1)
    with pytest.raises(t.UsageError, match="model `no-such/model` was not found"):
        t.plan("no-such/model", device="TEST_DEVICE", num_devices=8, input_length=100, output_length=100)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_runtime_error_is_not_a_usage_error():
    argv = [*HEADLINE, "--output", "json", "--output-file", "/dev/full", "-q"]
    with pytest.raises(t.RuntimeError) as e:
        t.run(argv)
    assert e.value.exit_code == 1 and not isinstance(e.value, t.UsageError) and isinstance(e.value, RuntimeError)
    out = cli(argv)
    assert out.returncode == 1 and out.stderr == f"error: {e.value}\n"


def test_help_and_text_outputs_are_text():
    assert "Usage:" in t.run(["--help"])
    table = t.run([*HEADLINE, "-q"])
    assert isinstance(table, str) and "Best Throughput: 3260.27 tokens/s" in table


def test_output_file_is_written_and_returned(tmp_path):
    target = tmp_path / "report.json"
    report = t.plan("Qwen/Qwen3-32B", device="TEST_DEVICE", num_devices=8, input_length=3500, output_length=1500,
                    compile=True, tpot_limit_ms=50, output_file=target)  # fmt: skip
    assert json.loads(target.read_text()) == report


def test_rows_frontier_and_sweeps_are_flat_tables():
    report = t.plan("Qwen/Qwen3-32B", device="TEST_DEVICE", num_devices=8, input_length=3500, output_length=1500,
                    compile=True, tpot_limit_ms=50, max_batched_tokens=[2048, 8192])  # fmt: skip
    rows = records(t.rows(report))
    assert len(rows) == len(report["devices"][0]["phases"][0]["rows"])
    assert {"device", "phase", "parallel", "batch_size", "throughput", "layout.tp", "memory.weight_gib"} <= set(rows[0])
    best = records(t.rows(report, best=True))
    assert best[0]["throughput"] == report["devices"][0]["phases"][0]["best"][0]["throughput"]
    points = records(t.frontier(report))
    assert points and sum(p["chosen"] for p in points) == 1 and {"device", "tokens_per_s_per_device"} <= set(points[0])
    study = records(t.sweeps(report))
    assert sorted(p["budget"] for p in study) == [2048, 8192]


def test_simulate_returns_one_record_per_request():
    reqs = records(t.simulate("Qwen/Qwen3-32B", device="TEST_DEVICE", num_devices=8, input_length=3500,
                              output_length=1500, compile=True, tp=8, batch_size=32))  # fmt: skip
    assert reqs and set(reqs[0]) == {"request", "instance", "arrival_ms", "queued_ms", "first_scheduled_ms",
                                     "first_token_ms", "finish_ms", "input_tokens", "cached_tokens",
                                     "output_tokens", "preemptions"}  # fmt: skip
    done = [r for r in reqs if r["finish_ms"] is not None]
    assert done and all(r["arrival_ms"] <= r["first_token_ms"] <= r["finish_ms"] for r in done)
    assert {r["input_tokens"] for r in reqs} == {3500}
    assert not Path("requests.csv").exists(), "simulate() keeps the requests file in memory"


def test_simulate_of_a_deployment_that_cannot_run():
    with pytest.raises(t.RuntimeError, match="did not run"):
        t.simulate("meta-llama/Meta-Llama-3.1-405B", device="TEST_DEVICE", num_devices=1, input_length=3500,
                   output_length=1500, batch_size=8)  # fmt: skip


def test_progress_is_reported_and_a_callback_can_stop_the_run():
    seen = []
    t.plan("Qwen/Qwen3-32B", device="TEST_DEVICE", num_devices=8, input_length=3500, output_length=1500,
           tpot_limit_ms=50, progress=lambda done, total: seen.append((done, total)))  # fmt: skip
    assert seen and seen[-1][0] == seen[-1][1] and [d for d, _ in seen] == sorted(d for d, _ in seen)
    with pytest.raises(t.RuntimeError, match="stopped"):
        t.plan("Qwen/Qwen3-32B", device="TEST_DEVICE", num_devices=8, input_length=3500, output_length=1500,
               tpot_limit_ms=50, progress=lambda done, total: False)  # fmt: skip


def test_warnings_are_python_warnings():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t.plan("Qwen/Qwen3-32B", device="TEST_DEVICE", num_devices=8, input_length=3500, output_length=1500,
               tpot_limit_ms=50, compile_allow_graph_break=True)  # fmt: skip
    out = cli([*HEADLINE[:-3], "--tpot-limits", "50", "--compile-allow-graph-break", "--output", "json"])
    expected = [line[len("warning: ") :] for line in out.stderr.splitlines() if line.startswith("warning: ")]
    assert [str(w.message) for w in caught if issubclass(w.category, t.PlanWarning)] == expected


def test_ctrl_c_stops_a_long_run_and_the_gil_is_released():
    ticks = []
    stop_ticking = threading.Event()

    def tick():
        # Runs only while the search has released the GIL.
        while not stop_ticking.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.01)

    seen = []
    ticker = threading.Thread(target=tick)
    timer = threading.Timer(1.0, _thread.interrupt_main)
    # A process started in the background by a non-interactive shell inherits SIGINT ignored,
    # and then interrupt_main does nothing: Ctrl-C's own handler, whatever the parent did.
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    started = time.monotonic()
    ticker.start()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            t.plan("moonshotai/Kimi-K2-Instruct", progress=lambda done, total: seen.append((done, total)), **LONG)
    finally:
        stop_ticking.set()
        timer.cancel()
        ticker.join()
        signal.signal(signal.SIGINT, inherited)
    elapsed = time.monotonic() - started
    # The interrupt comes at 1 s; the run stops once the simulations in flight are done.
    assert elapsed < 4.0, f"the run went on for {elapsed:.1f} s after Ctrl-C"
    # Fails if the search ran to its end and only then raised.
    assert seen and seen[-1][0] < seen[-1][1], f"the search finished ({seen[-1:]}) before it stopped"
    assert len([x for x in ticks if x < started + 1.0]) > 20, "another thread could not run during the search"


def test_calibrate_returns_the_json_report():
    sample = REPO / "tests" / "fixtures" / "calibration" / "measured_sample.csv"
    report = t.calibrate(sample)
    out = cli(["calibrate", "--measured", str(sample), "--output", "json"])
    assert report == json.loads(out.stdout)
    with pytest.raises(t.UsageError, match="no-such.csv"):
        t.calibrate("no-such.csv")


def test_price_returns_what_the_binary_prints():
    argv = ["price", "Qwen/Qwen3-32B", "--device", "H100_SXM", "--tp", "2", "--decode", "64x3500",
            "--prefill", "1x2048@6144", "--output", "json"]  # fmt: skip
    out = cli(argv)
    assert out.returncode == 0, out.stderr
    expected = json.loads(out.stdout)
    # Fails if price() builds a command line other than the binary's.
    assert t.price("Qwen/Qwen3-32B", device="H100_SXM", tp=2, decode="64x3500", prefill=["1x2048@6144"]) == expected
    assert t.run(argv) == expected
    assert expected["step_ms"] > 0 and expected["operators"]
    with pytest.raises(t.UsageError, match="--decode"):
        t.price("Qwen/Qwen3-32B", device="H100_SXM")
    with pytest.raises(t.UsageError, match="--decode"):
        t.price("Qwen/Qwen3-32B", device="H100_SXM", decode="64by3500")
