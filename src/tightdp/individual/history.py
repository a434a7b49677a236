"""Per-example gradient-norm history of a DP-SGD run, stored as counts on a uniform
sensitivity grid (Koskela, Tobaben, Honkela 2023, "Individual Privacy Accounting with
Gaussian Differential Privacy", App. D.2): an ``N x (B + 1)`` integer array whatever the
number of steps."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import numpy as np

from .. import _validate as v
from ..progress import logger
from .blocks import is_dask_array

__all__ = ["NormHistory", "sensitivity_grid", "bucket_index", "index_dtype", "add_steps"]

#: rows of the count array updated together by :func:`add_steps` (a block of 4096 rows of
#: 101 int64 counts is 3.3 MB: it stays in cache while the buffered steps are added)
BLOCK_ROWS = 4096


def sensitivity_grid(n_buckets: int) -> np.ndarray:
    """Uniform grid of sensitivity ratios ``c_j = j / n_buckets``, ``j = 1..n_buckets``
    (Koskela et al. 2023, App. D.2: a grid of noise ratios ``sigma / c_j``)."""
    n = v.count("n_buckets", n_buckets, minimum=1)
    g = np.arange(1, n + 1, dtype=float) / n
    g[-1] = 1.0
    return g


def bucket_index(ratios: np.ndarray, grid: np.ndarray, *, dtype=np.int64) -> np.ndarray:
    """Index (1-based; 0 = no loss) of the smallest point of the uniform grid ``j / n`` that
    is >= each ratio (rounding the sensitivity *up*), as ``dtype``. NaN (unknown norm) goes
    to the top."""
    n = grid.size
    r = np.array(ratios, dtype=float)  # our copy: NaN replaced in place
    np.copyto(r, 1.0, where=np.isnan(r))
    x = np.multiply(r, n, out=np.empty_like(r))  # out=: an array also when 0-d
    np.ceil(x, out=x)
    # correct by one where the rounding of r * n missed (x / n is exactly grid[x - 1])
    t = np.divide(x, n, out=np.empty_like(r))
    low = np.less(t, r, out=np.empty(r.shape, dtype=bool))
    x += low
    np.subtract(x, 1.0, out=t)
    t /= n
    np.greater_equal(t, r, out=low)
    low &= x >= 2
    x -= low
    np.clip(x, 0, n, out=x)
    return x.astype(dtype)[()]  # a scalar for a scalar


def index_dtype(n_columns: int) -> np.dtype:
    """The smallest integer type holding a bucket index ``0 .. n_columns - 1`` (uint8, uint16,
    else int64)."""
    if n_columns <= 256:
        return np.dtype(np.uint8)
    return np.dtype(np.uint16) if n_columns <= 65536 else np.dtype(np.int64)


def add_steps(counts: np.ndarray, steps: np.ndarray | Sequence[np.ndarray], *,
              block_rows: int = BLOCK_ROWS) -> None:
    """Count buffered steps in place: ``counts[i, steps[s, i]] += 1`` for every step ``s``.

    ``counts`` is a C-contiguous ``(n, B + 1)`` integer array (in memory or a memory map),
    ``steps`` a ``(k, n)`` array of bucket indices (step-major) or a sequence of ``k`` arrays
    ``(n,)`` (for instance memory maps of a step log). Each step adds one to one
    entry of each row, so the entries of one step are distinct and an unbuffered fancy-index
    increment (``np.add.at``) is exact: O(n) work per step, done a block of ``block_rows`` rows
    at a time so that the temporaries stay small and the rows being counted stay in cache.
    """
    n, nb = counts.shape
    if not counts.flags.c_contiguous:
        raise ValueError("counts must be C-contiguous")
    if any(np.shape(row) != (n,) for row in steps):
        raise ValueError(f"steps must be k arrays of shape ({n},)")
    flat = counts.reshape(-1)  # a view (C-contiguous)
    m = min(block_rows, n)
    ones = np.ones(m, dtype=counts.dtype)  # same dtype: np.add.at's fast path
    idx = np.empty(m, dtype=np.int64)
    for a in range(0, n, m):
        b = min(a + m, n)
        base = np.arange(a * nb, b * nb, nb, dtype=np.int64)
        for row in steps:
            np.add(base, row[a:b], out=idx[:b - a])
            np.add.at(flat, idx[:b - a], ones[:b - a])


class NormHistory:
    """Per-example gradient-norm history of a DP-SGD run, stored as bucket counts.

    Each step's ratio ``min(g_i, C) / C`` is rounded *up* to the uniform grid ``j / B``
    (App. D.2; rounding up can only increase the privacy loss, data-processing inequality) and
    counted: only an ``N x (B + 1)`` integer array is kept, whatever the number of steps.
    A NaN norm (unknown) is charged the full clipping norm.
    """

    def __init__(self, *, sampling_rate: float, noise_multiplier: float, clip_norm: float,
                 n_examples: int, n_buckets: int = 100):
        self._set_setting(sampling_rate, noise_multiplier, clip_norm, n_examples, n_buckets)
        nb = self.grid.size + 1
        self._counts = np.zeros((self.n_examples, nb), dtype=np.int64)
        # step-major; None when attached to counts without recording
        self._buf: np.ndarray | None = np.zeros((64, self.n_examples), dtype=index_dtype(nb))
        self._nbuf = 0
        self.n_steps: int | None = 0  # None: attached counts of an unknown number of steps

    @classmethod
    def setting_only(cls, *, sampling_rate: float, noise_multiplier: float, clip_norm: float,
                     n_examples: int, n_buckets: int = 100) -> NormHistory:
        """A history holding the checked setting (``sampling_rate``, ..., ``grid``) and no
        counts: the one check of a setting, shared with the on-disk recorder."""
        probe = cls.__new__(cls)
        probe._set_setting(sampling_rate, noise_multiplier, clip_norm, n_examples, n_buckets)
        return probe

    @classmethod
    def attach(cls, counts, *, n_steps: int | None = None, recording: bool = False,
               **kwargs):
        """An instance of ``cls`` (a history or an individual accountant) over recorded bucket
        counts ``counts`` (``N x (B + 1)`` integers: a numpy array, a memmap or a dask array;
        never copied), with ``n_buckets = B`` (``kwargs``: as for the constructor). It answers
        queries; it records further steps (into ``counts``, which must then be a writable
        numpy array) only with ``recording``."""
        shape = getattr(counts, "shape", None)
        if shape is None or len(shape) != 2 or shape[0] < 1 or shape[1] < 2:
            raise ValueError("counts must be a 2-d array (n_examples >= 1 rows, n_buckets + 1 "
                             f">= 2 columns), got shape {shape}")
        if not np.issubdtype(np.dtype(counts.dtype), np.integer):
            raise ValueError("counts must be integers (steps per bucket), got dtype "
                             f"{counts.dtype}")
        if "n_buckets" in kwargs and kwargs.pop("n_buckets") != shape[1] - 1:
            raise ValueError(f"n_buckets must be the number of columns of counts minus one "
                             f"({shape[1] - 1})")
        if not is_dask_array(counts) and not isinstance(counts, np.memmap):
            counts = np.asarray(counts)
        acc = cls(n_examples=1, n_buckets=int(shape[1]) - 1, **kwargs)  # nothing N-sized
        acc.n_examples = int(shape[0])
        acc._counts = counts
        acc._buf = (np.zeros((64, acc.n_examples), dtype=cast(np.ndarray, acc._buf).dtype)
                    if recording else None)
        acc._nbuf = 0
        if recording and n_steps is None:
            # every step adds one to exactly one column of every row: a row sums to the steps
            n_steps = int(np.asarray(counts[0]).sum())
        acc.n_steps = n_steps
        return acc

    def _set_setting(self, sampling_rate, noise_multiplier, clip_norm, n_examples,
                     n_buckets) -> None:
        """Check and keep the setting (shared with the on-disk recorder)."""
        self.sampling_rate = v.probability_open_closed("sampling_rate", sampling_rate)
        self.noise_multiplier = v.positive("noise_multiplier", noise_multiplier)
        self.clip_norm = v.positive("clip_norm", clip_norm)
        self.n_examples = v.count("n_examples", n_examples, minimum=1)
        self.grid = sensitivity_grid(n_buckets)

    def _buckets(self, g: np.ndarray, dtype=np.int64) -> np.ndarray:
        """Bucket indices (as ``dtype``) of the norms ``g`` (a float array: one step's norms
        or a part of them)."""
        if np.any(g < 0):
            raise ValueError("grad_norms must be >= 0 (NaN = unknown norm)")
        r = np.minimum(g, self.clip_norm)
        r /= self.clip_norm
        return bucket_index(r, self.grid, dtype=dtype)

    def step(self, grad_norms) -> None:
        """Record one step: ``grad_norms[i]`` is example ``i``'s gradient norm at this step's
        model (NaN = unknown, charged the full clipping norm)."""
        if self._buf is None:
            raise ValueError("this accountant reads recorded counts (from_counts / "
                             "from_history) and records no steps: record them with a "
                             "NormHistory or NormRecorder")
        g = np.asarray(grad_norms, dtype=float)
        if g.shape != (self.n_examples,):
            raise ValueError(f"grad_norms must have shape ({self.n_examples},), got {g.shape}")
        self._buf[self._nbuf] = self._buckets(g, self._buf.dtype)
        self._nbuf += 1
        self.n_steps = cast(int, self.n_steps) + 1
        if self._nbuf == self._buf.shape[0]:
            self._flush()

    def _flush(self) -> None:
        """Add the buffered steps' bucket indices to the counts (:func:`add_steps`: O(N)
        per step, no ``N x (B + 1)`` temporary)."""
        if self._buf is not None and self._nbuf:
            add_steps(self._counts, self._buf[:self._nbuf])
        self._nbuf = 0

    @property
    def counts(self) -> np.ndarray:
        """``(N, B + 1)`` array: steps of each example per sensitivity bucket (column 0: no
        loss, column j: ratio rounded up to ``j / B``)."""
        self._flush()
        return self._counts

    def step_many(self, grad_norms) -> None:
        """Record several steps at once: ``grad_norms`` of shape ``(N, T)``."""
        g = np.asarray(grad_norms)
        if g.ndim != 2 or g.shape[0] != self.n_examples:
            raise ValueError(f"grad_norms must have shape ({self.n_examples}, T), got "
                             f"{g.shape}")
        for s in range(g.shape[1]):
            self.step(g[:, s])

    def _log(self, msg: str) -> None:
        logger.info("individual: %s", msg)
