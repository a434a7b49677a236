"""The mechanism interface: a dominating pair per direction of the neighbouring relation."""

from __future__ import annotations

import functools
import math

import numpy as np

from ..losses import PrivacyLoss

__all__ = ["Mechanism", "location_loss_scale"]


def location_loss_scale(kernel: str, distance: float, scale: float) -> float:
    """The size of the privacy loss of a location pair ``K(x - distance)`` against ``K(x)``
    (noise of standard deviation, or Laplace scale, ``scale``), from the parameters alone:
    for the Gaussian kernel, with ``r = distance / scale``, the loss is ``N(r^2/2, r^2)``
    under P (Balle & Wang 2018), so ``r^2/2 + r`` (mean plus one standard deviation); for the
    Laplace kernel the loss is bounded by ``r`` (Dwork & Roth 2014, Thm. 3.6). A mixture of
    such pairs (subsampling) has no larger loss values where its mass is. Python floats: the
    value overflows to ``inf`` (no exception, no warning) when the noise vanishes."""
    r = distance / scale
    return r * r / 2.0 + r if kernel == "gaussian" else r


class Mechanism:
    """A randomized algorithm described by its worst-case (dominating) pair of distributions.

    Subclasses implement :meth:`_build_losses`, returning the PLRV of the *remove* pair
    and of the *add* pair. Under add/remove adjacency they differ in general; under the
    replace-one relation (and for symmetric mechanisms) both are the same object. Accountants
    compose every remove pair together and every add pair together and report the maximum:
    a direction is never dropped.

    ``relations`` names the neighbouring relations (:data:`tightdp._validate.RELATIONS`)
    under which the pair dominates every pair of neighbouring datasets; an accountant holds
    one relation and refuses a mechanism not defined under it. A subclass states its own
    (the default is add/remove only).
    """

    relations: tuple[str, ...] = ("add_or_remove_one",)

    def _build_losses(self) -> tuple[PrivacyLoss, PrivacyLoss]:
        raise NotImplementedError

    @functools.cached_property
    def _losses(self) -> tuple[PrivacyLoss, PrivacyLoss]:
        """The pair built once per mechanism (a cached property writes the instance's own
        dictionary, so it also works on frozen dataclasses)."""
        return self._build_losses()

    def privacy_losses(self) -> tuple[PrivacyLoss, PrivacyLoss]:
        """(remove, add) privacy losses; the same object twice when symmetric."""
        return self._losses

    def __getstate__(self) -> dict:
        """Pickle/deepcopy state without the cached losses (rebuilt on first use)."""
        state = self.__dict__.copy()
        state.pop("_losses", None)
        return state

    @property
    def loss_scale(self) -> float:
        """The size of the privacy loss of one application (a magnitude, not a bound), from
        the parameters where they say it (``location_family``: :func:`location_loss_scale`),
        else the largest finite end of the losses' supports (0 for an unbounded loss with no
        such description). The accountants compare it with the range of floating point
        before any loss is built (:mod:`tightdp.accountants.limits`)."""
        fam = getattr(self, "location_family", None)
        if fam is not None:
            return location_loss_scale(*fam())
        ends = [abs(e) for loss in self.privacy_losses() for e in loss.support
                if math.isfinite(e)]
        return max(ends, default=0.0)

    @property
    def symmetric(self) -> bool:
        rem, add = self.privacy_losses()
        return rem is add

    def delta(self, eps) -> np.ndarray:
        """delta(eps) of a single application: the max over both directions."""
        rem, add = self.privacy_losses()
        d = rem.delta(eps)
        return d if rem is add else np.maximum(d, add.delta(eps))

    def _key(self) -> tuple:
        """Hashable identity of the mechanism's parameters (used for caching)."""
        return (type(self).__name__, tuple(sorted(
            (k, v if not isinstance(v, np.ndarray) else tuple(v.tolist()))
            for k, v in self.__dict__.items() if not k.startswith("_")
            and not isinstance(v, Mechanism | PrivacyLoss))),
            tuple(v._key() for v in self.__dict__.values() if isinstance(v, Mechanism)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mechanism) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items()
                           if not k.startswith("_"))
        return f"{type(self).__name__}({params})"

    #: the names of the fields :meth:`to_dict` writes (a class with a state-file form
    #: states its own and is registered in :mod:`tightdp.mechanisms.fields`)
    FIELDS: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        """The fields of the mechanism's state-file form (``{name: JSON value}``)."""
        raise ValueError(f"{type(self).__name__} has no state-file form (no to_dict)")

    @classmethod
    def from_dict(cls, params: dict, path: str) -> Mechanism:
        """The mechanism of the fields written by :meth:`to_dict`, each checked; a
        ValueError names the field as ``path.name`` with the accepted range."""
        raise ValueError(f"{path}: {cls.__name__} has no state-file form (no from_dict)")

    def scaled(self, factor: float) -> Mechanism | None:
        """The mechanism with every noise scale multiplied by ``factor``, or None when it has
        no noise scale to multiply (a subclass with one says so)."""
        return None
