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
by one FFT. Two pairs follow (:func:`allocation_pairs`):

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
from scipy.special import ndtr

from .._numerics import UNIT_ROUNDOFF
from .discrete import DiscreteLoss

__all__ = ["AllocationLattice", "allocation_lattice", "allocation_pairs"]

#: largest FFT length of one lattice (2^20: 16 MB per long-double array)
MAX_LATTICE = 1 << 20
#: atoms of a pmf whose MGF the Chernoff bounds take exactly
_EXACT = 8192
#: the upper side's target for the P-mass sent to +inf (the heavy lognormal tail)
_TAIL = 1e-16
#: constant of the FFT's pointwise error bound ``c u log2(N) sum |x|`` (as pld/transform.py)
_C_FFT = 4.0
#: the Chernoff bounds' tilts (per lattice step): both signs, many scales
_THETAS = np.concatenate([-np.geomspace(1e-9, 3.0, 28), np.geomspace(1e-12, 1.0, 36)])
#: unit roundoff of numpy's long double (2^-64 on x86-64, double's where they agree)
_U_LONG = float(np.finfo(np.longdouble).eps) / 2.0
#: lower side: an atom is kept where its masses exceed their FFT rounding bound this many
#: times (the loss values of the others would be noise: they are merged)
_RELIABLE = 1e2


class AllocationLattice(NamedTuple):
    """The laws of the rounded sum on the window ``lo .. lo + len - 1`` of ``h Z``: ``q``
    under Q, ``p`` under P (None unless asked). The computed values differ from the
    circular convolution's exact ones by at most ``fft_q`` (``fft_p``) at every point and
    by a vector of Euclidean norm at most ``l2_q`` (``l2_p``), up to a relative ``u`` each
    (the rounding to double); the circular convolution differs from the exact law on the
    window by a measure of total mass at most ``out_q`` (``out_p``): the mass outside the
    window, folded onto it, and the coordinates' mass above the lattice's top, dropped."""

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


def rounded_lognormal(mean_log: float, var_log: float, h: float, n_top: int) -> np.ndarray:
    """pmf on ``0 .. n_top`` of ``w`` (``log w ~ N(mean_log, var_log)``) rounded at random to
    ``h Z`` keeping its mean: cell ``[n h, (n+1) h]`` sends ``A_n - B_n`` to ``n`` and
    ``B_n = E[w/h - n; cell]`` to ``n + 1``, with ``A_n`` its probability; the partial mean is
    ``E[w; w <= c] = e^{m + v/2} Phi((log c - m - v)/sqrt v)`` (lognormal). The mass above
    ``n_top h`` is dropped (the result is below the law of the rounded ``w``)."""
    s = math.sqrt(var_log)
    edges = h * np.arange(n_top + 1, dtype=float)
    with np.errstate(divide="ignore"):
        z = (np.log(edges) - mean_log) / s
    a = _phi_diffs(z)
    mom = math.exp(mean_log + var_log / 2.0) / h * _phi_diffs(z - s)
    b = np.clip(mom - np.arange(n_top, dtype=float) * a, 0.0, a)  # float guard: B in [0, A]
    pmf = np.zeros(n_top + 1)
    pmf[:-1] += a - b
    pmf[1:] += b
    return pmf


class _MgfTable(NamedTuple):
    """Log-MGF upper bounds of the prefixes of a pmf (:func:`_mgf_table`)."""

    starts: np.ndarray
    prefix: np.ndarray

    def bounds(self, cut: int | None = None) -> np.ndarray:
        """Upper bounds on ``log sum_{n < cut} pmf(n) e^{theta n}`` (all atoms when None):
        the prefix through the block holding ``cut - 1`` (a block past ``cut`` only adds
        mass: still a bound)."""
        if cut is None:
            return self.prefix[:, -1]
        j = max(int(np.searchsorted(self.starts, cut, side="left")) - 1, 0)
        return self.prefix[:, j]


