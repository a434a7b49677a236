"""Privacy loss of a pair of location mixtures (Gaussian or Laplace kernel): the law of every
subsampled and mixture-of-Gaussians mechanism here."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from scipy.special import log_ndtr, logsumexp

from .._numerics import MACHINE_EPSILON, lse_last, newton_monotone, walk_out
from .base import PrivacyLoss

__all__ = ["LocationMixtureLoss", "KERNELS"]

_LOG_HALF = math.log(0.5)


# ------------------------------------------------------------------------------------------------
# kernels of location families
# ------------------------------------------------------------------------------------------------
class _Kernel:
    name: str
    logpdf: Callable[[np.ndarray], np.ndarray]
    logcdf: Callable[[np.ndarray], np.ndarray]
    logsf: Callable[[np.ndarray], np.ndarray]


class _Gauss(_Kernel):
    name = "gaussian"

    @staticmethod
    def logpdf(z):
        return -0.5 * z * z

    @staticmethod
    def logcdf(z):
        return log_ndtr(z)

    @staticmethod
    def logsf(z):
        return log_ndtr(-z)


class _Laplace(_Kernel):
    name = "laplace"

    @staticmethod
    def logpdf(z):
        return -np.abs(z)

    @staticmethod
    def logcdf(z):
        z = np.asarray(z, dtype=float)
        with np.errstate(over="ignore"):
            return np.where(z < 0, z + _LOG_HALF, np.log1p(-0.5 * np.exp(-np.abs(z))))

    @staticmethod
    def logsf(z):
        return _Laplace.logcdf(-np.asarray(z, dtype=float))


KERNELS = {"gaussian": _Gauss, "laplace": _Laplace}


#: points per block in the vectorized Newton iterations (keeps the (points x components)
#: temporaries in cache)
_BLOCK = 4096


class _LseForm:
    """Loss of a Gaussian location pair with one component on one side, as a log-sum-exp of
    affine functions, and its inverse by monotone Newton iterations.

    With a single Q component ``N(b, s^2)`` the log-ratio of each P component to it is affine,
    ``log p_i(x)/q(x) = alpha_i + beta_i x`` with ``beta_i = (a_i - b)/s^2`` and ``alpha_i =
    log p_i - log q - beta_i (a_i + b)/2``, so ``L(x) = H(x)`` with
    ``H(z) = log sum_i exp(alpha_i + beta_i z)``; with a single P component ``N(a, s^2)``,
    ``L(x) = -H(-x)`` with ``beta_j = (a - b_j)/s^2`` and ``alpha_j = log q_j - log p +
    beta_j (a + b_j)/2`` (the mixture-of-Gaussians pairs of Ganesh, Def. 2.8; remove and add
    direction). Monotonicity of the loss means every ``beta >= 0``.

    ``H`` is convex. The components with ``beta = 0`` (a P component at Q's location) make
    up the constant ``A = log sum exp(alpha_i)``, the loss's finite end, and
    ``H(z) = A + log(1 + e^{G(z)})`` with ``G(z) = log sum_{beta_i > 0}
    exp(gamma_i + beta_i z)``, ``gamma_i = alpha_i - A`` (``G = H`` when there is none).
    ``H(z) = t`` is then ``G(z) = u`` with ``u = log(e^{t - A} - 1)``, which keeps full
    relative accuracy where ``t`` is close to ``A`` (the flat end of the loss, where solving
    ``H(z) = t`` directly would lose all digits of ``t - A``). ``G`` is convex and
    increasing with slope between ``min beta`` and ``max beta`` (``> 0``); it lies between the
    envelope ``max_i(gamma_i + beta_i z)`` and the envelope plus ``log n``. Newton's method
    for a convex increasing function started to the right of the root (at the envelope's
    root) decreases monotonically to it: the tangent lies below the function, so no iterate
    crosses the root and no bisection safeguard is needed.
    """

    def __init__(self, sign: float, alpha: np.ndarray, beta: np.ndarray):
        self.sign = sign
        zero = beta == 0
        self.A = float(lse_last(alpha[zero])) if zero.any() else -math.inf
        pos = ~zero
        self.beta = np.ascontiguousarray(beta[pos])
        self.gamma = np.ascontiguousarray(alpha[pos] - self.A if zero.any() else alpha[pos])
        order = np.argsort(self.beta, kind="stable")
        self.beta, self.gamma = self.beta[order], self.gamma[order]
        #: size of the terms, for the rounding level of G
        self._gmax = float(np.abs(self.gamma).max())

    # --- G, G' and H --------------------------------------------------------------------------
    def _g(self, z: np.ndarray, slope: bool) -> tuple[np.ndarray, np.ndarray | None]:
        """``G(z)`` and (if ``slope``) ``G'(z)`` for a 1-d ``z``, blockwise; one exp per
        component and point."""
        g, b = self.gamma, self.beta
        n = z.size
        out = np.empty(n)
        d1: Any = np.empty(n) if slope else None
        if g.size == 1:
            out[:] = g[0] + b[0] * z
            if slope:
                d1[:] = b[0]
            return out, d1
        for i in range(0, n, _BLOCK):
            zz = z[i:i + _BLOCK]
            e = np.multiply.outer(zz, b)
            e += g
            m = e.max(axis=1)
            with np.errstate(invalid="ignore"):
                e -= m[:, None]
            np.exp(e, out=e)
            sw = e.sum(axis=1)
            with np.errstate(divide="ignore", invalid="ignore"):
                out[i:i + _BLOCK] = m + np.log(sw)
                if slope:
                    d1[i:i + _BLOCK] = (e * b).sum(axis=1) / sw  # no BLAS threads
        return out, d1

    def _h_from_g(self, g: np.ndarray) -> np.ndarray:
        return g if self.A == -math.inf else self.A + np.logaddexp(0.0, g)

    def log_ratio(self, z) -> np.ndarray:
        """``H(z)`` (any shape)."""
        z = np.asarray(z, dtype=float)
        g, _ = self._g(z.ravel(), slope=False)
        return self._h_from_g(g).reshape(z.shape)

    # --- inverse ------------------------------------------------------------------------------
    def inverse(self, y: np.ndarray) -> np.ndarray:
        """``x*(y) = sup{x : L(x) <= y}`` for ``y`` strictly inside the support (1-d), the
        largest ``x`` with ``L(x) <= y`` up to rounding."""
        y = np.asarray(y, dtype=float)
        t = self.sign * y
        if self.A == -math.inf:
            u = t.copy()
            beyond = np.zeros(t.shape, dtype=bool)
        else:
            dt = t - self.A  # exact where t is close to A (Sterbenz)
            beyond = ~(dt > 0)  # at (or by rounding of the support, past) the finite end
            with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
                u = np.where(dt > 1.0, dt + np.log1p(-np.exp(-dt)), np.log(np.expm1(dt)))
        # remove direction (sign +1): largest z with G(z) <= u; add direction (sign -1):
        # x = -z with z the smallest with G(z) >= u
        z = self._solve(u, below=self.sign > 0, t=t)
        x = self.sign * z
        # t <= A: y at or below the bottom (remove) / at or above the top (add) of the support
        return np.where(np.isnan(y), np.nan, np.where(beyond, -self.sign * np.inf, x))

    def _solve(self, u: np.ndarray, below: bool, t: np.ndarray) -> np.ndarray:
        """Root of ``G(z) = u``: the largest ``z`` with ``G(z) <= u`` (``below``) or the
        smallest with ``G(z) >= u``, each up to rounding, and with ``H(z) <= t`` resp.
        ``H(z) >= t`` also holding for the rounded ``H``."""
        g, b = self.gamma, self.beta
        ok = np.isfinite(u)
        z = np.full(u.shape, np.nan)
        if not ok.any():
            return z
        # envelope root: G(z0) >= max_i(gamma_i + beta_i z0) = u, so z0 is right of the root
        uo = u[ok]
        z0 = np.empty(uo.size)
        for i in range(0, uo.size, _BLOCK):
            z0[i:i + _BLOCK] = (np.subtract.outer(uo[i:i + _BLOCK], g) / b).min(axis=1)
        idx = np.flatnonzero(ok)

        def residual(zc: np.ndarray, act: np.ndarray):
            # f <= tol: at the root up to the rounding of G (the step is below the accuracy
            # of z); a step of zero: Newton stalls at the rounding level
            uc = uo[act]
            gz, d1 = self._g(zc, slope=True)
            tol = 4 * MACHINE_EPSILON * (1.0 + np.abs(uc) + self._gmax + np.abs(zc) * b[-1])
            return gz - uc, d1, tol

        z[idx] = newton_monotone(residual, z0, iters=100)
        # settle on the requested side of the root, by rounding only: the first move is the
        # Newton estimate of the remaining distance, then growing multiples of an ulp
        def wrong_side(zz: np.ndarray, rows: np.ndarray, slope: bool = False):
            gz, d1 = self._g(zz, slope=slope)
            h = self._h_from_g(gz)
            if below:
                return (gz > u[rows]) | (h > t[rows]), gz, d1
            return (gz < u[rows]) | (h < t[rows]), gz, d1

        zc = z[idx]
        bad, gz, d1 = wrong_side(zc, idx, slope=True)
        if not bad.any():
            return z
        with np.errstate(divide="ignore", invalid="ignore"):
            est = np.abs(gz - u[idx]) / d1
        est = np.where(np.isfinite(est), est, 0.0)
        step = (est + 2 * np.spacing(np.maximum(np.abs(zc), 1e-300)))[bad]
        cur = idx[bad]
        step = -step if below else step
        z[cur] = zc[bad] + step
        _, z[cur] = walk_out(lambda zz: wrong_side(zz, cur)[0], z[cur], 2.0 * step,
                             max_moves=79, on_limit="return")
        return z


class LocationMixtureLoss(PrivacyLoss):
    """PLRV of ``P = sum_i p_i K((x - a_i)/s)`` against ``Q = sum_j q_j K((x - b_j)/s)``.

    ``K`` is the Gaussian or Laplace density. The loss ``L(x) = log P(x)/Q(x)`` must be
    non-decreasing in ``x`` (the caller reflects ``x -> -x`` otherwise); this holds for every
    pair built in this package because the Gaussian and Laplace kernels are totally positive of
    order 2 and the mixing distributions are ordered by likelihood ratio. Then
    ``P(Y <= y) = P(X <= x*(y))`` with ``x*(y) = sup{x : L(x) <= y}`` (Koskela et al. 2020,
    Sec. 6, which writes it as ``L^{-1}``).

    Parameters
    ----------
    kernel : "gaussian" or "laplace"
    p_locs, p_weights, q_locs, q_weights : the two mixtures (weights summing to 1 each,
        apart from ``inf_mass`` which is taken from P's weights and given to +inf).
    scale : the common standard deviation (Gaussian) or scale b (Laplace).
    inverse : optional closed form of ``x*(y)`` for finite ``y`` strictly inside the support.
    inf_mass : P-mass of an output only P produces (paired with the same Q-mass at -inf).

    Without a closed form, a Gaussian pair with a single component on one side (the
    mixture-of-Gaussians pairs of Ganesh, Def. 2.8, both directions) is evaluated and inverted
    through its log-sum-exp form (:class:`_LseForm`: monotone Newton, accurate to rounding up
    to the flat end of the loss); other pairs by the generic bracketed search
    :meth:`_bisect`.
    """

    def __init__(self, kernel: str, p_locs, p_weights, q_locs, q_weights, scale: float,
                 inverse: Callable[[np.ndarray], np.ndarray] | None = None,
                 inf_mass: float = 0.0):
        self.kernel = KERNELS[kernel]
        self.a = np.asarray(p_locs, dtype=float)
        self.pw = np.asarray(p_weights, dtype=float)
        self.b = np.asarray(q_locs, dtype=float)
        self.qw = np.asarray(q_weights, dtype=float)
        keep_p, keep_q = self.pw > 0, self.qw > 0
        self.a, self.pw = self.a[keep_p], self.pw[keep_p]
        self.b, self.qw = self.b[keep_q], self.qw[keep_q]
        self.s = float(scale)
        self.lpw = np.log(self.pw)
        self.lqw = np.log(self.qw)
        self._lse_p = float(lse_last(self.lpw))  # log of each mixture's total weight
        self._lse_q = float(lse_last(self.lqw))
        self._inverse = inverse
        self.inf_mass = float(inf_mass)
        self.neg_inf_mass = float(inf_mass)
        self.support = self._limits()
        self._lse = self._lse_form()

    # loss function and its inverse ------------------------------------------------------------
    def loss(self, x: np.ndarray) -> np.ndarray:
        """``L(x) = log P(x)/Q(x)`` (vectorized)."""
        if self._lse is not None:
            sign = self._lse.sign
            x = np.asarray(x, dtype=float)
            return sign * self._lse.log_ratio(sign * x)
        x = np.asarray(x, dtype=float)[..., None]
        k = self.kernel.logpdf
        return (lse_last(self.lpw + k((x - self.a) / self.s))
                - lse_last(self.lqw + k((x - self.b) / self.s)))

    def _limits(self) -> tuple[float, float]:
        s = self.s
        if self.kernel is _Laplace:
            top = float(lse_last(self.lpw + self.a / s) - lse_last(self.lqw + self.b / s))
            bot = float(lse_last(self.lpw - self.a / s) - lse_last(self.lqw - self.b / s))
            return bot, top
        amax, bmax = self.a.max(), self.b.max()
        amin, bmin = self.a.min(), self.b.min()
        if amax > bmax:
            top = math.inf
        elif amax == bmax:
            top = float(lse_last(self.lpw[self.a == amax]) - lse_last(self.lqw[self.b == bmax]))
        else:
            raise ValueError("loss is not non-decreasing: reflect the pair")
        if amin > bmin:
            bot = -math.inf
        elif amin == bmin:
            bot = float(lse_last(self.lpw[self.a == amin]) - lse_last(self.lqw[self.b == bmin]))
        else:
            raise ValueError("loss is not non-decreasing: reflect the pair")
        return bot, top

    def inverse(self, y: np.ndarray) -> np.ndarray:
        """``x*(y) = sup{x : L(x) <= y}``; -inf below the support, +inf at or above its top."""
        y = np.asarray(y, dtype=float)
        lo, hi = self.support
        out = np.empty_like(y)
        attained_low = self.kernel is _Laplace
        below = (y < lo) if attained_low else (y <= lo)
        above = y >= hi
        out[below] = -np.inf
        out[above] = np.inf
        mid = ~(below | above)
        if np.any(mid):
            ym = y[mid]
            if self._inverse is not None:
                out[mid] = self._inverse(ym)
            elif self._lse is not None:
                out[mid] = self._lse.inverse(ym)
            else:
                out[mid] = self._bisect(ym)
        return out

    @property
    def closed_inverse(self) -> Callable[[np.ndarray], np.ndarray] | None:
        """The closed form of ``x*(y)`` the loss was built with (``inverse=``), or None."""
        return self._inverse

    @property
    def has_closed_inverse(self) -> bool:
        """True when the loss was built with a closed form of ``x*(y)`` (``inverse=``)."""
        return self._inverse is not None

    def with_inverse(self, inverse: Callable[[np.ndarray], np.ndarray]) -> LocationMixtureLoss:
        """The same pair built anew with ``inverse`` as its closed form of ``x*(y)`` (called
        on finite ``y`` strictly inside the support, like the constructor's ``inverse=``):
        e.g. a faster inversion of many sorted points."""
        return type(self)(self.kernel.name, self.a, self.pw, self.b, self.qw, self.s,
                          inverse=inverse, inf_mass=self.inf_mass)

    def _lse_form(self) -> _LseForm | None:
        """The log-sum-exp form of the loss when the kernel is Gaussian and one side of the
        pair has a single component (every :class:`~tightdp.mechanisms.MixtureOfGaussians`
        pair, Ganesh Def. 2.8): see :class:`_LseForm`."""
        if self.kernel is not _Gauss or (self.a.size > 1 and self.b.size > 1):
            return None
        s2 = self.s * self.s
        if self.b.size == 1:  # single Q component: L(x) = H(x)
            b = self.b[0]
            beta = (self.a - b) / s2
            alpha = self.lpw - self.lqw[0] - beta * (self.a + b) / 2
            sign = 1.0
        else:  # single P component: L(x) = -H(-x)
            a = self.a[0]
            beta = (a - self.b) / s2
            alpha = self.lqw - self.lpw[0] + beta * (a + self.b) / 2
            sign = -1.0
        if np.any(beta < 0) or not np.any(beta > 0):
            return None
        return _LseForm(sign, alpha, beta)

    def slope(self, x: np.ndarray) -> np.ndarray:
        """``L'(x)`` for the Gaussian kernel: ``(E_post_P[a] - E_post_Q[b]) / s^2`` (the
        posterior means of the locations under P and under Q at ``x``), vectorized."""
        if self.kernel is not _Gauss:
            raise ValueError(f"slope needs the Gaussian kernel, got {self.kernel.name!r}")
        xx = np.asarray(x, dtype=float)[..., None]
        k = self.kernel.logpdf
        lp = self.lpw + k((xx - self.a) / self.s)
        lq = self.lqw + k((xx - self.b) / self.s)
        wp = np.exp(lp - logsumexp(lp, axis=-1, keepdims=True))
        wq = np.exp(lq - logsumexp(lq, axis=-1, keepdims=True))
        return ((wp * self.a).sum(-1) - (wq * self.b).sum(-1)) / (self.s * self.s)

    def _bisect(self, y: np.ndarray) -> np.ndarray:
        """Safeguarded Newton (Gaussian kernel) or bisection (Laplace) for x*(y): the generic
        path, for pairs without closed form or log-sum-exp form (both sides mixtures, or the
        Laplace kernel)."""
        s = self.s
        c_lo = min(self.a.min(), self.b.min()) - 2 * s
        c_hi = max(self.a.max(), self.b.max()) + 2 * s
        lo = np.full_like(y, c_lo)
        hi = np.full_like(y, c_hi)
        width = c_hi - c_lo + s
        # expand until L(lo) <= y < L(hi)
        _, lo = walk_out(lambda x: self.loss(x) > y, lo, -width, max_moves=200, on_limit="return",
                         what="the inverse of the loss")
        _, hi = walk_out(lambda x: self.loss(x) <= y, hi, width, max_moves=200, on_limit="return",
                         what="the inverse of the loss")
        # a private loop on purpose: every element iterates until all are done, inside open
        # brackets; newton_polish (which freezes converged elements, closed brackets) moved
        # certified PLD bounds of Poisson-subsampled Laplace pairs by ~1e-10 relative, upper
        # bounds down included
        newton = self.kernel is _Gauss
        x = 0.5 * (lo + hi)
        for _ in range(300):
            fx = self.loss(x) - y
            ok = fx <= 0
            lo = np.where(ok, x, lo)
            hi = np.where(ok, hi, x)
            if newton:
                with np.errstate(divide="ignore", invalid="ignore"):
                    xn = x - fx / self.slope(x)
                inside = (xn > lo) & (xn < hi) & np.isfinite(xn)
                x_new = np.where(inside, xn, 0.5 * (lo + hi))
            else:
                x_new = 0.5 * (lo + hi)
            tol = 4e-16 * np.maximum(1.0, np.abs(x_new))
            done = (np.abs(x_new - x) <= tol) | (hi - lo <= tol)
            x = x_new
            if np.all(done):
                break
        # Newton can converge from above to a point whose loss exceeds y by rounding only,
        # leaving lo at the initial bracket end: step down by growing multiples of an ulp
        # instead of falling back to that end (which would be wrong by the whole bracket)
        _, x = walk_out(lambda xx: self.loss(xx) - y > 0, x, -4e-16 * np.maximum(1.0, np.abs(x)),
                        lower=lo, max_moves=60, on_limit="return")
        # return a point with L(x) <= y (the sup from below), up to rounding
        fx = self.loss(x) - y
        return np.where(fx <= 0, x, lo)

    # log CDFs --------------------------------------------------------------------------------
    def _mix(self, x: np.ndarray, side: str) -> tuple[np.ndarray, np.ndarray]:
        """``log sum_i w_i F((x - c_i)/s)`` and the same with the survival function, for the
        components of P (``side="p"``) or Q, at the same points; remembered for the last
        ``x`` of each side (the CDF and the survival function are usually both asked)."""
        key = "last_mix_" + side  # a memo in the loss's own tables (PrivacyLoss.tables)
        last = self.tables.get(key)
        if last is not None and last[0] is x:
            return last[1], last[2]
        locs, lw = (self.a, self.lpw) if side == "p" else (self.b, self.lqw)
        x1 = np.asarray(x, dtype=float).ravel()
        n = x1.size
        lc: np.ndarray = np.empty(n)
        ls: np.ndarray = np.empty(n)
        gauss = self.kernel is _Gauss
        for i in range(0, n, _BLOCK):
            z = np.subtract.outer(x1[i:i + _BLOCK], locs)
            z /= self.s
            with np.errstate(invalid="ignore", over="ignore"):
                if gauss:
                    # one log_ndtr per term: the smaller of Phi(z), Phi(-z) is computed by
                    # log_ndtr, the other as log(1 - that), which is accurate as the
                    # subtracted probability is at most 1/2
                    small = log_ndtr(-np.abs(z))
                    large = np.log1p(-np.exp(small))
                    neg = z <= 0
                    c = np.where(neg, small, large)
                    sf = np.where(neg, large, small)
                else:
                    c, sf = self.kernel.logcdf(z), self.kernel.logsf(z)
                c += lw
                sf += lw
                lc[i:i + _BLOCK] = lse_last(c)
                ls[i:i + _BLOCK] = lse_last(sf)
        lc, ls = lc.reshape(np.shape(x)), ls.reshape(np.shape(x))
        if n > 16:
            self.tables[key] = (x, lc, ls)
        return lc, ls

    def _split(self, y):
        y = np.asarray(y, dtype=float)
        # the four CDFs are usually asked at the same points (bin edges): reuse x*(y)
        last = self.tables.get("last_inverse")
        if last is not None and last[0].shape == y.shape and np.array_equal(last[0], y):
            return y, last[1]
        x = self.inverse(np.atleast_1d(y)).reshape(y.shape)
        if y.size > 16:
            self.tables["last_inverse"] = (y.copy(), x)
        return y, x

    def _tail(self, y, side: str, *, upper: bool, atom: float) -> np.ndarray:
        """``log P(X <= x*(y))`` (``upper`` False) or ``log P(X > x*(y))`` under the components
        of P (``side="p"``) or Q, the whole mass or none where ``x*(y)`` is infinite, plus an
        ``atom`` of loss mass outside the finite values (P's at +inf, Q's at -inf)."""
        _, x = self._split(y)
        total = self._lse_p if side == "p" else self._lse_q
        at_minus, at_plus = (total, -np.inf) if upper else (-np.inf, total)
        base = self._mix(x, side)[1 if upper else 0]
        base = np.where(np.isneginf(x), at_minus, np.where(np.isposinf(x), at_plus, base))
        if atom > 0:
            base = np.logaddexp(base, math.log(atom))
        return base

    def logp_cdf(self, y):
        return self._tail(y, "p", upper=False, atom=0.0)

    def logp_sf(self, y):
        return self._tail(y, "p", upper=True, atom=self.inf_mass)

    def logq_cdf(self, y):
        return self._tail(y, "q", upper=False, atom=self.neg_inf_mass)

    def logq_sf(self, y):
        return self._tail(y, "q", upper=True, atom=0.0)
