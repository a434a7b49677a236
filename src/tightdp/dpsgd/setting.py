"""One validated DP-SGD setting, and the mechanism of one of its rounds.

Every DP-SGD front door (:func:`~tightdp.dpsgd_epsilon`, :func:`~tightdp.dpsgd_delta`,
:func:`~tightdp.group_epsilon`, the ``calibrate_*`` searches) and the ``tightdp`` command
validate their arguments here, with the same parameter names (the command's flags without the
dashes), and account the mechanism built here.

Samplings (``sampling=``; dashes or underscores):

* ``"poisson"`` -- each example joins a round's batch independently with probability
  ``sampling_rate`` (or ``batch_size / dataset_size``, the expected batch size over the
  dataset size); add/remove adjacency. One round is the Poisson-subsampled Gaussian mechanism
  (Koskela, Jälkö, Honkela 2020, "Computing tight differential privacy guarantees using FFT",
  Sec. 6.1; Ganesh 2024, "Tight group-level DP guarantees for DP-SGD with sampling via mixture
  of Gaussians mechanisms", Thm 3.1 with k = 1: sensitivity ``Binomial(1, q)``).
* ``"fixed_batch"`` -- a uniformly random batch of exactly ``batch_size`` examples per round
  (sampling without replacement), add/remove adjacency, the guarantee holding for every
  dataset of at least ``dataset_size`` examples. One round is dominated by the mixture of
  Gaussians with sensitivity ``2 * Hypergeom(B, n + 1, 1)`` (Ganesh 2024, Thm 3.3 with
  k = 1): sensitivity 2 (the added example replaces another in the batch) with probability
  ``B / (n + 1)``, else 0. That two-component mixture *is* the Poisson-subsampled Gaussian
  pair with sensitivity 2 at rate ``B / (n + 1)``, which is what is built (it has a
  closed-form loss inverse; Koskela et al. 2020, Sec. 6.1).
* ``"without_replacement"`` -- a batch drawn without replacement at rate ``sampling_rate``
  (or ``batch_size / dataset_size``) under the *substitute* (replace-one) relation: the
  worst-case pair of :class:`~tightdp.mechanisms.SampledWithoutReplacement` (Lebeda, Regehr,
  Kamath, Steinke 2024, "Avoiding pitfalls for privacy accounting of subsampled mechanisms
  under composition").
* ``"with_replacement"`` -- ``batch_size`` draws with replacement from ``dataset_size``
  examples under the substitute (replace-one) relation
  (:class:`~tightdp.mechanisms.SampledWithReplacement`, worst-case pair).
* ``"random_allocation"`` -- one epoch of ``steps_per_epoch`` rounds in which every example
  takes part in exactly ``selected`` rounds chosen uniformly at random (Feldman & Shenfeld
  2025, "Privacy amplification by random allocation"; with ``selected=1`` the "balls and
  bins" sampling of Chua, Ghazi et al. 2025, "Balls-and-bins sampling for DP-SGD"):
  :class:`~tightdp.RandomAllocation`, a bracketed mechanism (its answers are
  [lower of a dominated pair, upper of a dominating pair], the gap in the note); add/remove
  adjacency (also replace_special). ``steps_per_epoch``, or ``batch_size`` (the expected
  batch) with ``dataset_size``: ``steps_per_epoch = dataset_size * selected / batch_size``,
  which must be a whole number.
* ``"shuffle"`` -- one epoch of a uniformly random permutation cut into ``steps_per_epoch``
  batches of ``dataset_size / steps_per_epoch`` examples (Chua, Ghazi et al. 2024, "How
  private are DP-SGD implementations?"; :class:`~tightdp.Shuffled`, bracketed). A fixed
  batch size has no add/remove analysis (an added example moves the batches of the
  others): it is accounted under ``replace_special`` ("zero-out": one
  example replaced by a null one contributing a zero gradient; the answer's note says so),
  or ``replace_one`` when asked with ``neighboring="replace_one"``; ``add_or_remove_one`` is
  refused. ``steps_per_epoch``, or ``batch_size`` with ``dataset_size`` a multiple of it (a
  partial last batch is refused: drop it, as ``drop_last=True`` does, and give the dataset
  size of the whole batches; a random subset of the examples shuffled into whole batches is
  a mixture of shuffled epochs of that many examples, so the bound still holds by joint
  convexity of the hockey-stick divergence).
* ``"truncated_poisson"`` -- Poisson sampling at ``sampling_rate`` (or ``batch_size /
  dataset_size``, the expected batch) whose batch is truncated to ``max_batch_size`` examples
  from ``dataset_size`` (Chua, Ghazi et al. 2024, "Scalable DP-SGD: shuffling vs. Poisson
  subsampling"; :class:`~tightdp.TruncatedPoisson`, bracketed; add/remove); one
  mechanism per round, as for poisson.

``random_allocation`` and ``shuffle`` compose one mechanism per *epoch*: ``epochs`` (a number
> 0, a partial last epoch counted whole: its rounds are a prefix of a whole epoch's, a
post-processing of it) or ``steps``, the total number of rounds, a multiple of
``steps_per_epoch`` (else refused). ``sampling_rate`` does not apply to them.

The front doors build their accountant with the relation of the sampling
(:attr:`Sampling.neighboring`), and every answer names it in ``details["neighboring"]``;
Poisson sampling may be asked under ``neighboring="replace_one"`` instead (one record
replaced by another: the antipodal pair of :class:`~tightdp.PoissonSubsampled`).

Steps: ``steps`` (an integer >= 0) or ``epochs`` (a number > 0), not both. One epoch is
``dataset_size / batch_size`` rounds when the sizes are given, else ``1 / sampling_rate``;
``steps = ceil(epochs * dataset_size / batch_size)`` or ``ceil(epochs / sampling_rate)``,
the ratio computed exactly in rational arithmetic (no step lost to floating-point rounding)
and rounded up: a fractional last epoch counts as a whole round, so the eps reported never
counts fewer rounds than were run. The one exception is a rate's binary representation: a
ratio above an integer by less than ``RATIO_RTOL`` (1e-12) relative is that integer
(``epochs=3, sampling_rate=0.3`` is 10 rounds, not 11 from 0.3 being stored as
0.29999999999999998890).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import cast

import numpy as np

from .. import _validate as v
from ..mechanisms import (
    Gaussian,
    Mechanism,
    MixtureOfGaussians,
    PoissonSubsampled,
    RandomAllocation,
    SampledWithoutReplacement,
    SampledWithReplacement,
    Shuffled,
)

__all__ = ["SAMPLINGS", "EPOCH_SAMPLINGS", "Sampling", "DPSGDSetting", "make_sampling",
           "dpsgd_setting", "steps_of_epochs", "RATIO_RTOL"]

#: the samplings a setting accepts (the command spells them with dashes)
SAMPLINGS = ("poisson", "fixed_batch", "without_replacement", "with_replacement",
             "random_allocation", "shuffle", "truncated_poisson")
#: the samplings whose batch is fixed by its size (no free rate)
_SIZED = ("fixed_batch", "with_replacement")
#: the samplings one of whose mechanisms is a whole epoch of ``steps_per_epoch`` rounds
EPOCH_SAMPLINGS = ("random_allocation", "shuffle")
#: the relations each sampling can be accounted under, its default first (the others take
#: the one relation their pair is stated for)
_RELATIONS = {"poisson": ("add_or_remove_one", "replace_one"),
              "fixed_batch": ("add_or_remove_one",),
              "without_replacement": ("replace_one",), "with_replacement": ("replace_one",),
              "random_allocation": ("add_or_remove_one", "replace_special", "replace_one"),
              "shuffle": ("replace_special", "replace_one"),
              "truncated_poisson": ("add_or_remove_one",)}


def _scheme(name: str):
    """The mechanism class ``name`` of :mod:`tightdp.mechanisms`, looked up at use: a build
    without it refuses its sampling in one line rather than failing on import."""
    from .. import mechanisms

    cls = getattr(mechanisms, name, None)
    if cls is None:
        raise ValueError(f"sampling: this build of tightdp has no {name} mechanism")
    return cls


def _sampling_name(sampling: object) -> str:
    s = sampling.strip().lower().replace("-", "_") if isinstance(sampling, str) else None
    if s not in SAMPLINGS:
        raise ValueError(f"sampling must be one of {', '.join(SAMPLINGS)}, got {sampling!r}")
    return s


@dataclass(frozen=True)
class Sampling:
    """How the batches of DP-SGD are drawn (validated by :func:`make_sampling`).

    ``sampling_rate`` is the rate as given, or ``batch_size / dataset_size`` when the sizes
    were given instead (for ``fixed_batch`` and ``with_replacement`` it is informational: the
    analysis uses the sizes); for the epoch samplings it is the share of an epoch's rounds
    an example takes part in (``selected / steps_per_epoch``), informational too.
    ``steps_per_epoch`` and ``selected`` belong to the epoch samplings
    (:data:`EPOCH_SAMPLINGS`), ``max_batch_size`` to truncated_poisson.
    """

    kind: str
    sampling_rate: float
    batch_size: int | None
    dataset_size: int | None
    steps_per_epoch: int | None = None
    selected: int = 1
    max_batch_size: int | None = None

    @property
    def per_epoch(self) -> bool:
        """Whether one mechanism (:meth:`mechanism`) is a whole epoch of rounds."""
        return self.kind in EPOCH_SAMPLINGS

    @property
    def rounds_per_mechanism(self) -> int:
        """The rounds one mechanism covers: ``steps_per_epoch`` for the epoch samplings,
        else 1."""
        return cast(int, self.steps_per_epoch) if self.per_epoch else 1

    @property
    def relations(self) -> tuple[str, ...]:
        """The neighbouring relations the sampling can be accounted under, the default
        (:attr:`neighboring`) first."""
        return _RELATIONS[self.kind]

    @property
    def adjacency(self) -> str:
        """``"add_remove"``, ``"substitute"`` (replace-one) or ``"replace_special"``: the
        default relation (:attr:`neighboring`) in the words of the setting's description."""
        return {"add_or_remove_one": "add_remove", "replace_one": "substitute"}.get(
            self.neighboring, self.neighboring)

    @property
    def neighboring(self) -> str:
        """The neighbouring relation the rounds are accounted under by default, as an
        accountant's ``neighboring``: ``"add_or_remove_one"`` (poisson, fixed_batch,
        random_allocation, truncated_poisson), ``"replace_one"`` (without_replacement,
        with_replacement) or ``"replace_special"`` (shuffle)."""
        return self.relations[0]

    def relation(self, neighboring: str | None = None) -> str:
        """``neighboring`` checked to be one of :attr:`relations` (None: the default); the
        one-line refusal names the relations the sampling allows."""
        if neighboring is None:
            return self.neighboring
        asked = v.neighboring("neighboring", neighboring)
        if asked not in self.relations:
            allowed = " or ".join(repr(r) for r in self.relations)
            raise ValueError(f"neighboring: sampling={self.kind!r} is accounted under "
                             f"{allowed} (default {self.neighboring!r}), got {neighboring!r}")
        return asked

    def _sizes(self) -> tuple[int, int]:
        """``(batch_size, dataset_size)`` of a sampling given by its sizes (both set then)."""
        return cast(int, self.batch_size), cast(int, self.dataset_size)

    def mechanism(self, noise_multiplier: float, neighboring: str | None = None
                  ) -> Mechanism:
        """The mechanism of one round -- of one epoch for the epoch samplings -- with noise
        multiplier ``noise_multiplier`` (see the module docstring for each sampling and its
        reference), stated under ``neighboring`` (one of :attr:`relations`; default
        :attr:`neighboring`)."""
        sigma = v.positive("noise_multiplier", noise_multiplier)
        relation = self.relation(neighboring)
        if self.kind == "poisson":
            return PoissonSubsampled(Gaussian(sigma), self.sampling_rate)
        if self.kind == "fixed_batch":
            # Ganesh 2024, Thm 3.3, k = 1: sensitivity 2 w.p. Hypergeom(B, n + 1, 1)(1)
            b, n = self._sizes()
            return PoissonSubsampled(Gaussian(sigma, 2.0), b / (n + 1))
        if self.kind == "without_replacement":
            return SampledWithoutReplacement(Gaussian(sigma), self.sampling_rate)
        if self.kind == "with_replacement":
            return SampledWithReplacement(Gaussian(sigma), *self._sizes())
        t = cast(int, self.steps_per_epoch)
        if self.kind == "random_allocation":
            return RandomAllocation(Gaussian(sigma), t, selected=self.selected)
        if self.kind == "shuffle":
            return Shuffled(Gaussian(sigma), t, neighboring=relation)
        return _scheme("TruncatedPoisson")(Gaussian(sigma), self.sampling_rate,
                                           cast(int, self.max_batch_size),
                                           cast(int, self.dataset_size))

    def sensitivity_distribution(self, group_size: int) -> tuple[np.ndarray, np.ndarray]:
        """Sensitivities and probabilities of the mixture of Gaussians dominating one round
        for groups of up to ``group_size`` examples (add/remove adjacency only).

        Poisson (Ganesh 2024, Thm 3.1): sensitivity ``j`` w.p. ``Binomial(k, q)(j)``.
        Fixed batch (Ganesh 2024, Thm 3.3): sensitivity ``2 j`` w.p.
        ``Hypergeom(B, n + k, k)(j) = C(k, j) C(n, B - j) / C(n + k, B)``, ``j = 0..k``.
        Components whose probability is exactly zero in floating point are left out.
        """
        k = v.count("group_size", group_size, minimum=1)
        if self.kind not in ("poisson", "fixed_batch"):
            raise ValueError(f"sampling must be poisson or fixed_batch for group privacy (the "
                             f"samplings Ganesh 2024 analyses), got {self.kind!r}")
        if self.kind == "fixed_batch" and k > self._sizes()[0]:
            raise ValueError(f"group_size must be in [1, batch_size={self.batch_size}] for "
                             f"fixed-batch sampling, got {group_size!r}")
        from scipy.stats import binom, hypergeom  # lazy: scipy.stats is slow to import

        j = np.arange(k + 1)
        if self.kind == "poisson":
            p = binom.pmf(j, k, self.sampling_rate)
            c = j.astype(float)
        else:
            # scipy's hypergeom(M, n, N): M population, n marked, N draws
            b, n = self._sizes()
            p = hypergeom.pmf(j, n + k, k, b)
            c = 2.0 * j
        keep = p > 0
        return c[keep], p[keep]

    def group_mechanism(self, group_size: int, noise_multiplier: float) -> MixtureOfGaussians:
        """The scalar mixture of Gaussians dominating one round for groups of up to
        ``group_size`` examples (Ganesh 2024, Thm 3.1 / Thm 3.3, Def. 2.8)."""
        sigma = v.positive("noise_multiplier", noise_multiplier)
        c, p = self.sensitivity_distribution(group_size)
        return MixtureOfGaussians(c, p, sigma)

    def describe(self, noise_multiplier: float) -> dict:
        """A plain description of the pair of one round (of one epoch for the epoch
        samplings): ``details["mechanism"]``."""
        sigma = float(noise_multiplier)
        if self.kind == "poisson":
            return {"kind": "poisson_subsampled_gaussian", "q": self.sampling_rate,
                    "sigma": sigma, "sensitivity": 1.0}
        if self.kind == "fixed_batch":
            b, n = self._sizes()
            return {"kind": "mixture_of_gaussians", "standard_deviation": sigma,
                    "sensitivities": [0.0, 2.0], "probabilities": [1 - b / (n + 1), b / (n + 1)],
                    "batch_size": b, "dataset_size": n}
        if self.kind == "without_replacement":
            return {"kind": "sampled_without_replacement_gaussian", "q": self.sampling_rate,
                    "sigma": sigma, "relation": "substitute"}
        if self.kind == "with_replacement":
            return {"kind": "sampled_with_replacement_gaussian", "sigma": sigma,
                    "batch_size": self.batch_size, "dataset_size": self.dataset_size,
                    "relation": "substitute"}
        if self.kind == "truncated_poisson":
            return {"kind": "truncated_poisson_gaussian", "q": self.sampling_rate,
                    "sigma": sigma, "max_batch_size": self.max_batch_size,
                    "dataset_size": self.dataset_size}
        out = {"kind": ("random_allocation_gaussian" if self.kind == "random_allocation"
                        else "shuffled_gaussian"), "sigma": sigma,
               "steps_per_epoch": self.steps_per_epoch, "per": "epoch"}
        return {**out, "selected": self.selected} if self.kind == "random_allocation" else out