def _mgf_table(pmf: np.ndarray, thetas: np.ndarray) -> _MgfTable:
    """Upper bounds on ``log sum_n pmf(n) e^{theta n}`` for each theta and every prefix of
    blocks: exact on the first :data:`_EXACT` atoms (a sum of many variables multiplies any
    slack by their count), beyond them blocks of atoms each placed at its block's end in
    the direction of theta."""
    head = pmf[:_EXACT]
    tail = pmf[_EXACT:]
    bs = max(1, -(-tail.size // 4096))
    nb = -(-tail.size // bs)
    mass = np.zeros(nb * bs)
    mass[:tail.size] = tail
    mass = np.concatenate([head, mass.reshape(nb, bs).sum(axis=1)])
    starts = np.concatenate([np.arange(head.size, dtype=float),
                             head.size + bs * np.arange(nb, dtype=float)])
    width = np.concatenate([np.zeros(head.size), np.full(nb, bs - 1.0)])
    with np.errstate(divide="ignore"):
        lm = np.log(mass)
    pos = starts[None, :] + np.where(thetas > 0, 1.0, 0.0)[:, None] * width[None, :]
    return _MgfTable(starts, np.logaddexp.accumulate(lm[None, :] + thetas[:, None] * pos,
                                                     axis=1))


def _chernoff(tables, thetas: np.ndarray, x: float, right: bool) -> float:
    """log of a bound on ``P(X >= x)`` (right) or ``P(X <= x)`` of the sum ``X`` of
    independent lattice variables, ``tables`` = [(log-MGF bounds at ``thetas``, count)]:
    ``min_theta sum_i k_i Lambda_i(theta) - theta x`` over theta of the tail's sign."""
    sel = thetas > 0 if right else thetas < 0
    tot = sum(k * lam[sel] for lam, k in tables if k)
    return float(np.min(tot - thetas[sel] * x))


def _power(f: np.ndarray, k: int) -> np.ndarray:
    """``f ** k`` by repeated squaring: at most ``2 log2 k`` products, each a relative error
    of at most ``4u`` (the per-product error :func:`_fft_error` charges ``k`` times: an
    addition chain's errors compound to at most ``(1 + 4u)^(k-1)``)."""
    out = None
    base = f
    while k:
        if k & 1:
            out = base if out is None else out * base
        k >>= 1
        if k:
            base = base * base
    return np.ones_like(f) if out is None else out


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
    for f, k, l1 in specs:
        if not k:
            continue
        a = np.abs(f).astype(float)
        e = (_C_FFT * lg2 + 4.0) * u * l1
        with np.errstate(divide="ignore"):
            la = la + k * np.log(a)
            dl = dl + k * np.log1p(4.0 * u + e / np.maximum(a, 1e-300))
    with np.errstate(over="ignore"):
        err = np.exp(la) * np.expm1(np.minimum(dl, 700.0))
    err = np.where(dl < 700.0, err, np.exp(np.minimum(la + dl, 700.0)))
    mag = np.exp(la)
    # rfft holds half the spectrum: interior frequencies count twice in the mean
    w = np.full(err.size, 2.0)
    w[0] = 1.0
    if n % 2 == 0:
        w[-1] = 1.0
    pointwise = float((w @ err) / n + (_C_FFT * u * lg2 + 2.0 * u) * (w @ mag) / n)
    l2 = float((math.sqrt(w @ (err * err)) + (_C_FFT * lg2 + 4.0) * u
                * math.sqrt(w @ (mag * mag))) / math.sqrt(n))
    return pointwise, l2


def _plan(sigma: float, steps: int, rtol: float) -> tuple[float, int]:
    """Lattice step ``h`` and top index: the rounding adds variance at most ``t h^2 / 4`` to
    ``S`` against ``Var S = t (e^{2a} - 1)``, a relative change of the curve of order
    ``h^2 / (8 Var w)``, kept below ``rtol / 4``; the top covers the body of ``S``
    (``t + 40 sd``) and a shifted coordinate's tail to P-mass :data:`_TAIL`
    (``z = 8.3`` standard deviations). Where that exceeds :data:`MAX_LATTICE` points the
    tail is covered less far (to ``z = 6.2``, P-mass 3e-10 beyond: sent to +inf by the
    upper side) before ``h`` grows past 16 times its target: the rounding's error grows
    as ``h^2``, the tail's only as its mass."""
    a = 1.0 / (2.0 * sigma * sigma)
    var_w = math.expm1(min(2.0 * a, 700.0))
    h0 = math.sqrt(rtol * min(var_w, 1e300))
    body = steps + 40.0 * math.sqrt(steps * min(var_w, 1e300))
    for z in (8.3, 7.5, 7.0, 6.6, 6.2):  # Phi(-8.3) < 1e-16
        top = body + math.exp(min(a + z * math.sqrt(2.0 * a), 700.0))
        h = max(h0, top / (MAX_LATTICE - 1))
        if h <= 16.0 * h0:
            break
    return h, int(math.ceil(top / h))


def allocation_lattice(sigma: float, steps: int, selected: int, rtol: float, *,
                       with_p: bool) -> AllocationLattice:
    """The laws of the rounded sum (module docstring) of ``steps`` coordinates, ``selected``
    of them shifted under P, on the lattice of :func:`_plan`; ``with_p`` also computes the
    P-law (the lower side's)."""
    t, k = steps, selected
    h, n_top = _plan(sigma, t, rtol)
    a = 1.0 / (2.0 * sigma * sigma)
    pq = rounded_lognormal(-a, 2.0 * a, h, n_top)
    pp = rounded_lognormal(a, 2.0 * a, h, n_top) if with_p else None
    thetas = _THETAS
    tab_q = _mgf_table(pq, thetas)
    lam_q = tab_q.bounds()
    # window: from the largest index below which the Q-law holds less than 1e-30
    # (Chernoff), to the top index
    lo_idx, hi_idx = 0, max(int(t / h), 1)
    if _chernoff([(lam_q, t)], thetas, 0.0, right=False) < math.log(1e-30):
        while hi_idx - lo_idx > 1:
            mid = (lo_idx + hi_idx) // 2
            ok = _chernoff([(lam_q, t)], thetas, mid, right=False) < math.log(1e-30)
            lo_idx, hi_idx = (mid, hi_idx) if ok else (lo_idx, mid)
    lo = lo_idx
    n = int(sfft.next_fast_len(max(n_top - lo + 1, 2), real=True))
    fq = sfft.rfft(_fold(pq, n).astype(np.longdouble))
    # F_q^(t-k), shared by both laws (one addition chain each)
    base = _power(fq, t - k) if pp is not None else None
    q_spec = _power(fq, t) if base is None else base * _power(fq, k)
    q = np.roll(sfft.irfft(q_spec, n=n).astype(float), -(lo % n))
    fft_q, l2_q = _fft_error([(fq, t, float(pq.sum()))], n, _U_LONG)
    # the coordinates' mass above the top (dropped by rounded_lognormal), with a margin
    # for the error of ndtr
    z_top = math.log(n_top * h) / math.sqrt(2.0 * a)
    drop_q, drop_p = (float(ndtr(-(z_top + sh))) * (1.0 + 1e-9) for sh in
                      (math.sqrt(a / 2.0), -math.sqrt(a / 2.0)))
    out_q = _outside([(pq, tab_q, t)], lo, lo + n) + t * drop_q
    p = None
    fft_p = l2_p = out_p = math.inf
    if pp is not None:
        fp = sfft.rfft(_fold(pp, n).astype(np.longdouble))
        p = np.roll(sfft.irfft(base * _power(fp, k), n=n).astype(float), -(lo % n))
        fft_p, l2_p = _fft_error([(fq, t - k, float(pq.sum())), (fp, k, float(pp.sum()))],
                                 n, _U_LONG)
        out_p = _outside([(pq, tab_q, t - k), (pp, _mgf_table(pp, thetas), k)], lo, lo + n) \
            + (t - k) * drop_q + k * drop_p
    return AllocationLattice(h, lo, q, p, fft_q, fft_p, l2_q, l2_p, out_q, out_p)


def _l1(pointwise: float, l2: float, weights: np.ndarray) -> float:
    """Bound on ``sum_j |e_j| weights_j`` for an error vector ``e`` bounded by ``pointwise``
    at every point and by ``l2`` in Euclidean norm (Cauchy-Schwarz), ``weights >= 0``."""
    l2_part = l2 * math.sqrt(float((weights * weights).sum()))
    return min(pointwise * float(weights.sum()), l2_part) * (1.0 + 1e-12)


def _outside(pmfs, lo: int, end: int) -> float:
    """Bound on the mass of the sum of independent lattice variables (``pmfs`` = [(pmf,
    its :func:`_mgf_table`, count)]) outside ``lo .. end - 1``: what the circular
    convolution folds onto the window's points. Left: Chernoff,
    ``min_{theta<0} sum_i k_i Lambda_i(theta) - theta x``. Right: a union bound on one
    variable reaching ``c`` plus Chernoff for the sum of the variables cut at ``c`` (the
    lognormal's MGF is dominated by its far tail), at the best of a few cuts ``c``."""
    thetas = _THETAS
    left = -math.inf
    if lo > 0:
        left = _chernoff([(tab.bounds(), k) for _, tab, k in pmfs], thetas, lo - 1,
                         right=False)
    right = math.inf
    for frac in (1.0, 0.5, 0.25, 0.125, 0.0625):
        c = max(int(end * frac), 1)
        tail = sum(k * float(p[c:].sum()) for p, _, k in pmfs)
        cut = [(tab.bounds(c), k) for _, tab, k in pmfs]
        right = min(right, tail + math.exp(min(_chernoff(cut, thetas, end, right=True), 0.0)))
    return math.exp(min(left, 0.0)) + right


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
    s = lat.h * np.arange(lat.lo, lat.lo + lat.q.size, dtype=float)
    w = s / t
    # the values were rounded from long double to double: a relative u each
    nu_pw = np.maximum(lat.q * (1.0 - 2.0 * u) - lat.err_q, 0.0)
    out = _upper_masses(nu_pw, w, (0.0, 0.0))
    if not pointwise:
        nu = np.maximum(lat.q, 0.0)
        # the FFT error and the folded mass, unweighted and weighted by s/t
        b_q = _l1(lat.fft_q, lat.l2_q, np.ones_like(w)) + 2.0 * u + lat.out_q
        b_s = _l1(lat.fft_q, lat.l2_q, w) + 2.0 * u * float((nu * w).sum()) * (1.0 + 1e-12) \
            + lat.out_q * float(w[-1])
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
    assert lat.p is not None
    keep = (lat.q > _RELIABLE * lat.fft_q) & (lat.p > _RELIABLE * lat.fft_p)
    pq, pp = lat.q[keep], lat.p[keep]
    ones = np.ones(pq.size)
    u = UNIT_ROUNDOFF
    slack = (_l1(lat.fft_p, lat.l2_p, ones) + lat.out_p + 10.0 * u,
             _l1(lat.fft_q, lat.l2_q, ones) + lat.out_q + 10.0 * u)
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
