"""Privacy loss random variables (PLRVs), the one thing every mechanism has to provide.

For an ordered pair of output distributions (P, Q) the privacy loss of an output o is
``Y(o) = log P(o)/Q(o)``. A :class:`PrivacyLoss` describes the law of ``Y`` under P and
under Q, the way ``scipy.stats`` describes a distribution: CDF and survival function, each
with a log-space variant that stays accurate where probabilities are 1e-300, plus the mass
``P(Y = +inf)`` (outputs Q cannot produce) and ``Q(Y = -inf)``.

Everything the accountants need is derived from these four functions:

* the hockey-stick divergence of one application, ``delta(eps) = P(Y > eps) - e^eps Q(Y > eps)``
  (Koskela et al. 2020, Lemma 5 / eq. (4.2); Gopi et al. 2021, Prop. 2.4);
* the probabilities of loss bins ``P(a < Y <= b)`` and ``Q(a < Y <= b)`` from which the
  discretizers build dominating and dominated pairs on a grid (``tightdp.pld.discretize``).

Conventions: ``p_sf`` includes the mass at +inf; ``q_cdf`` includes Q's mass at -inf;
``p_cdf`` and ``q_sf`` are over finite losses only.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .._numerics import BracketError, bisect, expand_bracket, log_sub_exp

__all__ = ["PrivacyLoss", "bin_masses_from_logs", "delta_from_logs", "log_bin_masses"]

_LOG_HALF = math.log(0.5)


class PrivacyLoss:
    """Law of the privacy loss ``Y = log P(o)/Q(o)`` under P and under Q.

    Subclasses implement the four log-space functions and set ``inf_mass``,
    ``neg_inf_mass`` and ``support`` (closure of the finite loss values).
    """

    @functools.cached_property
    def tables(self) -> dict:
        """Per-loss memo of derived tables (e.g. the quadrature nodes of
        :func:`tightdp.losses.cgf.cgf`, keyed by their parameters): computed once per loss
        object, dropped with it. Not state: a copy may start empty."""
        return {}

    def __getstate__(self) -> dict:
        """Pickle/deepcopy state without :attr:`tables` (rebuilt on first use)."""
        state = self.__dict__.copy()
        state.pop("tables", None)
        return state

    #: P(Y = +inf): the mass of outputs that only P can produce.
    inf_mass: float = 0.0
    #: Q(Y = -inf): the mass of outputs that only Q can produce.
    neg_inf_mass: float = 0.0
    #: smallest and largest finite loss value (may be -inf / +inf for unbounded losses).
    support: tuple[float, float] = (-math.inf, math.inf)

    # --- to implement -------------------------------------------------------------------------
    def logp_cdf(self, y: np.ndarray) -> np.ndarray:
        """log P(Y <= y) over finite losses."""
        raise NotImplementedError

    def logp_sf(self, y: np.ndarray) -> np.ndarray:
        """log P(Y > y), including the mass at +inf."""
        raise NotImplementedError

    def logq_cdf(self, y: np.ndarray) -> np.ndarray:
        """log Q(Y <= y), including Q's mass at -inf."""
        raise NotImplementedError

    def logq_sf(self, y: np.ndarray) -> np.ndarray:
        """log Q(Y > y)."""
        raise NotImplementedError

    # --- derived ------------------------------------------------------------------------------
    def p_cdf(self, y):
        return np.exp(self.logp_cdf(np.asarray(y, dtype=float)))

    def p_sf(self, y):
        return np.exp(self.logp_sf(np.asarray(y, dtype=float)))

    def q_cdf(self, y):
        return np.exp(self.logq_cdf(np.asarray(y, dtype=float)))

    def q_sf(self, y):
        return np.exp(self.logq_sf(np.asarray(y, dtype=float)))

    def bin_masses(self, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """P- and Q-probabilities of the loss bins ``(edges[i], edges[i+1]]``.

        Each difference is taken on the side (CDF or survival function) where it is small,
        so that tail bins keep their relative accuracy.
        """
        return self.bin_masses_from(*self.log_cdfs(edges))

    def log_cdfs(self, points: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``log P(Y <= y)``, ``log P(Y > y)``, ``log Q(Y <= y)`` and ``log Q(Y > y)`` at the
        points: what :meth:`bin_masses_from` turns into the masses of the bins between
        consecutive points (a caller may evaluate them once on a fine grid and take the bins
        of a coarser one from every other point)."""
        e = np.asarray(points, dtype=float)
        lpc, lps = self.logp_cdf(e), self.logp_sf(e)
        lqc, lqs = self.logq_cdf(e), self.logq_sf(e)
        return lpc, lps, lqc, lqs

    def bin_masses_from(self, lpc: np.ndarray, lps: np.ndarray, lqc: np.ndarray,
                        lqs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`bin_masses` from the values of :meth:`log_cdfs` at the edges."""
        return bin_masses_from_logs(lpc, lps, lqc, lqs)

    def log_q_bin_masses(self, edges: np.ndarray) -> np.ndarray:
        """log of the Q-probabilities of the bins ``(edges[i], edges[i+1]]``: where the loss
        is large they are far below the smallest float (Q-mass ~ P-mass e^-y) while their
        ratio to the P-mass, which the discretizers need, is of order one."""
        e = np.asarray(edges, dtype=float)
        return self._log_diff(self.logq_cdf(e), self.logq_sf(e))

    @staticmethod
    def _log_diff(lc: np.ndarray, ls: np.ndarray) -> np.ndarray:
        return log_bin_masses(lc, ls)

    @classmethod
    def _diff(cls, lc: np.ndarray, ls: np.ndarray, finite_top: float) -> np.ndarray:
        return np.maximum(np.exp(cls._log_diff(lc, ls)), 0.0)

    def delta(self, eps) -> np.ndarray:
        """Hockey-stick divergence of one application, ``P(Y > eps) - e^eps Q(Y > eps)``.

        Koskela et al. (2020), Lemma 5; evaluated in log space so that values down to 1e-300
        keep their relative accuracy.
        """
        eps = np.asarray(eps, dtype=float)
        return delta_from_logs(eps, self.logp_sf(eps), self.logq_sf(eps))

    def loss_quantile(self, log_mass: float, upper: bool) -> float:
        """A loss value ``y`` with ``P(Y > y) <= e^log_mass`` (upper) or
        ``P(Y <= y) <= e^log_mass`` (lower), found by a monotone search.

        The returned point is on the safe side: the tail beyond it holds at most the mass asked.
        Returns the support's end if that is finite and already satisfies the condition.
        """
        lo, hi = self.support
        end, other = (hi, lo) if upper else (lo, hi)
        if math.isfinite(end):
            # upper: finite mass above hi is zero; the +inf mass cannot be cut by any finite y
            return end
        if upper:
            def tail(y: float) -> float:
                return float(self.log_finite_sf(y))
        else:
            def tail(y: float) -> float:
                return float(self.logp_cdf(np.asarray(y)))

        # walk outwards from 0 (or the other end of the support) by doubling steps until
        # the tail beyond is small enough, then bisect, keeping the end on the safe side
        # (the outer one: the tail beyond it holds at most the mass asked)
        start = other if math.isfinite(other) else 0.0
        sign = 1.0 if upper else -1.0
        try:
            inner, outer = expand_bracket(lambda y: tail(y) > log_mass, start, sign,
                                          limit=1e300, what="the loss quantile")
        except BracketError as e:  # (the limit is far out: losses reach 5e7 at sigma 1e-4)
            return e.last
        if upper:
            return bisect(lambda y: tail(y) > log_mass, inner, outer, keep="hi", xtol=1e-9)
        return bisect(lambda y: not tail(y) > log_mass, outer, inner, keep="lo", xtol=1e-9)

    def log_finite_sf(self, y: float) -> float:
        """log P(y < Y < inf): the survival function without the mass at +inf."""
        ls = float(self.logp_sf(np.asarray(y)))
        if self.inf_mass <= 0:
            return ls
        return float(log_sub_exp(np.asarray(ls), np.asarray(math.log(self.inf_mass))))


def log_bin_masses(lc: np.ndarray, ls: np.ndarray) -> np.ndarray:
    """log of the masses of the bins between consecutive points from the log CDF ``lc`` and
    log survival function ``ls`` there: ``cdf(b) - cdf(a) = sf(a) - sf(b)`` for the bin
    ``(a, b]``, taken as the survival functions' difference where the bin is in the upper
    half of the distribution and the CDFs' elsewhere (each difference where it is small, so
    that tail bins keep their relative accuracy)."""
    lo_c, hi_c = lc[:-1], lc[1:]
    lo_s, hi_s = ls[:-1], ls[1:]
    use_sf = lo_s < _LOG_HALF
    use_cdf = ~use_sf
    m = np.empty(use_sf.shape)
    with np.errstate(invalid="ignore"):
        m[use_sf] = log_sub_exp(lo_s[use_sf], hi_s[use_sf])  # each bin's one difference
        m[use_cdf] = log_sub_exp(hi_c[use_cdf], lo_c[use_cdf])
    m[np.isnan(m)] = -np.inf
    return m


def bin_masses_from_logs(lpc: np.ndarray, lps: np.ndarray, lqc: np.ndarray,
                         lqs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """P- and Q-masses of the bins between consecutive points from the values of
    :meth:`PrivacyLoss.log_cdfs` there (:func:`log_bin_masses`; the same for every loss,
    so the points of many losses may be passed side by side, the bins across two losses'
    points being ignored by the caller)."""
    return (np.maximum(np.exp(log_bin_masses(lpc, lps)), 0.0),
            np.maximum(np.exp(log_bin_masses(lqc, lqs)), 0.0))


def delta_from_logs(eps: np.ndarray, lp: np.ndarray, lq: np.ndarray) -> np.ndarray:
    """The hockey-stick divergence ``P(Y > eps) - e^eps Q(Y > eps)`` of :meth:`PrivacyLoss.delta`
    from ``lp = log P(Y > eps)`` and ``lq = log Q(Y > eps)`` (Koskela et al. 2020, Lemma 5),
    in log space."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        r = np.where(np.isneginf(lp), -np.inf, eps + lq - lp)
        val = np.exp(lp) * -np.expm1(np.minimum(r, 0.0))
    return np.where(np.isneginf(lp), 0.0, np.maximum(val, 0.0))
