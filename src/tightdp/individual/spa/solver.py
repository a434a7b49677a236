"""The per-example saddle points on the interpolants (the package docstring, steps 2-4): the
examples of a bracket assigned to the pieces that resolve them, the accountant's safeguarded
Newton iteration in ``log t`` on each example's composed Chebyshev series, and the certified
refined-moments bound on exact composed values (Alghamdi et al. 2023, eqs. (43), (50), (60),
(61), (66))."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..._numerics import newton_bracketed, secant_start
from ...curves.saddle import log_theta_max, saddle_eps, saddle_log_delta
from .chebyshev import cheb_derivative, cheb_eval
from .products import SUB_CHUNK, consecutive_runs, counts_product, groups_of, take_cols
from .saddle_function import g_msd, g_slope, g_spa, halley_slope
from .tables import DEGREE, Piece, Table

__all__ = ["Solver", "MAX_DEPTH", "NEWTON_RTOL", "FINAL_STEP", "K_MARGIN"]

#: at most this many halvings of a bracketing interval
MAX_DEPTH = 14
#: (-1)^k, the Chebyshev polynomials at -1
_ALTERNATING = (-1.0) ** np.arange(DEGREE + 1)
#: the accountant's convergence tolerance on g (curves.saddle.solve_tilt)
NEWTON_RTOL = 1e-11
#: largest final Newton step (in log t) that eps is extrapolated over, to first order, from
#: the last evaluation (beyond it the interpolant is evaluated at the final iterate)
FINAL_STEP = 1e-6
#: relative allowance for the quadrature of the CGF in the certified bound (the accountant
#: uses 1e-11 per composed step, absolute; here 1e-11 (T_i + K_i(t)), never smaller)
K_MARGIN = 1e-11
#: numpy's warnings silenced where the formulas meet t = 0, infinite or NaN rows (the results
#: are checked for finiteness where they matter)
_QUIET: dict[str, Any] = {"divide": "ignore", "invalid": "ignore", "over": "ignore"}


def _rows_at(u: np.ndarray, cf: np.ndarray, a: np.ndarray,
             scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The composed rows of the series ``cf`` (rows, degree, examples) at ``t = e^u``, each
    example on its interval ``[a, a + 2 / scale]``, and ``t``."""
    t = np.exp(u)
    return cheb_eval(cf, np.clip((t - a) * scale - 1.0, -1.0, 1.0)), t


def _compose(batch: list, cnt: np.ndarray, nrow: int) -> tuple[np.ndarray, ...]:
    """The composed Chebyshev coefficients ``(nrow, DEGREE + 1, n)`` (rows ``K .. K''''``; a
    sixth row, ``K^(5)``, is left to the caller), the exact composed rows at the ends of the
    intervals ``(5, 2, n)``, the ends ``a, b`` and the examples' rows, of the examples of
    ``batch`` (``(piece, cols, rows)``)."""
    n = sum(rows.size for _, _, rows in batch)
    p1 = DEGREE + 1
    coef = np.empty((nrow * p1, n))  # composed coefficients, (nrow, p+1, n) below
    ends = np.empty((10, n))  # exact composed rows at a and b, (5, 2, n) below
    a, b = np.empty(n), np.empty(n)
    off = 0
    for pc, cols, rows in batch:
        c, cc = cnt, cols
        if consecutive_runs(cols) is None:  # one copy of the columns for both products
            c, cc = np.take(cnt, cols, axis=1), np.arange(cols.size)
        sl = slice(off, off + rows.size)
        counts_product(pc.coef_t, c, cc, out=coef[:5 * p1, sl])
        counts_product(pc.ends, c, cc, out=ends[:, sl])
        a[sl], b[sl] = pc.a, pc.b
        off += rows.size
    rows = np.concatenate([r for _, _, r in batch])
    return coef.reshape(nrow, p1, n), ends.reshape(5, 2, n), a, b, rows


