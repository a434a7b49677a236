"""Progress bars on stderr for long work, and the package's logger.

Long work (per-example accounting, calibration searches, PRV at tiny delta, sweeps) reports its
progress through :func:`progress_bar`: a `tqdm <https://tqdm.github.io>`_ bar on standard error
that appears only once the work has run for :data:`SHOW_AFTER_SECONDS` (so a fast call prints
nothing), only when standard error is a terminal, and never after :func:`set_progress(False)
<set_progress>` (the command line's ``--quiet``) or with the environment variable
``TIGHTDP_PROGRESS=0``. Diagnostics go to the ``logging`` logger ``"tightdp"`` (:data:`logger`);
the library never prints.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

__all__ = ["SHOW_AFTER_SECONDS", "logger", "progress_bar", "progress_enabled", "set_progress"]

#: A bar is drawn only for work still running after this many seconds.
SHOW_AFTER_SECONDS = 2.0

#: The package's logger; the library logs diagnostics here (``logging.getLogger("tightdp")``).
logger = logging.getLogger("tightdp")
logger.addHandler(logging.NullHandler())

_T = TypeVar("_T")
_switch: dict[str, bool | None] = {"enabled": None}


def set_progress(enabled: bool | None) -> None:
    """Turn progress bars on (``True``), off (``False``), or back to automatic (``None``:
    on when standard error is a terminal and ``TIGHTDP_PROGRESS`` is not ``0``)."""
    if enabled is not None and not isinstance(enabled, bool):
        raise ValueError(f"enabled must be True, False or None, got {enabled!r}")
    _switch["enabled"] = enabled


def progress_enabled() -> bool:
    """Whether a bar would be drawn now (see :func:`set_progress`)."""
    if _switch["enabled"] is not None:
        return bool(_switch["enabled"])
    if os.environ.get("TIGHTDP_PROGRESS", "").strip() in ("0", "false", "no", "off"):
        return False
    stream = sys.stderr
    return bool(stream is not None and hasattr(stream, "isatty") and stream.isatty())


class _NoBar:
    """What :func:`progress_bar` returns when bars are off: the same methods, doing nothing."""

    def __init__(self, iterable: Iterable | None) -> None:
        self._it = iterable

    def __iter__(self) -> Iterator:
        return iter(self._it if self._it is not None else ())

    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc) -> None:
        return None

    def update(self, n: float = 1) -> None:
        return None

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        return None

    def close(self) -> None:
        return None


def progress_bar(iterable: Iterable[_T] | None = None, *, total: float | None = None,
                 desc: str = "", unit: str = "it", enabled: bool | None = None):
    """A progress bar over ``iterable`` (or one to ``update`` by hand up to ``total``), drawn on
    standard error after :data:`SHOW_AFTER_SECONDS`; a silent stand-in when bars are off.

    Use it as an iterator (``for x in progress_bar(xs, desc="...")``) or as a context manager
    (``with progress_bar(total=n) as bar: ... bar.update(k)``). ``enabled`` overrides the
    automatic choice of :func:`progress_enabled` for this bar (a caller's ``progress=`` option).
    """
    if not (progress_enabled() if enabled is None else enabled):
        return _NoBar(iterable)
    from tqdm.auto import tqdm  # lazy: importing tqdm costs start-up time of the CLI

    return tqdm(iterable, total=total, desc=desc, unit=unit, file=sys.stderr,
                delay=SHOW_AFTER_SECONDS, leave=False, dynamic_ncols=True)
