"""Shuffled fixed batches: one epoch of DP-SGD on a random permutation of the data cut into
``steps`` batches of one size, reshuffled every epoch.

No dominating pair of this sampler is known that is tighter than no amplification at all, so
:class:`Shuffled` is a bracketed mechanism (:meth:`~tightdp.mechanisms.base.Mechanism.bracket`):

* upper: one Gaussian step per epoch. Given the permutation, the record sits in exactly one
  batch, so the epoch is an adaptive composition of Gaussian steps whose sensitivities are
  zero but for that batch's, ``C`` under replace-special and ``2 C`` under replace-one (``C``
  the clip norm): ``C / sigma``-GDP (Dong, Roth & Su 2022, Cor. 3.3). The permutation does not
  depend on the data, so the epoch is a mixture, with the same weights under both datasets,
  of such mechanisms, and the hockey-stick divergence is jointly convex. Chua et al. (ICML
  2024, arXiv 2403.17673, Sec. 4) note that no better certified bound is known.
* lower: the attack of Chua et al. (ICML 2024; NeurIPS 2024, arXiv 2411.04205): the other
  records' gradients are ``-C``, the record's ``+C`` against the null record (``0``,
  replace-special) or against ``-C`` (replace-one). Relative to the batch sum of ``b``
  records at ``-C``, the batch holding the record is shifted by ``2 C`` under D and by ``C``
  (replace-special) or ``0`` (replace-one) under D', every other batch by 0; the batch is
  uniform over the ``t`` positions. :class:`ShuffledMaxPair` is the largest noisy batch sum
  ``M = max_i x_i`` binned on a grid, a post-processing of that pair of neighbouring datasets.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy.optimize import minimize_scalar
from scipy.special import log_ndtr, ndtri

from .. import _validate as v
from ..losses import PrivacyLoss
from ..losses.base import delta_from_logs
from ..losses.binned import bin_log_masses, binned_losses, merged_bins
from ..losses.discrete import hockey_stick_charge
from .base import Bracket, Mechanism, location_loss_scale
from .basic import Gaussian
from .fields import base_field, choice, mechanism_to_dict

__all__ = ["Shuffled", "ShuffledMaxPair", "max_law_log_cdfs"]

#: the relations a shuffled epoch is accounted under (adding or removing a record moves the
#: batch boundaries of every record after it: no bound is known there)
_RELATIONS = ("replace_special", "replace_one")
#: the grid of the largest batch sum spans the laws but for tails of this mass (they stay in
#: the two end bins, so no mass is lost)
_LOG_TAIL = math.log(1e-30)
#: the number of bins of the lower pair, and the loss step it aims at per unit of rtol
_BINS_MIN, _BINS_MAX, _STEP_PER_RTOL = 64, 40_000, 8.0
#: the relative error, in units of roundoff, charged to a tail of the largest batch sum
_TAIL_ROUNDING = 64.0

_GAP = ("shuffled batches: the bracket is the present state of knowledge -- no certified "
        "upper bound better than no amplification (one Gaussian step per epoch) is known for "
        "shuffling, and the lower bound is the attack of Chua et al. (ICML 2024) on the "
        "largest noisy batch sum; the true value lies between")


def max_law_log_cdfs(m: np.ndarray, shift: float, sigma: float, steps: int
                     ) -> tuple[np.ndarray, np.ndarray]:
    """``log P(M <= m)`` and ``log P(M > m)`` for the largest ``M`` of ``steps`` independent
    normals of standard deviation ``sigma``, one of mean ``shift`` and the others of mean 0:
    ``P(M <= m) = Phi((m - shift)/sigma) Phi(m/sigma)^(steps-1)`` (independence; Chua et al.
    2024, Sec. 4). The survival function is ``-expm1`` of the log CDF, which keeps its
    relative accuracy where the CDF is near one (``log_ndtr`` is accurate there)."""
    m = np.asarray(m, dtype=float)
    lc = log_ndtr((m - shift) / sigma) + (steps - 1) * log_ndtr(m / sigma)
    with np.errstate(divide="ignore"):
        ls = np.log(-np.expm1(lc))
    return lc, ls


class ShuffledMaxPair(Mechanism):
    """The dominated pair of one shuffled epoch (the lower side of :class:`Shuffled`): the law
    of the largest of ``steps`` noisy batch sums on the datasets of Chua et al. (2024), whose
    batch holding the record is shifted by ``shift_p`` under D and ``shift_q`` under D'
    (others by 0), binned into ``bins`` intervals of one width between the points where both
    laws leave tails of ``1e-30`` (plus the two tail bins).

    Each bin's mass under both laws is exact (:func:`max_law_log_cdfs`, in log space), so the
    pair is that of a post-processing of the real mechanism on one pair of neighbouring
    datasets: a valid lower bound, under composition too (the epochs are independent given
    the datasets). Binning needs no monotone likelihood ratio. Remove direction (D, D'), add
    direction (D', D): the pair is not symmetric.
    """

    def __init__(self, sigma: float, shift_p: float, shift_q: float, steps: int, bins: int,
                 neighboring: str = "replace_special"):
        self.sigma = v.positive("sigma", sigma)
        self.shift_p = v.positive("shift_p", shift_p)
        self.shift_q = v.nonnegative("shift_q", shift_q)
        if self.shift_q >= self.shift_p:
            raise ValueError(f"shift_q must be in [0, shift_p={self.shift_p!r}), got {shift_q!r}")
        self.steps = v.count("steps", steps, minimum=1)
        self.bins = v.count("bins", bins, minimum=1)
        self.relations = (choice(neighboring, "neighboring", _RELATIONS),)

    def __repr__(self) -> str:
        return (f"ShuffledMaxPair(sigma={self.sigma!r}, shifts=({self.shift_p!r}, "
                f"{self.shift_q!r}), steps={self.steps}, bins={self.bins})")

    def edges(self) -> np.ndarray:
        """The inner bin edges: from where both CDFs are below the tail mass (both are at most
        ``Phi(m/sigma)^steps``, the shifts being >= 0) to where both survival functions are
        (at most ``steps Phi(-(m - shift_p)/sigma)``, a union bound)."""
        s, t = self.sigma, self.steps
        lo = s * float(ndtri(math.exp(_LOG_TAIL / t)))
        hi = self.shift_p - s * float(ndtri(math.exp(_LOG_TAIL) / t))
        return np.linspace(lo, hi, self.bins + 1)

    def log_masses(self) -> tuple[np.ndarray, np.ndarray]:
        """Log masses of the bins under D and D' (merged where one underflows)."""
        e = self.edges()
        lp = bin_log_masses(*max_law_log_cdfs(e, self.shift_p, self.sigma, self.steps))
        lq = bin_log_masses(*max_law_log_cdfs(e, self.shift_q, self.sigma, self.steps))
        return merged_bins(lp, lq)

    @functools.cached_property
    def _edge_tails(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The edges and ``log P(M > e)``, ``log Q(M > e)`` there."""
        e = self.edges()
        return (e, max_law_log_cdfs(e, self.shift_p, self.sigma, self.steps)[1],
                max_law_log_cdfs(e, self.shift_q, self.sigma, self.steps)[1])

    def _threshold_delta(self, eps: float, c: float) -> float:
        """``P(M > c) - e^eps Q(M > c)`` less its rounding (:func:`hockey_stick_charge`),
        the hockey-stick value of one threshold set. The tails are charged ``64 u``
        (relative): :func:`max_law_log_cdfs` sums two ``log_ndtr`` terms (the second times
        ``steps - 1``: one more rounding), and ``-expm1`` of a log CDF ``l`` has the
        relative error of ``l`` times ``|l| e^l / (1 - e^l) <= 1``."""
        lp = max_law_log_cdfs(np.array(c), self.shift_p, self.sigma, self.steps)[1]
        lq = max_law_log_cdfs(np.array(c), self.shift_q, self.sigma, self.steps)[1]
        charge = hockey_stick_charge(eps, lp, lq, _TAIL_ROUNDING)
        return float(delta_from_logs(np.array(eps), lp, lq) - charge)

    def single_delta_lower(self, eps) -> np.ndarray:
        """A certified lower bound on delta(eps) of one application: the larger of the
        binned pair's (:meth:`Mechanism.single_delta_lower`, both directions) and of the
        remove direction's threshold set ``{M > C}`` with ``C`` refined between the edges
        around the best edge (bounded Brent search): Chua et al.'s (2024, Sec. 4) sets with
        their threshold continuous, every ``C`` a valid test."""
        eps = np.asarray(eps, dtype=float)
        base = super().single_delta_lower(eps)
        out = np.array(base if base is not None else np.zeros(eps.shape), dtype=float)
        e, lsp, lsq = self._edge_tails
        flat = out.reshape(-1)
        for i, x in enumerate(eps.reshape(-1).tolist()):
            k = int(np.argmax(delta_from_logs(np.array(x), lsp, lsq)))
            a, b = e[max(k - 1, 0)], e[min(k + 1, e.size - 1)]
            if not b > a:
                continue
            res = minimize_scalar(lambda c, x=x: -self._threshold_delta(x, c), bounds=(a, b),
                                  method="bounded", options={"xatol": 1e-12 * (b - a)})
            flat[i] = max(flat[i], -float(res.fun))
        return out

    def _build_losses(self) -> tuple[PrivacyLoss, PrivacyLoss]:
        e = self.edges()
        return binned_losses(max_law_log_cdfs(e, self.shift_p, self.sigma, self.steps),
                             max_law_log_cdfs(e, self.shift_q, self.sigma, self.steps))


class Shuffled(Mechanism):
    """One epoch of ``steps`` fixed-size batches of a random permutation of the data (shuffled
    anew every epoch), each released as ``base`` (a Gaussian sum of per-record contributions
    clipped to norm ``base.sensitivity``, noise ``base.sigma``). Compose it once per epoch.

    Known by a bracket (module docstring): upper, one Gaussian step per epoch of sensitivity
    ``C`` (replace-special) or ``2 C`` (replace-one), ``C = base.sensitivity``; lower, the
    attack of Chua et al. (ICML 2024, arXiv 2403.17673; NeurIPS 2024, arXiv 2411.04205) as
    :class:`ShuffledMaxPair`. ``privacy_losses()`` are the upper pair's.

    Parameters
    ----------
    base : Gaussian
        The mechanism of one batch (``sensitivity``: the clip norm).
    steps : int
        The number of batches ``t`` of one epoch (>= 1).
    neighboring : {"replace_special", "replace_one"}
        The relation the pairs are stated under (accounted in an accountant of that
        relation): the record replaced by a null record contributing nothing, or by another
        record. Add/remove is not offered: it moves the batch boundaries.
    """

    def __init__(self, base: Mechanism, steps: int, *, neighboring: str = "replace_special"):
        if not isinstance(base, Gaussian):
            raise ValueError(f"base must be a Gaussian mechanism for Shuffled, got {base!r}")
        self.base = base
        self.steps = v.count("steps", steps, minimum=1)
        rel = v.neighboring("neighboring", neighboring)
        if rel not in _RELATIONS:
            raise ValueError("neighboring must be replace_special or replace_one for Shuffled "
                             "(adding or removing a record moves every later batch boundary; "
                             f"no bound is known there), got {neighboring!r}")
        self.neighboring = rel
        self.relations = (rel,)

    def __repr__(self) -> str:
        return (f"Shuffled(Gaussian(sigma={self.base.sigma!r}, "
                f"sensitivity={self.base.sensitivity!r}), steps={self.steps}, "
                f"neighboring={self.neighboring!r})")

    @property
    def sensitivity(self) -> float:
        """The epoch's L2 sensitivity: the clip norm, twice it under replace-one."""
        c = self.base.sensitivity
        return 2.0 * c if self.neighboring == "replace_one" else c

    @property
    def loss_scale(self) -> float:
        """That of the upper pair (:func:`location_loss_scale`); the lower pair's is smaller."""
        return location_loss_scale("gaussian", self.sensitivity, self.base.sigma)

    def upper(self) -> Gaussian:
        """The dominating mechanism: one Gaussian step per epoch (module docstring)."""
        return Gaussian(self.base.sigma, self.sensitivity)

    def lower(self, rtol: float) -> ShuffledMaxPair:
        """The dominated mechanism, binned so that the loss moves by about
        ``8 rtol`` per bin (at the loss's largest slope ``shift_p / sigma^2``), within
        [64, 40000] bins."""
        c, s = self.base.sensitivity, self.base.sigma
        shift_q = c if self.neighboring == "replace_special" else 0.0
        probe = ShuffledMaxPair(s, 2.0 * c, shift_q, self.steps, 1, self.neighboring)
        e = probe.edges()
        span = (e[-1] - e[0]) * 2.0 * c / (s * s)
        step = _STEP_PER_RTOL * v.positive("rtol", rtol)
        per_rtol = span / step   # inf (or nan) where the noise vanishes: the most bins
        bins = (int(max(math.ceil(per_rtol), _BINS_MIN)) if per_rtol < _BINS_MAX
                else _BINS_MAX)
        return ShuffledMaxPair(s, 2.0 * c, shift_q, self.steps, bins, self.neighboring)

    def bracket(self, rtol: float) -> Bracket:
        """The two sides (cheap: the pairs are built when an accountant asks for them)."""
        return Bracket(self.upper(), self.lower(rtol), _GAP)

    def _build_losses(self) -> tuple[PrivacyLoss, PrivacyLoss]:
        return self.upper().privacy_losses()

    FIELDS = ("base", "steps", "neighboring")

    def to_dict(self) -> dict:
        """The fields of a state file (:mod:`tightdp.mechanisms.fields`)."""
        return {"base": mechanism_to_dict(self.base), "steps": int(self.steps),
                "neighboring": self.neighboring}

    @classmethod
    def from_dict(cls, params: dict, path: str) -> Shuffled:
        """The mechanism of the fields of :meth:`to_dict`, each checked (an error names
        the field as ``path.name``)."""
        base = base_field(params, path, ("Gaussian",), "Shuffled")
        return cls(base, v.count(f"{path}.steps", params["steps"], minimum=1),
                   neighboring=choice(params["neighboring"], f"{path}.neighboring",
                                      _RELATIONS))

    def scaled(self, factor: float) -> Shuffled:
        """The mechanism with the base's noise ``sigma`` multiplied by ``factor``."""
        return Shuffled(self.base.scaled(factor), self.steps, neighboring=self.neighboring)