def _pair_given(sampling_rate, batch_size, dataset_size) -> None:
    """The sizes come as a pair; a rate excludes them (truncated_poisson's dataset_size
    aside, checked by the caller)."""
    if sampling_rate is not None and batch_size is not None:
        raise ValueError("sampling_rate: give either sampling_rate or batch_size and "
                         "dataset_size, not both")
    if (batch_size is None) != (dataset_size is None):
        missing, given = (("dataset_size", "batch_size") if dataset_size is None
                          else ("batch_size", "dataset_size"))
        raise ValueError(f"{missing} is needed with {given}")


def _sizes_checked(batch_size, dataset_size) -> tuple[int, int]:
    b = v.count("batch_size", batch_size, minimum=1)
    n = v.count("dataset_size", dataset_size, minimum=1)
    if n < b:
        raise ValueError(f"dataset_size must be >= batch_size ({b}), got {dataset_size!r}")
    return b, n


def _refuse_extras(s: str, **extras) -> None:
    """A parameter of another sampling given is an error naming it."""
    owner = {"steps_per_epoch": "random_allocation or shuffle",
             "selected": "random_allocation", "max_batch_size": "truncated_poisson"}
    for name, value in extras.items():
        if value is not None:
            raise ValueError(f"{name} applies only to sampling={owner[name]}, not to "
                             f"sampling={s!r}")


