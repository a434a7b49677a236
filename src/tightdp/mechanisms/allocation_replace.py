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
* upper: given the allocation (the same under D and D': the record and its replacement
  hold one slot), the epoch is an adaptive composition of Gaussian steps whose
  sensitivities are zero but for the record's ``k`` steps, ``2 c`` each (the two records
  at opposite ends of the clip ball): ``2 sqrt(k) c / s``-GDP (Dong, Roth & Su 2022,
  Cor. 3.3); the allocation does not depend on the data, so by joint convexity of the
  hockey-stick divergence the mixture is no worse. This is no amplification, not tight: a
  group-of-two argument through the dataset without the record (Dong, Roth & Su 2022,
  Prop. 2.14: ``T(P, Q) >= f_add o f_remove``) is tighter at large noise, but it bounds the
  whole composition, not one pair per epoch that composes.
"""

from __future__ import annotations

import math
from typing import Any

from .. import _validate as v
from ..losses import PrivacyLoss
from .base import Bracket, Mechanism, location_loss_scale
from .basic import Gaussian
from .fields import check_object, mechanism_from_dict, mechanism_to_dict

__all__ = ["AllocationReplaceOne"]

_GAP = ("random allocation under replace-one: the upper bound is no amplification (the "
        "record's steps at sensitivity 2 c: the two records at opposite ends of the clip "
        "ball), not tight; the lower bound is the add/remove pair (the replacement "
        "contributing zero); the true value lies between")


class AllocationReplaceOne(Mechanism):
    """One epoch of random allocation (``allocation``, a
    :class:`~tightdp.mechanisms.allocation.RandomAllocation`) stated under replace-one: the
    form ``RandomAllocation.under("replace_one")`` returns and an accountant built with
    ``neighboring="replace_one"`` composes.

    Known by a bracket (module docstring): upper, the Gaussian of sensitivity
    ``2 sqrt(selected) c`` (``c = base.sensitivity``), no amplification; lower, the add/remove
    bracket's lower mechanism (its slack carried). ``privacy_losses()`` are the upper
    pair's. With ``selected == steps`` there is no allocation: the pair is that Gaussian,
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
        """The dominating mechanism: one Gaussian of sensitivity ``2 sqrt(selected) c``."""
        a = self.allocation
        return Gaussian(a.base.sigma, 2.0 * math.sqrt(a.selected) * a.base.sensitivity)

    def bracket(self, rtol: float) -> Bracket:
        """(upper, lower, gap): the no-amplification Gaussian above, the add/remove lower
        mechanism (and its slack) of ``allocation.bracket(rtol)`` below; no gap where every
        example is in every step (``selected == steps``: the Gaussian is exact)."""
        a = self.allocation
        up = self.upper()
        if a.selected == a.steps:
            return Bracket(up, up, "")
        b = a.bracket(v.positive("rtol", rtol))
        return Bracket(up, b.lower, _GAP, lower_slack=b.lower_slack)

    @property
    def loss_scale(self) -> float:
        """That of the upper pair (:func:`location_loss_scale`)."""
        up = self.upper()
        return location_loss_scale("gaussian", up.sensitivity, up.sigma)

    def _build_losses(self) -> tuple[PrivacyLoss, PrivacyLoss]:
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
