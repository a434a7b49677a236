"""The resource budget: how much memory and time one query may use.

Every accountant (and the front doors built on them) estimates the size of what it is about
to allocate *before* it allocates it, and compares it with its :class:`Budget` (default 2 GB
and 60 s, settable with ``max_memory=`` / ``max_seconds=`` or ``--max-memory`` /
``--max-seconds``). Over the budget it either answers with a coarser result that is still a
certified bound (and says so in the result's note and ``details["converged"]``), or raises
:class:`BudgetExceeded` -- a ``ValueError`` whose one-line message names the parameter that
drives the cost and what to change. Never a traceback, never the OOM killer.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass

from . import _validate as v

__all__ = ["Budget", "BudgetExceeded", "DEFAULT_MAX_MEMORY", "DEFAULT_MAX_SECONDS",
           "parse_memory"]

#: default memory budget of one query, in bytes (2 GB)
DEFAULT_MAX_MEMORY = 2 * 10**9
#: default time budget of one query, in seconds
DEFAULT_MAX_SECONDS = 60.0


class BudgetExceeded(ValueError):
    """A computation would exceed its memory or time budget. The message is one line that
    names the parameter driving the cost and what to change."""


class TimeExceeded(BudgetExceeded):
    """A :class:`BudgetExceeded` for time: a stage whose estimated time does not fit in
    what is left of ``max_seconds`` (its raiser names the stage; a caller adds the advice
    naming the options that set its size)."""


_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9,
          "gb": 10**9, "t": 10**12, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30,
          "tib": 2**40}


def parse_memory(text: str | float | int) -> int:
    """A memory size in bytes from a number of bytes or a string such as ``"2GB"``,
    ``"500 MB"``, ``"1.5GiB"``. Raises ValueError naming ``max_memory``."""
    if isinstance(text, str):
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z]*)\s*", text)
        if not m or m.group(2).lower() not in _UNITS:
            raise ValueError("max_memory must be a size such as 2GB, 500MB or a number of "
                             f"bytes, got {text!r}")
        value = float(m.group(1)) * _UNITS[m.group(2).lower()]
    else:
        value = v.positive("max_memory", text)
    if not value >= 1e6 or not math.isfinite(value):
        raise ValueError(f"max_memory must be at least 1MB and finite, got {text!r}")
    return int(value)


@dataclass(frozen=True)
class Budget:
    """Memory (bytes) and time (seconds) one query may use."""

    max_memory: int = DEFAULT_MAX_MEMORY
    max_seconds: float = DEFAULT_MAX_SECONDS

    @classmethod
    def make(cls, max_memory=None, max_seconds=None) -> Budget:
        """A validated budget; ``None`` means the default."""
        mem = DEFAULT_MAX_MEMORY if max_memory is None else parse_memory(max_memory)
        sec = DEFAULT_MAX_SECONDS if max_seconds is None else v.positive("max_seconds",
                                                                          max_seconds)
        return cls(mem, sec)

    def max_items(self, bytes_per_item: float) -> int:
        """How many items of ``bytes_per_item`` bytes each fit in the memory budget."""
        return max(int(self.max_memory // max(bytes_per_item, 1.0)), 1)

    def check_memory(self, needed_bytes: float, driver: str, advice: str) -> None:
        """Raise :class:`BudgetExceeded` if ``needed_bytes`` is over the memory budget;
        ``driver`` names the parameter that drives the cost, ``advice`` what to change."""
        if not needed_bytes <= self.max_memory:
            raise BudgetExceeded(
                f"{driver}: this query would need about {_size(needed_bytes)} of memory "
                f"(over max_memory={_size(self.max_memory)}); {advice}")

    def deadline(self) -> Deadline:
        """A clock started now that knows this budget's time limit."""
        return Deadline(time.perf_counter(), self.max_seconds)


@dataclass
class Deadline:
    """The time a query started and how long it may run."""

    start: float
    max_seconds: float

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def seconds_left(self, fraction: float = 1.0) -> float:
        """The seconds left until ``fraction`` of the time budget is used."""
        return fraction * self.max_seconds - self.elapsed

    def fraction_left(self) -> float:
        return 1.0 - self.elapsed / self.max_seconds

    def passed(self, fraction: float = 1.0) -> bool:
        """True once ``fraction`` of the time budget has been used."""
        return self.elapsed > fraction * self.max_seconds

    def check(self, driver: str, advice: str) -> None:
        """Raise :class:`BudgetExceeded` if the time budget is used up."""
        if self.passed():
            raise BudgetExceeded(
                f"{driver}: this query ran past max_seconds={self.max_seconds:g} "
                f"({self.elapsed:.1f} s); {advice}")


def _size(n: float) -> str:
    if not math.isfinite(n):
        return "an unbounded amount"
    for unit, f in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= f:
            return f"{n / f:.3g} {unit}"
    return f"{n:.0f} B"