def _epoch_sampling(s: str, *, sampling_rate, batch_size, dataset_size, steps_per_epoch,
                    selected) -> Sampling:
    """random_allocation / shuffle: ``steps_per_epoch``, or the sizes it is derived from."""
    if sampling_rate is not None:
        raise ValueError(f"sampling_rate does not apply to sampling={s!r} (one epoch of "
                         "rounds): give steps_per_epoch, or batch_size and dataset_size")
    if s == "shuffle":
        _refuse_extras(s, selected=selected)
    k = 1 if selected is None else v.count("selected", selected, minimum=1)
    if steps_per_epoch is not None:
        if batch_size is not None:
            raise ValueError("steps_per_epoch: give either steps_per_epoch or batch_size and "
                             "dataset_size, not both")
        t = v.count("steps_per_epoch", steps_per_epoch, minimum=1)
    elif batch_size is None:
        raise ValueError(f"steps_per_epoch is required for sampling={s!r} (an integer >= 1), "
                         "or batch_size and dataset_size")
    else:
        b, n = _sizes_checked(batch_size, dataset_size)
        if (n * k) % b and s == "shuffle":
            raise ValueError(
                f"dataset_size {n} is not a multiple of batch_size {b}: an epoch would end "
                f"with a partial batch of {n % b}, which the shuffling analysis does not "
                f"cover; drop it (drop_last) and pass dataset_size={n // b * b}, or "
                "give steps_per_epoch")
        if (n * k) % b:
            raise ValueError(
                f"dataset_size {n} * selected {k} is not a multiple of batch_size {b}: "
                "steps_per_epoch = dataset_size * selected / batch_size must be a whole "
                f"number; give steps_per_epoch (e.g. {max(1, round(n * k / b))})")
        t = n * k // b
    if k > t:
        raise ValueError(f"selected must be in [1, steps_per_epoch={t}], got {selected!r}")
    return Sampling(s, k / t, batch_size, dataset_size, steps_per_epoch=t, selected=k)


