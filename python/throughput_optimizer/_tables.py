"""Tables out of a report: one flat record per row, as a pandas DataFrame when pandas is
installed, else as a list of dicts. Nested objects become dotted columns
(``layout.tp``, ``sim.latency.ttft.p99``); lists stay as they are."""

from __future__ import annotations

import csv
import io
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, Union

if TYPE_CHECKING:
    import pandas  # type: ignore[import-untyped, unused-ignore]

Record = Dict[str, Any]
#: A ``pandas.DataFrame`` when pandas is installed, else a list of dicts.
Table = Union["pandas.DataFrame", List[Record]]


def flatten(obj: Mapping[str, Any], prefix: str = "") -> Record:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}``."""
    out: Record = {}
    for key, value in obj.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def table(records: Iterable[Record]) -> Table:
    records = list(records)
    try:
        import pandas  # type: ignore[import-untyped, unused-ignore]
    except ImportError:
        return records
    return pandas.DataFrame.from_records(records)


def _number(text: str) -> Union[int, float, None]:
    if text == "":
        return None
    try:
        return int(text)
    except ValueError:
        return float(text)


def requests_records(text: str) -> List[Record]:
    """The ``--requests-file`` CSV: one record per request, numbers as numbers, a time that
    never came (a request still running when the simulation stopped) as ``None``."""
    return [{k: _number(v) for k, v in row.items()} for row in csv.DictReader(io.StringIO(text))]
