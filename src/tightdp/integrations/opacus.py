"""tightdp as an Opacus accountant: ``PrivacyEngine(accountant="tightdp")``.

Importing this module registers :class:`TightAccountant` in Opacus' own accountant registry
(``opacus.accountants.register_accountant``) under the name ``"tightdp"`` (call
:func:`register` to do it again, e.g. after another library replaced the name). From then on
the lines Opacus users already have work with that one name changed:
``PrivacyEngine(accountant="tightdp")``, ``make_private_with_epsilon(...)``,
``privacy_engine.get_epsilon(delta)`` and
``opacus.accountants.utils.get_noise_multiplier(..., accountant="tightdp")``.

The accountant keeps Opacus' run-length ``history`` of ``(noise_multiplier, sample_rate,
num_steps)`` exactly as Opacus' own RDP and PRV accountants do, and accounts each run as
``num_steps`` compositions of the Poisson-subsampled Gaussian mechanism (Koskela, Jaelkoe and
Honkela, "Computing tight differential privacy guarantees using FFT", AISTATS 2020, Sec. 6.1)
with the certified :class:`~tightdp.accountants.PLDAccountant`: noise and sampling-rate
schedules are composed exactly, never averaged. ``get_epsilon`` is the certified upper bound.
"""

from __future__ import annotations

import math
import numbers
from collections import OrderedDict
from typing import Any, cast

import numpy as np
from opacus.accountants import IAccountant, register_accountant

from .. import _validate as v
from .._defaults import DEFAULT_RTOL
from ..accountants.pld import PLDAccountant
from ..budget import Budget
from ..dpsgd.calibrate import calibrate_noise
from ..mechanisms import Gaussian, PoissonSubsampled
from ..results import EpsilonResult
from ..risk import DEFAULT_FPR, TradeoffResult, risk_values, tradeoff

__all__ = ["TightAccountant", "convert_state_dict", "get_noise_multiplier", "register",
           "MECHANISM"]

#: the name under which :class:`TightAccountant` is registered with Opacus
MECHANISM = "tightdp"

#: Opacus accountants whose ``state_dict`` holds the same history format as ours
_CONVERTIBLE = ("rdp", "prv", "gdp")


def _check_entry(where: str, entry: Any) -> tuple[float, float, int]:
    """One history entry ``(noise_multiplier, sample_rate, num_steps)``, validated."""
    if not isinstance(entry, (tuple, list)) or len(entry) != 3:
        raise ValueError(f"{where} must be a (noise_multiplier, sample_rate, num_steps) "
                         f"triple, got {entry!r}")
    sigma, q, n = entry
    sigma = v.nonnegative(f"{where} noise_multiplier", sigma)
    q = v.probability_open_closed(f"{where} sample_rate", q)
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) and not (
            isinstance(n, numbers.Real) and float(n).is_integer()):
        raise ValueError(f"{where} num_steps must be an integer >= 1, got {n!r}")
    n = v.count(f"{where} num_steps", int(cast(Any, n)), minimum=1)
    return sigma, q, n


def _check_history(history: Any, name: str = "history") -> list[tuple[float, float, int]]:
    if not isinstance(history, (list, tuple)):
        raise ValueError(f"{name} must be a list of (noise_multiplier, sample_rate, num_steps) "
                         f"triples, got {type(history).__name__}")
    return [_check_entry(f"{name}[{i}]", e) for i, e in enumerate(history)]


