"""Roots of increasing functions on a sequence of grids, solved in ``u = log x``: bracketed on
the grids (each scanned lazily, piece by piece, only while some target is unbracketed), then
safeguarded Newton steps in ``log x`` from the root of the cubic Hermite interpolant of the
bracketing cell (:func:`tightdp.roots.hermite_start`).

* :func:`bracket_on_grids` -- the bracketing alone: a target's bracket is the first grid
  cell whose right end reaches it;
* :func:`solve_on_grids` -- many targets (arrays, :func:`tightdp.roots.newton_bracketed`);
* :func:`solve_few` -- a few targets (at most 8, e.g. one query): each bracketing cell
  narrowed on a fixed sub-grid first, the Newton iteration in Python floats, stopping at an
  evaluated point; the first grid's values may be kept between solves (``memo``).

Several functions may be solved together (``which``): target ``j`` solves function
``which[j]``, and ``f(x, need)`` gets a boolean mask ``need`` of shape
``(functions, x.size)`` (the values wanted) and returns ``(g, dg)`` of that shape (entries
not wanted may be anything, e.g. NaN); each bracketing and Newton step calls ``f`` once for
all of them (the answers are those of separate solves).
"""

from __future__ import annotations

import functools
import math
from bisect import bisect_left
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from .newton import hermite_start, newton_bracketed

__all__ = ["Roots", "Brackets", "bracket_on_grids", "solve_on_grids", "solve_few"]


class Roots(NamedTuple):
    """The answer of a grid solve: the points ``x``, and ``ok`` False where no root was
    bracketed below the cap (``x`` is the cap there)."""

    x: np.ndarray
    ok: np.ndarray


class Brackets(NamedTuple):
    """The bracketing cells of :func:`bracket_on_grids`, one per target (NaN where none was
    found): the ends, the values of ``g`` and of its slope there, and ``below``, True where
    the target is reached at the first point of the grid below the first (the root lies
    below every grid)."""

    lo: np.ndarray
    hi: np.ndarray
    g_lo: np.ndarray
    g_hi: np.ndarray
    d_lo: np.ndarray
    d_hi: np.ndarray
    below: np.ndarray


def _whole(grid: np.ndarray) -> tuple[np.ndarray, ...]:
    """A grid as one piece."""
    return (grid,)


def bracket_on_grids(f: Callable, target: np.ndarray, grids: list[np.ndarray], *,
                     pieces: Callable = _whole, rows: np.ndarray | None = None,
                     first_only: bool = False, memo: dict | None = None) -> Brackets:
    """Bracket the roots of ``g(x) = target`` (``g`` roughly increasing; one ``target`` per
    element) on a sequence of increasing grids: ``grids[0]``, then, where it did not
    bracket, ``grids[1]`` if that one lies below the first (the targets reached there at
    its first point are ``below``), then the grids above. A target's bracket is the first
    cell ``[grid[j-1], grid[j]]`` with ``g(grid[j]) >= target`` (non-finite ``g`` counts as
    below every target). ``f(x) -> (g, dg, ...)`` (``f(x, need)`` with ``rows``, target
    ``j`` reading row ``rows[j]``), called on the pieces of a grid (``pieces(grid)``, in
    increasing order) while some target is unbracketed.

    ``first_only``: only ``grids[0]``, and the grid below it for the targets reached at its
    first point. ``memo`` (a dict the caller keeps for one ``f``): the first grid's values
    are kept row by row as far as they were scanned, with their running maxima; a later call
    finds a target's first grid point at or above it by bisection on those (the same
    bracket as the scan) and scans on only where no point reaches it yet."""
    n = target.size
    out = tuple(np.full(n, np.nan) for _ in range(6))
    below = np.zeros(n, dtype=bool)
    if memo is not None:
        at0 = _scan_table(f, target, grids[0], out, rows, memo, pieces=pieces)
    else:
        at0 = _scan_grid(f, target, np.arange(n), grids[0], out, rows, pieces)
    # the grid below the first for the targets it did not bracket (with first_only: those
    # reached at its first point); the grids above only for the targets still unbracketed
    # that do not lie below every grid
    todo = at0 if first_only else np.flatnonzero(np.isnan(out[0]))
    ups = [] if first_only else grids[1:]
    if todo.size and len(grids) > 1 and grids[1][-1] <= grids[0][0]:
        below[_scan_grid(f, target, todo, grids[1], out, rows, pieces)] = True
        ups = grids[2:]
    for grid in ups:
        todo = np.flatnonzero(np.isnan(out[0]) & ~below)
        if not todo.size:
            break
        _scan_grid(f, target, todo, grid, out, rows, pieces)
    lo, hi, g_lo, g_hi, d_lo, d_hi = out
    return Brackets(lo, hi, g_lo, g_hi, d_lo, d_hi, below)


