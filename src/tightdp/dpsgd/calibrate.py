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
from typing import cast

from .. import _validate as v
from .._defaults import DEFAULT_RTOL
from .._numerics import BracketError, bisect_int, bisect_log, bracket_of_points, grow_bracket
from ..accountants.registry import CERTIFYING
from ..budget import Budget, BudgetExceeded
from ..progress import progress_bar
from ..results import Result
from ..risk import RiskTarget, TradeoffResult, calibrate_noise_to_risk, tradeoff
from .epsilon import composed
from .setting import DPSGDSetting, dpsgd_setting

__all__ = ["CalibrationResult", "calibrate_noise", "calibrate_steps", "calibrate_sampling_rate",
           "precision_options", "SearchClock", "OutOfTime", "calibrate_noise_risk"]


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


def _risk_details(goal: RiskTarget, r: TradeoffResult | None) -> dict:
    """What a calibration to a risk target reports of the certified curve ``r`` at the
    setting found (None: no step, whose curve is the diagonal TPR = FPR)."""
    fpr = goal.fpr if goal.fpr is not None else 0.5
    tl, tu = (fpr, fpr) if r is None else (float(r.tpr_lower[0]), float(r.tpr_upper[0]))
    al, au = (0.0, 0.0) if r is None else (r.advantage_lower, r.advantage_upper)
    return {"target": goal.describe(), "tpr_lower": tl, "tpr_upper": tu,
            "advantage_lower": al, "advantage_upper": au, "fpr": goal.fpr, "tpr": goal.tpr,
            "advantage": goal.advantage}


def _targets(accountant: str, epsilon, delta, risk: dict
             ) -> tuple[float, float, RiskTarget | None]:
    """The validated target of a search: ``(epsilon, delta, None)`` for a privacy budget, or
    ``(nan, nan, goal)`` for a risk target (``risk``: tpr, fpr, advantage; pld only)."""
    if all(x is None for x in risk.values()):
        if epsilon is None or delta is None:
            raise ValueError("epsilon and delta are required (or a risk target: tpr with "
                             "fpr, or advantage)")
        return (*_check(accountant, epsilon, delta), None)
    if epsilon is not None or delta is not None:
        raise ValueError("epsilon, delta: give a privacy budget (epsilon with delta) or a "
                         "risk target (tpr with fpr, or advantage), not both")
    if str(accountant).lower() != "pld":
        raise ValueError(f"accountant must be pld to calibrate to a risk target (its certified "
                         f"two-sided curve), got {accountant!r}")
    return math.nan, math.nan, RiskTarget.make(**risk)


def _check(accountant: str, target: float, delta: float) -> tuple[float, float]:
    if str(accountant).lower() not in CERTIFYING:
        raise ValueError(f"accountant must certify an upper bound ({', '.join(CERTIFYING)}), "
                         f"got {accountant!r}")
    return v.positive("epsilon", target), v.delta_value("delta", delta)


