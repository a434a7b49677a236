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
from dataclasses import dataclass, field

from .. import _validate as v
from .._budget import Budget, BudgetExceeded
from .._defaults import DEFAULT_RTOL
from ..accountants.registry import CERTIFYING
from ..progress import progress_bar
from ..results import Result
from .epsilon import composed
from .setting import DPSGDSetting, dpsgd_setting

__all__ = ["CalibrationResult", "calibrate_noise", "calibrate_steps", "calibrate_sampling_rate",
           "precision_options", "SearchClock", "OutOfTime"]


@dataclass
class CalibrationResult(Result):
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


def _bracket(setting: DPSGDSetting, delta: float, accountant: str, options: dict):
    """EpsilonResult of ``setting`` with the named accountant and its options."""
    return composed(setting, accountant=accountant, **options).epsilon(delta)


def precision_options(accountant: str, target: float, rtol: float, budget: dict) -> dict:
    """Accountant options for a relative precision ``rtol`` at eps near ``target``, with the
    resource budget ``budget`` (``max_memory``, ``max_seconds``) of each query."""
    if str(accountant).lower() == "prv":
        return {"eps_error": max(rtol * target, 1e-6), **budget}
    return {"rtol": rtol, **budget}


class OutOfTime(Exception):
    """Raised by :meth:`SearchClock.options` when a search's time budget is used up."""


class SearchClock:
    """The budget of a whole search: memory per query, and one time budget shared by all
    queries (each query gets what is left, so the search as a whole ends in time)."""

    def __init__(self, max_memory, max_seconds, desc: str = "calibration"):
        b = Budget.make(max_memory, max_seconds)
        self.max_memory = b.max_memory
        self.deadline = b.deadline()
        # one tick per accountant query; drawn only for a search still running after 2 s on a
        # terminal (tightdp.progress), closed when the search's clock is dropped
        self.bar = progress_bar(total=None, desc=desc, unit="query")

    def options(self) -> dict:
        left = self.deadline.max_seconds - self.deadline.elapsed
        if left <= 0.02 * self.deadline.max_seconds:
            raise OutOfTime
        self.bar.update(1)
        return {"max_memory": self.max_memory, "max_seconds": left}

    def note(self, lo, hi) -> dict:
        return {"converged": False,
                "note": f"max_seconds={self.deadline.max_seconds:g} ended the search with the "
                        f"answer in [{lo:.6g}, {hi:.6g}]; the setting returned meets the target "
                        "(certified); raise max_seconds for a tighter one"}


def _check(accountant: str, target: float, delta: float) -> tuple[float, float]:
    if str(accountant).lower() not in CERTIFYING:
        raise ValueError(f"accountant must certify an upper bound ({', '.join(CERTIFYING)}), "
                         f"got {accountant!r}")
    return v.positive("epsilon", target), v.delta_value("delta", delta)


def calibrate_noise(*, epsilon: float, delta: float, sampling_rate: float | None = None,
                    steps: int | None = None, epochs: float | None = None,
                    batch_size: int | None = None, dataset_size: int | None = None,
                    sampling: str = "poisson", accountant: str = "pld",
                    rtol: float = DEFAULT_RTOL, sigma_max: float = 1e4, max_memory=None,
                    max_seconds=None) -> CalibrationResult:
    """Smallest noise multiplier whose certified eps at ``delta`` is <= ``epsilon`` (the
    target), for the DP-SGD setting of :func:`tightdp.dpsgd.setting.dpsgd_setting` (any
    sampling; ``steps`` or ``epochs``, at least one round).

    Bisection on ``log sigma`` until the bracket of sigma is within ``rtol / 4`` relative;
    the upper end (a sigma that provably meets the target) is returned. ``max_memory`` is the
    budget of each accountant query, ``max_seconds`` that of the whole search (see
    :mod:`tightdp._budget`; past it, the smallest sigma found to meet the target is returned
    with ``details["converged"] = False`` and a note).
    """
    target, delta = _check(accountant, epsilon, delta)
    base = dpsgd_setting(noise_multiplier=1.0, steps=steps, epochs=epochs,
                         sampling_rate=sampling_rate, batch_size=batch_size,
                         dataset_size=dataset_size, sampling=sampling)
    if base.steps < 1:
        raise ValueError(f"steps must be an integer >= 1, got {base.steps!r}")
    q, steps = base.sampling.sampling_rate, base.steps
    rtol = v.positive("rtol", rtol)
    clock = SearchClock(max_memory, max_seconds)
    t0 = time.perf_counter()
    evals = 0
    cache: dict[float, object] = {}

    def upper(sigma: float):
        nonlocal evals
        if sigma not in cache:
            evals += 1
            cache[sigma] = _bracket(base.with_noise(sigma), delta, accountant,
                                    precision_options(accountant, target, rtol / 4,
                                                      clock.options()))
        return cache[sigma]

    try:
        return _noise_search(upper, target, delta, q, steps, accountant, rtol, sigma_max,
                             t0, lambda: evals)
    except OutOfTime:
        ok = [x for x, r in cache.items() if r.epsilon <= target]
        if not ok:
            raise BudgetExceeded(
                f"max_seconds: the search found no noise multiplier meeting eps={target} at "
                f"delta={delta} within max_seconds={clock.deadline.max_seconds:g}; raise "
                "max_seconds or rtol") from None
        hi = min(ok)
        bad = [x for x, r in cache.items() if r.epsilon > target and x < hi]
        r = cache[hi]
        return CalibrationResult(hi, q, steps, delta, target, r.epsilon, r.lower, accountant,
                                 evals, time.perf_counter() - t0,
                                 {"sigma_infeasible_below": max(bad, default=0.0),
                                  **clock.note(max(bad, default=0.0), hi)})


