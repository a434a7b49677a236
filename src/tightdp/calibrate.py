"""Calibration: the noise, number of steps or sampling rate that meets a privacy budget.

Every search is a monotone root finding on the *certified upper bound* of an accountant that
certifies (PLD by default; PRV and RDP also certify): the returned setting satisfies the target
by that upper bound, and the result reports the eps it achieves and the bracket there.
eps is decreasing in the noise multiplier and increasing in steps and in the sampling rate
(more composition, less amplification), which is what makes bisection valid.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field

from . import _validate as v
from ._budget import Budget
from .accountants.registry import CERTIFYING, make_accountant
from .mechanisms import Gaussian, PoissonSubsampled

__all__ = ["CalibrationResult", "calibrate_noise", "calibrate_steps", "calibrate_sampling_rate",
           "dpsgd_bracket"]


@dataclass
class CalibrationResult:
    """A calibrated setting and the certified eps it achieves at ``delta``."""

    noise_multiplier: float
    sampling_rate: float
    steps: int
    delta: float
    target_epsilon: float
    epsilon: float  # certified upper bound achieved (<= target_epsilon)
    lower: float | None
    accountant: str
    evaluations: int
    seconds: float
    details: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


def dpsgd_bracket(sampling_rate: float, noise_multiplier: float, steps: int, delta: float,
                  accountant: str = "pld", **options):
    """EpsilonResult of Poisson-subsampled DP-SGD with the named accountant."""
    acc = make_accountant(accountant, **options)
    mech = PoissonSubsampled(Gaussian(noise_multiplier), sampling_rate)
    return acc.compose(mech, steps).epsilon(delta)


def _precision(accountant: str, target: float, rtol: float, budget: dict) -> dict:
    """Accountant options for a relative precision ``rtol`` at eps near ``target``, with the
    resource budget ``budget`` (``max_memory``, ``max_seconds``) of each query."""
    if str(accountant).lower() == "prv":
        return {"eps_error": max(rtol * target, 1e-6), **budget}
    return {"rtol": rtol, **budget}


def _budget(max_memory, max_seconds) -> dict:
    """The budget options of every accountant query of a search, validated once."""
    b = Budget.make(max_memory, max_seconds)
    return {"max_memory": b.max_memory, "max_seconds": b.max_seconds}


def _check(accountant: str, target: float, delta: float) -> tuple[float, float]:
    if str(accountant).lower() not in CERTIFYING:
        raise ValueError(f"accountant must certify an upper bound ({', '.join(CERTIFYING)}), "
                         f"got {accountant!r}")
    return v.positive("target_epsilon", target), v.delta_value("delta", delta)


def calibrate_noise(target_epsilon: float, delta: float, sampling_rate: float, steps: int,
                    *, accountant: str = "pld", rtol: float = 1e-3,
                    sigma_max: float = 1e4, max_memory=None, max_seconds=None
                    ) -> CalibrationResult:
    """Smallest noise multiplier whose certified eps at ``delta`` is <= ``target_epsilon``.

    Bisection on ``log sigma`` until the bracket of sigma is within ``rtol / 4`` relative;
    the upper end (a sigma that provably meets the target) is returned. ``max_memory`` and
    ``max_seconds`` are the budget of each accountant query (see :mod:`tightdp._budget`).
    """
    target, delta = _check(accountant, target_epsilon, delta)
    q = v.probability_open_closed("sampling_rate", sampling_rate)
    steps = v.count("steps", steps, minimum=1)
    rtol = v.positive("rtol", rtol)
    budget = _budget(max_memory, max_seconds)
    t0 = time.perf_counter()
    evals = 0
    cache: dict[float, object] = {}

    def upper(sigma: float):
        nonlocal evals
        if sigma not in cache:
            evals += 1
            cache[sigma] = dpsgd_bracket(q, sigma, steps, delta, accountant,
                                         **_precision(accountant, target, rtol / 4, budget))
        return cache[sigma]

    # initial bracket from the GDP/CLT heuristic, then expand geometrically
    lo, hi = 0.5, 2.0
    while upper(hi).epsilon > target:
        lo, hi = hi, hi * 2
        if hi > sigma_max:
            raise ValueError(f"no noise multiplier up to {sigma_max} meets eps={target} at "
                             f"delta={delta}; increase sigma_max or relax the target")
    while lo > 1e-3 and upper(lo).epsilon <= target:
        hi, lo = lo, lo / 2
    # bisection in log space on the certified upper bound
    while hi / lo - 1 > rtol / 4:
        mid = math.sqrt(lo * hi)
        if upper(mid).epsilon <= target:
            hi = mid
        else:
            lo = mid
    r = upper(hi)
    return CalibrationResult(hi, q, steps, delta, target, r.epsilon, r.lower, accountant, evals,
                             time.perf_counter() - t0, {"sigma_infeasible_below": lo})


def calibrate_steps(target_epsilon: float, delta: float, sampling_rate: float,
                    noise_multiplier: float, *, accountant: str = "pld", rtol: float = 1e-3,
                    max_steps: int = 10**8, max_memory=None, max_seconds=None
                    ) -> CalibrationResult:
    """Largest number of steps whose certified eps at ``delta`` is <= ``target_epsilon``
    (integer bisection; 0 steps always meets any target). ``max_memory`` and ``max_seconds``
    are the budget of each accountant query."""
    target, delta = _check(accountant, target_epsilon, delta)
    q = v.probability_open_closed("sampling_rate", sampling_rate)
    sigma = v.positive("noise_multiplier", noise_multiplier)
    budget = _budget(max_memory, max_seconds)
    t0 = time.perf_counter()
    evals = 0

    def ok(t: int) -> bool:
        nonlocal evals
        evals += 1
        return dpsgd_bracket(q, sigma, t, delta, accountant,
                             **_precision(accountant, target, rtol, budget)).epsilon <= target

    lo, hi = 0, 1
    while ok(hi):
        lo, hi = hi, hi * 2
        if hi > max_steps:
            lo = hi = max_steps
            break
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    r = dpsgd_bracket(q, sigma, max(lo, 1), delta, accountant,
                      **_precision(accountant, target, rtol, budget)) if lo else None
    eps = r.epsilon if r is not None else 0.0
    return CalibrationResult(sigma, q, lo, delta, target, eps, r.lower if r else 0.0,
                             accountant, evals, time.perf_counter() - t0)


def calibrate_sampling_rate(target_epsilon: float, delta: float, noise_multiplier: float,
                            steps: int, *, accountant: str = "pld", rtol: float = 1e-3,
                            max_memory=None, max_seconds=None) -> CalibrationResult:
    """Largest Poisson sampling rate whose certified eps at ``delta`` is <= target
    (bisection on log q, to ``rtol / 4`` relative). ``max_memory`` and ``max_seconds`` are
    the budget of each accountant query."""
    target, delta = _check(accountant, target_epsilon, delta)
    sigma = v.positive("noise_multiplier", noise_multiplier)
    steps = v.count("steps", steps, minimum=1)
    budget = _budget(max_memory, max_seconds)
    t0 = time.perf_counter()
    evals = 0

    def up(q: float) -> float:
        nonlocal evals
        evals += 1
        return dpsgd_bracket(q, sigma, steps, delta, accountant,
                             **_precision(accountant, target, rtol / 4, budget)).epsilon

    if up(1.0) <= target:
        lo = hi = 1.0
    else:
        lo, hi = 1e-9, 1.0
        if up(lo) > target:
            raise ValueError(f"even sampling_rate=1e-9 exceeds eps={target}; add noise")
        while hi / lo - 1 > rtol / 4:
            mid = math.sqrt(lo * hi)
            if up(mid) <= target:
                lo = mid
            else:
                hi = mid
    r = dpsgd_bracket(lo, sigma, steps, delta, accountant,
                      **_precision(accountant, target, rtol / 4, budget))
    return CalibrationResult(sigma, lo, steps, delta, target, r.epsilon, r.lower, accountant,
                             evals + 1, time.perf_counter() - t0)
