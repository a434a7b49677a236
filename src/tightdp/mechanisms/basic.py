"""Basic mechanisms: Gaussian, Laplace, randomized response, pure and approximate DP."""

from __future__ import annotations

import math

import numpy as np

from .. import _validate as v
from ..losses import DiscreteLoss, GaussianLoss, LocationMixtureLoss
from .base import Mechanism

__all__ = ["Gaussian", "Laplace", "RandomizedResponse", "PureDP", "ApproxDP"]


class Gaussian(Mechanism):
    """The Gaussian mechanism ``f(D) + N(0, sigma^2)`` with L2 sensitivity ``sensitivity``.

    Its dominating pair is ``(N(sensitivity, sigma^2), N(0, sigma^2))``, symmetric, so one
    PLRV serves both directions; it is ``mu``-GDP with ``mu = sensitivity / sigma``
    (Dong, Roth, Su 2019; Balle & Wang 2018, Thm. 8 for ``delta(eps)``).

    ``sigma`` is the standard deviation of the noise (``noise_multiplier * clip_norm`` in
    DP-SGD).

    Defined under every neighbouring relation, with ``sensitivity`` the query's sensitivity
    under the accountant's relation: for a sum of contributions clipped to norm ``C`` it is
    ``C`` under add/remove and replace-special, ``2 C`` under replace-one.
    """

    relations = v.RELATIONS

    def __init__(self, sigma: float, sensitivity: float = 1.0):
        self.sigma = v.positive("sigma", sigma)
        self.sensitivity = v.positive("sensitivity", sensitivity)

    @property
    def mu(self) -> float:
        return self.sensitivity / self.sigma

    def location_family(self) -> tuple[str, float, float]:
        """(kernel, sensitivity, scale): what subsampling wrappers need."""
        return "gaussian", self.sensitivity, self.sigma

    def rdp(self, orders) -> np.ndarray:
        """Rényi DP at ``orders`` (> 1): ``alpha mu^2 / 2`` (Mironov 2017, Prop. 7)."""
        from ..curves.rdp import gaussian_rdp
        return gaussian_rdp(orders, self.mu)

    def gdp(self) -> tuple[float, bool]:
        """``(mu, exact)``: exactly ``mu``-GDP with ``mu = sensitivity / sigma`` (Dong, Roth,
        Su 2022, Thm. 2.7)."""
        return self.mu, True

    def _build_losses(self):
        loss = GaussianLoss(self.mu)
        return loss, loss


    FIELDS = ("sigma", "sensitivity")

    def to_dict(self) -> dict:
        """The fields of a state file (:mod:`tightdp.mechanisms.fields`)."""
        return {"sigma": float(self.sigma), "sensitivity": float(self.sensitivity)}

    @classmethod
    def from_dict(cls, params: dict, path: str) -> Gaussian:
        """The mechanism of the fields of :meth:`to_dict`, each checked (an error names
        the field as ``path.name``)."""
        return cls(v.positive(f"{path}.sigma", params["sigma"]),
                   v.positive(f"{path}.sensitivity", params["sensitivity"]))

    def scaled(self, factor: float) -> Gaussian:
        """The mechanism with the noise ``sigma`` multiplied by ``factor``."""
        return Gaussian(self.sigma * factor, self.sensitivity)