def solve_on_grids(f: Callable, target, grids: list[np.ndarray], *, floor: float,
                   cap: float, pieces: Callable = _whole, which: np.ndarray | None = None,
                   secant: np.ndarray | None = None, iters: int = 60,
                   rtol: float = 1e-11) -> Roots:
    """Solve ``g(x) = target`` for ``x > 0``, ``g`` (roughly) increasing, vectorized over
    ``target``: bracketed by :func:`bracket_on_grids`, then safeguarded Newton in ``log x``
    (:func:`tightdp.roots.newton_bracketed`) from the Hermite point of the bracket
    (:func:`tightdp.roots.hermite_start`), stopped when the residual is below
    ``rtol (1 + |target|)`` or the step is at the level of rounding.

    ``f(x) -> (g, dg/dlog x)`` (``f(x, need)`` with ``which``: see the module). Returns
    :class:`Roots`; ``ok`` is False where no root was bracketed below ``cap`` (``x = cap``
    there); where ``g`` is at or above the target already at the bottom grid's first point,
    ``x = floor`` and ``ok`` is True. ``secant`` (one flag per target) marks targets whose
    ``dg`` is only approximate: from their second Newton step on, the secant slope through
    the previous step is used where it is positive (superlinear whatever the error of
    ``dg``).

    ``f`` may also return a third array, ``d^2 g / d(log x)^2`` (where it is exact): the
    Newton steps then use Halley's slope ``dg - r d2g / (2 dg)`` for the residual ``r``
    (Halley 1694; Traub, *Iterative Methods for the Solution of Equations*, 1964, Sec. 5.2),
    ``dg`` where that would more than quintuple the step: cubic convergence, and no
    overshoot on steep convex equations (a secant slope, where flagged, still takes
    precedence)."""
    target = np.atleast_1d(np.asarray(target, dtype=float))
    rows = None if which is None else np.asarray(which, dtype=np.int64).reshape(target.size)
    br = bracket_on_grids(f, target, grids, pieces=pieces, rows=rows)
    found = ~np.isnan(br.lo)
    # one target (the common query) uses the math module's log/exp, numpy's vectorized ones
    # otherwise: the two may differ in the last bit, and each path keeps its own numbers
    log, exp = (_log1, _exp1) if target.size == 1 else (np.log, np.exp)
    u = np.where(br.below, math.log(floor), math.log(cap))
    idx = np.flatnonzero(found)
    if idx.size:
        a, b = log(br.lo[idx]), log(br.hi[idx])
        u0 = hermite_start(a, b, br.g_lo[idx], br.g_hi[idx], br.d_lo[idx], br.d_hi[idx],
                           target[idx])
        sec = None if secant is None else np.asarray(secant, dtype=bool)[idx]
        fu = _log_objective(f, target, idx, rows, exp, sec)
        # the evaluation that would only confirm the tolerance is skipped where the last two
        # residuals predict it, on exact slopes (not for secant targets)
        u[idx] = newton_bracketed(fu, target[idx], a, b, u0, iters=iters,
                                  ftol=rtol * (1.0 + np.abs(target[idx])),
                                  predict=True if sec is None else ~sec)
    return Roots(exp(u), found | br.below)


