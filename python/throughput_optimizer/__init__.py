"""throughput-optimizer from Python: which LLM-serving deployment gets the most tokens per
second out of a set of accelerators under TTFT/TPOT limits, planned by the same code as the
binary (``throughput-optimizer``), in-process.

>>> import throughput_optimizer as t
>>> report = t.plan("Qwen/Qwen3-32B", device="TEST_DEVICE", num_devices=8,
...                 input_length=3500, output_length=1500, compile=True, tpot_limit_ms=50)
>>> report["devices"][0]["phases"][0]["best"][0]["throughput"]
3260.27

Functions:

- :func:`plan` plans and returns the report of ``--output json`` as a dict.
- :func:`run` runs any command line (``["Qwen/Qwen3-32B", "--device", …]``) and returns
  what the binary prints: the JSON report as a dict, other output as text.
- :func:`rows`, :func:`frontier`, :func:`sweeps` turn a report into tables (pandas
  DataFrames when pandas is installed, else lists of dicts).
- :func:`simulate` simulates one fixed deployment and returns its per-request records.
- :func:`calibrate` compares the simulator with measured benchmarks (``calibrate``).
- :func:`price` prices one engine step (the ``price`` command).

Options are the binary's long flags with ``_`` for ``-`` (``compile=True``,
``serving_engine="vllm"``, ``tp_sizes=[2, 4]``); see ``throughput-optimizer --help``. Errors
raise :class:`UsageError` (the binary's exit code 2) or :class:`RuntimeError` (exit code 1),
both :class:`Error`, with the binary's message; its warnings are :class:`PlanWarning`. Long runs release the GIL, report progress
(``progress=``; a tqdm bar by default when tqdm is installed) and stop on Ctrl-C
(``KeyboardInterrupt``).
"""

from __future__ import annotations

import json
import os
import logging
import shlex
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from . import _argv, _native, _progress, _tables
from ._errors import Error, PlanWarning, RuntimeError, UsageError
from ._progress import Progress, ProgressCallback
from ._tables import Record, Table

__all__ = [
    "Error",
    "UsageError",
    "RuntimeError",
    "PlanWarning",
    "Progress",
    "ProgressCallback",
    "Record",
    "Table",
    "plan",
    "run",
    "rows",
    "frontier",
    "sweeps",
    "simulate",
    "calibrate",
    "price",
]

__version__: str = _native.__version__

#: The report of ``--output json`` (docs/report.schema.json), or a command's text output.
Report = Dict[str, Any]
PathOrStr = Union[str, "os.PathLike[str]"]


_log = logging.getLogger("throughput_optimizer")


def _stderr(text: str) -> None:
    """The binary's stderr notices: its warnings as PlanWarning, the rest (the time taken,
    calibrate's dropped runs) logged at INFO on the ``throughput_optimizer`` logger."""
    for line in text.splitlines():
        if line.startswith("warning: "):
            warnings.warn(line[len("warning: ") :], PlanWarning, stacklevel=2)
        elif line.strip():
            _log.info("%s", line)


def _execute(
    argv: Sequence[str], progress: Progress, capture: Sequence[str] = (), notices: Callable[[str], None] = _stderr
) -> Tuple[str, List[Tuple[str, str, str, bool]]]:
    callback = _progress.resolve(progress)
    try:
        return _native.execute(list(argv), callback, notices, list(capture))
    finally:
        if isinstance(callback, _progress.TqdmBar):
            callback.close()


def _output(stdout: str, files: List[Tuple[str, str, str, bool]]) -> Union[Report, str]:
    """What the command printed, or the report it wrote to --output-file: a JSON document
    parsed, other text as it is."""
    text = stdout
    if not text.strip():
        text = next((contents for flag, _, contents, _ in files if flag == "--output-file"), text)
    if text.lstrip().startswith("{"):
        try:
            report: Report = json.loads(text)
            return report
        except ValueError:
            pass
    return text


