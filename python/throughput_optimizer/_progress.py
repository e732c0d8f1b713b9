"""What a long run shows while it searches: the caller's callback, a tqdm bar, or nothing."""

from __future__ import annotations

from typing import Any, Callable, Optional, Union

#: ``progress(done, total)`` after each searched candidate; returning ``False`` stops the run.
ProgressCallback = Callable[[int, int], Optional[bool]]
Progress = Union[None, bool, ProgressCallback]


class TqdmBar:
    """A tqdm bar of the candidates searched that shows only once the search has run for a
    second, as the binary's bar does on a terminal."""

    def __init__(self, tqdm: Any) -> None:
        self._tqdm = tqdm
        self._bar: Any = None

    def __call__(self, done: int, total: int) -> None:
        if self._bar is None:
            self._bar = self._tqdm(total=total, delay=1.0, desc="searching", unit="candidate", leave=False)
        self._bar.total = total
        self._bar.update(done - self._bar.n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def resolve(progress: Progress) -> Optional[ProgressCallback]:
    """The callback for ``progress``: a callable as given; ``None`` (the default) a tqdm bar
    when tqdm is installed, else none; ``True`` a tqdm bar (tqdm required); ``False`` none."""
    if callable(progress):
        return progress
    if progress is False:
        return None
    try:
        from tqdm.auto import tqdm  # type: ignore[import-untyped, unused-ignore]
    except ImportError:
        if progress is True:
            raise
        return None
    return TqdmBar(tqdm)