def solve_few(f: Callable, target, grids: list[np.ndarray], *, floor: float, cap: float,
              refine: int, pieces: Callable = _whole, which: np.ndarray | None = None,
              secant: np.ndarray | None = None, memo: dict | None = None, iters: int = 60,
              rtol: float = 1e-11) -> Roots:
    """:func:`solve_on_grids` for a few targets (at most 8: an eps(delta) query), the same
    roots with fewer evaluations: only ``grids[0]`` (which should go on to the cap) and the
    grid below it for the targets reached at its first point are scanned (with ``memo``:
    :func:`bracket_on_grids`' kept table); each bracketing cell is narrowed on a fixed
    sub-grid of its ``refine`` inner geometric points (the same points for the same cell,
    read-only arrays, so that a caller may keep ``f``'s values there as it keeps the grids';
    the first crossing on the grids is the one refined), so that the Newton iteration starts
    from the Hermite point of a cell ``refine + 1`` times narrower; and the Newton iteration
    runs in floats and stops at an evaluated point (so that the caller's values there are
    those of the returned root)."""
    target = np.atleast_1d(np.asarray(target, dtype=float))
    rows = None if which is None else np.asarray(which, dtype=np.int64).reshape(target.size)
    br = bracket_on_grids(f, target, grids, pieces=pieces, rows=rows, first_only=True,
                          memo=memo)
    found = ~np.isnan(br.lo)
    _refine_cells(f, target, np.flatnonzero(found), refine, br[:6], rows)
    u = np.where(br.below, math.log(floor), math.log(cap))
    idx = np.flatnonzero(found)
    if not idx.size:
        return Roots(_exp1(u) if target.size == 1 else np.exp(u), found | br.below)
    a, b = [math.log(x) for x in br.lo[idx].tolist()], [math.log(x) for x in br.hi[idx].tolist()]
    u0 = hermite_start(np.array(a), np.array(b), br.g_lo[idx], br.g_hi[idx], br.d_lo[idx],
                       br.d_hi[idx], target[idx])
    u[idx] = _newton_few(f, target[idx].tolist(), a, b, u0.tolist(),
                         None if rows is None else rows[idx].tolist(),
                         [False] * idx.size if secant is None
                         else np.asarray(secant, dtype=bool)[idx].tolist(), iters, rtol)
    return Roots(np.array([math.exp(x) for x in u.tolist()]), found | br.below)