def _truncated_sampling(*, sampling_rate, batch_size, dataset_size, max_batch_size
                        ) -> Sampling:
    """truncated_poisson: a rate (or the expected batch over the dataset size), the dataset
    size and the largest batch kept."""
    if dataset_size is None:
        raise ValueError("dataset_size is required for sampling='truncated_poisson' (the "
                         "number of examples, >= 1)")
    if max_batch_size is None:
        raise ValueError("max_batch_size is required for sampling='truncated_poisson' (an "
                         "integer in [1, dataset_size])")
    if sampling_rate is not None:
        n = v.count("dataset_size", dataset_size, minimum=1)
        q = v.probability_open_closed("sampling_rate", sampling_rate)
        b = None
    elif batch_size is None:
        raise ValueError("sampling_rate is required for sampling='truncated_poisson', in "
                         "(0, 1] (or give batch_size, the expected batch)")
    else:
        b, n = _sizes_checked(batch_size, dataset_size)
        q = b / n
    m = v.count("max_batch_size", max_batch_size, minimum=1)
    if m > n:
        raise ValueError(f"max_batch_size must be in [1, dataset_size={n}], got "
                         f"{max_batch_size!r}")
    return Sampling("truncated_poisson", q, b, n, max_batch_size=m)


def make_sampling(*, sampling: str = "poisson", sampling_rate: float | None = None,
                  batch_size: int | None = None, dataset_size: int | None = None,
                  steps_per_epoch: int | None = None, selected: int | None = None,
                  max_batch_size: int | None = None) -> Sampling:
    """Validate how batches are drawn: ``sampling_rate`` or ``batch_size`` + ``dataset_size``
    (never both; fixed_batch and with_replacement need the sizes); ``steps_per_epoch`` (or
    the sizes) and ``selected`` for the epoch samplings; ``sampling_rate`` (or the sizes),
    ``dataset_size`` and ``max_batch_size`` for truncated_poisson. Errors name the
    parameter."""
    s = _sampling_name(sampling)
    if s == "truncated_poisson":
        _refuse_extras(s, steps_per_epoch=steps_per_epoch, selected=selected)
        _pair_given(sampling_rate, batch_size,
                    dataset_size if batch_size is not None else None)
        return _truncated_sampling(sampling_rate=sampling_rate, batch_size=batch_size,
                                   dataset_size=dataset_size, max_batch_size=max_batch_size)
    _refuse_extras(s, max_batch_size=max_batch_size)
    _pair_given(sampling_rate, batch_size, dataset_size)
    if s in EPOCH_SAMPLINGS:
        return _epoch_sampling(s, sampling_rate=sampling_rate, batch_size=batch_size,
                               dataset_size=dataset_size, steps_per_epoch=steps_per_epoch,
                               selected=selected)
    _refuse_extras(s, steps_per_epoch=steps_per_epoch, selected=selected)
    if sampling_rate is not None:
        if s in _SIZED:
            raise ValueError(f"sampling_rate does not apply to sampling={s!r}: give "
                             "batch_size and dataset_size")
        q = v.probability_open_closed("sampling_rate", sampling_rate)
        return Sampling(s, q, None, None)
    if batch_size is None:
        if s in _SIZED:
            raise ValueError(f"batch_size and dataset_size are required for sampling={s!r} "
                             "(batch_size >= 1, dataset_size >= batch_size)")
        raise ValueError(f"sampling_rate is required for sampling={s!r}, in (0, 1] (or give "
                         "batch_size and dataset_size)")
    b, n = _sizes_checked(batch_size, dataset_size)
    return Sampling(s, b / n, b, n)