def run(argv: Union[str, Sequence[Any]], *, progress: Progress = None) -> Union[Report, str]:
    """Run a command line as the binary would and return what it prints.

    Args:
        argv: the arguments (``["Qwen/Qwen3-32B", "--device", "TEST_DEVICE", …]``, or one
            string split like a shell does); a leading ``throughput-optimizer`` is dropped.
            Subcommands (``calibrate``, ``merge``, ``price``) are the first argument, as on
            the command line.
        progress: ``progress(done, total)`` after each searched candidate (return ``False`` to
            stop the run); ``None`` shows a tqdm bar when tqdm is installed; ``False`` nothing.

    Returns:
        The report as a dict when the command prints JSON (``--output json``, also when it
        goes to ``--output-file``), else the text it prints (a table, CSV, ``--help``). Files
        the command names (``--plot-file``, ``--requests-file``, …) are written as the binary
        writes them. What it prints on stderr: its warnings are issued as
        :class:`PlanWarning`, the rest is logged (INFO, logger ``throughput_optimizer``).

    Raises:
        UsageError: the command line is wrong (the binary's exit code 2).
        RuntimeError: running failed (exit code 1).
        KeyboardInterrupt: Ctrl-C stopped the run.
    """
    args = shlex.split(argv) if isinstance(argv, str) else [os.fspath(a) if isinstance(a, os.PathLike) else str(a) for a in argv]
    if args and os.path.basename(args[0]) == "throughput-optimizer":
        args = args[1:]
    return _output(*_execute(args, progress))


def _core(
    model: str,
    device: Union[str, Sequence[str]],
    num_devices: Optional[int],
    input_length: Any,
    output_length: Any,
    caller: str,
    options: Dict[str, Any],
) -> List[str]:
    options = dict(options)
    options.update(
        device=[device] if isinstance(device, str) else list(device),
        num_devices=num_devices,
        input_length=input_length,
        output_length=output_length,
    )
    output = options.pop("output", "json")
    if output != "json":
        raise UsageError(f"{caller}() returns the JSON report: leave out output={output!r} (or call run())")
    return [str(model), "--output", "json", *_argv.to_argv("plan", options, caller)]


def plan(
    model: str,
    *,
    device: Union[str, Sequence[str]],
    num_devices: Optional[int] = None,
    input_length: Union[int, str, None] = None,
    output_length: Union[int, str, None] = None,
    ttft_limit_ms: Optional[float] = None,
    tpot_limit_ms: Optional[float] = None,
    progress: Progress = None,
    **options: Any,
) -> Report:
    """Plan a deployment and return the report of ``--output json`` as a dict.

    Args:
        model: a model id of the built-in catalog (``"Qwen/Qwen3-32B"``), a directory with a
            ``config.json`` or a path to one (``MODEL_ID``).
        device: a device profile name (``"H100_SXM"``), or several to compare.
        num_devices: devices in the deployment (``--num-devices``).
        input_length: prompt tokens, or a length file (``--input-length``).
        output_length: generated tokens (``--output-length``).
        ttft_limit_ms: the TTFT limit (``--ttft-limits``).
        tpot_limit_ms: the TPOT limit (``--tpot-limits``).
        progress: see :func:`run`.
        **options: the binary's other long flags with ``_`` for ``-``: ``compile=True``,
            ``serving_engine="vllm"``, ``max_batched_tokens=[2048, 8192]``, ``jobs=2``,
            ``plot_file="plan.svg"`` … (``throughput-optimizer --help`` lists them).

    Returns:
        The report (docs/report.schema.json; ``report["schema_version"]``), exactly what
        ``--output json`` prints for the same flags.

    Raises:
        UsageError, RuntimeError, KeyboardInterrupt: see :func:`run`.
    """
    argv = _core(model, device, num_devices, input_length, output_length, "plan", options)
    argv += _argv.to_argv("plan", {"ttft_limits": ttft_limit_ms, "tpot_limits": tpot_limit_ms}, "plan")
    report = run(argv, progress=progress)
    assert isinstance(report, dict), "--output json prints a JSON report"
    return report


