"""Keyword arguments to a command line: ``serving_engine="vllm"`` is ``--serving-engine vllm``.

Each option is a long flag of the binary with ``_`` for ``-``. How it is written follows the
flag (the binary's own argument table, read from the extension module): a switch is given for
``True`` and left out for ``False``; a one-value flag takes ``str(value)``; a multi-value flag
takes a list (or one value); a flag the binary repeats per value (``--calibration``,
``--device-file``) is repeated for each item of a list. ``None`` leaves an option out.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional

from . import _native
from ._errors import UsageError

_FLAGS: Dict[str, Optional[Dict[str, str]]] = {}


def flags(command: str) -> Optional[Dict[str, str]]:
    """The long flags of ``command`` (``plan``, ``calibrate``, ``merge``, ``price``) → how each takes
    values; ``None`` for a command the extension module has no table of."""
    if command not in _FLAGS:
        try:
            _FLAGS[command] = dict(_native.flags(command))
        except UsageError:
            _FLAGS[command] = None
    return _FLAGS[command]


def _guess(value: Any) -> str:
    """How a flag takes ``value`` when its command's table is unknown."""
    if isinstance(value, bool):
        return "switch"
    return "values" if isinstance(value, (list, tuple)) else "value"


def _text(value: Any) -> str:
    if isinstance(value, bool):
        raise TypeError("a switch")
    if isinstance(value, os.PathLike):
        return str(os.fspath(value))
    return str(value)


def _items(value: Any) -> List[Any]:
    if isinstance(value, (list, tuple, set, frozenset)):
        return list(value)
    return [value]


def to_argv(command: str, options: Mapping[str, Any], caller: str) -> List[str]:
    """``options`` as flags of ``command``; an option that is no flag of it is a usage error
    (without a table, each value's type decides and the command checks the flags)."""
    table = flags(command)
    argv: List[str] = []
    for name, value in options.items():
        if value is None:
            continue
        flag = name.replace("_", "-")
        kind = table.get(flag) if table is not None else _guess(value)
        if kind is None:
            raise UsageError(f"{caller}() got an unexpected option {name!r}: the command has no --{flag} flag")
        try:
            if kind == "switch" or value is True:
                if not isinstance(value, bool):
                    raise TypeError("a switch")
                if value:
                    argv.append(f"--{flag}")
            elif kind == "append":
                for item in _items(value):
                    argv.append(f"--{flag}={_text(item)}")
            elif kind == "values":
                argv.append(f"--{flag}")
                argv.extend(_text(item) for item in _items(value))
            elif isinstance(value, (list, tuple)):
                raise TypeError("one value")
            else:
                argv.append(f"--{flag}={_text(value)}")
        except TypeError as e:
            raise UsageError(f"{caller}() option {name!r} (--{flag}) takes {e}, not {value!r}") from None
    return argv
