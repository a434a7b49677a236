"""Individual epsilon for DP-SGD from gradient-norm histories, with the PLD engine.

Koskela, Tobaben, Honkela, "Individual Privacy Accounting with Gaussian Differential
Privacy", ICLR 2023, Sec. 5 and App. D.

What is computed
----------------
Example ``i`` of a DP-SGD run (Poisson rate ``q``, noise multiplier ``sigma``, clipping norm
``C``) whose gradient norm at step ``t`` is ``g_{i,t}`` sees, at that step, the Poisson
subsampled Gaussian mechanism with sensitivity ``c_{i,t} = min(g_{i,t}, C) / C`` and noise
``sigma`` (noise ratio ``sigma C / min(g_{i,t}, C)``; App. D.3, Lemma 8). Its individual
``eps_i(delta)`` is the privacy curve of the composition of those mechanisms over the steps,
both orders of the pair (remove and add), the larger of the two.

This is the paper's *approximative* individual accountant of Sec. 5: it is the privacy of
example ``i`` under the assumption that its norm sequence had been fixed in advance. The norms
of a real run depend on the noise of earlier steps, and no fully adaptive guarantee is claimed
here; for that use the individual GDP filter (:class:`~tightdp.individual.IndividualGDPFilter`,
Thm. 1). Given the norms, however, each number returned is a certified upper bound on that
composition's eps (computed in floating point: an allowance for rounding,
``64 u (1 + T_i) (1 + log K0)`` with ``u`` the unit roundoff -- about 1e-10 for 1000 steps -- is
added to every delta, which is why targets below 1e-9 are refused):

1. Sensitivity buckets (App. D.2): each ``c_{i,t}`` is rounded *up* to a grid
   ``c_1 < ... < c_B = 1`` (the noise ratio rounded *down*), which can only increase the
   privacy loss: the mechanism with the smaller sensitivity is a post-processing of the one
   with the larger (data-processing inequality; Koskela et al. 2023, Thm. 2 of App. D). A gradient
   norm
   reported as NaN (unknown) is charged the full clipping norm.
2. One certified discretization per bucket: connect-the-dots (Doroshenko et al. 2022) on a
   common grid step ``d`` gives a dominating discrete pair (bucket ``j`` on the grid
   ``s_j + k d`` with its own shift ``s_j``; an example's composed law then lives on
   ``sum_j n_ij s_j + k d``), and one real FFT of it on a common window of ``K`` points is kept
   (precomputed transforms, App. D.1).
3. Per example the transform of the composed PLD is ``prod_j F_j^{n_ij}`` (counts ``n_ij`` per
   bucket), evaluated as ``exp(sum_j n_ij log F_j)`` -- one matrix product for all examples.
4. ``delta`` is evaluated by the Plancherel theorem (App. D.1, Lemma 1): ``sum_y p(y) w(y) =
   (1/K) sum_k P_k conj(W_k)``, with the transforms ``W_k`` of the hockey-stick weights in
   closed form (geometric sums), so no inverse FFT is computed per example. Frequencies whose
   contribution is provably below ``1e-5 * delta`` are dropped per example; the bound on what
   they could contribute (summation by parts: ``|W_k| <= TV(w) / (2 sin(pi k / K))`` with
   ``TV(w) <= 2``, and a monotone envelope of ``|F_j|``) is added to delta.
5. The mass the circular convolution folds into the window is bounded per example by Chernoff
   bounds computed exactly from the discrete bucket laws, and added to delta, as is the mass
   at ``+inf``.
6. ``eps_i`` is found by a vectorized bracket search over the grid points of the window
   (regula falsi on ``log delta`` alternating with bisection) followed by the closed form
   ``delta = A - e^eps B`` on the bracketing interval. The returned eps is
   one at which the certified bound on delta is at most the target.

7. A certified *lower* bound per example comes from the lowered-chords pair of
   :func:`~tightdp.pld.discretize.certified_pair` (a dominated pair, discretized from the same
   evaluation of the loss's CDFs), evaluated the same way with every allowance taken against
   it (truncation ``-2 tau``, folded mass subtracted, mass at ``+inf`` counted): the largest
   grid point where that lower bound on delta still exceeds the target, then the closed form
   on the next interval. Each example gets a certified bracket ``[lower, upper]`` of its
   composition *as recorded* (norm ratios rounded up to the grid). ``upper`` bounds the eps at
   the exact norms too (rounding up only adds loss); ``lower`` does not: at the exact norms
   the eps can be smaller by the bucketing error (about one bucket, ``1 / n_buckets``, of
   sensitivity per step).

Grid steps. ``d0`` is half the step the certified :class:`~tightdp.PLDAccountant` needs to
reach ``rtol`` for the worst-case example (every norm at least ``C`` for the largest number of
steps). The discretization error of an example's eps grows like ``(d / eps_i)^2``, so one
step sized for the worst case is 1e-3 to 4e-3 loose for the small-eps examples (issue 17).
Examples are therefore grouped by the CLT scale of their composition relative to the worst
case (``mu_i / mu_worst``, Dong, Roth, Su 2022, Cor. 5.4; used only for the choice) and a
group at level ``l`` gets ``d0 / 2^l`` (one level per halving of the scale, ``LEVEL_OFFSET``
levels fewer for every example); each group is discretized, transformed and windowed for its
own buckets and counts. Examples whose certified bracket is still wider than ``rtol``
(relative to their upper bound) are evaluated again one level finer, at most
``MAX_REFINEMENTS`` times (and while half the time budget is left); ``details["loose"]``
counts those left wider, ``converged`` says whether there are none. Only the one-off
discretizations and FFTs depend on ``d``; the cost per example does not.
"""

from __future__ import annotations

import functools
import math
import time

import numpy as np
from scipy import fft as sfft
from scipy.special import ndtri

from .. import _validate as v
from .._defaults import DEFAULT_RTOL
from .._numerics import MACHINE_EPSILON
from ..accountants.base import Queries
from ..budget import Budget, BudgetExceeded
from ..losses import LocationMixtureLoss
from ..mechanisms.basic import Gaussian
from ..mechanisms.subsampling import PoissonSubsampled
from ..pld.compose import MAX_POINTS
from ..pld.discretize import certified_pair, connect_the_dots, loss_range
from ..pld.grid import DiscretePLD
from ..progress import logger, progress_bar
from ..results import EpsilonResult, check_bracket

__all__ = ["IndividualPLDAccountant", "NormHistory", "individual_epsilons",
           "sensitivity_grid"]

