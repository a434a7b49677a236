"""The answers every accountant and front door returns, and one way to turn them into dicts."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

__all__ = ["EpsilonResult", "DeltaResult", "InconsistentBounds", "check_bracket", "plain_dict"]


class InconsistentBounds(RuntimeError):
    """A lower bound came out above an upper bound: a bug in this library, never hidden."""


def check_bracket(lower, upper, what: str, accountant: str) -> None:
    """Raise :class:`InconsistentBounds` if ``lower > upper`` anywhere beyond floating-point
    rounding (relative 1e-9). Both are certified bounds of one true value, so this can only
    come from a bug; clipping one to the other would hide it (and possibly an under-report).
    """
    lo = np.asarray(lower, dtype=float)
    up = np.asarray(upper, dtype=float)
    bad = lo > up * (1 + 1e-9) + 1e-300
    if np.any(bad):
        i = int(np.argmax(bad.reshape(-1)))
        raise InconsistentBounds(
            f"{accountant}: internal inconsistency, lower bound {lo.reshape(-1)[i]!r} above "
            f"upper bound {up.reshape(-1)[i]!r} for {what}; this is a bug in tightdp, please "
            "report it with the inputs")


def plain_dict(result) -> dict:
    """A result dataclass as a dict for JSON: its fields, NaN as None."""
    return {k: (None if isinstance(x, float) and math.isnan(x) else x)
            for k, x in asdict(result).items()}


@dataclass
class EpsilonResult:
    """eps at a given delta.

    ``epsilon`` is the number to report: the certified upper bound where the method
    certifies one (``certified=True``), otherwise the method's estimate, in which case
    ``certified`` is False and ``note`` says what kind of approximation it is.
    ``lower``/``upper`` are certified bounds of the true value, or None where the method has
    none.
    """

    epsilon: float
    delta: float
    lower: float | None
    upper: float | None
    accountant: str
    certified: bool
    estimate: float | None = None
    note: str = ""
    details: dict = field(default_factory=dict)

    def __float__(self) -> float:
        return float(self.epsilon)

    def as_dict(self) -> dict:
        return plain_dict(self)


@dataclass
class DeltaResult:
    """delta at one or many eps (arrays when eps was an array); fields as in EpsilonResult."""

    delta: float | np.ndarray
    epsilon: float | np.ndarray
    lower: float | np.ndarray | None
    upper: float | np.ndarray | None
    accountant: str
    certified: bool
    estimate: float | np.ndarray | None = None
    note: str = ""
    details: dict = field(default_factory=dict)

    def __float__(self) -> float:
        return float(np.asarray(self.delta).reshape(-1)[0])

    def as_dict(self) -> dict:
        def conv(x):
            if isinstance(x, np.ndarray):
                return x.tolist()
            if isinstance(x, np.floating):
                return float(x)
            return x
        return {k: conv(x) for k, x in asdict(self).items()}
