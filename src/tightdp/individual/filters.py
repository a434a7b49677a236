"""Privacy filters and odometers for fully adaptive compositions.

Koskela, Tobaben, Honkela, "Individual Privacy Accounting with Gaussian Differential Privacy"
(ICLR 2023), and Feldman & Zrnic (2021), "Individual privacy accounting via
a Renyi filter".

* :class:`GDPFilter` -- Thm. 2 / Alg. 2 (App. C.1): a step with an adaptively chosen GDP
  parameter ``mu_t`` (chosen from the history) is admitted only while
  ``sum_t mu_t^2 <= mu^2``. The output of the filtered composition is ``mu``-GDP, so its
  ``(eps, delta)`` guarantee is the exact ``mu``-GDP curve (eq. (2.3) with ``mu``; Dong et al.
  2022, Cor. 2.13), tight for Gaussian mechanisms when the budget is spent exactly (Remark 3).
* :class:`GDPOdometer` -- App. C.5: a sequence of filters of budget ``step_mu`` each; after the
  ``k``-th filter has been opened, the transcript so far is ``sqrt(k) * step_mu``-GDP.
* :class:`IndividualGDPFilter` -- Alg. 1 / Thm. 1 for DP gradient descent: per example
  ``mu_{i,t} = min(||g_{i,t}||, C) / (sigma C)`` (eq. after (3.2); App. C.2); an example stops
  contributing once its budget is spent, the last step scaled so that it spends its budget
  exactly (Remark 3; Feldman & Zrnic 2021, Alg. 3).
* :class:`RDPFilter` -- the Renyi filter of Feldman & Zrnic (2021, Thm. 3.1) at one order
  ``alpha``, the baseline of App. C.4; converted to ``(eps, delta)`` by eq. (C.3)
  (Canonne, Kamath, Steinke 2020).

Floating point. Admission compares sums of squares computed in floating point; a sum that
rounds to at most the budget may exceed it by a few ulps. Every reported guarantee therefore
uses ``mu * sqrt(1 + margin)`` with a margin bounding that rounding (a relative ``~1e-15``
per step), so the reported curve is never below the one the admitted steps are entitled to.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _validate as v
from .._numerics import MACHINE_EPSILON, bisect, grow_until
from ..accountants.base import Queries
from ..curves.gdp import gdp_delta, gdp_epsilon, gdp_log_delta_values
from ..curves.rdp import delta_from_rdp, eps_from_rdp, gaussian_rdp
from ..results import DeltaResult, EpsilonResult

__all__ = [
    "GDPFilter",
    "GDPOdometer",
    "IndividualGDPFilter",
    "RDPFilter",
    "rdp_to_epsilon",
    "gaussian_rdp_order",
]

#: relative slack on the budget accepted at admission (lets ``request(remaining_mu)`` pass)
_ADMIT_SLACK = 8 * MACHINE_EPSILON


def _margin(n_steps) -> np.ndarray:
    """Relative bound on the rounding of a sum of ``n_steps`` squares checked against the
    budget (admission slack + one rounding per addition and per square)."""
    return _ADMIT_SLACK + (np.asarray(n_steps, dtype=float) + 4.0) * 2.0 * MACHINE_EPSILON


def _curve_eps(mu, delta: float) -> np.ndarray:
    """Exact mu-GDP eps(delta) (eq. (2.3) inverted), elementwise over ``mu`` (0 where mu = 0).

    Few values: :func:`tightdp.curves.gdp.gdp_epsilon` each. Many values: a vectorized
    bisection on the log of the same curve
    (:func:`tightdp.curves.gdp.gdp_log_delta_values`, elementwise), keeping the upper end of
    the bracket, so each result is >= the exact root."""
    mu = np.asarray(mu, dtype=float)
    out = np.zeros(mu.shape)
    flat_mu, flat_out = mu.reshape(-1), out.reshape(-1)
    pos = np.nonzero(flat_mu > 0)[0]
    if pos.size <= 32:
        for i in pos:
            flat_out[i] = float(gdp_epsilon(float(flat_mu[i]), delta))
        return out
    m = flat_mu[pos]
    ld = math.log(delta)

    def f(e: np.ndarray) -> np.ndarray:
        return gdp_log_delta_values(m, e) - ld

    lo = np.zeros(m.size)
    zero = f(lo) <= 0
    hi = grow_until(lambda e: f(e) > 0, np.maximum(1.0, m * m), 2.0)
    hi = bisect(lambda e: ~(f(e) <= 0), lo, hi, keep="hi", xtol=4 * MACHINE_EPSILON,
                floor=0.0, iters=200)
    flat_out[pos] = np.where(zero, 0.0, hi)
    return out


def _curve_delta(mu: float, eps) -> np.ndarray:
    eps = np.asarray(eps, dtype=float)
    if mu <= 0:
        return np.zeros(eps.shape)
    flat = eps.reshape(-1)
    return np.array([float(gdp_delta(mu, float(e))) for e in flat]).reshape(eps.shape)


def _as_scalar(x: np.ndarray):
    return float(x) if np.ndim(x) == 0 else x


_GDP_NOTE = ("certified upper bound: the exact mu-GDP curve of the filter's guarantee "
             "(mu = details['mu'])")


def _gdp_epsilon_result(mu: float, delta: float, name: str) -> EpsilonResult:
    """The exact mu-GDP eps(delta) (eq. (2.3) inverted, rounded up) as a certified result."""
    eps = float(_curve_eps(mu, delta))
    return EpsilonResult(eps, delta, None, eps, name, certified=True, estimate=eps, note=_GDP_NOTE,
                         details={"mu": mu})


def _gdp_delta_result(mu: float, eps, name: str) -> DeltaResult:
    """The exact mu-GDP delta(eps) (eq. (2.3)) as a certified result."""
    d = _as_scalar(_curve_delta(mu, v.eps_values("epsilon", eps)))
    return DeltaResult(d, eps, None, d, name, certified=True, estimate=d, note=_GDP_NOTE,
                       details={"mu": mu})


# ------------------------------------------------------------------------------------------
# GDP filter and odometer
# ------------------------------------------------------------------------------------------
class GDPFilter(Queries):
    """Fully adaptive GDP filter (Koskela et al. 2023, Thm. 2 and Alg. 2, App. C.1).

    Each step asks for a GDP parameter ``mu_t`` that may depend on everything released so far
    (e.g. a Gaussian mechanism with sensitivity ``s_t`` and noise ``sigma_t`` has
    ``mu_t = s_t / sigma_t``). The step is admitted only while ``sum_t mu_t^2 <= mu^2``; the
    filtered composition is then ``mu``-GDP (remove relation, both orders of the pair), whatever
    the adaptive choices, so ``epsilon(delta)`` is the exact ``mu``-GDP curve of the budget.

    A rejected request spends nothing and the caller must not run that step; later, smaller
    requests may still be admitted (the admission rule stays predictable, so Thm. 2 holds).

    Parameters
    ----------
    mu_budget : the total GDP budget ``mu > 0``.

    Examples
    --------
    >>> f = GDPFilter(1.0)
    >>> [f.request(0.6) for _ in range(3)]
    [True, True, False]
    >>> f.request(f.remaining_mu)   # Remark 3: spend the budget exactly
    True
    """

    def __init__(self, mu_budget: float):
        self.mu_budget = v.positive("mu_budget", mu_budget)
        self._b2 = self.mu_budget ** 2
        self._spent2 = 0.0
        self.n_admitted = 0
        self.n_rejected = 0

    def request(self, mu_t: float) -> bool:
        """Admit a step with GDP parameter ``mu_t >= 0`` if the budget allows it (Alg. 2)."""
        mu_t = v.nonnegative("mu_t", mu_t)
        new = self._spent2 + mu_t * mu_t
        if new <= self._b2 * (1.0 + _ADMIT_SLACK):
            self._spent2 = new
            self.n_admitted += 1
            return True
        self.n_rejected += 1
        return False

    @property
    def spent_mu(self) -> float:
        """``sqrt(sum of admitted mu_t^2)`` (the budget actually used)."""
        return math.sqrt(self._spent2)

    @property
    def remaining_mu(self) -> float:
        """The largest ``mu_t`` the next request may ask for (0 once exhausted)."""
        return math.sqrt(max(self._b2 - self._spent2, 0.0))

    @property
    def exhausted(self) -> bool:
        return self._spent2 >= self._b2

    @property
    def guarantee_mu(self) -> float:
        """The GDP parameter of the guarantee: the budget, inflated by the rounding margin."""
        return self.mu_budget * math.sqrt(1.0 + float(_margin(self.n_admitted)))

    name = "gdp-filter"

    def _epsilon_of(self, delta: float) -> EpsilonResult:
        """eps(delta) of the filtered composition: the exact mu-GDP curve of the budget
        (Koskela et al. 2023, eq. (2.3) / Thm. 2)."""
        return _gdp_epsilon_result(self.guarantee_mu, delta, self.name)

    def _delta_of(self, eps) -> DeltaResult:
        """delta(eps) of the filtered composition (exact mu-GDP curve of the budget)."""
        return _gdp_delta_result(self.guarantee_mu, eps, self.name)


class GDPOdometer(Queries):
    """GDP privacy odometer (Koskela et al. 2023, App. C.5; Feldman & Zrnic 2021, Sec. 5).

    A chain of :class:`GDPFilter` of budget ``step_mu`` each. Every recorded step is charged to
    the current filter; when it does not fit, that filter is closed and a new one opened with
    this step. Once ``k`` filters have been opened, the transcript released so far is a prefix
    of the output of ``k`` filters run one after the other, each ``step_mu``-GDP, hence it is
    ``sqrt(k) * step_mu``-GDP (composition of GDP, Dong et al. 2022, Cor. 3.3). That is the
    guarantee :attr:`spent_mu` reports; it is at least the realized ``sqrt(sum mu_t^2)``
    (:attr:`realized_mu`), which on its own is *not* a guarantee for adaptively chosen steps.

    Parameters
    ----------
    step_mu : discretization of the odometer; every step must have ``mu_t <= step_mu``.
    """

    def __init__(self, step_mu: float):
        self.step_mu = v.positive("step_mu", step_mu)
        self._s2 = self.step_mu ** 2
        self._cur2 = 0.0
        self._total2 = 0.0
        self.n_filters = 0
        self.n_steps = 0
        self._max_steps_in_filter = 0
        self._steps_in_filter = 0

    def record(self, mu_t: float) -> None:
        """Charge a step with GDP parameter ``mu_t`` (``0 <= mu_t <= step_mu``)."""
        mu_t = v.nonnegative("mu_t", mu_t)
        if mu_t > self.step_mu:
            raise ValueError(f"mu_t must be in [0, step_mu={self.step_mu}], got {mu_t!r}")
        m2 = mu_t * mu_t
        if self.n_filters == 0 or self._cur2 + m2 > self._s2 * (1.0 + _ADMIT_SLACK):
            self.n_filters += 1
            self._cur2 = 0.0
            self._steps_in_filter = 0
        self._cur2 += m2
        self._total2 += m2
        self.n_steps += 1
        self._steps_in_filter += 1
        self._max_steps_in_filter = max(self._max_steps_in_filter, self._steps_in_filter)

    @property
    def realized_mu(self) -> float:
        """``sqrt(sum mu_t^2)`` of the recorded steps (information only, not a guarantee)."""
        return math.sqrt(self._total2)

    @property
    def spent_mu(self) -> float:
        """The GDP guarantee of the transcript so far: ``sqrt(k) * step_mu`` (k filters opened),
        inflated by the rounding margin of the filters' admission."""
        if self.n_filters == 0:
            return 0.0
        m = float(_margin(self._max_steps_in_filter))
        return math.sqrt(self.n_filters) * self.step_mu * math.sqrt(1.0 + m)

    name = "gdp-odometer"

    def _epsilon_of(self, delta: float) -> EpsilonResult:
        """eps(delta) of the transcript so far (exact curve of :attr:`spent_mu`-GDP)."""
        return _gdp_epsilon_result(self.spent_mu, delta, self.name)

    def _delta_of(self, eps) -> DeltaResult:
        """delta(eps) of the transcript so far (exact curve of :attr:`spent_mu`-GDP)."""
        return _gdp_delta_result(self.spent_mu, eps, self.name)


