"""The log-MGF of a composition of discrete PLDs and its Chernoff bounds.

:class:`LogMgf` evaluates ``K(t) = sum_i k_i log E[e^{t Y_i}]`` (and ``K'``, ``K''``) exactly
from the atoms of the laws, and turns it into Chernoff bounds and quantiles: the window
planning of :func:`tightdp.pld.compose.compose`, and the pilot and tilts of the PLD
accountant.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import logsumexp

from .._numerics import BracketError, bisect, grow_until, lse_last, newton_scalar
from .grid import atom_cumulants

__all__ = ["LogMgf"]

#: the largest |t| the Chernoff searches try (beyond it the bound is the support's end)
_T_MAX = 1e9
#: laws with more atoms than this are searched on a coarsened copy (LogMgf.searcher)
_SEARCH_ATOMS = 1 << 14
#: from this many laws on, :meth:`LogMgf.cumulants` works on all laws' atoms at once
#: (:class:`_Stacked`) and :meth:`LogMgf.searcher` coarsens the laws to ``_SEARCH_TOTAL``
#: atoms in all (a composition of many distinct mechanisms: one law per mechanism)
MANY_PARTS = 16
#: the atoms of a many-law searcher in all
_SEARCH_TOTAL = 1 << 14
#: atoms per chunk of :class:`_Stacked` (its work arrays stay in cache)
_CHUNK_ATOMS = 1 << 15


class LogMgf:
    """``K(t) = sum_i k_i log E[e^{t Y_i}]`` of a composition of finite laws, with ``K'`` and
    ``K''``, evaluated exactly from the atoms; and the Chernoff bounds built from it:
    ``P(S >= a) <= exp(K(t) - t a)`` for every ``t >= 0`` (``P(S <= a)`` for ``t <= 0``).
    Any ``t`` gives a valid bound; Newton's method only makes it a good one."""

    def __init__(self, terms):
        self.parts = []
        lo = hi = 0.0
        for pld, k in terms:
            pos = pld.probs > 0
            if not pos.any():
                continue
            ys = pld.ys[pos]
            self.parts.append((ys, np.log(pld.probs[pos]), k))
            lo += k * float(ys[0])
            hi += k * float(ys[-1])
        self.lo, self.hi = lo, hi
        self._quantiles: dict = {}  # memo of quantile(), asked again for the same tails
        self._search: LogMgf | None = None  # the coarsened copy of searcher()
        self._stacked: _Stacked | None = None  # the laws' atoms side by side (many laws)
        self._at_zero: tuple[float, float, float] | None = None  # K, K', K'' at t = 0

    def __call__(self, t: float) -> tuple[float, float, float]:
        if t == 0.0 and self._at_zero is not None:  # asked by every search: remembered
            return self._at_zero
        kk, k1, k2 = self.cumulants(np.array([float(t)]))
        out = float(kk[0]), float(k1[0]), float(k2[0])
        if t == 0.0:
            self._at_zero = out
        return out

    def cumulants(self, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``K``, ``K'``, ``K''`` at every ``t`` of ``ts`` (``atom_cumulants`` of each law)."""
        ts = np.atleast_1d(np.asarray(ts, dtype=float))
        if len(self.parts) >= MANY_PARTS:
            if self._stacked is None:
                self._stacked = _Stacked(self.parts)
            return self._stacked.cumulants(ts)
        kk, k1, k2 = (np.zeros(ts.size) for _ in range(3))
        for ys, lp, k in self.parts:
            a, b, c = atom_cumulants(ys, lp, ts)
            kk += k * a
            k1 += k * b
            k2 += k * c
        return kk, k1, k2

    def solve_slope(self, target: float) -> float:
        """The ``t >= 0`` with ``K'(t) = target`` (0 if ``K'(0) >= target``; the end of the
        search if the law cannot reach it): safeguarded Newton, ``K'`` being increasing."""
        _, k1, k2 = self(0.0)
        if k1 >= target or not self.parts or target >= self.hi:
            return 0.0 if k1 >= target or not self.parts else 1e4
        # a bracket [lo, hi] first (K' is increasing; powers of 4 up to 1e6), then Newton kept
        # inside it: a Newton step from a nearly degenerate law (K'' ~ 0 at t = 0, e.g. a tiny
        # sampling rate) overshoots by orders of magnitude, and the search once stopped at its
        # cap there
        try:
            hi = grow_until(lambda x: self(x)[1] < target, 1.0, 4.0, limit=1e6,
                            what="the tilt")
        except BracketError:
            return 1e6
        lo = 0.0 if hi == 1.0 else hi / 4.0

        def slope(t: float) -> tuple[float, float]:
            _, k1, k2 = self(t)
            return k1 - target, k2

        return newton_scalar(slope, 0.5 * (lo + hi), lo, hi, iters=101, rtol=1e-10, floor=1.0,
                             width_rtol=1e-12)[0]

    def tilt_to_mean(self, target: float) -> float:
        """The tilt ``lam >= 0`` whose tilted composed law has mean ``K'(lam) = target``, by
        doubling up to ``2^24`` and 30 bisection steps (``K'`` increases with ``lam``); 0 if
        ``K'(0) >= target``, close to ``2^24`` if the law cannot reach it. The tilt of the
        PRV accountant's compositions (which rounds it to a quarter power of two, so the
        coarse tolerance is enough); :meth:`solve_slope` is the precise search of the PLD
        accountant."""
        if self(0.0)[1] >= target:
            return 0.0
        hi = grow_until(lambda x: x < 2.0 ** 24 and self(x)[1] < target, 1.0, 2.0)
        lo = 0.0 if hi == 1.0 else hi / 2.0
        return bisect(lambda m: self(m)[1] < target, lo, hi, keep="lo", xtol=0.0, iters=30)

    def log_bound(self, a: float, sign: int) -> float:
        """log of a Chernoff bound on ``P(S >= a)`` (sign +1) or ``P(S <= a)`` (sign -1):
        ``min K(t) - t a`` over ``sign * t >= 0`` by safeguarded Newton (``K`` is convex)."""
        if (sign > 0 and a > self.hi) or (sign < 0 and a < self.lo):
            return -math.inf
        k0, k1, k2 = self(0.0)
        best = min(k0, 0.0)
        if sign * (a - k1) <= 0:
            return best
        t = (a - k1) / k2 if k2 > 0 else sign * 1.0

        def gap(u: float) -> tuple[float, float]:
            # in u = |t| = sign t: sign (K'(t) - a), increasing; records the smallest bound
            nonlocal best
            kk, k1, k2 = self(sign * u)
            best = min(best, kk - sign * u * a)
            return sign * (k1 - a), k2

        newton_scalar(gap, sign * t, 0.0, iters=40, rtol=1e-6, x_max=_T_MAX)
        return best

    def quantile(self, log_mass: float, sign: int) -> tuple[float, float, float]:
        """A point ``a`` with ``log_bound(a, sign) <= log_mass``: ``a = (K(t) - log_mass) / t``
        for the ``t`` that makes it smallest (largest for sign -1), found by Newton's method on
        ``t K'(t) - K(t) + log_mass`` (increasing in ``|t|``). Returns ``(a, t, K(t))``; the
        same ``t`` bounds the tail beyond any other point ``b`` by ``K(t) - t b``. ``t = 0``
        means the whole law is within the bound (or ``a`` is the end of its support).
        Remembered per ``(log_mass, sign)``."""
        key = (log_mass, sign)
        if key not in self._quantiles:
            self._quantiles[key] = self._quantile(log_mass, sign)
        return self._quantiles[key]

    def searcher(self) -> LogMgf:
        """This log-MGF, or, when a law has more than ``_SEARCH_ATOMS`` atoms (from
        ``MANY_PARTS`` laws on: more than ``_SEARCH_TOTAL`` over their number, at least 64),
        a copy whose laws are coarsened to at most that many (consecutive atoms merged: their masses
        added, at their mean position): cheap to evaluate, and within ``|t|`` times the
        merged span of ``K(t)``. Only the searches for a good ``t`` use it; the bounds are
        always evaluated exactly at the ``t`` found."""
        if self._search is None:
            many = len(self.parts) >= MANY_PARTS
            # many laws: at most _SEARCH_TOTAL atoms in all (at least 64 per law)
            cap = max(_SEARCH_TOTAL // len(self.parts), 64) if many else _SEARCH_ATOMS
            if all(ys.size <= cap for ys, _, _ in self.parts):
                self._search = self
            else:
                coarse = LogMgf([])
                coarse.parts = _coarsened(self.parts, cap, many=many)
                coarse.lo, coarse.hi = self.lo, self.hi
                self._search = coarse
        return self._search

    def _quantile(self, log_mass: float, sign: int) -> tuple[float, float, float]:
        end = self.hi if sign > 0 else self.lo
        k0, k1, k2 = self(0.0)
        if k0 <= log_mass:
            return k1, 0.0, k0
        L = k0 - log_mass  # > 0
        t = sign * math.sqrt(2.0 * L / k2) if k2 > 0 else sign * 1.0
        best = (end, 0.0, k0)
        search = self.searcher()

        def slope(u: float) -> tuple[float, float]:
            # in u = |t| = sign t: h = t K'(t) - K(t) + log_mass (increasing in u; the
            # derivative of a(t) has the sign of h / t); records the best point a
            nonlocal best
            t = sign * u
            kk, k1, k2 = search(t)
            a = (kk - log_mass) / t
            if sign * (a - best[0]) < 0:
                best = (a, t, kk)
            return t * k1 - kk + log_mass, sign * (t * k2)

        newton_scalar(slope, sign * t, 0.0, iters=40, rtol=1e-3, x_max=_T_MAX)
        if search is not self and best[1] != 0.0:  # the point from the exact K at that t
            kk = self(best[1])[0]
            best = ((kk - log_mass) / best[1], best[1], kk)
        if sign * (best[0] - end) >= 0:
            return end, 0.0, k0
        return best

    @staticmethod
    def bound_with(q: tuple[float, float, float], b: float, sign: int, end: float) -> float:
        """log bound on the mass beyond ``b`` from a :meth:`quantile` result (``-inf`` past
        the end of the support)."""
        a, t, kk = q
        if sign * (b - end) > 0:
            return -math.inf
        if t == 0.0:
            return min(kk, 0.0)
        return min(kk - t * b, kk, 0.0)


def _coarsened(parts: list, cap: int, *, many: bool) -> list:
    """The laws ``parts`` of :meth:`LogMgf.searcher`, each with more than ``cap`` atoms
    coarsened to at most ``cap``: groups of ``g`` consecutive atoms (the last padded with
    the top atom at mass 0) merged into one with their summed mass, at their mean position
    (a few laws, groups of a few atoms), or with ``many`` laws at their mass-weighted mean:
    then a group spans many atoms (a law's bulk often lies in its lowest few), and the plain
    mean would move each law's mean by up to half a group's span, the composition's by the
    number of laws times that (the saddle point and the tilts found on it went far astray);
    the weighted mean keeps every law's mean, and ``K(t)`` within about ``t^2`` times half
    the groups' variances. Laws of one group size are merged together (row by row, the same
    operations on each law's rows as alone; the sum by :func:`lse_last`, without scipy's
    per-call overhead)."""
    out = list(parts)
    by_size: dict = {}
    for i, (ys, _, _) in enumerate(parts):
        if ys.size > cap:
            by_size.setdefault(-(-ys.size // cap), []).append(i)
    for g, idx in by_size.items():
        rows_y, rows_l = [], []
        for i in idx:
            ys, lp, _ = parts[i]
            pad = (-ys.size) % g
            rows_y.append(np.concatenate([ys, np.full(pad, ys[-1])]).reshape(-1, g))
            rows_l.append(np.concatenate([lp, np.full(pad, -np.inf)]).reshape(-1, g))
        if not many:
            for i, y2, l2 in zip(idx, rows_y, rows_l, strict=True):
                out[i] = (y2.mean(axis=1), logsumexp(l2, axis=1), parts[i][2])
            continue
        ends = np.cumsum([y2.shape[0] for y2 in rows_y])[:-1]
        y2, l2 = np.concatenate(rows_y), np.concatenate(rows_l)
        w = np.exp(l2 - np.max(l2, axis=1, keepdims=True))  # each group's largest atom: 1
        means = np.split((w * y2).sum(axis=1) / w.sum(axis=1), ends)
        sums = np.split(lse_last(l2), ends)
        for i, m, lw in zip(idx, means, sums, strict=True):
            out[i] = (m, lw, parts[i][2])
    return out


class _Stacked:
    """The atoms of many laws side by side, in chunks of about ``_CHUNK_ATOMS``, for
    :meth:`LogMgf.cumulants`: per chunk and tilt one pass over its atoms computes every law's
    ``K_i``, ``K_i'`` and ``K_i''`` as :func:`~tightdp.pld.grid.atom_cumulants` does (each
    law's exponents shifted by their own maximum; segment sums by ``reduceat``), instead of
    a few numpy calls per law."""

    def __init__(self, parts: list):
        self.chunks = []
        i = 0
        while i < len(parts):
            j, size = i, 0
            while j < len(parts) and (j == i or size + parts[j][0].size <= _CHUNK_ATOMS):
                size += parts[j][0].size
                j += 1
            sizes = np.array([p[0].size for p in parts[i:j]])
            starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
            self.chunks.append((np.concatenate([p[0] for p in parts[i:j]]),
                                np.concatenate([p[1] for p in parts[i:j]]), sizes, starts,
                                np.array([float(p[2]) for p in parts[i:j]])))
            i = j

    def cumulants(self, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``K``, ``K'``, ``K''`` of the composition at every ``t`` of ``ts`` (1-d)."""
        kk, k1, k2 = (np.zeros(ts.size) for _ in range(3))
        for r in range(ts.size):
            t = ts[r]
            for ys, lp, sizes, starts, ks in self.chunks:
                with np.errstate(over="ignore", invalid="ignore", under="ignore"):
                    z = lp + t * ys
                    m = np.maximum.reduceat(z, starts)
                    z -= np.repeat(m, sizes)
                    np.exp(z, out=z)
                    s = np.add.reduceat(z, starts)
                    mu = np.add.reduceat(z * ys, starts) / s
                    dev = ys - np.repeat(mu, sizes)
                    var = np.add.reduceat(z * dev * dev, starts) / s
                kk[r] += float((ks * (m + np.log(s))).sum())
                k1[r] += float((ks * mu).sum())
                k2[r] += float((ks * var).sum())
        return kk, k1, k2
