"""Random allocation (balls in bins): each example takes part in ``selected`` of ``steps``
steps chosen uniformly, with the Gaussian mechanism at each step; known by a bracket of two
pairs (:meth:`RandomAllocation.bracket`)."""

from __future__ import annotations

import functools
import math

import numpy as np

from .. import _validate as v
from .._defaults import DEFAULT_RTOL
from ..losses import PrivacyLoss
from ..losses.allocation import allocation_lattice, lower_pair, upper_pair
from .allocation_replace import AllocationReplaceOne
from .base import Bracket, Mechanism, location_loss_scale, tv_lipschitz
from .basic import Gaussian, PureDP
from .fields import base_field, mechanism_to_dict

__all__ = ["RandomAllocation"]

_RELATIONS = ("add_or_remove_one", "replace_special")

#: below this noise (over the sensitivity) the likelihood ratios exp((x - 1/2) / sigma^2) of
#: the lattice overflow the doubles: the bracket is then no amplification above (each example
#: in ``selected`` steps of an epoch: the Gaussian of sensitivity sqrt(selected)) and 0 below
SIGMA_LATTICE_MIN = 0.05
_FALLBACK_GAP = (f"noise multiplier below {SIGMA_LATTICE_MIN} (over the sensitivity): the "
                 "allocation lattice is beyond floating point; the upper bound is no "
                 "amplification (one Gaussian of sensitivity sqrt(selected) per epoch), the "
                 "lower bound 0")


@functools.lru_cache(maxsize=4)
def _lattice(sigma: float, steps: int, selected: int, rtol: float, with_p: bool):
    """The lattice laws shared by the two sides of one allocation (computed once)."""
    return allocation_lattice(sigma, steps, selected, rtol, with_p=with_p)


class _AllocationSide(Mechanism):
    """One side of :meth:`RandomAllocation.bracket`: an ordinary mechanism whose pair is the
    dominating (``side="upper"``, one of ``steps`` with ``selected = 1``: up to the slack of
    :meth:`tv_slack`; ``side="dominating"``: with none) or the dominated (``side="lower"``,
    up to its slack) pair of :mod:`tightdp.losses.allocation`, built on first use of its
    losses. ``sigma`` is the noise over the sensitivity."""

    relations = _RELATIONS

    def __init__(self, sigma: float, steps: int, selected: int, rtol: float, side: str, *,
                 shared: bool = True):
        self.sigma, self.steps, self.selected = sigma, steps, selected
        self.rtol, self.side, self.shared = rtol, side, shared

    @property
    def loss_scale(self) -> float:
        """That of the Gaussian pair of sensitivity ``sqrt(selected)`` (which dominates):
        :func:`location_loss_scale`."""
        return location_loss_scale("gaussian", math.sqrt(self.selected), self.sigma)

    def _build_losses(self) -> tuple[PrivacyLoss, PrivacyLoss]:
        # the P-law for the lower side, and for the upper one where a lower side of the
        # same lattice shares it (selected = 1)
        lat = _lattice(self.sigma, self.steps, self.selected, self.rtol,
                       self.side != "upper" or self.shared)
        if self.side == "lower":
            losses, self._slack = lower_pair(lat)
        else:
            losses, self._slack = upper_pair(lat, self.steps,
                                             pointwise=self.side == "dominating")
        return losses

    def tv_slack(self, epsilon):
        """The slack of this side's computed pair per application (``Bracket.upper_slack``
        / ``lower_slack``) from ``(eta_P, eta_Q)`` of :mod:`tightdp.losses.allocation`.
        Lower: :func:`tv_lipschitz`. Upper: the pair is a law ``nu`` of ``s`` under Q with
        P ``= nu s/t``, and the error ``e`` of ``nu`` moves the remove direction's delta of
        any composition by at most ``sum |e| s/t`` (``eta_P``: its integrand is at most
        ``s/t`` times the other factors' P-mass) and the add direction's by at most
        ``sum |e|`` (``eta_Q``: its integrand is at most the other factors' mass), for every
        epsilon: the larger of the two."""
        self.privacy_losses()
        eta_p, eta_q = self._slack
        if self.side == "lower":
            return tv_lipschitz(eta_p, eta_q, epsilon)
        return np.full(np.shape(epsilon), max(eta_p, eta_q))