# ------------------------------------------------------------------------------------------
# individual GDP filter for DP gradient descent
# ------------------------------------------------------------------------------------------
class IndividualGDPFilter(Queries):
    """Individual GDP filter for DP gradient descent (Koskela et al.
    2023, Alg. 1, Thm. 1, Remark 3).

    DP-GD step: ``sum_i f_i clip_C(g_i) + N(0, sigma^2 C^2 I)``. Removing example ``i`` changes
    the sum by ``f_i min(||g_i||, C)``, so the step is ``mu_{i,t}``-GDP for example ``i`` with
    ``mu_{i,t} = f_i min(||g_{i,t}||, C) / (sigma C)`` (App. C.2). Each example has its own
    filter of budget ``mu``: it contributes fully while ``sum_t mu_{i,t}^2 <= mu^2``; at the
    step that would overshoot, its gradient is scaled by ``f_i = sqrt(remaining) / mu_{i,t}``
    so that it spends its budget exactly (Remark 3; Feldman & Zrnic 2021, Alg. 3), and it is
    then inactive. By Thm. 1 the whole run is ``mu``-GDP with respect to every example
    (remove relation); with the exact last step the ``mu``-GDP curve is tight for exhausted
    examples (Remark 3).

    Parameters
    ----------
    mu_budget : the individual budget ``mu > 0``.
    noise_multiplier : ``sigma > 0`` (noise standard deviation ``sigma * clip_norm``).
    clip_norm : ``C > 0``.
    n_examples : number of examples ``N >= 1``.
    exact_last_step : if True (default) the overshooting step is scaled to spend the budget
        exactly; if False that step is skipped for the example (factor 0), which stays active
        and may contribute later with a smaller gradient.

    Examples
    --------
    >>> import numpy as np
    >>> f = IndividualGDPFilter(1.0, noise_multiplier=1.0, clip_norm=1.0, n_examples=3)
    >>> f.step(np.array([0.6, 2.0, 0.0]))
    array([1., 1., 1.])
    >>> f.step(np.array([0.6, 2.0, 0.0]))
    array([1., 0., 1.])
    >>> f.active
    array([ True, False,  True])
    """

    def __init__(self, mu_budget: float, noise_multiplier: float, clip_norm: float,
                 n_examples: int, *, exact_last_step: bool = True):
        self.mu_budget = v.positive("mu_budget", mu_budget)
        self.noise_multiplier = v.positive("noise_multiplier", noise_multiplier)
        self.clip_norm = v.positive("clip_norm", clip_norm)
        self.n_examples = v.count("n_examples", n_examples, minimum=1)
        self.exact_last_step = bool(exact_last_step)
        self._b2 = self.mu_budget ** 2
        self._spent2 = np.zeros(self.n_examples)
        self._exhausted = np.zeros(self.n_examples, dtype=bool)
        self.n_steps = 0

    def step_mu(self, grad_norms: np.ndarray) -> np.ndarray:
        """Unfiltered per-example ``mu_{i,t} = min(||g_i||, C) / (sigma C)``."""
        g = self._check_norms(grad_norms)
        return np.minimum(g, self.clip_norm) / (self.noise_multiplier * self.clip_norm)

    def _check_norms(self, grad_norms) -> np.ndarray:
        g = np.asarray(grad_norms, dtype=float)
        if g.shape != (self.n_examples,):
            raise ValueError(f"grad_norms must have shape ({self.n_examples},), got {g.shape}")
        if np.any(np.isnan(g)) or np.any(g < 0):
            raise ValueError("grad_norms must be >= 0 (inf allowed, it is clipped), no NaN")
        return g

    def step(self, grad_norms: np.ndarray) -> np.ndarray:
        """Run the filter for one DP-GD step (Alg. 1).

        Parameters
        ----------
        grad_norms : per-example gradient norms ``||g_{i,t}||`` at the current model, shape
            ``(N,)``.

        Returns
        -------
        factors : array in ``[0, 1]``: multiply example ``i``'s *clipped* gradient by
            ``factors[i]`` before summing (1: full contribution, 0: excluded, in between: the
            last step that spends the budget exactly).
        """
        mu = self.step_mu(grad_norms)
        m2 = mu * mu
        new = self._spent2 + m2
        fits = (new <= self._b2 * (1.0 + _ADMIT_SLACK)) & ~self._exhausted
        factors = np.where(fits, 1.0, 0.0)
        self._spent2 = np.where(fits, new, self._spent2)
        over = ~fits & ~self._exhausted & (m2 > 0)
        if self.exact_last_step and np.any(over):
            rem = np.maximum(self._b2 - self._spent2[over], 0.0)
            f = np.minimum(np.sqrt(rem) / mu[over], 1.0)
            factors[over] = f
            self._spent2[over] = self._spent2[over] + (f * mu[over]) ** 2
            self._exhausted[over] = True
        self._exhausted |= self._spent2 >= self._b2
        self.n_steps += 1
        return factors

    @property
    def active(self) -> np.ndarray:
        """Examples whose budget is not yet spent."""
        return ~self._exhausted

    @property
    def spent_mu(self) -> np.ndarray:
        """Per-example ``sqrt(sum_t mu_{i,t}^2)`` over the contributions actually made."""
        return np.sqrt(self._spent2)

    @property
    def remaining_mu(self) -> np.ndarray:
        return np.sqrt(np.maximum(self._b2 - self._spent2, 0.0))

    @property
    def guarantee_mu(self) -> float:
        """GDP parameter of the certified guarantee for every example (Thm. 1): the budget,
        inflated by the rounding margin."""
        return self.mu_budget * math.sqrt(1.0 + float(_margin(self.n_steps)))

    name = "individual-gdp-filter"

    def budget_epsilon(self, delta: float) -> EpsilonResult:
        """Certified fully adaptive eps(delta) for every example (Thm. 1): the mu-GDP curve of
        the budget (eq. (2.3))."""
        delta = v.delta_value("delta", delta)
        return _gdp_epsilon_result(self.guarantee_mu, delta, self.name)

    def _spent_guarantee(self) -> np.ndarray:
        """Per example, the GDP parameter of what it has spent (rounding margin included;
        the budget's guarantee for exhausted examples)."""
        spent = self.spent_mu * np.sqrt(1.0 + _margin(self.n_steps))
        return np.where(self._exhausted, self.guarantee_mu, spent)

    def _epsilon_of(self, delta: float) -> EpsilonResult:
        """Per-example eps(delta) of the privacy each example has *spent*: the exact GDP curve
        (eq. (2.3)) at ``spent_mu[i]``, an array ``(N,)`` in the result.

        This is the individual privacy loss in the sense of Koskela et al. 2023, Sec. 4-5: it is the
        guarantee example ``i`` would have if its sequence ``mu_{i,1}, mu_{i,2}, ...`` had been
        fixed in advance. Because the norms are chosen adaptively, the certified fully adaptive
        guarantee is that of the budget, :meth:`budget_epsilon` (Thm. 1); the two coincide for
        examples that have spent their budget exactly (Remark 3, ``active == False``)."""
        spent = self._spent_guarantee()
        # one closed-form curve evaluation per distinct mu
        uniq, inv = np.unique(spent, return_inverse=True)
        eps = _curve_eps(uniq, delta)[inv].reshape(spent.shape)
        return EpsilonResult(eps, delta, None, eps, self.name, certified=True, estimate=eps,
                             note=_SPENT_NOTE, details={"mu": spent})

    def _delta_of(self, eps) -> DeltaResult:
        """Per-example delta(eps) of the privacy each example has spent (the exact GDP curve
        at ``spent_mu[i]``, as :meth:`epsilon`): arrays of shape ``eps.shape + (N,)``."""
        spent = self._spent_guarantee()
        e = v.eps_values("epsilon", eps)
        uniq, inv = np.unique(spent, return_inverse=True)
        cols = np.stack([_curve_delta(float(m), e) for m in uniq], axis=-1)
        d = cols[..., inv]
        return DeltaResult(d, eps, None, d, self.name, certified=True, estimate=d, note=_SPENT_NOTE,
                           details={"mu": spent})