class _Queries:
    """The certified accountant queries of one calibration search: ``setting_of(x)`` (the
    DP-SGD setting at the searched value ``x``) asked once per value (cached), each with the
    precision ``rtol`` and what is left of the search's clock, for its eps at ``delta`` or,
    given a risk target ``goal``, for its certified trade-off curve
    (:func:`tightdp.risk.tradeoff`, at the default TPR width, the curve a re-check with
    :func:`tightdp.dpsgd_risk` computes)."""

    def __init__(self, setting_of, *, target: float, delta: float, accountant: str,
                 rtol: float, max_memory, max_seconds, neighboring: str | None = None,
                 goal: RiskTarget | None = None):
        self.setting_of = setting_of
        self.relation = {} if neighboring is None else {"neighboring": neighboring}
        self.target, self.delta, self.accountant, self.rtol = target, delta, accountant, rtol
        self.goal = goal
        self.clock = SearchClock(max_memory, max_seconds)
        self.t0 = time.perf_counter()
        self.cache: dict = {}

    def __call__(self, x):
        if x not in self.cache:
            options = {**precision_options(self.accountant, self.target, self.rtol,
                                           self.clock.options()), **self.relation}
            if self.goal is None:
                self.cache[x] = _bracket(self.setting_of(x), self.delta, self.accountant,
                                         options)
            else:
                acc = composed(self.setting_of(x), accountant=self.accountant, **options)
                fpr = self.goal.fpr if self.goal.fpr is not None else 0.5
                self.cache[x] = tradeoff(acc, fpr=fpr)
        return self.cache[x]

    def _met(self, r) -> bool:
        if self.goal is None:
            return r.epsilon <= self.target
        return self.goal.met(r)

    def meets(self, x) -> bool:
        """Whether the certified upper bound at ``x`` meets the target."""
        return self._met(self(x))

    def describe(self) -> str:
        """The target, as messages name it."""
        if self.goal is None:
            return f"eps={self.target} at delta={self.delta}"
        return self.goal.describe()

    def fails(self, x) -> bool:
        return not self.meets(x)

    def bracket(self, *, feasible: str) -> tuple:
        """The bracket established by the queries made so far (after :class:`OutOfTime`):
        ``(lo, hi)``, the end on the ``feasible`` side (``"lo"``: the largest value that
        meets the target; ``"hi"``: the smallest) first established, None where unknown."""
        below = feasible == "lo"
        return bracket_of_points({x: self._met(r) == below
                                  for x, r in self.cache.items()}, keep=feasible)

    def result(self, noise_multiplier: float, sampling_rate: float, steps: int, at,
               details: dict) -> CalibrationResult:
        """The result for the setting found, with the certified bracket of the query at
        ``at`` (its searched value; a count of 0 steps, never queried, has eps 0), and
        ``details["neighboring"]`` the relation it was accounted under."""
        r = self.cache.get(at)
        if r is not None and "neighboring" in r.details:
            details = {"neighboring": r.details["neighboring"], **details}
        if self.goal is not None:
            return CalibrationResult(
                noise_multiplier, sampling_rate, steps, math.nan, math.nan, math.nan, None,
                self.accountant, len(self.cache), time.perf_counter() - self.t0,
                {**_risk_details(self.goal, r), **details})
        return CalibrationResult(noise_multiplier, sampling_rate, steps, self.delta,
                                 self.target, r.epsilon if r is not None else 0.0,
                                 r.lower if r is not None else 0.0, self.accountant,
                                 len(self.cache), time.perf_counter() - self.t0, details)

    def out_of_time(self, what: str) -> BudgetExceeded:
        return BudgetExceeded(
            f"max_seconds: the search found no {what} meeting {self.describe()} "
            f"within max_seconds={self.clock.deadline.max_seconds:g}; "
            "raise max_seconds or rtol")


@v.known_keywords()
def calibrate_noise(*, epsilon: float | None = None, delta: float | None = None,
                    sampling_rate: float | None = None,
                    steps: int | None = None, epochs: float | None = None,
                    batch_size: int | None = None, dataset_size: int | None = None,
                    sampling: str = "poisson", steps_per_epoch: int | None = None,
                    selected: int | None = None, max_batch_size: int | None = None,
                    accountant: str = "pld", rtol: float = DEFAULT_RTOL,
                    sigma_max: float = 1e4, max_memory=None, max_seconds=None,
                    neighboring: str | None = None, tpr: float | None = None,
                    fpr: float | None = None, advantage: float | None = None
                    ) -> CalibrationResult:
    """Smallest noise multiplier whose certified eps at ``delta`` is <= ``epsilon`` (the
    target), for the DP-SGD setting of :func:`tightdp.dpsgd.setting.dpsgd_setting` (any
    sampling; ``steps`` or ``epochs``, at least one round); or, given ``tpr`` and ``fpr``
    (or ``advantage``) instead of ``epsilon`` and ``delta``, whose certified trade-off curve
    keeps the best attack's TPR at FPR ``fpr`` at most ``tpr`` (its advantage at most
    ``advantage``): see :func:`calibrate_noise_risk`.

    Bisection on ``log sigma`` until the bracket of sigma is within ``rtol / 4`` relative;
    the upper end (a sigma that provably meets the target) is returned. ``max_memory`` is the
    budget of each accountant query, ``max_seconds`` that of the whole search (see
    :mod:`tightdp.budget`; past it, the smallest sigma found to meet the target is returned
    with ``details["converged"] = False`` and a note). ``neighboring``: the relation, where
    the sampling allows another than its own (:func:`tightdp.dpsgd.epsilon.composed`).
    """
    if tpr is not None or fpr is not None or advantage is not None:
        if epsilon is not None or delta is not None:
            raise ValueError("epsilon, delta: give a privacy budget (epsilon with delta) or a "
                             "risk target (tpr with fpr, or advantage), not both")
        return calibrate_noise_risk(
            tpr=tpr, fpr=fpr, advantage=advantage, sampling_rate=sampling_rate, steps=steps,
            epochs=epochs, batch_size=batch_size, dataset_size=dataset_size,
            sampling=sampling, steps_per_epoch=steps_per_epoch, selected=selected,
            max_batch_size=max_batch_size, accountant=accountant, sigma_max=sigma_max,
            max_memory=max_memory, max_seconds=max_seconds, neighboring=neighboring)
    if epsilon is None or delta is None:
        raise ValueError("epsilon and delta are required (or a risk target: tpr with fpr, "
                         "or advantage)")
    target, delta = _check(accountant, epsilon, delta)
    base = _noise_base(steps=steps, epochs=epochs, sampling_rate=sampling_rate,
                       batch_size=batch_size, dataset_size=dataset_size, sampling=sampling,
                       steps_per_epoch=steps_per_epoch, selected=selected,
                       max_batch_size=max_batch_size)
    q, steps = base.sampling.sampling_rate, base.steps
    rtol = v.positive("rtol", rtol)
    query = _Queries(base.with_noise, target=target, delta=delta, accountant=accountant,
                     rtol=rtol / 4, max_memory=max_memory, max_seconds=max_seconds,
                     neighboring=neighboring)
    details: dict = {}
    try:
        lo, hi = _noise_search(query, rtol, sigma_max)
    except OutOfTime:
        lo, hi = query.bracket(feasible="hi")
        if hi is None:
            raise query.out_of_time("noise multiplier") from None
        lo = 0.0 if lo is None else lo
        details = query.clock.note(lo, hi)
    return query.result(hi, q, steps, hi, {"sigma_infeasible_below": lo, **details,
                                           **_scheme_details(base)})