#: a ratio epochs / rate above an integer by less than this (relative) is that integer: the
#: binary representation of a rate such as 0.3 or 1/30, not a round
RATIO_RTOL = 1e-12


def steps_of_epochs(epochs: float, sampling: Sampling) -> int:
    """Rounds of ``epochs`` epochs: ``ceil(epochs * dataset_size / batch_size)`` with the
    sizes, else ``ceil(epochs / sampling_rate)``, the ratio computed exactly (rationals) and
    rounded up, so no round is left uncounted. With a rate, a ratio above an integer by less
    than :data:`RATIO_RTOL` relative counts as that integer: ``0.3`` and ``1/30`` are stored
    just below their values, and ``3 / 0.3`` is 10 rounds, not 11. For the epoch samplings,
    ``ceil(epochs)`` whole epochs of ``steps_per_epoch`` rounds (a partial epoch's rounds are
    a prefix of a whole one's: a post-processing of it)."""
    e = v.positive("epochs", epochs)
    if sampling.per_epoch:
        return math.ceil(e) * sampling.rounds_per_mechanism
    if sampling.batch_size is not None:
        b, n = sampling._sizes()
        return math.ceil(Fraction(e) * n / b)
    exact = Fraction(e) / Fraction(sampling.sampling_rate)
    below = math.floor(exact)
    return below if exact - below <= RATIO_RTOL * exact else below + 1