class RandomAllocation(Mechanism):
    """One epoch of random allocation: every example takes part in exactly ``selected`` of
    the ``steps`` steps, chosen uniformly and independently across examples (Feldman &
    Shenfeld 2025, "Privacy amplification by random allocation", arXiv 2502.08202; Chua et
    al. 2025, "Balls-and-bins sampling for DP-SGD", arXiv 2412.16802; Dong et al. 2025,
    arXiv 2503.03043), each step the Gaussian mechanism ``base``. Compose it once per
    epoch.

    Remove direction: ``P = C(t,k)^-1 sum_{|S|=k} N(c 1_S, s^2 I)`` against
    ``Q = N(0, s^2 I)`` on ``R^t``; add direction: the reversed pair (as
    :class:`PoissonSubsampled` names them). Defined under add/remove and replace-special.

    Known by a bracket (:meth:`bracket`). For ``selected = 1`` both sides come from the law
    of the sum of the coordinates' likelihood ratios (:mod:`tightdp.losses.allocation`) and
    converge to the exact curve. For ``selected > 1`` the upper side is the
    ``selected``-fold composition of one of ``floor(steps / selected)`` (Feldman & Shenfeld
    2025, Thm. 4.3 / Cor. 4.4), the lower side the exact mechanism post-processed, and the
    bracket's ``gap`` says the two need not meet. Both sides carry their numerical error
    as a slack on delta (``Bracket.upper_slack`` / ``lower_slack``). ``privacy_losses()``
    is, for ``selected = 1``, the upper side's pair with the error taken off every point
    instead (dominating as it is, wider), and for ``selected > 1`` the Gaussian pair of
    sensitivity ``sqrt(selected) c`` (the worst subset, which dominates the mixture by
    joint convexity).
    """

    relations = _RELATIONS

    def __init__(self, base: Mechanism, steps: int, selected: int = 1):
        if not isinstance(base, Gaussian):
            raise ValueError(f"base must be a Gaussian mechanism for RandomAllocation, "
                             f"got {base!r}")
        self.base = base
        self.steps = v.count("steps", steps, minimum=1)
        self.selected = v.count("selected", selected, minimum=1)
        if self.selected > self.steps:
            raise ValueError(f"selected must be an integer in [1, steps={self.steps}], got "
                             f"{selected!r}")

    def under(self, relation: str) -> Mechanism:
        """``self``, or under ``"replace_one"`` :class:`AllocationReplaceOne` (a bracket of
        its own: :mod:`tightdp.mechanisms.allocation_replace`)."""
        return AllocationReplaceOne(self) if relation == "replace_one" else self

    @property
    def _sigma(self) -> float:
        return self.base.sigma / self.base.sensitivity

    def bracket(self, rtol: float) -> Bracket:
        """(upper, lower, gap) resolved for relative width ``rtol``; built lazily: the
        lattice is computed on first use of either side's losses."""
        s, t, k = self._sigma, self.steps, self.selected
        if t == k:   # every example in every step: the Gaussian of sensitivity sqrt(k)
            g = Gaussian(s, math.sqrt(k))
            return Bracket(g, g, "")
        if s < SIGMA_LATTICE_MIN:   # likelihood ratios beyond the doubles: no amplification
            return Bracket(Gaussian(s, math.sqrt(k)), PureDP(0.0), _FALLBACK_GAP)
        # with a gap (k > 1) the lower side need not resolve beyond it: a coarser lattice
        lower = _AllocationSide(s, t, k, rtol if k == 1 else 4.0 * rtol, "lower")
        upper = _AllocationSide(s, t // k, 1, rtol, "upper", shared=k == 1)
        # no amplification dominates an epoch too (joint convexity): the answers take the
        # smaller upper bound, the fallback's where the lattice's slack exceeds delta
        fallback = Gaussian(s, math.sqrt(k))
        if k == 1:
            return Bracket(upper, lower, "", lower_slack=lower.tv_slack,
                           upper_slack=upper.tv_slack, upper_fallback=fallback)
        gap = (f"the upper side is the {k}-fold composition of one of {t // k} steps (Feldman "
               f"& Shenfeld 2025), not tight; the lower side is the exact mechanism "
               f"post-processed")
        return Bracket(upper, lower, gap, upper_count=k, lower_slack=lower.tv_slack,
                       upper_slack=upper.tv_slack, upper_fallback=fallback)

    @property
    def loss_scale(self) -> float:
        """That of the Gaussian pair of sensitivity ``sqrt(selected) c``
        (:func:`location_loss_scale`)."""
        return location_loss_scale("gaussian", math.sqrt(self.selected) * self.base.sensitivity,
                                   self.base.sigma)

    def _build_losses(self) -> tuple[PrivacyLoss, PrivacyLoss]:
        if self.selected == 1 < self.steps and self._sigma >= SIGMA_LATTICE_MIN:
            # a pair dominating as it is (no slack to carry)
            return _AllocationSide(self._sigma, self.steps, 1, DEFAULT_RTOL / 4.0,
                                   "dominating").privacy_losses()
        return Gaussian(self._sigma, math.sqrt(self.selected)).privacy_losses()

    def __repr__(self) -> str:
        return (f"RandomAllocation({self.base!r}, steps={self.steps}, "
                f"selected={self.selected})")

    FIELDS = ("base", "steps", "selected")

    def to_dict(self) -> dict:
        """The fields of a state file (:mod:`tightdp.mechanisms.fields`)."""
        return {"base": mechanism_to_dict(self.base), "steps": self.steps,
                "selected": self.selected}

    @classmethod
    def from_dict(cls, params: dict, path: str) -> RandomAllocation:
        """The mechanism of the fields of :meth:`to_dict`, each checked (an error names
        the field as ``path.name``)."""
        base = base_field(params, path, ("Gaussian",), "RandomAllocation")
        steps = v.count(f"{path}.steps", params["steps"], minimum=1)
        selected = v.count(f"{path}.selected", params["selected"], minimum=1)
        if selected > steps:
            raise ValueError(f"{path}.selected must be an integer in [1, steps={steps}], "
                             f"got {selected!r}")
        return cls(base, steps, selected)

    def scaled(self, factor: float) -> RandomAllocation:
        """The mechanism with the base's noise multiplied by ``factor``."""
        return RandomAllocation(self.base.scaled(factor), self.steps, self.selected)
