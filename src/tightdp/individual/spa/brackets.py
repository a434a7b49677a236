"""Bracketing the per-example roots on the accountant's tilt grids (the package docstring,
step 1): the refined-moments optimality function (Alghamdi et al. 2023, eq. (44)) of every
example of a block, and then the saddle-point function of those that need a saddle point,
walked as :func:`tightdp.curves.saddle.solve_tilt` walks the grids, with the exact composed
CGF at the grid points (matrix products with the counts)."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import numpy as np

from ..blocks import as_slice
from .products import SUB_CHUNK, counts_product, gather_counts
from .saddle_function import g_spa
from .tables import Table

__all__ = ["bracket", "rma_brackets", "first_reaching", "further_grids", "WINDOW_SHARE"]

#: stride of the coarse pass over the first grid (see :func:`bracket`)
_COARSE = 4
#: the refined-moments brackets are looked for on the grid points of the brackets of the
#: previous slice of examples held by at least 1 in this many of them (see
#: :func:`rma_brackets`); the others evaluate the whole grid
WINDOW_SHARE = 1000
#: the composed rows K, ..., K'''' the saddle-point function reads
_ROWS = 5


def first_reaching(ge: np.ndarray, j0: int, p0: int) -> tuple[np.ndarray, np.ndarray]:
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
        return np.argmax(ge, axis=0), cast(np.ndarray, ge.any(axis=0))
    jj = j0 + w - ge.sum(axis=0)
    has = ~ge[0] & ge[-1] & (ge[1:] >= ge[:-1]).all(axis=0)
    return jj, has


def further_grids(tab: Table, g_at: Callable, target: float, lo: np.ndarray, hi: np.ndarray,
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


class _GridFunction:
    """The saddle-point function (``kind="spa"``, of ``method``) or the refined-moments
    function (``"rma"``) of the examples (columns of ``cnt``, buckets x examples) at the
    points of the tilt grids of ``tab``, from the exact composed CGF there."""

    def __init__(self, tab: Table, cnt: np.ndarray, kind: str, method: str):
        self.tab, self.cnt, self.kind, self.method = tab, cnt, kind, method

    def __call__(self, gi: int, rows: np.ndarray, idx: np.ndarray | None = None) -> np.ndarray:
        """The function of the examples ``rows`` at the points ``idx`` (all if None) of grid
        ``gi``: examples x tilts."""
        tab, cnt = self.tab, self.cnt
        grid = tab.grids[gi]
        if self.kind == "rma":  # linear in the counts: one row per tilt
            h = tab.rma_rows(gi)
            if idx is not None:
                h, grid = h[idx], grid[idx]
            return (counts_product(h, cnt, rows) + np.log1p(grid)[:, None]).T
        pts = tab.points(gi)[:, :_ROWS, :]
        if idx is not None:
            pts, grid = pts[:, :, idx], grid[idx]
        comp = counts_product(pts.reshape(pts.shape[0], -1).T, cnt, rows)
        comp = comp.reshape(_ROWS, grid.size, rows.size)  # (rows, tilts, examples)
        return g_spa(comp, grid[:, None], self.method).T

    def each(self, rows: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """The function of example ``rows[m]`` at the grid-0 point ``idx[m]``."""
        out = np.empty(rows.size)
        for j in np.unique(idx):
            sel = idx == j
            out[sel] = self(0, rows[sel], np.array([j]))[:, 0]
        return out


def _walk_from_hints(f: _GridFunction, target: float, hint: np.ndarray, lo: np.ndarray,
                     hi: np.ndarray) -> np.ndarray:
    """The brackets (in place) on the first grid of the examples with a hint in it: a walk
    from the hinted cell ``[k - 1, k]``, one grid point at a time, up while ``g(hi) <
    target`` or down while ``g(lo) >= target``. Returns the examples without a hint."""
    g0 = f.tab.grids[0]
    last = g0.size - 1
    rows = np.arange(hint.size)
    ok = (hint >= 0) & (hint <= last)
    w = rows[ok]
    k = np.clip(hint[ok], 1, last)
    g_lo, g_hi = np.empty(w.size), np.empty(w.size)
    for j in np.unique(k):  # both ends of the hinted cell in one product
        sel = k == j
        g_lo[sel], g_hi[sel] = f(0, w[sel], np.array([j - 1, j])).T
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
        g_new = f.each(w, np.where(up, k, k - 1))
        g_lo, g_hi = np.where(up, g_hi, g_new), np.where(up, g_new, g_lo)
    return rows[~ok]


def _coarse_then_fine(f: _GridFunction, rows: np.ndarray, target: float, lo: np.ndarray,
                      hi: np.ndarray) -> None:
    """The brackets (in place) on the first grid of the examples ``rows``: the function at
    every :data:`_COARSE`-th point first, then inside the first of those intervals reaching
    the target."""
    g0 = f.tab.grids[0]
    last = g0.size - 1
    co = np.unique(np.append(np.arange(0, g0.size, _COARSE), last))
    ge = f(0, rows, co) >= target
    has = ge.any(axis=1)
    jj = np.argmax(ge, axis=1)
    sel = has & (jj > 0)
    for jv in np.unique(jj[sel]):
        r = rows[sel & (jj == jv)]
        fine = np.arange(co[jv - 1] + 1, co[jv])
        k = np.full(r.size, co[jv])
        if fine.size:
            gef = f(0, r, fine) >= target
            hasf = gef.any(axis=1)
            k = np.where(hasf, fine[np.argmax(gef, axis=1)], k)
        lo[r], hi[r] = g0[k - 1], g0[k]


def bracket(tab: Table, cnt: np.ndarray, target: float, *, kind: str, method: str,
            hint: np.ndarray | None = None) -> dict:
    """Per example, for the saddle-point function (``kind="spa"``, of ``method``) or the
    refined-moments function (``"rma"``): the bracket ``[lo, hi]`` of tilts with ``g(lo) <
    target <= g(hi)``, as :func:`tightdp.curves.saddle.solve_tilt` finds it: the same grids
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
    f = _GridFunction(tab, cnt, kind, method)
    rows = np.arange(n)
    if hint is not None:
        rows = _walk_from_hints(f, target, hint, lo, hi)
    if rows.size:
        _coarse_then_fine(f, rows, target, lo, hi)
    further_grids(tab, f, target, lo, hi, below)
    return {"lo": lo, "hi": hi, "below": below}


