"""Individual epsilon for DP-SGD with the saddle-point accountant: an APPROXIMATION.

Papers: Koskela, Tobaben, Honkela, "Individual Privacy Accounting with Gaussian Differential
Privacy" (ICLR 2023), Sec. 5 and App. D.2, for what an individual eps is and the sensitivity
buckets; Alghamdi et al., "The Saddle-Point Accountant for Differential Privacy" (2023) for the
approximation.

What is computed
----------------
The same composition as :class:`~tightdp.individual.IndividualPLDAccountant`: example ``i``
sees, at each step, the Poisson subsampled Gaussian mechanism whose sensitivity is its
clipped gradient-norm ratio rounded *up* to the bucket grid ``c_b = b / B`` (App. D.2);
``n_{i,b}`` counts its steps in bucket ``b``. The CGF of a composition is the sum of the CGFs
(Alghamdi et al. 2023, eq. (72)), so example ``i``'s privacy loss has the CGF

    K_i(t) = sum_b n_{i,b} K_b(t)

with ``K_b`` the CGF (eq. (23)) of the privacy loss of ``PoissonSubsampled(Gaussian(sigma, c_b),
q)``, computed by :mod:`tightdp.losses.cgf`, one per direction (remove and add). With it the
saddle-point eps of :class:`~tightdp.SaddlePointAccountant` is computed per example and per
direction -- the saddle point of eq. (50), SP-MSD0 (eqs. (7)/(60)), SP-MSD1 (eq. (61)) or SP-CLT
(eqs. (8)/(66), Prop. 6), evaluated by the same function
(:func:`tightdp.curves.saddle.saddle_log_delta`) -- and the larger of the two directions is
returned. For an example whose norms are all >= C this is the accountant's answer for
``PoissonSubsampled(Gaussian(sigma), q)`` composed ``T`` times.

This is not a bound. The saddle-point value approximates the eps of each example's
composition (given its norms; the paper's approximative individual accountant of Sec. 5), with
no guarantee. Where the tilted loss is far from Gaussian (few effective compositions: the
SP-MSD1 correction terms exceed :data:`tightdp.curves.saddle.UNRELIABLE`, the accountant's
own diagnostic) the example is flagged unreliable -- here in either direction that was solved,
not only the one that sets the answer, because an unreliable direction may under-report. The
certified per-example numbers come from :class:`~tightdp.individual.IndividualPLDAccountant`;
the fully adaptive guarantee is the individual GDP filter's
(:class:`~tightdp.individual.IndividualGDPFilter`). What *is* certified here is ``upper``: the
refined moments bound (Alghamdi et al. 2023, eqs. (42)-(44)),
``delta(eps) <= e^{K_i(t) - t eps} t^t / (1+t)^{1+t}`` for every ``t > 0``, minimized over tilts
at which ``K_i`` is evaluated exactly (no interpolation), with the accountant's allowance for
the CGF quadrature made relative (``1e-11 (T_i + K_i(t))``).

How it is vectorized
--------------------
1. Brackets. Per direction the bucket CGFs and their first four derivatives are evaluated exactly
   (quadrature of :mod:`tightdp.losses.cgf`) at bracketing tilts built like the accountant's
   (``curves.saddle.tilt_grids``: 33 points from 1e-4 to 64 -- the accountant's ``solve_tilt``
   now uses 65, which brackets the same root wherever ``g`` increases -- then down to 1e-12, then
   up to the tilt cap 2048, or 1e12 for Gaussian losses). Matrix products with the counts give
   the examples' ``K_i, ..., K_i''''`` there, hence the saddle-point function ``g_i(t) = -log
   delta_approx(eps(t))`` and the refined-moments optimality function ``t K_i'(t) - K_i(t) +
   log(1 + t)`` (eq. (44)); the first grid point where each reaches ``-log delta`` brackets the
   example's root, as in the accountant (the refined-moments function is linear in the counts:
   one product row per tilt, ``t K_b' - K_b``). The refined-moments function (increasing) on
   the first grid, of both directions in one product per :data:`SUB_CHUNK` examples, right after
   their counts are converted to floats there (in cache): at the grid points of the brackets of
   the previous slice of examples (4-5 points per direction; at every point for the first slice
   and for the examples whose root the window does not show inside it); the further grids only
   for the few examples off the first; the saddle-point function at the two ends of the
   refined-moments bracket, then grid point by grid point up or down from there (the same bracket
   wherever ``g_i`` is increasing on the grid).
2. Interpolants. On each bracket needed, every bucket's five rows are interpolated by
   Chebyshev polynomials of degree :data:`DEGREE` at the Chebyshev-Lobatto tilts (exact values
   there). An example's composed interpolant is accepted when the sum over its buckets of
   ``n_{i,b}`` times their trailing coefficients is below :data:`INTERP_RTOL` of its composed
   scale (plus a quadrature-noise floor). The CGF of the remove direction bends sharply in
   ``t`` near ``2 sigma^2 log(1/q) / c_b^2`` (where the tilted law switches to the sampled
   component), so some examples descend into halves of their bracket (exact composed values
   at the midpoint decide which) until it is resolved, at most :data:`MAX_DEPTH` times.
3. Saddle points. The composed Chebyshev coefficients of an example's rows ``K_i, ..., K_i''''``
   are one matrix product of its counts with the bucket coefficients; those of ``K_i^(5)`` follow
   by the derivative recurrence of Chebyshev series from the composed ``K_i''''`` coefficients
   (linear: the derivative of the composed interpolant). The accountant's safeguarded Newton
   iteration in ``log t`` (bisection when a step leaves the bracket, the same stopping rules)
   solves ``g_i(t) = -log delta`` on the interpolant (the Chebyshev series summed directly, the
   ``T_k`` by their recurrence), and ``eps_i = K_i'(t) - 1/t - 1/(1+t)`` (eq. (50)). For
   SP-MSD0/1 the steps are Halley's, with the exact first derivative of ``g_i`` and its second
   without the SP-MSD1 term's, from a Halley step off the bracket end where ``g_i`` is nearer the
   target (~3 evaluations per example); SP-CLT iterates as the accountant (from the secant point,
   secant slopes after the first step). The examples of all pieces are iterated together (each on
   its own coefficients and interval), so small pieces cost no iteration of their own; eps at the
   final iterate (the last evaluated one, or a converged Newton step from it) is extrapolated
   from the last evaluation with the exact ``d eps / d log t = t (K_i'' + 1/t^2 + 1/(1+t)^2)``
   (eq. (50)), an error of the order of the squared step, far below the solver's tolerance (the
   interpolant is evaluated where the step exceeds :data:`FINAL_STEP`); the SP-MSD1 terms
   reported are the last evaluation's.
4. Certified bound. The refined-moments bound is minimized over the Lobatto tilts of the
   bracket of its optimal tilt, where ``K_i`` is a matrix product of the counts with *exact*
   bucket values; any tilt gives a valid bound, so interpolation cannot make it under-report.
   In the second direction it is computed only for the examples where its value at the middle
   Lobatto tilt (one product row, an upper bound on the minimum, with a slack far above the
   rounding) does not already put it below both the first direction's bound and eps: elsewhere
   it changes neither ``upper`` (the maximum over the directions) nor step 5's choice.
5. Directions. The remove direction is solved first; the add direction's saddle point is
   computed only for the examples whose certified add-direction bound exceeds the eps found
   so far (elsewhere the add direction cannot raise the true eps above the value reported).

Examples are processed in chunks (``chunk_size``), so the intermediate arrays stay small
whatever ``N``; inside one, the counts are held as buckets x examples (the fast layout for the
products with few rows), ordered by the refined-moments brackets of the directions (so that the
examples of a piece are mostly adjacent and the products take views of the counts rather than
copies of their columns; gathered in that order from the integer rows), and the saddle points
are solved :data:`SUB_CHUNK` examples at a time (in cache). Every per-example number is
computed column by column, so it does not depend on the order or on the other examples of the
chunk (up to the summation order of the matrix products). Agreement with
:class:`~tightdp.SaddlePointAccountant` composing the same buckets: ~1e-9 relative (its own
Newton tolerance), also at an example whose norms are all >= C; where ``g_i`` is not increasing
in ``t`` (only seen with few effective compositions, i.e. flagged examples) the two may pick
different roots.
"""

from __future__ import annotations

import math
import time

import numpy as np
from scipy import fft as sfft

from .. import _validate as v
from .._numerics import newton_bracketed, secant_start
from ..accountants.base import Queries
from ..budget import Budget, BudgetExceeded
from ..curves.saddle import (
    LABELS,
    METHODS,
    T_MAX,
    T_MAX_QUAD,
    UNRELIABLE,
    log_theta_max,
    saddle_eps,
    saddle_log_delta,
    tilt_grids,
)
from ..losses import GaussianLoss
from ..losses.cgf import cgf, cgf_rows, cgf_supported
from ..mechanisms.basic import Gaussian
from ..mechanisms.subsampling import PoissonSubsampled
from ..progress import progress_bar
from ..results import EpsilonResult
from .blocks import (
    ResultStore,
    as_slice,
    block_summary,
    merge_summaries,
    run_with_restarts,
)
from .history import NormHistory
from .pld_blocks import used_buckets
from .runner import BlockRunner

__all__ = ["IndividualSPAAccountant"]

