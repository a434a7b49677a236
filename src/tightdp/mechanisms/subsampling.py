"""Subsampled mechanisms: Poisson subsampling, sampling without and with replacement."""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import binom

from .. import _validate as v
from .base import Mechanism
from .basic import Gaussian
from .loss import LocationMixtureLoss

__all__ = ["PoissonSubsampled", "SampledWithoutReplacement", "SampledWithReplacement"]


def _family(base: Mechanism, who: str) -> tuple[str, float, float]:
    fam = getattr(base, "location_family", None)
    if fam is None:
        raise ValueError(f"{who} supports Gaussian and Laplace base mechanisms, got {base!r}")
    return fam()


class PoissonSubsampled(Mechanism):
    """``base`` run on a Poisson sample (each record kept independently w.p. ``q``), under
    add/remove adjacency.

    Remove direction: ``P = (1-q) B(0) + q B(c)`` against ``Q = B(0)``; add direction: the
    reverse pair, ``P = B(0)`` against ``Q = (1-q) B(0) + q B(c)`` (Koskela et al. 2020,
    Sec. 6.1; Zhu, Dong, Wang 2022 for why both directions are needed). The loss of the remove
    pair is ``log(1 - q + q e^{(2 c x - c^2)/(2 s^2)})`` with the closed-form inverse of
    Koskela et al. (2020), Sec. 6.1, for the Gaussian base.
    """

    def __init__(self, base: Mechanism, q: float):
        self.q = v.probability_open_closed("q", q)
        self.base = base
        _family(base, "PoissonSubsampled")

    def _build_losses(self):
        kern, c, s = _family(self.base, "PoissonSubsampled")
        q = self.q
        if q == 1.0:
            return self.base.privacy_losses()
        rem_inv = add_inv = None
        if kern == "gaussian":
            lq = math.log(q)
            k = s * s / c

            def rem_inv(y):
                # L(x) = log(1-q + q exp((2cx - c^2)/(2s^2))) = y
                return k * (np.log(np.maximum(np.expm1(y) + q, 1e-300)) - lq) + c / 2

            def add_inv(y):
                # reflected add pair: L(x) = -log(1-q + q exp((-2cx - c^2)/(2s^2))) = y
                return -k * (np.log(np.maximum(np.expm1(-y) + q, 1e-300)) - lq) - c / 2

        remove = LocationMixtureLoss(kern, [0.0, c], [1 - q, q], [0.0], [1.0], s,
                                     inverse=rem_inv)
        add = LocationMixtureLoss(kern, [0.0], [1.0], [0.0, -c], [1 - q, q], s, inverse=add_inv)
        return remove, add

    def rdp(self, orders) -> np.ndarray:
        """Rényi DP at ``orders`` (> 1), valid for both directions: Gaussian base only
        (Mironov, Talwar, Zhang 2019); see :func:`tightdp.rdp.poisson_subsampled_gaussian_rdp`."""
        from ..rdp import poisson_subsampled_gaussian_rdp
        if self.q == 1.0:
            return self.base.rdp(orders)
        kern, c, s = _family(self.base, "PoissonSubsampled")
        if kern != "gaussian":
            raise ValueError(f"no Rényi-DP formula for a Poisson-subsampled {kern} mechanism")
        return poisson_subsampled_gaussian_rdp(orders, self.q, c / s)

    def gdp(self) -> tuple[float, bool]:
        """``(mu, exact)`` per step. For ``q < 1`` the central-limit approximation of Bu, Dong,
        Long, Su (2020), *Deep learning with Gaussian DP* (from Dong, Roth, Su 2022, Sec. 5):
        T steps are approximately ``q sqrt(T (e^{mu^2} - 1))``-GDP. NOT a bound: ``exact`` is
        False. Gaussian base only."""
        if self.q == 1.0:
            return self.base.gdp()
        kern, c, s = _family(self.base, "PoissonSubsampled")
        if kern != "gaussian":
            raise ValueError(f"no GDP formula for a Poisson-subsampled {kern} mechanism")
        return self.q * math.sqrt(math.expm1((c / s) ** 2)), False


class SampledWithoutReplacement(Mechanism):
    """``base`` run on a batch drawn without replacement (``q = batch / dataset size``), under
    the substitute relation: ``P = (1-q) B(0) + q B(c)`` against ``Q = (1-q) B(0) + q B(-c)``
    (Koskela et al. 2020, Sec. 6.2). The pair is symmetric; under substitute it coincides with
    Poisson subsampling at rate ``q`` (their remark in Sec. 6.2)."""

    relation = "substitute"

    def __init__(self, base: Mechanism, q: float):
        self.q = v.probability_open_closed("q", q)
        self.base = base
        _family(base, "SampledWithoutReplacement")

    def _build_losses(self):
        kern, c, s = _family(self.base, "SampledWithoutReplacement")
        q = self.q
        loss = LocationMixtureLoss(kern, [0.0, c], [1 - q, q], [0.0, -c], [1 - q, q], s)
        return loss, loss

    def rdp(self, orders) -> np.ndarray:
        """Rényi DP at ``orders`` (> 1): Wang, Balle, Kasiviswanathan (2019), Thm. 9, with the
        base pair ``(B(c), B(-c))`` (distance ``2c``); see
        :func:`tightdp.rdp.sampled_without_replacement_rdp`."""
        from ..rdp import gaussian_rdp, laplace_rdp, sampled_without_replacement_rdp
        kern, c, s = _family(self.base, "SampledWithoutReplacement")
        r = 2 * c / s
        if kern == "gaussian":
            return sampled_without_replacement_rdp(orders, self.q, lambda a: gaussian_rdp(a, r),
                                                   math.inf)
        return sampled_without_replacement_rdp(orders, self.q, lambda a: laplace_rdp(a, r), r)


class SampledWithReplacement(Mechanism):
    """Gaussian mechanism on a batch of ``batch_size`` records drawn with replacement from
    ``dataset_size`` records, under the substitute relation (Koskela et al. 2020, Sec. 6.3):
    the differing record appears ``l ~ Binomial(batch_size, 1/dataset_size)`` times, so
    ``P = sum_l b_l N(l c, s^2)`` against ``Q = sum_l b_l N(-l c, s^2)``.

    Binomial weights below 1e-300 are dropped and their total mass is given to the outputs that
    reveal the dataset (loss +inf), which keeps the pair dominating.
    """

    relation = "substitute"

    def __init__(self, base: Gaussian, batch_size: int, dataset_size: int):
        if not isinstance(base, Gaussian):
            raise ValueError(f"SampledWithReplacement supports a Gaussian base, got {base!r}")
        self.base = base
        self.batch_size = v.count("batch_size", batch_size, minimum=1)
        self.dataset_size = v.count("dataset_size", dataset_size, minimum=1)
        if self.batch_size > self.dataset_size:
            raise ValueError(f"batch_size must be <= dataset_size ({self.dataset_size}), got "
                             f"{batch_size!r}")

    def _build_losses(self):
        _, c, s = self.base.location_family()
        m, n = self.batch_size, self.dataset_size
        ls = np.arange(m + 1)
        w = binom.pmf(ls, m, 1.0 / n)
        keep = w >= 1e-300
        dropped = float(max(0.0, 1.0 - w[keep].sum())) if not keep.all() else 0.0
        locs = ls[keep] * c
        loss = LocationMixtureLoss("gaussian", locs, w[keep], -locs, w[keep], s,
                                   inf_mass=dropped)
        return loss, loss