def _noise_search(upper, target, delta, q, steps, accountant, rtol, sigma_max, t0, evals
                  ) -> CalibrationResult:
    """The bisection of :func:`calibrate_noise` on the certified upper bound ``upper``."""

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
    return CalibrationResult(hi, q, steps, delta, target, r.epsilon, r.lower, accountant,
                             evals(), time.perf_counter() - t0, {"sigma_infeasible_below": lo})


def calibrate_steps(*, epsilon: float, delta: float, noise_multiplier: float,
                    sampling_rate: float | None = None, batch_size: int | None = None,
                    dataset_size: int | None = None, sampling: str = "poisson",
                    accountant: str = "pld", rtol: float = DEFAULT_RTOL,
                    max_steps: int = 10**8, max_memory=None, max_seconds=None
                    ) -> CalibrationResult:
    """Largest number of steps whose certified eps at ``delta`` is <= ``epsilon`` (the
    target), for the DP-SGD setting of :func:`tightdp.dpsgd.setting.dpsgd_setting` (any
    sampling; integer bisection; 0 steps always meets any target). ``max_memory`` is the
    budget of each accountant query, ``max_seconds`` that of the whole search (past it, the
    largest count found to meet the target is returned, with ``details["converged"] =
    False``)."""
    target, delta = _check(accountant, epsilon, delta)
    base = dpsgd_setting(noise_multiplier=noise_multiplier, steps=0,
                         sampling_rate=sampling_rate, batch_size=batch_size,
                         dataset_size=dataset_size, sampling=sampling)
    q, sigma = base.sampling.sampling_rate, base.noise_multiplier
    rtol = v.positive("rtol", rtol)
    clock = SearchClock(max_memory, max_seconds)
    t0 = time.perf_counter()
    cache: dict[int, object] = {}

    def ok(t: int) -> bool:
        if t not in cache:
            cache[t] = _bracket(base.with_steps(t), delta, accountant,
                                precision_options(accountant, target, rtol, clock.options()))
        return cache[t].epsilon <= target

    details: dict = {}
    lo, hi = 0, 1
    try:
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
    except OutOfTime:
        details = clock.note(lo, hi)
    r = cache.get(lo)
    eps = r.epsilon if r is not None else 0.0
    return CalibrationResult(sigma, q, lo, delta, target, eps, r.lower if r else 0.0,
                             accountant, len(cache), time.perf_counter() - t0, details)


def calibrate_sampling_rate(*, epsilon: float, delta: float, noise_multiplier: float,
                            steps: int, sampling: str = "poisson", accountant: str = "pld",
                            rtol: float = DEFAULT_RTOL, max_memory=None, max_seconds=None
                            ) -> CalibrationResult:
    """Largest sampling rate whose certified eps at ``delta`` is <= ``epsilon`` (the
    target), for ``sampling`` "poisson" or "without_replacement" (the samplings with a free
    rate; bisection on log q, to ``rtol / 4`` relative). ``max_memory`` is the budget of each
    accountant query, ``max_seconds`` that of the whole search (past it, the largest rate
    found to meet the target is returned, with ``details["converged"] = False``)."""
    target, delta = _check(accountant, epsilon, delta)
    if str(sampling).strip().lower().replace("-", "_") not in ("poisson",
                                                               "without_replacement"):
        raise ValueError(f"sampling must be poisson or without_replacement (a free rate) to "
                         f"calibrate the sampling rate, got {sampling!r}")
    if steps is None:
        raise ValueError("steps is required to calibrate the sampling rate (an integer >= 1)")
    steps = v.count("steps", steps, minimum=1)
    base = dpsgd_setting(noise_multiplier=noise_multiplier, steps=steps, sampling_rate=1.0,
                         sampling=sampling)
    sigma, steps = base.noise_multiplier, base.steps
    rtol = v.positive("rtol", rtol)
    clock = SearchClock(max_memory, max_seconds)
    t0 = time.perf_counter()
    cache: dict[float, object] = {}

    def up(q: float) -> float:
        if q not in cache:
            cache[q] = _bracket(base.with_rate(q), delta, accountant,
                                precision_options(accountant, target, rtol / 4,
                                                  clock.options()))
        return cache[q].epsilon

    details: dict = {}
    lo = hi = 1.0
    try:
        if up(1.0) > target:
            lo = 1e-9
            if up(lo) > target:
                raise ValueError(f"even sampling_rate=1e-9 exceeds eps={target}; add noise")
            while hi / lo - 1 > rtol / 4:
                mid = math.sqrt(lo * hi)
                if up(mid) <= target:
                    lo = mid
                else:
                    hi = mid
    except OutOfTime:
        if lo not in cache or cache[lo].epsilon > target:
            raise BudgetExceeded(
                f"max_seconds: the search found no sampling rate meeting eps={target} at "
                f"delta={delta} within max_seconds={clock.deadline.max_seconds:g}; raise "
                "max_seconds or rtol") from None
        details = clock.note(lo, hi)
    r = cache[lo]
    return CalibrationResult(sigma, lo, steps, delta, target, r.epsilon, r.lower, accountant,
                             len(cache), time.perf_counter() - t0, details)
