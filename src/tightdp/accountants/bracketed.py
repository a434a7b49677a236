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

A lower mechanism computed numerically may be a post-processing only up to a bounded
total-variation distance (``Bracket.lower_slack``); the lower bound then subtracts its effect
on delta (:func:`lower_slack`), and an epsilon query asks the lower side at ``delta`` plus
that amount evaluated at the upper bound of epsilon (the slack grows with epsilon, so this
over-states it: conservative).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..results import DeltaResult, EpsilonResult, check_bracket

__all__ = ["joined_epsilon", "joined_delta", "lower_slack"]

#: the bracketed terms with a slack: (applications, function returning (eta_P, eta_Q))
Slacks = list[tuple[int, Callable[[], tuple[float, float]]]]


def lower_slack(slacks: Slacks, epsilon):
    """How much the lower composition's delta(epsilon) may exceed that of a dominated one:
    with ``(eta_P, eta_Q)`` per application of each term, the products are within
    ``sum count eta_P`` (under P) and ``sum count eta_Q`` (under Q) in total variation
    (``TV(prod P_i, prod P'_i) <= sum TV(P_i, P'_i)``), and the hockey-stick divergence
    ``sup_A P(A) - e^eps Q(A)`` is 1-Lipschitz in P's and ``e^eps``-Lipschitz in Q's total
    variation; the larger over the two directions (P and Q swap roles). 0 without slacks,
    inf at an infinite ``epsilon`` with one."""
    if not slacks:
        return 0.0
    e_p = math.fsum(k * f()[0] for k, f in slacks)
    e_q = math.fsum(k * f()[1] for k, f in slacks)
    if e_p == 0.0 and e_q == 0.0:
        return 0.0
    with np.errstate(over="ignore"):
        g = np.exp(np.asarray(epsilon, dtype=float))
    out = np.maximum(e_p + g * e_q, e_q + g * e_p) * (1.0 + 4.0 * np.finfo(float).eps)
    return float(out) if out.ndim == 0 else out


def _note(*parts: str) -> str:
    return "; ".join(dict.fromkeys(p for p in parts if p))


def _slack_details(slack) -> dict:
    return {} if np.all(np.asarray(slack) == 0) else {"lower_slack": slack}


def joined_epsilon(up: EpsilonResult, lo: EpsilonResult | None, gap: str, name: str,
                   slack: float = 0.0) -> EpsilonResult:
    """The answer of a composition with bracketed mechanisms from the upper side's answer
    ``up`` and the lower side's ``lo`` (None where the accountant cannot answer the lower
    mechanisms: no lower bound then, as for a method without one), asked at ``up.delta``
    plus ``slack`` (:func:`lower_slack` at the upper bound); see the module."""
    lower = None if lo is None else lo.lower
    if lower is not None and up.upper is not None:
        check_bracket(lower, up.upper, f"epsilon at delta={up.delta!r} (bracketed)", name)
    return EpsilonResult(up.epsilon, up.delta, lower, up.upper, up.accountant,
                         certified=up.certified, estimate=up.estimate,
                         note=_note(up.note, "" if lo is None else lo.note, gap),
                         details={**up.details, "bracket_gap": gap or None,
                                  **_slack_details(slack)})


def joined_delta(up: DeltaResult, lo: DeltaResult | None, gap: str, name: str,
                 slack=0.0) -> DeltaResult:
    """:func:`joined_epsilon` for delta(epsilon): the lower bound is the lower side's less
    ``slack`` (:func:`lower_slack` at the epsilons), and at least 0."""
    lower = None if lo is None else lo.lower
    if lower is not None and not np.all(np.asarray(slack) == 0):
        lower = np.maximum(np.asarray(lower, dtype=float) - slack, 0.0)
        lower = float(lower) if lower.ndim == 0 else lower
    if lower is not None and up.upper is not None:
        check_bracket(lower, up.upper, f"delta at epsilon={np.asarray(up.epsilon)!r} "
                      "(bracketed)", name)
    return DeltaResult(up.delta, up.epsilon, lower, up.upper, up.accountant,
                       certified=up.certified, estimate=up.estimate,
                       note=_note(up.note, "" if lo is None else lo.note, gap),
                       details={**up.details, "bracket_gap": gap or None,
                                **_slack_details(slack)})
