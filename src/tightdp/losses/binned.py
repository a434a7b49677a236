"""Binned pairs: the privacy loss of a 1-D output binned on a grid, a post-processing of the
mechanism that needs no monotone likelihood ratio. The two laws are given by their log CDF
and log survival function at the bin edges; each bin's mass is exact (a difference taken in
log space on the side where it is small), and bins too light to hold normal doubles are
merged with their neighbours (merging is a post-processing too). Used by the dominated pairs
of shuffling and of truncated Poisson sampling."""

from __future__ import annotations

import math

import numpy as np
from scipy.special import log_ndtr, logsumexp

from .._numerics import log_sub_exp
from .base import PrivacyLoss
from .discrete import DiscreteLoss

__all__ = ["LOG_TINY", "bin_log_masses", "merged_bins", "merged_cells", "binned_losses",
           "losses_of_masses", "gaussian_mixture_log_cdfs"]

#: every bin of a binned pair holds at least e^-700 under both laws (normal doubles, so
#: that the masses and the losses ``log p - log q`` agree), bins merged until it does
LOG_TINY = -700.0
#: the largest number of (component, point) pairs one call of
#: :func:`gaussian_mixture_log_cdfs` evaluates at a time (bounds its temporary arrays)
_CHUNK = 1_000_000


def bin_log_masses(lc: np.ndarray, ls: np.ndarray) -> np.ndarray:
    """Log masses of the bins ``(-inf, e_0], (e_0, e_1], ..., (e_K, inf)`` from the log CDF
    ``lc`` and log survival function ``ls`` at the edges, each difference taken on the side
    where it is small (relative accuracy in both tails)."""
    use_sf = ls[:-1] < math.log(0.5)
    mid = np.where(use_sf, log_sub_exp(ls[:-1], ls[1:]), log_sub_exp(lc[1:], lc[:-1]))
    return np.concatenate([lc[:1], mid, ls[-1:]])


def merged_bins(lp: np.ndarray, lq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Consecutive bins merged (a post-processing) until each holds at least
    ``e^LOG_TINY`` under both laws; a short remainder joins the last bin."""
    if lp.min() >= LOG_TINY and lq.min() >= LOG_TINY:
        return lp, lq
    out_p: list[float] = []
    out_q: list[float] = []
    ap = aq = -math.inf
    for a, b in zip(lp.tolist(), lq.tolist(), strict=True):
        ap, aq = np.logaddexp(ap, a), np.logaddexp(aq, b)
        if ap >= LOG_TINY and aq >= LOG_TINY:
            out_p.append(float(ap))
            out_q.append(float(aq))
            ap = aq = -math.inf
    if not out_p:
        return np.array([0.0]), np.array([0.0])
    out_p[-1], out_q[-1] = float(np.logaddexp(out_p[-1], ap)), float(np.logaddexp(out_q[-1], aq))
    return np.array(out_p), np.array(out_q)


def binned_losses(p_cdfs: tuple[np.ndarray, np.ndarray], q_cdfs: tuple[np.ndarray, np.ndarray]
                  ) -> tuple[PrivacyLoss, PrivacyLoss]:
    """The (P, Q) and (Q, P) losses of two laws binned at one set of edges, each law given by
    ``(log CDF, log SF)`` at the edges: the exact bin masses (:func:`bin_log_masses`),
    merged where light (:func:`merged_bins`), as :class:`DiscreteLoss` pairs."""
    return losses_of_masses(*merged_bins(bin_log_masses(*p_cdfs), bin_log_masses(*q_cdfs)))


def merged_cells(lp: np.ndarray, lq: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The cells of a partition (in any order) that hold less than ``e^LOG_TINY`` under
    either law merged into one (their union: a post-processing), which joins the cell of
    the largest P-mass if it is itself that light."""
    light = (lp < LOG_TINY) | (lq < LOG_TINY)
    if not light.any():
        return lp, lq
    mp, mq = float(logsumexp(lp[light])), float(logsumexp(lq[light]))
    lp, lq = lp[~light], lq[~light]
    if mp >= LOG_TINY and mq >= LOG_TINY or lp.size == 0:
        return np.append(lp, mp), np.append(lq, mq)
    k = int(np.argmax(lp))
    lp[k], lq[k] = np.logaddexp(lp[k], mp), np.logaddexp(lq[k], mq)
    return lp, lq


def losses_of_masses(lp: np.ndarray, lq: np.ndarray) -> tuple[PrivacyLoss, PrivacyLoss]:
    """The (P, Q) and (Q, P) :class:`DiscreteLoss` of two laws on one partition, given by
    their log masses (each at least ``e^LOG_TINY``: :func:`merged_bins`, :func:`merged_cells`)."""
    p, q = np.exp(lp), np.exp(lq)
    return DiscreteLoss(lp - lq, p, q), DiscreteLoss(lq - lp, q, p)


def gaussian_mixture_log_cdfs(x: np.ndarray, locs: np.ndarray, log_weights: np.ndarray,
                              sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """``log P(X <= x)`` and ``log P(X > x)`` of the mixture ``sum_k w_k N(locs_k, sigma^2)``
    (``log_weights``: ``log w_k``, summing to 0): ``log sum_k w_k Phi((x - m_k)/sigma)`` and
    the same with ``Phi(-(x - m_k)/sigma)``, each a log-sum-exp of ``log_ndtr`` terms, so
    both tails keep their relative accuracy. Components are taken in chunks of
    ``_CHUNK`` evaluations."""
    x = np.asarray(x, dtype=float)
    locs, lw = np.asarray(locs, dtype=float), np.asarray(log_weights, dtype=float)
    lc = np.full(x.shape, -math.inf)
    ls = np.full(x.shape, -math.inf)
    step = max(1, _CHUNK // max(1, x.size))
    for i in range(0, locs.size, step):
        z = (x[None, :] - locs[i:i + step, None]) / sigma
        w = lw[i:i + step, None]
        lc = np.logaddexp(lc, logsumexp(w + log_ndtr(z), axis=0))
        ls = np.logaddexp(ls, logsumexp(w + log_ndtr(-z), axis=0))
    return lc, ls
