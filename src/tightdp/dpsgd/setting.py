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
    SampledWithoutReplacement,
    SampledWithReplacement,
)

__all__ = ["SAMPLINGS", "Sampling", "DPSGDSetting", "make_sampling", "dpsgd_setting",
           "steps_of_epochs", "RATIO_RTOL"]

#: the samplings a setting accepts (the command spells them with dashes)
SAMPLINGS = ("poisson", "fixed_batch", "without_replacement", "with_replacement")
#: the samplings whose batch is fixed by its size (no free rate)
_SIZED = ("fixed_batch", "with_replacement")


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
    analysis uses the sizes).
    """

    kind: str
    sampling_rate: float
    batch_size: int | None
    dataset_size: int | None

    @property
    def adjacency(self) -> str:
        """``"add_remove"`` (poisson, fixed_batch) or ``"substitute"``."""
        return "add_remove" if self.kind in ("poisson", "fixed_batch") else "substitute"

    @property
    def neighboring(self) -> str:
        """The neighbouring relation the rounds are accounted under, as an accountant's
        ``neighboring``: ``"add_or_remove_one"`` (poisson, fixed_batch) or ``"replace_one"``
        (without_replacement, with_replacement)."""
        return "add_or_remove_one" if self.adjacency == "add_remove" else "replace_one"

    @property
    def relations(self) -> tuple[str, ...]:
        """The relations the rounds can be accounted under, :attr:`neighboring` first:
        Poisson sampling also under ``"replace_one"`` (the antipodal pair of
        :class:`~tightdp.PoissonSubsampled`), every other sampling under its own only."""
        if self.kind == "poisson":
            return ("add_or_remove_one", "replace_one")
        return (self.neighboring,)

    def _sizes(self) -> tuple[int, int]:
        """``(batch_size, dataset_size)`` of a sampling given by its sizes (both set then)."""
        return cast(int, self.batch_size), cast(int, self.dataset_size)

    def mechanism(self, noise_multiplier: float) -> Mechanism:
        """The mechanism of one round with noise multiplier ``noise_multiplier`` (see the
        module docstring for each sampling and its reference)."""
        sigma = v.positive("noise_multiplier", noise_multiplier)
        if self.kind == "poisson":
            return PoissonSubsampled(Gaussian(sigma), self.sampling_rate)
        if self.kind == "fixed_batch":
            # Ganesh 2024, Thm 3.3, k = 1: sensitivity 2 w.p. Hypergeom(B, n + 1, 1)(1)
            b, n = self._sizes()
            return PoissonSubsampled(Gaussian(sigma, 2.0), b / (n + 1))
        if self.kind == "without_replacement":
            return SampledWithoutReplacement(Gaussian(sigma), self.sampling_rate)
        return SampledWithReplacement(Gaussian(sigma), *self._sizes())

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
            raise ValueError(f"sampling must be poisson or fixed_batch for group privacy, got "
                             f"{self.kind!r}")
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
        """A plain description of the one-round pair (``details["mechanism"]``)."""
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
        return {"kind": "sampled_with_replacement_gaussian", "sigma": sigma,
                "batch_size": self.batch_size, "dataset_size": self.dataset_size,
                "relation": "substitute"}


def make_sampling(*, sampling: str = "poisson", sampling_rate: float | None = None,
                  batch_size: int | None = None, dataset_size: int | None = None) -> Sampling:
    """Validate how batches are drawn: ``sampling_rate`` or ``batch_size`` + ``dataset_size``
    (never both; fixed_batch and with_replacement need the sizes). Errors name the parameter."""
    s = _sampling_name(sampling)
    if sampling_rate is not None and (batch_size is not None or dataset_size is not None):
        raise ValueError("sampling_rate: give either sampling_rate or batch_size and "
                         "dataset_size, not both")
    if (batch_size is None) != (dataset_size is None):
        missing, given = (("dataset_size", "batch_size") if dataset_size is None
                          else ("batch_size", "dataset_size"))
        raise ValueError(f"{missing} is needed with {given}")
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
    b = v.count("batch_size", batch_size, minimum=1)
    n = v.count("dataset_size", dataset_size, minimum=1)
    if n < b:
        raise ValueError(f"dataset_size must be >= batch_size ({b}), got {dataset_size!r}")
    return Sampling(s, b / n, b, n)


#: a ratio epochs / rate above an integer by less than this (relative) is that integer: the
#: binary representation of a rate such as 0.3 or 1/30, not a round
RATIO_RTOL = 1e-12


def steps_of_epochs(epochs: float, sampling: Sampling) -> int:
    """Rounds of ``epochs`` epochs: ``ceil(epochs * dataset_size / batch_size)`` with the
    sizes, else ``ceil(epochs / sampling_rate)``, the ratio computed exactly (rationals) and
    rounded up, so no round is left uncounted. With a rate, a ratio above an integer by less
    than :data:`RATIO_RTOL` relative counts as that integer: ``0.3`` and ``1/30`` are stored
    just below their values, and ``3 / 0.3`` is 10 rounds, not 11."""
    e = v.positive("epochs", epochs)
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

    def mechanism(self) -> Mechanism:
        """The mechanism of one round (add/remove or substitute: see :class:`Sampling`)."""
        return self.sampling.mechanism(self.noise_multiplier)

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
        """The same setting with another number of rounds."""
        return replace(self, steps=v.count("steps", steps, minimum=0), epochs=None)

    def with_rate(self, sampling_rate: float) -> DPSGDSetting:
        """The same setting with another sampling rate (rate-based samplings only)."""
        if self.sampling.kind in _SIZED or self.sampling.batch_size is not None:
            raise ValueError(f"sampling_rate does not apply to this setting (sampling="
                             f"{self.sampling.kind!r} with batch_size and dataset_size)")
        q = v.probability_open_closed("sampling_rate", sampling_rate)
        return replace(self, sampling=replace(self.sampling, sampling_rate=q))

    def describe(self) -> dict:
        """The one-round pair and the number of rounds, as plain data."""
        return {**self.sampling.describe(self.noise_multiplier), "steps": self.steps}


def dpsgd_setting(*, noise_multiplier: float, steps: int | None = None,
                  epochs: float | None = None, sampling_rate: float | None = None,
                  batch_size: int | None = None, dataset_size: int | None = None,
                  sampling: str = "poisson") -> DPSGDSetting:
    """Validate one DP-SGD setting; every error names the public parameter.

    Parameters
    ----------
    noise_multiplier : sigma > 0, noise standard deviation in units of the clip norm.
    steps, epochs : the number of rounds (an integer >= 0), or epochs (> 0; see
        :func:`steps_of_epochs`); exactly one.
    sampling_rate : the rate in (0, 1] (poisson, without_replacement); or
    batch_size, dataset_size : B >= 1 and n >= B (every sampling; fixed_batch and
        with_replacement need them).
    sampling : one of :data:`SAMPLINGS`.

    Examples
    --------
    >>> dpsgd_setting(noise_multiplier=1.0, epochs=2, batch_size=256, dataset_size=60000).steps
    469
    """
    samp = make_sampling(sampling=sampling, sampling_rate=sampling_rate,
                         batch_size=batch_size, dataset_size=dataset_size)
    sigma = v.positive("noise_multiplier", noise_multiplier)
    if steps is not None and epochs is not None:
        raise ValueError("steps: give either steps or epochs, not both")
    if steps is None and epochs is None:
        raise ValueError("steps is required (an integer >= 0), or epochs (a number > 0)")
    if steps is not None:
        return DPSGDSetting(samp, sigma, v.count("steps", steps, minimum=0))
    e = cast(float, epochs)  # not None: checked above
    return DPSGDSetting(samp, sigma, steps_of_epochs(e, samp), float(e))
