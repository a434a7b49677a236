"""Privacy loss random variables (PLRVs), the one thing every mechanism has to provide.

For an ordered pair of output distributions (P, Q) the privacy loss of an output o is
``Y(o) = log P(o)/Q(o)``. A :class:`PrivacyLoss` describes the law of ``Y`` under P and
under Q, the way ``scipy.stats`` describes a distribution: CDF and survival function, each
with a log-space variant that stays accurate where probabilities are 1e-300, plus the mass
``P(Y = +inf)`` (outputs Q cannot produce) and ``Q(Y = -inf)``.

Everything the accountants need is derived from these four functions:

* the hockey-stick divergence of one application, ``delta(eps) = P(Y > eps) - e^eps Q(Y > eps)``
  (Koskela et al. 2020, Lemma 5 / eq. (4.2); Gopi et al. 2021, Prop. 2.4);
* the probabilities of loss bins ``P(a < Y <= b)`` and ``Q(a < Y <= b)`` from which the
  discretizers build dominating and dominated pairs on a grid (``tightdp.pld.discretize``).

Conventions: ``p_sf`` includes the mass at +inf; ``q_cdf`` includes Q's mass at -inf;
``p_cdf`` and ``q_sf`` are over finite losses only.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy.special import log_ndtr, logsumexp

__all__ = [
    "table_start",
    "PrivacyLoss",
    "LocationMixtureLoss",
    "DiscreteLoss",
    "GaussianLoss",
]

_LOG_HALF = math.log(0.5)


def _lse_last(x: np.ndarray) -> np.ndarray:
    """logsumexp over the last axis, with fast paths for one and two components."""
    m = x.shape[-1]
    if m == 1:
        return x[..., 0]
    if m == 2:
        return np.logaddexp(x[..., 0], x[..., 1])
    return logsumexp(x, axis=-1)


def _log_sub_exp(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """log(e^a - e^b) for a >= b, elementwise; -inf where they are equal."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        d = b - a
        out = a + np.log(-np.expm1(np.minimum(d, 0.0)))
    out = np.where(np.isneginf(b), a, out)
    return np.where(np.isneginf(a) | (d >= 0), -np.inf, out)


