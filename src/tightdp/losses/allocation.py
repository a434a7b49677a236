"""Laws of the sum statistic of random allocation with Gaussian noise, on a lattice.

Random allocation (Feldman & Shenfeld 2025, arXiv 2502.08202; Chua et al. 2025, arXiv
2412.16802): an example takes part in ``k`` of ``t`` steps chosen uniformly; the output is
``x in R^t`` with noise ``N(0, sigma^2 I)`` and the example's contribution ``1_S``. With
``w_i = exp((x_i - 1/2) / sigma^2)`` (the likelihood ratio of coordinate ``i``) the
coordinates are iid lognormal under Q = N(0, sigma^2 I): ``log w ~ N(-a, 2a)``,
``a = 1 / (2 sigma^2)``, ``E w = 1``; under P a uniformly chosen k-subset is shifted, and a
shifted coordinate has ``log w ~ N(a, 2a)``. For ``k = 1`` the likelihood ratio is
``dP/dQ = S / t`` with ``S = sum_i w_i`` (Feldman & Shenfeld 2025, Sec. 5), so both
directions of the pair are functions of the law of ``S`` under Q.

Each ``w_i`` is rounded at random to the lattice ``h Z`` keeping its mean (to ``n h`` or
``(n + 1) h`` with the weights of linear interpolation: the pmf of one coordinate is
``E[(1 - |w/h - n|)_+]``, in closed form from the lognormal's CDF and partial mean); the
sum ``T`` of the rounded coordinates has the exact law of a ``t``-fold convolution, computed
by one FFT. The lognormal's tail is too heavy for one lattice: the laws are split exactly
by the number ``N`` of coordinates above a cap ``c`` (:func:`_plan`): on ``N = 0`` the
``t``-fold convolution of the capped pmf (one FFT on a window of the body), on ``N = 1``
the body of the others plus the large one, resolved relatively, octave by octave
(:mod:`tightdp.losses.allocation_tail`), and ``N >= 2`` (P-mass below 1e-16 where the
lattice fits) left to the pairs' completions. Two pairs follow (:func:`allocation_pairs`):

* upper (dominating): ``E[h T | x] = S``, so by Jensen ``E f(h T) >= E f(S)`` for every
  convex ``f``; both directions' hockey-stick divergences are ``E_Q f(S)`` with ``f`` convex
  (``(S/t - e^eps)_+`` and ``(1 - e^eps S/t)_+``), so the pair ``Q' = law_Q(h T)``,
  ``P' = Q' s / t`` (a probability: ``E_Q[h T] = t``) dominates both directions (convex
  order, Shaked & Shanthikumar 2007, Sec. 3.A). Its excess is second order in ``h``.
* lower (dominated up to a slack): ``T`` itself is a post-processing of the output, with the
  exact laws ``p^{*t}`` under Q and ``m^{*k} * p^{*(t-k)}`` under P (``p``, ``m``: the
  rounded laws of a plain and of a shifted coordinate); the computed laws are within a
  bounded total-variation distance of them (:func:`lower_pair`), which the answers
  subtract.

The FFT's rounding error is bounded per output value as the engine bounds its own
(Koskela et al. 2020, Alg. 1; the bound of :mod:`tightdp.pld.transform`) and in Euclidean
norm (Parseval), and the mass the circular convolution folds into the window by a Chernoff
bound. Per point they exceed the far tail's masses, so rather than taking them off every
point both pairs are built from the computed laws as they are and carry their total
(L1) effect as a slack on delta (:func:`upper_pair`, :func:`lower_pair`), which the answers
add (upper) and subtract (lower). The pair without slack of :func:`upper_pair`
(``pointwise``) takes them off every point instead (a measure below the exact law,
completed by the extreme spread of the remainder: still above it in convex order).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy import fft as sfft
from scipy.special import ndtr, ndtri

from .._numerics import UNIT_ROUNDOFF
from .allocation_bounds import THETAS, mass_above, mass_below, mgf_table, window_bottom
from .allocation_tail import TailPart, octaves, tail_part
from .discrete import DiscreteLoss

__all__ = ["AllocationLattice", "allocation_lattice", "allocation_pairs"]

#: largest FFT length of one lattice (3 2^17: 6 MB per long-double array; the time of a
#: query at small noise, where the cap makes the window long, is about proportional)
MAX_LATTICE = 3 << 17
#: the targets, in order, for the P-mass of two large coordinates and of the tail beyond
#: the lattice (both left to the pairs' completions: sent to +inf by the upper side)
_TAILS = (1e-16, 1e-14, 1e-12, 1e-10)
#: the body's window reaches this fraction of the cap beyond the cap plus the body of the
#: sum: the sum leaves it only with one coordinate near the cap and the others far above
#: their body (the fold bounds of :func:`.allocation_bounds.mass_above`)
_MARGIN = 0.125
#: the tail's atoms per octave: its relative resolution (:mod:`.allocation_tail`)
_CELLS = 1024
#: at most this many octaves (a tail beyond is left to the pairs' completions: at small
#: noise only, where no amplification is the better upper bound anyway)
_OCTAVES = 40
#: constant of the FFT's pointwise error bound ``c u log2(N) sum |x|`` (as pld/transform.py)
_C_FFT = 4.0
#: unit roundoff of numpy's long double (2^-64 on x86-64, double's where they agree)
_U_LONG = float(np.finfo(np.longdouble).eps) / 2.0
#: lower side: an atom is kept where its masses exceed their FFT rounding bound this many
#: times (the loss values of the others would be noise: they are merged)
_RELIABLE = 1e2


class AllocationLattice(NamedTuple):
    """The laws of the rounded sum: on ``N = 0`` (every coordinate at most the cap of
    :func:`_plan`) on the window ``lo .. lo + len - 1`` of ``h Z``, ``q`` under Q, ``p``
    under P (None unless asked); on ``N = 1`` ``tail_q`` and ``tail_p``
    (:class:`~tightdp.losses.allocation_tail.TailPart`, with their own error bounds). The
    computed values of ``q`` (``p``) differ from the circular convolution's exact ones by
    at most ``fft_q`` (``fft_p``) at every point and by a vector of Euclidean norm at most
    ``l2_q`` (``l2_p``), up to a relative ``u`` each (the rounding to double); the circular
    convolution differs from the exact measure on the window by a measure of total mass at
    most ``out_q`` (``out_p``): the mass outside the window, folded onto it."""

    h: float
    lo: int
    q: np.ndarray
    p: np.ndarray | None
    fft_q: float
    fft_p: float
    l2_q: float
    l2_p: float
    out_q: float
    out_p: float
    tail_q: TailPart
    tail_p: TailPart | None

    @property
    def err_q(self) -> float:
        """A bound on the error of every point of ``q`` (FFT rounding plus folded mass)."""
        return self.fft_q + self.out_q

    @property
    def err_p(self) -> float:
        """A bound on the error of every point of ``p``."""
        return self.fft_p + self.out_p


def _phi_diffs(z: np.ndarray) -> np.ndarray:
    """``Phi(z[i+1]) - Phi(z[i])`` for increasing ``z``, on the side where it is small (no
    cancellation in the upper tail)."""
    lower, upper = ndtr(z), ndtr(-z)
    return np.where(z[:-1] > 0, upper[:-1] - upper[1:], lower[1:] - lower[:-1])


def rounded_lognormal(mean_log: float, var_log: float, h: float, n_top: int,
                      n_lo: int = 0) -> np.ndarray:
    """pmf on ``n_lo .. n_top`` of ``w`` (``log w ~ N(mean_log, var_log)``) restricted to
    ``(n_lo h, n_top h]`` and rounded at random to ``h Z`` keeping its mean: cell
    ``[n h, (n+1) h]`` sends ``A_n - B_n`` to ``n`` and ``B_n = E[w/h - n; cell]`` to
    ``n + 1``, with ``A_n`` its probability; the partial mean is
    ``E[w; w <= c] = e^{m + v/2} Phi((log c - m - v)/sqrt v)`` (lognormal). The mass outside
    is left out (the result is the measure of the rounded ``w`` on that event)."""
    s = math.sqrt(var_log)
    cells = np.arange(n_lo, n_top, dtype=float)
    edges = h * np.arange(n_lo, n_top + 1, dtype=float)
    with np.errstate(divide="ignore"):
        z = (np.log(edges) - mean_log) / s
    a = _phi_diffs(z)
    mom = math.exp(min(mean_log + var_log / 2.0, 700.0)) / h * _phi_diffs(z - s)
    b = np.clip(mom - cells * a, 0.0, a)  # float guard: B in [0, A]
    pmf = np.zeros(n_top - n_lo + 1)
    pmf[:-1] += a - b
    pmf[1:] += b
    return pmf


def _power(f: np.ndarray, k: int) -> np.ndarray:
    """``f ** k`` by repeated squaring: at most ``2 log2 k`` products, each a relative error
    of at most ``4u`` (the per-product error :func:`_fft_error` charges ``k`` times: an
    addition chain's errors compound to at most ``(1 + 4u)^(k-1)``)."""
    if k < 0:
        raise ValueError(f"an allocation lattice needs more steps than selected ones "
                         f"(a power {k} of a transform)")
    out = None
    base = f
    while k:
        if k & 1:
            out = base if out is None else out * base
        k >>= 1
        if k:
            base = base * base
    return np.ones_like(f) if out is None else out


def _spectrum_logs(f: np.ndarray, l1: float, n: int, u: float
                   ) -> tuple[np.ndarray, np.ndarray]:
    """``(log a, log(1 + 4u + e / a))`` of one forward transform ``f`` of a vector of L1
    norm ``l1`` (``a = |f|``, ``e`` its coefficients' error bound: :func:`_fft_error`),
    computed once per transform and shared by the laws built from it."""
    a = np.abs(f).astype(float)
    e = (_C_FFT * math.log2(max(n, 2)) + 4.0) * u * l1
    with np.errstate(divide="ignore"):
        return np.log(a), np.log1p(4.0 * u + e / np.maximum(a, 1e-300))


def _fft_error(specs, n: int, u: float) -> tuple[float, float]:
    """Bound on the floating-point error of every value of ``irfft(prod_i F_i^k_i)``
    (the bound of :func:`tightdp.pld.transform.circular_product`): forward coefficients
    within ``e_i = (c log2 n + 4) u sum|x_i|``, a relative ``4u`` per product, so the
    coefficient error is ``prod_i (a_i (1 + 4u) + e_i)^k_i - prod_i a_i^k_i``; the inverse
    adds its mean over the spectrum and ``c u log2 n`` times the mean magnitude. The
    transforms and the products run in long double (unit roundoff ``u``); rounding the
    result to double is a relative error of each value, which the callers charge.

    Returns ``(pointwise, l2)``: the bound at every value, and a bound on the Euclidean norm
    of the error vector, ``(||dY||_2 + (c log2 n + 4) u ||Y||_2) / sqrt(n)`` (Parseval, and
    the normwise error of the inverse transform, Higham 2002, Thm. 24.2), the norms over
    the whole spectrum."""
    lg2 = math.log2(max(n, 2))
    la = dl = 0.0
    for (log_a, log_e), k in specs:   # the logs of :func:`_spectrum_logs`
        if not k:
            continue
        with np.errstate(invalid="ignore"):
            la = la + k * log_a
        dl = dl + k * log_e
    # magnitudes below e^-300 raised to it: a larger bound, and no subnormal arithmetic
    la = np.maximum(la, -300.0)
    with np.errstate(over="ignore"):
        err = np.exp(la) * np.expm1(np.minimum(dl, 700.0))
    err = np.where(dl < 700.0, err, np.exp(np.minimum(la + dl, 700.0)))
    mag = np.exp(la)
    # rfft holds half the spectrum: interior frequencies count twice in the mean
    w = np.full(err.size, 2.0)
    w[0] = 1.0
    if n % 2 == 0:
        w[-1] = 1.0
    # weighted sums by numpy's pairwise summation (a BLAS dot may spin up its threads)
    pointwise = float((w * err).sum() / n
                      + (_C_FFT * u * lg2 + 2.0 * u) * (w * mag).sum() / n)
    l2 = float((math.sqrt((w * err * err).sum()) + (_C_FFT * lg2 + 4.0) * u
                * math.sqrt((w * mag * mag).sum())) / math.sqrt(n))
    return pointwise, l2


def _cap(a: float, t: int, k: int, target: float) -> float:
    """The smallest ``c`` (by bisection in ``log c``) at which the probability of two
    coordinates above it is at most ``target`` under P (``k`` shifted) and Q: by the union
    bound over pairs, ``P(N >= 2) <= sum_{i<j} p_i p_j``, with ``p_i = P(w_i > c)``
    (``p0`` plain, ``p1`` shifted)."""
    sd = math.sqrt(2.0 * a)
    lo_l, hi_l = -a, a + 40.0 * sd
    for _ in range(60):
        mid = 0.5 * (lo_l + hi_l)
        p0, p1 = float(ndtr(-(mid + a) / sd)), float(ndtr(-(mid - a) / sd))
        pairs = max((t - k) * (t - k - 1) / 2.0 * p0 * p0 + (t - k) * k * p0 * p1
                    + k * (k - 1) / 2.0 * p1 * p1, t * (t - 1) / 2.0 * p0 * p0)
        lo_l, hi_l = (lo_l, mid) if pairs <= target else (mid, hi_l)
    return math.exp(min(hi_l, 700.0))


class _Plan(NamedTuple):
    """The lattice of :func:`_plan`: step ``h``, the cap ``c = cells 2^e0 h`` of the body's
    coordinates, the body window's top index ``n_top`` and the tail's top ``w_top``."""

    h: float
    cells: int
    e0: int
    n_top: int
    w_top: float


def _plan(sigma: float, steps: int, selected: int, rtol: float) -> _Plan:
    """Lattice step ``h``: the rounding adds variance at most ``t h^2 / 4`` to ``S`` against
    ``Var S = t (e^{2a} - 1)``, a relative change of the curve of order ``h^2 / (8 Var w)``,
    kept below ``rtol / 4``. The body's coordinates are capped at ``c`` (:func:`_cap`: the
    event of two large coordinates, left to the pairs' completions, below P-mass
    :data:`_TAILS`, the first that fits :data:`MAX_LATTICE` points with ``h`` at most 16
    times its target); its window covers the body of ``S`` (``t + 24 sd``) plus ``c``; the
    tail (:mod:`tightdp.losses.allocation_tail`) reaches a shifted coordinate's quantile of
    that P-mass. ``c`` is rounded up to ``cells 2^e0 h`` with ``cells`` in
    ``[_CELLS, 2 _CELLS]`` (the octaves' resolution)."""
    t, k = steps, selected
    a = 1.0 / (2.0 * sigma * sigma)
    var_w = math.expm1(min(2.0 * a, 700.0))
    h0 = math.sqrt(rtol * min(var_w, 1e300))
    body = t + 24.0 * math.sqrt(t * min(var_w, 1e300))
    # the window's bottom is at least this (Chernoff for a sum of nonnegative variables:
    # P(S <= t - x) <= exp(-x^2 / (2 t E w^2)), below 1e-30)
    bottom = max(t - math.sqrt(138.0 * t * (min(var_w, 1e300) + 1.0)), 0.0)
    for target in _TAILS:
        c = _cap(a, t, k, target)
        # the cap rounds up to at most c (1 + 1/_CELLS) + h: the window fits the points
        h = max(h0, (body + c * (1.0 + _MARGIN + 1.0 / _CELLS) - bottom) / (MAX_LATTICE - 4))
        if h <= 16.0 * h0:
            break
    c = max(c, _CELLS * h)
    e0 = max(int(math.floor(math.log2(c / (_CELLS * h)))), 0)
    cells = int(math.ceil(c / (h * (1 << e0))))
    w_top = math.exp(min(a + math.sqrt(2.0 * a) * -float(ndtri(target / k)), 700.0))
    return _Plan(h, cells, e0, int(math.ceil((body + _MARGIN * c) / h)) + (cells << e0),
                 w_top)


def _body_laws(pq: np.ndarray, pp: np.ndarray | None, t: int, k: int, lo: int, n: int
               ) -> dict[str, tuple[np.ndarray, float, float, list]]:
    """The body's laws on the window ``lo .. lo + n - 1`` by one FFT of each coordinate's
    capped pmf (long double): ``q0`` (``t`` plain coordinates: the Q-law on ``N = 0``),
    ``q1`` (``t - 1``: the others of one large one under Q) and, with ``pp``, ``p0``
    (``t - k`` plain, ``k`` shifted: the P-law on ``N = 0``), ``pu`` (one plain fewer) and
    ``ps`` (one shifted fewer). Each as (values, :func:`_fft_error`'s pointwise and
    Euclidean bounds, the counts [(pmf index, count)])."""
    fq = sfft.rfft(_fold(pq, n).astype(np.longdouble))
    sq = float(pq.sum())
    if pp is None:
        q1 = _power(fq, t - 1)
        specs = {"q0": (q1 * fq, [(0, t)]), "q1": (q1, [(0, t - 1)])}
        sums = [_spectrum_logs(fq, sq, n, _U_LONG)]
    else:
        fp = sfft.rfft(_fold(pp, n).astype(np.longdouble))
        base, fpk1 = _power(fq, t - k - 1), _power(fp, k - 1)
        q1, pu = base * _power(fq, k), base * (fpk1 * fp)
        specs = {"q0": (q1 * fq, [(0, t)]), "q1": (q1, [(0, t - 1)]),
                 "p0": (pu * fq, [(0, t - k), (1, k)]), "pu": (pu, [(0, t - k - 1), (1, k)]),
                 "ps": (base * fq * fpk1, [(0, t - k), (1, k - 1)])}
        sums = [_spectrum_logs(fq, sq, n, _U_LONG),
                _spectrum_logs(fp, float(pp.sum()), n, _U_LONG)]
    out: dict[str, tuple[np.ndarray, float, float, list]] = {}
    for name, (spec, counts) in specs.items():
        if name == "ps" and k == 1:   # one shifted fewer of one: the Q-law of q1
            out[name] = (*out["q1"][:3], counts)
            continue
        law = np.roll(sfft.irfft(spec, n=n).astype(float), -(lo % n))
        pw, l2 = _fft_error([(sums[i], c) for i, c in counts], n, _U_LONG)
        out[name] = (law, pw, l2, counts)
    return out


def allocation_lattice(sigma: float, steps: int, selected: int, rtol: float, *,
                       with_p: bool) -> AllocationLattice:
    """The laws of the rounded sum (module docstring) of ``steps`` coordinates, ``selected``
    of them shifted under P, on the lattice of :func:`_plan`: the body (``N = 0``) by one
    FFT, the part with one large coordinate (``N = 1``) by
    :func:`tightdp.losses.allocation_tail.tail_part`; ``with_p`` also computes the P-law
    (the lower side's)."""
    t, k = steps, selected
    plan = _plan(sigma, t, k if with_p else 1, rtol)
    h, n_cap = plan.h, plan.cells << plan.e0
    a = 1.0 / (2.0 * sigma * sigma)
    pmfs = [rounded_lognormal(-a, 2.0 * a, h, n_cap)]
    if with_p:
        pmfs.append(rounded_lognormal(a, 2.0 * a, h, n_cap))
    tabs = [mgf_table(pmf, THETAS) for pmf in pmfs]
    # at most MAX_LATTICE points: a window cut short leaves more mass below it, charged
    lo = max(window_bottom(tabs[0].bounds(), t, h), plan.n_top + 1 - MAX_LATTICE)
    n = int(sfft.next_fast_len(max(plan.n_top - lo + 1, 2), real=True))
    laws = _body_laws(pmfs[0], pmfs[1] if with_p else None, t, k, lo, n)
    # above the window: the bound for all the variables of a law covers its sub-sums (the
    # variables are nonnegative), divided by the mass of the capped pmf left out (the laws
    # are sub-probabilities: mu_{-1}(A) |pmf| <= mu(A + pmf) for an upper set A)
    above = [mass_above([(pmfs[0], tabs[0], t)], lo + n)]
    if with_p:
        above.append(mass_above([(pmfs[0], tabs[0], t - k), (pmfs[1], tabs[1], k)], lo + n))
    mass = [float(pmf.sum()) * (1.0 - 1e-12) for pmf in pmfs]
    fewer = {"q0": above[0], "q1": above[0] / mass[0]}
    if with_p:
        fewer.update(p0=above[1], pu=above[1] / mass[0], ps=above[1] / mass[1])
    outs = {name: mass_below([(pmfs[i], tabs[i], c) for i, c in counts], lo) + fewer[name]
            for name, (_, _, _, counts) in laws.items()}
    n_oct = min(octaves(plan.cells, plan.e0, h, plan.w_top), _OCTAVES)
    ws = [[rounded_lognormal(m, 2.0 * a, h * float(1 << (plan.e0 + j)), 2 * plan.cells,
                             plan.cells) for m in ((-a, a) if with_p else (-a,))]
          for j in range(n_oct)]

    def body(name: str, count: int) -> tuple[float, np.ndarray, float, float]:
        law, pw, l2, _ = laws[name]
        u = UNIT_ROUNDOFF
        e_sum = _l1(pw, l2, np.ones(n)) + outs[name] + u * float(np.abs(law).sum())
        return count, law, e_sum, pw + outs[name] + u * float(np.abs(law).max())

    tail_q = tail_part([body("q1", t)], lo, h, plan.e0, plan.cells, [[w[0]] for w in ws])
    p = tail_p = None
    fft_p = l2_p = out_p = math.inf
    if with_p:
        p, fft_p, l2_p, _ = laws["p0"]
        out_p = outs["p0"]
        tail_p = tail_part([body("pu", t - k), body("ps", k)], lo, h, plan.e0, plan.cells,
                           [[w[0], w[1]] for w in ws])
    q, fft_q, l2_q, _ = laws["q0"]
    return AllocationLattice(h, lo, q, p, fft_q, fft_p, l2_q, l2_p, outs["q0"], out_p,
                             tail_q, tail_p)


def _l1(pointwise: float, l2: float, weights: np.ndarray) -> float:
    """Bound on ``sum_j |e_j| weights_j`` for an error vector ``e`` bounded by ``pointwise``
    at every point and by ``l2`` in Euclidean norm (Cauchy-Schwarz), ``weights >= 0``."""
    l2_part = l2 * math.sqrt(float((weights * weights).sum()))
    return min(pointwise * float(weights.sum()), l2_part) * (1.0 + 1e-12)


def _fold(pmf: np.ndarray, n: int) -> np.ndarray:
    """``pmf`` folded modulo ``n`` (atom ``i`` to position ``i mod n``)."""
    if pmf.size <= n:
        out = np.zeros(n)
        out[:pmf.size] = pmf
        return out
    pad = -pmf.size % n
    return np.concatenate([pmf, np.zeros(pad)]).reshape(-1, n).sum(axis=0)


def upper_pair(lat: AllocationLattice, steps: int, *, pointwise: bool = False
               ) -> tuple[tuple[DiscreteLoss, DiscreteLoss], tuple[float, float]]:
    """The dominating pair of the module docstring from the Q-law of the rounded sum, and
    how far the computed one may be from it.

    With ``mu`` the exact law of ``h T`` and ``mu_in`` its part on the window, the pair
    ``Q* = mu_in + (1 - |mu_in|) delta_0``, ``P* = mu_in s/t + (1 - M1(mu_in)/t)
    delta_inf`` dominates both directions: the part outside the window is replaced by its
    extreme spread (its mass at ``s = 0``, its first moment at ``s = +inf``), above it in
    convex order for the two directions' integrands (convex, at most their value at 0 plus
    their slope at infinity times ``s``). The pair returned is the same built from the
    computed law ``nu`` (clipped at 0, scaled down if its mass or mean exceed 1 or ``t``).
    ``nu`` differs from ``mu_in`` by the FFT error (:func:`_l1` of the bounds) and the
    folded mass (at most ``out_q``, at points ``s <= s_max``), and the scaling by no more:
    ``eta_Q = 2 (B + out_q) + 8u`` bounds the change of the Q-masses (atoms and the atom at
    0) and ``eta_P = 2 (B_s + out_q s_max / t) + 8u`` that of the P-masses (``B_s``: the FFT
    error weighted by ``s/t``; atoms and the atom at +inf), each term plus the larger of
    the two after a scaling; the answers add the slack they give
    (``_AllocationSide.tv_slack``).

    With ``pointwise``, ``nu`` is the computed law less its error bound at every point (FFT
    and folded mass: below ``mu_in``), so the pair dominates as it is and the slack is 0
    (the pair of ``RandomAllocation.privacy_losses()``; the tail points, where the law is
    below the bound, all go to the extreme spread: wider). Without it, that pair is
    returned all the same where its extra mass at +-inf is below the slack (a coarse
    lattice, whose FFT error is large). Sums are numpy's (pairwise: relative error below
    ``log2(n) u``), charged ``64 u`` on the masses at +-inf.

    Returns ``((remove, add), (eta_P, eta_Q))``. Remove: losses ``log(s/t)``, P ``nu s/t``
    + the rest at +inf, Q ``nu`` + the rest at -inf; add: the reversed pair."""
    t, u = float(steps), UNIT_ROUNDOFF
    tail = lat.tail_q
    s = lat.h * np.arange(lat.lo, lat.lo + lat.q.size, dtype=float)
    w_body = s / t
    w = np.concatenate([w_body, tail.s / t])
    # the values were rounded from long double to double: a relative u each
    nu_pw = np.concatenate([np.maximum(lat.q * (1.0 - 2.0 * u) - lat.err_q, 0.0),
                            np.maximum(tail.mass - tail.pointwise, 0.0)])
    out = _upper_masses(nu_pw, w, (0.0, 0.0))
    if not pointwise:
        nu_body = np.maximum(lat.q, 0.0)
        nu = np.concatenate([nu_body, np.maximum(tail.mass, 0.0)])
        # the FFT error and the folded mass, unweighted and weighted by s/t; the tail's
        b_q = _l1(lat.fft_q, lat.l2_q, np.ones_like(w_body)) + 2.0 * u + lat.out_q + tail.l1
        b_s = _l1(lat.fft_q, lat.l2_q, w_body) \
            + 2.0 * u * float((nu_body * w_body).sum()) * (1.0 + 1e-12) \
            + lat.out_q * float(w_body[-1]) + tail.l1_s / t
        total, mean = float(nu.sum()), float((nu * w).sum())
        # the atoms and the extreme spread each move by the error, a scaling by the larger
        b = max(b_s, b_q) if max(total, mean) > 1.0 else 0.0
        slack = (2.0 * (b_s + b) + 8.0 * u, 2.0 * (b_q + b) + 8.0 * u)
        alt = _upper_masses(nu / max(total, mean, 1.0), w, slack)
        # the slack-free pair where its extra mass at +-inf is below the slack
        if max(out[2] - alt[2], out[3] - alt[3]) > max(slack):
            out = alt
    nu, w, m, r, slack = out
    y = np.log(w)
    pm = nu * w
    remove = DiscreteLoss(y, pm, nu, inf_mass=m, neg_inf_mass=r)
    add = DiscreteLoss(-y, nu, pm, inf_mass=r, neg_inf_mass=m)
    return (remove, add), slack


def _upper_masses(nu: np.ndarray, w: np.ndarray, slack: tuple[float, float]):
    """``(nu, w, m, r, slack)`` on the atoms with ``nu > 0`` and ``s > 0``: the P-mass ``m``
    at +inf and the Q-mass ``r`` at -inf completing them (:func:`upper_pair`)."""
    u = UNIT_ROUNDOFF
    pos = (nu > 0) & (w > 0)
    nu, w = nu[pos], w[pos]
    r = max(1.0 - float(nu.sum()), 0.0) + 64.0 * u
    m = max(1.0 - float((nu * w).sum()), 0.0) + 64.0 * u
    return nu, w, m, r, slack


def lower_pair(lat: AllocationLattice) -> tuple[tuple[DiscreteLoss, DiscreteLoss],
                                                  tuple[float, float]]:
    """The pair of the rounded sum ``T`` as computed, and how far it may be from exact.

    The exact pair is a post-processing of the output: ``g(T)``, with ``g`` keeping the
    atoms where both computed masses exceed :data:`_RELIABLE` times their FFT bounds and
    sending every other outcome to one atom (merging outcomes is a post-processing). The
    computed masses of the kept atoms differ from the circular convolution's by at most
    ``B`` in sum (:func:`_l1` of the FFT bounds, plus ``u`` of the rounding to double), and
    the circular convolution from the exact law by at most ``out`` in total, so the kept
    atoms differ from the exact ones by at most ``B + out`` in sum and the merged atom (one
    minus their sum) by at most that too: the total-variation distance (half the L1) is at
    most ``B + out`` plus the rounding of the sums and of the losses (``8u``).

    Returns ``((remove, add), (eta_P, eta_Q))``: the pair and those bounds under P and Q.
    The hockey-stick divergence ``sup_A P(A) - e^eps Q(A)`` moves by at most
    ``eta_P + e^eps eta_Q`` (and ``E`` compositions by at most ``E`` times that, as
    ``TV(P^E, P'^E) <= E TV(P, P')``), which the joined answer subtracts
    (:mod:`tightdp.accountants.bracketed`)."""
    assert lat.p is not None and lat.tail_p is not None
    keep = (lat.q > _RELIABLE * lat.fft_q) & (lat.p > _RELIABLE * lat.fft_p)
    ones = np.ones(int(keep.sum()))
    tq, tp = lat.tail_q, lat.tail_p
    keep_t = (tq.mass > _RELIABLE * tq.pointwise) & (tp.mass > _RELIABLE * tp.pointwise)
    pq = np.concatenate([lat.q[keep], tq.mass[keep_t]])
    pp = np.concatenate([lat.p[keep], tp.mass[keep_t]])
    u = UNIT_ROUNDOFF
    slack = (_l1(lat.fft_p, lat.l2_p, ones) + lat.out_p + tp.l1 + 10.0 * u,
             _l1(lat.fft_q, lat.l2_q, ones) + lat.out_q + tq.l1 + 10.0 * u)
    rest_p, rest_q = max(1.0 - math.fsum(pp), 0.0), max(1.0 - math.fsum(pq), 0.0)
    y = np.log(pp / pq)
    if rest_p > 0 and rest_q > 0:
        y, pp, pq = (np.append(y, math.log(rest_p / rest_q)), np.append(pp, rest_p),
                     np.append(pq, rest_q))
        rest_p = rest_q = 0.0
    remove = DiscreteLoss(y, pp, pq, inf_mass=rest_p, neg_inf_mass=rest_q)
    add = DiscreteLoss(-y, pq, pp, inf_mass=rest_q, neg_inf_mass=rest_p)
    return (remove, add), slack


def allocation_pairs(sigma: float, steps: int, selected: int, rtol: float, *, side: str
                     ) -> tuple[DiscreteLoss, DiscreteLoss]:
    """(remove, add) of the ``side`` ("upper": dominating, ``selected`` must be 1; "lower":
    dominated) pair of random allocation (module docstring)."""
    lat = allocation_lattice(sigma, steps, selected, rtol, with_p=side == "lower")
    return (upper_pair(lat, steps) if side == "upper" else lower_pair(lat))[0]
