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
"""

from __future__ import annotations

import numpy as np

from ..results import DeltaResult, EpsilonResult, check_bracket

__all__ = ["joined_epsilon", "joined_delta"]


def _note(*parts: str) -> str:
    return "; ".join(dict.fromkeys(p for p in parts if p))


def joined_epsilon(up: EpsilonResult, lo: EpsilonResult | None, gap: str, name: str
                   ) -> EpsilonResult:
    """The answer of a composition with bracketed mechanisms from the upper side's answer
    ``up`` and the lower side's ``lo`` (None where the accountant cannot answer the lower
    mechanisms: no lower bound then, as for a method without one); see the module."""
    lower = None if lo is None else lo.lower
    if lower is not None and up.upper is not None:
        check_bracket(lower, up.upper, f"epsilon at delta={up.delta!r} (bracketed)", name)
    return EpsilonResult(up.epsilon, up.delta, lower, up.upper, up.accountant,
                         certified=up.certified, estimate=up.estimate,
                         note=_note(up.note, "" if lo is None else lo.note, gap),
                         details={**up.details, "bracket_gap": gap or None})


def joined_delta(up: DeltaResult, lo: DeltaResult | None, gap: str, name: str
                 ) -> DeltaResult:
    """:func:`joined_epsilon` for delta(epsilon)."""
    lower = None if lo is None else lo.lower
    if lower is not None and up.upper is not None:
        check_bracket(lower, up.upper, f"delta at epsilon={np.asarray(up.epsilon)!r} "
                      "(bracketed)", name)
    return DeltaResult(up.delta, up.epsilon, lower, up.upper, up.accountant,
                       certified=up.certified, estimate=up.estimate,
                       note=_note(up.note, "" if lo is None else lo.note, gap),
                       details={**up.details, "bracket_gap": gap or None})