def table_start(tab_x: np.ndarray, tab_l: np.ndarray, y: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Start of a monotone inversion ``L(x) = y`` from a table ``tab_l = L(tab_x)``
    (``tab_l`` made non-decreasing first): the bracketing table cell ``[a, b]`` of each ``y``
    and the linear interpolate inside it, for a Newton/bisection polish."""
    j = np.clip(np.searchsorted(tab_l, y, side="left"), 1, tab_x.size - 1)
    a, b = tab_x[j - 1], tab_x[j]
    dl = tab_l[j] - tab_l[j - 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(dl > 0, (y - tab_l[j - 1]) / dl, 0.5)
    return a, b, a + np.clip(frac, 0.0, 1.0) * (b - a)


class PrivacyLoss:
    """Law of the privacy loss ``Y = log P(o)/Q(o)`` under P and under Q.

    Subclasses implement the four log-space functions and set ``inf_mass``,
    ``neg_inf_mass`` and ``support`` (closure of the finite loss values).
    """

    #: P(Y = +inf): the mass of outputs that only P can produce.
    inf_mass: float = 0.0
    #: Q(Y = -inf): the mass of outputs that only Q can produce.
    neg_inf_mass: float = 0.0
    #: smallest and largest finite loss value (may be -inf / +inf for unbounded losses).
    support: tuple[float, float] = (-math.inf, math.inf)

    # --- to implement -------------------------------------------------------------------------
    def logp_cdf(self, y: np.ndarray) -> np.ndarray:
        """log P(Y <= y) over finite losses."""
        raise NotImplementedError

    def logp_sf(self, y: np.ndarray) -> np.ndarray:
        """log P(Y > y), including the mass at +inf."""
        raise NotImplementedError

    def logq_cdf(self, y: np.ndarray) -> np.ndarray:
        """log Q(Y <= y), including Q's mass at -inf."""
        raise NotImplementedError

    def logq_sf(self, y: np.ndarray) -> np.ndarray:
        """log Q(Y > y)."""
        raise NotImplementedError

    # --- derived ------------------------------------------------------------------------------
    def p_cdf(self, y):
        return np.exp(self.logp_cdf(np.asarray(y, dtype=float)))

    def p_sf(self, y):
        return np.exp(self.logp_sf(np.asarray(y, dtype=float)))

    def q_cdf(self, y):
        return np.exp(self.logq_cdf(np.asarray(y, dtype=float)))

    def q_sf(self, y):
        return np.exp(self.logq_sf(np.asarray(y, dtype=float)))

    def bin_masses(self, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """P- and Q-probabilities of the loss bins ``(edges[i], edges[i+1]]``.

        Each difference is taken on the side (CDF or survival function) where it is small,
        so that tail bins keep their relative accuracy.
        """
        e = np.asarray(edges, dtype=float)
        lpc, lps = self.logp_cdf(e), self.logp_sf(e)
        lqc, lqs = self.logq_cdf(e), self.logq_sf(e)
        return (self._diff(lpc, lps, finite_top=math.log1p(-self.inf_mass)
                           if self.inf_mass < 1 else -math.inf),
                self._diff(lqc, lqs, finite_top=0.0))

    @staticmethod
    def _diff(lc: np.ndarray, ls: np.ndarray, finite_top: float) -> np.ndarray:
        # mass of (a, b]: cdf(b) - cdf(a) = sf(a) - sf(b); use sf where the bin is in the upper
        # half of the distribution, cdf elsewhere.
        lo_c, hi_c = lc[:-1], lc[1:]
        lo_s, hi_s = ls[:-1], ls[1:]
        use_sf = lo_s < _LOG_HALF
        with np.errstate(invalid="ignore"):
            via_sf = np.exp(_log_sub_exp(lo_s, hi_s))
            via_cdf = np.exp(_log_sub_exp(hi_c, lo_c))
        m = np.where(use_sf, via_sf, via_cdf)
        return np.maximum(m, 0.0)

    def delta(self, eps) -> np.ndarray:
        """Hockey-stick divergence of one application, ``P(Y > eps) - e^eps Q(Y > eps)``.

        Koskela et al. (2020), Lemma 5; evaluated in log space so that values down to 1e-300
        keep their relative accuracy.
        """
        eps = np.asarray(eps, dtype=float)
        lp = self.logp_sf(eps)
        lq = self.logq_sf(eps)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            r = np.where(np.isneginf(lp), -np.inf, eps + lq - lp)
            val = np.exp(lp) * -np.expm1(np.minimum(r, 0.0))
        return np.where(np.isneginf(lp), 0.0, np.maximum(val, 0.0))

    def cgf(self, t, order: int = 0) -> np.ndarray:
        """Cumulant generating function ``K(t) = log E_P[e^{tY}]`` and its derivatives up to
        ``order`` (at most 4), shape ``(order + 1,) + shape(t)``: Alghamdi et al., *The
        Saddle-Point Accountant*, eq. (23); see :func:`tightdp.cgf.cgf`."""
        from ..cgf import cgf

        return cgf(self, t, order)

    def loss_quantile(self, log_mass: float, upper: bool) -> float:
        """A loss value ``y`` with ``P(Y > y) <= e^log_mass`` (upper) or
        ``P(Y <= y) <= e^log_mass`` (lower), found by a monotone search.

        The returned point is on the safe side: the tail beyond it holds at most the mass asked.
        Returns the support's end if that is finite and already satisfies the condition.
        """
        lo, hi = self.support
        if upper:
            # finite mass above hi is zero; the +inf mass cannot be cut by any finite y
            def f(y):
                return float(_finite_sf_log(self, y))

            if math.isfinite(hi):
                return hi
            a = 0.0 if not math.isfinite(lo) else lo
            step = 1.0
            b = a + step
            while f(b) > log_mass:
                a, step = b, step * 2
                b = a + step
                if b > 1e7:
                    return b
            for _ in range(80):
                m = 0.5 * (a + b)
                if f(m) > log_mass:
                    a = m
                else:
                    b = m
                if b - a < 1e-9 * max(1.0, abs(b)):
                    break
            return b
        def f(y):
            return float(self.logp_cdf(np.asarray(y)))

        if math.isfinite(lo):
            return lo
        b = 0.0 if not math.isfinite(hi) else hi
        step = 1.0
        a = b - step
        while f(a) > log_mass:
            b, step = a, step * 2
            a = b - step
            if a < -1e7:
                return a
        for _ in range(80):
            m = 0.5 * (a + b)
            if f(m) > log_mass:
                b = m
            else:
                a = m
            if b - a < 1e-9 * max(1.0, abs(a)):
                break
        return a


def _finite_sf_log(loss: PrivacyLoss, y: float) -> float:
    """log P(y < Y < inf): the survival function without the mass at +inf."""
    ls = float(loss.logp_sf(np.asarray(y)))
    if loss.inf_mass <= 0:
        return ls
    return float(_log_sub_exp(np.asarray(ls), np.asarray(math.log(loss.inf_mass))))


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
        self._lse_p = float(logsumexp(self.lpw))  # log of each mixture's total weight
        self._lse_q = float(logsumexp(self.lqw))
        self._inverse = inverse
        self.inf_mass = float(inf_mass)
        self.neg_inf_mass = float(inf_mass)
        self.support = self._limits()

    # loss function and its inverse ------------------------------------------------------------
    def loss(self, x: np.ndarray) -> np.ndarray:
        """``L(x) = log P(x)/Q(x)`` (vectorized)."""
        x = np.asarray(x, dtype=float)[..., None]
        k = self.kernel.logpdf
        return (_lse_last(self.lpw + k((x - self.a) / self.s))
                - _lse_last(self.lqw + k((x - self.b) / self.s)))

    def _limits(self) -> tuple[float, float]:
        s = self.s
        if self.kernel is _Laplace:
            top = float(logsumexp(self.lpw + self.a / s) - logsumexp(self.lqw + self.b / s))
            bot = float(logsumexp(self.lpw - self.a / s) - logsumexp(self.lqw - self.b / s))
            return bot, top
        amax, bmax = self.a.max(), self.b.max()
        amin, bmin = self.a.min(), self.b.min()
        if amax > bmax:
            top = math.inf
        elif amax == bmax:
            top = float(logsumexp(self.lpw[self.a == amax]) - logsumexp(self.lqw[self.b == bmax]))
        else:
            raise ValueError("loss is not non-decreasing: reflect the pair")
        if amin > bmin:
            bot = -math.inf
        elif amin == bmin:
            bot = float(logsumexp(self.lpw[self.a == amin]) - logsumexp(self.lqw[self.b == bmin]))
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
            out[mid] = self._inverse(ym) if self._inverse is not None else self._bisect(ym)
        return out

    def _slope(self, x: np.ndarray) -> np.ndarray:
        """L'(x) for the Gaussian kernel: (E_post_P[a] - E_post_Q[b]) / s^2."""
        xx = x[..., None]
        k = self.kernel.logpdf
        lp = self.lpw + k((xx - self.a) / self.s)
        lq = self.lqw + k((xx - self.b) / self.s)
        wp = np.exp(lp - logsumexp(lp, axis=-1, keepdims=True))
        wq = np.exp(lq - logsumexp(lq, axis=-1, keepdims=True))
        return ((wp * self.a).sum(-1) - (wq * self.b).sum(-1)) / (self.s * self.s)

    def _bisect(self, y: np.ndarray) -> np.ndarray:
        """Safeguarded Newton (Gaussian kernel) or bisection (Laplace) for x*(y)."""
        s = self.s
        c_lo = min(self.a.min(), self.b.min()) - 2 * s
        c_hi = max(self.a.max(), self.b.max()) + 2 * s
        lo = np.full_like(y, c_lo)
        hi = np.full_like(y, c_hi)
        width = c_hi - c_lo + s
        # expand until L(lo) <= y < L(hi)
        for _ in range(200):
            bad = self.loss(lo) > y
            if not bad.any():
                break
            lo[bad] -= width
            width *= 2
        width = c_hi - c_lo + s
        for _ in range(200):
            bad = self.loss(hi) <= y
            if not bad.any():
                break
            hi[bad] += width
            width *= 2
        newton = self.kernel is _Gauss
        x = 0.5 * (lo + hi)
        for _ in range(300):
            fx = self.loss(x) - y
            ok = fx <= 0
            lo = np.where(ok, x, lo)
            hi = np.where(ok, hi, x)
            if newton:
                with np.errstate(divide="ignore", invalid="ignore"):
                    xn = x - fx / self._slope(x)
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
        step = 4e-16 * np.maximum(1.0, np.abs(x))
        for _ in range(60):
            over = self.loss(x) - y > 0
            if not over.any():
                break
            x = np.where(over, np.maximum(x - step, lo), x)
            step = step * 2.0
        # return a point with L(x) <= y (the sup from below), up to rounding
        fx = self.loss(x) - y
        return np.where(fx <= 0, x, lo)

    # log CDFs --------------------------------------------------------------------------------
    def _mix(self, x: np.ndarray, locs, lw, fn) -> np.ndarray:
        z = (x[..., None] - locs) / self.s
        with np.errstate(invalid="ignore"):
            return _lse_last(lw + fn(z))

    def _split(self, y):
        y = np.asarray(y, dtype=float)
        # the four CDFs are usually asked at the same points (bin edges): reuse x*(y)
        last = self.__dict__.get("_last_inverse")
        if last is not None and last[0].shape == y.shape and np.array_equal(last[0], y):
            return y, last[1]
        x = self.inverse(np.atleast_1d(y)).reshape(y.shape)
        if y.size > 16:
            self.__dict__["_last_inverse"] = (y.copy(), x)
        return y, x

    def logp_cdf(self, y):
        _, x = self._split(y)
        base = self._mix(x, self.a, self.lpw, self.kernel.logcdf)
        return np.where(np.isneginf(x), -np.inf, np.where(np.isposinf(x),
                        self._lse_p, base))

    def logp_sf(self, y):
        _, x = self._split(y)
        base = self._mix(x, self.a, self.lpw, self.kernel.logsf)
        base = np.where(np.isneginf(x), self._lse_p, np.where(np.isposinf(x), -np.inf,
                        base))
        if self.inf_mass > 0:
            base = np.logaddexp(base, math.log(self.inf_mass))
        return base

    def logq_cdf(self, y):
        _, x = self._split(y)
        base = self._mix(x, self.b, self.lqw, self.kernel.logcdf)
        base = np.where(np.isneginf(x), -np.inf, np.where(np.isposinf(x), self._lse_q,
                        base))
        if self.neg_inf_mass > 0:
            base = np.logaddexp(base, math.log(self.neg_inf_mass))
        return base

    def logq_sf(self, y):
        _, x = self._split(y)
        base = self._mix(x, self.b, self.lqw, self.kernel.logsf)
        return np.where(np.isneginf(x), self._lse_q, np.where(np.isposinf(x), -np.inf,
                        base))


class GaussianLoss(PrivacyLoss):
    """PLRV of the Gaussian mechanism with ``mu = sensitivity / sigma``.

    Under P the loss is N(mu^2/2, mu^2), under Q it is N(-mu^2/2, mu^2) (Balle & Wang 2018;
    Koskela et al. 2020, Sec. 6.1 with q = 1).
    """

    def __init__(self, mu: float):
        self.mu = float(mu)
        self.support = (-math.inf, math.inf)

    def _z(self, y, sign):
        mu = self.mu
        return (np.asarray(y, dtype=float) - sign * mu * mu / 2) / mu

    def logp_cdf(self, y):
        return log_ndtr(self._z(y, 1))

    def logp_sf(self, y):
        return log_ndtr(-self._z(y, 1))

    def logq_cdf(self, y):
        return log_ndtr(self._z(y, -1))

    def logq_sf(self, y):
        return log_ndtr(-self._z(y, -1))


class DiscreteLoss(PrivacyLoss):
    """PLRV of a pair of discrete distributions, given by its atoms.

    Parameters
    ----------
    losses : finite loss values of the atoms
    p_masses, q_masses : P- and Q-mass of each atom (``q = p * exp(-loss)`` for a true pair)
    inf_mass : P-mass of outputs Q cannot produce
    neg_inf_mass : Q-mass of outputs P cannot produce
    """

    def __init__(self, losses, p_masses, q_masses, inf_mass: float = 0.0,
                 neg_inf_mass: float = 0.0):
        y = np.asarray(losses, dtype=float)
        p = np.asarray(p_masses, dtype=float)
        q = np.asarray(q_masses, dtype=float)
        order = np.argsort(y)
        y, p, q = y[order], p[order], q[order]
        keep = (p > 0) | (q > 0)
        self.y, self.p, self.q = y[keep], p[keep], q[keep]
        self.inf_mass = float(inf_mass)
        self.neg_inf_mass = float(neg_inf_mass)
        self.support = (float(self.y[0]), float(self.y[-1])) if self.y.size else (0.0, 0.0)
        self._pc = np.concatenate([[0.0], np.cumsum(self.p)])
        self._ps = np.concatenate([np.cumsum(self.p[::-1])[::-1], [0.0]])
        self._qc = np.concatenate([[0.0], np.cumsum(self.q)])
        self._qs = np.concatenate([np.cumsum(self.q[::-1])[::-1], [0.0]])

    def _idx(self, y):
        return np.searchsorted(self.y, np.asarray(y, dtype=float), side="right")

    @staticmethod
    def _log(x):
        with np.errstate(divide="ignore"):
            return np.log(x)

    def logp_cdf(self, y):
        return self._log(self._pc[self._idx(y)])

    def logp_sf(self, y):
        return self._log(self._ps[self._idx(y)] + self.inf_mass)

    def logq_cdf(self, y):
        return self._log(self._qc[self._idx(y)] + self.neg_inf_mass)

    def logq_sf(self, y):
        return self._log(self._qs[self._idx(y)])