#: smallest target delta accepted (below it the rounding allowance would dominate)
MIN_DELTA = 1e-9
#: log of the mass each pure composition may leave outside the FFT window (what leaves it is
#: bounded per example by a Chernoff bound and added to delta, so this only sets accuracy)
LOG_WINDOW_TAIL = math.log(1e-22)
#: frequencies are dropped while their certified contribution is below this fraction of delta
TRUNC_FRACTION = 1e-5
#: grid-step levels: an example at level ``l`` is discretized with step ``d0 / 2^l``
MAX_LEVEL = 12
#: levels saved on every example (the bracket check refines those that need it)
LEVEL_OFFSET = 0.5
#: rounds of halving the grid step of the examples whose bracket is still wider than rtol
MAX_REFINEMENTS = 3


def sensitivity_grid(n_buckets: int) -> np.ndarray:
    """Uniform grid of sensitivity ratios ``c_j = j / n_buckets``, ``j = 1..n_buckets``
    (Koskela et al. 2023, App. D.2: a grid of noise ratios ``sigma / c_j``)."""
    n = v.count("n_buckets", n_buckets, minimum=1)
    g = np.arange(1, n + 1, dtype=float) / n
    g[-1] = 1.0
    return g


def bucket_index(ratios: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Index (1-based; 0 = no loss) of the smallest point of the uniform grid ``j / n`` that
    is >= each ratio (rounding the sensitivity *up*). NaN (unknown norm) goes to the top."""
    n = grid.size
    r = np.nan_to_num(np.asarray(ratios, dtype=float), nan=1.0)
    x = np.ceil(r * n)
    # correct by one where the rounding of r * n missed (x / n is exactly grid[x - 1])
    x += x / n < r
    x -= (x >= 2) & ((x - 1) / n >= r)
    return np.clip(x, 0, n).astype(np.int64)


def _loss_range(loss, log_tail: float) -> tuple[float, float]:
    """Loss interval outside of which each tail has P-mass <= e^log_tail.

    For a Gaussian location mixture with non-decreasing loss ``L`` (every Poisson subsampled
    Gaussian pair here) the P-mass of ``X > max(a) + s z`` and of ``X < min(a) - s z`` is at
    most ``Phi(-z)``, so ``[L(min(a) - s z), L(max(a) + s z)]`` with ``Phi(-z) = e^log_tail``
    qualifies (two loss evaluations instead of a search). Otherwise
    :func:`tightdp.pld.discretize.loss_range`. Connect-the-dots dominates on any range; the
    range only sets its accuracy."""
    if isinstance(loss, LocationMixtureLoss) and loss.kernel.name == "gaussian":
        z = -float(ndtri(math.exp(max(log_tail, -700.0))))
        x = np.array([loss.a.min() - loss.s * z, loss.a.max() + loss.s * z])
        lo, hi = (float(y) for y in loss.loss(x))
        lo = max(lo, loss.support[0])
        hi = min(hi, loss.support[1])
        if math.isfinite(lo) and math.isfinite(hi) and hi > lo:
            return lo, hi
    return loss_range(loss, log_tail)


class _Direction:
    """Precomputed transforms of the bucket PLDs for one direction of the pair."""

    def __init__(self, plds: list[DiscretePLD], t_max: int, d: float, log_tail: float,
                 workers: int | None, max_bytes: float = math.inf,
                 counts: np.ndarray | None = None):
        self.d = d
        # Chernoff exponents of the bucket laws (window placement and the mass outside it)
        ts = np.geomspace(2e-2, 40.0, 12)
        self.t_pos, self.t_neg = ts, -ts
        both = np.concatenate([ts, -ts])
        logm = np.stack([p.log_mgf(both) for p in plds])  # (B, 2 nt)
        self.logm_pos, self.logm_neg = logm[:, :ts.size], logm[:, ts.size:]
        # window: union over buckets of the Chernoff windows of t_max-fold compositions:
        # P(S >= a) <= e^log_tail as soon as a >= (t_max psi(t) - log_tail) / t for one t > 0
        # (and the mirror for t < 0), clipped to the support of the composition
        self.shift = np.array([p.shift for p in plds])
        self.ymin = np.array([float(p.ys[0]) for p in plds])  # support of each bucket law
        self.ymax = np.array([float(p.ys[-1]) for p in plds])
        if counts is None:
            lo, hi = 0.0, d
            for j, p in enumerate(plds):
                ys = p.ys
                a_hi = float(np.min((t_max * self.logm_pos[j] - log_tail) / ts))
                a_lo = float(np.max((t_max * self.logm_neg[j] - log_tail) / -ts))
                a_hi = min(a_hi, t_max * float(ys[-1]))
                a_lo = max(a_lo, t_max * float(ys[0]))
                lo, hi = min(lo, a_lo), max(hi, a_hi)
            # composed law of an example: loss = S + index * d with S = sum_j n_j shift_j
            s_min = t_max * min(float(self.shift.min()), 0.0)
            s_max = t_max * max(float(self.shift.max()), 0.0)
            i_lo = int(math.floor((lo - s_max) / d)) - 1
            i_hi = int(math.ceil((hi - s_min) / d)) + 1
        else:
            # the same Chernoff windows for the actual composition of each example (rows of
            # ``counts``), united in grid-index coordinates: narrower when the examples'
            # buckets differ (only accuracy depends on it, see ``extras``)
            a_hi = np.min((counts @ self.logm_pos - log_tail) / ts, axis=1)
            a_lo = np.max((counts @ self.logm_neg - log_tail) / -ts, axis=1)
            a_hi = np.maximum(np.minimum(a_hi, counts @ self.ymax), d)
            a_lo = np.minimum(np.maximum(a_lo, counts @ self.ymin), 0.0)
            s_ex = counts @ self.shift
            i_lo = int(math.floor(float(np.min((a_lo - s_ex) / d)))) - 1
            i_hi = int(math.ceil(float(np.max((a_hi - s_ex) / d)))) + 1
        n = i_hi - i_lo + 1
        if n > MAX_POINTS:
            raise BudgetExceeded(f"rtol: the window needs {n} grid points (> {MAX_POINTS}); "
                                 "use a larger rtol or grid_step")
        K = sfft.next_fast_len(n, real=True)
        # what the per-bucket spectra below hold (five (B, K/2) float arrays and one FFT
        # buffer), checked before they are allocated
        need = 8.0 * (5 * len(plds) * (K // 2 + 1) + 3 * K)
        if need > max_bytes:
            raise BudgetExceeded(
                f"n_buckets: {len(plds)} buckets x a window of {K} points need about "
                f"{need / 1e9:.3g} GB (over max_memory={max_bytes / 1e9:.3g} GB); use fewer "
                "buckets, a larger rtol or grid_step, or raise max_memory")
        self.K, self.i_lo = K, i_lo
        kh = K // 2 + 1
        B = len(plds)
        # spectra of the bucket laws; log-modulus and phase are taken on demand for the first
        # frequencies only (:meth:`spectra`), the per-example cut-offs keeping few of them
        self.spec = np.empty((B, kh), dtype=complex)
        self._log_abs = self._phase = np.empty((B, 0))
        self.mass = np.empty(B)
        self.inf = np.empty(B)
        for j, p in enumerate(plds):
            idx = (p.offset + np.arange(p.probs.size)) % K
            buf = np.bincount(idx, weights=p.probs, minlength=K)
            self.spec[j] = sfft.rfft(buf, workers=workers)
            self.mass[j] = float(p.probs.sum())
            self.inf[j] = float(p.inf_mass)
        # window rotation: window position m holds absolute grid index i_lo + m
        k = np.arange(kh)
        self.win_phase = 2.0 * np.pi * ((k * (i_lo % K)) % K) / K
        # frequency weights (rfft half-spectrum: conjugate pairs counted twice)
        om = np.full(kh, 2.0)
        om[0] = 1.0
        if K % 2 == 0:
            om[-1] = 1.0
        self.omega = om
        with np.errstate(divide="ignore"):
            tw = om / (2.0 * K * np.sin(np.pi * k / K))
        tw[0] = np.inf
        # envelope blocks for the truncation bound
        starts = np.unique(np.concatenate([np.arange(1, min(kh, 33)),
                                           np.round(np.geomspace(32, kh, 64)).astype(int)]))
        starts = starts[starts < kh]
        self.starts = starts
        # envelope max_{k' >= starts[b]} |F_j(k')|: maxima per block, then from the right
        block_max = np.maximum.reduceat(np.abs(self.spec), starts, axis=1)
        env = np.maximum.accumulate(block_max[:, ::-1], axis=1)[:, ::-1]
        self.log_env = np.log(np.maximum(env, 1e-300))  # (B, nb)
        ends = np.append(starts[1:], kh)
        self.block_w = np.array([tw[s:e].sum() for s, e in zip(starts, ends, strict=True)])
        # closed-form Fourier weights
        # 1 - z and 1 - e^{-d} z (z = e^{-2 pi i k / K}) without cancellation at small k:
        # 1 - cos t = 2 sin(t/2)^2
        t = 2.0 * np.pi * k / K
        vers = 2.0 * np.sin(t / 2.0) ** 2
        one_z = vers + 1j * np.sin(t)
        ed = math.exp(-d)
        one_rz = (-math.expm1(-d) + ed * vers) + 1j * ed * np.sin(t)
        with np.errstate(divide="ignore", invalid="ignore"):
            self.g1 = np.conj(1.0 / one_z)
            self.g2 = np.conj(1.0 / one_rz)
            self.gh = np.conj(-math.expm1(-d) / (one_z * one_rz))
        self.g1[0] = 0.0
        self.g2[0] = 0.0
        self.gh[0] = 0.0

    # --- per-example quantities --------------------------------------------------------------
    def extras(self, counts: np.ndarray) -> np.ndarray:
        """inf mass + Chernoff bounds on the mass above and below the window."""
        inf_mass, outside = self.extras_split(counts)
        return inf_mass + outside

    def extras_split(self, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The composed mass at ``+inf`` and a Chernoff bound on the finite mass outside
        the window (what the circular convolution may fold into it), per example."""
        log_fin = counts @ np.log1p(-np.minimum(self.inf, 1.0 - 1e-16))
        inf_mass = -np.expm1(log_fin)
        s = (counts @ self.shift)[:, None]
        top = s + (self.i_lo + self.K) * self.d  # smallest loss above the window
        bot = s + (self.i_lo - 1) * self.d  # largest loss below the window
        up = np.min(counts @ self.logm_pos - self.t_pos * top, axis=1)
        lo = np.min(counts @ self.logm_neg - self.t_neg * bot, axis=1)
        # no mass at all outside the window when the composed support fits in it
        up = np.where(counts @ self.ymax < top[:, 0], -np.inf, up)
        lo = np.where(counts @ self.ymin > bot[:, 0], -np.inf, lo)
        return inf_mass, np.exp(np.minimum(up, 0.0)) + np.exp(np.minimum(lo, 0.0))

    def cutoffs(self, counts: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray]:
        """Per example: number of frequencies kept (0..kk-1) and the certified bound tau on
        ``sum_{dropped k} omega_k |P_k| / (2 K sin(pi k / K))``."""
        le = counts @ self.log_env  # (n, nb)
        contrib = np.exp(np.minimum(le, 0.0)) * self.block_w
        tail = np.cumsum(contrib[:, ::-1], axis=1)[:, ::-1]  # tail[:, b] = sum_{b' >= b}
        ok = tail <= tol
        kh = self.spec.shape[1]
        has = ok.any(axis=1)
        first = np.where(has, np.argmax(ok, axis=1), 0)
        kk = np.where(has, self.starts[first], kh)
        tau = np.where(has, tail[np.arange(tail.shape[0]), first], 0.0)
        return kk, tau

    def spectra(self, kk: int) -> tuple[np.ndarray, np.ndarray]:
        """``log |F_j(k)|`` and ``arg F_j(k)`` of the bucket laws for ``k < kk``."""
        if self._log_abs.shape[1] < kk:
            n = min(self.spec.shape[1], max(kk, 2 * self._log_abs.shape[1]))
            f = self.spec[:, :n]
            self._log_abs = np.log(np.maximum(np.abs(f), 1e-300))
            self._phase = np.angle(f)
        return self._log_abs[:, :kk], self._phase[:, :kk]

    def transform(self, counts: np.ndarray, kk: int) -> np.ndarray:
        """``P_k`` of the composed law in window coordinates for ``k < kk``."""
        log_abs, phase = self.spectra(kk)
        lr = counts @ log_abs
        li = counts @ phase + self.win_phase[:kk]
        return np.exp(lr) * (np.cos(li) + 1j * np.sin(li))


def _horner1(qt: np.ndarray, m: np.ndarray, K: int) -> np.ndarray:
    """``Re sum_{k>=1} q_k e^{2 pi i k m / K}`` for one coefficient set ``qt`` (kk, n)."""
    return horner(qt[:, None, :], m, K)[0]


def horner(qt: np.ndarray, m: np.ndarray, K: int) -> tuple[np.ndarray, np.ndarray]:
    """``Re sum_{k>=1} q_k e^{2 pi i k m / K}`` for the two coefficient sets of ``qt``
    (shape ``(kk, 2, n)``: frequency, set, example), by Horner's scheme (or a direct sum for
    many frequencies)."""
    kk = qt.shape[0]
    n = m.size
    if kk <= 1:
        z = np.zeros(n)
        return z, z
    theta = 2.0 * np.pi * (m % K) / K
    w = np.exp(1j * theta)
    if kk <= 4096:
        acc = np.zeros(qt.shape[1:], dtype=complex)
        for k in range(kk - 1, 0, -1):
            acc *= w
            acc += qt[k]
        acc *= w
        return acc[0].real, (acc[1].real if acc.shape[0] > 1 else None)
    k = np.arange(1, kk)
    h = np.empty((qt.shape[1], n))
    step = max(1, 2_000_000 // kk)
    for s in range(0, n, step):
        e = np.exp(1j * np.outer(k, theta[s:s + step]))  # (kk-1, b)
        h[:, s:s + step] = np.einsum("kb,ksb->sb", e, qt[1:, :, s:s + step]).real
    return h[0], (h[1] if h.shape[0] > 1 else None)


class Evaluator:
    """Certified delta bounds of one chunk of examples (one direction) by Plancherel."""

    def __init__(self, dr: _Direction, counts: np.ndarray, kk: int, tau: np.ndarray,
                 extra: np.ndarray):
        self.dr, self.K, self.d = dr, dr.K, dr.d
        P = dr.transform(counts, kk)
        self.P = P
        om = dr.omega[:kk]
        self.p0 = P[:, 0].real
        qt = np.empty((kk, 2, P.shape[0]), dtype=complex)
        qt[:, 0, :] = (P * (om * dr.g1[:kk])).T
        qt[:, 1, :] = (P * (om * dr.g2[:kk])).T
        self.qt = qt
        c = qt[1:].sum(axis=0).real
        self.c1, self.c2 = c[0], c[1]
        # hinge coefficients g1 - e^{-d} g2 = conj((1 - e^{-d}) / ((1 - z)(1 - e^{-d} z))),
        # combined before summing (no cancellation between the two sums)
        self.qh = (P * (om * dr.gh[:kk])).T.copy()
        self.tau = tau
        self.extra = extra
        self.s = counts @ dr.shift  # grid shift of each example's composed law

    def y(self, m: np.ndarray) -> np.ndarray:
        return self.s + (self.dr.i_lo + m) * self.d

    def ab(self, m: np.ndarray, rows=None) -> tuple[np.ndarray, np.ndarray]:
        """``A(m) = sum_{j>=m} p_j`` and ``e^{y_m} B(m)`` with ``B(m) = sum_{j>=m} p_j e^{-y_j}``
        (window positions ``j``), from the truncated Plancherel sums (rows: optional mask)."""
        K, d = self.K, self.d
        if rows is None:
            qt, p0, c1, c2 = self.qt, self.p0, self.c1, self.c2
        else:
            qt, p0, c1, c2 = self.qt[:, :, rows], self.p0[rows], self.c1[rows], self.c2[rows]
        h1, h2 = horner(qt, m, K)
        tail = np.exp(-(K - m) * d)
        a = (p0 * (K - m) + h1 - c1) / K
        geo = -np.expm1(-(K - m) * d) / -math.expm1(-d)
        eb = (p0 * geo + h2 - tail * c2) / K
        return a, eb

    def hinge(self, m: np.ndarray, rows=None) -> np.ndarray:
        """Plancherel value of ``sum_{j>m} p_j (1 - e^{y_m - y_j})`` (delta at eps = y_m):
        ``(1/K) [P_0 W_0 + sum_k omega_k Re P_k conj(W_k)]`` with
        ``W_k = z^{m+1} (g1 - e^{-d} g2) - g1 + e^{-(K-m)d} g2`` (geometric sums)."""
        K, d = self.K, self.d
        if rows is None:
            qh, p0, c1, c2 = self.qh, self.p0, self.c1, self.c2
        else:
            qh, p0, c1, c2 = self.qh[:, rows], self.p0[rows], self.c1[rows], self.c2[rows]
        h = _horner1(qh, m + 1, K)
        n_above = K - m - 1
        w0 = n_above - math.exp(-d) * (-np.expm1(-n_above * d) / -math.expm1(-d))
        return (p0 * w0 + h - c1 + np.exp(-(K - m) * d) * c2) / K

    def delta_upper_at(self, m: np.ndarray, rows=None) -> np.ndarray:
        """Certified upper bound on delta(y_m) of the composition."""
        tau = self.tau if rows is None else self.tau[rows]
        extra = self.extra if rows is None else self.extra[rows]
        return self.hinge(m, rows) + 2.0 * tau + extra

    def first_nonnegative(self) -> np.ndarray:
        """Per example the first window position ``m0`` with ``y >= 0`` (``y_{m0-1} < 0``)."""
        m0 = np.ceil(-self.s / self.d - self.dr.i_lo).astype(np.int64)
        m0 = np.where(self.y(m0) < 0, m0 + 1, m0)
        return np.where(self.y(m0 - 1) >= 0, m0 - 1, m0)

    def epsilon_lower(self, delta: float, start: np.ndarray, credit: np.ndarray) -> np.ndarray:
        """Certified lower bound on each example's eps at ``delta``, this evaluator holding the
        transforms of a *dominated* pair (lowered chords, :func:`certified_pair`).

        ``credit`` is what is added to the truncated Plancherel hinge to get a lower bound on
        the composed delta: the mass at ``+inf`` minus the Chernoff bound on the mass folded
        into the window (each folded atom adds at most its mass, its weight being in
        ``[0, 1]``) minus the rounding allowance; the truncation costs ``2 tau``. Where that
        lower bound exceeds ``delta`` at ``y_m``, the true eps exceeds ``y_m`` (delta is
        non-increasing in eps, and the dominated pair's curve is below the true one). The
        search starts at the grid point below ``start`` (the upper bound), walks down in
        doubling steps to a point above ``delta``, bisects, and solves the closed form
        ``A - e^eps B`` (each term with its ``2 tau`` allowance taken against us) on the last
        interval."""
        K, d = self.K, self.d
        n = self.p0.size
        m0 = self.first_nonnegative()
        fin = np.isfinite(start)
        pos = np.floor((np.where(fin, start, 0.0) - self.s) / d - self.dr.i_lo)
        m = np.clip(np.where(fin, pos, K - 2), m0, K - 2).astype(np.int64)

        def above(mm: np.ndarray, rows: np.ndarray) -> np.ndarray:
            val = self.hinge(mm, rows) - 2.0 * self.tau[rows] + credit[rows]
            return val > delta

        lo = np.full(n, -1, dtype=np.int64)  # a position known above delta (-1: none yet)
        hi = m + 1  # a position not known above delta
        cand = m.copy()
        step = np.ones(n, dtype=np.int64)
        run = np.ones(n, dtype=bool)
        while np.any(run):
            rows = np.nonzero(run)[0]
            ok = above(cand[rows], rows)
            lo[rows[ok]] = cand[rows[ok]]
            fail = rows[~ok]
            hi[fail] = cand[fail]
            stop = fail[cand[fail] <= m0[fail]]  # nothing above delta at y >= 0
            run[rows[ok]] = False
            run[stop] = False
            step[fail] *= 2
            cand[fail] = np.maximum(hi[fail] - step[fail], m0[fail])
        while True:
            rows = np.nonzero((lo >= 0) & (hi - lo > 1))[0]
            if rows.size == 0:
                break
            mid = (lo[rows] + hi[rows]) // 2
            ok = above(mid, rows)
            lo[rows[ok]] = mid[ok]
            hi[rows[~ok]] = mid[~ok]
        out = np.zeros(n)
        rows = np.nonzero(lo >= 0)[0]
        if rows.size:
            m1 = lo[rows] + 1
            a, eb = self.ab(m1, rows)
            y1 = self.s[rows] + (self.dr.i_lo + m1) * d
            y0 = y1 - d
            num = a - 2.0 * self.tau[rows] + credit[rows] - delta
            den = eb + 2.0 * self.tau[rows]
            with np.errstate(divide="ignore", invalid="ignore"):
                sol = y1 + np.log(num / den)
            sol = np.where(num <= 0, y0, np.where(den <= 0, y1, sol))
            out[rows] = np.maximum(np.clip(sol, y0, y1), 0.0)
        return out

    def epsilon(self, delta: float) -> np.ndarray:
        K = self.K
        n = self.p0.size
        m0 = self.first_nonnegative()
        out = np.full(n, np.inf)
        d0 = self.delta_upper_at(m0)
        top = np.full(n, K - 1)
        dtop = self.delta_upper_at(top)
        small = d0 <= delta
        todo = small | (dtop <= delta)
        if not np.any(todo):
            return out
        sub = _Subset(self, todo)
        small = small[todo]
        lo = np.where(small, m0[todo] - 1, m0[todo])
        hi = np.where(small, m0[todo], top[todo])
        # bracket search on the grid: regula falsi on log(delta) alternating with bisection
        # (each step keeps delta_up(y_lo) > delta >= delta_up(y_hi))
        ld = math.log(delta)
        f_lo = np.log(np.maximum(d0[todo], 1e-300)) - ld
        f_hi = np.maximum(np.log(np.maximum(dtop[todo], 1e-300)), -700.0) - ld
        it = 0
        while np.any(hi - lo > 1):
            if it % 2 == 0:
                with np.errstate(divide="ignore", invalid="ignore"):
                    frac = np.nan_to_num(f_lo / (f_lo - f_hi), nan=0.5)
                mid = lo + np.rint((hi - lo) * np.clip(frac, 0.0, 1.0)).astype(np.int64)
            else:
                mid = (lo + hi) // 2
            mid = np.clip(mid, lo + 1, np.maximum(hi - 1, lo + 1))
            run = hi - lo > 1
            val = np.full(lo.size, np.inf)
            val[run] = sub.delta_upper_at(mid[run], run)
            ok = run & (val <= delta)
            up = run & ~ok
            f_val = np.log(np.maximum(val, 1e-300)) - ld
            hi = np.where(ok, mid, hi)
            f_hi = np.where(ok, np.maximum(f_val, -700.0), f_hi)
            lo = np.where(up, mid, lo)
            f_lo = np.where(up, f_val, f_lo)
            it += 1
        # closed form on [y_{hi-1}, y_hi]: delta <= A + 2 tau + X - e^eps (B - 2 e^{-y} tau),
        # a non-increasing function of eps that is <= delta at y_hi
        a, eb = sub.ab(hi)
        y_hi = sub.y(hi)
        num = a + 2.0 * sub.tau + sub.extra - delta
        den = eb - 2.0 * sub.tau  # e^{y_hi} times (B - 2 e^{-y_hi} tau)
        with np.errstate(divide="ignore", invalid="ignore"):
            sol = y_hi + np.log(num / den)
        y_prev = sub.y(hi - 1)
        sol = np.where(num <= 0, y_prev, np.where(den <= 0, y_hi, sol))
        sol = np.clip(sol, y_prev, y_hi)
        out[todo] = np.maximum(sol, 0.0)
        return out


class _Subset:
    """The rows ``mask`` of an evaluator (avoids recomputing the transforms)."""

    def __init__(self, ev: Evaluator, mask: np.ndarray):
        self.dr, self.K, self.d = ev.dr, ev.K, ev.d
        self.p0, self.qt, self.qh = ev.p0[mask], ev.qt[:, :, mask], ev.qh[:, mask]
        self.c1, self.c2 = ev.c1[mask], ev.c2[mask]
        self.tau, self.extra = ev.tau[mask], ev.extra[mask]
        self.s = ev.s[mask]

    y = Evaluator.y
    s: np.ndarray
    ab = Evaluator.ab
    hinge = Evaluator.hinge
    delta_upper_at = Evaluator.delta_upper_at


class NormHistory:
    """Per-example gradient-norm history of a DP-SGD run, stored as bucket counts.

    Each step's ratio ``min(g_i, C) / C`` is rounded *up* to the uniform grid ``j / B``
    (App. D.2; rounding up can only increase the privacy loss, data-processing inequality) and
    counted: only an ``N x (B + 1)`` integer array is kept, whatever the number of steps.
    A NaN norm (unknown) is charged the full clipping norm.
    """

    def __init__(self, *, sampling_rate: float, noise_multiplier: float, clip_norm: float,
                 n_examples: int, n_buckets: int = 100):
        self.sampling_rate = v.probability_open_closed("sampling_rate", sampling_rate)
        self.noise_multiplier = v.positive("noise_multiplier", noise_multiplier)
        self.clip_norm = v.positive("clip_norm", clip_norm)
        self.n_examples = v.count("n_examples", n_examples, minimum=1)
        self.grid = sensitivity_grid(n_buckets)
        nb = self.grid.size + 1
        self._counts = np.zeros((self.n_examples, nb), dtype=np.int64)
        small = np.uint8 if nb <= 256 else np.uint16 if nb <= 65536 else np.int64
        self._buf = np.zeros((64, self.n_examples), dtype=small)  # step-major
        self._nbuf = 0
        self.n_steps = 0
        self._rows = np.arange(self.n_examples)
        self._base = self._rows * nb

    def step(self, grad_norms) -> None:
        """Record one step: ``grad_norms[i]`` is example ``i``'s gradient norm at this step's
        model (NaN = unknown, charged the full clipping norm)."""
        g = np.asarray(grad_norms, dtype=float)
        if g.shape != (self.n_examples,):
            raise ValueError(f"grad_norms must have shape ({self.n_examples},), got {g.shape}")
        if np.any(g < 0):
            raise ValueError("grad_norms must be >= 0 (NaN = unknown norm)")
        idx = bucket_index(np.minimum(g, self.clip_norm) / self.clip_norm, self.grid)
        self._buf[self._nbuf] = idx
        self._nbuf += 1
        self.n_steps += 1
        if self._nbuf == self._buf.shape[0]:
            self._flush()

    def _flush(self) -> None:
        """Add the buffered steps' bucket indices to the counts (bincounts of 8 steps)."""
        nb = self.grid.size + 1
        for s in range(0, self._nbuf, 8):
            flat = (self._base[None, :] + self._buf[s:min(s + 8, self._nbuf)]).ravel()
            self._counts += np.bincount(flat, minlength=self.n_examples * nb).reshape(
                self.n_examples, nb)
        self._nbuf = 0

    @property
    def counts(self) -> np.ndarray:
        """``(N, B + 1)`` array: steps of each example per sensitivity bucket (column 0: no
        loss, column j: ratio rounded up to ``j / B``)."""
        self._flush()
        return self._counts

    def step_many(self, grad_norms) -> None:
        """Record several steps at once: ``grad_norms`` of shape ``(N, T)``."""
        g = np.asarray(grad_norms)
        if g.ndim != 2 or g.shape[0] != self.n_examples:
            raise ValueError(f"grad_norms must have shape ({self.n_examples}, T), got "
                             f"{g.shape}")
        for s in range(g.shape[1]):
            self.step(g[:, s])

    def _log(self, msg: str) -> None:
        logger.info("individual: %s", msg)


class IndividualPLDAccountant(NormHistory, Queries):
    """Streaming individual accountant for DP-SGD (Koskela et al. 2023, Sec. 5 and App. D); see the
    module docstring for what the numbers mean and why they are upper bounds.

    Feed the per-example gradient norms of each step with :meth:`step` (only the bucket counts
    are stored: ``N x B`` integers, see :class:`NormHistory`), then ask :meth:`epsilon`
    (a :class:`~tightdp.EpsilonResult` holding one eps per example, with its certified lower
    bound in ``lower``; both bound the composition *as recorded*, each norm ratio rounded up
    to the bucket grid: ``upper`` is also an upper bound at the exact norms, ``lower`` is not
    a lower bound at the exact norms, which can be smaller by the bucketing; an array of deltas
    gives
    arrays of shape ``delta.shape + (N,)``). ``delta(epsilon)`` is not offered.

    Parameters
    ----------
    sampling_rate : Poisson sampling rate ``q`` in (0, 1].
    noise_multiplier : ``sigma > 0``.
    clip_norm : ``C > 0``.
    n_examples : ``N >= 1``.
    n_buckets : size of the uniform sensitivity grid (App. D.2); each ratio ``min(g, C)/C`` is
        rounded up by less than ``1 / n_buckets``.
    rtol : relative accuracy asked of the certified accountant that chooses the coarsest grid
        step ``d0``, and the relative width asked of every example's certified bracket
        (examples wider than it are refined; see the module docstring).
    grid_step : fix ``d0`` instead (skips that accountant run).
    progress : a progress bar on stderr: None (default) draws one for work still running after
        2 s when stderr is a terminal (see :mod:`tightdp.progress`), True always, False never.
        Diagnostics go to the ``"tightdp"`` logger at level INFO.
    max_memory, max_seconds : the budget of one :meth:`epsilon` query (see
        :mod:`tightdp.budget`): sizes are checked before allocating (refusal naming what
        drives the cost) and chunks of examples are sized to fit.
    """

    def __init__(self, *, sampling_rate: float, noise_multiplier: float, clip_norm: float,
                 n_examples: int, n_buckets: int = 100, rtol: float = DEFAULT_RTOL,
                 grid_step: float | None = None, progress: bool | None = None,
                 workers: int | None = None, chunk_size: int = 4096, max_memory=None,
                 max_seconds=None):
        super().__init__(sampling_rate=sampling_rate, noise_multiplier=noise_multiplier,
                         clip_norm=clip_norm, n_examples=n_examples, n_buckets=n_buckets)
        self.budget = Budget.make(max_memory, max_seconds)
        self.rtol = v.positive("rtol", rtol)
        self.grid_step = None if grid_step is None else v.positive("grid_step", grid_step)
        self.progress = None if progress is None else bool(progress)
        self.workers = workers
        self.chunk_size = v.count("chunk_size", chunk_size, minimum=1)

    name = "individual-pld"

    # --- evaluation --------------------------------------------------------------------------
    def _choose_step(self, t_max: int, delta: float, info: dict) -> float:
        if self.grid_step is not None:
            return self.grid_step
        from ..accountants.pld import PLDAccountant

        acc = PLDAccountant(self.rtol, max_memory=self.budget.max_memory,
                            max_seconds=self.budget.max_seconds)
        acc.compose(PoissonSubsampled(Gaussian(self.noise_multiplier), self.sampling_rate),
                    t_max)
        r = acc.epsilon(delta)
        info["worst_case"] = {"epsilon": r.epsilon, "lower": r.lower,
                                      "upper": r.upper, "steps": t_max}
        step = r.details.get("grid_step_upper", r.details.get("grid_step"))
        if step is None:  # pragma: no cover - the accountant always reports its grid
            raise ValueError("the certified accountant did not report its grid step; pass "
                             "grid_step")
        # half of it: examples with small sensitivities have a relatively larger
        # discretization error at a given step; the per-example cost does not depend on it
        return 0.5 * float(step)

    @functools.cached_property
    def _loss_cache(self) -> dict:
        """Bucket index -> (remove, add) privacy losses, built on first use."""
        return {}

    def _loss(self, j: int, direction: int):
        """Privacy loss of bucket ``j`` (remove: 0, add: 1), built once per accountant."""
        cache = self._loss_cache
        if j not in cache:
            mech = PoissonSubsampled(Gaussian(self.noise_multiplier, float(self.grid[j])),
                                     self.sampling_rate)
            cache[j] = mech.privacy_losses()
        return cache[j][direction]

    def _direction(self, direction: int, used: np.ndarray, d: float, t_max: int,
                   log_tail: float, counts: np.ndarray | None = None, lower: bool = False,
                   window_tail: float = LOG_WINDOW_TAIL
                   ) -> _Direction | tuple[_Direction, _Direction]:
        """Discretize and transform the buckets ``used`` (grid indices): connect-the-dots
        (upper), and with ``lower`` also the lowered chords of :func:`certified_pair` (a
        dominated pair, for the lower bound), returned as ``(upper, lower)``. ``counts``
        (examples x ``used``) sizes the window for those examples only, leaving out at most
        ``e^window_tail`` of their composed mass on each side (bounded and charged per
        example)."""
        ups, lows = [], []
        for j in used:
            loss = self._loss(int(j), direction)
            lo, hi = _loss_range(loss, log_tail)
            if lower:
                up, low = certified_pair(loss, d, lo, hi)
                ups.append(up.trimmed())
                lows.append(low.trimmed())
            else:
                ups.append(connect_the_dots(loss, d, lo, hi).trimmed())
        share = (0.25 if lower else 0.5) * self.budget.max_memory
        up_dir = _Direction(ups, t_max, d, window_tail, self.workers, share, counts)
        if not lower:
            return up_dir
        return up_dir, _Direction(lows, t_max, d, window_tail, self.workers, share, counts)

    def _relative_size(self, cnt: np.ndarray, used: np.ndarray, t_max: int) -> np.ndarray:
        """Per example ``mu_i / mu_worst`` in (0, 1], the CLT scale of its composition
        (``mu^2 = q^2 sum_t (e^{c_t^2 / sigma^2} - 1)``; Dong, Roth, Su, "Gaussian
        differential privacy", 2022, Thm. 5.2 / Cor. 5.4) relative to the worst case (every
        step at full sensitivity). Only used to choose grid steps: the certified bracket of
        every example is checked afterwards."""
        x = np.minimum((self.grid[used] / self.noise_multiplier) ** 2, 700.0)
        x_w = min(1.0 / self.noise_multiplier ** 2, 700.0)
        with np.errstate(divide="ignore"):
            log_i = np.log(np.maximum(cnt @ np.expm1(x), 1e-300))
        log_w = math.log(t_max) + math.log(math.expm1(x_w))
        return np.clip(np.exp(0.5 * (log_i - log_w)), 1e-300, 1.0)

    def _bracket(self, cnt: np.ndarray, used: np.ndarray, d: float, delta: float,
                 log_tail: float, info: dict, bar) -> tuple[np.ndarray, np.ndarray]:
        """Certified ``(lower, upper)`` eps of the examples ``cnt`` (their counts on the
        buckets ``used``) on the grid step ``d``: both directions, the larger of each."""
        cols = np.nonzero(cnt.sum(axis=0) > 0)[0]
        c = cnt[:, cols]
        t_max = int(c.sum(axis=1).max())
        tol = TRUNC_FRACTION * delta
        round_allow = 64 * MACHINE_EPSILON * (1.0 + c.sum(axis=1))
        upper = np.zeros(c.shape[0])
        lower = np.zeros(c.shape[0])
        for direction in (0, 1):
            # the window leaves out at most 1e-7 delta of each example's composition
            dr, dl = self._direction(direction, used[cols], d, t_max, log_tail, counts=c,
                                     lower=True, window_tail=math.log(1e-7 * delta))
            key = f"fft_points_{direction}"
            info[key] = max(info.get(key, 0), dr.K, dl.K)
            extra = dr.extras(c)
            kk, tau = dr.cutoffs(c, tol)
            inf_low, out_low = dl.extras_split(c)
            kl, tau_l = dl.cutoffs(c, tol)
            key = f"max_frequencies_{direction}"
            info[key] = max(info.get(key, 0), int(kk.max()), int(kl.max()))
            order = np.argsort(kk, kind="stable")
            # a chunk's evaluator holds about six (chunk, frequencies) complex arrays: at most
            # a quarter of the memory budget
            cs = max(1, min(self.chunk_size, int(0.25 * self.budget.max_memory
                                                 / (96.0 * max(int(kk.max()),
                                                               int(kl.max()), 1)))))
            for s in range(0, order.size, cs):
                sel = order[s:s + cs]
                k_up, k_lo = int(kk[sel].max()), int(kl[sel].max())
                ev = Evaluator(dr, c[sel], k_up, tau[sel],
                               extra[sel] + round_allow[sel] * (1.0 + math.log(k_up)))
                eps_up = ev.epsilon(delta)
                del ev
                ev = Evaluator(dl, c[sel], k_lo, tau_l[sel], np.zeros(sel.size))
                credit = (inf_low[sel] - out_low[sel]
                          - round_allow[sel] * (1.0 + math.log(k_lo)))
                eps_lo = ev.epsilon_lower(delta, eps_up, credit)
                del ev
                upper[sel] = np.maximum(upper[sel], eps_up)
                lower[sel] = np.maximum(lower[sel], eps_lo)
                bar.update(sel.size)
        return lower, upper

    def _epsilon_of(self, delta: float) -> EpsilonResult:
        """Per-example eps at ``delta`` (``epsilon`` of shape ``(N,)``): a certified upper bound
        on the eps of each example's composition given its norms, with a certified lower bound
        (see the module docstring)."""
        if delta < MIN_DELTA:
            raise ValueError(f"delta must be in [{MIN_DELTA}, 1) for the individual accountant "
                             f"(its rounding allowance is ~1e-10), got {delta!r}")
        t0 = time.perf_counter()
        deadline = self.budget.deadline()
        counts_all = self.counts[:, 1:]
        used = np.nonzero(counts_all.sum(axis=0) > 0)[0]
        upper = np.zeros(self.n_examples)
        lower = np.zeros(self.n_examples)
        info: dict = {}
        if used.size == 0:
            return self._result(lower, upper, delta, info, t0)
        counts = counts_all[:, used].astype(float)
        tot = counts.sum(axis=1)
        t_max = int(tot.max())
        d0 = self._choose_step(t_max, delta, info)
        self._log(f"grid step {d0:.3g}, {used.size} buckets, T_max={t_max}")
        # each bucket is discretized on the loss range outside of which its tails hold at most
        # 1e-7 delta / T_max: what lies above goes to +inf (charged in full to delta), what
        # lies below moves up (upper pair) or is dropped (lower pair), both certified; it
        # moves no eps by more than a 1e-7 relative change of delta does
        log_tail = math.log(1e-7 * delta) - math.log(max(t_max, 1))
        idx_act = np.nonzero(tot > 0)[0]
        cnt = counts[idx_act]
        # grid step per group of examples: halved for each halving of the CLT scale of the
        # composition below the worst case's (the discretization error of eps grows like
        # (d / eps)^2), then halved again for every example whose certified bracket is wider
        # than rtol
        rel = self._relative_size(cnt, used, t_max)
        level = np.clip(np.floor(-np.log2(rel) - LEVEL_OFFSET), 0, MAX_LEVEL).astype(np.int64)
        up = np.full(idx_act.size, np.inf)
        lo = np.zeros(idx_act.size)
        steps_used = set()
        loose = np.ones(idx_act.size, dtype=bool)
        refinements = 0
        info.update({"grid_step": d0, "buckets": int(used.size)})
        bar = progress_bar(total=2 * idx_act.size, desc="per-example epsilon", unit="example",
                           enabled=self.progress)
        capped = np.zeros(idx_act.size, dtype=bool)  # no finer grid fits the budget
        while True:
            for lv0 in np.unique(level[loose]):
                rows = np.nonzero(loose & (level == lv0))[0]
                lv, res = int(lv0), None
                while res is None:
                    d = d0 * 2.0 ** -float(lv)
                    self._log(f"grid step {d:.3g}: {rows.size} examples, "
                              f"{time.perf_counter() - t0:.1f} s")
                    try:
                        res = self._bracket(cnt[rows], used, d, delta, log_tail, info, bar)
                    except BudgetExceeded:
                        # a finer grid than this does not fit: keep the previous round's
                        # bracket, or (first round) fall back to a coarser step
                        if refinements > 0 or lv == 0:
                            if refinements == 0:
                                raise
                            break
                        lv -= 1
                if res is None:
                    capped[rows] = True
                    continue
                steps_used.add(d)
                level[rows] = lv
                up[rows] = np.minimum(up[rows], res[1])
                lo[rows] = np.maximum(lo[rows], res[0])
            wide = ~(up - lo <= self.rtol * up)
            loose = wide & ~capped
            if (not np.any(loose) or refinements >= MAX_REFINEMENTS
                    or deadline.passed(0.5)):
                break
            refinements += 1
            level[loose] += 1
        bar.close()
        upper[idx_act] = up
        lower[idx_act] = lo
        info.update({"grid_steps": sorted(steps_used, reverse=True),
                     "refinements": refinements, "loose": int(wide.sum()),
                     "converged": not np.any(wide)})
        return self._result(lower, upper, delta, info, t0)

    def _result(self, lower: np.ndarray, upper: np.ndarray, delta: float, info: dict,
                t0: float) -> EpsilonResult:
        info["seconds"] = time.perf_counter() - t0
        check_bracket(lower, upper, "per-example eps", self.name)
        note = ("per example: certified bracket [lower, upper] of the eps of its composition "
                "as recorded (each norm ratio rounded up to the bucket grid j/n_buckets); "
                "upper also bounds the eps at the exact norms, which may lie below lower by "
                "the bucketing error (raise n_buckets to shrink it); not a fully adaptive "
                "guarantee: see IndividualGDPFilter")
        if not info.get("converged", True):
            note += (f"; {info['loose']} brackets wider than rtol={self.rtol:g} (refinement "
                     "stopped by its limit or the time budget)")
        return EpsilonResult(upper, delta, lower, upper, self.name, True, estimate=upper,
                             note=note, details=info)


def individual_epsilons(grad_norms, *, sampling_rate: float, noise_multiplier: float,
                        clip_norm: float, delta: float, n_buckets: int = 100,
                        rtol: float = DEFAULT_RTOL, grid_step: float | None = None,
                        progress: bool | None = None, max_memory=None, max_seconds=None
                        ) -> EpsilonResult:
    """Individual eps of every example of a DP-SGD run (Koskela et al. 2023, Sec. 5, App. D).

    Parameters
    ----------
    grad_norms : array ``(N, T)`` of per-example gradient norms at each step (NaN = unknown,
        charged the clipping norm).
    sampling_rate, noise_multiplier, clip_norm : ``q``, ``sigma``, ``C`` of DP-SGD.
    delta : target delta in ``[1e-9, 1)``.
    n_buckets, rtol, grid_step, progress, max_memory, max_seconds : see
        :class:`IndividualPLDAccountant`.

    Returns
    -------
    EpsilonResult : ``epsilon`` (= ``upper``) an array ``(N,)``, each a certified upper bound
        on the eps of that example's composition *given its norms* (the approximative
        accountant of Sec. 5, not a fully adaptive guarantee; see the module docstring), and
        ``lower`` the certified lower bounds (brackets within ``rtol`` unless
        ``details["converged"]`` is False).
    """
    g = np.asarray(grad_norms)
    if g.ndim != 2:
        raise ValueError(f"grad_norms must be a 2-d array (N examples x T steps), got shape "
                         f"{g.shape}")
    acc = IndividualPLDAccountant(sampling_rate=sampling_rate, noise_multiplier=noise_multiplier,
                                  clip_norm=clip_norm, n_examples=g.shape[0],
                                  n_buckets=n_buckets, rtol=rtol, grid_step=grid_step,
                                  progress=progress, max_memory=max_memory,
                                  max_seconds=max_seconds)
    acc.step_many(g)
    return acc.epsilon(delta)