def rows(report: Report, *, best: bool = False) -> Table:
    """Every probed row of every device and phase (``best=True``: each phase's best row per
    layout, best first), one flat record per row: ``device``, ``phase``, ``parallel``,
    ``batch_size``, ``throughput``, ``ttft_ms``, ``tpot_ms``, ``layout.tp``, …

    Returns a pandas DataFrame when pandas is installed, else a list of dicts."""
    key = "best" if best else "rows"
    return _tables.table(
        _tables.flatten(row) for device in report.get("devices", []) for phase in device.get("phases", []) for row in phase.get(key, [])
    )


def frontier(report: Report) -> Table:
    """The deployment plane of each device (the throughput-per-device / per-user Pareto
    frontier of aggregated runs, with P/D deployments under ``compare_disagg=True``): one
    record per point with ``device``, ``kind``, ``tokens_per_s_per_device``,
    ``tokens_per_s_per_user``, ``meets_slo``, ``on_frontier``, ``chosen``, …

    Returns a pandas DataFrame when pandas is installed, else a list of dicts."""
    records = []
    for device in report.get("devices", []):
        plane = device.get("frontier") or {}
        for i, point in enumerate(plane.get("points", [])):
            records.append({"device": device["device"], **_tables.flatten(point), "chosen": i == plane.get("chosen")})
    return _tables.table(records)


def sweeps(report: Report) -> Table:
    """The chunk-budget study (``max_batched_tokens=[…]`` with several budgets): one record
    per layout and budget with ``device``, ``parallel``, ``batch_size`` (the batch the study
    holds fixed), ``budget``, ``chunks_per_prompt``, ``throughput``, ``ttft_p99_ms``,
    ``itl_p99_ms``, ``best_batch`` and ``best_throughput`` (the best batch at that budget).

    Returns a pandas DataFrame when pandas is installed, else a list of dicts."""
    records: List[Record] = []
    for device in report.get("devices", []):
        for phase in device.get("phases", []):
            for sweep in phase.get("sweeps", []):
                fixed = {"device": device["device"], "parallel": sweep["parallel"], "batch_size": sweep["batch_size"]}
                records.extend({**fixed, **_tables.flatten(point)} for point in sweep["points"])
    return _tables.table(records)


def simulate(
    model: str,
    *,
    device: str,
    num_devices: int,
    input_length: Union[int, str],
    output_length: Union[int, str],
    batch_size: int,
    tp: Optional[int] = None,
    max_batched_tokens: Optional[int] = None,
    progress: Progress = None,
    **options: Any,
) -> Table:
    """Simulate one fixed deployment and return what happened to each request.

    The deployment is the layout with ``tp`` tensor-parallel devices per replica (the others
    data-parallel; MoE layouts are pinned with ``ep_sizes=[…]``, ``moe_dp_sizes=[…]``) running
    ``batch_size`` sequences per replica with a token budget of ``max_batched_tokens`` (the
    serving engine's default when left out), as ``--tp-sizes``, ``--batch-range B B`` and
    ``--max-batched-tokens`` pin it; the other options are :func:`plan`'s. No limits apply.

    Returns:
        One record per simulated request, in issue order, with the ``--requests-file``
        columns: ``request``, ``instance``, ``arrival_ms``, ``queued_ms``,
        ``first_scheduled_ms``, ``first_token_ms``, ``finish_ms``, ``input_tokens``,
        ``cached_tokens``, ``output_tokens``, ``preemptions`` (times in ms of engine time; a
        time that never came, for a request still running when the simulation stopped, is
        ``None``, NaN in a DataFrame). A pandas DataFrame when pandas is installed, else a
        list of dicts.

    Raises:
        UsageError, RuntimeError, KeyboardInterrupt: see :func:`run`; RuntimeError also when
        the deployment cannot run (it does not fit in memory, say).
    """
    if not isinstance(device, str):
        raise UsageError("simulate() runs one deployment: give one device")
    options = dict(options, batch_range=[batch_size, batch_size], tp_sizes=None if tp is None else [tp])
    options.update(max_batched_tokens=max_batched_tokens, requests_file="requests.csv", ttft_limits=None, tpot_limits=None)
    argv = _core(model, device, num_devices, input_length, output_length, "simulate", options)
    # The requests file is simulate()'s own: its notices are not the caller's business.
    stdout, files = _execute(argv, progress, ["--requests-file"], lambda text: _stderr(text) if "--requests-file" not in text else None)
    csv_text = next((contents for flag, _, contents, _ in files if flag == "--requests-file"), None)
    if csv_text is None:
        report = _output(stdout, files)
        if not isinstance(report, dict):
            raise RuntimeError("simulate(): the deployment did not run")
        failures = [f for d in report.get("devices", []) for p in d.get("phases", []) for f in p.get("failures", [])]
        raise RuntimeError("simulate(): the deployment did not run" + (": " + "; ".join(failures) if failures else ""))
    return _tables.table(_tables.requests_records(csv_text))


