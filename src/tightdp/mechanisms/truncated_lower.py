"""The dominated pair of truncated Poisson sampling (the lower side of
:class:`~tightdp.mechanisms.truncated.TruncatedPoisson`): the real mechanism on one pair of
neighbouring datasets, its output binned.

The datasets: the ``n - 1`` common records contribute ``-c u`` and the differing record
``+c e`` (against absent under add/remove, against ``-c e`` under replace-one), ``c`` the
sensitivity, ``e`` and ``u`` unit vectors at an angle ``theta``. With ``M ~ Binomial(n - 1,
q)`` the others drawn and the record drawn with probability ``q`` (independently), the batch
holds the record (``a = 1``) or not (``a = 0``) and ``b`` others, with this law of ``(a, b)``:

* without the record, or not drawn: ``(0, min(M, B))``;
* drawn with ``M < B``: ``(1, M)``;
* drawn with ``M >= B``: the ``M + 1`` drawn are cut to a uniformly random ``B``, which keeps
  the record with probability ``B / (M + 1)``: ``(1, B - 1)``, else ``(0, B)``. The kept
  weight is ``q E[B / (M + 1); M >= B] = (B / n) P(Binomial(n, q) > B)`` (the identity of
  :func:`~tightdp.mechanisms.truncated.truncation_probabilities`), the other
  ``q P(M >= B)`` minus it.

The batch sum is ``a r c e - b c u`` plus isotropic Gaussian noise ``sigma`` (``r`` the
record's sign); in the orthonormal basis ``(u, w)`` of the plane of ``e`` and ``u`` it is
``(a r c cos(theta) - b c, a r c sin(theta))``: a product of Gaussians per component, so a
cell of a product grid has mass ``sum_a A_a(x_w-cell) U_a(x_u-cell)``, with ``A_a`` the mass
of one Gaussian and ``U_a`` that of a mixture over ``b`` (both exact in log space,
:mod:`tightdp.losses.binned`). Binning needs no monotone likelihood ratio and is a
post-processing: the binned pair is dominated by the mechanism's tight pair, under
composition too.

``theta = 0`` (one axis): truncated batches pile up at ``-c B``, where the kept record moves
the sum by ``2 c`` -- the upper pair's cut component, reached when the count is nearly
certain to exceed ``B``; elsewhere the others' random count masks the record.
``theta = pi/2``: the ``w`` axis shows the record as the Poisson pair at its inclusion
probability does (that pair is a post-processing of this one) and the ``u`` axis the count,
which tells a displaced record. :func:`lower_pair` builds both and keeps the one of larger
Kullback-Leibler divergence (any of them is a valid lower side).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy.special import ndtri

from .. import _validate as v
from .._numerics import MACHINE_EPSILON, log_sub_exp
from ..losses import PrivacyLoss
from ..losses.binned import (
    LOG_TINY,
    bin_log_masses,
    gaussian_mixture_log_cdfs,
    losses_of_masses,
    merged_cells,
)
from ..roots import bisect_int
from .base import Mechanism

__all__ = ["TruncatedPoissonLowerPair", "batch_count_law", "lower_pair"]

#: the laws keep the counts whose probability is at least this over ``n + 1``: the dropped
#: ones hold together less than the rounding of any cell (each holds ``e^LOG_TINY`` or more)
_LOG_COUNT_FLOOR = LOG_TINY + math.log(MACHINE_EPSILON / 8.0)
#: the grid spans the laws but for normal tails of 1e-30 (they stay in the end cells)
_TAIL_Z = -float(ndtri(1e-30))
#: the cell width aimed at per unit of rtol (times sigma^2 / c: a loss step of about 8 rtol
#: at the slope c / sigma^2 of one record), the most cells, the fewest bins of the count
#: axis, and the most (mixture component, edge) evaluations (bounds of time and memory)
_STEP_PER_RTOL, _CELLS_MAX, _BINS_MIN, _EVALS_MAX = 8.0, 250_000, 64, 4_000_000


def _count_window(q: float, m: int, n: int) -> tuple[int, int]:
    """The counts ``j`` of ``Binomial(m, q)`` whose probability is at least
    ``e^_LOG_COUNT_FLOOR / (n + 1)``: an interval around the mode (the law is unimodal), its
    ends found by :func:`~tightdp.roots.bisect_int`."""
    from scipy.stats import binom

    if q >= 1.0 or m == 0:
        return m, m
    floor = _LOG_COUNT_FLOOR - math.log(n + 1.0)
    mode = min(m, int(math.floor((m + 1) * q)))

    def above(j: int) -> bool:
        return j <= m and float(binom.logpmf(j, m, q)) >= floor

    lo = 0 if above(0) else bisect_int(lambda j: not above(j), 0, mode)[1]
    return lo, bisect_int(above, mode, m + 1)[0]


def batch_count_law(q: float, batch: int, n: int, *, present: bool
                    ) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """The law of ``(a, b)`` of the module docstring: for ``a = 0`` and ``a = 1``, the counts
    ``b`` and their log probabilities (``present``: the dataset holds the record; else
    ``a = 0`` always, and the second pair is empty). Counts ``M < B`` outside
    :func:`_count_window` are dropped (less than the rounding of a cell)."""
    from scipy.stats import binom

    lo, hi = _count_window(q, n - 1, n)
    j = np.arange(lo, min(hi, batch - 1) + 1, dtype=float)
    with np.errstate(divide="ignore"):   # binom.pmf is the more accurate where it is normal
        pmf = binom.pmf(j, n - 1, q)
        lpmf = np.where(pmf > 1e-300, np.log(pmf), binom.logpmf(j, n - 1, q))
        log_cut = float(binom.logsf(batch - 1, n - 1, q))        # log P(M >= B)
        lq, l1q = math.log(q), float(np.log1p(-q))
    b0 = np.append(j, float(batch))
    w0 = np.append(lpmf, log_cut)
    if not present:
        return (b0, w0), (np.zeros(0), np.zeros(0))
    kept = math.log(batch / n) + float(binom.logsf(batch, n, q))
    w0 = w0 + l1q
    w0[-1] = np.logaddexp(w0[-1], log_sub_exp(np.array(lq + log_cut), np.array(kept)))
    return (b0, w0), (np.append(j, batch - 1.0), np.append(lpmf + lq, kept))


class TruncatedPoissonLowerPair(Mechanism):
    """The binned pair of the module docstring: noise ``sigma``, sensitivity
    ``sensitivity``, rate ``sampling_rate``, at most ``max_batch_size`` kept of
    ``dataset_size`` records, the others at angle ``theta`` to the record, the plane binned
    into cells of side ``width`` (one cell across the ``w`` axis where ``sin(theta) = 0``).
    Remove direction (with the record, without it), add direction the reverse."""

    def __init__(self, sigma: float, sensitivity: float, sampling_rate: float,
                 max_batch_size: int, dataset_size: int, width: float, *, theta: float = 0.0,
                 neighboring: str = "add_or_remove_one"):
        self.sigma = v.positive("sigma", sigma)
        self.sensitivity = v.positive("sensitivity", sensitivity)
        self.sampling_rate = v.probability_open_closed("sampling_rate", sampling_rate)
        self.max_batch_size = v.count("max_batch_size", max_batch_size, minimum=1)
        self.dataset_size = v.count("dataset_size", dataset_size, minimum=1)
        self.width = v.positive("width", width)
        self.theta = float(theta)
        if not 0.0 <= self.theta <= math.pi / 2:
            raise ValueError(f"theta must be in [0, pi/2], got {theta!r}")
        rel = v.neighboring("neighboring", neighboring)
        if rel == "replace_special":
            raise ValueError("neighboring: the truncated Poisson lower pair is defined under "
                             "add_or_remove_one or replace_one, got 'replace_special'")
        self.relations = (rel,)
        args = (self.sampling_rate, self.max_batch_size, self.dataset_size)
        self._p_law = batch_count_law(*args, present=True)
        self._q_law = batch_count_law(*args, present=rel == "replace_one")
        n_w, n_u, comps = self.sizes(self.width)
        if n_w * n_u > _CELLS_MAX or comps * (n_u + 1) > _EVALS_MAX:
            raise ValueError(f"width: {width!r} makes {n_w} x {n_u} cells of {comps} "
                             f"components (at most {_CELLS_MAX} cells and {_EVALS_MAX} "
                             "evaluations); take a larger width")

    def sizes(self, width: float) -> tuple[int, int, int]:
        """The numbers of cells across the ``w`` and ``u`` axes at cell side ``width``, and of
        mixture components of both laws."""
        cu, cw = self._shifts()
        b = np.concatenate([x[0] for x in (*self._p_law, *self._q_law)])
        span_u = self.sensitivity * (b.max() - b.min()) + 2.0 * (cu + _TAIL_Z * self.sigma)
        n_u = max(_BINS_MIN, math.ceil(span_u / width))
        n_w = 1 if cw == 0.0 else math.ceil(2.0 * (cw + _TAIL_Z * self.sigma) / width)
        return n_w, n_u, int(b.size)

    def _shifts(self) -> tuple[float, float]:
        """The record's offsets ``c cos(theta)`` on the ``u`` axis, ``c sin(theta)`` on ``w``."""
        c = self.sensitivity
        return (c, 0.0) if self.theta == 0.0 else (c * math.cos(self.theta),
                                                   c * math.sin(self.theta))

    def edges(self) -> tuple[np.ndarray, np.ndarray]:
        """The inner cell edges on the ``w`` axis and the ``u`` axis (:meth:`sizes`): ``1e-30``
        of normal tail beyond the extreme locations (no ``w`` edge where ``sin(theta) = 0``)."""
        cu, cw = self._shifts()
        z, c = _TAIL_Z * self.sigma, self.sensitivity
        n_w, n_u, _ = self.sizes(self.width)
        b = np.concatenate([x[0] for x in (*self._p_law, *self._q_law)])
        e_u = np.linspace(-c * b.max() - cu - z, cu - c * b.min() + z, n_u + 1)
        return (np.zeros(0) if cw == 0.0 else np.linspace(-cw - z, cw + z, n_w + 1)), e_u

    def _cells(self, law, sign: float, e_w: np.ndarray, e_u: np.ndarray) -> np.ndarray:
        """Log masses of the cells (``w`` index major) of one law: ``logaddexp`` over ``a`` of
        ``A_a + U_a`` (module docstring)."""
        cu, cw = self._shifts()
        c, s = self.sensitivity, self.sigma
        out = np.full((max(1, e_w.size + 1), e_u.size + 1), -math.inf)
        for a, (b, lw) in enumerate(law):
            if b.size == 0:
                continue
            u = bin_log_masses(*gaussian_mixture_log_cdfs(e_u, a * sign * cu - c * b, lw, s))
            w = (np.zeros(1) if e_w.size == 0 else bin_log_masses(
                *gaussian_mixture_log_cdfs(e_w, np.array([a * sign * cw]), np.zeros(1), s)))
            out = np.logaddexp(out, w[:, None] + u[None, :])
        return out.ravel()

    @functools.cached_property
    def _masses(self) -> tuple[np.ndarray, np.ndarray]:
        e_w, e_u = self.edges()
        return merged_cells(self._cells(self._p_law, 1.0, e_w, e_u),
                            self._cells(self._q_law, -1.0, e_w, e_u))

    def log_masses(self) -> tuple[np.ndarray, np.ndarray]:
        """Log masses of the cells under D (with the record) and D' (merged where light)."""
        return self._masses

    def kl(self) -> float:
        """The larger Kullback-Leibler divergence of the binned pair, over both directions."""
        lp, lq = self.log_masses()
        return float(max(np.sum(np.exp(lp) * (lp - lq)), np.sum(np.exp(lq) * (lq - lp))))

    def _build_losses(self) -> tuple[PrivacyLoss, PrivacyLoss]:
        return losses_of_masses(*self.log_masses())