#: degree of the Chebyshev interpolants of the bucket CGFs on each tilt interval (even: the
#: midpoint, where an interval is split, is one of the nodes)
DEGREE = 24
#: an interpolant is accepted when its two trailing coefficients are below this fraction of
#: the row's scale (rows K, K', K'' relative to their maximum on the interval; K''' and K''''
#: relative to K''^{3/2} and K''^2, the scales they enter the SP-MSD1 terms with)
INTERP_RTOL = 1e-12
#: ... plus this multiple of max(1, |K|) (the level of the quadrature's rounding noise)
NOISE_FLOOR = 1e-13
#: at most this many halvings of a bracketing interval
MAX_DEPTH = 14
#: (-1)^k, the Chebyshev polynomials at -1
_ALTERNATING = (-1.0) ** np.arange(DEGREE + 1)
#: the saddle points are solved this many examples at a time (arrays that stay in cache)
SUB_CHUNK = 8192
#: the accountant's convergence tolerance on g (curves.saddle.solve_tilt)
NEWTON_RTOL = 1e-11
#: largest final Newton step (in log t) that eps is extrapolated over, to first order, from
#: the last evaluation (beyond it the interpolant is evaluated at the final iterate)
FINAL_STEP = 1e-6
#: relative allowance for the quadrature of the CGF in the certified bound (the accountant
#: uses 1e-11 per composed step, absolute; here 1e-11 (T_i + K_i(t)), never smaller)
K_MARGIN = 1e-11
#: the bracketing grids (curves.saddle.tilt_grids: geomspace(1e-4, 64, 33), then down to
#: 1e-12, then up to the tilt cap in chunks; the accountant's solve_tilt uses 65 points on the
#: first: the same root wherever g increases, which the examples flagged reliable satisfy)
_GRID_LO, _GRID_HI, _GRID_POINTS = 1e-4, 64.0, 33
#: stride of the coarse pass over the first grid (see _Solver.bracket)
_COARSE = 4
#: the refined-moments brackets are looked for on the grid points of the brackets of the
#: previous slice of examples held by at least 1 in this many of them (see
#: _Solver.rma_brackets); the others evaluate the whole grid
WINDOW_SHARE = 1000
#: bytes one interpolation piece holds per bucket (:class:`_Piece`: values, coefficients,
#: end rows, checks, and the coefficients' temporary: about 3 (DEGREE + 1) rows of 5 doubles)
PIECE_BYTES = 8.0 * (3 * 5 * (DEGREE + 1) + 40)
#: buckets whose CGFs are evaluated between two checks of the budget (:meth:`_Table.stats`)
_STATS_ROWS = 256
#: share of max_memory for the tables of bucket CGFs, and for the arrays of one block
TABLE_SHARE = 0.25
BLOCK_SHARE = 0.25
#: bytes of a block's arrays per example: 16 per bucket of the grid and about 3000 more
#: (see the ``chunk_size`` parameter)
ROW_BYTES_PER_BUCKET, ROW_BYTES = 16.0, 3000.0
#: products over ranges of consecutive examples (views of the counts) when these average at
#: least this many examples, else over a copy of the columns (see _product)
MIN_RUN = 256


