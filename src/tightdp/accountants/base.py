"""What every accountant shares: the result objects and the composition bookkeeping."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from .. import _validate as v
from .._budget import Budget
from ..mechanisms.base import Mechanism

__all__ = ["EpsilonResult", "DeltaResult", "Accountant", "InconsistentBounds", "check_bracket",
           "plain_dict"]


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


class Accountant:
    """Base of every accountant: ``compose(mechanism, count=1)``, ``delta(eps)``,
    ``epsilon(delta)``. Composition only records ``(mechanism, count)``; the work happens at
    query time and is cached per accountant.

    Every accountant takes ``max_memory`` (bytes, or a string such as ``"2GB"``) and
    ``max_seconds``: the budget of one query (default 2 GB and 60 s; see
    :mod:`tightdp._budget`). Over it, a query answers with a coarser certified result that
    says so, or raises :class:`~tightdp._budget.BudgetExceeded` (a ``ValueError``)."""

    name = "base"

    def __init__(self, *, max_memory=None, max_seconds=None) -> None:
        self._terms: dict[Mechanism, int] = {}
        self._cache: dict = {}
        self.budget = Budget.make(max_memory, max_seconds)

    def __getstate__(self) -> dict:
        """Pickle/deepcopy state without the query cache (a cache is not state: it is rebuilt
        on the next query, which then returns what a fresh accountant would)."""
        state = self.__dict__.copy()
        state["_cache"] = {}
        return state

    def compose(self, mechanism: Mechanism, count: int = 1) -> Accountant:
        """Record ``count`` sequential applications of ``mechanism``; returns self."""
        if not isinstance(mechanism, Mechanism):
            raise ValueError(f"mechanism must be a tightdp Mechanism, got {mechanism!r}")
        count = v.count("count", count, minimum=0)
        self.supports(mechanism)
        if count:
            self._terms[mechanism] = self._terms.get(mechanism, 0) + count
            self._cache.clear()
        return self

    def supports(self, mechanism: Mechanism) -> None:
        """Raise ValueError if this accountant cannot handle ``mechanism``."""

    def to_dict(self) -> dict:
        """This accountant (settings and composition) as a versioned JSON document; see
        :mod:`tightdp.state`."""
        from ..state import to_dict

        return to_dict(self)

    @classmethod
    def from_dict(cls, doc: dict) -> Accountant:
        """The accountant of a document of :meth:`to_dict`, every field checked (ValueError
        naming the field otherwise); see :mod:`tightdp.state`."""
        from ..state import from_dict

        acc = from_dict(doc)
        if cls is not Accountant and type(acc) is not cls:
            raise ValueError(f"accountant.name: the document holds a {acc.name!r} accountant, "
                             f"not a {cls.__name__}")
        return acc

    @property
    def terms(self) -> list[tuple[Mechanism, int]]:
        return list(self._terms.items())

    @property
    def total_count(self) -> int:
        return sum(self._terms.values())

    @staticmethod
    def _eps_array(eps) -> tuple[np.ndarray, bool]:
        """A ``delta(eps)`` query's eps validated, as a 1-d float array, and whether a scalar
        was given (the answer then is a scalar too)."""
        eps_arr = v.eps_values("eps", eps)
        return np.atleast_1d(eps_arr).astype(float), eps_arr.ndim == 0

    def _directions(self) -> list[int]:
        """Indices into ``privacy_losses()`` to compose: remove (0) and add (1), or only 0
        when every mechanism is symmetric (both directions are then the same pair)."""
        return [0] if all(m.symmetric for m, _ in self.terms) else [0, 1]