@dataclass(frozen=True)
class DPSGDSetting:
    """One validated DP-SGD setting (built by :func:`dpsgd_setting`): how batches are drawn,
    the noise multiplier, and the number of rounds (``epochs`` as given, or None)."""

    sampling: Sampling
    noise_multiplier: float
    steps: int
    epochs: float | None = None

    def mechanism(self, neighboring: str | None = None) -> Mechanism:
        """The mechanism of one round, or of one epoch for the epoch samplings (see
        :class:`Sampling`; ``neighboring``: one of the sampling's relations, default its
        own); :attr:`count` of them make the setting."""
        return self.sampling.mechanism(self.noise_multiplier, neighboring)

    @property
    def count(self) -> int:
        """How many times :meth:`mechanism` is composed: ``steps``, or the number of epochs
        (``steps / steps_per_epoch``, a whole number) for the epoch samplings."""
        return self.steps // self.sampling.rounds_per_mechanism

    def with_count(self, count: int) -> DPSGDSetting:
        """The same setting with ``count`` compositions of :meth:`mechanism` (rounds, or
        whole epochs for the epoch samplings)."""
        n = v.count("steps", count, minimum=0)
        return replace(self, steps=n * self.sampling.rounds_per_mechanism, epochs=None)

    def group_mechanism(self, group_size: int) -> Mechanism:
        """The mechanism of one round for groups of up to ``group_size`` examples: for k = 1
        :meth:`mechanism` (the two-component mixture as a Poisson-subsampled Gaussian, so
        that k = 1 reproduces the example-level result exactly), else the mixture of
        Gaussians of :meth:`Sampling.group_mechanism`."""
        k = v.count("group_size", group_size, minimum=1)
        if k == 1:
            self.sampling.sensitivity_distribution(1)  # the sampling must allow groups
            return self.mechanism()
        return self.sampling.group_mechanism(k, self.noise_multiplier)

    def with_noise(self, noise_multiplier: float) -> DPSGDSetting:
        """The same setting with another noise multiplier (a calibration's trial value)."""
        return replace(self, noise_multiplier=v.positive("noise_multiplier", noise_multiplier))

    def with_steps(self, steps: int) -> DPSGDSetting:
        """The same setting with another number of rounds (a multiple of ``steps_per_epoch``
        for the epoch samplings)."""
        return replace(self, steps=_whole_epochs(v.count("steps", steps, minimum=0),
                                                 self.sampling), epochs=None)

    def with_rate(self, sampling_rate: float) -> DPSGDSetting:
        """The same setting with another sampling rate (rate-based samplings only)."""
        if (self.sampling.kind in _SIZED or self.sampling.per_epoch
                or self.sampling.batch_size is not None):
            raise ValueError(f"sampling_rate does not apply to this setting (sampling="
                             f"{self.sampling.kind!r} with batch_size and dataset_size)")
        q = v.probability_open_closed("sampling_rate", sampling_rate)
        return replace(self, sampling=replace(self.sampling, sampling_rate=q))

    def describe(self) -> dict:
        """The pair of one round (or epoch) and the number of rounds (and of epochs, for the
        epoch samplings), as plain data."""
        out = {**self.sampling.describe(self.noise_multiplier), "steps": self.steps}
        return {**out, "epochs": self.count} if self.sampling.per_epoch else out