def calibrate(measured: Union[PathOrStr, Sequence[PathOrStr]], *, fit: bool = False, progress: Progress = None, **options: Any) -> Report:
    """Compare the simulator with measured serving benchmarks (``throughput-optimizer
    calibrate --output json``): every measured run predicted, the errors of TTFT and TPOT per
    engine × GPU × model, the runs dropped; with ``fit=True`` the fitted calibrations.

    Args:
        measured: the measured-results files (CSV, or ``vllm bench serve`` JSON).
        fit: fit a calibration per serving engine × device (``--fit``); ``write="DIR"``
            writes the fitted profiles, ``leave_one_model_out=True`` cross-validates.
        **options: ``calibrate``'s other flags (``calibration="none"``, …).

    Raises:
        UsageError, RuntimeError, KeyboardInterrupt: see :func:`run` (Ctrl-C is acted on once
        the calibration's current pass ends).
    """
    files = [measured] if isinstance(measured, (str, os.PathLike)) else list(measured)
    options = dict(options, measured=files, fit=fit)
    if options.pop("output", "json") != "json":
        raise UsageError("calibrate() returns the JSON report: leave out output= (or call run())")
    report = run(["calibrate", "--output", "json", *_argv.to_argv("calibrate", options, "calibrate")], progress=progress)
    assert isinstance(report, dict), "calibrate --output json prints a JSON report"
    return report


def price(
    model: str,
    *,
    device: str,
    decode: Union[str, Sequence[str], None] = None,
    prefill: Union[str, Sequence[str], None] = None,
    tp: Optional[int] = None,
    ep: Optional[int] = None,
    dp: Optional[int] = None,
    **options: Any,
) -> Report:
    """Price one engine step, operator by operator (``throughput-optimizer price MODEL
    --device D … --output json``): no search, no memory check.

    Args:
        model: as for :func:`plan`.
        device: one device profile name.
        decode: ``"BxL"``, B sequences each emitting one token at context L (``"64x3500"``),
            or a list of them (``--decode``).
        prefill: ``"NxP"``, N prompts of P new tokens, or ``"NxP@C"``, a chunk of P new tokens
            after C cached (``"1x2048@6144"``), or a list of them (``--prefill``).
        tp, ep, dp: the layout's tensor-, expert- and attention-data-parallel ranks (1 each
            when left out).
        **options: ``price``'s other flags: ``serving_engine="sglang"``,
            ``quantize_linear_action="FP8"``, ``calibration="none"``,
            ``performance_model="analytic"``, ``clocks="burst"`` (after idle; the default is
            the step repeated back to back, at the clocks a power-limited device holds) …

    Returns:
        What ``price --output json`` prints, as a dict: the step (``step``), its device time,
        host time and step time (``device_ms``, ``host_ms``, ``step_ms``), the clocks it is
        priced at (``clocks``) and every operator with its time and where that time came
        from (``operators``).

    Raises:
        UsageError: a bad flag or value, or neither ``decode`` nor ``prefill``.
        RuntimeError: see :func:`run`.
    """
    options = dict(options, decode=decode, prefill=prefill, tp=tp, ep=ep, dp=dp)
    if options.pop("output", "json") != "json":
        raise UsageError("price() returns the JSON report: leave out output= (or call run())")
    argv = ["price", str(model), "--device", device, "--output", "json", *_argv.to_argv("price", options, "price")]
    report = run(argv, progress=False)
    assert isinstance(report, dict), "price --output json prints a JSON report"
    return report
