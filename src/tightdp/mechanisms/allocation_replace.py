"""Random allocation under replace-one: the record ``x`` replaced by ``x'`` in the same slot.

With ``selected = 1`` (``k`` in general: the sum over ``k``-subsets), the record's steps are
one uniform coordinate ``i`` of ``R^t`` and the pair is ``P = (1/t) sum_i N(c e_i, s^2 I)``
against ``Q = (1/t) sum_i N(-c e_i, s^2 I)``. No tight dominating pair of it is known;
:class:`AllocationReplaceOne` is a bracketed mechanism
(:meth:`~tightdp.mechanisms.base.Mechanism.bracket`):

* lower: ``x' = 0`` (a record whose clipped gradient is zero: it takes part in its steps
  and adds nothing) gives exactly the add/remove pair of random allocation, both
  directions. So the add/remove bracket's lower mechanism is a replace-one lower bound as
  it is, its numerical slack included.
* upper: the better of two bounds, per epoch (:class:`ReplaceOneUpper`).
  No amplification: given the allocation (the same under D and D': the record and its
  replacement hold one slot), the epoch is an adaptive composition of Gaussian steps whose
  sensitivities are zero but for the record's ``k`` steps, ``2 c`` each (the two records
  at opposite ends of the clip ball): ``2 sqrt(k) c / s``-GDP (Dong, Roth & Su 2022,
  Cor. 3.3); the allocation does not depend on the data, so by joint convexity of the
  hockey-stick divergence the mixture is no worse. Group of two (``k = 1``): with ``R``
  the dataset whose record has a zero gradient (the add/remove "without" law), ``(D', R)``
  and ``(R, D)`` are add/remove pairs for ``x'`` and ``x``, dominated by the add/remove
  pair of random allocation (``RandomAllocation.privacy_losses()``, certified without
  slack) in its remove and add direction, for any ``x, x'`` in the clip ball; so
  ``T(D, D') >= g(1 - f(alpha))`` (Dong, Roth & Su 2022, group privacy, Thm. 2.14),
  realized per epoch as a discrete pair that composes
  (:func:`tightdp.losses.group.group_of_two`, with the no-amplification Gaussian's samples
  as a ceiling). The same pair bounds both orders of
  ``(D, D')`` (swap ``x`` and ``x'``).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from .. import _validate as v
from ..losses import PrivacyLoss
from ..losses.group import delta_upper, group_of_two
from .base import Bracket, Mechanism, location_loss_scale
from .basic import Gaussian
from .fields import check_object, mechanism_from_dict, mechanism_to_dict

__all__ = ["AllocationReplaceOne", "ReplaceOneUpper"]

_GAP = ("random allocation under replace-one: the upper bound is a group of two (the "
        "record removed, then its replacement added: Dong, Roth & Su 2022, group privacy) "
        "or, where smaller, no amplification (the record's steps at sensitivity 2 c), not "
        "tight; the lower bound is the add/remove pair (the replacement contributing "
        "zero); the true value lies between")

#: samples of each pair's profile per span for the group of two (losses.group): 2000 keep
#: the composed eps within 2e-4 of the exact group-of-two curve (tests)
GROUP_POINTS = 2000
#: the group pair is used where its profile is below the no-amplification one by this
#: factor somewhere (else the Gaussian, exact and cheaper to compose, is kept)
_BETTER = 0.999


@functools.lru_cache(maxsize=4)
def _group_losses(allocation: Mechanism) -> tuple[PrivacyLoss, PrivacyLoss] | None:
    """The group-of-two pair of ``allocation`` (``selected = 1``; module docstring), one
    loss for both orders, or None where it is nowhere below the no-amplification
    Gaussian's profile by the factor :data:`_BETTER`."""
    a: Any = allocation
    rem, add = a.privacy_losses()
    gauss = Gaussian(a.base.sigma, 2.0 * a.base.sensitivity).privacy_losses()[0]
    pair = group_of_two(rem, add, points=GROUP_POINTS, ceiling=gauss)
    eps = np.linspace(0.0, max(pair.support[1], 0.0), 512)
    dg = delta_upper(gauss, eps)
    if not np.any(pair.delta_upper(eps) < _BETTER * dg):
        return None
    return pair, pair


class ReplaceOneUpper(Mechanism):
    """The upper side of :class:`AllocationReplaceOne`'s bracket for ``selected = 1``: the
    group-of-two pair (module docstring; one loss for both orders of ``(D, D')``) where it
    is below no amplification, else the Gaussian of sensitivity ``2 c``; built on first
    use of its losses (shared by equal allocations)."""

    relations = ("replace_one",)

    def __init__(self, allocation: Any):
        self.allocation = allocation

    def _build_losses(self) -> tuple[PrivacyLoss, PrivacyLoss]:
        pair = _group_losses(self.allocation)
        return self._gaussian().privacy_losses() if pair is None else pair

    def _gaussian(self) -> Gaussian:
        a = self.allocation
        return Gaussian(a.base.sigma, 2.0 * a.base.sensitivity)

    @property
    def loss_scale(self) -> float:
        """That of the no-amplification Gaussian (:func:`location_loss_scale`): the pair's
        losses are no larger where its mass is (its tail is that Gaussian's)."""
        g = self._gaussian()
        return location_loss_scale("gaussian", g.sensitivity, g.sigma)

    def rdp(self, orders) -> np.ndarray:
        """The no-amplification Gaussian's Rényi DP (Mironov 2017, Prop. 7), an upper
        bound on the epoch's (module docstring); the group pair's is not computed."""
        return self._gaussian().rdp(orders)

    def gdp(self) -> tuple[float, bool]:
        """``(2 c / s, True)``: the epoch is ``2 c / s``-GDP (no amplification, module
        docstring), a certified bound (no CLT); the group pair's curve is not Gaussian."""
        return self._gaussian().gdp()


