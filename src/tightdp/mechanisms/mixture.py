"""Mixture-of-Gaussians mechanisms (Ganesh, Def. 2.8)."""

from __future__ import annotations

import math

import numpy as np

from .. import _validate as v
from ..losses import DiscreteLoss, LocationMixtureLoss
from .base import Mechanism, location_loss_scale
from .fields import fail, numbers

__all__ = ["MixtureOfGaussians"]


class MixtureOfGaussians(Mechanism):
    """Scalar mixture-of-Gaussians mechanism: the output is ``c + N(0, sigma^2)`` where the
    sensitivity ``c`` is ``sensitivities[i]`` with probability ``probabilities[i]``.

    Under add/remove adjacency the remove pair is ``P = sum_i p_i N(c_i, sigma^2)`` against
    ``Q = N(0, sigma^2)`` and the add pair is the reverse (Ganesh, Def. 2.8 and Sec. 3).
    Sensitivities must be non-negative, which makes the loss monotone in the output.
    Defined under add/remove and replace-special (the record replaced by one contributing
    nothing gives the same two pairs); not under replace-one.
    """

    relations = ("add_or_remove_one", "replace_special")

    def __init__(self, sensitivities, probabilities, sigma: float):
        c = np.asarray(sensitivities, dtype=float).ravel()
        p = np.asarray(probabilities, dtype=float).ravel()
        if c.size == 0 or c.shape != p.shape:
            raise ValueError("sensitivities and probabilities must be non-empty and of one length")
        if np.any(~np.isfinite(c)) or np.any(c < 0):
            raise ValueError("sensitivities must be finite and in [0, inf)")
        if np.any(~np.isfinite(p)) or np.any(p < 0) or abs(p.sum() - 1.0) > 1e-9:
            raise ValueError("probabilities must be in [0, 1] and sum to 1")
        self.sensitivities = c
        self.probabilities = p / p.sum()
        self.sigma = v.positive("sigma", sigma)

    @property
    def loss_scale(self) -> float:
        """That of the farthest component (:func:`location_loss_scale`)."""
        return location_loss_scale("gaussian", float(self.sensitivities.max()), self.sigma)

    def __repr__(self) -> str:
        """One line whatever the number of components (errors quote it)."""
        c = self.sensitivities
        return (f"MixtureOfGaussians({c.size} components, sensitivities in "
                f"[{c.min():g}, {c.max():g}], sigma={self.sigma!r})")

    def _build_losses(self):
        c, p, s = self.sensitivities, self.probabilities, self.sigma
        if np.all(c[p > 0] == 0):
            zero = DiscreteLoss([0.0], [1.0], [1.0])
            return zero, zero
        remove = LocationMixtureLoss("gaussian", c, p, [0.0], [1.0], s)
        add = LocationMixtureLoss("gaussian", [0.0], [1.0], -c, p, s)
        return remove, add

    FIELDS = ("sensitivities", "probabilities", "sigma")

    def to_dict(self) -> dict:
        """The fields of a state file (:mod:`tightdp.mechanisms.fields`)."""
        return {"sensitivities": [float(x) for x in self.sensitivities],
                "probabilities": [float(x) for x in self.probabilities],
                "sigma": float(self.sigma)}

    @classmethod
    def from_dict(cls, params: dict, path: str) -> MixtureOfGaussians:
        """The mechanism of the fields of :meth:`to_dict`, each checked (an error names
        the field as ``path.name``)."""
        c = numbers(params["sensitivities"], f"{path}.sensitivities", v.nonnegative)
        p = numbers(params["probabilities"], f"{path}.probabilities", v.unit_interval)
        if len(c) != len(p):
            fail(f"{path}.probabilities must have one entry per sensitivity ({len(c)}), got "
                 f"{len(p)}")
        if abs(math.fsum(p) - 1.0) > 1e-9:
            fail(f"{path}.probabilities must sum to 1 (within 1e-9), got sum {math.fsum(p)!r}")
        m = cls(c, p, v.positive(f"{path}.sigma", params["sigma"]))
        arr = np.asarray(p, dtype=float)
        # probabilities that sum to 1 up to rounding (as a saved, already normalized
        # mixture's do) are kept bit for bit; renormalizing them would move the last bits
        if abs(float(arr.sum()) - 1.0) <= 4 * arr.size * np.finfo(float).eps:
            m.probabilities = arr
        return m

    def scaled(self, factor: float) -> MixtureOfGaussians:
        """The mechanism with the noise ``sigma`` multiplied by ``factor`` (the
        probabilities kept bit for bit)."""
        out = MixtureOfGaussians(self.sensitivities, self.probabilities, self.sigma * factor)
        out.probabilities = self.probabilities
        return out