class TightAccountant(IAccountant):
    """Opacus accountant backed by tightdp's certified PLD accountant.

    Parameters
    ----------
    rtol : relative width of the certified bracket of eps (default :data:`tightdp.DEFAULT_RTOL`, as
        :func:`tightdp.dpsgd_epsilon`).
    max_memory, max_seconds : the budget of one ``get_epsilon`` query (see
        :mod:`tightdp.budget`; default 2 GB and 60 s).

    Opacus builds registered accountants without arguments; for other settings assign
    ``privacy_engine.accountant = TightAccountant(rtol=...)`` before ``make_private``.

    Notes
    -----
    ``len(accountant)`` is the number of run-length entries of ``history``, as for Opacus' own
    accountants (``PrivacyEngine`` only tests it against 0). A step with noise multiplier 0 is
    recorded; eps is then reported as ``inf`` (no finite bound exists).
    """

    def __init__(self, rtol: float = DEFAULT_RTOL, *, max_memory=None, max_seconds=None) -> None:
        super().__init__()
        self.history: list  # Opacus' run-length history, set by IAccountant.__init__
        self.rtol = v.positive("rtol", rtol)
        self.budget = Budget.make(max_memory, max_seconds)
        self._cache: dict = {}

    @classmethod
    def mechanism(cls) -> str:
        return MECHANISM

    def __len__(self) -> int:
        return len(self.history)

    def step(self, *, noise_multiplier: float, sample_rate: float) -> None:
        """Record one optimisation step (run-length encoded in ``history``)."""
        sigma = v.nonnegative("noise_multiplier", noise_multiplier)
        q = v.probability_open_closed("sample_rate", sample_rate)
        if self.history:
            last_sigma, last_q, n = self.history[-1]
            if last_sigma == sigma and last_q == q:
                self.history[-1] = (last_sigma, last_q, n + 1)
                return
        self.history.append((sigma, q, 1))

    def get_epsilon_result(self, delta: float) -> EpsilonResult:
        """The full certified result at ``delta``: ``epsilon`` (= ``upper``, the certified
        upper bound), ``lower``, ``note`` and ``details`` (``seconds``, ``history``)."""
        delta = v.delta_value("delta", delta)
        history = _check_history(self.history)
        key = (tuple(history), delta)
        if key in self._cache:
            return self._cache[key]
        if any(sigma == 0 for sigma, _, _ in history):
            r = EpsilonResult(math.inf, delta, None, math.inf, "pld", certified=True,
                              note="a step with noise_multiplier=0 releases an unnoised "
                                   "gradient: no finite epsilon bound")
        else:
            acc = PLDAccountant(self.rtol, max_memory=self.budget.max_memory,
                                max_seconds=self.budget.max_seconds)
            for sigma, q, n in history:
                acc.compose(PoissonSubsampled(Gaussian(sigma), q), n)
            r = acc.epsilon(delta)
        r.details = {**r.details, "history": [list(e) for e in history]}
        self._cache = {key: r}
        return r

    def tradeoff_result(self, fpr) -> TradeoffResult:
        """Certified TPR of the best membership attack at ``fpr`` and its advantage for the
        steps taken so far (:func:`tightdp.risk.tradeoff` of the same PLD composition)."""
        history = _check_history(self.history)
        acc = PLDAccountant(self.rtol, max_memory=self.budget.max_memory,
                            max_seconds=self.budget.max_seconds)
        if any(sigma == 0 for sigma, _, _ in history):
            a = risk_values("fpr", fpr).reshape(-1)
            return TradeoffResult(a, np.ones(a.size), np.ones(a.size), 1.0, 1.0, "pld",
                                  acc.neighboring, 0.0, "a step with noise_multiplier=0 "
                                  "releases an unnoised gradient", certified=True)
        for sigma, q, n in history:
            acc.compose(PoissonSubsampled(Gaussian(sigma), q), n)
        return tradeoff(acc, fpr=fpr)

    def get_tpr(self, fpr) -> float | np.ndarray:
        """Certified upper bound on the TPR of the best membership attack at false-positive
        rate ``fpr`` (a number or an array) after the steps taken so far."""
        r = self.tradeoff_result(fpr)
        return float(r.tpr_upper[0]) if np.ndim(fpr) == 0 else r.tpr_upper

    def get_advantage(self) -> float:
        """Certified upper bound on the best attack's advantage (largest TPR - FPR)."""
        return float(self.tradeoff_result(DEFAULT_FPR).advantage_upper)

    def get_epsilon(self, delta: float, **kwargs) -> float:
        """Certified upper bound of eps at ``delta`` for the steps taken so far (0 before the
        first step). Extra keyword arguments, which Opacus forwards from
        ``make_private_with_epsilon``, do not change the accounting and are ignored."""
        if not self.history:
            v.delta_value("delta", delta)
            return 0.0
        return float(self.get_epsilon_result(delta).epsilon)

    def load_state_dict(self, state_dict) -> None:
        """Load a state saved by a :class:`TightAccountant`. A state of Opacus' RDP, PRV or GDP
        accountant must go through :func:`convert_state_dict` first (an explicit step, so that
        a checkpoint is never silently re-interpreted)."""
        if isinstance(state_dict, dict) and state_dict.get("mechanism") in _CONVERTIBLE:
            raise ValueError(
                f"state_dict was saved by Opacus' {state_dict['mechanism']!r} accountant; "
                "load convert_state_dict(state_dict) from tightdp.integrations.opacus instead")
        super().load_state_dict(state_dict)
        self.history = [tuple(e) for e in _check_history(self.history, "state_dict history")]
        self._cache = {}

    def state_dict(self, destination=None):
        out = super().state_dict(destination)
        out["history"] = [tuple(e) for e in out["history"]]
        return out


def convert_state_dict(state_dict) -> OrderedDict:
    """A ``state_dict`` of Opacus' RDP, PRV or GDP accountant (or of ours) as one that
    :meth:`TightAccountant.load_state_dict` accepts: same history, mechanism ``"tightdp"``.
    Raises ValueError naming the field for anything malformed."""
    if not isinstance(state_dict, dict):
        raise ValueError(f"state_dict must be a dict, got {type(state_dict).__name__}")
    mech = state_dict.get("mechanism")
    if mech not in (*_CONVERTIBLE, MECHANISM):
        raise ValueError(f"state_dict mechanism must be one of {', '.join(_CONVERTIBLE)} or "
                         f"{MECHANISM}, got {mech!r}")
    if "history" not in state_dict:
        raise ValueError("state_dict has no 'history'")
    history = _check_history(state_dict["history"], "state_dict history")
    return OrderedDict(history=[tuple(e) for e in history], mechanism=MECHANISM)


def get_noise_multiplier(*, target_epsilon: float, target_delta: float, sample_rate: float,
                         epochs: float | None = None, steps: int | None = None,
                         rtol: float = DEFAULT_RTOL, max_memory=None, max_seconds=None) -> float:
    """Smallest noise multiplier (to relative ``rtol / 4``) whose certified eps at
    ``target_delta`` after the given epochs or steps of Poisson-subsampled DP-SGD is at most
    ``target_epsilon`` -- Opacus' signature, backed by
    :func:`tightdp.calibrate_noise`
    (it never overshoots the target). ``steps = int(epochs / sample_rate)`` as in Opacus."""
    if (steps is None) == (epochs is None):
        raise ValueError("get_noise_multiplier takes either epochs or steps (exactly one)")
    q = v.probability_open_closed("sample_rate", sample_rate)
    if steps is None:
        steps = int(v.positive("epochs", epochs) / q)
    steps = v.count("steps", steps, minimum=1)
    r = calibrate_noise(epsilon=target_epsilon, delta=target_delta, sampling_rate=q,
                        steps=steps, rtol=rtol, max_memory=max_memory, max_seconds=max_seconds)
    return float(r.noise_multiplier)


def register(force: bool = True) -> None:
    """Register :class:`TightAccountant` with Opacus under the name ``"tightdp"`` (done on
    import of this module)."""
    register_accountant(MECHANISM, TightAccountant, force=force)


register()