def _noise_base(**setting) -> DPSGDSetting:
    """The setting of a noise search (``setting``: :func:`dpsgd_setting`'s arguments but the
    noise) at noise multiplier 1, whose noise the search scales; at least one round."""
    base = dpsgd_setting(noise_multiplier=1.0, **setting)
    if base.steps < 1:
        raise ValueError(f"steps must be an integer >= 1, got {base.steps!r}")
    return base


def _scheme_details(setting: DPSGDSetting) -> dict:
    """What a calibration's details say of the sampling: its name, and for the epoch
    samplings the epochs and rounds per epoch."""
    out: dict = {"sampling": setting.sampling.kind}
    if setting.sampling.per_epoch:
        out.update(epochs=setting.count, steps_per_epoch=setting.sampling.steps_per_epoch)
    return out


def _noise_search(query: _Queries, rtol: float, sigma_max: float) -> tuple[float, float]:
    """The search of :func:`calibrate_noise`: ``(lo, hi)``, ``hi`` the smallest sigma found
    to meet the target by its certified upper bound, ``lo`` below it not meeting it (or the
    end of the search, 0.5 ** 10)."""
    # initial bracket from the GDP/CLT heuristic: expand geometrically from 2 up while the
    # target is missed, or from 0.5 down while it is met
    try:
        lo, hi = grow_bracket(query.fails, 2.0, 2.0, limit=sigma_max,
                              what="the noise multiplier")
    except BracketError:
        raise ValueError(f"no noise multiplier up to {sigma_max} meets eps={query.target} at "
                         f"delta={query.delta}; increase sigma_max or relax the target"
                         ) from None
    if lo is None:
        met, lo = grow_bracket(query.meets, 0.5, 0.5, limit=1e-3, on_limit="return")
        hi = hi if met is None else met
    # bisection in log space on the certified upper bound (hi meets the target throughout)
    return bisect_log(query.fails, lo, hi, rtol=rtol / 4)


def _rate_query(*, epsilon, delta, accountant, rtol, max_memory, max_seconds, neighboring,
                risk: dict, **setting) -> tuple[_Queries, DPSGDSetting]:
    """The validated setup shared by :func:`calibrate_steps` and
    :func:`calibrate_sampling_rate`: the base setting and the search's queries over the
    searched value (``steps`` when ``setting`` has ``steps=0``, else the sampling rate), to
    the privacy budget (``epsilon``, ``delta``) or the risk target ``risk``."""
    target, delta, goal = _targets(accountant, epsilon, delta, risk)
    base = dpsgd_setting(**setting)
    rtol = v.positive("rtol", rtol)
    by_steps = setting["steps"] == 0
    return _Queries(base.with_count if by_steps else base.with_rate, target=target,
                    delta=delta, accountant=accountant, rtol=rtol if by_steps else rtol / 4,
                    max_memory=max_memory, max_seconds=max_seconds,
                    neighboring=neighboring, goal=goal), base


