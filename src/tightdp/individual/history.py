"""Per-example gradient-norm history of a DP-SGD run, stored as counts on a uniform
sensitivity grid (Koskela, Tobaben, Honkela 2023, "Individual Privacy Accounting with
Gaussian Differential Privacy", App. D.2): an ``N x (B + 1)`` integer array whatever the
number of steps."""

from __future__ import annotations

import numpy as np

from .. import _validate as v
from ..progress import logger

__all__ = ["NormHistory", "sensitivity_grid", "bucket_index"]


def sensitivity_grid(n_buckets: int) -> np.ndarray:
    """Uniform grid of sensitivity ratios ``c_j = j / n_buckets``, ``j = 1..n_buckets``
    (Koskela et al. 2023, App. D.2: a grid of noise ratios ``sigma / c_j``)."""
    n = v.count("n_buckets", n_buckets, minimum=1)
    g = np.arange(1, n + 1, dtype=float) / n
    g[-1] = 1.0
    return g


def bucket_index(ratios: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Index (1-based; 0 = no loss) of the smallest point of the uniform grid ``j / n`` that
    is >= each ratio (rounding the sensitivity *up*). NaN (unknown norm) goes to the top."""
    n = grid.size
    r = np.nan_to_num(np.asarray(ratios, dtype=float), nan=1.0)
    x = np.ceil(r * n)
    # correct by one where the rounding of r * n missed (x / n is exactly grid[x - 1])
    x += x / n < r
    x -= (x >= 2) & ((x - 1) / n >= r)
    return np.clip(x, 0, n).astype(np.int64)


class NormHistory:
    """Per-example gradient-norm history of a DP-SGD run, stored as bucket counts.

    Each step's ratio ``min(g_i, C) / C`` is rounded *up* to the uniform grid ``j / B``
    (App. D.2; rounding up can only increase the privacy loss, data-processing inequality) and
    counted: only an ``N x (B + 1)`` integer array is kept, whatever the number of steps.
    A NaN norm (unknown) is charged the full clipping norm.
    """

    def __init__(self, *, sampling_rate: float, noise_multiplier: float, clip_norm: float,
                 n_examples: int, n_buckets: int = 100):
        self.sampling_rate = v.probability_open_closed("sampling_rate", sampling_rate)
        self.noise_multiplier = v.positive("noise_multiplier", noise_multiplier)
        self.clip_norm = v.positive("clip_norm", clip_norm)
        self.n_examples = v.count("n_examples", n_examples, minimum=1)
        self.grid = sensitivity_grid(n_buckets)
        nb = self.grid.size + 1
        self._counts = np.zeros((self.n_examples, nb), dtype=np.int64)
        small = np.uint8 if nb <= 256 else np.uint16 if nb <= 65536 else np.int64
        self._buf = np.zeros((64, self.n_examples), dtype=small)  # step-major
        self._nbuf = 0
        self.n_steps = 0
        self._rows = np.arange(self.n_examples)
        self._base = self._rows * nb

    def step(self, grad_norms) -> None:
        """Record one step: ``grad_norms[i]`` is example ``i``'s gradient norm at this step's
        model (NaN = unknown, charged the full clipping norm)."""
        g = np.asarray(grad_norms, dtype=float)
        if g.shape != (self.n_examples,):
            raise ValueError(f"grad_norms must have shape ({self.n_examples},), got {g.shape}")
        if np.any(g < 0):
            raise ValueError("grad_norms must be >= 0 (NaN = unknown norm)")
        idx = bucket_index(np.minimum(g, self.clip_norm) / self.clip_norm, self.grid)
        self._buf[self._nbuf] = idx
        self._nbuf += 1
        self.n_steps += 1
        if self._nbuf == self._buf.shape[0]:
            self._flush()

    def _flush(self) -> None:
        """Add the buffered steps' bucket indices to the counts (bincounts of 8 steps)."""
        nb = self.grid.size + 1
        for s in range(0, self._nbuf, 8):
            flat = (self._base[None, :] + self._buf[s:min(s + 8, self._nbuf)]).ravel()
            self._counts += np.bincount(flat, minlength=self.n_examples * nb).reshape(
                self.n_examples, nb)
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
