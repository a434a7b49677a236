"""What every accountant shares: the queries (``epsilon(delta)``, ``delta(epsilon)``, one
number or an array) and the composition bookkeeping."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from enum import IntEnum
from typing import TypeVar, cast

import numpy as np

from .. import _validate as v
from .._defaults import DEFAULT_RTOL, DELTA_MIN
from ..budget import Budget
from ..mechanisms.base import Bracket, Mechanism
from ..results import DeltaResult, EpsilonResult
from .bracketed import (
    Slacks,
    joined_delta,
    joined_epsilon,
    single_lower_delta,
    single_lower_epsilon,
    smaller_upper,
    tv_slack,
    upper_with_slack,
)
from .limits import LOSS_SCALE_MAX, far_delta, far_epsilon, out_of_reach

__all__ = ["Accountant", "Queries", "Direction"]


class Direction(IntEnum):
    """A direction of the neighbouring relation, remove or add: the index of its privacy loss
    in a mechanism's ``privacy_losses()`` (remove, add)."""

    REMOVE = 0
    ADD = 1


def _values(name: str, value) -> np.ndarray:
    """A query's value(s) as a float array (0-d for one number); ValueError naming ``name``
    when it is not numbers or holds none."""
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real number or an array of them, got "
                         f"{value!r}") from None
    if arr.size == 0:
        raise ValueError(f"{name} must hold at least one value, got an empty array")
    return arr


def _stack(values: list, shape: tuple) -> np.ndarray | None:
    """One field of the single answers as an array of ``shape`` (+ the shape of each
    answer's field, e.g. one value per example); None when no answer has the field (NaN where
    only some lack it)."""
    if all(x is None for x in values):
        return None
    rows = [np.asarray(np.nan if x is None else x, dtype=float) for x in values]
    inner = np.broadcast_shapes(*(r.shape for r in rows))
    return np.stack([np.broadcast_to(r, inner) for r in rows]).reshape(shape + inner)


def _stack_results(results: list[EpsilonResult], shape: tuple) -> EpsilonResult:
    """The answers of single-delta queries as one :class:`EpsilonResult` of arrays of
    ``shape``: ``certified`` only if every answer is, the distinct notes joined, and per
    ``details`` key the list of the answers' values (None where an answer lacks the key)."""
    keys: dict = {}
    for r in results:
        keys.update(dict.fromkeys(r.details))
    notes = list(dict.fromkeys(r.note for r in results if r.note))
    return EpsilonResult(
        cast(np.ndarray, _stack([r.epsilon for r in results], shape)),
        cast(np.ndarray, _stack([r.delta for r in results], shape)),
        _stack([r.lower for r in results], shape), _stack([r.upper for r in results], shape),
        results[0].accountant, certified=all(r.certified for r in results),
        estimate=_stack([r.estimate for r in results], shape), note="; ".join(notes),
        details={k: [r.details.get(k) for r in results] for k in keys})


def _floor_upper(res: DeltaResult, top: float) -> DeltaResult:
    """``res`` with every certified upper bound on delta below :data:`DELTA_MIN` raised to
    it, except at epsilon >= ``top``, the largest finite privacy loss of the composition
    (there delta is exactly the mass at +inf, which the accountants compute exactly, 0 for
    pure DP). A true delta that small is not representable to full precision (an
    exponential below ~1e-308 loses bits, below ~1e-324 it is 0), so a computed upper bound
    there is not certified; ``DELTA_MIN`` is. ``delta`` moves with ``upper`` where it is the
    certified upper bound; an estimate stays as it is.
    """
    if res.upper is None:
        return res
    up = np.asarray(res.upper, dtype=float)
    eps = np.asarray(res.epsilon, dtype=float)
    eps = eps.reshape(eps.shape + (1,) * max(0, up.ndim - eps.ndim))  # per-example axes
    low = (up < DELTA_MIN) & (eps < top)
    if not np.any(low):
        return res
    res.upper = np.where(low, DELTA_MIN, up) if up.ndim else DELTA_MIN
    if res.certified:
        res.delta = res.upper
    note = (f"delta upper bounds below {DELTA_MIN:g} (the smallest delta certified) are "
            f"reported as {DELTA_MIN:g}")
    res.note = f"{res.note}; {note}" if res.note else note
    return res


