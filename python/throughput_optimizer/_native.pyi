"""The extension module: the binary's command line run in-process (see ``python/src/lib.rs``)."""

from typing import Callable, Dict, List, Optional, Sequence, Tuple

__version__: str

def execute(
    argv: Sequence[str],
    progress: Optional[Callable[[int, int], Optional[bool]]] = None,
    stderr: Optional[Callable[[str], object]] = None,
    capture: Sequence[str] = ...,
) -> Tuple[str, List[Tuple[str, str, str, bool]]]:
    """Run ``argv`` (without the program name) as the binary would: its stdout text (the help
    text for ``--help``) and each file output as ``(flag, path, contents, written)``; the
    files of the flags in ``capture`` are kept, not written. ``progress(done, total)`` after
    each searched candidate (``False`` stops the run), ``stderr(text)`` with each notice.

    Raises ``UsageError`` / ``RuntimeError`` (``throughput_optimizer._errors``) with the
    binary's message, or ``KeyboardInterrupt`` once Ctrl-C has stopped the run."""

def flags(command: str) -> Dict[str, str]:
    """The long flags of ``plan``, ``calibrate``, ``merge`` or ``price`` → ``switch``, ``value``,
    ``values`` or ``append`` (how each takes values)."""
