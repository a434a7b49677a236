"""What every accountant shares: the result objects and the composition bookkeeping."""

from __future__ import annotations

import numpy as np

from .. import _validate as v
from .._budget import Budget
from ..mechanisms.base import Mechanism

__all__ = ["Accountant"]


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
