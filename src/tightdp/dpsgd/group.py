"""Group-level (eps, delta) guarantees of DP-SGD via mixture-of-Gaussians mechanisms.

Arun Ganesh, *Tight Group-Level Differential Privacy Guarantees for DP-SGD with Sampling via
Mixture of Gaussians Mechanisms* (2024; cited below as "Ganesh"). Two datasets are neighbours
when one is the other plus up to ``k`` examples (add-up-to-k and remove-up-to-k adjacency,
Def. 2.5); the curve reported is the maximum over both directions, which
:class:`~tightdp.mechanisms.MixtureOfGaussians` provides (remove pair ``(sum_j p_j N(c_j),
N(0))``, add pair reversed).

* Poisson sampling with rate ``q`` (Thm 3.1): one round of DP-SGD with noise multiplier
  ``sigma`` is dominated by the scalar MoG mechanism whose sensitivity is ``j`` with
  probability ``Binomial(k, q)(j)``, noise standard deviation ``sigma``.
* Fixed batch size ``B`` on datasets of at least ``n`` examples (Thm 3.3): sensitivity ``2 j``
  with probability ``Hypergeom(B, n + k, k)(j)`` -- the number of the ``k`` group examples
  among ``B`` draws without replacement from a population of ``n + k`` -- and noise standard
  deviation ``sigma`` (the noise multiplier as given; the paper's Section 4 comparison passes
  twice the Poisson noise multiplier for fixed batches, which is the caller's choice).

Both pairs are tight for DP-SGD when every iterate is released (Sec. 3.3). ``T`` rounds are
the ``T``-fold composition of the pair (Lemma 2.6), accounted by the certified
:class:`~tightdp.accountants.PLDAccountant`.

Baselines returned alongside (Sec. 4):

* ``conversion``: an example-level guarantee turned into a group guarantee by Lemma 1.1
  (Vadhan 2017, Lemma 2.2): example-level ``(eps1, delta1)`` gives groups of ``k``
  ``(k eps1, (1 + e^eps1 + ... + e^{(k-1) eps1}) delta1)``. It is computed from our certified
  example-level *upper* curve at a ``delta1`` with ``delta1 * sum_{i<k} e^{i eps1(delta1)}
  <= delta``, so it is itself a certified (looser) upper bound on the group eps.
  For fixed batches the example-level guarantee is the k = 1 case (sensitivity 2 w.p.
  ``B / (n + 1)``), valid for every dataset of at least ``n`` examples, hence for every step
  of the chain ``D, D + x_1, ..., D + G`` that Lemma 1.1 walks along.
* ``linear_reference``: ``k * eps_1`` with ``eps_1`` the example-level eps at the same delta.
  The paper plots it as a "lower bound"; no proof of that is given there and it is not a
  theorem for general mechanisms (group privacy can grow sub-linearly), so it is reported as a
  reference line only. The certified lower bound on the group eps is ``lower``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

import numpy as np
from scipy.special import logsumexp

from .. import _validate as v
from .._defaults import DEFAULT_RTOL
from .._numerics import bisect_until, descend_to_fixed_point, step_out
from ..accountants.pld import PLDAccountant
from ..budget import Budget
from ..mechanisms import Mechanism, MixtureOfGaussians
from ..results import Result
from .setting import DPSGDSetting, Sampling, dpsgd_setting, make_sampling

__all__ = [
    "GroupResult",
    "group_epsilon",
    "group_epsilons",
    "group_mechanism",
    "sensitivity_distribution",
    "group_conversion_epsilon",
    "ChernoffCurve",
]

#: bytes :class:`ChernoffCurve` holds per point of a discretized loss (the connect-the-dots
#: discretization's arrays and the log-MGF's work rows, with room to spare; docs/pld-constants.md)
CHERNOFF_BYTES_PER_POINT = 256
#: tilts of :class:`ChernoffCurve` evaluated between two checks of the time budget
CHERNOFF_TILTS = 100
#: largest FFT the conversion baseline may use per query (its deltas can be very small)
CONVERSION_MAX_POINTS = 1 << 20
#: the PLD refinement of the conversion is tried only for example-level delta above this
REFINE_BELOW_LOG = math.log(1e-30)


def _sampling(group_size, sampling, sampling_rate, batch_size, dataset_size
              ) -> tuple[int, Sampling]:
    """(k, the validated sampling) of a group query: poisson or fixed_batch, k <= B."""
    k = v.count("group_size", group_size, minimum=1)
    samp = make_sampling(sampling=sampling, sampling_rate=sampling_rate,
                         batch_size=batch_size, dataset_size=dataset_size)
    samp.sensitivity_distribution(k)  # poisson or fixed_batch; k <= batch_size
    return k, samp


def sensitivity_distribution(group_size: int, *, sampling: str = "poisson",
                             sampling_rate: float | None = None,
                             batch_size: int | None = None,
                             dataset_size: int | None = None
                             ) -> tuple[np.ndarray, np.ndarray]:
    """Sensitivities and their probabilities of the dominating MoG mechanism of one round.

    Poisson (Ganesh, Thm 3.1): sensitivity ``j`` w.p. ``Binomial(k, q)(j)``, ``j = 0..k``.
    Fixed batch (Ganesh, Thm 3.3): sensitivity ``2 j`` w.p. ``Hypergeom(B, n + k, k)(j)``,
    ``j = 0..k``: ``C(k, j) C(n, B - j) / C(n + k, B)``
    (:meth:`tightdp.dpsgd.setting.Sampling.sensitivity_distribution`).

    Components whose probability is exactly zero in floating point are left out.

    Returns
    -------
    (sensitivities, probabilities) as float arrays.
    """
    k, samp = _sampling(group_size, sampling, sampling_rate, batch_size, dataset_size)
    return samp.sensitivity_distribution(k)


def group_mechanism(group_size: int, *, noise_multiplier: float, sampling: str = "poisson",
                    sampling_rate: float | None = None, batch_size: int | None = None,
                    dataset_size: int | None = None) -> MixtureOfGaussians:
    """The scalar MoG mechanism dominating one round of DP-SGD for groups of up to
    ``group_size`` examples (Ganesh, Thm 3.1 for Poisson, Thm 3.3 for fixed batch; Def. 2.8).

    Parameters
    ----------
    group_size : k >= 1 (for fixed batch also k <= batch_size).
    noise_multiplier : sigma > 0, the noise standard deviation in units of the clip norm.
    sampling : "poisson" (needs ``sampling_rate`` in (0, 1], or ``batch_size`` and
        ``dataset_size``) or "fixed_batch" (needs ``batch_size`` and ``dataset_size`` >=
        ``batch_size``; the guarantee holds for every dataset of at least ``dataset_size``
        examples).
    """
    k, samp = _sampling(group_size, sampling, sampling_rate, batch_size, dataset_size)
    return samp.group_mechanism(k, noise_multiplier)


@dataclass
class GroupResult(Result):
    """Group-level eps of DP-SGD at a given delta, with the baselines of Ganesh, Sec. 4.

    ``epsilon`` is the certified upper bound (``= upper``); ``lower`` the certified lower
    bound of the true group eps. ``conversion`` is the Lemma 1.1 baseline (a certified but
    looser upper bound; ``inf`` when it could not be certified; None unless asked for with
    ``conversion=True``); ``linear_reference`` is
    ``k * example_epsilon``, the paper's "lower bound" line, a heuristic reference, not a
    certified bound (see the module docstring).
    """

    epsilon: float
    delta: float
    lower: float | None
    upper: float
    group_size: int
    noise_multiplier: float
    steps: int
    sampling: str
    sampling_rate: float | None
    batch_size: int | None
    dataset_size: int | None
    example_epsilon: float | None
    example_lower: float | None
    linear_reference: float | None
    conversion: float | None
    conversion_example_epsilon: float | None
    conversion_example_delta: float | None
    accountant: str
    certified: bool
    converged: bool
    seconds: float
    note: str = ""
    details: dict = field(default_factory=dict)

    def __float__(self) -> float:
        return float(self.epsilon)


def _log_geometric_sum(k: int, eps: float) -> float:
    """``log(1 + e^eps + ... + e^{(k-1) eps})`` (Vadhan 2017, Lemma 2.2 / Ganesh Lemma 1.1)."""
    return float(logsumexp(np.arange(k) * eps))


class ChernoffCurve:
    """A certified, cheap upper bound on the eps(delta) curve of ``steps`` compositions of
    ``mechanism``, good at very small delta, from the moment generating function of its
    dominating connect-the-dots pair (the form of the RDP-to-(eps, delta) conversion).

    For a composed loss ``S`` (P-law; ``+inf`` with probability at most ``T m``, ``m`` the
    per-step mass at ``+inf``), for every ``lam > 0``
    ``delta(eps) = E[(1 - e^{eps - S})_+] <= T m + c(lam) e^{-lam eps} M(lam)^T`` with
    ``M(lam) = E[e^{lam Y}; Y finite]`` and ``c(lam) = max_{z>0} (1 - e^{-z}) e^{-lam z}
    = (lam / (lam + 1))^lam / (lam + 1)`` (Canonne, Kamath, Steinke 2020, Prop. 12 / Asoodeh
    et al. 2021 for the constant; Chernoff for the rest). The connect-the-dots pair dominates
    the mechanism (Doroshenko et al. 2022), so its bound is the mechanism's. Both directions
    are bounded; eps is the larger.
    """

    def __init__(self, mechanism: Mechanism, steps: int, grid_step: float = 2e-3,
                 log_tail: float = math.log(1e-300), budget: Budget | None = None):
        from ..pld.discretize import connect_the_dots, loss_range
        budget = Budget() if budget is None else budget
        deadline = budget.deadline()
        self.steps = steps
        self.lams = np.geomspace(1e-3, 2e3, 1500)
        lc = self.lams * np.log(self.lams / (self.lams + 1)) - np.log1p(self.lams)
        self._rows = []
        rem, add = mechanism.privacy_losses()
        for loss in ((rem,) if rem is add else (rem, add)):
            lo, hi = loss_range(loss, log_tail)
            # the loss range at a 1e-300 tail on a fixed grid: wide for a small noise
            # multiplier (it grows like 1 / sigma^2), checked before it is discretized
            n = (hi - lo) / grid_step + 3.0
            budget.check_memory(n * CHERNOFF_BYTES_PER_POINT, "noise_multiplier",
                                f"the conversion baseline discretizes {n:.3g} points (more "
                                "for a smaller noise_multiplier); leave out conversion, "
                                "raise noise_multiplier or raise max_memory")
            pld = connect_the_dots(loss, grid_step, lo, hi)
            # the log-MGF at the 1500 tilts, a few at a time (each value does not depend on
            # the others): its time grows with the points, checked between the parts
            log_mgf = np.empty(self.lams.size)
            for a in range(0, self.lams.size, CHERNOFF_TILTS):
                deadline.check("noise_multiplier", "leave out conversion, raise "
                               "noise_multiplier or raise max_seconds")
                log_mgf[a:a + CHERNOFF_TILTS] = pld.log_mgf(self.lams[a:a + CHERNOFF_TILTS])
            self._rows.append((steps * log_mgf + lc, steps * pld.inf_mass))

    def epsilon(self, delta: float) -> float:
        """Certified upper bound on eps at ``delta`` (inf when none of the bounds reaches)."""
        worst = 0.0
        for log_terms, inf_total in self._rows:
            rest = delta - inf_total
            if not rest > 0:
                return math.inf
            e = float(np.min((log_terms - math.log(rest)) / self.lams))
            worst = max(worst, e)
        return worst


def group_conversion_epsilon(example_curve, group_size: int, delta: float,
                             refine=None, refine_steps: int = 2
                             ) -> tuple[float, float, float, dict]:
    """Group eps from an example-level curve by Lemma 1.1 (Ganesh; Vadhan 2017, Lemma 2.2).

    Finds ``delta1`` with ``delta1 * sum_{i<k} e^{i eps1(delta1)} <= delta``, ``eps1`` a
    certified upper example-level curve, and returns ``k * eps1(delta1)``: a certified upper
    bound on the group eps at ``delta``. Any such ``delta1`` gives one; the search aims at the
    largest (the smallest ``k eps1``).

    With ``t = log delta1`` and ``phi(t) = log delta - log sum_{i<k} e^{i eps1(e^t)}`` (an
    increasing function of ``t``) the feasible ``t`` are those with ``t <= phi(t)``. The
    iteration ``t <- phi(t)`` from ``t = log delta`` decreases to the largest fixed point;
    then a feasible point is found just below and bisection closes the gap. Finally up to
    ``refine_steps`` upward steps ``t <- phi(t)`` are taken with the curve
    ``min(example_curve, refine)`` (both certified upper curves; ``refine`` is typically the
    PLD accountant, tighter but slower): from a feasible point these stay feasible, and each
    is checked. The refinement is skipped when the example-level delta is below 1e-30.

    Parameters
    ----------
    example_curve : callable delta1 -> certified upper eps1 (cheap; e.g.
        :meth:`ChernoffCurve.epsilon`).
    refine : optional callable delta1 -> certified upper eps1 (expensive).

    Returns
    -------
    (k * eps1, eps1, delta1, info); ``(inf, inf, nan, info)`` if no finite value was found.
    """
    k = v.count("group_size", group_size, minimum=1)
    delta = v.delta_value("delta", delta)
    log_delta = math.log(delta)
    info: dict = {"evaluations": 0, "refinements": 0}
    tiny = math.log(np.finfo(float).tiny)

    def curve(t: float, fn) -> float:
        if t < tiny:
            return math.inf
        info["evaluations"] += 1
        return float(fn(math.exp(t)))

    def phi_of(e: float) -> float:
        return -math.inf if math.isinf(e) else log_delta - _log_geometric_sum(k, e)

    best: tuple[float, float] | None
    if k == 1:
        best = (log_delta, curve(log_delta, example_curve))
    else:
        best = _largest_feasible(lambda t: curve(t, example_curve), phi_of, log_delta)
    if best is None:
        return math.inf, math.inf, math.nan, info
    if refine is not None and best[0] >= REFINE_BELOW_LOG:
        best = _refined(best, lambda t, fn: curve(t, fn), phi_of, example_curve, refine,
                        steps=refine_steps if k > 1 else 0, info=info)
    t, e = best
    if k > 1 and not t <= phi_of(e):  # every accepted point was checked; defensive only
        return math.inf, math.inf, math.nan, info
    return k * e, e, math.exp(t), info


def _largest_feasible(eps1_of: Callable[[float], float], phi_of: Callable[[float], float],
                      log_delta: float) -> tuple[float, float] | None:
    """The search of :func:`group_conversion_epsilon` for ``k > 1``: ``(t, eps1(e^t))`` at a
    feasible ``t`` (``t <= phi(t)``) near the largest fixed point, or None if none was found.
    ``eps1_of(t)`` is the cheap curve at ``delta1 = e^t``, ``phi_of(eps1)`` the bound on
    ``t`` it gives."""
    eps_at: dict[float, float] = {}  # the cheap curve at each t, evaluated once

    def eps1(t: float) -> float:
        if t not in eps_at:
            eps_at[t] = eps1_of(t)
        return eps_at[t]

    def feasible(t: float) -> bool:
        return t <= phi_of(eps1(t))

    def infeasible_finite(t: float) -> bool:
        p = phi_of(eps1(t))
        return math.isfinite(p) and not t <= p

    # t <- phi(t) from log delta down to the largest fixed point
    t_hi, found = descend_to_fixed_point(lambda t: phi_of(eps1(t)), log_delta)
    if found:
        return (t_hi, eps_at[t_hi])
    if not math.isfinite(t_hi):
        return None
    # a feasible point below: steps growing 4-fold to the left (at most 40 tried; a
    # non-finite phi ends the walk without one)
    t_hi, t_lo = step_out(infeasible_finite, t_hi, -max(1e-3, 1e-4 * abs(t_hi)),
                          growth=4.0, max_moves=39, on_limit="return")
    if not feasible(t_lo):
        return None
    # bisection between the feasible t_lo and the infeasible t_hi, until eps1 differs by a
    # relative 1e-6 across the bracket; the feasible end is kept
    t_lo, t_hi = bisect_until(
        feasible, t_lo, t_hi,
        lambda a, b: eps_at[a] - eps1(b) <= 1e-6 * eps_at[a] + 1e-12, iters=60)
    return (t_lo, eps_at[t_lo])


def _refined(best: tuple[float, float], curve: Callable, phi_of: Callable[[float], float],
             example_curve: Callable, refine: Callable, *, steps: int, info: dict
             ) -> tuple[float, float]:
    """The refinement of :func:`group_conversion_epsilon`: eps1 at the feasible ``best[0]``
    taken as ``min(example_curve, refine)``, then up to ``steps`` upward steps
    ``t <- phi(t)`` on that curve, each kept only if checked feasible and no worse."""
    t, e = best
    e_ref = min(e, curve(t, refine))
    info["refinements"] += 1
    best = (t, e_ref)
    for _ in range(steps):
        t_new = phi_of(best[1])
        if not t_new > best[0]:
            break
        e_new = min(curve(t_new, example_curve), curve(t_new, refine))
        info["refinements"] += 1
        if t_new <= phi_of(e_new) and e_new <= best[1]:
            best = (t_new, e_new)
        else:
            break
    return best


@v.known_keywords()
def group_epsilon(*, group_size: int, noise_multiplier: float, delta: float,
                  steps: int | None = None, epochs: float | None = None,
                  sampling: str = "poisson", sampling_rate: float | None = None,
                  batch_size: int | None = None, dataset_size: int | None = None,
                  steps_per_epoch: int | None = None, selected: int | None = None,
                  max_batch_size: int | None = None, rtol: float = DEFAULT_RTOL,
                  baselines: bool = True, conversion: bool = False,
                  refine_conversion: bool = True, max_memory=None,
                  max_seconds=None) -> GroupResult:
    """Certified group-level (eps, delta) of DP-SGD (Ganesh, Thm 3.1 / Thm 3.3), under
    add-up-to-k and remove-up-to-k adjacency (the max of both).

    Parameters
    ----------
    group_size : k >= 1, the largest group protected (k = 1 is example-level DP).
    noise_multiplier : sigma > 0 (noise std in units of the clip norm), used as given for both
        samplings (the paper's Sec. 4 doubles it for fixed batch: pass ``2 * sigma`` for that).
    steps, epochs : T >= 0 rounds (every iterate released), or epochs (see
        :func:`tightdp.dpsgd.setting.steps_of_epochs`); exactly one.
    delta : target delta in (0, 1).
    sampling : "poisson" with ``sampling_rate`` q in (0, 1] (or ``batch_size`` and
        ``dataset_size``, q = B / n), or "fixed_batch" with ``batch_size`` B >= k and
        ``dataset_size`` n >= B (guarantee for every dataset of at least n examples). The
        other samplings (random_allocation, shuffle, truncated_poisson, and the replace-one
        ones) have no group analysis here and are refused in one line.
    steps_per_epoch, selected, max_batch_size : as for :func:`tightdp.dpsgd_epsilon`
        (validated, then refused with their sampling).
    rtol : relative width of the certified bracket (PLDAccountant).
    baselines : also compute the example-level eps and the linear reference (k = 1 needs no
        extra work).
    conversion : also compute the Lemma 1.1 conversion baseline (with ``baselines``). Off by
        default: it needs the example-level curve at very small delta, which costs far more
        than the group query itself (docs/pld-constants.md gives an example); without it
        ``conversion`` and its two companions are None.
    refine_conversion : tighten the conversion baseline with PLD queries at the small
        example-level delta it needs (slower; without it the example-level curve there is the
        moment bound of :class:`ChernoffCurve`, still certified).
    max_memory, max_seconds : the budget of each accountant query (see
        :mod:`tightdp.budget`; default 2 GB and 60 s).

    Returns
    -------
    GroupResult

    Examples
    --------
    >>> r = group_epsilon(group_size=2, noise_multiplier=1.0, steps=100, delta=1e-6,
    ...                   sampling_rate=0.01, rtol=1e-2, conversion=True)
    >>> r.lower <= r.epsilon <= r.conversion
    True
    """
    k = v.count("group_size", group_size, minimum=1)
    return group_epsilons(
        group_sizes=[k], noise_multiplier=noise_multiplier, delta=delta, steps=steps,
        epochs=epochs, sampling=sampling, sampling_rate=sampling_rate, batch_size=batch_size,
        dataset_size=dataset_size, steps_per_epoch=steps_per_epoch, selected=selected,
        max_batch_size=max_batch_size, rtol=rtol, baselines=baselines, conversion=conversion,
        refine_conversion=refine_conversion, max_memory=max_memory,
        max_seconds=max_seconds)[0]


class _ExampleLevel:
    """The example-level accountant and moment curve of one :func:`group_epsilons` call,
    built on first use and shared by its group sizes (the accountant keeps its
    discretizations and compositions for the conversion's many queries); it lives only as
    long as the call."""

    def __init__(self, setting: DPSGDSetting, rtol: float, mem: int, sec: float):
        self.setting, self.rtol, self.mem, self.sec = setting, rtol, mem, sec
        self._acc: PLDAccountant | None = None
        self._chernoff: ChernoffCurve | None = None

    def accountant(self) -> PLDAccountant:
        if self._acc is None:
            self._acc = PLDAccountant(self.rtol, max_points=CONVERSION_MAX_POINTS,
                                      max_memory=self.mem, max_seconds=self.sec).compose(
                self.setting.mechanism(), self.setting.steps)
        return self._acc

    def chernoff(self) -> ChernoffCurve:
        if self._chernoff is None:
            self._chernoff = ChernoffCurve(self.setting.mechanism(), self.setting.steps,
                                           budget=Budget(self.mem, self.sec))
        return self._chernoff


@v.known_keywords()
def group_epsilons(*, group_sizes, noise_multiplier: float, delta: float,
                   steps: int | None = None, epochs: float | None = None,
                   sampling: str = "poisson", sampling_rate: float | None = None,
                   batch_size: int | None = None, dataset_size: int | None = None,
                   steps_per_epoch: int | None = None, selected: int | None = None,
                   max_batch_size: int | None = None, rtol: float = DEFAULT_RTOL,
                   baselines: bool = True, conversion: bool = False,
                   refine_conversion: bool = True, max_memory=None, max_seconds=None
                   ) -> list[GroupResult]:
    """:func:`group_epsilon` for several group sizes of one setting, one
    :class:`GroupResult` each (in the order given). The example-level accountant and moment
    curve of the baselines are built once for all of them, which makes a sweep over ``k``
    (Ganesh, Sec. 4) several times faster than one call per ``k``.

    Examples
    --------
    >>> rs = group_epsilons(group_sizes=[2, 4], noise_multiplier=1.0, steps=100, delta=1e-6,
    ...                     sampling_rate=0.01, rtol=1e-2)
    >>> rs[0].epsilon < rs[1].epsilon
    True
    """
    setting = dpsgd_setting(noise_multiplier=noise_multiplier, steps=steps, epochs=epochs,
                            sampling_rate=sampling_rate, batch_size=batch_size,
                            dataset_size=dataset_size, sampling=sampling,
                            steps_per_epoch=steps_per_epoch, selected=selected,
                            max_batch_size=max_batch_size)
    ks = [v.count("group_sizes", k, minimum=1) for k in np.atleast_1d(group_sizes).tolist()]
    if not ks:
        raise ValueError("group_sizes must hold at least one group size")
    for k in ks:  # poisson or fixed_batch; k <= batch_size: checked before any work
        setting.sampling.sensitivity_distribution(k)
    delta = v.delta_value("delta", delta)
    rtol = v.positive("rtol", rtol)
    for name, flag in (("baselines", baselines), ("conversion", conversion),
                       ("refine_conversion", refine_conversion)):
        if not isinstance(flag, bool):
            raise ValueError(f"{name} must be True or False, got {flag!r}")
    budget = Budget.make(max_memory, max_seconds)  # validated once, passed on as numbers
    mem, sec = budget.max_memory, budget.max_seconds
    example = _ExampleLevel(setting, rtol, mem, sec)
    return [_group_result(setting, k, delta, rtol, mem, sec, baselines, conversion,
                          refine_conversion, example) for k in ks]


def _float_or_none(x) -> float | None:
    """A bound as a float, None where the accountant has none (e.g. the closed-form answer
    of a composition beyond every accountant's numerics)."""
    return None if x is None else float(x)


def _bound(x: float | np.ndarray | None) -> float:
    """The PLD accountant's upper bound of a one-delta answer (always given), as a float."""
    return float(cast(float, x))


def _group_result(setting: DPSGDSetting, k: int, delta: float, rtol: float, mem: int,
                  sec: float, baselines: bool, conversion: bool, refine_conversion: bool,
                  example: _ExampleLevel) -> GroupResult:
    """One group size of :func:`group_epsilons` (arguments validated there)."""
    t0 = time.perf_counter()
    samp, sigma, steps = setting.sampling, setting.noise_multiplier, setting.steps
    sens, probs = samp.sensitivity_distribution(k)
    acc = PLDAccountant(rtol, max_memory=mem, max_seconds=sec).compose(
        setting.group_mechanism(k), steps)
    r = acc.epsilon(delta)
    notes = [r.note] if r.note else []
    details = {"group": r.details, "sensitivities": sens.tolist(),
               "probabilities": probs.tolist()}
    ex_eps = ex_lo = lin = conv = conv_e = conv_d = None
    if baselines:
        if k == 1 or steps == 0:
            ex_eps, ex_lo = _bound(r.upper), _float_or_none(r.lower)
            if conversion:
                conv, conv_e, conv_d = _bound(r.upper), _bound(r.upper), delta
        else:
            acc1 = example.accountant()
            r1 = acc1.epsilon(delta)
            ex_eps, ex_lo = _bound(r1.upper), _float_or_none(r1.lower)
            details["example"] = r1.details
        if conversion and k > 1 and steps > 0:
            conv, conv_e, conv_d, cinfo = group_conversion_epsilon(
                example.chernoff().epsilon, k, delta,
                refine=(lambda d1: acc1.epsilon(d1).upper) if refine_conversion else None)
            details["conversion"] = cinfo
            if math.isinf(conv):
                notes.append("conversion baseline: no finite certified value (example-level "
                             "eps at the needed delta1 could not be certified)")
        lin = k * ex_eps
    return GroupResult(
        epsilon=_bound(r.upper), delta=delta, lower=_float_or_none(r.lower),
        upper=_bound(r.upper),
        group_size=k, noise_multiplier=sigma, steps=steps, sampling=samp.kind,
        sampling_rate=samp.sampling_rate if samp.kind == "poisson" else None,
        batch_size=samp.batch_size, dataset_size=samp.dataset_size, example_epsilon=ex_eps,
        example_lower=ex_lo,
        linear_reference=lin, conversion=conv, conversion_example_epsilon=conv_e,
        conversion_example_delta=conv_d, accountant=r.accountant, certified=r.certified,
        converged="converged" not in r.details or bool(r.details["converged"]),
        seconds=time.perf_counter() - t0, note="; ".join(notes), details=details)