@v.known_keywords()
def calibrate_steps(*, noise_multiplier: float, epsilon: float | None = None,
                    delta: float | None = None,
                    sampling_rate: float | None = None, batch_size: int | None = None,
                    dataset_size: int | None = None, sampling: str = "poisson",
                    steps_per_epoch: int | None = None, selected: int | None = None,
                    max_batch_size: int | None = None, accountant: str = "pld",
                    rtol: float = DEFAULT_RTOL, max_steps: int = 10**8, max_memory=None,
                    max_seconds=None, neighboring: str | None = None, tpr: float | None = None,
                    fpr: float | None = None, advantage: float | None = None
                    ) -> CalibrationResult:
    """Largest number of steps whose certified eps at ``delta`` is <= ``epsilon`` (the
    target), or, given ``tpr`` and ``fpr`` (or ``advantage``) instead, whose certified
    trade-off curve keeps the best attack's TPR at FPR ``fpr`` at most ``tpr`` (its
    advantage at most ``advantage``; accountant pld; the TPR and advantage upper bounds grow
    with the steps, a composition with more steps being less private: Dong, Roth & Su 2022,
    Lemma 3.4), for the DP-SGD setting of :func:`tightdp.dpsgd.setting.dpsgd_setting` (any
    sampling; doubling, then integer bisection; 0 steps always meets any target; at most
    ``max_steps``; for random_allocation and shuffle the search is over whole epochs, and
    ``steps`` is a multiple of ``steps_per_epoch``). ``max_memory`` is the budget of each
    accountant query, ``max_seconds`` that of the whole search (past it, the largest count
    found to meet the target is returned, with ``details["converged"] = False``)."""
    query, base = _rate_query(
        epsilon=epsilon, delta=delta, accountant=accountant, rtol=rtol, max_memory=max_memory,
        max_seconds=max_seconds, neighboring=neighboring, noise_multiplier=noise_multiplier,
        steps=0, risk={"tpr": tpr, "fpr": fpr, "advantage": advantage},
        sampling_rate=sampling_rate, batch_size=batch_size, dataset_size=dataset_size,
        sampling=sampling, steps_per_epoch=steps_per_epoch, selected=selected,
        max_batch_size=max_batch_size)
    max_steps = v.count("max_steps", max_steps, minimum=1)
    t = base.sampling.rounds_per_mechanism
    if max_steps < t:
        raise ValueError(f"max_steps must be >= steps_per_epoch ({t}) for sampling="
                         f"{base.sampling.kind!r} (whole epochs), got {max_steps!r}")
    details: dict = {}
    try:
        lo, _ = _steps_search(query, max_steps // t)
    except OutOfTime:
        lo, hi = query.bracket(feasible="lo")
        lo = 0 if lo is None else lo
        details = query.clock.note(lo * t, max_steps if hi is None else hi * t)
    found = base.with_count(lo)
    return query.result(base.noise_multiplier, base.sampling.sampling_rate, found.steps, lo,
                        {**details, **_scheme_details(found)})


def _steps_search(query: _Queries, max_steps: int) -> tuple[int, int]:
    """The search of :func:`calibrate_steps`: ``(lo, hi)``, ``lo`` the largest count found
    to meet the target (0 when 1 does not), ``hi = lo + 1`` not meeting it (or ``lo`` at
    ``max_steps``)."""
    met, hi = grow_bracket(query.meets, 1, 2, limit=max_steps, on_limit="return")
    lo = 0 if met is None else met
    if hi > max_steps:  # every count tried met the target: the cap is the next to try
        if query.meets(max_steps):
            return max_steps, max_steps
        hi = max_steps
    return bisect_int(query.meets, cast(int, lo), cast(int, hi))  # counts: integers


@v.known_keywords()
def calibrate_sampling_rate(*, noise_multiplier: float, steps: int,
                            epsilon: float | None = None, delta: float | None = None,
                            sampling: str = "poisson", accountant: str = "pld",
                            rtol: float = DEFAULT_RTOL, max_memory=None, max_seconds=None,
                            neighboring: str | None = None, tpr: float | None = None,
                            fpr: float | None = None, advantage: float | None = None
                            ) -> CalibrationResult:
    """Largest sampling rate whose certified eps at ``delta`` is <= ``epsilon`` (the
    target), or whose certified trade-off curve meets the risk target ``tpr`` at ``fpr``
    (or ``advantage``; accountant pld; the curve's upper bounds grow with the rate, the
    subsampled pair at a higher rate dominating the one at a lower rate), for ``sampling``
    "poisson" or "without_replacement" (the samplings with a free rate; bisection on log q,
    to ``rtol / 4`` relative). ``max_memory`` is the budget of each
    accountant query, ``max_seconds`` that of the whole search (past it, the largest rate
    found to meet the target is returned, with ``details["converged"] = False``)."""
    risk = {"tpr": tpr, "fpr": fpr, "advantage": advantage}
    _targets(accountant, epsilon, delta, risk)
    if str(sampling).strip().lower().replace("-", "_") not in ("poisson",
                                                               "without_replacement"):
        raise ValueError(f"sampling must be poisson or without_replacement (a free rate) to "
                         f"calibrate the sampling rate, got {sampling!r}")
    if steps is None:
        raise ValueError("steps is required to calibrate the sampling rate (an integer >= 1)")
    steps = v.count("steps", steps, minimum=1)
    query, base = _rate_query(
        epsilon=epsilon, delta=delta, accountant=accountant, rtol=rtol, max_memory=max_memory,
        max_seconds=max_seconds, neighboring=neighboring, noise_multiplier=noise_multiplier,
        steps=steps, sampling_rate=1.0, sampling=sampling, risk=risk)
    details: dict = {}
    try:
        lo = 1.0
        if query.fails(1.0):
            lo = 1e-9
            if query.fails(lo):
                raise ValueError(f"sampling_rate: even 1e-9 misses {query.describe()}; add "
                                 "noise")
            lo, _ = bisect_log(query.meets, lo, 1.0, rtol=query.rtol)
    except OutOfTime:
        lo, hi = query.bracket(feasible="lo")
        if lo is None:
            raise query.out_of_time("sampling rate") from None
        details = query.clock.note(lo, 1.0 if hi is None else hi)
    return query.result(base.noise_multiplier, lo, base.steps, lo, details)


def calibrate_noise_risk(*, tpr: float | None = None, fpr: float | None = None,
                         advantage: float | None = None, sampling_rate: float | None = None,
                         steps: int | None = None, epochs: float | None = None,
                         batch_size: int | None = None, dataset_size: int | None = None,
                         sampling: str = "poisson", steps_per_epoch: int | None = None,
                         selected: int | None = None, max_batch_size: int | None = None,
                         accountant: str = "pld", sigma_max: float = 1e4, max_memory=None,
                         max_seconds=None, neighboring: str | None = None
                         ) -> CalibrationResult:
    """Smallest noise multiplier (to 0.2% relative) whose certified trade-off curve meets
    "TPR <= ``tpr`` at FPR ``fpr``" or "advantage <= ``advantage``", for the DP-SGD setting
    of :func:`tightdp.dpsgd.setting.dpsgd_setting` (any sampling scheme: the search only
    changes the noise multiplier, :meth:`DPSGDSetting.with_noise`). The sigma returned meets
    the target by the certified upper bound; ``details["sigma_infeasible_below"]`` is a sigma
    whose certified curve misses it (see :func:`tightdp.risk.calibrate_noise_to_risk`)."""
    if str(accountant).lower() != "pld":
        raise ValueError(f"accountant must be pld to calibrate to a risk target (its certified "
                         f"two-sided curve), got {accountant!r}")
    goal = RiskTarget.make(tpr=tpr, fpr=fpr, advantage=advantage)
    base = _noise_base(steps=steps, epochs=epochs, sampling_rate=sampling_rate,
                       batch_size=batch_size, dataset_size=dataset_size, sampling=sampling,
                       steps_per_epoch=steps_per_epoch, selected=selected,
                       max_batch_size=max_batch_size)
    t0 = time.perf_counter()
    seen: dict = {}

    def accountant_of(sigma: float):
        return composed(base.with_noise(sigma), accountant="pld", max_memory=max_memory,
                        max_seconds=max_seconds, neighboring=neighboring)

    lo, hi, r = calibrate_noise_to_risk(accountant_of, goal, sigma_max=sigma_max,
                                        start=_clt_sigma(goal.gdp_mu(), base), queries=seen)
    return CalibrationResult(
        hi, base.sampling.sampling_rate, base.steps, math.nan, math.nan, math.nan, None,
        "pld", len(seen), time.perf_counter() - t0,
        {"sigma_infeasible_below": lo, **_risk_details(goal, r)})


def _clt_sigma(mu: float, setting) -> float:
    """A starting guess: the sigma at which the central limit theorem's mu of ``steps``
    Poisson-subsampled Gaussian steps, ``q sqrt(T (e^{1/sigma^2} - 1))``, is ``mu`` (Dong,
    Roth & Su, Cor. 5.4), within [0.05, 100]."""
    q, t = setting.sampling.sampling_rate, setting.steps
    ratio = (mu / (q * math.sqrt(t))) ** 2 if q > 0 and mu > 0 else 1.0
    return min(max(1 / math.sqrt(math.log1p(ratio)), 0.05), 100.0)
