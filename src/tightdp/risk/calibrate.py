"""Calibration to a risk target: the noise multiplier whose certified trade-off curve meets
"TPR <= tpr at FPR fpr" or "advantage <= advantage".

Generic over the setting: the caller gives ``accountant_of(sigma)``, the accountant holding
the composition at noise multiplier ``sigma`` (the DP-SGD front door builds it from
:mod:`tightdp.dpsgd.setting`, so every sampling scheme there is calibrated the same way). The
certified TPR upper bound and advantage upper bound decrease as sigma grows (more noise is a
post-processing: Blackwell order), which makes a bisection on ``log sigma`` valid; the end
returned meets the target by the certified bound (Kulynych et al. 2024, "Attack-aware noise
calibration for differential privacy", Sec. 4, calibrate to the same targets from one-sided
curves).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from scipy.special import ndtri

from ..accountants.base import Accountant
from ..roots import BracketError, bisect_until, grow_bracket
from .tradeoff import TradeoffResult, risk_values, tradeoff

__all__ = ["RiskTarget", "calibrate_noise_to_risk"]


@dataclass(frozen=True)
class RiskTarget:
    """``tpr`` at ``fpr`` (TPR <= tpr at every FPR <= fpr), or ``advantage``."""

    tpr: float | None = None
    fpr: float | None = None
    advantage: float | None = None

    @classmethod
    def make(cls, *, tpr=None, fpr=None, advantage=None) -> RiskTarget:
        """Validated target; one-line ValueError naming the parameter otherwise."""
        if advantage is not None:
            if tpr is not None or fpr is not None:
                raise ValueError("advantage: give advantage alone, or tpr with fpr")
            return cls(advantage=float(risk_values("advantage", advantage, closed=False)))
        if tpr is None or fpr is None:
            raise ValueError("tpr and fpr: give both (TPR <= tpr at FPR fpr), or advantage")
        f = float(risk_values("fpr", fpr, closed=False))
        t = float(risk_values("tpr", tpr, closed=False))
        if t <= f:
            raise ValueError(f"tpr must be above fpr={f!r} (every attack reaches TPR = FPR by "
                             f"guessing), got {tpr!r}")
        return cls(tpr=t, fpr=f)

    def met(self, r: TradeoffResult) -> bool:
        """Whether the certified upper bound of ``r`` meets the target."""
        if self.advantage is not None:
            return r.advantage_upper <= self.advantage
        return float(r.tpr_upper[0]) <= float(self.tpr)  # type: ignore[arg-type]

    def missed_surely(self, r: TradeoffResult) -> bool:
        """Whether the certified lower bound of ``r`` exceeds the target (the true curve
        misses it)."""
        if self.advantage is not None:
            return r.advantage_lower > self.advantage
        return float(r.tpr_lower[0]) > float(self.tpr)  # type: ignore[arg-type]

    def excess(self, r: TradeoffResult) -> float:
        """The certified upper bound of ``r`` minus the target (<= 0: met)."""
        if self.advantage is not None:
            return r.advantage_upper - self.advantage
        return float(r.tpr_upper[0]) - float(self.tpr)  # type: ignore[arg-type]

    def gdp_mu(self) -> float:
        """The mu of the Gaussian-DP curve on the target (a starting guess): ``Phi^-1(1 -
        fpr) - Phi^-1(1 - tpr)``, or ``2 Phi^-1((1 + advantage) / 2)`` (Dong, Roth & Su,
        eq. (2.4) and Cor. 2.13)."""
        if self.advantage is not None:
            return float(2 * ndtri((1 + self.advantage) / 2))
        return float(ndtri(1 - float(self.fpr)) - ndtri(1 - float(self.tpr)))  # type: ignore[arg-type]

    def describe(self) -> str:
        if self.advantage is not None:
            return f"advantage <= {self.advantage:g}"
        return f"TPR <= {self.tpr:g} at FPR {self.fpr:g}"


def calibrate_noise_to_risk(accountant_of: Callable[[float], Accountant], target: RiskTarget,
                            *, start: float = 1.0, rtol: float = 2e-3, tol: float = 2e-4,
                            sigma_max: float = 1e4, queries: dict | None = None
                            ) -> tuple[float, float, TradeoffResult]:
    """``(lo, hi, result)``: ``hi`` a noise multiplier whose certified curve meets ``target``
    (``result`` its curve; it meets it by the curve of the default precision as well), ``lo
    < hi`` one whose certified curve does not, ``hi / lo <= 1 + rtol`` (times ``1 + rtol /
    2`` per step the default-precision check adds). Each curve of the search is computed to
    TPR width ``tol``; ``queries`` (if given) receives every sigma's result.

    The bracket grows geometrically (factor 1.25) from ``start`` (a guess), then shrinks by
    :func:`tightdp.roots.bisect_until` at points placed by the secant of the certified
    value (TPR or advantage upper bound, minus the target) in ``log sigma``, moved 0.45
    ``rtol`` towards the end it is farther from, inside the bracket (so that the bracket's
    ends keep their sides: the search is a bisection with better split points)."""
    seen: dict = {} if queries is None else queries
    fpr = target.fpr if target.fpr is not None else 0.5

    def curve(sigma: float) -> TradeoffResult:
        if sigma not in seen:
            seen[sigma] = tradeoff(accountant_of(sigma), fpr=fpr, tol=tol)
        return seen[sigma]

    def fails(sigma: float) -> bool:
        return not target.met(curve(sigma))

    try:
        lo, hi = grow_bracket(fails, start, 1.25, limit=sigma_max, what="the noise multiplier")
    except BracketError:
        raise ValueError(f"no noise multiplier up to {sigma_max:g} meets {target.describe()}; "
                         "relax the target") from None
    if lo is None:
        met, lo = grow_bracket(lambda s: not fails(s), start / 1.25, 1 / 1.25, limit=1e-3,
                               on_limit="return")
        hi = hi if met is None else met
    step = math.log1p(rtol)

    def split(a: float, b: float) -> float:
        ga, gb = target.excess(curve(a)), target.excess(curve(b))
        la, lb = math.log(a), math.log(b)
        x = la + (lb - la) * ga / (ga - gb) if ga > gb else 0.5 * (la + lb)
        x += 0.45 * step if lb - x < x - la else -0.45 * step
        margin = min(0.45 * step, 0.25 * (lb - la))
        return math.exp(min(max(x, la + margin), lb - margin))

    lo, hi = bisect_until(fails, lo, hi, lambda a, b: b / a - 1 <= rtol, mid=split, iters=200)
    # the answer meets the target by the curve of the default precision too (the one a
    # re-check with tradeoff() computes): raised by rtol / 2 steps while it does not
    for _ in range(8):
        if target.met(tradeoff(accountant_of(hi), fpr=fpr)):
            break
        hi *= 1 + 0.5 * rtol
    else:
        raise ValueError(f"noise_multiplier: no value near {hi:.6g} meets "
                         f"{target.describe()} by the default curve; relax the target")
    return lo, hi, curve(hi)