class Laplace(Mechanism):
    """The Laplace mechanism ``f(D) + Lap(scale)`` with L1 sensitivity ``sensitivity``.

    Dominating pair ``(Lap(sensitivity, b), Lap(0, b))``; the loss
    ``(|x| - |x - sensitivity|)/b`` is non-decreasing with atoms at ``+-sensitivity/b``.
    Symmetric (Koskela et al. 2020, Sec. 4 example; Dwork & Roth 2014, Thm. 3.6).
    Defined under every relation, ``sensitivity`` being the query's under the accountant's
    relation (as for :class:`Gaussian`).
    """

    relations = v.RELATIONS

    def __init__(self, scale: float, sensitivity: float = 1.0):
        self.scale = v.positive("scale", scale)
        self.sensitivity = v.positive("sensitivity", sensitivity)

    def location_family(self) -> tuple[str, float, float]:
        return "laplace", self.sensitivity, self.scale

    def rdp(self, orders) -> np.ndarray:
        """Rényi DP at ``orders`` (> 1), exact (Mironov 2017, Table 2); see
        :func:`tightdp.curves.rdp.laplace_rdp`."""
        from ..curves.rdp import laplace_rdp
        return laplace_rdp(orders, self.sensitivity / self.scale)

    def _build_losses(self):
        b, s = self.scale, self.sensitivity
        loss = LocationMixtureLoss("laplace", [s], [1.0], [0.0], [1.0], b,
                                   inverse=_LaplaceInverse(b, s))
        return loss, loss


    FIELDS = ("scale", "sensitivity")

    def to_dict(self) -> dict:
        """The fields of a state file (:mod:`tightdp.mechanisms.fields`)."""
        return {"scale": float(self.scale), "sensitivity": float(self.sensitivity)}

    @classmethod
    def from_dict(cls, params: dict, path: str) -> Laplace:
        """The mechanism of the fields of :meth:`to_dict`, each checked (an error names
        the field as ``path.name``)."""
        return cls(v.positive(f"{path}.scale", params["scale"]),
                   v.positive(f"{path}.sensitivity", params["sensitivity"]))

    def scaled(self, factor: float) -> Laplace:
        """The mechanism with the noise ``scale`` multiplied by ``factor``."""
        return Laplace(self.scale * factor, self.sensitivity)


class _LaplaceInverse:
    """The inverse ``x = (b y + s) / 2`` of the Laplace mechanism's loss between its kinks (a
    module-level callable rather than a closure, so that losses pickle)."""

    def __init__(self, b: float, s: float):
        self.b, self.s = b, s

    def __call__(self, y):
        return (self.b * y + self.s) / 2.0


class RandomizedResponse(Mechanism):
    """k-ary randomized response: keep the true value w.p. ``1 - p``, else output a uniform
    value among ``num_values``; neighbours replace one value by another.

    Give either ``noise_parameter`` p in (0, 1] or ``eps`` (then
    ``p = k / (e^eps + k - 1)``, the RR that is exactly eps-DP). Outputs: the true value has
    probability ``1 - p + p/k``, every other ``p/k``; the pair is symmetric with losses
    ``+-log((1 - p + p/k)/(p/k))`` and 0 (on the other k - 2 values).

    Defined under replace-one only: the pair compares two values of one input; adding or
    removing an input adds or removes an output, which no such pair describes.
    """

    relations = ("replace_one",)

    def __init__(self, noise_parameter: float | None = None, num_values: int = 2,
                 eps: float | None = None):
        self.num_values = v.count("num_values", num_values, minimum=2)
        if (noise_parameter is None) == (eps is None):
            raise ValueError("give exactly one of noise_parameter (in (0, 1]) or eps (in [0, inf))")
        if eps is not None:
            e = v.nonnegative("eps", eps)
            noise_parameter = self.num_values / (math.exp(min(e, 700.0)) + self.num_values - 1)
        self.noise_parameter = v.unit_interval("noise_parameter", noise_parameter, open_low=True)

    @property
    def eps(self) -> float:
        k, p = self.num_values, self.noise_parameter
        return math.log1p((1 - p) * k / p)

    def rdp(self, orders) -> np.ndarray:
        """Rényi DP at ``orders`` (> 1), exact; see
        :func:`tightdp.curves.rdp.randomized_response_rdp`."""
        from ..curves.rdp import randomized_response_rdp
        return randomized_response_rdp(orders, self.noise_parameter, self.num_values)

    def _build_losses(self):
        k, p = self.num_values, self.noise_parameter
        hi, lo = 1 - p + p / k, p / k
        e = math.log(hi) - math.log(lo)
        ys = [e, -e, 0.0]
        ps = [hi, lo, (k - 2) * lo]
        qs = [lo, hi, (k - 2) * lo]
        loss = DiscreteLoss(ys, ps, qs)
        return loss, loss


    FIELDS = ("noise_parameter", "num_values")

    def to_dict(self) -> dict:
        """The fields of a state file (:mod:`tightdp.mechanisms.fields`)."""
        return {"noise_parameter": float(self.noise_parameter),
                "num_values": int(self.num_values)}

    @classmethod
    def from_dict(cls, params: dict, path: str) -> RandomizedResponse:
        """The mechanism of the fields of :meth:`to_dict`, each checked (an error names
        the field as ``path.name``)."""
        return cls(v.unit_interval(f"{path}.noise_parameter", params["noise_parameter"],
                                   open_low=True),
                   v.count(f"{path}.num_values", params["num_values"], minimum=2))