# ------------------------------------------------------------------------------------------
# RDP filter (Feldman & Zrnic 2021): the baseline of App. C.4
# ------------------------------------------------------------------------------------------
def rdp_to_epsilon(rdp: float, order: float, delta: float) -> float:
    """(eps, delta) from (order, rdp)-RDP: Koskela et al. 2023, eq. (C.3) (Lemma 4; Canonne, Kamath,
    Steinke 2020, Prop. 12), through :func:`tightdp.curves.rdp.eps_from_rdp` (which also takes the
    classic conversion of Mironov 2017, Prop. 3, when better)."""
    a = float(order)
    if not a > 1:
        raise ValueError(f"order must be in (1, inf), got {order!r}")
    return eps_from_rdp(np.array([a]), np.array([float(rdp)]), delta)[0]


def _rdp_budget_for(eps: float, delta: float, order: float) -> float:
    """The RDP budget at ``order`` whose conversion (C.3) is exactly ``eps``."""
    a = order
    return eps - math.log1p(-1.0 / a) + (math.log(delta) + math.log(a)) / (a - 1.0)


def gaussian_rdp_order(epsilon: float, delta: float) -> float:
    """The order maximizing the admissible ``sum mu_t^2`` of an RDP filter for Gaussian steps
    (RDP ``alpha mu_t^2 / 2``; Mironov 2017) whose budget converts to ``(epsilon, delta)`` by
    (C.3): the maximizer of ``2 B(alpha) / alpha``. Choosing it needs no data."""
    eps = v.nonnegative("epsilon", epsilon)
    delta = v.delta_value("delta", delta)

    def neg(log_am1: float) -> float:
        a = 1.0 + math.exp(log_am1)
        return -2.0 * _rdp_budget_for(eps, delta, a) / a

    from scipy.optimize import minimize_scalar  # lazy: keeps start-up short

    r = minimize_scalar(neg, bounds=(-12.0, 12.0), method="bounded",
                        options={"xatol": 1e-10})
    return 1.0 + math.exp(float(r.x))