class Queries:
    """``epsilon(delta)`` and ``delta(epsilon)``, each of one number or an array of them.

    A subclass implements ``_epsilon_of(delta: float) -> EpsilonResult`` for one validated
    delta in (0, 1), and ``_delta_of(epsilon) -> DeltaResult`` for a validated finite epsilon or
    array of them (vectorized, arrays in the result). This class validates the input (a
    ``ValueError`` naming ``delta`` or ``epsilon``) and answers an array of deltas by asking
    ``_epsilon_of`` at each and assembling one :class:`~tightdp.EpsilonResult` of arrays of
    the shape of ``delta`` (times the shape of each answer's field, e.g. one value per
    example): element ``i`` of every field is what ``epsilon(delta[i])`` returns.
    """

    def epsilon(self, delta) -> EpsilonResult:
        """epsilon at ``delta``, a number in (0, 1) or an array of them (the fields of the
        result are then arrays of its shape; ``details`` hold per key the list of the values
        of the single queries)."""
        arr = _values("delta", delta)
        if arr.ndim == 0:
            return self._epsilon_query(v.delta_value("delta", float(arr)))
        flat = [v.delta_value("delta", float(x)) for x in arr.reshape(-1)]
        return _stack_results([self._epsilon_query(x) for x in flat], arr.shape)

    def delta(self, epsilon) -> DeltaResult:
        """delta at ``epsilon``, a finite number or an array of them (the fields of the result
        are then arrays of its shape)."""
        _values("epsilon", epsilon)
        v.eps_values("epsilon", epsilon)
        return _floor_upper(self._delta_query(epsilon), self._largest_finite_loss())

    def _largest_finite_loss(self) -> float:
        """The largest finite privacy loss the answers are about (inf when unbounded or
        unknown): at epsilon at or above it delta is the exact mass at +inf."""
        return math.inf

    def _epsilon_query(self, delta: float) -> EpsilonResult:
        """One validated delta's answer: :meth:`_epsilon_of` (a subclass may answer some
        queries another way first)."""
        return self._epsilon_of(delta)

    def _delta_query(self, epsilon) -> DeltaResult:
        """The validated epsilon's answer: :meth:`_delta_of` (a subclass may answer some
        queries another way first)."""
        return self._delta_of(epsilon)

    def _epsilon_of(self, delta: float) -> EpsilonResult:  # pragma: no cover - abstract
        raise NotImplementedError(f"{type(self).__name__} does not answer epsilon(delta)")

    def _delta_of(self, epsilon) -> DeltaResult:
        raise NotImplementedError(f"{type(self).__name__} answers epsilon(delta) only, not "
                                  "delta(epsilon)")


_A = TypeVar("_A", bound="Accountant")