def _whole_epochs(steps: int, sampling: Sampling) -> int:
    """``steps`` checked to be whole epochs of an epoch sampling (any count otherwise)."""
    t = sampling.rounds_per_mechanism
    if steps % t:
        raise ValueError(f"steps {steps} is not a multiple of steps_per_epoch {t} for "
                         f"sampling={sampling.kind!r} (one mechanism per epoch): give "
                         f"steps={steps // t * t} or {(steps // t + 1) * t}, or epochs (a "
                         "partial last epoch is counted whole)")
    return steps


def dpsgd_setting(*, noise_multiplier: float, steps: int | None = None,
                  epochs: float | None = None, sampling_rate: float | None = None,
                  batch_size: int | None = None, dataset_size: int | None = None,
                  sampling: str = "poisson", steps_per_epoch: int | None = None,
                  selected: int | None = None, max_batch_size: int | None = None
                  ) -> DPSGDSetting:
    """Validate one DP-SGD setting; every error names the public parameter.

    Parameters
    ----------
    noise_multiplier : sigma > 0, noise standard deviation in units of the clip norm.
    steps, epochs : the number of rounds (an integer >= 0; for random_allocation and
        shuffle a multiple of ``steps_per_epoch``), or epochs (> 0; see
        :func:`steps_of_epochs`); exactly one.
    sampling_rate : the rate in (0, 1] (poisson, without_replacement, truncated_poisson); or
    batch_size, dataset_size : B >= 1 and n >= B (fixed_batch and with_replacement need
        them; truncated_poisson needs ``dataset_size``, with ``batch_size`` the expected
        batch).
    sampling : one of :data:`SAMPLINGS`.
    steps_per_epoch : the rounds of one epoch (random_allocation, shuffle), >= 1; or derived
        from ``batch_size`` and ``dataset_size`` (module docstring).
    selected : random_allocation: the rounds of an epoch each example takes part in, in
        ``[1, steps_per_epoch]`` (default 1).
    max_batch_size : truncated_poisson: the largest batch kept, in ``[1, dataset_size]``.

    Examples
    --------
    >>> dpsgd_setting(noise_multiplier=1.0, epochs=2, batch_size=256, dataset_size=60000).steps
    469
    >>> dpsgd_setting(noise_multiplier=1.0, epochs=3, sampling="shuffle", batch_size=100,
    ...               dataset_size=60000).count
    3
    """
    samp = make_sampling(sampling=sampling, sampling_rate=sampling_rate,
                         batch_size=batch_size, dataset_size=dataset_size,
                         steps_per_epoch=steps_per_epoch, selected=selected,
                         max_batch_size=max_batch_size)
    sigma = v.positive("noise_multiplier", noise_multiplier)
    if steps is not None and epochs is not None:
        raise ValueError("steps: give either steps or epochs, not both")
    if steps is None and epochs is None:
        raise ValueError("steps is required (an integer >= 0), or epochs (a number > 0)")
    if steps is not None:
        return DPSGDSetting(samp, sigma, _whole_epochs(v.count("steps", steps, minimum=0),
                                                       samp))
    e = cast(float, epochs)  # not None: checked above
    return DPSGDSetting(samp, sigma, steps_of_epochs(e, samp), float(e))