def _rma_slice(tab: Table, whole: np.ndarray, vi: np.ndarray, win: tuple[int, int],
               conv: np.ndarray, target: float, br: dict, k: int) -> tuple[int, int]:
    """The refined-moments brackets (into ``br`` at ``k + ...``) of one slice of examples on
    the first grid of ``tab``, from ``vi``: the products of the window ``win`` of grid points
    (rows of ``whole``, inclusive) with the slice's converted counts ``conv`` (examples x
    buckets); the examples whose root that window does not show inside it are evaluated on
    the whole grid. Returns the next slice's window: the grid points of this slice's
    brackets held by at least 1 in :data:`WINDOW_SHARE` examples."""
    g0 = tab.grids[0]
    p0 = g0.size
    j0, j1 = win
    w = j1 - j0 + 1
    vi += np.log1p(g0[j0:j1 + 1])[:, None]
    jj, has = first_reaching(vi >= target, j0, p0)
    # where the window does not show the root inside it (or the comparisons do
    # not increase along it): the whole grid, on these examples' counts
    redo = np.nonzero(~has)[0] if w < p0 else np.zeros(0, dtype=np.int64)
    if redo.size:
        vr = whole @ np.take(conv, redo, axis=0).T
        vr += np.log1p(g0)[:, None]
        jj[redo], has[redo] = first_reaching(vr >= target, 0, p0)
    sel = np.nonzero(has & (jj > 0))[0]
    br["lo"][k + sel] = g0[jj[sel] - 1]
    br["hi"][k + sel] = g0[jj[sel]]
    if sel.size:  # the next window: the grid points of this slice's brackets
        hist = np.bincount(jj[sel], minlength=p0)
        keep = np.nonzero(hist * WINDOW_SHARE >= sel.size)[0]
        return int(keep[0]) - 1, int(keep[-1])
    return win