class _Iteration:
    """``g`` and its slope in ``u = log t`` of the examples being iterated (for
    :func:`tightdp._numerics.newton_bracketed`), each on its composed series; keeps the
    numbers of each example's last evaluation: ``u``, eps (eq. (50)), ``t``, ``K''``, the
    fallback flag and the size of the SP-MSD1 terms."""

    def __init__(self, coef: np.ndarray, a: np.ndarray, scale: np.ndarray, ua: np.ndarray,
                 method: str, target: float):
        n = a.size
        self.method, self.target = method, target
        self.exact = method != "clt"
        # rows evaluated (a superset of the active ones) with their coefficients and intervals
        self.cur, self.cf, self.a, self.s = np.arange(n), coef, a, scale
        self.u_eval = ua.copy()
        self.u, self.eps, self.t, self.k2, self.size = (np.full(n, np.nan) for _ in range(5))
        self.fb = np.zeros(n, dtype=bool)

    def __call__(self, uu: np.ndarray, act: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        cur = self.cur
        if 2 * act.size < cur.size:  # compact (copying coefficients costs an evaluation)
            keep = np.searchsorted(cur, act)
            self.cf = self.cf[:, :, keep]
            self.a, self.s = self.a[keep], self.s[keep]
            self.cur = cur = act
        pos = np.searchsorted(cur, act)
        self.u_eval[pos] = uu  # the other columns are evaluated and discarded
        ks, t = _rows_at(self.u_eval[:cur.size], self.cf, self.a, self.s)
        if cur.size != act.size:
            ks, t = ks[:, pos], t[pos]
        with np.errstate(**_QUIET):
            if self.exact:  # the exact derivative of g: Newton converges quadratically
                g, eps, fb, size, d1, d2 = g_msd(ks, t, self.method)
                dg = halley_slope(d1, d2, g - self.target)
            else:
                ld, eps, fb, size = saddle_log_delta(ks, t, None, self.method)
                g = -ld
                # SP-CLT: the accountant's slope t^2 phi2 (it ignores the derivative of
                # the Gaussian term), then secant slopes, which converge superlinearly
                # to the same root of the bracket
                dg = t * t * (ks[2] + 1.0 / t ** 2 + 1.0 / (1.0 + t) ** 2)
        self.u[act], self.eps[act], self.t[act] = uu, eps, t
        self.k2[act], self.fb[act], self.size[act] = ks[2], fb, size
        return g, dg


def _start(ends: np.ndarray, coef: np.ndarray, a: np.ndarray, b: np.ndarray, target: float,
           method: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``log`` of the bracket ends and the first iterate: for SP-MSD0/1 a Halley step off the
    end of the bracket where ``g`` is nearer the target (its rows there are exact, ``K^(5)``
    interpolated) where it lands inside, else (and for SP-CLT, as the accountant) the secant
    point."""
    te = np.stack([a, b])
    with np.errstate(**_QUIET):
        # g_spa's numbers, with the fallback flags of the same evaluation
        ld, _, fb, _ = saddle_log_delta(ends, te, None, method)
    ga, gb = np.where(np.isfinite(ld), -ld, -np.inf)
    ua, ub = np.log(a), np.log(b)
    u0 = secant_start(ua, ub, ga, gb, target)
    if method != "clt":  # K^(5) at the ends from its interpolant (T_k(1) = 1, T_k(-1) = (-1)^k)
        p1 = coef.shape[1]
        k5 = np.stack([(coef[5] * _ALTERNATING[:p1, None]).sum(axis=0),
                       coef[5].sum(axis=0)])
        with np.errstate(**_QUIET):
            d1, d2 = g_slope(np.concatenate([ends, k5[None]]), te, method, fb)
            r = np.stack([ga, gb]) - target
            uh = np.stack([ua, ub]) - r / halley_slope(d1, d2, r)
            pick = np.argmin(np.abs(r), axis=0)
            uh = np.where(pick == 0, uh[0], uh[1])
            inside = np.isfinite(uh) & (uh > ua) & (uh < ub)
        u0 = np.where(inside, uh, u0)
    return ua, ub, u0


def _final_eps(u: np.ndarray, it: _Iteration, coef: np.ndarray, a: np.ndarray,
               scale: np.ndarray, method: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """eps, the fallback flags and the size of the SP-MSD1 terms at the final iterates ``u``.
    The final iterate is the last evaluated one or a converged Newton step (|du| below the
    tolerances) from it: eps(u) = eps(u_last) + du t phi2, with d eps / d log t = t (K'' +
    1/t^2 + 1/(1+t)^2) (eq. (50)); the neglected second-order term, ~du^2, is far below the
    solver's tolerance. Where the step is not small (an iteration that ran out of steps) the
    interpolant is evaluated there."""
    du = u - it.u
    tl = it.t
    with np.errstate(**_QUIET):
        eps = it.eps + du * tl * (it.k2 + 1.0 / tl ** 2 + 1.0 / (1.0 + tl) ** 2)
    eps = np.where(du == 0.0, it.eps, eps)
    fb, size = it.fb, it.size
    far = np.nonzero(~(np.abs(du) <= FINAL_STEP) | ~np.isfinite(eps))[0]
    if far.size:
        ks, t = _rows_at(u[far], coef[:5, :, far], a[far], scale[far])
        with np.errstate(**_QUIET):
            _, _, fb[far], size[far] = saddle_log_delta(ks, t, None, method)
        eps[far] = saddle_eps(ks, t)
    return eps, fb, size


class Solver:
    """The per-example saddle-point solution of one method (the package docstring, steps
    2-4): small and picklable, shipped with the tables to the workers."""

    def __init__(self, method: str):
        self.method = method

    def solve(self, tab: Table, pc: Piece, cnt: np.ndarray, cols: np.ndarray,
              rows: np.ndarray, target: float, *, out: dict, leaves: list,
              depth: int = 0) -> None:
        """Assign the examples ``rows`` of ``out`` (counts: the columns ``cols`` of ``cnt``,
        buckets x examples) whose root is bracketed by ``pc`` to the interpolants that resolve
        them: ``(piece, cols, rows)`` appended to ``leaves`` (solved together by
        :meth:`newton`); descends into halves of ``pc`` for the examples whose composed CGF is
        not resolved by the interpolants there (the package docstring, step 2)."""
        if not pc.all_ok:
            chk = counts_product(pc.check, cnt, cols)
            need = pc.unresolved(chk)
            if need.any() and depth < MAX_DEPTH:
                r, cl = take_cols(rows, need), take_cols(cols, need)
                comp = take_cols(chk[9:], need)  # exact composed rows at the midpoint (5, n)
                go_left = g_spa(comp, np.array(pc.m), self.method) >= target
                for side, sel in ((0, go_left), (1, ~go_left)):
                    if sel.any():
                        self.solve(tab, tab.child(pc, side), cnt, take_cols(cl, sel),
                                   take_cols(r, sel), target, out=out, leaves=leaves,
                                   depth=depth + 1)
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
        package docstring, step 3. The accountant's iteration (curves.saddle.solve_tilt):
        safeguarded Newton in log t in the bracket, stopped at the same tolerances; for
        SP-MSD0/1 with the exact slope and Halley's correction, from :func:`_start`; for
        SP-CLT as the accountant: from the secant point, secant slopes after the first step."""
        exact = self.method != "clt"  # then a sixth row, K^(5): exact Newton slopes
        coef, ends, a, b, rows = _compose(batch, cnt, 6 if exact else 5)
        scale = 2.0 / (b - a)
        if exact:  # K^(5): the derivative of the K'''' interpolant (the slope of g)
            coef[5] = cheb_derivative(coef[4], scale)
        ua, ub, u0 = _start(ends, coef, a, b, target, self.method)
        it = _Iteration(coef, a, scale, ua, self.method, target)
        u = newton_bracketed(it, target, ua.copy(), ub.copy(), u0, iters=60,
                             ftol=NEWTON_RTOL * (1.0 + abs(target)), secant=not exact)
        eps, fb, size = _final_eps(u, it, coef, a, scale, self.method)
        out["eps"][rows] = eps
        out["t"][rows] = np.exp(u)
        out["fallback"][rows] = fb
        out["size"][rows] = size

    def rma_below(self, tab: Table, cnt: np.ndarray, br: dict, log_delta: float,
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
            for rows in groups_of(lo[sl]):
                if np.isnan(lo[k + rows[0]]):
                    continue
                pc = tab.piece(lo[k + rows[0]], br["hi"][k + rows[0]])
                k0 = counts_product(pc.k_t[j:j + 1], cs, rows)[0]
                t = float(pc.t[j])
                lm = float(log_theta_max(pc.t[j:j + 1])[0])
                ak = np.abs(k0)
                marg = K_MARGIN * (st[rows] + ak)
                e = (k0 + marg + lm - log_delta) / t
                mag = (ak + marg + abs(lm) + abs(log_delta)) / t
                b = bound[k + rows]
                ok[k + rows] = (b >= 0.0) & (e + 1e-9 * (mag + np.abs(e)) <= b)
        return ok

    def rma(self, tab: Table, cnt: np.ndarray, br: dict, log_delta: float,
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
            for rows in groups_of(lo[sl]):
                pc = tab.piece(lo[k + rows[0]], hi[k + rows[0]])
                k0 = counts_product(pc.k_t, cs, rows)  # (p+1, rows)
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