class RDPFilter(Queries):
    """Renyi-DP filter at one order (Feldman & Zrnic 2021, Thm. 3.1; Koskela et al. 2023, App. C.4).

    A step with RDP ``rho_t`` at order ``alpha`` (chosen adaptively) is admitted only while
    ``sum_t rho_t <= budget``; the filtered composition is then ``(alpha, budget)``-RDP and
    ``(eps, delta)``-DP by (C.3). The same API as :class:`GDPFilter`: :meth:`request` takes the
    GDP parameter of a Gaussian step (RDP ``alpha mu_t^2 / 2``, Mironov 2017, Prop. 7).

    Parameters
    ----------
    budget : RDP budget at ``order`` (> 0).
    order : the Renyi order ``alpha > 1``, fixed in advance.
    """

    def __init__(self, budget: float, order: float):
        self.budget = v.positive("budget", budget)
        self.order = v.positive("order", order)
        if not self.order > 1:
            raise ValueError(f"order must be in (1, inf), got {order!r}")
        self._spent = 0.0
        self.n_admitted = 0
        self.n_rejected = 0

    @classmethod
    def from_epsilon_delta(cls, epsilon: float, delta: float, order: float | None = None
                           ) -> RDPFilter:
        """The filter whose guarantee converts to ``(epsilon, delta)`` by (C.3); ``order``
        defaults to :func:`gaussian_rdp_order` (best order for Gaussian steps)."""
        eps = v.positive("epsilon", epsilon)
        delta = v.delta_value("delta", delta)
        a = gaussian_rdp_order(eps, delta) if order is None else float(order)
        b = _rdp_budget_for(eps, delta, a)
        if not b > 0:
            raise ValueError(f"no positive RDP budget at order {a} reaches eps={eps}, "
                             f"delta={delta}: choose another order")
        return cls(b, a)

    def request_rdp(self, rdp_t: float) -> bool:
        """Admit a step whose RDP at :attr:`order` is ``rdp_t >= 0`` if the budget allows."""
        rdp_t = v.nonnegative("rdp_t", rdp_t)
        new = self._spent + rdp_t
        if new <= self.budget * (1.0 + _ADMIT_SLACK):
            self._spent = new
            self.n_admitted += 1
            return True
        self.n_rejected += 1
        return False

    def request(self, mu_t: float) -> bool:
        """Admit a Gaussian step with GDP parameter ``mu_t`` (RDP ``alpha mu_t^2 / 2``)."""
        mu_t = v.nonnegative("mu_t", mu_t)
        return self.request_rdp(float(gaussian_rdp(np.array([self.order]), mu_t)[0]))

    @property
    def spent_rdp(self) -> float:
        return self._spent

    @property
    def remaining_rdp(self) -> float:
        return max(self.budget - self._spent, 0.0)

    name = "rdp-filter"

    def _guarantee_rdp(self) -> float:
        """The RDP of the guarantee at :attr:`order`: the budget, inflated by the rounding
        margin of the admissions."""
        return self.budget * (1.0 + float(_margin(self.n_admitted)))

    def _epsilon_of(self, delta: float) -> EpsilonResult:
        """eps(delta) of the filtered composition by (C.3) at the filter's order."""
        b = self._guarantee_rdp()
        eps = float(rdp_to_epsilon(b, self.order, delta))
        return EpsilonResult(eps, delta, None, eps, self.name, certified=True, estimate=eps,
                             note=_RDP_NOTE, details={"order": self.order, "rdp": b})

    def _delta_of(self, eps) -> DeltaResult:
        """delta(eps) of the filtered composition at the filter's order (the conversions of
        :func:`tightdp.curves.rdp.delta_from_rdp`, inverse to those of :meth:`epsilon`)."""
        b = self._guarantee_rdp()
        e = v.eps_values("epsilon", eps)
        d = _as_scalar(delta_from_rdp(np.array([self.order]), np.array([b]), e)[0]
                       .reshape(e.shape))
        return DeltaResult(d, eps, None, d, self.name, certified=True, estimate=d, note=_RDP_NOTE,
                           details={"order": self.order, "rdp": b})


_SPENT_NOTE = ("per example: the exact mu-GDP curve of what the example has spent (an upper "
               "bound given its gradient norms, not a fully adaptive guarantee: that is "
               "budget_epsilon, Thm. 1); details['mu'] per example")
_RDP_NOTE = ("certified upper bound from the filter's RDP budget at one order (Feldman & "
             "Zrnic 2021, Thm. 3.1; Canonne, Kamath, Steinke 2020, Prop. 12)")
