"""DpEvent trees of Google's ``dp_accounting`` as tightdp mechanisms with counts: the
conversion behind :func:`from_dp_event` and
:class:`~tightdp.integrations.dp_accounting.TightdpAccountant`; what each neighbouring
relation means for each event is in :mod:`tightdp.integrations.dp_accounting`, the public
module. An event that cannot be accounted raises :class:`Refused` naming the innermost
offending event; nothing is skipped silently.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

try:
    from dp_accounting import dp_event as _ev
    from dp_accounting import privacy_accountant as _pa
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError("tightdp.integrations.dp_accounting needs dp_accounting: "
                      "pip install 'tightdp[dp-accounting]'") from err

from .. import _validate as v
from ..accountants.base import Accountant
from ..accountants.rdp import RDPAccountant
from ..accountants.registry import CERTIFYING, make_accountant
from ..mechanisms import (
    DiscreteLaplace,
    Gaussian,
    Laplace,
    Mechanism,
    MixtureOfGaussians,
    PoissonSubsampled,
    RandomAllocation,
    RandomizedResponse,
    SampledWithoutReplacement,
    SampledWithReplacement,
    TruncatedPoisson,
)
from ..results import DeltaResult, EpsilonResult

__all__ = ["from_dp_event", "DpEventComposition", "ZCDP", "NeighboringRelation",
           "SUPPORTED_EVENTS", "Refused", "NON_PRIVATE_NOTE", "as_relation",
           "check_accountant", "convert_event"]

if TYPE_CHECKING:  # mypy needs the class as an annotation; the runtime binding is the same
    from dp_accounting.privacy_accountant import NeighboringRelation
else:
    NeighboringRelation = _pa.NeighboringRelation
_ADD_REMOVE = NeighboringRelation.ADD_OR_REMOVE_ONE
_REPLACE = NeighboringRelation.REPLACE_ONE
_SPECIAL = NeighboringRelation.REPLACE_SPECIAL

NON_PRIVATE_NOTE = ("a non-private event was composed (NonPrivateDpEvent or a zero noise "
                    "parameter): no finite epsilon exists, delta is 1")


class Refused(Exception):
    """The event (the innermost offending one) and why it is refused; raised by
    :func:`convert_event`, turned into a ValueError by its callers."""

    def __init__(self, event, message: str):
        super().__init__(message)
        self.event = event
        self.message = message


class ZCDP(Mechanism):
    """A mechanism known only through a Rényi-DP bound: ``(alpha, xi + rho alpha)``-RDP for
    every order ``alpha > 1`` (``(xi, rho)``-zCDP, Bun & Steinke 2016, "Concentrated
    differential privacy: simplifications, extensions, and lower bounds", Def. 1.1). Only the
    RDP accountant can use it: it has no privacy-loss distribution. Defined under every
    relation: the bound is the one stated under the accountant's relation."""

    relations = v.RELATIONS

    def __init__(self, rho: float, xi: float = 0.0):
        self.rho = v.nonnegative("rho", rho)
        self.xi = v.nonnegative("xi", xi)

    def rdp(self, orders) -> np.ndarray:
        """``xi + rho * alpha`` at each order (the definition, so exact as a bound)."""
        return self.xi + self.rho * np.asarray(orders, dtype=float)

    @property
    def loss_scale(self) -> float:
        """The size of one application's privacy loss without building one (there is none):
        ``2 rho + xi``, the squared mean-to-sigma ratio of the Gaussian mechanism with the
        same zCDP parameter (rho = mu^2 / 2)."""
        return 2.0 * self.rho + self.xi

    def _build_losses(self):
        raise ValueError("a zCDP bound (ZCDpEvent) has only a Rényi-DP analysis: use "
                         "accountant='rdp' (RDPAccountant)")


def as_relation(neighboring) -> NeighboringRelation:
    """A neighbouring relation from the enum or its name (case-insensitive)."""
    if isinstance(neighboring, NeighboringRelation):
        return neighboring
    if isinstance(neighboring, str):
        key = neighboring.strip().upper()
        if key in NeighboringRelation.__members__:
            return NeighboringRelation[key]
    raise ValueError("neighboring must be one of add_or_remove_one, replace_one, "
                     f"replace_special (or a dp_accounting NeighboringRelation), got "
                     f"{neighboring!r}")


@dataclass
class DpEventComposition:
    """What a DpEvent tree amounts to: tightdp mechanisms with their counts, whether a
    non-private event was part of it (then no finite epsilon exists), and the neighbouring
    relation they are accounted under (tightdp's name of the ``NeighboringRelation``)."""

    terms: list[tuple[Mechanism, int]] = field(default_factory=list)
    non_private: bool = False
    neighboring: str = "add_or_remove_one"
    #: called on every mechanism met (even with count 0); raises ValueError to refuse it
    check: Callable[[Mechanism], None] | None = field(default=None, repr=False, compare=False)

    def without_noise(self, scale: float, count: int) -> bool:
        """True when an event's noise ``scale`` is 0: the event releases its input exactly, so
        the composition is marked non-private if the event occurs (``count > 0``)."""
        if scale != 0.0:
            return False
        self.non_private = self.non_private or count > 0
        return True

    def add(self, mechanism: Mechanism, count: int) -> None:
        if self.check is not None:
            self.check(mechanism)
        if count:
            self.terms.append((mechanism, count))

    def __iter__(self):
        return iter(self.terms)

    def __len__(self) -> int:
        return len(self.terms)

    def accountant(self, name: str = "pld", **options) -> Accountant:
        """A tightdp accountant (by name, see :func:`tightdp.accountants.registry.make_accountant`)
        with every term composed, built under :attr:`neighboring`. Raises ValueError if the
        composition is non-private, or if ``options`` name another ``neighboring``."""
        if self.non_private:
            raise ValueError("the composition contains a non-private event: epsilon is inf "
                             "(use epsilon()/delta() for a result saying so)")
        given = options.pop("neighboring", None)
        if given is not None and v.neighboring("neighboring", given) != self.neighboring:
            raise ValueError(f"neighboring: the events were converted under "
                             f"{self.neighboring!r}, got {given!r}; convert them again with "
                             "from_dp_event(event, neighboring)")
        acc = make_accountant(name, neighboring=self.neighboring, **options)
        for mech, k in self.terms:
            acc.compose(mech, k)
        return acc

    def epsilon(self, delta: float, accountant: str = "pld", **options) -> EpsilonResult:
        """eps at ``delta`` from a tightdp accountant; inf (stated in the note) if
        non-private."""
        if self.non_private:
            d = v.delta_value("delta", delta)
            return EpsilonResult(math.inf, d, math.inf, math.inf, accountant, certified=True,
                                 estimate=math.inf, note=NON_PRIVATE_NOTE,
                                 details={"neighboring": self.neighboring})
        return self.accountant(accountant, **options).epsilon(delta)

    def delta(self, eps, accountant: str = "pld", **options) -> DeltaResult:
        """delta at ``eps`` from a tightdp accountant; 1 (stated in the note) if
        non-private."""
        if self.non_private:
            return DeltaResult(1.0, eps, 1.0, 1.0, accountant, certified=True, estimate=1.0,
                               note=NON_PRIVATE_NOTE, details={"neighboring": self.neighboring})
        return self.accountant(accountant, **options).delta(eps)


def _positive_or_zero(event, name: str, value) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise Refused(event, f"{type(event).__name__}.{name} must be a number, got "
                              f"{value!r}") from None
    if not (x >= 0.0 and math.isfinite(x)):
        raise Refused(event, f"{type(event).__name__}.{name} must be finite and >= 0, got "
                              f"{value!r}")
    return x


def _effective_sigma(event):
    """The noise multiplier of the single Gaussian equivalent to a nested composition of
    Gaussians on the same data (``sigma = (sum sigma_i^-2)^(-1/2)``: the stacked query has
    L2 sensitivity ``sqrt(sum sigma_i^-2)`` per unit of noise; Mironov, Talwar, Zhang 2019,
    "Rényi differential privacy of the sampled Gaussian mechanism", Sec. 3), or None if the
    tree is not made of Gaussians only. 0 means a zero-noise Gaussian inside."""
    if isinstance(event, _ev.GaussianDpEvent):
        return _positive_or_zero(event, "noise_multiplier", event.noise_multiplier)
    if isinstance(event, _ev.SelfComposedDpEvent):
        s = _effective_sigma(event.event)
        if s is None or not event.count >= 1:
            return None
        return s / math.sqrt(event.count)
    if isinstance(event, _ev.ComposedDpEvent) and event.events:
        inv = 0.0
        for e in event.events:
            s = _effective_sigma(e)
            if s is None:
                return None
            if s == 0.0:
                return 0.0
            inv += s ** -2
        return inv ** -0.5
    return None


def _base_of(event, who: str):
    """(kind, parameter) of the mechanism a sampling event runs: ("gaussian", sigma) for a
    Gaussian or a nested composition of Gaussians, ("laplace", scale) for a Laplace."""
    inner = event.event
    if isinstance(inner, _ev.LaplaceDpEvent):
        return "laplace", _positive_or_zero(inner, "noise_multiplier", inner.noise_multiplier)
    s = _effective_sigma(inner)
    if s is None:
        raise Refused(inner, f"the event inside {who} must be a GaussianDpEvent (or a "
                              "composition of them) or a LaplaceDpEvent, got "
                              f"{type(inner).__name__}")
    return "gaussian", s


def _tree_depth(event) -> int:
    """Nodes of the released trees holding one record: ``ceil(log2(n + 1))`` for the longest
    tree of ``n`` steps (Kairouz, McMahan, Song, Thakkar, Thakurta, Xu 2021, "Practical and
    private (deep) learning without sampling or shuffling", App. D; each record occurs in
    one leaf of one tree, and in the released nodes above it)."""
    steps = event.step_counts
    steps = [steps] if np.isscalar(steps) else list(steps)
    if not steps or any(not float(s).is_integer() or s < 0 for s in steps):
        raise Refused(event, "SingleEpochTreeAggregationDpEvent.step_counts must be a "
                              f"non-empty list of whole numbers >= 0, got {event.step_counts!r}")
    n = int(max(steps))
    return math.ceil(math.log2(n + 1)) if n > 0 else 0


def convert_event(event, count: int, rel: NeighboringRelation, rdp_ok: bool,
             out: DpEventComposition) -> None:
    """Add what ``count`` applications of ``event`` amount to onto ``out``; raise
    :class:`Refused` naming the innermost event that cannot be accounted."""
    if not isinstance(event, _ev.DpEvent):
        raise Refused(event, f"expected a dp_accounting DpEvent, got {event!r}")
    if isinstance(event, _ev.NoOpDpEvent):
        return
    if isinstance(event, _ev.NonPrivateDpEvent):
        if count:
            out.non_private = True
        return
    if isinstance(event, _ev.SelfComposedDpEvent):
        k = event.count
        if isinstance(k, bool) or not float(k).is_integer() or k < 1:
            raise Refused(event, f"SelfComposedDpEvent.count must be a whole number >= 1 (as "
                                  f"dp_accounting's ledger requires), got {k!r}")
        convert_event(event.event, count * int(k), rel, rdp_ok, out)
        return
    if isinstance(event, _ev.ComposedDpEvent):
        for e in event.events:
            convert_event(e, count, rel, rdp_ok, out)
        return
    try:
        _convert_leaf(event, count, rel, rdp_ok, out)
    except ValueError as err:  # a mechanism's or the accountant's own refusal
        raise Refused(event, str(err)) from None


def _convert_leaf(event, count: int, rel: NeighboringRelation, rdp_ok: bool,
                  out: DpEventComposition) -> None:
    """:func:`_convert` for an event that is not a composition: a noise event, a sampled
    one, or the rest (zCDP, and the events refused by name)."""
    if _convert_noise(event, count, rel, out) or _convert_sampled(event, count, rel, out):
        return
    name = type(event).__name__
    if isinstance(event, _ev.ZCDpEvent):
        if not rdp_ok:
            raise Refused(event, "ZCDpEvent has only a Rényi-DP analysis: use "
                                  "accountant='rdp' (RDPAccountant); the PLD, PRV accountants "
                                  "cannot take it")
        rho = _positive_or_zero(event, "rho", event.rho)
        xi = _positive_or_zero(event, "xi", event.xi)
        if rho == 0.0 and xi == 0.0:
            return
        out.add(ZCDP(rho, xi), count)
        return
    if isinstance(event, _ev.RepeatAndSelectDpEvent):
        raise Refused(event, "RepeatAndSelectDpEvent is not supported (its analysis, "
                              "Papernot & Steinke 2022, is Rényi-DP only and not implemented "
                              "in tightdp); use dp_accounting's RdpAccountant for it")
    if isinstance(event, _ev.TruncatedSubsampledGaussianDpEvent):
        _convert_truncated(event, count, rel, out)
        return
    raise Refused(event, f"{name} is not supported by tightdp (unknown or unsupported event)")


def _convert_noise(event, count: int, rel: NeighboringRelation, out: DpEventComposition
                   ) -> bool:
    """Add an event of additive noise or randomized response to ``out``; False if ``event`` is
    none of them."""
    noise = {_ev.GaussianDpEvent: Gaussian, _ev.LaplaceDpEvent: Laplace}.get(type(event))
    if noise is not None:  # additive noise, scale in units of the sensitivity
        s = _positive_or_zero(event, "noise_multiplier", event.noise_multiplier)
        if out.without_noise(s, count):
            return True
        out.add(noise(s, 2.0 if rel is _REPLACE else 1.0), count)
        return True
    if isinstance(event, _ev.DiscreteLaplaceDpEvent):
        a = _positive_or_zero(event, "noise_parameter", event.noise_parameter)
        c = event.sensitivity
        if isinstance(c, bool) or not float(c).is_integer() or c < 0:
            raise Refused(event, f"DiscreteLaplaceDpEvent.sensitivity must be a whole number "
                                  f">= 0, got {c!r}")
        if c == 0 or out.without_noise(a, count):  # no-op event, or no noise
            return True
        out.add(DiscreteLaplace(a, int(c) * (2 if rel is _REPLACE else 1)), count)
        return True
    if isinstance(event, _ev.RandomizedResponseDpEvent):
        if rel is not _REPLACE:
            raise Refused(event, "RandomizedResponseDpEvent needs neighboring relation "
                                  f"REPLACE_ONE (one input replaced by another), got {rel.name}")
        k = event.num_buckets
        if isinstance(k, bool) or not float(k).is_integer() or k < 1:
            raise Refused(event, f"RandomizedResponseDpEvent.num_buckets must be a whole "
                                  f"number >= 1, got {k!r}")
        if k == 1:
            return True  # one bucket: the output is constant
        p = _positive_or_zero(event, "noise_parameter", event.noise_parameter)
        if p > 1.0:
            raise Refused(event, f"RandomizedResponseDpEvent.noise_parameter must be in "
                                  f"[0, 1], got {p!r}")
        if out.without_noise(p, count):
            return True
        out.add(RandomizedResponse(noise_parameter=p, num_values=int(k)), count)
        return True
    if isinstance(event, _ev.MixtureOfGaussiansDpEvent):
        if rel is _REPLACE:
            raise Refused(event, "MixtureOfGaussiansDpEvent is defined for ADD_OR_REMOVE_ONE "
                                  "(or REPLACE_SPECIAL); REPLACE_ONE is not supported")
        c = np.asarray(event.sensitivities, dtype=float).ravel()
        probs = np.asarray(event.sampling_probs, dtype=float).ravel()
        if c.size == 0 or c.shape != probs.shape:
            raise Refused(event, "MixtureOfGaussiansDpEvent.sensitivities and sampling_probs "
                                  "must be non-empty and of one length")
        if np.all(c[probs > 0] == 0):
            return True  # the mixture never moves: no privacy cost
        s = _positive_or_zero(event, "standard_deviation", event.standard_deviation)
        if out.without_noise(s, count):
            return True
        try:
            out.add(MixtureOfGaussians(c, probs, s), count)
        except ValueError as err:
            raise Refused(event, f"MixtureOfGaussiansDpEvent: {err}") from None
        return True
    return False


def _convert_truncated(event, count: int, rel: NeighboringRelation, out: DpEventComposition
                       ) -> None:
    """Add a TruncatedSubsampledGaussianDpEvent (truncated Poisson sampling of a Gaussian,
    :class:`~tightdp.TruncatedPoisson`; add/remove and replace-one) to ``out``."""
    name = "TruncatedSubsampledGaussianDpEvent"
    if rel is _SPECIAL:
        raise Refused(event, f"{name} is defined under ADD_OR_REMOVE_ONE or REPLACE_ONE, not "
                              "REPLACE_SPECIAL (a special record still takes a place in the "
                              "batch)")
    for fld in ("dataset_size", "truncated_batch_size"):
        x = getattr(event, fld)
        if isinstance(x, bool) or not float(x).is_integer() or x < 1:
            raise Refused(event, f"{name}.{fld} must be a whole number >= 1, got {x!r}")
    q = _positive_or_zero(event, "sampling_probability", event.sampling_probability)
    if q > 1.0:
        raise Refused(event, f"{name}.sampling_probability must be in [0, 1], got {q!r}")
    s = _positive_or_zero(event, "noise_multiplier", event.noise_multiplier)
    if q == 0 or out.without_noise(s, count):  # no-op event, or no noise
        return
    out.add(TruncatedPoisson(Gaussian(s), q, int(event.truncated_batch_size),
                             int(event.dataset_size)), count)


def _convert_sampled(event, count: int, rel: NeighboringRelation, out: DpEventComposition
                     ) -> bool:
    """Add a subsampled event, or a tree aggregation, to ``out``; False if ``event`` is none of
    them."""
    name = type(event).__name__
    if isinstance(event, _ev.PoissonSampledDpEvent):
        kind, s = _base_of(event, "PoissonSampledDpEvent")
        if rel is _REPLACE and kind != "gaussian":
            raise Refused(event, "PoissonSampledDpEvent under REPLACE_ONE needs a "
                                  "GaussianDpEvent inside (the antipodal pair is proved for "
                                  "the Gaussian), got a LaplaceDpEvent")
        q = _positive_or_zero(event, "sampling_probability", event.sampling_probability)
        if q > 1.0:
            raise Refused(event, f"PoissonSampledDpEvent.sampling_probability must be in "
                                  f"[0, 1], got {q!r}")
        if q == 0 or out.without_noise(s, count):  # no-op event, or no noise
            return True
        base = Gaussian(s) if kind == "gaussian" else Laplace(s)
        out.add(PoissonSubsampled(base, q), count)
        return True
    if isinstance(event, _ev.SampledWithoutReplacementDpEvent | _ev.SampledWithReplacementDpEvent):
        if rel is not _REPLACE:
            raise Refused(event, f"{name} (a fixed-size batch) needs neighboring relation "
                                  f"REPLACE_ONE, got {rel.name}")
        n, m = event.source_dataset_size, event.sample_size
        for fld, x in (("source_dataset_size", n), ("sample_size", m)):
            if isinstance(x, bool) or not float(x).is_integer() or x < 0:
                raise Refused(event, f"{name}.{fld} must be a whole number >= 0, got {x!r}")
        n, m = int(n), int(m)
        if n < 1 or m > n:
            raise Refused(event, f"{name}: need 1 <= source_dataset_size and sample_size <= "
                                  f"source_dataset_size, got {n} and {m}")
        kind, s = _base_of(event, name)
        if m == 0 or out.without_noise(s, count):  # no-op event, or no noise
            return True
        if isinstance(event, _ev.SampledWithReplacementDpEvent):
            if kind != "gaussian":
                raise Refused(event.event, "SampledWithReplacementDpEvent supports a Gaussian "
                                            "inside, got a LaplaceDpEvent")
            out.add(SampledWithReplacement(Gaussian(s), m, n), count)
        else:
            base = Gaussian(s) if kind == "gaussian" else Laplace(s)
            out.add(SampledWithoutReplacement(base, m / n), count)
        return True
    if isinstance(event, _ev.SingleEpochTreeAggregationDpEvent):
        if rel is _ADD_REMOVE:
            raise Refused(event, "SingleEpochTreeAggregationDpEvent is defined under "
                                  "REPLACE_SPECIAL (or REPLACE_ONE), not ADD_OR_REMOVE_ONE "
                                  "(Kairouz et al. 2021, App. D)")
        depth = _tree_depth(event)
        s = _positive_or_zero(event, "noise_multiplier", event.noise_multiplier)
        if depth == 0 or out.without_noise(s, count):  # no-op event, or no noise
            return True
        sens = math.sqrt(depth) * (2.0 if rel is _REPLACE else 1.0)
        out.add(Gaussian(s, sens), count)
        return True
    allocation = getattr(_ev, "RandomAllocationDpEvent", None)  # in dp_accounting > 0.6
    if allocation is not None and isinstance(event, allocation):
        _convert_allocation(event, count, rel, out)
        return True
    return False


def _convert_allocation(event, count: int, rel: NeighboringRelation,
                        out: DpEventComposition) -> None:
    """A ``RandomAllocationDpEvent`` (one epoch: each record in ``num_selected`` of
    ``num_steps`` steps, the Gaussian event inside at each) as :class:`RandomAllocation`,
    defined under ADD_OR_REMOVE_ONE and REPLACE_SPECIAL; read only on dp_accounting versions
    that define the event."""
    name = type(event).__name__
    if rel is _REPLACE:
        raise Refused(event, f"{name} is defined under ADD_OR_REMOVE_ONE or REPLACE_SPECIAL, "
                              "not REPLACE_ONE")
    t: Any = getattr(event, "num_steps", getattr(event, "steps", None))
    k: Any = getattr(event, "num_selected", getattr(event, "selected", 1))
    for fld, x in (("num_steps", t), ("num_selected", k)):
        if isinstance(x, bool) or not isinstance(x, int | float) or not float(x).is_integer() \
                or x < 1:
            raise Refused(event, f"{name}.{fld} must be a whole number >= 1, got {x!r}")
    kind, s = _base_of(event, name)
    if kind != "gaussian":
        raise Refused(event.event, f"{name} supports a Gaussian inside, got a LaplaceDpEvent")
    if out.without_noise(s, count):
        return
    try:
        out.add(RandomAllocation(Gaussian(s), int(t), selected=int(k)), count)
    except ValueError as err:
        raise Refused(event, f"{name}: {err}") from None


def check_accountant(accountant: str) -> str:
    key = str(accountant).strip().lower()
    if key not in CERTIFYING:
        raise ValueError(f"accountant must be one of {', '.join(CERTIFYING)} (the certifying "
                         f"accountants), got {accountant!r}")
    return key


def from_dp_event(event, neighboring="add_or_remove_one", *, accountant: str = "pld"
                  ) -> DpEventComposition:
    """The tightdp composition a ``dp_accounting`` DpEvent tree amounts to.

    Parameters
    ----------
    event : a ``dp_accounting.DpEvent`` (any tree of Composed/SelfComposed events).
    neighboring : ``"add_or_remove_one"`` (default), ``"replace_one"`` or
        ``"replace_special"``, or a ``dp_accounting.NeighboringRelation``. See the module
        docstring for what each relation means for each event.
    accountant : the tightdp accountant the result is meant for (``"pld"``, ``"prv"`` or
        ``"rdp"``); ZCDpEvent is accepted only for ``"rdp"``.

    Returns
    -------
    DpEventComposition
        ``terms`` (a list of ``(Mechanism, count)``) and ``non_private``; iterate over it or
        call its ``epsilon``/``delta``/``accountant`` methods.

    Raises
    ------
    ValueError
        naming the event that cannot be accounted (unknown events, events without a
        certified analysis, events not defined under ``neighboring``).
    """
    rel = as_relation(neighboring)
    rdp_ok = check_accountant(accountant) == "rdp"
    relation = v.neighboring("neighboring", rel)
    check = RDPAccountant(neighboring=relation).accepts if rdp_ok else None
    out = DpEventComposition(check=check, neighboring=relation)
    try:
        convert_event(event, 1, rel, rdp_ok, out)
    except Refused as err:
        raise ValueError(f"cannot account {type(err.event).__name__}: {err.message}") from None
    return out


# what this module accounts, for the docs and the tests
SUPPORTED_EVENTS = (
    "NoOpDpEvent", "NonPrivateDpEvent", "SelfComposedDpEvent", "ComposedDpEvent",
    "GaussianDpEvent", "LaplaceDpEvent", "DiscreteLaplaceDpEvent",
    "RandomizedResponseDpEvent", "MixtureOfGaussiansDpEvent", "PoissonSampledDpEvent",
    "SampledWithoutReplacementDpEvent", "SampledWithReplacementDpEvent",
    "SingleEpochTreeAggregationDpEvent", "TruncatedSubsampledGaussianDpEvent",
    "ZCDpEvent (rdp accountant only)",
    "RandomAllocationDpEvent (where dp_accounting defines it)",
)
