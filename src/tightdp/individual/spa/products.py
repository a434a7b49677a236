"""Products of a few rows with the counts of a block's examples (buckets x examples, ordered by
their brackets: :mod:`.block`), over views of runs of consecutive examples where these are long
enough, else over copies of the columns; and the grouping of examples by bracket."""

from __future__ import annotations

import numpy as np

from ..blocks import as_slice

__all__ = ["SUB_CHUNK", "MIN_RUN", "consecutive_runs", "counts_product", "gather_counts",
           "take_cols", "groups_of"]

#: the saddle points are solved this many examples at a time (arrays that stay in cache)
SUB_CHUNK = 8192
#: products over ranges of consecutive examples (views of the counts) when these average at
#: least this many examples, else over a copy of the columns (see counts_product)
MIN_RUN = 256


def consecutive_runs(cols: np.ndarray) -> list[tuple[int, int]] | None:
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


def counts_product(m: np.ndarray, cnt: np.ndarray, cols: np.ndarray,
             out: np.ndarray | None = None) -> np.ndarray:
    """``m @ cnt[:, cols]`` (``cnt``: buckets x examples; this layout, with the examples
    along the rows of the result, is the fast one for the few-row ``m`` here; ``cols``
    increasing), into ``out`` if given: over the ranges of consecutive columns, views of the
    counts (:func:`consecutive_runs`; the examples are ordered by their brackets in
    :func:`~.block.spa_block`, so those of a piece mostly are); else for more than half of the
    examples a product over all of them, then the columns picked (cheaper than copying most
    of the counts); else over a copy of the columns."""
    n = cols.size
    if out is None:
        out = np.empty((m.shape[0], n))
    if n == cnt.shape[1]:
        return np.matmul(m, cnt, out=out)
    runs = consecutive_runs(cols)
    if runs is not None:
        for a, b in runs:
            np.matmul(m, cnt[:, cols[a]:cols[b - 1] + 1], out=out[:, a:b])
        return out
    if 2 * n > cnt.shape[1]:
        return np.take(m @ cnt, cols, axis=1, out=out)
    return np.matmul(m, np.take(cnt, cols, axis=1), out=out)


def gather_counts(b: np.ndarray, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``b[rows][:, cols].T`` as floats, C-contiguous (buckets x examples; ``b``: examples x
    columns, integers): gathered and converted 1024 rows at a time (slices that stay in
    cache)."""
    out = np.empty((cols.size, rows.size))
    cs = as_slice(cols)
    for k in range(0, rows.size, 1024):
        out[:, k:k + 1024] = np.take(b, rows[k:k + 1024], axis=0)[:, cs].T
    return out


def take_cols(a: np.ndarray, sel: np.ndarray) -> np.ndarray:
    """``a[..., sel]`` for a boolean ``sel`` along the last axis; ``a`` itself (no copy)
    when every example is selected."""
    return a if sel.all() else a[..., sel]


def groups_of(keys: np.ndarray) -> list[np.ndarray]:
    """Indices of equal values of ``keys`` (the left ends of the bracketing intervals, which
    determine the interval: the tilt grids partition the tilt range), one array per value."""
    if keys.size == 0:
        return []
    order = np.argsort(keys, kind="stable")
    k = keys[order]
    cut = np.nonzero(k[1:] != k[:-1])[0] + 1
    return np.split(order, cut)
