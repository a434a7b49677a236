"""Certified trade-off curves from certified samples of the privacy profile ``delta(eps)``.

The duality (Dong, Roth & Su 2022, "Gaussian differential privacy", JRSS B, Prop. 2.12 and
its proof; the conjugate form of Zhu, Dong & Wang 2022, Lemma 5): for an ordered pair
``(P, Q)`` with hockey-stick profile ``delta(eps) = sup_S P(S) - e^eps Q(S)`` (every real
eps), the trade-off function ``f = T(Q, P)`` (the smallest type-II error ``beta = P(S^c)`` of a
test rejecting ``Q`` on ``S`` at type-I error ``alpha = Q(S)``) is

    f(alpha) = sup_eps max(0, 1 - delta(eps) - e^eps alpha).                           (1)

A membership attack that flags "member" on ``S`` has FPR ``alpha`` and TPR ``1 - f(alpha)``.

*Directions and the relation.* Under a relation whose neighbour pairs come in both orders
(add/remove, replace-one), the mechanism's trade-off function is symmetric; it is the
symmetrization of the directions' curves, the convex hull of the minimum of the curves and
their inverses (Dong, Roth & Su, Prop. 2.4 and Def. F.1 / Prop. F.2 of the appendix on
symmetrization). Its profile for ``eps >= 0`` is the maximum of the directions' profiles
(the conjugate of a minimum is the maximum of the conjugates), and a symmetric curve is
determined by it (Prop. 2.12):

    f(alpha) = sup_{eps >= 0} max(0, 1 - delta(eps) - e^eps alpha,
                                  e^-eps (1 - delta(eps) - alpha)).                     (2)

That is what :class:`Profile` with ``symmetric=True`` bounds; a direction's own curve is (1)
over every real eps (``symmetric=False``).

*Certified bounds from samples.* Given points ``z_0 < ... < z_K`` and, at each, an upper
bound ``U_k`` and a lower bound ``L_k`` on ``delta(z_k)`` (``L_inf`` on ``delta(+inf)``):

- every line of (1)/(2) at a sample with ``U_k`` in place of ``delta`` lies below ``f``, so
  their maximum is a certified lower bound ``beta_lower`` (any subset of lines is);
- ``delta`` is non-increasing, so on ``[z_k, z_{k+1}]`` ``delta(eps) >= L_{k+1}`` and
  ``e^eps alpha >= e^{z_k} alpha``: the line at any eps there is below
  ``A_k - e^{z_k} alpha`` with ``A_k = 1 - L_{k+1}`` (and the mirrored line below
  ``e^{-z_k} max(A_k - alpha, 0)``); beyond ``z_K`` ``A_K = 1 - L_inf``; below ``z_0`` (one
  direction) the line is at most ``min(1 - L_0, e^{z_0} (1 - alpha))`` (``delta(eps) >=
  1 - e^eps``). The maximum of these is a certified upper bound ``beta_upper``.

At the optimum the line's slope ``e^eps alpha`` is ``-delta'(eps)``, so a sample spacing over
which ``delta`` changes by at most ``eta`` costs about ``2 eta`` in ``beta`` on top of the
width of the profile's bracket.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr, ndtri

from ..results import check_bracket

__all__ = ["Profile", "profile_samples", "GDP_MU_MAX"]

#: rounding allowance of a line's value (terms of magnitude <= 1, a few operations)
ROUND = 1e-14
#: the most (alpha, sample) pairs evaluated at once (a chunk stays in the CPU caches)
CHUNK = 1 << 16
#: the largest mu the GDP fit considers (beyond it, the curve is 0 above alpha = 1e-300)
GDP_MU_MAX = 80.0


@dataclass(frozen=True)
class Profile:
    """Certified samples of a privacy profile: ``lower <= delta(eps) <= upper`` at every
    ``eps`` (increasing), ``lower_inf <= delta(+inf)``; ``symmetric`` for the relation's
    profile (eps >= 0 from 0, curve (2) of the module) rather than one direction's (1)."""

    eps: np.ndarray
    upper: np.ndarray
    lower: np.ndarray
    lower_inf: float
    symmetric: bool

    def _lines(self, alpha: np.ndarray, *, upper: bool) -> np.ndarray:
        """max over the lines of the module's bounds at each ``alpha`` (the upper or the
        lower bound on beta), before the rounding allowance."""
        z = self.eps
        a = 1.0 - (np.append(self.lower[1:], self.lower_inf) if upper else self.upper)
        with np.errstate(over="ignore"):
            ez, emz = np.exp(np.minimum(z, 709.0)), np.exp(-z)
        out = np.zeros(alpha.shape)
        pos = np.flatnonzero(alpha > 0)
        out[alpha == 0] = np.max(a)  # e^z * 0 is 0 (not inf * 0)
        step = max(1, CHUNK // max(z.size, 1))
        for s in range(0, pos.size, step):
            idx = pos[s:s + step]
            al = alpha[idx, None]
            with np.errstate(over="ignore", invalid="ignore"):
                best = np.max(a - ez * al, axis=1)
                if self.symmetric:
                    gap = a - al
                    if upper:
                        np.maximum(gap, 0.0, out=gap)
                    best = np.maximum(best, np.max(emz * gap, axis=1))
            out[idx] = best
        if self.symmetric:
            out[alpha == 0] = np.maximum(out[alpha == 0], np.max(emz * np.maximum(a, 0.0)))
        else:
            floor = math.exp(min(z[0], 700.0)) * (1 - alpha)
            below = (np.minimum(1.0 - float(self.lower[0]), floor) if upper
                     else np.zeros(alpha.shape))
            out = np.maximum(out, below)
        return np.maximum(out, 0.0)

    def beta(self, alpha) -> tuple[np.ndarray, np.ndarray]:
        """``(beta_lower, beta_upper)``: certified bounds on the trade-off curve at
        ``alpha`` (an array in [0, 1])."""
        al = np.asarray(alpha, dtype=float).reshape(-1)
        lo = np.maximum(self._lines(al, upper=False) - ROUND, 0.0)
        hi = np.minimum(self._lines(al, upper=True) + ROUND, 1.0)
        check_bracket(lo, hi, "the trade-off curve", "risk")
        return lo, hi

    def delta(self, eps) -> tuple[np.ndarray, np.ndarray]:
        """``(lower, upper)`` bounds on ``delta`` at ``eps`` (the conversion from the curve's
        samples back to the profile): ``delta`` is non-increasing, so between samples it lies
        between the next sample's lower bound and the previous one's upper bound (1 below the
        first sample; ``lower_inf`` and the last upper bound beyond the last). For the
        relation, a negative eps is answered by the mirror identity ``delta(-e) = 1 - e^-e +
        e^-e delta(e)`` (symmetric curves)."""
        e = np.asarray(eps, dtype=float).reshape(-1)
        if self.symmetric:
            lo, hi = self.delta(np.abs(e)) if np.any(e < 0) else (None, None)
            if lo is not None:
                w = np.exp(np.minimum(e, 0.0))
                lo2, hi2 = self.delta(np.maximum(e, 0.0))
                neg = e < 0
                return (np.where(neg, 1 - w + w * lo, lo2), np.where(neg, 1 - w + w * hi, hi2))
        i = np.searchsorted(self.eps, e, side="left")   # first sample >= e
        j = np.searchsorted(self.eps, e, side="right") - 1  # last sample <= e
        low = np.where(i < self.eps.size, self.lower[np.minimum(i, self.eps.size - 1)],
                       self.lower_inf)
        up = np.where(j >= 0, self.upper[np.maximum(j, 0)], 1.0)
        return low, up

    def epsilon(self, delta) -> tuple[np.ndarray, np.ndarray]:
        """``(lower, upper)`` bounds on ``eps(delta)``, the smallest eps with ``delta(eps) <=
        delta`` (the conversion from the curve's samples to eps(delta)): ``upper`` the first
        sample whose upper bound is at most ``delta`` (inf if none), ``lower`` the last
        sample whose lower bound exceeds ``delta`` (``delta`` is non-increasing; the first
        sample, 0 for the relation, if none)."""
        d = np.asarray(delta, dtype=float).reshape(-1)
        ok = self.upper[None, :] <= d[:, None]
        first = np.argmax(ok, axis=1)
        up = np.where(ok.any(axis=1), self.eps[first], math.inf)
        above = self.lower[None, :] > d[:, None]
        last = self.eps.size - 1 - np.argmax(above[:, ::-1], axis=1)
        lo = np.where(above.any(axis=1), self.eps[last], self.eps[0])
        if self.symmetric:
            lo = np.maximum(lo, 0.0)
        check_bracket(lo, up, "eps(delta) from the curve", "risk")
        return lo, up

    def advantage(self) -> tuple[float, float]:
        """Bounds on the largest TPR - FPR, the total variation distance ``delta(0)``
        (Kairouz, Oh & Viswanath 2015, Thm. 2.1 at eps = 0)."""
        lo, up = self.delta(np.zeros(1))
        return float(lo[0]), float(up[0])

    def gdp_mu(self, alpha_min: float) -> tuple[float, float]:
        """``(mu_lower, mu_upper)`` of the tightest Gaussian curve ``G_mu(alpha) =
        Phi(Phi^-1(1 - alpha) - mu)`` (Dong, Roth & Su, eq. (2.4)) below the true one on
        ``[alpha_min, 1 - alpha_min]``. ``mu_upper``: the smallest mu found (bisection, kept
        on the passing side) for which ``G_mu`` lies below ``beta_lower`` there, checked
        interval by interval between points ``a_i``: ``G_mu`` is convex, so it stays below a
        line that is above it at both ends of an interval, and every line is below
        ``beta_lower`` (the line of largest value at ``a_i`` or at ``a_{i+1}`` is tried).
        ``mu_lower``: the largest mu forced by the upper curve, ``max_alpha Phi^-1(1 - alpha)
        - Phi^-1(beta_upper(alpha))`` over the points (``G_mu <= f <= beta_upper``)."""
        al = self._kinks(alpha_min)
        _, bhi = self.beta(al)
        with np.errstate(divide="ignore", invalid="ignore"):
            forced = ndtri(1 - al) - ndtri(bhi)
        mu_lo = max(float(np.max(np.where(np.isfinite(forced), forced, 0.0), initial=0.0))
                    - 1e-9, 0.0)
        val, k = self._best_lines(al)

        def below(mu: float) -> bool:
            g = _gauss(al, mu)
            if not np.all(g <= val):
                return False
            # interval [a_i, a_{i+1}]: the line best at a_i, else the one best at a_{i+1}
            left = self._line(k[:-1], al[1:]) >= g[1:]
            right = self._line(k[1:], al[:-1]) >= g[:-1]
            return bool(np.all(left | right))

        lo, hi = mu_lo, max(2 * mu_lo, 1.0)
        while not below(hi):
            if hi > GDP_MU_MAX:
                return mu_lo, math.inf
            lo, hi = hi, 2 * hi
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            lo, hi = (lo, mid) if below(mid) else (mid, hi)
            if hi - lo <= 1e-7 * hi:
                break
        check_bracket(mu_lo, hi, "the GDP mu", "risk")
        return mu_lo, hi

    def _line(self, k: np.ndarray, alpha: np.ndarray) -> np.ndarray:
        """Value, less the rounding allowance, of lower-curve line ``k`` at ``alpha``: index
        ``k < n`` the line ``1 - U_k - e^{z_k} alpha``, ``k >= n`` the mirrored line of
        sample ``k - n``."""
        n = self.eps.size
        i = k % n
        a, z = 1.0 - self.upper[i], self.eps[i]
        with np.errstate(over="ignore", invalid="ignore"):
            direct = a - np.exp(np.minimum(z + np.log(np.maximum(alpha, 1e-300)), 700.0))
            mirror = np.exp(-z) * (a - alpha)
        return np.where(k >= n, mirror, direct) - ROUND

    def _best_lines(self, alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(value, index)`` of the largest lower-curve line at each ``alpha`` (indices as
        in :meth:`_line`)."""
        n = self.eps.size
        ks = np.arange(2 * n if self.symmetric else n)
        val = np.empty(alpha.size)
        idx = np.empty(alpha.size, dtype=int)
        step = max(1, CHUNK // ks.size)
        for s in range(0, alpha.size, step):
            al = alpha[s:s + step]
            m = self._line(ks[None, :], al[:, None])
            idx[s:s + step] = np.argmax(m, axis=1)
            val[s:s + step] = np.max(m, axis=1)
        return val, idx

    def _kinks(self, alpha_min: float) -> np.ndarray:
        """Points of ``[alpha_min, 1 - alpha_min]``: where consecutive lines of the lower
        curve meet (``alpha_k = (U_{k-1} - U_k) / (e^{z_k} - e^{z_{k-1}})`` and, for the
        relation, the mirrors ``1 - U_k - e^{z_k} alpha_k``), a log-spaced sweep from each
        end, and the ends."""
        z, u = self.eps, self.upper
        sweep = np.geomspace(alpha_min, 0.5, 300)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            ez = np.exp(np.minimum(z, 700.0))
            ak = (u[:-1] - u[1:]) / (ez[1:] - ez[:-1])
            pts = [ak, sweep, 1 - sweep, np.array([alpha_min, 1 - alpha_min])]
            if self.symmetric:
                pts.append(1 - u[1:] - ez[1:] * ak)
        al = np.concatenate(pts)
        al = al[np.isfinite(al) & (al >= alpha_min) & (al <= 1.0 - alpha_min)]
        return np.unique(al)


def _gauss(alpha: np.ndarray, mu: float) -> np.ndarray:
    """``G_mu(alpha) = Phi(Phi^-1(1 - alpha) - mu)`` (Dong, Roth & Su, eq. (2.4)), from
    scipy's ``ndtr`` / ``ndtri`` (Cephes)."""
    return ndtr(ndtri(1 - alpha) - mu)


def profile_samples(ys: np.ndarray, up: np.ndarray, lo: np.ndarray, *, eta: float,
                    step: float) -> np.ndarray:
    """Indices of the samples kept of a profile known at the points ``ys`` (bounds ``up``,
    ``lo``): the first of every run over which neither bound changes by a multiple of
    ``eta``, ``log(up)`` by a multiple of 0.05 (relative precision where delta is small) and
    ``ys`` by a multiple of ``step``; and the last. Any subset keeps both bounds certified
    (module docstring); this one keeps the curve within about ``2 eta`` of the full one."""
    with np.errstate(divide="ignore"):
        keys = [np.floor(up / eta), np.floor(lo / eta), np.floor(ys / step),
                np.floor(np.log(np.maximum(up, 1e-300)) / 0.05)]
    change = np.zeros(ys.size, dtype=bool)
    change[0] = change[-1] = True
    for k in keys:
        change[1:] |= k[1:] != k[:-1]
    return np.flatnonzero(change)
