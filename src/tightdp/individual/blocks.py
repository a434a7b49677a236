"""Row blocks of a per-example count array, and the in-process executor that runs the
per-example algorithms block by block.

The individual accountants (:mod:`tightdp.individual.pld_individual`,
:mod:`tightdp.individual.spa`) are written once against a small protocol: a pass
applies a module-level function ``fn(counts_block, state, *shared) -> (state, out)`` to every
block of examples (``state``: that block's per-example arrays between passes, ``out``: a small
summary gathered on the driver). :class:`LocalBlocks` runs a pass here, one block at a time (a
numpy array, a memmap read slice by slice, or a dask array computed one block at a time);
:class:`tightdp.individual.distributed.DaskBlocks` runs it on a Dask cluster. An example's
numbers do not depend on which other examples share its block, so both give the same answer.

The summary of a per-example result (:func:`block_summary`, :func:`merge_summaries`) is
computed block by block too: counts, extremes, a histogram on fixed logarithmic bins,
quantiles read from it (conservatively: the upper edge of the bin, or the maximum) and the
worst examples.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np

__all__ = ["LocalBlocks", "LostBlocks", "run_with_restarts", "MAX_RESTARTS", "block_summary",
           "merge_summaries", "as_blocks", "ResultStore", "DEFAULT_BLOCK_ROWS",
           "SUMMARY_EDGES", "is_dask_array", "read_npy_rows", "read_rows", "npy_dask",
           "npy_source", "as_slice"]

#: how many times a query starts over after losing block state with a Dask worker
MAX_RESTARTS = 3
#: examples per block when the counts are a numpy array (a dask array keeps its own chunks);
#: the PLD accountant's default (its evaluation sorts a block's examples by cut-off into
#: chunks: larger blocks give more even chunks, for the same peak memory per worker; see
#: docs/scaling.md, section 4)
DEFAULT_BLOCK_ROWS = 1 << 17
#: histogram bins of a per-example summary: 0, then 10^-6 .. 10^4 in 100 bins per decade, +inf
SUMMARY_EDGES = np.concatenate([[0.0], np.logspace(-6, 4, 1001), [np.inf]])
#: how many of the largest values a summary keeps
TOP_K = 10
#: quantiles a summary reports
QUANTILES = (0.5, 0.9, 0.99, 0.999, 1.0)


class LostBlocks(RuntimeError):
    """Per-block state was lost with a worker (the query can start over)."""


def run_with_restarts(run: Callable, log: Callable):
    """``run(restarts)`` again after each :class:`LostBlocks`, at most :data:`MAX_RESTARTS`
    times; then one clear error."""
    for attempt in range(MAX_RESTARTS + 1):
        try:
            return run(attempt)
        except LostBlocks as e:
            log(f"{e}; starting over ({attempt + 1}/{MAX_RESTARTS})")
            last = e
    raise ValueError(f"workers: per-example accounting lost Dask workers {MAX_RESTARTS + 1} "
                     f"times in a row (last: {last}); check the cluster's stability and "
                     "memory_limit")


def is_dask_array(x) -> bool:
    """Is ``x`` a ``dask.array`` (checked without importing dask)?"""
    return type(x).__module__.split(".")[0] == "dask" and hasattr(x, "blocks")


def read_npy_rows(path: str, offset: int, dtype: str, block_info=None) -> np.ndarray:
    """Rows ``[a, b)`` (the block's location, from dask's ``block_info``) of the 2-d C-ordered
    array stored in the file ``path`` from byte ``offset`` (a ``.npy`` file's data): a dask
    task that reads just these rows, by path."""
    (a, b), (_, nb) = block_info[None]["array-location"]
    return read_rows(path, offset, dtype, a, b, nb)


def as_slice(cols: np.ndarray) -> np.ndarray | slice:
    """``cols`` (column indices) as a slice when they are consecutive and increasing (a view
    of the columns, not a gather), else unchanged."""
    if cols.size and cols[-1] - cols[0] + 1 == cols.size and np.all(np.diff(cols) == 1):
        return slice(int(cols[0]), int(cols[-1]) + 1)
    return cols


def npy_source(counts) -> tuple[str, int] | None:
    """``(path, byte offset of the first row)`` when ``counts`` is a run of whole rows of a
    2-d C-ordered array mapped from a ``.npy`` file (``np.load(path, mmap_mode="r")`` or a
    row slice of it), so that tasks can read its rows by path; else None (a column slice,
    a strided view, another file type)."""
    if not isinstance(counts, np.memmap) or not str(counts.filename or "").endswith(".npy"):
        return None
    root: np.ndarray = counts
    while isinstance(root.base, np.ndarray):  # the memmap of the whole mapping
        root = root.base
    if (counts.ndim != 2 or root.ndim != 2 or counts.dtype != root.dtype
            or counts.shape[1] != root.shape[1] or not counts.flags.c_contiguous
            or not root.flags.c_contiguous or not isinstance(root, np.memmap)):
        return None
    delta = counts.__array_interface__["data"][0] - root.__array_interface__["data"][0]
    row = root.shape[1] * root.itemsize
    if delta < 0 or (row and delta % row):
        return None
    return str(counts.filename), int(root.offset) + int(delta)


def read_rows(path: str, offset: int, dtype: str, a: int, b: int, nb: int) -> np.ndarray:
    """Rows ``[a, b)`` of the 2-d C-ordered array of ``nb`` columns stored in the file
    ``path`` from byte ``offset``."""
    isz = np.dtype(dtype).itemsize
    out = np.fromfile(path, dtype=dtype, count=(b - a) * nb, offset=offset + a * nb * isz)
    if out.size != (b - a) * nb:
        raise ValueError(f"{path} is shorter than its header says (rows {a} to {b})")
    return out.reshape(b - a, nb)


def npy_dask(path: str, offset: int, shape: tuple[int, int], dtype, rows: int):
    """A ``dask.array`` of the 2-d array in the file ``path`` (data from byte ``offset``),
    in blocks of ``rows`` rows, each read by its task (the graph holds the path, not the
    data)."""
    import dask.array as da

    n, nb = shape
    dtype = np.dtype(dtype)
    sizes = (rows,) * (n // rows) + ((n % rows,) if n % rows else ())
    return da.map_blocks(read_npy_rows, str(path), int(offset), dtype.name,
                         chunks=(sizes, (nb,)), dtype=dtype, meta=np.empty((0, 0), dtype=dtype))


def as_blocks(counts, block_rows: int) -> list[tuple[int, int]]:
    """Row ranges ``[a, b)`` of the blocks of ``counts``: its chunks for a dask array, else
    ``block_rows`` rows each."""
    n = counts.shape[0]
    if is_dask_array(counts):
        edges = np.cumsum((0,) + tuple(counts.chunks[0]))
        return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:], strict=True)]
    return [(a, min(a + block_rows, n)) for a in range(0, n, block_rows)]


class LocalBlocks:
    """Runs passes over the row blocks of ``counts`` in this process, one block at a time
    (only one block's rows are read into memory at once)."""

    distributed = False

    def __init__(self, counts, block_rows: int = DEFAULT_BLOCK_ROWS):
        self.counts = counts
        self.bounds = as_blocks(counts, block_rows)

    @property
    def n_blocks(self) -> int:
        return len(self.bounds)

    def block(self, i: int) -> np.ndarray:
        a, b = self.bounds[i]
        blk = self.counts[a:b]
        return np.asarray(blk.compute() if is_dask_array(blk) else blk)

    def run(self, fn: Callable, states: list, *shared, keep_state: bool = False,
            on_done: Callable | None = None, reads: bool = True,
            options: dict | None = None) -> tuple[list, list]:
        """Apply ``fn(block, state, *shared, **options)`` to every block: the new states and
        the outs (``on_done(i, out)`` is called as each block completes). ``reads=False``:
        ``fn`` does not read the counts (``block`` is None; they are not read)."""
        new, outs = [], []
        opts = options or {}
        for i, st in enumerate(states):
            s, o = fn(self.block(i) if reads else None, st, *shared, **opts)
            new.append(s)
            outs.append(o)
            if on_done is not None:
                on_done(i, o)
        return (states if keep_state else new), outs

    def map(self, fn: Callable, items: list, *args) -> list:
        """``[fn(x, *args) for x in items]`` (work of the driver that the cluster can share)."""
        return [fn(x, *args) for x in items]

    def assemble(self, states: list, fields: tuple[str, ...], lazy: bool = False) -> dict:
        """The per-example fields ``fields`` of every block's final state, each one array."""
        return {f: np.concatenate([st[f] for st in states]) for f in fields}

    def close(self) -> None:
        pass


# --- summaries --------------------------------------------------------------------------------
def block_summary(values: np.ndarray, start: int) -> dict:
    """Summary of one block of per-example values (rows ``start + i``): count, number of
    infinite values, min, max, sum of the finite ones, histogram on :data:`SUMMARY_EDGES`,
    and the :data:`TOP_K` largest values with their example indices."""
    v = np.asarray(values, dtype=float)
    fin = np.isfinite(v)
    k = min(TOP_K, v.size)
    top = np.argpartition(-np.nan_to_num(v, posinf=np.inf), k - 1)[:k] if k else np.zeros(0, int)
    hist = np.histogram(np.where(np.isnan(v), np.inf, v), bins=SUMMARY_EDGES)[0]
    hist[-1] += int(np.isposinf(v).sum() + np.isnan(v).sum())  # histogram drops +inf itself
    return {"count": int(v.size), "infinite": int((~fin).sum()),
            "min": float(v.min()) if v.size else math.inf,
            "max": float(v.max()) if v.size else -math.inf,
            "sum": float(v[fin].sum()), "hist": hist.astype(np.int64),
            "top_values": v[top], "top_index": (start + top).astype(np.int64)}


def merge_summaries(parts: list[dict]) -> dict:
    """The summary of all blocks: exact count, min, max, mean (of the finite values), the
    worst :data:`TOP_K` examples (largest first), and quantiles reported as the upper edge of
    the histogram bin holding them or the maximum, whichever is smaller (never below the true
    quantile; bins are 2.3% wide from 1e-6 to 1e4)."""
    hist = np.sum([p["hist"] for p in parts], axis=0)
    n = sum(p["count"] for p in parts)
    n_inf = sum(p["infinite"] for p in parts)
    vals = np.concatenate([p["top_values"] for p in parts])
    idx = np.concatenate([p["top_index"] for p in parts])
    order = np.lexsort((idx, -np.nan_to_num(vals, posinf=np.inf)))[:TOP_K]
    cum = np.cumsum(hist)
    quant = {}
    top = max(p["max"] for p in parts)
    for qq in QUANTILES:
        b = int(np.searchsorted(cum, max(math.ceil(qq * n), 1)))
        # two upper bounds on the quantile: its bin's upper edge, and the maximum
        quant[f"{qq:g}"] = min(float(SUMMARY_EDGES[min(b + 1, SUMMARY_EDGES.size - 1)]), top)
    n_fin = n - n_inf
    return {"count": n, "infinite": n_inf,
            "min": min(p["min"] for p in parts), "max": max(p["max"] for p in parts),
            "mean": sum(p["sum"] for p in parts) / n_fin if n_fin else math.nan,
            "quantiles_upper": quant,
            "worst": [{"index": int(i), "value": float(x)}
                      for i, x in zip(idx[order], vals[order], strict=True)],
            "histogram": {"edges": SUMMARY_EDGES, "counts": hist}}


class ResultStore:
    """A directory of ``.npy`` files (one per field: ``N`` values of its dtype) that blocks
    write their rows into (from any process sharing the file system), opened read-only
    afterwards as memmaps."""

    def __init__(self, path, n: int, fields: dict):
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.fields = tuple(fields)
        for f, dtype in fields.items():
            np.lib.format.open_memmap(self.path / f"{f}.npy", mode="w+", dtype=dtype,
                                      shape=(n,)).flush()

    def write(self, start: int, values: dict) -> None:
        for f in self.fields:
            mm = np.load(self.path / f"{f}.npy", mmap_mode="r+")
            mm[start:start + len(values[f])] = values[f]
            mm.flush()
            del mm

    def open(self) -> dict:
        return {f: np.load(self.path / f"{f}.npy", mmap_mode="r") for f in self.fields}
