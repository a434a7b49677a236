"""Answers for a composition that holds a mechanism known by a bracket of two pairs
(:meth:`tightdp.mechanisms.base.Mechanism.bracket`): random allocation, shuffling, truncated
Poisson sampling.

The accountant's own method runs twice, on two compositions of ordinary mechanisms: every
bracketed mechanism replaced by its ``upper`` mechanism (whose pairs dominate the real ones:
the answer's upper bound and its estimate come from there) and by its ``lower`` one (a
post-processing of the real mechanism on one pair of neighbouring datasets: the answer's
lower bound comes from there). Composition keeps both orders (domination is preserved under
composition, Dong, Roth & Su 2022, Lemma C.3 / Blackwell), so the bracket of the composition
is [lower bound of the lower composition, upper bound of the upper one].

A side computed numerically may be dominating (dominated) only up to a bounded
total-variation distance (``Bracket.upper_slack`` / ``lower_slack``); its delta then moves
by at most :func:`tv_slack`, which the upper bound adds and the lower bound subtracts. An
epsilon query asks the lower side at ``delta`` plus its slack at an upper bound of the
answer (the lower side's own at ``delta``, or the upper side's), and the upper side at
``delta`` less its slack at a larger epsilon than it then answers (the slack grows with
epsilon: both conservative).

Where the lower side is ONE application of one mechanism (a single epoch of shuffling, say),
its delta(epsilon) needs no composition: the mechanism's own certified single-application
value (:meth:`~tightdp.mechanisms.base.Mechanism.single_delta_lower`: the exact hockey-stick
sum of a pair with finitely many atoms, less its rounding) less the slack is a lower bound,
and the largest epsilon where it exceeds delta (bisection, the root kept on the side where
it does) bounds epsilon from below. The answer's lower bound is the larger of that and the
accountant's own (:func:`single_lower_delta`, :func:`single_lower_epsilon`), which the
discretization of the pair can leave below the pair's exact curve.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

import numpy as np

from .._defaults import DELTA_MIN
from ..mechanisms.base import Mechanism
from ..results import DeltaResult, EpsilonResult, check_bracket
from ..roots import bisect, expand_bracket

__all__ = ["joined_epsilon", "joined_delta", "smaller_upper", "tv_slack", "upper_with_slack",
           "single_lower_delta", "single_lower_epsilon"]

#: the bisection of the single-application epsilon stops at this relative width (a few
#: units of roundoff: the bound is then as tight as its arithmetic)
_XTOL = 1e-15

#: the note of an answer whose upper bound is the brackets' fallback upper side
FALLBACK_NOTE = ("the upper bound is the bracketed mechanisms' fallback upper pair (a coarser "
                 "dominating pair, e.g. no amplification), smaller here than the computed "
                 "side's")

#: the bracketed terms with a slack: (applications, the slack per application as a function
#: of epsilon: ``Bracket.upper_slack`` / ``lower_slack``)
Slacks = list[tuple[int, Callable]]


def tv_slack(slacks: Slacks, epsilon):
    """How much a composition's delta(epsilon) may differ from that of the pairs its sides
    stand for: the sum over terms of count times the term's slack per application (each
    a bound whatever the other factors are: replacing the factors one at a time, each
    step moves delta by at most that factor's slack; the larger over both directions per
    term bounds their larger sum). 0 without slacks."""
    if not slacks:
        return 0.0
    # the other factors' masses may exceed 1 by their rounding (64u each, at most)
    margin = math.exp(128.0 * float(np.finfo(float).eps) * sum(k for k, _ in slacks))
    out = sum(k * np.asarray(f(np.asarray(epsilon, dtype=float)), dtype=float)
              for k, f in slacks) * margin
    out = np.asarray(out, dtype=float)
    return float(out) if out.ndim == 0 else out


def upper_with_slack(query: Callable[[float], EpsilonResult], slacks: Slacks,
                     delta: float) -> tuple[EpsilonResult, float]:
    """The upper side's answer at ``delta`` for sides with a slack, and the slack used: a
    slack the same at every epsilon is taken off ``delta`` at once; else the side is
    asked first at ``delta`` (epsilon ``e1``), then at ``delta - s`` with ``s`` the slack at
    ``2 e1 + 1``; its upper bound ``e2`` is certified when ``e2 <= 2 e1 + 1`` (the slack at
    ``e2`` is then at most ``s``), one line naming delta where not. Where ``s`` reaches
    ``delta`` the upper bound is inf (said in the note)."""
    if not slacks:
        return query(delta), 0.0
    flat = float(tv_slack(slacks, 0.0))
    if flat == float(tv_slack(slacks, 700.0)) and delta - flat >= DELTA_MIN:
        # a slack that does not grow with epsilon: one query
        out = copy.copy(query(delta - flat))
        out.delta = delta
        return out, flat
    first = query(delta)
    if first.upper is None or not math.isfinite(float(first.upper)):
        return first, 0.0
    cap = 2.0 * float(first.upper) + 1.0
    s = float(tv_slack(slacks, cap))
    if s == 0.0:
        return first, 0.0
    if not delta - s >= DELTA_MIN:   # no finite epsilon is certified: inf (an upper bound)
        out = copy.copy(first)
        out.epsilon = out.upper = math.inf
        note = (f"delta is below the numerical slack {s:.3g} of the bracketed mechanisms' "
                f"upper side: no finite upper bound")
        out.note = f"{out.note}; {note}" if out.note else note
        return out, s
    second = copy.copy(query(delta - s))
    if second.upper is not None and not float(second.upper) <= cap:
        raise ValueError(f"delta={delta!r} is too close to the numerical slack {s:.3g} of "
                         f"this composition's bracketed mechanisms; ask at a larger delta")
    second.delta = delta
    return second, s


def smaller_upper(main: EpsilonResult, fallback: EpsilonResult) -> EpsilonResult:
    """The answer of the two upper sides (the computed one, ``main``, and the
    ``Bracket.upper_fallback`` one) with the smaller certified upper bound: each is an upper
    bound of the true epsilon, so is their minimum. ``main`` where either is not certified
    or has no upper bound."""
    if not (main.certified and fallback.certified) or main.upper is None \
            or fallback.upper is None or not float(fallback.upper) < float(main.upper):
        return main
    out = copy.copy(fallback)
    out.note = _note(fallback.note, FALLBACK_NOTE)
    out.details = {**fallback.details, "upper_side": "fallback"}
    return out


def _note(*parts: str) -> str:
    return "; ".join(dict.fromkeys(p for p in parts if p))


def _slack_details(slack: tuple) -> dict:
    names = ("upper_slack", "lower_slack")
    return {n: s for n, s in zip(names, slack, strict=True) if not np.all(np.asarray(s) == 0)}


def joined_epsilon(up: EpsilonResult, lo: EpsilonResult | None, gap: str, name: str,
                   slack: tuple = (0.0, 0.0)) -> EpsilonResult:
    """The answer of a composition with bracketed mechanisms from the upper side's answer
    ``up`` and the lower side's ``lo`` (None where the accountant cannot answer the lower
    mechanisms: no lower bound then, as for a method without one), asked at ``up.delta``
    less and plus the (upper, lower) ``slack`` (:func:`upper_with_slack`); see the
    module."""
    lower = None if lo is None else lo.lower
    if lower is not None and up.upper is not None:
        check_bracket(lower, up.upper, f"epsilon at delta={up.delta!r} (bracketed)", name)
    return EpsilonResult(up.epsilon, up.delta, lower, up.upper, up.accountant,
                         certified=up.certified, estimate=up.estimate,
                         note=_note(up.note, "" if lo is None else lo.note, gap),
                         details={**up.details, "bracket_gap": gap or None,
                                  **_slack_details(slack)})


def joined_delta(up: DeltaResult, lo: DeltaResult | None, gap: str, name: str,
                 slack: tuple = (0.0, 0.0), fallback: DeltaResult | None = None
                 ) -> DeltaResult:
    """:func:`joined_epsilon` for delta(epsilon): the upper bound is the upper side's plus
    the upper ``slack`` (at most 1), the lower bound the lower side's less the lower
    ``slack`` (at least 0), each :func:`tv_slack` at the epsilons; with the ``fallback``
    side's answer (``Bracket.upper_fallback``), the smaller of the two certified upper
    bounds at each epsilon."""
    lower = None if lo is None else lo.lower
    s_up, s_lo = slack
    if lower is not None and not np.all(np.asarray(s_lo) == 0):
        lower = _num(np.maximum(np.asarray(lower, dtype=float) - s_lo, 0.0))
    upper, delta = up.upper, up.delta
    if upper is not None and not np.all(np.asarray(s_up) == 0):
        upper = _num(np.minimum(np.asarray(upper, dtype=float) + s_up, 1.0))
        delta = upper if up.certified else delta
    note, estimate = "", up.estimate
    if fallback is not None and upper is not None and fallback.upper is not None \
            and up.certified and fallback.certified:
        better = np.asarray(fallback.upper, dtype=float) < np.asarray(upper, dtype=float)
        if np.any(better):
            upper = delta = _num(np.where(better, fallback.upper, upper))
            if estimate is not None and fallback.estimate is not None:
                estimate = _num(np.where(better, fallback.estimate, estimate))
            note = FALLBACK_NOTE
    if lower is not None and upper is not None:
        check_bracket(lower, upper, f"delta at epsilon={np.asarray(up.epsilon)!r} "
                      "(bracketed)", name)
    return DeltaResult(delta, up.epsilon, lower, upper, up.accountant,
                       certified=up.certified, estimate=estimate,
                       note=_note(up.note, "" if lo is None else lo.note, gap, note),
                       details={**up.details, "bracket_gap": gap or None,
                                **_slack_details(slack)})


def _num(x: np.ndarray):
    return float(x) if x.ndim == 0 else x


def _single(terms: list[tuple[Mechanism, int]]) -> Mechanism | None:
    """The mechanism of a lower side made of one application of one mechanism, else None."""
    return terms[0][0] if len(terms) == 1 and terms[0][1] == 1 else None


def single_lower_delta(low: DeltaResult | None, terms: list[tuple[Mechanism, int]],
                       epsilon) -> DeltaResult | None:
    """The lower side's delta answer ``low`` with its lower bound raised to the single
    application's certified value where the lower side's ``terms`` are one application
    (module docstring; :func:`joined_delta` takes the slack off both alike); ``low``
    itself otherwise, and where it has no lower bound (a method without one keeps none)."""
    mech = _single(terms)
    if low is None or low.lower is None or mech is None:
        return low
    d = mech.single_delta_lower(np.asarray(epsilon, dtype=float))
    if d is None:
        return low
    out = copy.copy(low)
    out.lower = _num(np.maximum(np.asarray(low.lower, dtype=float), d))
    return out


def single_lower_epsilon(low: EpsilonResult | None, terms: list[tuple[Mechanism, int]],
                         slacks: Slacks, delta: float, cap: float | None) -> EpsilonResult | None:
    """The lower side's epsilon answer ``low`` with its lower bound raised to the largest
    epsilon where the single application's certified delta less the slack exceeds
    ``delta`` (bisection below ``cap``, the upper side's certified epsilon, else a bracket
    walked out from 0; the end kept is one where it does); ``low`` itself where the terms
    are not one application, where ``low`` has no lower bound, or where no epsilon >= 0
    has delta above ``delta``."""
    mech = _single(terms)
    if low is None or low.lower is None or mech is None:
        return low

    def above(x: float) -> bool:
        d = mech.single_delta_lower(np.asarray(x, dtype=float))
        return d is not None and float(d) - float(tv_slack(slacks, x)) > delta

    if not above(0.0):
        return low
    if cap is not None and math.isfinite(cap) and cap > 0.0 and not above(cap):
        lo, hi = 0.0, cap
    else:
        lo, hi = expand_bracket(above, 0.0, 1.0, limit=1e300, what="the single epsilon")
    root = bisect(above, lo, hi, keep="lo", xtol=_XTOL, iters=200)
    if not root > float(low.lower):
        return low
    out = copy.copy(low)
    out.lower = root
    return out