class Accountant(Queries):
    """Base of every accountant: ``compose(mechanism, count=1)``, ``delta(epsilon)``,
    ``epsilon(delta)`` (each of a number or an array, see :class:`Queries`). Composition only
    records ``(mechanism, count)``; the work happens at query time and is cached per
    accountant.

    Every accountant takes ``max_memory`` (bytes, or a string such as ``"2GB"``) and
    ``max_seconds``: the budget of one query (default 2 GB and 60 s; see
    :mod:`tightdp.budget`). Over it, a query answers with a coarser certified result that
    says so, or raises :class:`~tightdp.budget.BudgetExceeded` (a ``ValueError``).

    Every accountant holds one neighbouring relation, ``neighboring`` (one of
    :data:`tightdp._validate.RELATIONS`: ``"add_or_remove_one"``, the default,
    ``"replace_one"`` or ``"replace_special"``; aliases such as ``"add_remove"`` and
    ``"substitute"`` accepted): its answers are guarantees under that relation, so it refuses
    a mechanism not defined under it (:attr:`Mechanism.relations`), and every answer names it
    in ``details["neighboring"]``."""

    name = "base"

    def __init__(self, *, neighboring="add_or_remove_one", max_memory=None,
                 max_seconds=None) -> None:
        self._terms: dict[Mechanism, int] = {}
        self._cache: dict = {}
        self.neighboring = v.neighboring("neighboring", neighboring)
        self.budget = Budget.make(max_memory, max_seconds)

    def __getstate__(self) -> dict:
        """Pickle/deepcopy state without the query cache (a cache is not state: it is rebuilt
        on the next query, which then returns what a fresh accountant would)."""
        state = self.__dict__.copy()
        state["_cache"] = {}
        return state

    def compose(self: _A, mechanism: Mechanism, count: int = 1) -> _A:
        """Record ``count`` sequential applications of ``mechanism``; returns self."""
        if not isinstance(mechanism, Mechanism):
            raise ValueError(f"mechanism must be a tightdp Mechanism, got {mechanism!r}")
        count = v.count("count", count, minimum=0)
        mechanism = mechanism.under(self.neighboring)
        if mechanism.loss_scale <= LOSS_SCALE_MAX:
            self.accepts(mechanism)
        else:
            # a loss beyond the doubles (vanishing noise) is answered in closed form
            # (:mod:`.limits`): the check only decides whether this accountant takes the
            # mechanism, and the infinities it meets while building the loss are not used
            with np.errstate(all="ignore"):
                self.accepts(mechanism)
        if count:
            self._terms[mechanism] = self._terms.get(mechanism, 0) + count
            self._cache.clear()
        return self

    def accepts(self, mechanism: Mechanism) -> None:
        """Raise ValueError unless this accountant can compose ``mechanism``: defined under
        its relation (:meth:`check_relation`) and handled by its method (:meth:`supports`;
        for a bracketed mechanism, its upper mechanism: the lower side is answered where the
        method can, see :mod:`.bracketed`); the mechanism is taken in its form under this
        relation (:meth:`Mechanism.under`)."""
        mechanism = mechanism.under(self.neighboring)
        self.check_relation(mechanism)
        b = mechanism.bracket(DEFAULT_RTOL)
        if b is None:
            self.supports(mechanism)
        else:
            self.supports(self._upper_of(b)[0])

    def _upper_of(self, b: Bracket) -> tuple[Mechanism, int]:
        """The mechanism of a bracket's upper side this method composes, and how many
        applications of it stand for one of the real mechanism: ``(upper, upper_count)``,
        or ``(upper_fallback, 1)`` where this method cannot take ``upper`` (e.g. a pair
        with mass at +inf in a method built on the CGF) and the bracket has a fallback."""
        if b.upper_fallback is not None:
            try:
                self.supports(b.upper)
            except ValueError:
                return b.upper_fallback, 1
        return b.upper, b.upper_count

    def check_relation(self, mechanism: Mechanism) -> None:
        """Raise ValueError (one line naming the mechanism and this accountant's relation)
        unless ``mechanism`` is defined under :attr:`neighboring`: a composition is a guarantee
        under one relation, never a number mixing pairs of two."""
        rels = tuple(mechanism.relations)
        if self.neighboring in rels:
            return
        raise ValueError(
            f"{type(mechanism).__name__} is defined under neighboring={' or '.join(rels)}, not "
            f"under this {self.name} accountant's neighboring={self.neighboring}: compose it "
            f"in an accountant built with neighboring={rels[0]!r} (a composition holds one "
            "relation)")

    def _bracket_sides(self) -> tuple[Accountant, Accountant, str,
                                      tuple[Slacks, Slacks]] | None:
        """When the composition holds a mechanism known by a bracket
        (:meth:`Mechanism.bracket`): a copy of this accountant (settings, budget, relation;
        a cache of its own) composing every such mechanism's ``upper`` mechanism, one
        composing the ``lower`` ones, the gaps' notes and the (upper, lower) sides' slacks
        with their counts (:mod:`.bracketed`). None otherwise. The mechanisms resolve to a
        quarter of the accountant's ``rtol``; where every bracket converges (no gap) each
        side runs at half of it, so that the joined bracket (lower side's lower bound to
        upper side's upper bound) stays within ``rtol``."""
        if "bracket sides" not in self._cache:
            rtol = float(getattr(self, "rtol", DEFAULT_RTOL)) / 4.0
            found = [(m, k, m.bracket(rtol)) for m, k in self.terms]
            self._cache["bracket found"] = found
            out = None
            if any(b is not None for _, _, b in found):
                ups = {id(b): self._upper_of(b) for _, _, b in found if b is not None}
                tight = all(b is None or not b.gap for _, _, b in found)
                accs = []
                for pick in (lambda b: ups[id(b)], lambda b: (b.lower, 1)):
                    acc = self._composing(found, pick)
                    if tight and hasattr(acc, "rtol"):
                        acc.rtol = 2.0 * rtol
                    accs.append(acc)
                gaps = "; ".join(dict.fromkeys(b.gap for _, _, b in found if b and b.gap))
                slacks = ([(k * b.upper_count, b.upper_slack) for _, k, b in found
                           if b is not None and b.upper_slack is not None
                           and ups[id(b)][0] is b.upper],
                          [(k, b.lower_slack) for _, k, b in found
                           if b is not None and b.lower_slack is not None])
                out = (accs[0], accs[1], gaps, slacks)
            self._cache["bracket sides"] = out
        return self._cache["bracket sides"]

    def _composing(self, found: list, pick: Callable) -> Accountant:
        """A copy of this accountant (its options, no terms, no cache) composing each term
        ``(m, k, b)`` of ``found``: ``m`` itself ``k`` times where ``b`` is None, else the
        mechanism of ``pick(b) = (mechanism, applications per one of m)``."""
        acc = copy.copy(self)
        acc._terms, acc._cache = {}, {}
        for m, k, b in found:
            mm, per = (m, 1) if b is None else pick(b)
            acc._terms[mm] = acc._terms.get(mm, 0) + k * per
        return acc

    def _fallback_side(self) -> Accountant | None:
        """With bracketed mechanisms of which one has an ``upper_fallback``
        (:class:`Bracket`): a copy of the upper side composing every such mechanism's
        fallback (once per application of the mechanism) and every other bracket's
        ``upper`` as :meth:`_bracket_sides` does; its certified upper bound is another upper
        bound of the composition. None otherwise, and where a bracket without a fallback
        has an ``upper_slack`` (this side's answers carry no slack)."""
        if "bracket fallback" not in self._cache:
            sides = self._bracket_sides()
            found = self._cache.get("bracket found", [])
            bs = [b for _, _, b in found if b is not None]
            out = None
            if sides is not None and any(b.upper_fallback is not None for b in bs) \
                    and all(b.upper_fallback is not None or b.upper_slack is None for b in bs):
                out = sides[0]._composing(found, lambda b: (
                    (b.upper_fallback, 1) if b.upper_fallback is not None
                    else (b.upper, b.upper_count)))
            self._cache["bracket fallback"] = out
        return self._cache["bracket fallback"]

    def _epsilon_query(self, delta: float) -> EpsilonResult:
        """:meth:`_epsilon_of`, or where the composition is beyond every accountant's
        numerics (vanishing noise, astronomic counts) the closed-form certified answer of
        :mod:`tightdp.accountants.limits`; with bracketed mechanisms the two sides' answers
        joined (:mod:`.bracketed`)."""
        sides = self._bracket_sides()
        if sides is not None:
            up, lo, gap, (up_slacks, slacks) = sides
            if out_of_reach(up.terms) is not None:   # closed forms (limits): no slack, no lower
                return joined_epsilon(up._epsilon_query(delta), None, gap, self.name)
            fb = self._fallback_side()
            try:
                high, high_slack = upper_with_slack(up._epsilon_query, up_slacks, delta)
            except ValueError:   # delta too close to the computed side's slack
                if fb is None:
                    raise
                high, high_slack, fb = fb._epsilon_query(delta), 0.0, None
            if fb is not None:
                chosen = smaller_upper(high, fb._epsilon_query(delta))
                high, high_slack = (high, high_slack) if chosen is high else (chosen, 0.0)
            low: EpsilonResult | None = None
            slack = 0.0
            # None where this method cannot answer the lower mechanisms; else asked at delta
            # plus its slack at an epsilon above the answer (the slack grows with epsilon):
            # the upper side's where the brackets converge (no gap: one query), else the
            # smaller of it and the lower side's own upper bound at delta
            if lo.supports_all():
                try:
                    first = None
                    if gap or high.upper is None or not math.isfinite(float(high.upper)):
                        first = lo._epsilon_query(delta)
                    caps = [x for x in (high.upper, None if first is None else first.upper)
                            if x is not None]
                    slack = tv_slack(slacks, min(caps, default=math.inf))
                    low = first if first is not None and not slack else (
                        lo._epsilon_query(delta + slack) if delta + slack < 1.0 else None)
                except ValueError:
                    low = None
                cap = None if high.upper is None else float(high.upper)
                low = single_lower_epsilon(low, lo.terms, slacks, delta, cap)
            return joined_epsilon(high, low, gap, self.name, (high_slack, slack))
        why = out_of_reach(self.terms)
        if why is None:
            return self._epsilon_of(delta)
        return far_epsilon(self.terms, delta, self.name, why)

    def _delta_query(self, epsilon) -> DeltaResult:
        """:meth:`_delta_of`, or the closed-form answer as in :meth:`_epsilon_at` (the
        sides' answers joined with bracketed mechanisms)."""
        sides = self._bracket_sides()
        if sides is not None:
            up, lo, gap, (up_slacks, slacks) = sides
            if out_of_reach(up.terms) is not None:   # closed forms (limits): no slack, no lower
                return joined_delta(up._delta_query(epsilon), None, gap, self.name)
            low: DeltaResult | None = None
            slack = 0.0
            if lo.supports_all():
                try:
                    low = lo._delta_query(epsilon)
                    slack = tv_slack(slacks, epsilon)
                except ValueError:
                    low = None
                low = single_lower_delta(low, lo.terms, epsilon)
            fb = self._fallback_side()
            try:
                high = up._delta_query(epsilon)
            except ValueError:   # the computed side refused (a pair its method cannot take)
                if fb is None:
                    raise
                high, fb, up_slacks = fb._delta_query(epsilon), None, []
            return joined_delta(high, low, gap, self.name,
                                (tv_slack(up_slacks, epsilon), slack),
                                None if fb is None else fb._delta_query(epsilon))
        why = out_of_reach(self.terms)
        if why is None:
            return self._delta_of(epsilon)
        return far_delta(self.terms, epsilon, self.name, why)

    def supports(self, mechanism: Mechanism) -> None:
        """Raise ValueError if this accountant cannot handle ``mechanism``."""

    def supports_all(self) -> bool:
        """Whether this accountant's method handles every term of its composition
        (:meth:`supports`): :meth:`compose` checks the terms it is given, the lower side of a
        bracket (:meth:`_bracket_sides`) is answered only where this holds."""
        try:
            for m, _ in self.terms:
                self.supports(m)
        except ValueError:
            return False
        return True

    def _largest_finite_loss(self) -> float:
        """The largest finite privacy loss of the composition, over both directions: the sum
        over terms of count times the top of each loss's support (inf if any is unbounded)."""
        tops = [0.0, 0.0]
        for m, count in self.terms:
            # a loss beyond the doubles (vanishing noise) meets infinities while it is
            # built; only its support's top is read here
            try:
                with np.errstate(all="ignore"):
                    losses = m.privacy_losses()
            except ValueError:          # known only through its RDP (zCDP): no top known
                return math.inf
            for i, loss in enumerate(losses):
                tops[i] += count * loss.support[1]
        return max(tops)

    def epsilon(self, delta) -> EpsilonResult:
        """epsilon at ``delta`` (see :meth:`Queries.epsilon`), ``details["neighboring"]``
        naming the relation it is a guarantee under."""
        return self._with_relation(super().epsilon(delta), np.size(delta) if np.ndim(delta)
                                   else None)

    def delta(self, epsilon) -> DeltaResult:
        """delta at ``epsilon`` (see :meth:`Queries.delta`), ``details["neighboring"]``
        naming the relation it is a guarantee under."""
        return self._with_relation(super().delta(epsilon))

    def _with_relation(self, r, n: int | None = None):
        """``r`` with ``details["neighboring"]``: the relation, or for a query of ``n``
        deltas the list of ``n`` (per key one value per single query, as every stacked
        detail). A new dict: a result's details may be shared (a cached answer)."""
        rel = self.neighboring if n is None else [self.neighboring] * n
        r.details = {**r.details, "neighboring": rel}
        return r

    @property
    def terms(self) -> list[tuple[Mechanism, int]]:
        return list(self._terms.items())

    @property
    def total_count(self) -> int:
        return sum(self._terms.values())

    #: the most composition terms :meth:`__repr__` shows (then how many more)
    REPR_TERMS = 4
    #: the options (attributes) :meth:`__repr__` shows: a subclass names its own
    REPR_OPTIONS: tuple[str, ...] = ()

    def __repr__(self) -> str:
        """One line: the class, its options (:attr:`REPR_OPTIONS`), its relation and its
        composition, each distinct mechanism with its count; past :attr:`REPR_TERMS` terms,
        how many more."""
        parts = [f"{k}={getattr(self, k)!r}" for k in self.REPR_OPTIONS]
        parts.append(f"neighboring={self.neighboring!r}")
        terms = [f"{m!r} x {k}" for m, k in self.terms]
        if len(terms) > self.REPR_TERMS:
            rest = len(terms) - self.REPR_TERMS + 1
            terms[self.REPR_TERMS - 1:] = [f"... {rest} more ({self.total_count} steps in all)"]
        parts.append(f"terms=[{', '.join(terms)}]")
        return f"{type(self).__name__}({', '.join(parts)})"

    @staticmethod
    def _eps_array(eps) -> tuple[np.ndarray, bool]:
        """A ``delta(epsilon)`` query's epsilon validated, as a 1-d float array, and whether a
        scalar was given (the answer then is a scalar too)."""
        eps_arr = v.eps_values("epsilon", eps)
        return np.atleast_1d(eps_arr).astype(float), eps_arr.ndim == 0

    def _directions(self) -> list[Direction]:
        """Indices into ``privacy_losses()`` to compose: remove (0) and add (1), or only 0
        when every mechanism is symmetric (both directions are then the same pair)."""
        if all(m.symmetric for m, _ in self.terms):
            return [Direction.REMOVE]
        return [Direction.REMOVE, Direction.ADD]
