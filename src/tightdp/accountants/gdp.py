"""The Gaussian-DP accountant: composition of mu-GDP mechanisms (root sum of squares).

Each mechanism supplies ``mechanism.gdp() -> (mu, exact)``. The Gaussian mechanism is exactly
``sensitivity/sigma``-GDP, so a composition of Gaussian mechanisms has the exact privacy curve
of mu-GDP: the answer is certified and exact (``lower == upper``). The Poisson-subsampled
Gaussian mechanism only has the central-limit approximation of Bu et al. (2020),
``mu = q sqrt(T (e^{1/sigma^2} - 1))``: the answer is then an estimate (``certified=False``)
that can under-report the privacy loss.
"""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np

from .. import _validate as v
from ..curves.gdp import gdp_delta, gdp_epsilon
from ..mechanisms.base import Mechanism
from ..results import DeltaResult, EpsilonResult
from .base import Accountant

__all__ = ["GDPAccountant"]

_CLT_NOTE = ("central-limit (CLT) approximation of mu-GDP for Poisson subsampling (Bu et al. "
             "2020): an estimate, NOT a bound; it can under-report the privacy loss")


class GDPAccountant(Accountant):
    """Gaussian-DP accountant (Dong, Roth, Su 2022).

    Examples
    --------
    >>> from tightdp import GDPAccountant, Gaussian
    >>> r = GDPAccountant().compose(Gaussian(1.0)).epsilon(1e-5)
    >>> round(r.epsilon, 9), r.lower == r.upper
    (4.377178096, True)
    """

    name = "gdp"

    def supports(self, mechanism: Mechanism) -> None:
        """Raise ValueError unless ``mechanism`` has a mu-GDP description."""
        fn = getattr(mechanism, "gdp", None)
        if fn is None:
            raise ValueError(f"GDPAccountant has no mu-GDP description of {mechanism!r} "
                             "(supported: Gaussian, PoissonSubsampled(Gaussian) via the CLT)")
        try:
            fn()
        except ValueError as err:
            raise ValueError(f"GDPAccountant cannot handle {mechanism!r}: {err}") from None

    def _mu(self) -> tuple[float, bool]:
        tot, exact = 0.0, True
        for mech, k in self.terms:
            m, ex = cast(Any, mech).gdp()  # supports() checked it has one
            tot += k * m * m
            exact = exact and ex
        return math.sqrt(tot), exact

    @property
    def mu(self) -> float:
        """mu of the composition: ``sqrt(sum count_i mu_i^2)`` (Dong, Roth, Su 2022,
        Cor. 3.3; for subsampled terms the CLT value, an approximation)."""
        return self._mu()[0]

    @property
    def exact(self) -> bool:
        """True when every composed term is exactly mu-GDP (no CLT approximation)."""
        return self._mu()[1]

    def _epsilon_of(self, delta: float) -> EpsilonResult:
        """eps at ``delta``: exact for Gaussian compositions, a CLT estimate otherwise."""
        delta = v.delta_value("delta", delta)
        mu, exact = self._mu()
        eps = 0.0 if mu == 0 else gdp_epsilon(mu, delta)
        details = {"mu": mu}
        if exact:
            return EpsilonResult(eps, delta, eps, eps, self.name, certified=True, estimate=eps,
                                 note="exact: composition of Gaussian mechanisms is mu-GDP",
                                 details=details)
        return EpsilonResult(eps, delta, None, None, self.name, certified=False, estimate=eps,
                             note=_CLT_NOTE, details=details)

    def _delta_of(self, eps) -> DeltaResult:
        """delta(eps) (eps a number or an array): exact for Gaussian compositions, a CLT
        estimate otherwise."""
        e = v.eps_values("eps", eps)
        mu, exact = self._mu()
        if mu == 0:
            # identical pair: delta(eps) = (1-e^eps)_+
            d: float | np.ndarray = np.where(e >= 0, 0.0, -np.expm1(e))
            d = float(d) if e.ndim == 0 else d
        else:
            d = gdp_delta(mu, e)
        details = {"mu": mu}
        if exact:
            return DeltaResult(d, eps, d, d, self.name, certified=True, estimate=d,
                               note="exact: composition of Gaussian mechanisms is mu-GDP",
                               details=details)
        return DeltaResult(d, eps, None, None, self.name, certified=False, estimate=d,
                           note=_CLT_NOTE, details=details)
