"""tightdp behind Google's ``dp_accounting`` interface (and so behind jax-privacy).

Two entry points:

- :func:`from_dp_event` turns a ``DpEvent`` tree into tightdp mechanisms with counts (a
  :class:`DpEventComposition`), which any tightdp accountant composes.
- :class:`TightdpAccountant` is a ``dp_accounting.PrivacyAccountant``: code written against
  dp_accounting (``compose(event)``, ``get_epsilon(delta)``, ``get_delta(eps)``, ``supports``)
  uses tightdp's certified accountants by changing one constructor. ``get_epsilon`` returns the
  certified upper bound; :meth:`TightdpAccountant.epsilon_result` the whole bracket.

Neighbouring relations (``dp_accounting.NeighboringRelation``; the tightdp accountant holds
the same one as its ``neighboring``, named in lower case, and every result names it in
``details["neighboring"]``):

- ``ADD_OR_REMOVE_ONE`` (the default): the remove and the add pair of every mechanism, the
  curve being their maximum (tightdp's default).
- ``REPLACE_ONE``: one record replaced by an arbitrary other. A record's contribution changes
  by up to twice the clipping norm, so the Gaussian, Laplace and discrete Laplace mechanisms
  are accounted with twice the sensitivity; randomized response, sampling without and with
  replacement with their substitute pairs (worst case over all datasets, Lebeda, Regehr,
  Kamath, Steinke 2024). Poisson sampling of a Gaussian with the antipodal pair
  ``(1-q) N(0) + q N(+-1)`` (as dp_accounting; Schuchardt et al. 2024 for its domination:
  :class:`~tightdp.PoissonSubsampled`). Poisson sampling of a Laplace and mixtures of
  Gaussians under ``REPLACE_ONE`` are refused: we have no dominating pair we can prove for
  them.
- ``REPLACE_SPECIAL`` (a record replaced by a special "zero" record, Kairouz et al. 2021,
  Def. 1.1): for the additive-noise mechanisms and Poisson sampling this gives exactly the
  pairs of add/remove (the remove pair compares the record's contribution with none, the add
  pair the reverse); it is the relation under which single-epoch tree aggregation is
  defined. Randomized response and fixed-size sampling are refused under it.

What cannot be accounted is refused with a ``ValueError`` (inside the accountant an
:class:`UnsupportedDpEventError`, which is also dp_accounting's ``UnsupportedEventError``)
naming the event; nothing is skipped silently. ``NonPrivateDpEvent`` (and a zero noise
multiplier) gives epsilon = inf and delta = 1, said in the result's note.
"""

from __future__ import annotations

import math

import numpy as np

try:
    from dp_accounting import dp_event as _ev
    from dp_accounting import privacy_accountant as _pa
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError("tightdp.integrations.dp_accounting needs dp_accounting: "
                      "pip install 'tightdp[dp-accounting]'") from err

from .. import _validate as v
from ..accountants.base import Accountant
from ..accountants.registry import make_accountant
from ..results import DeltaResult, EpsilonResult
from ..risk import DEFAULT_FPR, TradeoffResult, risk_values, tradeoff
from .dp_events import (
    NON_PRIVATE_NOTE,
    SUPPORTED_EVENTS,
    ZCDP,
    DpEventComposition,
    NeighboringRelation,
    Refused,
    as_relation,
    check_accountant,
    convert_event,
    from_dp_event,
)

__all__ = ["from_dp_event", "DpEventComposition", "TightdpAccountant", "ZCDP",
           "UnsupportedDpEventError", "NeighboringRelation", "SUPPORTED_EVENTS"]


class UnsupportedDpEventError(_pa.UnsupportedEventError, ValueError):
    """A DpEvent tightdp cannot account (unknown, or without an analysis we can certify).
    Both dp_accounting's ``UnsupportedEventError`` and a ``ValueError``."""