def _rma_first_grid(tables: list[Table], b: np.ndarray, cols: np.ndarray,
                    target: float) -> tuple[list[dict], np.ndarray]:
    """The refined-moments brackets on the first grid of every table of the examples of
    ``b`` (rows: examples; ``cols``: the columns of the buckets used), :data:`SUB_CHUNK`
    examples at a time, and which examples have some loss."""
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
            j0, j1 = wins[i]
            w = j1 - j0 + 1
            vi = v[off:off + w]
            off += w
            wins[i] = _rma_slice(tab, whole[i], vi, wins[i], buf[:m], target, br, k)
    return brs, active


def _rma_further(tab: Table, b: np.ndarray, cols: np.ndarray, act: np.ndarray, br: dict,
                 target: float) -> None:
    """The refined-moments brackets (in place in ``br``, over the examples ``act`` of ``b``)
    on the further grids of ``tab`` of the examples whose root is off its first grid, on
    these examples' counts."""
    br["below"] = np.zeros(act.size, dtype=bool)
    off = np.nonzero(np.isnan(br["lo"]))[0]
    if off.size == 0:
        return
    c = gather_counts(b, act[off], cols)

    def g_at(gi: int, rows: np.ndarray) -> np.ndarray:
        return (counts_product(tab.rma_rows(gi), c, rows)
                + np.log1p(tab.grids[gi])[:, None]).T

    lo, hi, below = br["lo"][off], br["hi"][off], br["below"][off]
    further_grids(tab, g_at, target, lo, hi, below)
    br["lo"][off], br["hi"][off], br["below"][off] = lo, hi, below


def rma_brackets(tables: list[Table], block: np.ndarray, cols: np.ndarray,
                 target: float) -> tuple[np.ndarray, list[dict], np.ndarray | None]:
    """The examples of ``block`` (rows: examples; ``cols``: the columns of the buckets used)
    with some loss, their refined-moments brackets in every table (as :func:`bracket` with
    ``kind="rma"``: the first grid point where the increasing optimality function of eq. (44)
    reaches ``target``) and their counts as floats, buckets x examples, ordered by those
    brackets (the first table's, then the second's; ties by position). On the first grid the
    function is evaluated for every table at once, one product per :data:`SUB_CHUNK` examples
    whose counts are converted there (the converted slice stays in cache), at the grid points
    of the brackets found in the previous slice (those held by at least 1 in
    :data:`WINDOW_SHARE` examples; all points for the first slice, and for the examples whose
    root is not inside that window: the same first point reaching the target, the function
    being increasing); then, for the few examples whose root is off that grid, the further
    grids as :func:`bracket`. The ordered counts are gathered from the block's rows (a gather
    of the integer rows in slices of 1024, cheaper than reordering the converted columns).
    Returns ``(act, brackets, counts)`` (``act``: the block rows, ordered; counts None when no
    example has loss)."""
    b = np.asarray(block)
    brs, active = _rma_first_grid(tables, b, cols, target)
    act = np.nonzero(active)[0]
    if act.size == 0:
        return act, [], None
    brs = [{"lo": br["lo"][act], "hi": br["hi"][act]} for br in brs]
    for tab, br in zip(tables, brs, strict=True):
        _rma_further(tab, b, cols, act, br, target)
    if act.size > 1:
        # the examples ordered by their brackets: those that share a piece are then
        # adjacent, and the products take views of the counts, not copies (every
        # per-example number is computed column by column: order-free)
        order = np.lexsort([br["lo"] for br in brs[::-1]])
        act = act[order]
        brs = [{key: x[order] for key, x in br.items()} for br in brs]
    return act, brs, gather_counts(b, act, cols)