class AllocationReplaceOne(Mechanism):
    """One epoch of random allocation (``allocation``, a
    :class:`~tightdp.mechanisms.allocation.RandomAllocation`) stated under replace-one: the
    form ``RandomAllocation.under("replace_one")`` returns and an accountant built with
    ``neighboring="replace_one"`` composes.

    Known by a bracket (module docstring): upper, for ``selected = 1`` the group of two
    where it is below no amplification (:class:`ReplaceOneUpper`), else the Gaussian of
    sensitivity ``2 sqrt(selected) c`` (``c = base.sensitivity``), no amplification; lower,
    the add/remove bracket's lower mechanism (its slack carried). ``privacy_losses()`` are
    the upper pair's. With ``selected == steps`` there is no allocation: the pair is that Gaussian,
    exactly.

    Parameters
    ----------
    allocation : RandomAllocation
        The epoch: ``base`` (a Gaussian), ``steps``, ``selected``.
    """

    relations = ("replace_one",)

    def __init__(self, allocation: Any):
        if type(allocation).__name__ != "RandomAllocation":
            raise ValueError(f"allocation must be a RandomAllocation for "
                             f"AllocationReplaceOne, got {allocation!r}")
        self.allocation = allocation

    def __repr__(self) -> str:
        return f"AllocationReplaceOne({self.allocation!r})"

    def upper(self) -> Gaussian:
        """The no-amplification mechanism: one Gaussian of sensitivity
        ``2 sqrt(selected) c`` (dominating; the bracket's upper side for ``selected > 1``)."""
        a = self.allocation
        return Gaussian(a.base.sigma, 2.0 * math.sqrt(a.selected) * a.base.sensitivity)

    def bracket(self, rtol: float) -> Bracket:
        """(upper, lower, gap): above, for ``selected = 1`` the group of two or no
        amplification (:class:`ReplaceOneUpper`), else the no-amplification Gaussian (the
        group of two of the Gaussian pair of sensitivity ``sqrt(selected)`` is that
        Gaussian); below, the add/remove lower mechanism (and its slack) of
        ``allocation.bracket(rtol)``; no gap where every example is in every step
        (``selected == steps``: the Gaussian is exact). The group pair keeps the
        no-amplification Gaussian as its ``upper_fallback``: the answer takes the smaller
        upper bound, and the Gaussian's where a method refuses the group pair (its mass at
        +inf) or the pair's double-precision floor leaves it no finite bound."""
        a = self.allocation
        up: Mechanism = self.upper()
        if a.selected == a.steps:
            return Bracket(up, up, "")
        b = a.bracket(v.positive("rtol", rtol))
        if a.selected > 1:
            return Bracket(up, b.lower, _GAP, lower_slack=b.lower_slack)
        return Bracket(ReplaceOneUpper(a), b.lower, _GAP, lower_slack=b.lower_slack,
                       upper_fallback=up)

    @property
    def loss_scale(self) -> float:
        """That of the upper pair (:func:`location_loss_scale`)."""
        up = self.upper()
        return location_loss_scale("gaussian", up.sensitivity, up.sigma)

    def _build_losses(self) -> tuple[PrivacyLoss, PrivacyLoss]:
        a = self.allocation
        if a.selected == 1 < a.steps:
            return ReplaceOneUpper(a).privacy_losses()
        return self.upper().privacy_losses()

    FIELDS = ("allocation",)

    def to_dict(self) -> dict:
        """The fields of a state file (:mod:`tightdp.mechanisms.fields`)."""
        return {"allocation": mechanism_to_dict(self.allocation)}

    @classmethod
    def from_dict(cls, params: dict, path: str) -> AllocationReplaceOne:
        """The mechanism of the fields of :meth:`to_dict`, each checked (an error names
        the field as ``path.allocation``)."""
        inner = check_object(params["allocation"], f"{path}.allocation",
                             ("mechanism", "params"))
        if inner["mechanism"] != "RandomAllocation":
            raise ValueError(f"{path}.allocation.mechanism must be 'RandomAllocation' for "
                             f"AllocationReplaceOne, got {inner['mechanism']!r}")
        return cls(mechanism_from_dict(inner, f"{path}.allocation"))

    def scaled(self, factor: float) -> AllocationReplaceOne:
        """The mechanism with the base's noise multiplied by ``factor``."""
        return AllocationReplaceOne(self.allocation.scaled(factor))
