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

The accountant learns from the data loader which sampler ran (:meth:`TightAccountant.attach`;
done by ``PrivacyEngine.make_private`` and ``make_private_with_epsilon`` once this module is
imported, which wraps ``PrivacyEngine.make_private`` to hand it the returned loader):

* Opacus' Poisson loader (``DPDataLoader``, ``UniformWithReplacementSampler``: what
  ``poisson_sampling=True``, the default, gives) -- Poisson subsampling, as above.
* A shuffled loader of fixed-size batches (``make_private(..., poisson_sampling=False)``
  with ``DataLoader(..., shuffle=True)``: a ``RandomSampler`` without replacement) -- epochs
  of shuffling (:class:`~tightdp.Shuffled`, Chua, Ghazi et al. 2024, "How private are DP-SGD
  implementations?"), under replace_special (zero-out), with a ``UserWarning``: Opacus'
  accountants step such a run with the Poisson rate, which understates its privacy loss. A
  loader whose last batch is partial is refused unless it drops it (``drop_last=True``:
  ``dataset_size // batch_size`` whole batches, a random subset shuffled; see
  :mod:`tightdp.dpsgd.setting`).
* :class:`RandomAllocationSampler` as the loader's ``batch_sampler`` -- epochs of random
  allocation (:class:`~tightdp.RandomAllocation`, Feldman & Shenfeld 2025), add/remove.
* Anything else -- Poisson at the rate Opacus steps with, with a ``UserWarning`` that this
  may understate the privacy loss of the sampler that ran.

For the epoch samplings the epochs composed are the larger of the epochs the loader started
(every pass over it draws a new permutation or allocation) and ``ceil(steps /
steps_per_epoch)``, each counted whole (a partial epoch is a prefix of a whole one: a
post-processing of it), with the smallest noise multiplier of the history for every step (a
larger noise is the smaller one plus independent noise: a post-processing).
"""

from __future__ import annotations

import functools
import math
import numbers
import warnings
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any, cast

import numpy as np
import torch
from opacus import PrivacyEngine
from opacus.accountants import IAccountant, register_accountant
from opacus.utils.uniform_sampler import (
    DistributedUniformWithReplacementSampler,
    UniformWithReplacementSampler,
)

from .. import _validate as v
from .._defaults import DEFAULT_RTOL
from ..accountants.pld import PLDAccountant
from ..budget import Budget
from ..dpsgd.calibrate import calibrate_noise
from ..dpsgd.epsilon import RELATION_NOTE, composed
from ..dpsgd.setting import dpsgd_setting
from ..mechanisms import Gaussian, PoissonSubsampled
from ..results import EpsilonResult
from ..risk import DEFAULT_FPR, TradeoffResult, risk_values, tradeoff

__all__ = ["TightAccountant", "RandomAllocationSampler", "convert_state_dict",
           "get_noise_multiplier", "register", "MECHANISM"]

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


class RandomAllocationSampler(torch.utils.data.Sampler):
    """A batch sampler for ``torch.utils.data.DataLoader(dataset, batch_sampler=...)`` that
    draws the very scheme :class:`~tightdp.RandomAllocation` certifies: each epoch (each pass
    over it), every index ``0 .. dataset_size - 1`` is placed in ``selected`` of the
    ``steps`` batches, chosen uniformly at random among the ``C(steps, selected)`` subsets,
    independently of the other indices (Feldman & Shenfeld 2025, "Privacy amplification by
    random allocation"). Batches are lists of indices of varying size (``dataset_size *
    selected / steps`` on average; possibly empty); ``len()`` is ``steps``.

    Parameters
    ----------
    dataset_size : n >= 1, the number of examples.
    steps : t >= 1, the batches (optimizer steps) of one epoch.
    selected : k in [1, t], the batches each example joins per epoch (default 1).
    generator : a ``torch.Generator`` for the draws (default: torch's global one).

    ``epochs`` counts the passes started, which :class:`TightAccountant` composes.
    """

    #: index-by-step draws held at once when ``selected > 1`` (bounds the sampler's memory)
    CHUNK = 1 << 22

    def __init__(self, dataset_size: int, steps: int, selected: int = 1,
                 generator: torch.Generator | None = None) -> None:
        self.dataset_size = v.count("dataset_size", dataset_size, minimum=1)
        self.steps = v.count("steps", steps, minimum=1)
        self.selected = v.count("selected", selected, minimum=1)
        if self.selected > self.steps:
            raise ValueError(f"selected must be in [1, steps={self.steps}], got {selected!r}")
        if generator is not None and not isinstance(generator, torch.Generator):
            raise ValueError(f"generator must be a torch.Generator or None, got "
                             f"{type(generator).__name__}")
        self.generator = generator
        self.epochs = 0

    def __len__(self) -> int:
        return self.steps

    def _steps_of_examples(self) -> torch.Tensor:
        """Step of every (example, selection): shape ``(n * k,)``, example-major."""
        n, t, k = self.dataset_size, self.steps, self.selected
        if k == 1:
            return torch.randint(t, (n,), generator=self.generator)
        rows = max(1, self.CHUNK // t)
        # the k smallest of t i.i.d. uniforms: a uniformly random k-subset of the steps
        parts = [torch.rand(min(rows, n - i), t, generator=self.generator)
                 .argsort(dim=1)[:, :k].reshape(-1) for i in range(0, n, rows)]
        return torch.cat(parts)

    def __iter__(self) -> Iterator[list[int]]:
        self.epochs += 1
        step = self._steps_of_examples()
        index = torch.arange(self.dataset_size).repeat_interleave(self.selected)
        order = torch.argsort(step, stable=True)
        sizes = torch.bincount(step, minlength=self.steps).tolist()
        for batch in torch.split(index[order], sizes):
            yield batch.tolist()


class _EpochCounter(torch.utils.data.Sampler):
    """A loader's sampler counting the passes started (each a new permutation)."""

    def __init__(self, inner: torch.utils.data.Sampler) -> None:
        self.inner = inner
        self.epochs = 0

    def __len__(self) -> int:
        return len(cast(Any, self.inner))

    def __iter__(self) -> Iterator:
        self.epochs += 1
        return iter(self.inner)


def _loader_scheme(data_loader) -> dict:
    """How ``data_loader`` draws its batches, as the keyword arguments of
    :func:`tightdp.dpsgd.setting.dpsgd_setting` (``sampling`` and its sizes) plus the object
    counting its epochs (``counter``; None for Poisson); see the module docstring."""
    bs = getattr(data_loader, "batch_sampler", None)
    if isinstance(bs, RandomAllocationSampler):
        return {"sampling": "random_allocation", "steps_per_epoch": bs.steps,
                "selected": bs.selected, "counter": bs}
    if isinstance(bs, UniformWithReplacementSampler | DistributedUniformWithReplacementSampler):
        return {"sampling": "poisson", "counter": None}
    inner = getattr(bs, "sampler", None)
    base = inner.inner if isinstance(inner, _EpochCounter) else inner
    n = len(data_loader.dataset) if hasattr(data_loader.dataset, "__len__") else None
    if (isinstance(bs, torch.utils.data.BatchSampler)
            and isinstance(base, torch.utils.data.RandomSampler) and not base.replacement
            and n is not None and base.num_samples == n):
        b = bs.batch_size
        if n % b and not bs.drop_last:
            raise ValueError(
                f"data_loader: a shuffled loader of {n} examples in batches of {b} ends each "
                f"epoch with a partial batch of {n % b}, which the shuffling analysis does "
                "not cover; pass drop_last=True to the DataLoader (or a batch_size dividing "
                "the dataset size), or use poisson_sampling=True")
        if not isinstance(inner, _EpochCounter):
            inner = _EpochCounter(base)
            bs.sampler = inner
        return {"sampling": "shuffle", "steps_per_epoch": n // b, "counter": inner,
                "batch_size": b, "dataset_size": n}
    warnings.warn(f"TightAccountant cannot tell how {type(bs).__name__} draws batches: it "
                  "accounts Poisson subsampling at the rate Opacus steps with, which can "
                  "understate the privacy loss of another sampler; use poisson_sampling=True, "
                  "a shuffled DataLoader or RandomAllocationSampler", stacklevel=3)
    return {"sampling": "poisson", "counter": None}


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
        #: how the batches are drawn (:meth:`attach`): dpsgd_setting's sampling keywords
        self.scheme: dict = {"sampling": "poisson"}
        self._counter: Any = None
        self._epochs_before = 0  # epochs started before a load_state_dict

    def attach(self, data_loader) -> str:
        """Learn from ``data_loader`` how its batches are drawn (see the module docstring)
        and account the steps accordingly; returns the sampling's name. ``make_private`` does
        it for the loader it returns; call it yourself for a loader built otherwise."""
        scheme = _loader_scheme(data_loader)
        self._counter = scheme.pop("counter")
        self.scheme = scheme
        self._cache = {}
        if scheme["sampling"] == "shuffle":
            warnings.warn(
                f"the data loader shuffles into {scheme['steps_per_epoch']} fixed-size batches "
                "per epoch (not Poisson sampling): TightAccountant accounts epochs of "
                "shuffling under replace_special (zero-out); Opacus' Poisson number for this "
                "run would understate its privacy loss", stacklevel=2)
        return scheme["sampling"]

    @property
    def epochs_started(self) -> int:
        """Passes over an attached loader of an epoch sampling started so far."""
        own = 0 if self._counter is None else int(self._counter.epochs)
        return self._epochs_before + own

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
            acc, note, extra = self._composed(history)
            r = acc.epsilon(delta)
            r.note = "; ".join(x for x in (note, r.note) if x)
            r.details = {**r.details, **extra}
        r.details = {**r.details, "history": [list(e) for e in history],
                     "sampling": self.scheme["sampling"]}
        self._cache = {key: r}
        return r

    def _composed(self, history: list[tuple[float, float, int]]
                  ) -> tuple[PLDAccountant, str, dict]:
        """The PLD accountant of the steps taken, with a note and details: Poisson steps as
        taken, or for an attached epoch sampling (module docstring) whole epochs, each with
        the history's smallest noise multiplier."""
        if self.scheme["sampling"] == "poisson":
            acc = PLDAccountant(self.rtol, max_memory=self.budget.max_memory,
                                max_seconds=self.budget.max_seconds)
            for sigma, q, n in history:
                acc.compose(PoissonSubsampled(Gaussian(sigma), q), n)
            return acc, "", {}
        scheme = {k: x for k, x in self.scheme.items() if k not in ("batch_size",
                                                                    "dataset_size")}
        t = scheme["steps_per_epoch"]
        for _, q, _ in history:
            if abs(q * t - 1) > 1e-9:
                raise ValueError(
                    f"sample_rate {q!r} is not 1 / steps_per_epoch ({t}): gradient "
                    f"accumulation over {q * t:.3g} batches is not supported with "
                    f"{scheme['sampling']} accounting; step the optimizer once per batch")
        steps = sum(n for _, _, n in history)
        epochs = max(math.ceil(steps / t), self.epochs_started)
        sigma = min(s for s, _, _ in history)
        setting = dpsgd_setting(noise_multiplier=sigma, steps=epochs * t, **scheme)
        acc = cast(PLDAccountant, composed(setting, rtol=self.rtol,
                                           max_memory=self.budget.max_memory,
                                           max_seconds=self.budget.max_seconds))
        note = (f"{epochs} epoch(s) of {scheme['sampling']} ({t} steps each; {steps} steps "
                f"taken), noise multiplier {sigma:g}")
        if len({s for s, _, _ in history}) > 1:
            note += " (the smallest of the history, for every step)"
        if acc.neighboring == "replace_special":
            note += "; " + RELATION_NOTE
        return acc, note, {"epochs": epochs, "steps_per_epoch": t}

    def tradeoff_result(self, fpr) -> TradeoffResult:
        """Certified TPR of the best membership attack at ``fpr`` and its advantage for the
        steps taken so far (:func:`tightdp.risk.tradeoff` of the accountant of
        :meth:`get_epsilon_result`: Poisson steps, or the epochs of an attached sampling)."""
        history = _check_history(self.history)
        if any(sigma == 0 for sigma, _, _ in history):
            a = risk_values("fpr", fpr).reshape(-1)
            return TradeoffResult(a, np.ones(a.size), np.ones(a.size), 1.0, 1.0, "pld",
                                  "add_or_remove_one", 0.0, "a step with noise_multiplier=0 "
                                  "releases an unnoised gradient", certified=True)
        return tradeoff(self._composed(history)[0], fpr=fpr)

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
        if isinstance(state_dict, dict) and "sampling" in state_dict:
            self.scheme, self._epochs_before = _check_scheme(state_dict)
            self._counter = None

    def state_dict(self, destination=None):
        """Opacus' ``history`` and ``mechanism``, with the sampling learnt by :meth:`attach`
        (``sampling``) and the epochs started (``epochs_started``): a resumed run goes on
        with the same accounting."""
        out = super().state_dict(destination)
        out["history"] = [tuple(e) for e in out["history"]]
        out["sampling"] = dict(self.scheme)
        out["epochs_started"] = self.epochs_started
        return out


def _check_scheme(state_dict: dict) -> tuple[dict, int]:
    """The ``sampling`` and ``epochs_started`` of a saved state, checked by building the
    setting they describe."""
    scheme = state_dict["sampling"]
    if not isinstance(scheme, dict) or scheme.get("sampling") not in (
            "poisson", "shuffle", "random_allocation"):
        raise ValueError(f"state_dict sampling must be a dict naming poisson, shuffle or "
                         f"random_allocation, got {scheme!r}")
    epochs = v.count("state_dict epochs_started", state_dict.get("epochs_started", 0))
    if scheme["sampling"] != "poisson":
        try:
            dpsgd_setting(noise_multiplier=1.0, steps=0, **{
                k: x for k, x in scheme.items() if k not in ("batch_size", "dataset_size")})
        except (TypeError, ValueError) as err:
            raise ValueError(f"state_dict sampling: {err}") from None
    return dict(scheme), epochs


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
    """Register :class:`TightAccountant` with Opacus under the name ``"tightdp"`` and have
    ``PrivacyEngine.make_private`` hand the data loader it returns to a
    :class:`TightAccountant` (:meth:`TightAccountant.attach`); done on import of this
    module, the wrapping once."""
    register_accountant(MECHANISM, TightAccountant, force=force)
    make_private = PrivacyEngine.make_private
    if hasattr(make_private, "tightdp_attaches"):
        return

    @functools.wraps(make_private)
    def attaching(self, *args, **kwargs):
        out = make_private(self, *args, **kwargs)
        if isinstance(self.accountant, TightAccountant):
            self.accountant.attach(out[-1])  # the data loader comes last
        return out

    attaching.tightdp_attaches = True  # type: ignore[attr-defined]
    PrivacyEngine.make_private = attaching


register()