def _lobatto(p: int) -> np.ndarray:
    """Chebyshev-Lobatto points ``cos(pi m / p)``, m = 0..p (from +1 down to -1); for even
    ``p`` the middle one exactly 0 (``cos(pi / 2)`` rounds to 6e-17)."""
    x = np.cos(np.pi * np.arange(p + 1) / p)
    if p % 2 == 0:
        x[p // 2] = 0.0
    return x


def _cheb_coefficients(vals: np.ndarray) -> np.ndarray:
    """Chebyshev coefficients of the interpolant through values at the Lobatto points of the
    last axis (DCT-I: ``c_k = (2/p) sum'' f_m cos(pi k m / p)``, end coefficients halved)."""
    p = vals.shape[-1] - 1
    c = sfft.dct(vals, type=1, axis=-1) / p
    c[..., 0] *= 0.5
    c[..., -1] *= 0.5
    return c


def _cheb_eval(c: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``sum_k c[:, k] T_k(x)`` for coefficients ``c`` of shape ``(R, p+1, n)`` at ``x`` (n,):
    the ``T_k(x)`` by their three-term recurrence ``T_{k+1} = 2 x T_k - T_{k-1}`` (Mason,
    Handscomb, *Chebyshev Polynomials*, 2003, Sec. 1.2.2; ``|T_k| <= 1`` on ``[-1, 1]``, so
    the direct sum is as accurate as Clenshaw's recurrence), once per column for the ``R``
    rows, then summed (half the operations of Clenshaw's recurrence on the ``R`` rows) by one
    ``einsum`` (the products accumulated in order of degree, as a loop over the degrees would;
    ~2x faster than that loop of array operations)."""
    p1 = c.shape[1]
    tk = np.empty((p1, x.size))
    tk[0] = 1.0
    tk[1] = x
    x2 = 2.0 * x
    for k in range(2, p1):
        np.multiply(x2, tk[k - 1], out=tk[k])
        tk[k] -= tk[k - 2]
    return np.einsum("rkn,kn->rn", c, tk)


def _cheb_derivative(c: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Chebyshev coefficients (first axis: degree, one column per example; same shape as
    ``c``, the last one zero) of ``d/dt`` of the series ``c`` in ``x = scale (t - a) - 1``
    (``scale`` per column): ``d_{k-1} = d_{k+1} + 2 k c_k``, the constant term halved (the
    derivative recurrence of Chebyshev series; Mason, Handscomb, *Chebyshev Polynomials*,
    2003, Sec. 2.4.5). Linear in ``c``: the derivative of a composed interpolant is the
    composition of its buckets' derivatives."""
    p = c.shape[0] - 1
    d = np.empty_like(c)
    d[p] = 0.0
    for k in range(p, 0, -1):
        np.multiply(c[k], 2.0 * k, out=d[k - 1])
        if k + 1 <= p:
            d[k - 1] += d[k + 1]
    d[0] *= 0.5
    d *= scale
    return d


def _g_slope(ks: np.ndarray, t: np.ndarray, method: str,
             fallback: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First and (approximate) second derivative in ``u = log t`` of the saddle-point function
    ``g = -log delta_approx(eps(t))`` of SP-MSD0 (eq. (60)) or SP-MSD1 (eq. (61)) (Alghamdi
    et al., "The Saddle-Point Accountant for Differential Privacy", 2023), from the composed
    rows ``ks = (K, K', ..., K^(5))`` at ``t``.

    With ``phi2, phi3, phi4`` of the SP-MSD1 terms and ``phi5 = K^(5) - 24/t^5 - 24/(1+t)^5``
    (the derivatives in ``t`` of ``phi = K - t eps - log t - log(1+t)`` at fixed eps; at the
    saddle point ``d phi / dt = -t phi2``): ``d(log delta)/dt = -t phi2 - phi3 / (2 phi2) +
    corr' / (1 + corr)``, ``corr = phi4 / (8 phi2^2) - 5 phi3^2 / (24 phi2^3)``, ``corr' =
    phi5 / (8 phi2^2) - 2 phi3 phi4 / (3 phi2^3) + 5 phi3^3 / (8 phi2^4)`` (SP-MSD1 where it
    did not fall back to SP-MSD0). The second derivative leaves out the SP-MSD1 term's. Both
    only steer the iteration (Halley's step): the root is where ``g`` meets the target."""
    it, itp = 1.0 / t, 1.0 / (1.0 + t)
    it2, itp2 = it * it, itp * itp
    phi2 = ks[2] + it2 + itp2
    phi3 = ks[3] - 2.0 * (it2 * it + itp2 * itp)
    phi4 = ks[4] + 6.0 * (it2 * it2 + itp2 * itp2)
    r3 = phi3 / phi2
    dg = t * phi2 + 0.5 * r3  # -d(log delta)/dt
    if method == "msd1":
        phi5 = ks[5] - 24.0 * (it2 * it2 * it + itp2 * itp2 * itp)
        p2 = phi2 * phi2
        r4 = phi4 / p2
        corr = 0.125 * r4 - (5.0 / 24.0) * r3 * r3 / phi2
        dcorr = (0.125 * phi5 / p2 - (2.0 / 3.0) * r3 * r4 + 0.625 * r3 ** 3 / phi2)
        dg = np.where(fallback, dg, dg - dcorr / (1.0 + corr))
    d2 = phi2 + t * phi3 + 0.5 * (phi4 / phi2 - r3 * r3)
    return t * dg, t * t * d2 + t * dg


def _g_msd(ks: np.ndarray, t: np.ndarray, method: str) -> tuple[np.ndarray, ...]:
    """The saddle-point function ``g = -log delta_approx`` of SP-MSD0 (eq. (60)) or SP-MSD1
    (eq. (61)) at the saddle-point eps of ``t`` (Alghamdi et al. 2023), that eps (eq. (50)),
    the fallback flag, the size of the SP-MSD1 terms, and the derivatives of :func:`_g_slope`,
    from the composed rows ``ks = (K, K', ..., K^(5))``: the formulas of
    :func:`tightdp.curves.saddle.saddle_log_delta` and :func:`_g_slope` in one pass, sharing
    ``phi2, phi3, phi4`` and the powers of ``1/t`` and ``1/(1+t)`` (the same numbers up to
    rounding). Returns ``(g, eps, fallback, size, dg/du, d2g/du2)``."""
    it, itp = 1.0 / t, 1.0 / (1.0 + t)
    it2, itp2 = it * it, itp * itp
    eps = ks[1] - it - itp
    phi2 = ks[2] + it2 + itp2
    phi3 = ks[3] - 2.0 * (it2 * it + itp2 * itp)
    phi4 = ks[4] + 6.0 * (it2 * it2 + itp2 * itp2)
    r3 = phi3 / phi2
    p2 = phi2 * phi2
    r4 = phi4 / p2
    term4 = 0.125 * r4
    term3 = (5.0 / 24.0) * r3 * r3 / phi2
    size = np.maximum(np.abs(term4), term3)
    val = ks[0] - t * eps - np.log(t) - np.log1p(t) - 0.5 * np.log(2.0 * math.pi * phi2)
    dg = t * phi2 + 0.5 * r3  # -d(log delta)/dt
    if method == "msd1":
        corr = term4 - term3
        fallback = ~(corr > -1.0)
        val = np.where(fallback, val, val + np.log1p(np.where(fallback, 0.0, corr)))
        phi5 = ks[5] - 24.0 * (it2 * it2 * it + itp2 * itp2 * itp)
        dcorr = (0.125 * phi5 / p2 - (2.0 / 3.0) * r3 * r4 + 0.625 * r3 ** 3 / phi2)
        dg = np.where(fallback, dg, dg - dcorr / (1.0 + corr))
    else:
        fallback = np.zeros(t.shape, dtype=bool)
    d2 = phi2 + t * phi3 + 0.5 * (phi4 / phi2 - r3 * r3)
    return -val, eps, fallback, size, t * dg, t * t * d2 + t * dg


def _halley_slope(d1: np.ndarray, d2: np.ndarray, r: np.ndarray) -> np.ndarray:
    """The slope ``d1 - r d2 / (2 d1)`` that makes a Newton step for the residual ``r`` (first
    and second derivatives ``d1, d2``) Halley's step (Halley 1694; e.g. Traub, *Iterative
    Methods for the Solution of Equations*, 1964, Sec. 5.2); ``d1`` (Newton's) where that
    correction would more than quintuple the step."""
    dg = d1 - r * d2 / (2.0 * d1)
    return np.where(dg > 0.2 * d1, dg, d1)


class _Piece:
    """Chebyshev interpolants of every bucket's CGF rows on one tilt interval ``[a, b]``."""

    def __init__(self, a: float, b: float, vals: np.ndarray):
        self.a, self.b = a, b
        self.t = a + (b - a) * (_lobatto(vals.shape[-1] - 1) + 1.0) * 0.5  # from b down to a
        self.vals = vals  # (B, 5, p+1): exact values at the nodes
        # exact rows at a and at b, (10, B): composed = this @ counts (buckets x examples)
        self.ends = np.ascontiguousarray(vals[:, :, [-1, 0]].reshape(vals.shape[0], 10).T)
        self.k_t = np.ascontiguousarray(vals[:, 0, :].T)  # K at the nodes, (p+1, B)
        c = _cheb_coefficients(vals)
        p1 = vals.shape[-1]
        # 5 (p+1) rows (K .. K'''', each by degree), one column per bucket: composed = this @
        # counts
        self.coef_t = np.ascontiguousarray(c.transpose(1, 2, 0).reshape(5 * p1, -1))
        tail = np.max(np.abs(c[..., -2:]), axis=-1)  # (B, 5)
        s0 = np.max(np.abs(vals[:, 0]), axis=-1)
        s2 = np.max(np.abs(vals[:, 2]), axis=-1)
        scale = np.stack([s0, np.max(np.abs(vals[:, 1]), axis=-1), s2, s2 ** 1.5, s2 ** 2],
                         axis=1)
        noise = NOISE_FLOOR * np.maximum(1.0, s0)[:, None]
        # every bucket resolved on its own: then so is every composition (the bounds add up;
        # (sum n_b s_b)^{3/2} >= sum n_b s_b^{3/2} for counts n_b >= 1, likewise ^2)
        self.all_ok = bool(np.all(tail <= INTERP_RTOL * scale + noise))
        # otherwise per example: check @ counts = (error bounds of the five composed rows,
        # composed scales of rows 0..2, composed noise level, and the exact composed rows at
        # the midpoint ``m``, a Lobatto node (DEGREE is even): one product for both)
        self.m = float(self.t[DEGREE // 2])
        self.check = np.ascontiguousarray(np.vstack([
            np.column_stack([tail, s0, scale[:, 1], s2, np.maximum(1.0, s0)]).T,
            vals[:, :, DEGREE // 2].T]))
        self.children: list[_Piece | None] = [None, None]

    def unresolved(self, m: np.ndarray) -> np.ndarray:
        """Per example (columns of ``m = check @ counts``, counts buckets x examples): is the
        interpolation error bound of its composed rows (``sum_b n_b`` times the two trailing
        coefficients) above the tolerance relative to the composed scales (rows 0..2: their
        maxima; K''' and K'''': K''^{3/2} and K''^2)? (Only for pieces not ``all_ok``.)"""
        s2 = m[7]
        scale = np.stack([m[5], m[6], s2, s2 ** 1.5, s2 ** 2])
        return np.any(m[:5] > INTERP_RTOL * scale + NOISE_FLOOR * m[8], axis=0)


class _Table:
    """The bucket CGFs of one direction: exact values at the accountant's bracketing tilts,
    interpolants on the intervals between them (refined on demand), all cached."""

    def __init__(self, losses: list, name: str, limits: tuple[float, float, float] = (
            math.inf, math.inf, math.inf)):
        self.losses = losses
        self.name = name
        # (wall-clock time by which the query must end, bytes the tables of the query may
        # hold, max_seconds): checked before each evaluation of the bucket CGFs (the time,
        # from the rate of the previous one) and before each piece is fitted (the memory)
        self.end, self.max_bytes, self.max_seconds = limits
        self.tilt_seconds = 0.0  # seconds per tilt of the last evaluation, for all buckets
        self.t_cap = T_MAX if all(isinstance(x, GaussianLoss) for x in losses) else T_MAX_QUAD
        self.grids = tilt_grids(_GRID_LO, _GRID_HI, self.t_cap, _GRID_POINTS)
        self._points: dict[int, np.ndarray] = {}
        self._rows_ok = all(cgf_supported(x) is None for x in losses)
        self._rma: dict[int, np.ndarray] = {}
        self._pieces: dict[tuple[float, float], _Piece] = {}
        self.n_pieces = 0

    def stats(self, t: np.ndarray) -> np.ndarray:
        """Exact rows ``K_b, ..., K_b''''`` of every bucket at tilts ``t`` (one-dimensional,
        finite, >= 0): (B, 5, len(t)); by :func:`~tightdp.losses.cgf.cgf_rows` (the same
        numbers as :func:`~tightdp.losses.cgf.cgf`, without its checks of the arguments) where
        every loss is supported. Refused (:class:`~tightdp.BudgetExceeded`) if, at the rate
        of the previous evaluation, it would end past the query's time budget."""
        self.check_time(t.size)
        start = time.time()
        b = len(self.losses)
        rows = []
        for a in range(0, b, _STATS_ROWS):
            part = self.losses[a:a + _STATS_ROWS]
            before = self.node_bytes(part)
            if self._rows_ok:
                rows.extend(cgf_rows(loss, t, 4) for loss in part)
            else:
                rows.extend(cgf(loss, t, 4) for loss in part)
            # the rest of the buckets at the rate of those done: time, and the quadrature
            # nodes the losses keep (the tables' memory that grows with the tilts visited)
            done, now = a + len(part), time.time()
            if done < b:
                more = (now - start) / done * (b - done)
                if now + more > self.end:
                    raise self._late(more, t.size)
                grown = (self.node_bytes(part) - before) / len(part) * (b - done)
                self._check_bytes(self.held_bytes() + grown, self.n_pieces)
        self.tilt_seconds = (time.time() - start) / max(t.size, 1)
        return np.stack(rows)

    def node_bytes(self, losses: list | None = None) -> float:
        """Bytes of the quadrature nodes :func:`~tightdp.losses.cgf.cgf` keeps in the losses
        (all, or ``losses``): the part of the tables that grows with the tilts visited."""
        n = 0
        for loss in self.losses if losses is None else losses:
            for nodes in loss.tables.get("cgf_nodes", {}).values():
                n += sum(x.nbytes for x in nodes)
        return float(n)

    def held_bytes(self) -> float:
        """Bytes the table holds: exact values at the grid tilts (with their refined-moments
        rows), interpolation pieces, quadrature nodes."""
        pts = sum(x.size for x in self._points.values()) * 8.0 * (1.0 + 1.0 / 5)
        return pts + self.n_pieces * PIECE_BYTES * len(self.losses) + self.node_bytes()

    def _check_bytes(self, need: float, pieces: int) -> None:
        if need > self.max_bytes:
            raise BudgetExceeded(
                f"n_buckets: the saddle-point tables of {len(self.losses)} buckets need about "
                f"{need / 1e9:.3g} GB ({pieces} interpolation pieces and the CGF quadrature "
                f"nodes; over their share of max_memory, {self.max_bytes / 1e9:.3g} GB); use "
                "fewer buckets or raise max_memory")

    def _late(self, more: float, tilts: int) -> BudgetExceeded:
        return BudgetExceeded(
            f"n_buckets: the saddle-point tables of {len(self.losses)} buckets would run "
            f"past max_seconds={self.max_seconds:g} (about {more:.3g} s more for {tilts} "
            "tilts); use fewer buckets or raise max_seconds")

    def check_time(self, tilts: int) -> None:
        """Refuse if evaluating every bucket's CGF at ``tilts`` more tilts would end past the
        query's time budget (estimated at the rate of the previous evaluation)."""
        more = tilts * self.tilt_seconds
        if time.time() + more > self.end:
            raise self._late(more, tilts)

    def check_pieces(self, n_new: int) -> None:
        """Refuse before fitting ``n_new`` more interpolation pieces if they would take the
        tables over their share of the memory budget (:data:`PIECE_BYTES` per bucket and
        piece, beside the exact values at the grid tilts) or past the time budget."""
        self._check_bytes(self.held_bytes() + n_new * PIECE_BYTES * len(self.losses),
                          self.n_pieces + n_new)
        self.check_time(n_new * (DEGREE + 1))

    def points(self, gi: int) -> np.ndarray:
        """Exact bucket rows at the tilts of grid ``gi``: shape (B, 5, len(grid))."""
        if gi not in self._points:
            self._points[gi] = self.stats(self.grids[gi])
        return self._points[gi]

    def rma_rows(self, gi: int) -> np.ndarray:
        """Per tilt ``t`` of grid ``gi`` (rows) and bucket (columns), ``t K_b'(t) - K_b(t)``:
        composed with the counts (a matrix product), plus ``log(1 + t)``, the refined-moments
        optimality function ``t K_i'(t) - K_i(t) + log(1 + t)`` of eq. (44) (Alghamdi et al.
        2023), increasing in ``t``."""
        if gi not in self._rma:
            t, pts = self.grids[gi], self.points(gi)
            self._rma[gi] = np.ascontiguousarray((t * pts[:, 1, :] - pts[:, 0, :]).T)
        return self._rma[gi]

    def _fit(self, a: float, b: float) -> _Piece:
        self.check_pieces(1)
        t = a + (b - a) * (_lobatto(DEGREE) + 1.0) * 0.5
        self.n_pieces += 1
        return _Piece(a, b, self.stats(t))

    def piece(self, a: float, b: float) -> _Piece:
        """The interpolants on ``[a, b]`` (a bracketing interval of the tilt grids)."""
        key = (float(a), float(b))
        if key not in self._pieces:
            self._pieces[key] = self._fit(*key)
        return self._pieces[key]

    def child(self, pc: _Piece, side: int) -> _Piece:
        """The left (0) or right (1) half of ``pc``, fitted when first needed."""
        if pc.children[side] is None:
            m = pc.m
            pc.children[side] = self._fit(pc.a, m) if side == 0 else self._fit(m, pc.b)
        return pc.children[side]


def _cell(tab: _Table, t: np.ndarray) -> np.ndarray:
    """Index of each tilt ``t`` in the first bracketing grid of ``tab``; -1 where it is not a
    point of that grid (NaN included)."""
    g0 = tab.grids[0]
    k = np.minimum(np.searchsorted(g0, t), g0.size - 1)
    return np.where(g0[k] == t, k, -1)


def _runs(cols: np.ndarray) -> list[tuple[int, int]] | None:
    """The maximal ranges ``[s, e)`` of positions of ``cols`` (increasing) whose values are
    consecutive, if they average at least :data:`MIN_RUN` columns (or there is one): the
    products then take views of the counts, range by range; else None."""
    n = cols.size
    if n == 0:
        return []
    if cols[-1] - cols[0] + 1 == n:  # increasing and as many as the values they span
        return [(0, n)]
    brk = np.flatnonzero(np.diff(cols) != 1) + 1
    if (brk.size + 1) * MIN_RUN > n:
        return None
    edges = [0, *brk.tolist(), n]
    return list(zip(edges[:-1], edges[1:], strict=True))


def _product(m: np.ndarray, cnt: np.ndarray, cols: np.ndarray,
             out: np.ndarray | None = None) -> np.ndarray:
    """``m @ cnt[:, cols]`` (``cnt``: buckets x examples; this layout, with the examples
    along the rows of the result, is the fast one for the few-row ``m`` here; ``cols``
    increasing), into ``out`` if given: over the ranges of consecutive columns, views of the
    counts (:func:`_runs`; the examples are ordered by their brackets in :func:`spa_block`,
    so those of a piece mostly are); else for more than half of the examples a product over
    all of them, then the columns picked (cheaper than copying most of the counts); else over
    a copy of the columns."""
    n = cols.size
    if out is None:
        out = np.empty((m.shape[0], n))
    if n == cnt.shape[1]:
        return np.matmul(m, cnt, out=out)
    runs = _runs(cols)
    if runs is not None:
        for a, b in runs:
            np.matmul(m, cnt[:, cols[a]:cols[b - 1] + 1], out=out[:, a:b])
        return out
    if 2 * n > cnt.shape[1]:
        return np.take(m @ cnt, cols, axis=1, out=out)
    return np.matmul(m, np.take(cnt, cols, axis=1), out=out)


def _first_reaching(ge: np.ndarray, j0: int, p0: int) -> tuple[np.ndarray, np.ndarray]:
    """Per column of ``ge`` (the comparisons ``f >= target`` at the grid points ``j0,
    j0 + 1, ...`` of a grid of ``p0`` points, rows), the index of the first point reaching
    the target and whether it is known: for the whole grid (``j0 = 0``, ``p0`` rows) wherever
    some point reaches it (the number of points below, where the comparisons increase along
    the grid -- the function does --, else the first by argmax); for a window, where its first
    point is below the target and its last one reaches it, the comparisons increasing (the
    root inside: the first point reaching it is the same as on the whole grid)."""
    w = ge.shape[0]
    if w == p0:
        if (ge[1:] >= ge[:-1]).all():
            jj = p0 - ge.sum(axis=0)
            return jj, jj < p0
        return np.argmax(ge, axis=0), ge.any(axis=0)
    jj = j0 + w - ge.sum(axis=0)
    has = ~ge[0] & ge[-1] & (ge[1:] >= ge[:-1]).all(axis=0)
    return jj, has


def _gather_counts(b: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``b[rows][:, cols].T`` as floats, C-contiguous (buckets x examples; ``b``: examples x
    columns, integers): gathered and converted 1024 rows at a time (slices that stay in
    cache)."""
    out = np.empty((cols.size, rows.size))
    cs = as_slice(cols)
    for k in range(0, rows.size, 1024):
        out[:, k:k + 1024] = np.take(b, rows[k:k + 1024], axis=0)[:, cs].T
    return out


def _beyond(tab: _Table, g_at, target: float, lo: np.ndarray, hi: np.ndarray,
            below: np.ndarray) -> None:
    """The brackets (in place) of the examples not bracketed on the first grid (``lo``
    NaN) on the further grids of ``tab`` (down to the smallest tilt, then up to the tilt
    cap), as :func:`tightdp.curves.saddle.solve_tilt` walks them: ``g_at(gi, rows)`` the
    function at grid ``gi`` (examples x tilts); ``below`` marks the examples at or above the
    target at the smallest tilt."""
    for gi, grid in enumerate(tab.grids[1:], start=1):
        rows = np.nonzero(np.isnan(lo))[0]
        if rows.size == 0:
            break
        ge = g_at(gi, rows) >= target
        has = ge.any(axis=1)
        j = np.argmax(ge, axis=1)
        found = has & (j > 0)
        lo[rows[found]] = grid[j[found] - 1]
        hi[rows[found]] = grid[j[found]]
        if gi == 1:  # the downward grid: at or above the target at its smallest tilt
            below[rows[has & (j == 0)]] = True


def _take(a: np.ndarray, sel: np.ndarray) -> np.ndarray:
    """``a[..., sel]`` for a boolean ``sel`` along the last axis; ``a`` itself (no copy)
    when every example is selected."""
    return a if sel.all() else a[..., sel]


def _groups(keys: np.ndarray) -> list[np.ndarray]:
    """Indices of equal values of ``keys`` (the left ends of the bracketing intervals, which
    determine the interval: the tilt grids partition the tilt range), one array per value."""
    if keys.size == 0:
        return []
    order = np.argsort(keys, kind="stable")
    k = keys[order]
    cut = np.nonzero(k[1:] != k[:-1])[0] + 1
    return np.split(order, cut)


def _g_spa(comp: np.ndarray, t: np.ndarray, method: str) -> np.ndarray:
    """The function whose root is the saddle point: ``-log delta_approx`` at the saddle-point
    eps of ``t`` (the accountant's ``f_approx``; increasing in t where the approximation is
    sound), from composed rows ``comp`` (5, ...)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ld = saddle_log_delta(comp, t, None, method)[0]
    return np.where(np.isfinite(ld), -ld, -np.inf)


class _Solver:
    """The per-example saddle-point solution of one method (the module docstring, steps 1-4):
    small and picklable, shipped with the tables to the workers."""

    def __init__(self, method: str):
        self.method = method

    # --- bracketing on the accountant's tilt grids -------------------------------------------
    def bracket(self, tab: _Table, cnt: np.ndarray, target: float, kind: str,
                hint: np.ndarray | None = None) -> dict:
        """Per example, for the saddle-point function (``kind="spa"``) or the refined-moments
        function (``"rma"``): the bracket ``[lo, hi]`` of tilts with ``g(lo) < target <=
        g(hi)``, as :func:`tightdp.curves.saddle.solve_tilt` finds it: the same grids
        walked in the same order, the first grid point reaching the target, with the exact
        composed CGF at the grid points (matrix products with the counts). On the first
        (33-point) grid, an example with a ``hint`` (the index in that grid of a likely upper
        end, e.g. that of another bracket of the example; -1 for none) walks from the cell
        below it, one grid point at a time, up while ``g(hi) < target`` or down while ``g(lo)
        >= target``; the others evaluate ``g`` at every fourth point first and then inside the
        first of those intervals reaching the target. Both find the same bracket whenever
        ``g`` is increasing on the grid (the refined-moments function always is; the
        saddle-point function need not be where the approximation breaks down, and such
        examples are flagged by the size of the SP-MSD1 terms). ``lo`` is NaN where no root
        was bracketed; ``below`` marks roots under the smallest tilt."""
        n = cnt.shape[1]
        lo, hi = np.full(n, np.nan), np.full(n, np.nan)
        below = np.zeros(n, dtype=bool)
        nr = 5

        def g_at(gi: int, rows: np.ndarray, idx: np.ndarray | None = None) -> np.ndarray:
            grid = tab.grids[gi]
            if kind == "rma":  # linear in the counts: one row per tilt
                h = tab.rma_rows(gi)
                if idx is not None:
                    h, grid = h[idx], grid[idx]
                return (_product(h, cnt, rows) + np.log1p(grid)[:, None]).T
            pts = tab.points(gi)[:, :nr, :]
            if idx is not None:
                pts, grid = pts[:, :, idx], grid[idx]
            comp = _product(pts.reshape(pts.shape[0], -1).T, cnt, rows)
            comp = comp.reshape(nr, grid.size, rows.size)  # (rows, tilts, examples)
            return _g_spa(comp, grid[:, None], self.method).T

        def g_each(rows: np.ndarray, idx: np.ndarray) -> np.ndarray:
            """g of example ``rows[m]`` at the grid-0 point ``idx[m]``."""
            out = np.empty(rows.size)
            for j in np.unique(idx):
                sel = idx == j
                out[sel] = g_at(0, rows[sel], np.array([j]))[:, 0]
            return out

        g0 = tab.grids[0]
        last = g0.size - 1
        rows = np.arange(n)
        if hint is not None:  # the walk from the hinted cells [k - 1, k]
            ok = (hint >= 0) & (hint <= last)
            w = rows[ok]
            k = np.clip(hint[ok], 1, last)
            g_lo, g_hi = np.empty(w.size), np.empty(w.size)
            for j in np.unique(k):  # both ends of the hinted cell in one product
                sel = k == j
                g_lo[sel], g_hi[sel] = g_at(0, w[sel], np.array([j - 1, j])).T
            while w.size:
                up = g_hi < target
                down = ~up & (g_lo >= target)
                fin = ~(up | down)
                lo[w[fin]], hi[w[fin]] = g0[k[fin] - 1], g0[k[fin]]
                # off the grid: the grids below (at or above the target at its start) or
                # above (below the target at its end) decide, as after the coarse pass
                keep = (up & (k < last)) | (down & (k > 1))
                w, k, up, g_lo, g_hi = w[keep], k[keep], up[keep], g_lo[keep], g_hi[keep]
                k = np.where(up, k + 1, k - 1)
                if not w.size:
                    break
                g_new = g_each(w, np.where(up, k, k - 1))
                g_lo, g_hi = np.where(up, g_hi, g_new), np.where(up, g_new, g_lo)
            rows = rows[~ok]
        if rows.size:  # the coarse pass, then inside the first coarse interval reaching it
            co = np.unique(np.append(np.arange(0, g0.size, _COARSE), last))
            ge = g_at(0, rows, co) >= target
            has = ge.any(axis=1)
            jj = np.argmax(ge, axis=1)
            sel = has & (jj > 0)
            for jv in np.unique(jj[sel]):
                r = rows[sel & (jj == jv)]
                fine = np.arange(co[jv - 1] + 1, co[jv])
                k = np.full(r.size, co[jv])
                if fine.size:
                    gef = g_at(0, r, fine) >= target
                    hasf = gef.any(axis=1)
                    k = np.where(hasf, fine[np.argmax(gef, axis=1)], k)
                lo[r], hi[r] = g0[k - 1], g0[k]

        _beyond(tab, g_at, target, lo, hi, below)
        return {"lo": lo, "hi": hi, "below": below}

    def rma_brackets(self, tables: list[_Table], block: np.ndarray, cols: np.ndarray,
                     target: float) -> tuple[np.ndarray, list[dict], np.ndarray | None]:
        """The examples of ``block`` (rows: examples; ``cols``: the columns of the buckets used)
        with some loss, their refined-moments brackets in every table (as :meth:`bracket` with
        ``kind="rma"``: the first grid point where the increasing optimality function of eq. (44)
        reaches ``target``) and their counts as floats, buckets x examples, ordered by those
        brackets (the first table's, then the second's; ties by position). On the first grid the
        function is evaluated for every table at once, one product per :data:`SUB_CHUNK` examples
        whose counts are converted there (the converted slice stays in cache), at the grid points
        of the brackets found in the previous slice (those held by at least 1 in
        :data:`WINDOW_SHARE` examples; all points for the first slice, and for the examples whose
        root is not inside that window: the same first point reaching the target, the function
        being increasing); then, for the few examples whose root is off that grid, the further
        grids as :meth:`bracket`. The ordered counts are gathered from the block's rows (a gather
        of the integer rows in slices of 1024, cheaper than reordering the converted columns).
        Returns ``(act, brackets, counts)`` (``act``: the block rows, ordered; counts None when no
        example has loss)."""
        b = np.asarray(block)
        n_all = b.shape[0]
        p0 = tables[0].grids[0].size  # the first grid: the same for every table
        whole = [tab.rma_rows(0) for tab in tables]  # (grid, buckets) each
        # per table, the window of grid points evaluated for all examples (inclusive)
        wins = [(0, p0 - 1)] * len(tables)
        brs = [{"lo": np.full(n_all, np.nan), "hi": np.full(n_all, np.nan)} for _ in tables]
        active = np.zeros(n_all, dtype=bool)
        # examples x buckets (a plain conversion, no transposition; the products read it
        # transposed)
        buf = np.empty((min(SUB_CHUNK, n_all), cols.size))
        cs = as_slice(cols)
        for k in range(0, n_all, SUB_CHUNK):
            m = min(SUB_CHUNK, n_all - k)
            np.copyto(buf[:m], b[k:k + m, cs])
            c = buf[:m].T
            active[k:k + m] = buf[:m].any(axis=1)
            v = np.vstack([w[j0:j1 + 1] for w, (j0, j1) in zip(whole, wins, strict=True)]) @ c
            off = 0
            for i, (tab, br) in enumerate(zip(tables, brs, strict=True)):
                g0 = tab.grids[0]
                j0, j1 = wins[i]
                w = j1 - j0 + 1
                vi = v[off:off + w]
                off += w
                vi += np.log1p(g0[j0:j1 + 1])[:, None]
                jj, has = _first_reaching(vi >= target, j0, p0)
                # where the window does not show the root inside it (or the comparisons do
                # not increase along it): the whole grid, on these examples' counts
                redo = np.nonzero(~has)[0] if w < p0 else np.zeros(0, dtype=np.int64)
                if redo.size:
                    vr = whole[i] @ np.take(buf[:m], redo, axis=0).T
                    vr += np.log1p(g0)[:, None]
                    jj[redo], has[redo] = _first_reaching(vr >= target, 0, p0)
                sel = np.nonzero(has & (jj > 0))[0]
                br["lo"][k + sel] = g0[jj[sel] - 1]
                br["hi"][k + sel] = g0[jj[sel]]
                if sel.size:  # the next window: the grid points of this slice's brackets
                    hist = np.bincount(jj[sel], minlength=p0)
                    keep = np.nonzero(hist * WINDOW_SHARE >= sel.size)[0]
                    wins[i] = (int(keep[0]) - 1, int(keep[-1]))
        act = np.nonzero(active)[0]
        if act.size == 0:
            return act, [], None
        brs = [{"lo": br["lo"][act], "hi": br["hi"][act]} for br in brs]
        for tab, br in zip(tables, brs, strict=True):
            br["below"] = np.zeros(act.size, dtype=bool)
            off = np.nonzero(np.isnan(br["lo"]))[0]
            if off.size:  # off the first grid: the further grids on these examples' counts
                c = _gather_counts(b, act[off], cols)

                def g_at(gi: int, rows: np.ndarray, tab=tab, c=c) -> np.ndarray:
                    return (_product(tab.rma_rows(gi), c, rows)
                            + np.log1p(tab.grids[gi])[:, None]).T

                lo, hi, below = br["lo"][off], br["hi"][off], br["below"][off]
                _beyond(tab, g_at, target, lo, hi, below)
                br["lo"][off], br["hi"][off], br["below"][off] = lo, hi, below
        if act.size > 1:
            # the examples ordered by their brackets: those that share a piece are then
            # adjacent, and the products take views of the counts, not copies (every
            # per-example number is computed column by column: order-free)
            order = np.lexsort([br["lo"] for br in brs[::-1]])
            act = act[order]
            brs = [{key: x[order] for key, x in br.items()} for br in brs]
        return act, brs, _gather_counts(b, act, cols)

    # --- the saddle point on one interval ----------------------------------------------------
    def solve(self, tab: _Table, pc: _Piece, cnt: np.ndarray, cols: np.ndarray,
              rows: np.ndarray, target: float, out: dict, leaves: list,
              depth: int = 0) -> None:
        """Assign the examples ``rows`` of ``out`` (counts: the columns ``cols`` of ``cnt``,
        buckets x examples) whose root is bracketed by ``pc`` to the interpolants that resolve
        them: ``(piece, cols, rows)`` appended to ``leaves`` (solved together by
        :meth:`newton`); descends into halves of ``pc`` for the examples whose composed CGF is
        not resolved by the interpolants there (module docstring, step 2)."""
        if not pc.all_ok:
            chk = _product(pc.check, cnt, cols)
            need = pc.unresolved(chk)
            if need.any() and depth < MAX_DEPTH:
                r, cl = _take(rows, need), _take(cols, need)
                comp = _take(chk[9:], need)  # exact composed rows at the midpoint (5, n)
                go_left = _g_spa(comp, np.array(pc.m), self.method) >= target
                for side, sel in ((0, go_left), (1, ~go_left)):
                    if sel.any():
                        self.solve(tab, tab.child(pc, side), cnt, _take(cl, sel), _take(r, sel),
                                   target, out, leaves, depth + 1)
                if need.all():
                    return
                rows, cols = rows[~need], cols[~need]
            elif need.any():
                out["unresolved"][rows[need]] = True
        leaves.append((pc, cols, rows))

    def newton(self, leaves: list, cnt: np.ndarray, target: float, out: dict) -> None:
        """The saddle points of the examples of ``leaves`` (``(piece, cols, rows)`` from
        :meth:`solve`), :data:`SUB_CHUNK` examples at a time (working sets that stay in cache)
        whatever their pieces: each example iterates on its own composed coefficients and
        interval, so one iteration serves the examples of many (often small) pieces."""
        batch, size = [], 0
        for pc, cols, rows in leaves:
            k = 0
            while k < rows.size:
                m = min(SUB_CHUNK - size, rows.size - k)
                batch.append((pc, cols[k:k + m], rows[k:k + m]))
                size += m
                k += m
                if size == SUB_CHUNK:
                    self._newton(batch, cnt, target, out)
                    batch, size = [], 0
        if batch:
            self._newton(batch, cnt, target, out)

    def _newton(self, batch: list, cnt: np.ndarray, target: float, out: dict) -> None:
        """The saddle points of the examples of ``batch`` (``(piece, cols, rows)``: counts the
        columns ``cols`` of ``cnt``, on the interpolants of the piece, resolved for them): the
        module docstring, step 3."""
        n = sum(rows.size for _, _, rows in batch)
        exact = self.method != "clt"  # then a sixth row, K^(5): exact Newton slopes
        nrow = 6 if exact else 5
        p1 = DEGREE + 1
        coef = np.empty((nrow * p1, n))  # composed coefficients, (nrow, p+1, n) below
        ends = np.empty((10, n))  # exact composed rows at a and b, (5, 2, n) below
        a, b = np.empty(n), np.empty(n)
        off = 0
        for pc, cols, rows in batch:
            c, cc = cnt, cols
            if _runs(cols) is None:  # one copy of the columns for both products
                c, cc = np.take(cnt, cols, axis=1), np.arange(cols.size)
            sl = slice(off, off + rows.size)
            _product(pc.coef_t, c, cc, out=coef[:5 * p1, sl])
            _product(pc.ends, c, cc, out=ends[:, sl])
            a[sl], b[sl] = pc.a, pc.b
            off += rows.size
        rows = np.concatenate([r for _, _, r in batch])
        coef = coef.reshape(nrow, p1, n)
        ends = ends.reshape(5, 2, n)
        scale = 2.0 / (b - a)
        if exact:  # K^(5): the derivative of the K'''' interpolant (the slope of g)
            coef[5] = _cheb_derivative(coef[4], scale)

        def rows_at(u: np.ndarray, cf: np.ndarray, a: np.ndarray,
                    scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            t = np.exp(u)
            return _cheb_eval(cf, np.clip((t - a) * scale - 1.0, -1.0, 1.0)), t

        # the accountant's iteration (curves.saddle.solve_tilt): safeguarded Newton in log t
        # in the bracket, stopped at the same tolerances; for SP-MSD0/1 with the exact slope
        # and Halley's correction, from a Halley step off the end of the bracket where g is
        # nearer the target (its rows there are exact, K^(5) interpolated); for SP-CLT as the
        # accountant: from the secant point, secant slopes after the first step
        te = np.stack([a, b])
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            # _g_spa's numbers, with the fallback flags of the same evaluation
            ld, _, fb, _ = saddle_log_delta(ends, te, None, self.method)
        ga, gb = np.where(np.isfinite(ld), -ld, -np.inf)
        ua, ub = np.log(a), np.log(b)
        u0 = secant_start(ua, ub, ga, gb, target)
        if exact:  # K^(5) at the ends from its interpolant (T_k(1) = 1, T_k(-1) = (-1)^k)
            k5 = np.stack([(coef[5] * _ALTERNATING[:p1, None]).sum(axis=0),
                           coef[5].sum(axis=0)])
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                d1, d2 = _g_slope(np.concatenate([ends, k5[None]]), te, self.method, fb)
                r = np.stack([ga, gb]) - target
                uh = np.stack([ua, ub]) - r / _halley_slope(d1, d2, r)
                pick = np.argmin(np.abs(r), axis=0)
                uh = np.where(pick == 0, uh[0], uh[1])
                inside = np.isfinite(uh) & (uh > ua) & (uh < ub)
            u0 = np.where(inside, uh, u0)
        # rows evaluated (a superset of the active ones) with their coefficients and intervals
        live = {"cur": np.arange(n), "cf": coef, "a": a, "s": scale}
        u_eval = ua.copy()
        # at each example's last evaluation: u, eps (eq. (50)), t, K'', fallback, MSD1 size
        last = {k: np.full(n, np.nan) for k in ("u", "eps", "t", "k2", "size")}
        last["fb"] = np.zeros(n, dtype=bool)

        def g_and_slope(uu: np.ndarray, act: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            cur = live["cur"]
            if 2 * act.size < cur.size:  # compact (copying coefficients costs an evaluation)
                keep = np.searchsorted(cur, act)
                live["cf"] = live["cf"][:, :, keep]
                live["a"], live["s"] = live["a"][keep], live["s"][keep]
                live["cur"] = cur = act
            pos = np.searchsorted(cur, act)
            u_eval[pos] = uu  # the other columns are evaluated and discarded
            ks, t = rows_at(u_eval[:cur.size], live["cf"], live["a"], live["s"])
            if cur.size != act.size:
                ks, t = ks[:, pos], t[pos]
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                if exact:  # the exact derivative of g: Newton converges quadratically
                    g, eps, fb, size, d1, d2 = _g_msd(ks, t, self.method)
                    dg = _halley_slope(d1, d2, g - target)
                else:
                    ld, eps, fb, size = saddle_log_delta(ks, t, None, self.method)
                    g = -ld
                    # SP-CLT: the accountant's slope t^2 phi2 (it ignores the derivative of
                    # the Gaussian term), then secant slopes, which converge superlinearly
                    # to the same root of the bracket
                    dg = t * t * (ks[2] + 1.0 / t ** 2 + 1.0 / (1.0 + t) ** 2)
            last["u"][act], last["eps"][act], last["t"][act] = uu, eps, t
            last["k2"][act], last["fb"][act], last["size"][act] = ks[2], fb, size
            return g, dg

        u = newton_bracketed(g_and_slope, target, ua.copy(), ub.copy(), u0, iters=60,
                             ftol=NEWTON_RTOL * (1.0 + abs(target)), secant=not exact)
        # eps at the final iterate, which is the last evaluated one or a converged Newton step
        # (|du| below the tolerances) from it: eps(u) = eps(u_last) + du t phi2, with
        # d eps / d log t = t (K'' + 1/t^2 + 1/(1+t)^2) (eq. (50)); the neglected second-order
        # term, ~du^2, is far below the solver's tolerance. Where the step is not small (an
        # iteration that ran out of steps) the interpolant is evaluated there.
        du = u - last["u"]
        tl = last["t"]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            eps = last["eps"] + du * tl * (last["k2"] + 1.0 / tl ** 2 + 1.0 / (1.0 + tl) ** 2)
        eps = np.where(du == 0.0, last["eps"], eps)
        fb, size = last["fb"], last["size"]
        far = np.nonzero(~(np.abs(du) <= FINAL_STEP) | ~np.isfinite(eps))[0]
        if far.size:
            ks, t = rows_at(u[far], coef[:5, :, far], a[far], scale[far])
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                _, _, fb[far], size[far] = saddle_log_delta(ks, t, None, self.method)
            eps[far] = saddle_eps(ks, t)
        out["eps"][rows] = eps
        out["t"][rows] = np.exp(u)
        out["fallback"][rows] = fb
        out["size"][rows] = size

    def rma_below(self, tab: _Table, cnt: np.ndarray, br: dict, log_delta: float,
                  steps: np.ndarray, bound: np.ndarray) -> np.ndarray:
        """Per example, True where the certified bound of :meth:`rma` is provably at most
        ``bound`` (and ``bound >= 0``), from one product row instead of the bracket's
        ``DEGREE + 1``: the bound minimizes ``e(t) = (K_i(t) + K_MARGIN (T_i + |K_i(t)|) +
        log M_t - log delta) / t`` (Alghamdi et al. 2023, eq. (43)) over the Lobatto tilts of
        the bracket, so ``e`` at one of them, its middle one, is at least that minimum (then
        raised by ``1e-12`` of itself, an increasing map). ``e`` here and in :meth:`rma` are the
        same expression summed in another order (a dot product of at most a few hundred
        terms): they differ by far less than the slack ``1e-9 (E + |e|)`` required, with
        ``E`` the sum of the magnitudes of the terms of ``e``. False where no bracket was
        found (:meth:`rma` decides there)."""
        n = cnt.shape[1]
        ok = np.zeros(n, dtype=bool)
        lo = br["lo"]
        j = DEGREE // 2
        for k in range(0, n, SUB_CHUNK):  # working sets that stay in cache
            sl = slice(k, k + SUB_CHUNK)
            cs, st = cnt[:, sl], steps[sl]
            for rows in _groups(lo[sl]):
                if np.isnan(lo[k + rows[0]]):
                    continue
                pc = tab.piece(lo[k + rows[0]], br["hi"][k + rows[0]])
                k0 = _product(pc.k_t[j:j + 1], cs, rows)[0]
                t = float(pc.t[j])
                lm = float(log_theta_max(pc.t[j:j + 1])[0])
                ak = np.abs(k0)
                marg = K_MARGIN * (st[rows] + ak)
                e = (k0 + marg + lm - log_delta) / t
                mag = (ak + marg + abs(lm) + abs(log_delta)) / t
                b = bound[k + rows]
                ok[k + rows] = (b >= 0.0) & (e + 1e-9 * (mag + np.abs(e)) <= b)
        return ok

    def rma(self, tab: _Table, cnt: np.ndarray, br: dict, log_delta: float,
            steps: np.ndarray | None = None) -> np.ndarray:
        """Certified refined-moments bound on eps (Alghamdi et al. 2023, eq. (43)) minimized
        over the Lobatto tilts of the bracket of its optimal tilt, where ``K_i`` is exact (a
        matrix product of the counts with quadrature values, no interpolation); any tilt gives
        a valid bound, so where no bracket was found an end of the tilt range is used.
        ``steps``: the examples' numbers of steps with loss (the column sums of ``cnt``,
        exact in floats), if already known."""
        n = cnt.shape[1]
        if steps is None:
            steps = cnt.sum(axis=0)
        out = np.empty(n)
        lo, hi = br["lo"].copy(), br["hi"].copy()
        miss = np.isnan(lo)
        g_down, g_up = tab.grids[1], tab.grids[-1]
        dn, upm = miss & br["below"], miss & ~br["below"]
        lo[dn], hi[dn] = g_down[0], g_down[1]
        lo[upm], hi[upm] = g_up[-2], g_up[-1]
        for k in range(0, n, SUB_CHUNK):  # working sets that stay in cache
            sl = slice(k, k + SUB_CHUNK)
            cs, st = cnt[:, sl], steps[sl]
            for rows in _groups(lo[sl]):
                pc = tab.piece(lo[k + rows[0]], hi[k + rows[0]])
                k0 = _product(pc.k_t, cs, rows)  # (p+1, rows)
                # e = (k0 + K_MARGIN (T_i + |k0|) + log M_t - log delta) / t, in place
                e = np.abs(k0)
                e += st[rows]
                e *= K_MARGIN
                e += k0
                e += log_theta_max(pc.t)[:, None]
                e -= log_delta
                e /= pc.t[:, None]
                best = e.min(axis=0)
                out[k + rows] = np.maximum(best + 1e-12 * np.abs(best), 0.0)
        return out


class IndividualSPAAccountant(NormHistory, BlockRunner, Queries):
    """Individual eps of DP-SGD by the saddle-point accountant, per example: an approximation.

    Koskela et al. 2023 (Sec. 5, App. D.2) for the individual composition and the sensitivity
    buckets;
    Alghamdi et al. 2023 eqs. (50), (60), (61), (66), (72) for the approximation and
    eqs. (42)-(44) for the certified ``upper``; see the module docstring. Meant for very large
    ``N``, where the certified :class:`~tightdp.individual.IndividualPLDAccountant` is slower;
    its numbers are approximations (``certified=False`` in the result), not bounds.

    Feed the per-example gradient norms of each step with :meth:`step` (or share the history of
    another accountant with :meth:`from_history`), then ask :meth:`epsilon`: an
    :class:`~tightdp.EpsilonResult` with arrays ``(N,)`` (shape ``delta.shape + (N,)`` for an
    array of deltas):

    * ``epsilon`` (= ``estimate``): the saddle-point approximation of each example's eps at
      ``delta`` (max over the remove/add directions). **Not certified** (``certified`` is
      False): it may be below the true eps. Where the saddle point is outside the supported
      tilt range the certified ``upper`` is reported instead.
    * ``upper``: certified upper bound on each example's eps (refined moments bound,
      Alghamdi et al. 2023, eq. (43)), given its recorded norms; ``lower`` is None.
    * ``details["reliable"]``: bool array ``(N,)``; False where the SP-MSD1 correction terms of
      a direction that was solved exceed ``UNRELIABLE`` (few effective compositions: the
      approximation can be far off, in either direction), where the saddle point is beyond
      the tilt range, or where the interpolation tolerance was not met. Examples with no
      recorded loss (every norm 0) have ``epsilon = upper = 0`` and are reliable (exact).
    * ``details``: also the method, timings, counts of flagged examples, ``msd1_terms``
      (array ``(N,)``: the largest size of the SP-MSD1 terms over the directions solved).

    ``delta(epsilon)`` is not offered.

    Parameters
    ----------
    sampling_rate, noise_multiplier, clip_norm, n_examples, n_buckets : the DP-SGD setting and
        the sensitivity grid, as in :class:`~tightdp.IndividualPLDAccountant`.
    method : "msd1" (default, eq. (61)), "msd0" (eqs. (7)/(60)) or "clt" (eqs. (8)/(66)).
    progress : a progress bar on stderr: None (default) draws one for work still running after
        2 s when stderr is a terminal (see :mod:`tightdp.progress`), True always, False never.
    chunk_size : examples processed at once (a block); the arrays of a block take about
        ``chunk_size * (16 n_buckets + 3000)`` bytes (~300 MB for the default 65536 and 100
        buckets), whatever ``N``. A dask array of counts is processed by its row chunks.
    workers, scheduler, client : solve the blocks on Dask (a ``LocalCluster`` of ``workers``
        processes started and closed by each query, a running scheduler's address, or a
        client), as for :class:`~tightdp.IndividualPLDAccountant`; the tables of bucket CGFs
        are built once and shipped to every worker.
    store : a directory the per-example arrays are written to (``epsilon.npy``, ``upper.npy``,
        ``reliable.npy``, ``msd1_terms.npy``); the result holds them as read-only memmaps.
    max_memory, max_seconds : the budget of one :meth:`epsilon` query (see
        :mod:`tightdp.budget`): blocks hold fewer than ``chunk_size`` examples where their
        arrays would exceed a quarter of ``max_memory``; the tables of bucket CGFs (one
        interpolation piece per tilt interval an example's saddle point lies in, each about
        3 kB per bucket) are refused (:class:`~tightdp.BudgetExceeded`) before they would
        exceed a quarter of it, and every evaluation of them before it would end past
        ``max_seconds`` (estimated at the rate of the previous one).
    """

    def __init__(self, *, sampling_rate: float, noise_multiplier: float, clip_norm: float,
                 n_examples: int, n_buckets: int = 100, method: str = "msd1",
                 progress: bool | None = None, chunk_size: int = 65536,
                 workers: int | None = None, scheduler: str | None = None, client=None,
                 store=None, max_memory=None, max_seconds=None):
        super().__init__(sampling_rate=sampling_rate, noise_multiplier=noise_multiplier,
                         clip_norm=clip_norm, n_examples=n_examples, n_buckets=n_buckets)
        self.budget = Budget.make(max_memory, max_seconds)
        if method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
        self.method = method
        self.progress = None if progress is None else bool(progress)
        self.chunk_size = v.count("chunk_size", chunk_size, minimum=1)
        self._set_where(workers, scheduler, client, store)

    name = "individual-spa"

    @classmethod
    def from_history(cls, history: NormHistory, **kwargs) -> IndividualSPAAccountant:
        """An accountant over the norms already recorded in ``history`` (for instance an
        :class:`~tightdp.individual.IndividualPLDAccountant`, or a
        :class:`~tightdp.individual.NormRecorder` on disk), without copying them: the two share
        one count array, so steps recorded later in either are seen by both (an in-memory
        history; a recorder's counts are read-only here) (``kwargs``: as for the
        constructor)."""
        if not isinstance(history, NormHistory):
            raise ValueError(f"history must be a NormHistory, got {type(history).__name__}")
        counts = history.counts  # flushed; shared
        writable = (type(counts) is np.ndarray and counts.flags.writeable)
        return cls.attach(counts, sampling_rate=history.sampling_rate,
                          noise_multiplier=history.noise_multiplier,
                          clip_norm=history.clip_norm, n_steps=history.n_steps,
                          recording=writable, **kwargs)

    # --- evaluation --------------------------------------------------------------------------
    def _tables(self, used: np.ndarray, end: float) -> list[_Table]:
        """The tables of bucket CGFs of each direction, with the query's limits (``end``:
        the wall-clock time by which it must end; the memory share split between them)."""
        mechs = [PoissonSubsampled(Gaussian(self.noise_multiplier, float(self.grid[j])),
                                   self.sampling_rate) for j in used]
        dirs = [0] if all(m.symmetric for m in mechs) else [0, 1]
        names = ["remove", "add"] if len(dirs) == 2 else ["both (symmetric)"]
        limits = (end, TABLE_SHARE * self.budget.max_memory / len(dirs),
                  self.budget.max_seconds)
        return [_Table([m.privacy_losses()[d] for m in mechs], names[i], limits)
                for i, d in enumerate(dirs)]

    def _block_rows(self) -> int:
        """``chunk_size``, or fewer examples if a block's arrays would exceed their share of
        the memory budget (``ROW_BYTES_PER_BUCKET n_buckets + ROW_BYTES`` bytes each)."""
        per_row = ROW_BYTES_PER_BUCKET * self.grid.size + ROW_BYTES
        return min(self.chunk_size, max(1, int(BLOCK_SHARE * self.budget.max_memory
                                                // per_row)))

    def _epsilon_of(self, delta: float) -> EpsilonResult:
        """Saddle-point approximation of every example's eps at ``delta`` (NOT certified), with
        a certified per-example upper bound (refined moments) and a reliability flag; see the
        class and module docstrings. The examples are solved block by block
        (:func:`spa_block`), in this process or on Dask."""
        t0 = time.perf_counter()
        info: dict = {"method": self.method, "label": LABELS[self.method]}
        ex = self._executor(self._block_rows())
        try:
            arr, flags = run_with_restarts(lambda k: self._run(ex, delta, info, t0, k),
                                           self._log)
        finally:
            ex.close()
        return self._result(arr, delta, flags, info, t0)

    def _run(self, ex, delta: float, info: dict, t0: float, restarts: int):
        """The passes over the blocks of ``ex``: the buckets used, then :func:`spa_block`."""
        info["restarts"] = restarts
        end = time.time() + self.budget.max_seconds - (time.perf_counter() - t0)
        states = [{"start": a, "rows": b - a} for a, b in ex.bounds]
        states, outs = ex.run(used_buckets, states, self.grid.size, False, keep_state=True)
        used = np.nonzero(np.any([o[0] for o in outs], axis=0))[0]
        tables = self._tables(used, end) if used.size else []
        info["directions"] = [tb.name for tb in tables]
        bar = progress_bar(total=self.n_examples, desc="per-example epsilon (saddle point)",
                           unit="example", enabled=self.progress)
        done = [0]

        def update(i, o):
            bar.update(o[0])
            done[0] += o[0]
            self._log(f"saddle points: {done[0]}/{self.n_examples} examples, "
                      f"{time.perf_counter() - t0:.1f} s")

        store = None
        if self.store is not None:
            store = ResultStore(self.store, self.n_examples, FIELDS)
        try:
            states, outs = ex.run(spa_block, states, used, tables, math.log(delta),
                                  _Solver(self.method), store, on_done=update)
        finally:
            bar.close()
        info["summary"] = merge_summaries([o[2] for o in outs])
        info["interpolation_pieces"] = {tb.name: max(o[1].get(tb.name, 0) for o in outs)
                                        for tb in tables}
        flags = {k: sum(o[3][k] for o in outs) for k in FLAGS}
        if ex.distributed:
            info["worker_peak_memory"] = ex.worker_peak_memory()
        if store is not None:
            arr = store.open()
        else:
            arr = ex.assemble(states, tuple(FIELDS), self._lazy(ex))
        return arr, flags

    def _result(self, arr: dict, delta: float, flags: dict, info: dict,
                t0: float) -> EpsilonResult:
        n_unrel = flags["unreliable"]
        parts = [f"saddle-point approximation {LABELS[self.method]} (Alghamdi et al.) of each "
                 "example's eps given its recorded norms; NOT a certified bound (the certified "
                 "per-example numbers come from IndividualPLDAccountant; the fully adaptive "
                 "guarantee is the individual GDP filter's)",
                 "upper = certified refined moments bound (eq. (43)) per example"]
        if n_unrel:
            parts.append(f"WARNING: {n_unrel} example(s) flagged unreliable (see "
                         "details['reliable']): few effective compositions (SP-MSD1 terms > "
                         f"{UNRELIABLE}), saddle point "
                         "beyond the tilt range, or interpolation tolerance not met; use upper "
                         "or IndividualPLDAccountant for them")
        if flags["beyond"]:
            parts.append(f"{flags['beyond']} example(s) with the saddle point beyond "
                         "the supported tilt range: the certified upper is reported as epsilon")
        if flags["fallback"]:
            parts.append("SP-MSD1 correction factor not positive for "
                         f"{flags['fallback']} example(s); SP-MSD0 used there")
        info.update({"reliable": arr["reliable"], "unreliable": n_unrel,
                     "beyond": flags["beyond"], "fallback": flags["fallback"],
                     "interpolation_unresolved": flags["unresolved"],
                     "msd1_terms": arr["msd1_terms"], "seconds": time.perf_counter() - t0})
        eps = arr["epsilon"]
        return EpsilonResult(eps, delta, None, arr["upper"], self.name, False, estimate=eps,
                             note="; ".join(parts), details=info)


#: the per-example fields of a result and their types
FIELDS = {"epsilon": np.float64, "upper": np.float64, "reliable": np.bool_,
          "msd1_terms": np.float64}
#: the per-example flags counted over the blocks
FLAGS = ("beyond", "fallback", "unresolved", "unreliable")


def spa_block(block, state, used: np.ndarray, tables: list[_Table], log_delta: float,
              solver: _Solver, store: ResultStore | None):
    """The saddle-point eps, certified upper bound and flags of one block of examples (the
    module docstring, steps 1-5); written to ``store`` if given. Returns the block's arrays
    (``FIELDS``) and ``(examples, interpolation pieces per table, summary of epsilon, flag
    counts)``."""
    n_all = state["rows"]
    eps, upper, terms = np.zeros(n_all), np.zeros(n_all), np.zeros(n_all)
    reliable = np.ones(n_all, dtype=bool)
    flags = {k: np.zeros(n_all, dtype=bool) for k in FLAGS[:3]}
    act = np.zeros(0, dtype=np.int64)
    target = -log_delta
    if used.size:
        # the examples with loss, their refined-moments brackets and counts (buckets x
        # examples: the fast layout for the products with few rows here), ordered by them
        act, brs, cnt = solver.rma_brackets(tables, block, used + 1, target)
    if act.size:
        n = act.size
        best = np.full(n, -np.inf)
        best_up = np.zeros(n)
        # flags over the directions solved: an unreliable direction may under-report, and
        # then the larger of the two (the answer) may be wrong even if the other is reliable
        size = np.zeros(n)
        beyond = np.zeros(n, dtype=bool)
        fallback = np.zeros(n, dtype=bool)
        unresolved = np.zeros(n, dtype=bool)
        steps = cnt.sum(axis=0)  # integers: exact whatever the order of the sum
        for i, (tab, br_rma) in enumerate(zip(tables, brs, strict=True)):
            if i == 0:
                up = solver.rma(tab, cnt, br_rma, log_delta, steps)
            else:
                # the examples whose bound in this direction provably stays at most both the
                # bound and the eps already found change neither (its bound, -inf here, is
                # below both); the bound of the others as above
                up = np.full(n, -np.inf)
                full = np.nonzero(~solver.rma_below(tab, cnt, br_rma, log_delta, steps,
                                                    np.minimum(best_up, best)))[0]
                if full.size:
                    up[full] = solver.rma(tab, np.take(cnt, full, axis=1),
                                          {k: x[full] for k, x in br_rma.items()},
                                          log_delta, steps[full])
            best_up = np.maximum(best_up, up)
            # a direction whose certified bound is at most the eps already found cannot
            # raise the true eps above it: its saddle point is not needed
            need = np.nonzero(up > best)[0]
            if need.size == 0:
                continue
            m = need.size
            out = {"eps": np.empty(m), "t": np.full(m, np.nan),
                   "fallback": np.zeros(m, dtype=bool), "size": np.zeros(m),
                   "unresolved": np.zeros(m, dtype=bool)}
            # the saddle point is near the refined-moments optimum: its bracket is the hint
            c = cnt if m == n else cnt[:, need]
            br = solver.bracket(tab, c, target, "spa", _cell(tab, br_rma["hi"][need]))
            lo, hi = br["lo"], br["hi"]
            miss = np.isnan(lo)
            found = np.nonzero(~miss)[0]
            leaves: list = []
            tab.check_pieces(len({(float(a), float(b)) for a, b in zip(lo[found], hi[found],
                                                                       strict=True)}
                                 - set(tab._pieces)))
            for g in _groups(lo[found]):
                rows = found[g]
                solver.solve(tab, tab.piece(lo[rows[0]], hi[rows[0]]), c, rows, rows, target,
                             out, leaves)
            solver.newton(leaves, c, target, out)
            out["eps"][miss] = up[need][miss]  # no saddle point in range: the bound
            best[need] = np.maximum(best[need], out["eps"])
            size[need] = np.maximum(size[need], np.nan_to_num(out["size"], nan=np.inf))
            beyond[need] |= miss
            fallback[need] |= out["fallback"]
            unresolved[need] |= out["unresolved"]
        eps[act] = np.maximum(best, 0.0)
        upper[act] = best_up
        terms[act] = size
        flags["beyond"][act] = beyond
        flags["fallback"][act] = fallback
        flags["unresolved"][act] = unresolved
        reliable[act] = (size <= UNRELIABLE) & ~beyond & ~unresolved
    res = {"epsilon": eps, "upper": upper, "reliable": reliable, "msd1_terms": terms}
    if store is not None:
        store.write(state["start"], res)
    counts = {k: int(f.sum()) for k, f in flags.items()}
    counts["unreliable"] = int((~reliable).sum())
    return res, (n_all, {tb.name: tb.n_pieces for tb in tables},
                 block_summary(eps, state["start"]), counts)