def _log_objective(f: Callable, target: np.ndarray, idx: np.ndarray, rows: np.ndarray | None,
                   exp: Callable, sec: np.ndarray | None) -> Callable:
    """``fu(u, act) -> (g, dg)`` of :func:`solve_on_grids`' Newton iteration in ``u = log x``
    for the targets ``idx[act]``: ``f`` at ``exp(u)`` (its rows by ``rows``), Halley's slope
    where ``f`` gives second derivatives, the secant slope for the ``sec`` targets."""
    prev_u, prev_g = np.full(idx.size, np.nan), np.full(idx.size, np.nan)

    def fu(uu: np.ndarray, act: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if rows is None:
            out = f(exp(uu))
            g, dg = out[0], out[1]
            d2 = out[2] if len(out) > 2 else None
        else:
            r, c = rows[idx[act]], np.arange(uu.size)
            need = np.zeros((int(rows.max()) + 1, uu.size), dtype=bool)
            need[r, c] = True
            out = f(exp(uu), need)
            g, dg = np.asarray(out[0])[r, c], np.asarray(out[1])[r, c]
            d2 = np.asarray(out[2])[r, c] if len(out) > 2 else None
        if d2 is not None:  # Halley's step where the correction stays moderate
            with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
                dh = dg - (g - target[idx[act]]) * d2 / (2.0 * dg)
                dg = np.where(np.isfinite(dh) & (dh > 0.2 * dg), dh, dg)
        if sec is not None:
            with np.errstate(invalid="ignore", divide="ignore"):
                s_ = (g - prev_g[act]) / (uu - prev_u[act])
            use = sec[act] & np.isfinite(s_) & (s_ > 0)
            dg = np.where(use, s_, dg)
            prev_u[act], prev_g[act] = uu, g
        return g, dg

    return fu


def _scan_grid(f: Callable[..., tuple[np.ndarray, np.ndarray]], target: np.ndarray,
               idx: np.ndarray, grid: np.ndarray, out: tuple[np.ndarray, ...],
               rows: np.ndarray | None = None, pieces: Callable = _whole) -> np.ndarray:
    """Bracket ``g(x) = target[idx]`` on one increasing grid: a target's bracket is the
    first cell ``[grid[j-1], grid[j]]`` with ``g(grid[j]) >= target`` (non-finite ``g``
    counts as below every target), written into ``out = (lo, hi, g_lo, g_hi, d_lo, d_hi)``
    at its index, found lazily: the grid is evaluated one piece (``pieces(grid)``, in
    increasing order) at a time, and only while some target is unbracketed, so that the
    pieces above every root are never evaluated (e.g. a CGF's expensive quadrature node
    sets at large tilts; each piece's points are evaluated together, as in one call on the
    whole grid). Returns the indices whose ``g`` is at or above the target already at
    ``grid[0]`` (no bracket on this grid). With ``rows`` (see
    :func:`solve_on_grids`' ``which``) target ``j`` reads row ``rows[j]`` of ``g``."""
    if len(idx) <= 8:
        return _scan_table(f, target, grid, out, rows, {}, idx, pieces)
    lo_t, hi_t, g_lo, g_hi, d_lo, d_hi = out
    pending = np.asarray(idx)
    at_start = pending[:0]
    prev_t = prev_g = prev_d = None
    for pts in pieces(grid):
        if not pending.size:
            break
        if rows is None:
            g, dg = f(pts)[:2]
        else:
            need = np.zeros((int(rows.max()) + 1, pts.size), dtype=bool)
            need[rows[pending]] = True
            g, dg = f(pts, need)[:2]
        g = np.atleast_2d(np.asarray(g, dtype=float))
        dg = np.atleast_2d(np.asarray(dg, dtype=float))
        if dg.shape != g.shape:
            dg = np.broadcast_to(dg, g.shape)
        g = np.where(np.isfinite(g), g, -np.inf)
        if prev_t is not None:
            pts_c, g_c = np.concatenate([[prev_t], pts]), np.concatenate([prev_g, g], axis=1)
            d_c = np.concatenate([prev_d, dg], axis=1)
        else:
            pts_c, g_c, d_c = pts, g, dg
        ri = np.zeros(pending.size, dtype=np.int64) if rows is None else rows[pending]
        g_p, d_p = g_c[ri], d_c[ri]
        ge = g_p >= target[pending, None]
        has = ge.any(axis=1)
        j = np.argmax(ge, axis=1)
        if prev_t is None:
            at_start = pending[has & (j == 0)]
        found = has & (j > 0)
        sel, jf = pending[found], j[found]
        lo_t[sel], hi_t[sel] = pts_c[jf - 1], pts_c[jf]
        g_sel, d_sel = g_p[found], d_p[found]
        k = np.arange(sel.size)
        g_lo[sel], g_hi[sel] = g_sel[k, jf - 1], g_sel[k, jf]
        d_lo[sel], d_hi[sel] = d_sel[k, jf - 1], d_sel[k, jf]
        pending = pending[~has]
        prev_t, prev_g, prev_d = pts[-1], g[:, -1:], dg[:, -1:]
    return at_start


def _scan_table(f: Callable, target: np.ndarray, grid: np.ndarray,
                out: tuple[np.ndarray, ...], rows: np.ndarray | None, memo: dict,
                idx: np.ndarray | None = None, pieces: Callable = _whole) -> np.ndarray:
    """:func:`_scan_grid` of a few targets (``idx``, default all) on the grid pieces of
    ``grid``, its bookkeeping in Python floats, with the values kept in ``memo`` per row
    (tilts, ``g`` with non-finite values as ``-inf``, slopes, running maximum of ``g``, pieces
    scanned): a target's bracket is the cell before the first point whose running maximum
    reaches it (the first point at or above it: the scan's bracket), found by bisection;
    pieces are evaluated, in order and for the rows still unbracketed only, where a row's
    table has no such point yet. With an empty ``memo`` these are the scan's calls of ``f``.
    Returns the targets reached at the grid's first point."""
    lo_t, hi_t, g_lo, g_hi, d_lo, d_hi = out
    parts = pieces(grid)
    tabs = memo.setdefault(grid.tobytes(), {})
    rl = [0] * target.size if rows is None else rows.tolist()
    nrows = max(rl) + 1
    tg = target.tolist()
    at_start: list[int] = []
    pending = list(range(target.size)) if idx is None else [int(j) for j in np.asarray(idx)]
    while pending:
        still = []
        for j in pending:
            tab = tabs.setdefault(rl[j], ([], [], [], [], [0]))
            tt, gg, dd, cm, _ = tab
            k = bisect_left(cm, tg[j]) if cm else 0
            if k == len(cm):
                still.append(j)
            elif k == 0:
                at_start.append(j)
            else:
                lo_t[j], hi_t[j] = tt[k - 1], tt[k]
                g_lo[j], g_hi[j] = gg[k - 1], gg[k]
                d_lo[j], d_hi[j] = dd[k - 1], dd[k]
        # scan on: the next piece of each row still unbracketed (rows at the same piece
        # together, in one call of f)
        todo = [j for j in still if tabs[rl[j]][4][0] < len(parts)]
        if not todo:
            break
        nxt = min(tabs[rl[j]][4][0] for j in todo)
        rws = sorted({rl[j] for j in todo if tabs[rl[j]][4][0] == nxt})
        tl, gl, dl = _rows_at(f, parts[nxt], None if rows is None else rws, nrows)
        for r in rws:
            tt, gg, dd, cm, cnt = tabs[r]
            top = cm[-1] if cm else -math.inf
            for x, v, dv in zip(tl, gl[r], dl[r], strict=True):
                top = v if v > top else top
                tt.append(x)
                gg.append(v)
                dd.append(dv)
                cm.append(top)
            cnt[0] += 1
        pending = still
    return np.array(at_start, dtype=np.int64)


def _refine_cells(f: Callable, target: np.ndarray, idx: np.ndarray, m: int,
                  out: tuple[np.ndarray, ...], rows: np.ndarray | None) -> None:
    """Narrow the brackets ``out`` of the targets ``idx`` (a few) to a cell of the sub-grid
    (:func:`_sub_grid`, ``m`` points) of their bracketing cell: one call of ``f`` per distinct
    cell, on its inner points (their node-set ranges are those of the cell's ends, already
    built), and the first sub-cell whose right end reaches the target (a non-finite ``g``
    counts as ``-inf``, as in the scan)."""
    lo_t, hi_t, g_lo, g_hi, d_lo, d_hi = out
    rl = None if rows is None else rows.tolist()
    cells: dict = {}
    for j in idx.tolist():
        cells.setdefault((float(lo_t[j]), float(hi_t[j])), []).append(j)
    tg = target.tolist()
    for (a, b), js in cells.items():
        tl, gl, dl = _rows_at(f, _sub_grid(a, b, m),
                              None if rl is None else [rl[j] for j in js],
                              1 if rl is None else max(rl) + 1)
        for j in js:
            r = 0 if rl is None else rl[j]
            gr = gl[r]
            k = next((i for i, v in enumerate(gr) if v >= tg[j]), len(gr))
            if k > 0:  # else the cell's left end stays
                lo_t[j], g_lo[j], d_lo[j] = tl[k - 1], gr[k - 1], dl[r][k - 1]
            if k < len(gr):  # else the cell's right end stays
                hi_t[j], g_hi[j], d_hi[j] = tl[k], gr[k], dl[r][k]


def _rows_at(f: Callable, pts: np.ndarray, rows: list | None, nrows: int
             ) -> tuple[list, list, list]:
    """``f`` on the grid piece ``pts`` for the rows ``rows`` (``need`` of :func:`solve_on_grids`;
    None: ``f`` of one function), as lists: the tilts, ``g`` by row with a non-finite value as
    ``-inf`` (below every target, as in the scans) and ``dg`` by row."""
    if rows is None:
        g, dg = f(pts)[:2]
    else:
        need = np.zeros((nrows, pts.size), dtype=bool)
        need[rows] = True
        g, dg = f(pts, need)[:2]
    g = np.atleast_2d(np.asarray(g, dtype=float))
    dg = np.atleast_2d(np.asarray(dg, dtype=float))
    if dg.shape != g.shape:
        dg = np.broadcast_to(dg, g.shape)
    gl = [[v if math.isfinite(v) else -math.inf for v in row] for row in g.tolist()]
    return pts.tolist(), gl, dg.tolist()


@functools.lru_cache(maxsize=256)
def _sub_grid(a: float, b: float, m: int) -> np.ndarray:
    """The ``m`` geometric points strictly inside the cell ``[a, b]`` (``geomspace(a, b,
    m + 2)`` without its ends), read-only: the sub-grid of :func:`solve_few`."""
    g = np.geomspace(a, b, m + 2)[1:-1].copy()
    g.setflags(write=False)
    return g


def _newton_few(f: Callable, target: list, lo: list, hi: list, u0: list, rows: list | None,
                secant: list, iters: int, rtol: float, xtol: float = 1e-9,
                width_tol: float = 1e-14) -> list:
    """The Newton iteration of :func:`solve_few` in ``u = log x``, in Python floats: the
    safeguarded steps of :func:`newton_bracketed` (a step leaving the bracket or on a slope that is
    not positive is replaced by bisection; secant slopes from the second step on for the
    ``secant`` targets; Halley's slope where ``f`` returns second derivatives, as there), each
    ``f`` call at ``x = exp(u)`` by ``math.exp``. A target whose residual is within
    ``rtol (1 + |target|)`` stops *at the evaluated point* (so that a caller's values there,
    e.g. a memo of its CGF, are those of the returned point: :func:`solve_few` returns
    ``math.exp`` of it); one stopped by a step below ``xtol`` or a bracket narrower than
    ``width_tol`` takes its last step. No predicted stop (the evaluation it would save is the
    one the caller makes at the root anyway). Returns the ``u`` of each target."""
    n = len(target)
    x, lo, hi = list(u0), list(lo), list(hi)
    ftol = [rtol * (1.0 + abs(v)) for v in target]
    prev_u, prev_g = [math.nan] * n, [math.nan] * n
    nrows = 1 if rows is None else max(rows) + 1
    act = list(range(n))
    for _ in range(iters):
        if not act:
            break
        t = np.array([math.exp(x[i]) for i in act])
        if rows is None:
            out = f(t)
            rr = [0] * len(act)
        else:
            rr = [rows[i] for i in act]
            need = np.zeros((nrows, len(act)), dtype=bool)
            need[rr, np.arange(len(act))] = True
            out = f(t, need)
        g, dg = np.atleast_2d(out[0]).tolist(), np.atleast_2d(out[1]).tolist()
        d2 = np.atleast_2d(out[2]).tolist() if len(out) > 2 else None
        keep = []
        for c, i in enumerate(act):
            ui, gi, di = x[i], g[rr[c]][c], dg[rr[c]][c]
            r = gi - target[i]
            if d2 is not None:  # Halley's slope where the correction stays moderate
                try:
                    dh = di - r * d2[rr[c]][c] / (2.0 * di)
                except ZeroDivisionError:
                    dh = math.nan
                if math.isfinite(dh) and dh > 0.2 * di:
                    di = dh
            if secant[i] and ui != prev_u[i]:
                s_ = (gi - prev_g[i]) / (ui - prev_u[i])
                if math.isfinite(s_) and s_ > 0:
                    di = s_
            prev_u[i], prev_g[i] = ui, gi
            xn = ui - r / di if di > 0 else math.nan
            if not r < 0:  # a NaN residual counts as above the target
                hi[i] = ui
            else:
                lo[i] = ui
            inside = lo[i] < xn < hi[i] and math.isfinite(xn)
            if not inside:
                xn = 0.5 * (lo[i] + hi[i])
            if abs(r) <= ftol[i]:
                continue  # x[i] = ui: the evaluated point
            if hi[i] - lo[i] < width_tol or (inside and abs(xn - ui) < xtol):
                x[i] = xn if inside else ui
                continue
            x[i] = xn
            keep.append(i)
        act = keep
    return x


def _log1(x: np.ndarray) -> np.ndarray:
    return np.array([math.log(float(x[0]))])


def _exp1(x: np.ndarray) -> np.ndarray:
    return np.array([math.exp(float(x[0]))])