class PureDP(Mechanism):
    """Any eps-DP mechanism, through its dominating pair (randomized response with two values:
    ``P = (e^eps, 1)/(1 + e^eps)``, ``Q`` reversed; Kairouz, Oh, Viswanath 2015).

    Defined under every relation: ``eps`` is the guarantee under the accountant's relation."""

    relations = v.RELATIONS

    def __init__(self, eps: float):
        self.eps = v.nonnegative("eps", eps)

    def rdp(self, orders) -> np.ndarray:
        """Rényi DP at ``orders`` (> 1) of the dominating pair; see
        :func:`tightdp.curves.rdp.pure_dp_rdp`."""
        from ..curves.rdp import pure_dp_rdp
        return pure_dp_rdp(orders, self.eps)

    def _build_losses(self):
        e = self.eps
        hi = 1.0 / (1.0 + math.exp(-e))
        lo = 1.0 / (1.0 + math.exp(e))
        loss = DiscreteLoss([e, -e], [hi, lo], [lo, hi])
        return loss, loss


    FIELDS = ("eps",)

    def to_dict(self) -> dict:
        """The fields of a state file (:mod:`tightdp.mechanisms.fields`)."""
        return {"eps": float(self.eps)}

    @classmethod
    def from_dict(cls, params: dict, path: str) -> PureDP:
        """The mechanism of the fields of :meth:`to_dict`, each checked (an error names
        the field as ``path.name``)."""
        return cls(v.nonnegative(f"{path}.eps", params["eps"]))


class ApproxDP(Mechanism):
    """Any (eps, delta)-DP mechanism, through its dominating pair: with probability delta the
    output reveals which dataset it came from, otherwise it is eps-randomized response
    (Kairouz, Oh, Viswanath 2015; Gopi et al. 2021, Sec. 4 for the mass at infinity).

    Defined under every relation: ``(eps, delta)`` is the guarantee under the accountant's
    relation."""

    relations = v.RELATIONS

    def __init__(self, eps: float, delta: float):
        self.eps = v.nonnegative("eps", eps)
        # named delta0 so that it does not hide Mechanism.delta(eps)
        self.delta0 = v.unit_interval("delta", delta, open_high=True)

    def _build_losses(self):
        e, d = self.eps, self.delta0
        hi = (1 - d) / (1.0 + math.exp(-e))
        lo = (1 - d) / (1.0 + math.exp(e))
        loss = DiscreteLoss([e, -e], [hi, lo], [lo, hi], inf_mass=d, neg_inf_mass=d)
        return loss, loss

    FIELDS = ("eps", "delta")

    def to_dict(self) -> dict:
        """The fields of a state file (:mod:`tightdp.mechanisms.fields`)."""
        return {"eps": float(self.eps), "delta": float(self.delta0)}

    @classmethod
    def from_dict(cls, params: dict, path: str) -> ApproxDP:
        """The mechanism of the fields of :meth:`to_dict`, each checked (an error names
        the field as ``path.name``)."""
        return cls(v.nonnegative(f"{path}.eps", params["eps"]),
                   v.unit_interval(f"{path}.delta", params["delta"], open_high=True))
