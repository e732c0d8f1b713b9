"""The package's exceptions: the binary's error message, and whose fault it is.

The command line's usage errors (exit code 2: a bad flag, value, model, device or input file)
raise :class:`UsageError`; failures while running (exit code 1: a file that cannot be written,
the simulator's work budget spent, a stopped run) raise :class:`RuntimeError`. Both derive from
:class:`Error`, and from the matching built-in (``ValueError``, ``RuntimeError``). What the
binary prints as ``warning: …`` is issued as a :class:`PlanWarning`.
"""

from __future__ import annotations

import builtins
from typing import Optional

__all__ = ["Error", "UsageError", "RuntimeError", "PlanWarning"]


class Error(Exception):
    """A failed command: ``str(e)`` is the message the binary prints after ``error:``.

    Attributes:
        exit_code: the binary's exit code for the same command line (2 or 1).
        field: the flag the error is about (``"--tpot-limits"``, ``"MODEL_ID"``), when it
            names one.
    """

    exit_code: int = 1
    field: Optional[str] = None


class UsageError(Error, ValueError):
    """The command line, a scenario or an input file is wrong (the binary's exit code 2)."""

    exit_code = 2


class RuntimeError(Error, builtins.RuntimeError):  # noqa: A001 - the binary's "runtime failure"
    """Running failed (the binary's exit code 1): writing an output, the simulator's work
    budget, or a run stopped by its progress callback."""

    exit_code = 1


class PlanWarning(UserWarning):
    """A warning the binary prints on stderr (``warning: …``): a flag that has no effect, a
    default that was adjusted, an output that was left out."""


# Shown (and pickled) as the package's own: `throughput_optimizer.UsageError: …`.
for _class in (Error, UsageError, RuntimeError, PlanWarning):
    _class.__module__ = "throughput_optimizer"
del _class
