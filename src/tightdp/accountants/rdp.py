"""The Rényi-DP (moments) accountant: the baseline every paper compares against.

Each mechanism supplies its Rényi divergence on an order grid (``mechanism.rdp(orders)``, see
:mod:`tightdp.curves.rdp`); composition adds the curves order by order (Mironov 2017,
Prop. 1) and the
query converts the total to (eps, delta) with the best of the classic and the Canonne, Kamath,
Steinke (2020) conversions at the best order. The result is a certified upper bound (no lower
bound); under add/remove adjacency every supplied curve bounds both directions.
"""

from __future__ import annotations

from typing import Any, cast

import numpy as np

from .. import _validate as v
from ..curves.rdp import DEFAULT_ORDERS, check_orders, delta_from_rdp, eps_from_rdp
from ..mechanisms.base import Mechanism
from ..results import DeltaResult, EpsilonResult
from .base import Accountant

__all__ = ["RDPAccountant"]

_NOTE = "upper bound from Rényi DP (no lower bound); order = optimal Rényi order"


class RDPAccountant(Accountant):
    """Rényi-DP accountant.

    Parameters
    ----------
    orders : Rényi orders (> 1) to use instead of :data:`tightdp.curves.rdp.DEFAULT_ORDERS`
        (which contain dp_accounting's default orders, a finer fractional grid and integers up
        to 10^4).
    extra_orders : orders added to the grid (default or ``orders``).
    neighboring : the neighbouring relation of the composition, ``"add_or_remove_one"``
        (default), ``"replace_one"`` or ``"replace_special"`` (see
        :class:`~tightdp.accountants.base.Accountant`).

    Examples
    --------
    >>> from tightdp import RDPAccountant, PoissonSubsampled, Gaussian
    >>> acc = RDPAccountant().compose(PoissonSubsampled(Gaussian(1.0), 0.01), 10_000)
    >>> r = acc.epsilon(1e-5)
    >>> 6.1877 < r.epsilon < 7.0, r.certified, r.lower is None
    (True, True, True)
    """

    name = "rdp"

    def __init__(self, orders=None, *, extra_orders=None, neighboring="add_or_remove_one",
                 max_memory=None, max_seconds=None):
        super().__init__(neighboring=neighboring, max_memory=max_memory,
                         max_seconds=max_seconds)
        base = DEFAULT_ORDERS if orders is None else check_orders(orders)
        if extra_orders is not None:
            base = np.concatenate([base, check_orders(extra_orders)])
        self.orders = np.unique(base)

    def supports(self, mechanism: Mechanism) -> None:
        """Raise ValueError unless ``mechanism`` has a Rényi-divergence formula."""
        fn = getattr(mechanism, "rdp", None)
        if fn is None:
            raise ValueError(f"RDPAccountant has no Rényi-divergence formula for {mechanism!r} "
                             "(supported: Gaussian, Laplace, RandomizedResponse, PureDP, "
                             "PoissonSubsampled(Gaussian), SampledWithoutReplacement)")
        try:
            fn(np.array([2.0]))
        except ValueError as err:
            raise ValueError(f"RDPAccountant cannot handle {mechanism!r}: {err}") from None

    @property
    def rdp(self) -> np.ndarray:
        """The composed Rényi divergence at :attr:`orders` (an upper bound for each order)."""
        key = ("rdp",)
        if key not in self._cache:
            tot = np.zeros_like(self.orders)
            for mech, k in self.terms:
                tot = tot + k * np.asarray(cast(Any, mech).rdp(self.orders), dtype=float)
            self._cache[key] = tot
        return self._cache[key]

    def _epsilon_of(self, delta: float) -> EpsilonResult:
        """Certified upper bound on eps at ``delta`` (best conversion, best order)."""
        delta = v.delta_value("delta", delta)
        if not self.terms:
            return EpsilonResult(0.0, delta, None, 0.0, self.name, certified=True, estimate=0.0)
        eps, order = eps_from_rdp(self.orders, self.rdp, delta)
        details = {"order": order, "num_orders": int(self.orders.size),
                   "rdp_at_order": float(self.rdp[self.orders == order][0])}
        if order == self.orders.max() or order == self.orders.min():
            details["order_at_grid_edge"] = True
        return EpsilonResult(eps, delta, None, eps, self.name, certified=True, estimate=eps,
                             note=_NOTE, details=details)

    def _delta_of(self, eps) -> DeltaResult:
        """Certified upper bound on delta(eps) (eps a number or an array)."""
        e = v.eps_values("eps", eps)
        if not self.terms:
            z = 0.0 if e.ndim == 0 else np.zeros_like(e)
            return DeltaResult(z, eps, None, z, self.name, certified=True, estimate=z)
        d: float | np.ndarray  # floats for a scalar eps
        order: float | np.ndarray
        d, order = delta_from_rdp(self.orders, self.rdp, e)
        if e.ndim == 0:
            d, order = float(d), float(order)
        return DeltaResult(d, eps, None, d, self.name, certified=True, estimate=d, note=_NOTE,
                           details={"order": order, "num_orders": int(self.orders.size)})
