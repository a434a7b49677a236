"""The vectorized search for each example's eps from its bucket counts in the Fourier domain
(:class:`Evaluator`, Plancherel; Koskela, Tobaben, Honkela 2023, App. D, Lemma 1), on the
transforms of one direction (:class:`~tightdp.individual.plancherel.Direction`): the composed
law's coefficients summed by Horner's scheme or directly on the unit roots. The steps and why
each number is a bound are in the docstring of :mod:`tightdp.individual.pld_individual`."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import cast

import numpy as np

from .plancherel import Direction, row_products

__all__ = ["Evaluator", "horner", "staircase", "unit_roots", "HORNER_MAX"]

#: frequency count up to which :func:`horner` runs Horner's scheme (a direct sum beyond)
HORNER_MAX = 4096


def _horner1(qt: np.ndarray, m: np.ndarray, K: int,
             first: np.ndarray | None = None) -> np.ndarray:
    """``Re sum_{k>=1} q_k e^{2 pi i k m / K}`` for one coefficient set ``qt`` (kk, n)."""
    return horner(qt[:, None, :], m, K, first)[0]


def staircase(kk_rows: np.ndarray | None, kk: int) -> np.ndarray | None:
    """For examples sorted by their number of frequencies ``kk_rows`` (non-decreasing):
    per frequency ``k < kk`` the first example that keeps it (those before it have
    ``kk_rows <= k``: their coefficients there are zeros). None when ``kk_rows`` is None or
    not sorted (every example then runs over every frequency)."""
    if kk_rows is None:
        return None
    kr = np.asarray(kk_rows)
    if kr.size > 1 and np.any(kr[1:] < kr[:-1]):
        return None
    return np.searchsorted(kr, np.arange(kk), side="right")


#: window sizes up to which :func:`unit_roots` reads a table of all K roots
_ROOT_TABLE_MAX = 1 << 18


@functools.lru_cache(maxsize=8)
def _root_table(K: int) -> np.ndarray:
    """``e^{i theta_j}``, ``theta_j = 2 pi j / K`` for ``j < K`` (read-only; cached: the
    evaluators of a direction share it; eight windows: the upper and lower transforms of
    four grid levels, which a block's evaluate pass goes through in turn -- with fewer, every
    block would build the tables of its levels again, at most 4 MB each)."""
    t = np.exp(1j * (2.0 * np.pi * np.arange(K) / K))
    t.flags.writeable = False
    return t


def unit_roots(m: np.ndarray, K: int) -> np.ndarray:
    """``z^m = e^{2 pi i (m mod K) / K}``, computed elementwise as ``exp(1j * theta)`` with
    ``theta = 2 pi (m mod K) / K`` (the same operations whether read from the table of the
    K roots or computed for ``m`` alone)."""
    j = m % K
    if K <= _ROOT_TABLE_MAX:
        return _root_table(K)[j]
    return np.exp(1j * (2.0 * np.pi * j / K))


def horner(qt: np.ndarray, m: np.ndarray, K: int,
           first: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """``Re sum_{k>=1} q_k e^{2 pi i k m / K}`` for the two coefficient sets of ``qt``
    (shape ``(kk, 2, n)``: frequency, set, example), by Horner's scheme (or a direct sum for
    many frequencies).

    ``first`` (from :func:`staircase`): the coefficients ``q_k`` of the examples before
    ``first[k]`` are zeros, and Horner's scheme skips them: an example's accumulator is
    zero until its first nonzero coefficient (multiplying or adding zeros can change only
    the sign of a zero, and adding a nonzero number to a zero of either sign gives that
    number), so its sum is the same but for the sign of a zero sum."""
    kk = qt.shape[0]
    n = m.size
    if kk <= 1:
        z = np.zeros(n)
        return z, z
    if kk <= HORNER_MAX:
        w = unit_roots(m, K)
        acc: np.ndarray = np.zeros(qt.shape[1:], dtype=complex)
        starts = [0] * kk if first is None else first.tolist()
        for k in range(kk - 1, 0, -1):
            a = starts[k]
            if a:
                part = acc[:, a:]
                part *= w[a:]
                part += qt[k, :, a:]
            else:
                acc *= w
                acc += qt[k]
        acc *= w
        return acc[0].real, (acc[1].real if acc.shape[0] > 1 else None)
    theta = 2.0 * np.pi * (m % K) / K
    ks = np.arange(1, kk)
    h = np.empty((qt.shape[1], n))
    step = max(1, 1_000_000 // kk)
    for s in range(0, n, step):
        e = np.exp(1j * np.outer(ks, theta[s:s + step]))  # (kk-1, b)
        # summed in the order of k (a reduction over the leading axis adds whole rows in
        # turn): an example's value does not depend on the other examples of the chunk, nor
        # on zero coefficients past its own cut-off
        h[:, s:s + step] = (e[:, None, :] * qt[1:, :, s:s + step]).sum(axis=0).real
    return h[0], (h[1] if h.shape[0] > 1 else None)


def _every(rows, n: int) -> bool:
    """Does ``rows`` (None, a boolean mask or sorted distinct indices of ``n`` examples)
    select every example? Then the arrays are used as they are, not copied (the same
    values)."""
    if rows is None:
        return True
    rows = np.asarray(rows)
    return bool(rows.all()) if rows.dtype == bool else rows.size == n


class Evaluator:
    """Certified delta bounds of one chunk of examples (one direction) by Plancherel."""

    def __init__(self, dr: Direction, counts: np.ndarray, kk: int, tau: np.ndarray,
                 extra: np.ndarray, kk_rows: np.ndarray | None = None,
                 shift: np.ndarray | None = None):
        self.dr, self.K, self.d = dr, dr.K, dr.d
        # the products with the counts as (example, frequency) matrices (a row's values do
        # not depend on the other rows: BLAS sums each over the buckets alike), then the
        # (frequency, example) layout the Horner sums below run over
        log_abs, phase = dr.spectra(kk)
        lr = row_products(counts, np.concatenate([log_abs, phase], axis=1))
        # log P_k as a C-contiguous (frequency, example) array: the complex exponential and
        # the products below then run over contiguous rows (the values are those of
        # exp(log|P| + i arg P) taken elementwise, whatever the layout); the window rotation
        # is added to the phases on the way
        n = lr.shape[0]
        P = np.empty((kk, n), dtype=complex)
        P.real = lr[:, :kk].T
        np.add(lr[:, kk:].T, dr.win_phase[:kk, None], out=P.imag)
        del lr
        # each example keeps its own frequencies k < kk_rows[i] (its cut-off; ``tau`` bounds
        # the rest), whatever the other examples evaluated with it: zeros past it. Examples
        # sorted by cut-off (as :func:`pld_blocks._chunks` gives them) have those zeros at
        # the start of each row: only the rest goes through the exponential (the values
        # there are the same; the zeros are exact zeros instead of exp(-inf + i y), which
        # differ at most in their sign: see :func:`horner`)
        self.kr = None if kk_rows is None else np.asarray(kk_rows)
        self.first = first = staircase(self.kr, kk)
        if first is not None:
            for k in range(kk):
                a = int(first[k])
                P[k, :a] = 0.0
                np.exp(P[k, a:], out=P[k, a:])
        else:
            if kk_rows is not None:
                P[np.arange(kk)[:, None] >= cast(np.ndarray, self.kr)[None, :]] = -np.inf
            np.exp(P, out=P)  # (kk, n); exp(-inf) = 0
        om = dr.omega[:kk]
        self.p0 = P[0].real.copy()
        qt = np.empty((kk, 2, P.shape[1]), dtype=complex)
        np.multiply(P, (om * dr.g1[:kk])[:, None], out=qt[:, 0, :])
        np.multiply(P, (om * dr.g2[:kk])[:, None], out=qt[:, 1, :])
        self.qt = qt
        # (the real parts summed over k in order: the real part of the complex sum)
        c = np.add.reduce(qt[1:].real, axis=0)
        self.c1, self.c2 = c[0], c[1]
        # hinge coefficients g1 - e^{-d} g2 = conj((1 - e^{-d}) / ((1 - z)(1 - e^{-d} z))),
        # combined before summing (no cancellation between the two sums)
        P *= (om * dr.gh[:kk])[:, None]
        self.qh = P
        self.tau = tau
        self.extra = extra
        # grid shift of each example's composed law (given: from :meth:`Direction.prepare_piece`)
        self.s = row_products(counts, dr.shift) if shift is None else shift

    def y(self, m: np.ndarray) -> np.ndarray:
        return self.s + (self.dr.i_lo + m) * self.d

    def _first(self, rows=None) -> np.ndarray | None:
        """:func:`staircase` of the examples ``rows`` (None: all), for :func:`horner`."""
        if self.first is None or _every(rows, self.p0.size):
            return self.first
        return staircase(cast(np.ndarray, self.kr)[rows], self.first.size)

    def ab(self, m: np.ndarray, rows=None) -> tuple[np.ndarray, np.ndarray]:
        """``A(m) = sum_{j>=m} p_j`` and ``e^{y_m} B(m)`` with ``B(m) = sum_{j>=m} p_j e^{-y_j}``
        (window positions ``j``), from the truncated Plancherel sums (rows: optional mask)."""
        K, d = self.K, self.d
        if _every(rows, self.p0.size):
            qt, p0, c1, c2 = self.qt, self.p0, self.c1, self.c2
        else:
            qt, p0, c1, c2 = self.qt[:, :, rows], self.p0[rows], self.c1[rows], self.c2[rows]
        h1, h2 = horner(qt, m, K, self._first(rows))
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
        if _every(rows, self.p0.size):
            qh, p0, c1, c2 = self.qh, self.p0, self.c1, self.c2
        else:
            qh, p0, c1, c2 = self.qh[:, rows], self.p0[rows], self.c1[rows], self.c2[rows]
        h = _horner1(qh, m + 1, K, self._first(rows))
        n_above = K - m - 1
        w0 = n_above - math.exp(-d) * (-np.expm1(-n_above * d) / -math.expm1(-d))
        return (p0 * w0 + h - c1 + np.exp(-(K - m) * d) * c2) / K

    def delta_upper_at(self, m: np.ndarray, rows=None) -> np.ndarray:
        """Certified upper bound on delta(y_m) of the composition."""
        every = _every(rows, self.p0.size)
        tau = self.tau if every else self.tau[rows]
        extra = self.extra if every else self.extra[rows]
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

        rw = _Rows(self, np.arange(n))

        def above(mm: np.ndarray, rows: np.ndarray) -> np.ndarray:
            val = rw.hinge(mm, rows) - 2.0 * self.tau[rows] + credit[rows]
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
            a, eb = rw.ab(m1, rows)
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
        sub = _Rows(self, np.nonzero(todo)[0])
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
    """The rows ``mask`` (a boolean mask, or sorted indices) of an evaluator (avoids
    recomputing the transforms)."""

    def __init__(self, ev: Evaluator, rows: np.ndarray):
        self.dr, self.K, self.d = ev.dr, ev.K, ev.d
        mask: np.ndarray | slice = rows
        if rows.dtype == bool and rows.all():  # every row: the evaluator's own arrays
            mask = slice(None)
        self._ev, self._mask = ev, mask
        self.p0, self.qh = ev.p0[mask], ev.qh[:, mask]
        self.c1, self.c2 = ev.c1[mask], ev.c2[mask]
        self.tau, self.extra = ev.tau[mask], ev.extra[mask]
        self.s = ev.s[mask]
        self.kr = None if ev.kr is None else ev.kr[mask]
        self.first = None if ev.first is None else staircase(self.kr, ev.first.size)

    @functools.cached_property
    def qt(self) -> np.ndarray:
        """The rows' coefficients of :meth:`Evaluator.ab` (copied when first asked: the
        searches need only :attr:`qh` until their last step)."""
        return self._ev.qt[:, :, self._mask]

    y = Evaluator.y
    _first = Evaluator._first
    s: np.ndarray
    ab = Evaluator.ab
    hinge = Evaluator.hinge
    delta_upper_at = Evaluator.delta_upper_at


class _Rows:
    """The rows ``ix`` (sorted indices) of an evaluator, for a search that asks for fewer
    and fewer of them: each call evaluates the rows asked (a mask or indices into ``ix``,
    None: all) on a copy of a superset of them, the evaluator itself until the rows asked
    are fewer than half of it, then a copy of just those (:class:`_Subset`), and so on.
    Every value is computed per example (the other rows of the copy do not change it), so
    it is the value of the rows asked alone; rows not asked run at ``m = K - 1`` and are
    dropped."""

    def __init__(self, ev: Evaluator, ix: np.ndarray):
        self.ev, self.ix = ev, ix
        self.dr, self.K, self.d = ev.dr, ev.K, ev.d
        every = ix.size == ev.p0.size
        self.s = ev.s if every else ev.s[ix]
        self.tau = ev.tau if every else ev.tau[ix]
        self.extra = ev.extra if every else ev.extra[ix]
        self._cur: Evaluator | _Subset
        self._cur, self._cix = ev, (ix if every else np.arange(ev.p0.size))
        if 2 * ix.size < ev.p0.size:
            self._cur, self._cix = _Subset(ev, ix), ix

    y = cast("Callable[[_Rows, np.ndarray], np.ndarray]", Evaluator.y)

    def _plan(self, m: np.ndarray, rows) -> tuple:
        """The evaluator-like to run, the positions of the rows asked in it (None: all of
        it, in order) and the grid positions to run it at."""
        need = self.ix if rows is None else self.ix[rows]
        cix = self._cix
        if cix is self.ix:  # the copy holds all the rows: their positions are the rows
            pos = np.arange(need.size) if rows is None else (
                np.nonzero(rows)[0] if np.asarray(rows).dtype == bool else np.asarray(rows))
            inside = True
        else:
            pos = np.searchsorted(cix, need)
            inside = need.size == 0 or (pos[-1] < cix.size and np.array_equal(cix[pos], need))
        if not inside or 2 * need.size < cix.size:
            every = need.size == self.ev.p0.size
            self._cur = self.ev if every else _Subset(self.ev, need)
            self._cix = self.ix if need.size == self.ix.size else need
            return self._cur, None, m
        if need.size == cix.size:
            return self._cur, None, m
        mm = np.full(self._cix.size, self.K - 1, dtype=np.asarray(m).dtype)
        mm[pos] = m
        return self._cur, pos, mm

    def delta_upper_at(self, m: np.ndarray, rows=None) -> np.ndarray:
        cur, pos, mm = self._plan(m, rows)
        val = cur.delta_upper_at(mm)
        return val if pos is None else val[pos]

    def hinge(self, m: np.ndarray, rows=None) -> np.ndarray:
        cur, pos, mm = self._plan(m, rows)
        val = cur.hinge(mm)
        return val if pos is None else val[pos]

    def ab(self, m: np.ndarray, rows=None) -> tuple[np.ndarray, np.ndarray]:
        cur, pos, mm = self._plan(m, rows)
        a, eb = cur.ab(mm)
        return (a, eb) if pos is None else (a[pos], eb[pos])