def lower_pair(sigma: float, sensitivity: float, sampling_rate: float, max_batch_size: int,
               dataset_size: int, rtol: float, *, neighboring: str
               ) -> TruncatedPoissonLowerPair | None:
    """The pair of the larger Kullback-Leibler divergence of ``theta = 0`` and ``pi/2``
    (module docstring), cells of side ``8 rtol sigma^2 / c`` widened to the bounds of cells
    and evaluations; None where even the widest (64 bins across) exceeds them."""
    args = (sigma, sensitivity, sampling_rate, max_batch_size, dataset_size)
    best: tuple[float, TruncatedPoissonLowerPair] | None = None
    for theta in (0.0, math.pi / 2):
        try:   # the widest grid: refused where the components alone exceed the bounds
            probe = TruncatedPoissonLowerPair(*args, 1e3 * sigma, theta=theta,
                                              neighboring=neighboring)
        except ValueError:
            continue
        width = _STEP_PER_RTOL * rtol * sigma * sigma / sensitivity
        while True:
            n_w, n_u, comps = probe.sizes(width)
            if n_w * n_u <= _CELLS_MAX and comps * (n_u + 1) <= _EVALS_MAX:
                break
            width *= 1.25
        pair = TruncatedPoissonLowerPair(*args, width, theta=theta, neighboring=neighboring)
        kl = pair.kl()
        if best is None or kl > best[0]:
            best = (kl, pair)
    return None if best is None else best[1]
