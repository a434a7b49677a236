"""Calibration of a whole composition's noise: the smallest common factor of every noise scale
that meets a target ``(epsilon, delta)`` by a certified upper bound.

The composition is any accountant's (``tightdp calibrate --spec FILE``); each mechanism scales
itself (``Mechanism.scaled``). The search builds fresh accountants of the same kind and
options through a function the caller gives (:func:`tightdp.state.calibrate_scale` gives the
one of state files), so that this layer does not depend on the file format.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

from .. import _validate as v
from .._defaults import DEFAULT_RTOL
from .._numerics import BracketError, bisect_log, bracket_of_points, grow_bracket
from ..accountants.base import Accountant
from ..accountants.registry import CERTIFYING
from ..budget import BudgetExceeded
from ..mechanisms.base import Mechanism
from ..results import EpsilonResult, Result
from .calibrate import OutOfTime, SearchClock

__all__ = ["ScaleCalibration", "check_scale_query", "scaled_mechanism", "search_scale"]


@dataclass
class ScaleCalibration(Result):
    """The smallest common factor of the noise scales of a composition that meets
    ``(target_epsilon, delta)`` by a certified upper bound (see
    :func:`tightdp.state.calibrate_scale`)."""

    scale: float
    delta: float
    target_epsilon: float
    epsilon: float  # certified upper bound at the returned scale (<= target_epsilon)
    lower: float | None
    accountant: str
    evaluations: int
    seconds: float
    details: dict = field(default_factory=dict)
    #: the calibrated accountant's document (:func:`tightdp.state.from_dict` rebuilds it)
    state: dict = field(default_factory=dict)


def scaled_mechanism(mechanism: Mechanism, factor: float) -> Mechanism:
    """``mechanism`` with every noise scale multiplied by ``factor`` (``Mechanism.scaled``);
    a mechanism without one (discrete Laplace, whose noise is an integer law, randomized
    response, pure and approximate DP) is returned unchanged."""
    out = mechanism.scaled(factor)
    return mechanism if out is None else out


def check_scale_query(acc: Accountant, *, epsilon: float, delta: float, rtol: float
                      ) -> tuple[float, float, float]:
    """``(epsilon, delta, rtol)`` of a scale calibration of ``acc``, validated: the
    accountant must certify an upper bound and the composition hold a noise scale."""
    if acc.name not in CERTIFYING:
        raise ValueError(f"accountant must certify an upper bound ({', '.join(CERTIFYING)}) "
                         f"to calibrate, got {acc.name!r}")
    target = v.positive("epsilon", epsilon)
    delta = v.delta_value("delta", delta)
    rtol = v.positive("rtol", rtol)
    if all(m.scaled(1.0) is None for m, _ in acc.terms):
        raise ValueError("the composition has no mechanism with a noise scale (Gaussian, "
                         "Laplace, MixtureOfGaussians, or one of these subsampled) to "
                         "calibrate")
    return target, delta, rtol


def _scale_search(meets: Callable[[float], bool], rtol: float, scale_max: float,
                  target: float, delta: float) -> tuple[float | None, float]:
    """The search of :func:`search_scale` on the predicate ``meets`` (cached by the caller):
    ``(lo, hi)``, ``hi`` the smallest factor found to meet the target, ``lo`` below it not
    meeting it (None when every factor tried down to about 1e-3 met it)."""
    met, miss = grow_bracket(meets, 1.0, 0.5, limit=5e-4, on_limit="return")
    if met is not None:  # 1 meets: halve while the target is met, down to about 1e-3
        lo, hi = (miss if miss >= 5e-4 else None), met
    else:  # double while it is missed, up to scale_max
        try:
            lo, hi = grow_bracket(lambda s: not meets(s), 1.0, 2.0, limit=scale_max,
                                  what="the noise scale factor")
        except BracketError:
            raise ValueError(
                f"no common noise scale factor up to {scale_max:g} meets eps={target:g} at "
                f"delta={delta:g} (mechanisms without noise, or too many steps); relax the "
                "target") from None
    if lo is not None:  # bisection in log space (hi meets the target throughout)
        lo, hi = bisect_log(lambda s: not meets(s), lo, hi, rtol=rtol / 4)
    return lo, hi


def search_scale(acc: Accountant, *, epsilon: float, delta: float,
                 fresh: Callable[[dict], Accountant],
                 document: Callable[[Accountant], dict], rtol: float = DEFAULT_RTOL,
                 scale_max: float = 1e4, max_seconds: float | None = None
                 ) -> ScaleCalibration:
    """The smallest factor ``s`` such that the composition of ``acc`` with every noise scale
    multiplied by ``s`` (:func:`scaled_mechanism`) has certified ``eps(delta) <= epsilon``.

    ``fresh(budget)`` is an empty accountant of ``acc``'s kind and options under the budget
    options ``budget`` (``max_memory``, ``max_seconds``); ``document(acc)`` the ``state`` of
    the result. Bisection on ``log s`` until the bracket is within ``rtol / 4`` relative; the
    upper end, a factor whose certified upper bound meets the target, is returned. Only a
    factor whose bound was computed and meets the target is ever returned (so the answer is
    certified whatever the shape of eps in ``s``); a query the accountant refuses counts as
    not meeting it. That the factor is also the smallest (to ``rtol``) rests on eps decreasing
    in ``s``: the pair of a location mechanism with more noise has a larger trade-off function
    (for the Gaussian it is a post-processing -- rescale and add independent noise; for the
    Laplace mechanism its hockey-stick divergence decreases in ``scale / sensitivity``), hence
    is a post-processing of the pair with less noise by Blackwell's theorem (Blackwell 1953,
    "Equivalent comparisons of experiments"; Dong, Roth, Su 2022, "Gaussian differential
    privacy", Sec. 2), and the same kernel carries every subsampling mixture along.
    ``max_seconds`` (default: the accountant's) bounds the whole search.
    """
    target, delta, rtol = check_scale_query(acc, epsilon=epsilon, delta=delta, rtol=rtol)
    clock = SearchClock(acc.budget.max_memory,
                        acc.budget.max_seconds if max_seconds is None else max_seconds)
    t0 = time.perf_counter()
    cache: dict[float, tuple[EpsilonResult | None, Accountant | None]] = {}

    def build(s: float) -> Accountant:
        out = fresh(clock.options())
        for m, k in acc.terms:
            out.compose(scaled_mechanism(m, s), k)
        return out

    def meets(s: float) -> bool:
        if s not in cache:
            scaled = build(s)
            try:
                cache[s] = (scaled.epsilon(delta), scaled)
            except ValueError:  # refused (budget, range): not known to meet the target
                cache[s] = (None, None)
        r = cache[s][0]
        return r is not None and cast(float, r.epsilon) <= target  # a scalar delta

    details: dict = {}
    lo: float | None
    hi: float | None
    try:
        lo, hi = _scale_search(meets, rtol, scale_max, target, delta)
    except OutOfTime:
        lo, hi = bracket_of_points({s: not meets(s) for s in cache}, keep="hi")
        if hi is None:
            raise BudgetExceeded(
                f"max_seconds: the search found no noise scale factor meeting eps={target:g} "
                f"at delta={delta:g} within max_seconds={clock.deadline.max_seconds:g}; raise "
                "max_seconds") from None
        details = clock.note(lo if lo is not None else 0.0, hi)
    # hi met the target: its bound was computed (not refused)
    r, scaled = cast("tuple[EpsilonResult, Accountant]", cache[hi])
    details.setdefault("scale_infeasible_below", lo)
    return ScaleCalibration(hi, delta, target, float(r.epsilon), cast("float | None", r.lower),
                            acc.name, len(cache), time.perf_counter() - t0, details,
                            document(scaled))