class TightdpAccountant(_pa.PrivacyAccountant):
    """A ``dp_accounting.PrivacyAccountant`` backed by tightdp's certified accountants.

    Parameters
    ----------
    neighboring_relation : ``dp_accounting.NeighboringRelation`` (or its name); default
        ``ADD_OR_REMOVE_ONE``.
    accountant : ``"pld"`` (default), ``"prv"`` or ``"rdp"``.
    rtol : relative width of the certified bracket (pld only; default
        :data:`tightdp.DEFAULT_RTOL`).
    max_memory, max_seconds : the budget of one query (see :mod:`tightdp.budget`).

    ``get_epsilon(delta)`` is the certified upper bound on epsilon (a float), ``get_delta(eps)``
    the certified upper bound on delta; :meth:`epsilon_result` and :meth:`delta_result` give
    the whole result (bracket, note, details). Composition only records events; the work
    happens at query time.

    Examples
    --------
    >>> import dp_accounting
    >>> acc = TightdpAccountant()
    >>> ev = dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(1.0))
    >>> r = acc.compose(ev, 10_000).epsilon_result(1e-5)
    >>> r.lower <= 6.1877 <= r.upper
    True
    """

    def __init__(self, neighboring_relation=NeighboringRelation.ADD_OR_REMOVE_ONE, *,
                 accountant: str = "pld", rtol: float | None = None, max_memory=None,
                 max_seconds=None):
        super().__init__(as_relation(neighboring_relation))
        self._name = check_accountant(accountant)
        if rtol is not None and self._name != "pld":
            raise ValueError(f"rtol is an option of the pld accountant, not of {self._name!r}")
        opts = {"rtol": rtol} if self._name == "pld" else {}
        # the tightdp accountant holds the same relation (its name in tightdp's words)
        self._acc = make_accountant(self._name, max_memory=max_memory,
                                    max_seconds=max_seconds,
                                    neighboring=self.neighboring_relation, **opts)
        self._non_private = False

    @property
    def tightdp_accountant(self) -> Accountant:
        """The tightdp accountant holding the composed mechanisms."""
        return self._acc

    def _maybe_compose(self, event, count: int, do_compose: bool):
        out = DpEventComposition(check=self._acc.accepts)
        try:
            convert_event(event, count, self.neighboring_relation, self._name == "rdp", out)
        except Refused as err:
            return self.CompositionErrorDetails(invalid_event=err.event,
                                                error_message=err.message)
        if do_compose:
            self._non_private = self._non_private or out.non_private
            for mech, k in out.terms:
                self._acc.compose(mech, k)
        return None

    def compose(self, event, count: int = 1) -> TightdpAccountant:
        """Account for ``count`` applications of ``event``; returns self. Raises
        :class:`UnsupportedDpEventError` (a ``ValueError`` and dp_accounting's
        ``UnsupportedEventError``) naming the offending sub-event, and ValueError if ``count``
        is not a whole number >= 1."""
        if not isinstance(event, _ev.DpEvent):
            raise TypeError(f"event must be a dp_accounting DpEvent, got {type(event)}")
        count = v.count("count", count, minimum=1)
        err = self._maybe_compose(event, count, do_compose=False)
        if err is not None:
            raise UnsupportedDpEventError(
                f"Unsupported event: {type(err.invalid_event).__name__}. Error: "
                f"[{err.error_message}] caused by subevent {err.invalid_event}.")
        self._ledger.compose(event, count)
        self._maybe_compose(event, count, do_compose=True)
        return self

    @property
    def non_private(self) -> bool:
        """True once a non-private event was composed."""
        return self._non_private

    def epsilon_result(self, target_delta: float) -> EpsilonResult:
        """The full tightdp result at ``target_delta`` (bracket, note, details)."""
        d = float(target_delta)
        rel = {"neighboring": self._acc.neighboring}
        if self._non_private:
            return EpsilonResult(math.inf, d, math.inf, math.inf, self._name, certified=True,
                                 estimate=math.inf, note=NON_PRIVATE_NOTE, details=rel)
        if not self._acc.terms:
            return EpsilonResult(0.0, d, 0.0, 0.0, self._name, certified=True, estimate=0.0,
                                 note="nothing composed", details=rel)
        return self._acc.epsilon(target_delta)

    def delta_result(self, target_epsilon: float) -> DeltaResult:
        """The full tightdp result at ``target_epsilon`` (bracket, note, details)."""
        rel = {"neighboring": self._acc.neighboring}
        if self._non_private:
            return DeltaResult(1.0, target_epsilon, 1.0, 1.0, self._name, certified=True,
                               estimate=1.0, note=NON_PRIVATE_NOTE, details=rel)
        if not self._acc.terms:
            return DeltaResult(0.0, target_epsilon, 0.0, 0.0, self._name, certified=True,
                               estimate=0.0, note="nothing composed", details=rel)
        return self._acc.delta(target_epsilon)

    def tradeoff_result(self, fpr) -> TradeoffResult:
        """Certified TPR of the best membership attack at ``fpr`` and its advantage
        (:func:`tightdp.risk.tradeoff` of the composition; TPR 1 if non-private)."""
        if self._non_private:
            a = risk_values("fpr", fpr).reshape(-1)
            return TradeoffResult(a, np.ones(a.size), np.ones(a.size), 1.0, 1.0, self._name,
                                  self._acc.neighboring, 0.0, NON_PRIVATE_NOTE, certified=True)
        return tradeoff(self._acc, fpr=fpr)

    def get_tpr(self, fpr) -> float | np.ndarray:
        """Certified upper bound on the TPR of the best membership attack at false-positive
        rate ``fpr`` (a number or an array)."""
        r = self.tradeoff_result(fpr)
        return float(r.tpr_upper[0]) if np.ndim(fpr) == 0 else r.tpr_upper

    def get_advantage(self) -> float:
        """Certified upper bound on the best attack's advantage (largest TPR - FPR)."""
        return float(self.tradeoff_result(DEFAULT_FPR).advantage_upper)

    def get_epsilon(self, target_delta: float) -> float:
        """Certified upper bound on epsilon at ``target_delta`` (inf if non-private; at
        ``target_delta >= 1`` the exact 0; at ``target_delta = 0`` inf, a valid but possibly
        loose bound)."""
        d = v.unit_interval("target_delta", target_delta)
        if self._non_private:
            return math.inf
        if not self._acc.terms or d >= 1.0:
            return 0.0
        if d == 0.0:
            return math.inf
        r = self._acc.epsilon(d)
        if not r.certified or r.upper is None:  # pragma: no cover - certifying accountants
            raise ValueError(f"the {self._name} accountant gave no certified upper bound")
        return float(r.upper)

    def get_delta(self, target_epsilon: float) -> float:
        """Certified upper bound on delta at ``target_epsilon`` (1 if non-private; 0 at
        ``target_epsilon = inf``, as no composed mechanism has mass at infinite loss)."""
        e = float(target_epsilon)
        if math.isnan(e):
            raise ValueError("target_epsilon must be a number, got nan")
        if self._non_private:
            return 1.0
        if not self._acc.terms or e == math.inf:
            return 0.0
        r = self._acc.delta(e)
        if not r.certified or r.upper is None:  # pragma: no cover - certifying accountants
            raise ValueError(f"the {self._name} accountant gave no certified upper bound")
        return float(min(float(np.asarray(r.upper)), 1.0))
