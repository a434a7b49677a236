"""Truncated Poisson sampling (Poisson sampling, then a batch over a maximum size cut down to a
uniformly random subset of that size), known by a bracket of two pairs, and the public-coin
mixture of mechanisms its upper pair is."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import cast

import numpy as np

from .. import _validate as v
from ..losses import CoinMixtureLoss
from .base import Bracket, Mechanism
from .basic import Gaussian
from .fields import base_field, mechanism_to_dict
from .subsampling import PoissonSubsampled
from .truncated_lower import lower_pair

__all__ = ["TruncatedPoisson", "PublicCoinMixture"]


class PublicCoinMixture(Mechanism):
    """A coin drawn with probabilities ``weights`` (the same on both datasets) and revealed,
    then ``components[k]`` run: its losses are :class:`~tightdp.losses.CoinMixtureLoss` of the
    components' losses, direction by direction (a mixture of dominating pairs dominates the
    mixture of the pairs each dominates). Rényi DP where every component has it:
    ``e^{(a-1) R(a)} = sum_k w_k e^{(a-1) R_k(a)}`` (the coin splits ``E_Q[(p/q)^a]``)."""

    def __init__(self, components: Sequence[Mechanism], weights: Sequence[float]):
        if len(components) != len(weights) or not components:
            raise ValueError("components and weights must be non-empty and of one length")
        self.components = tuple(components)
        self.weights = tuple(float(w) for w in weights)

    @property
    def relations(self) -> tuple[str, ...]:  # type: ignore[override]
        """The relations every component is defined under."""
        return tuple(r for r in self.components[0].relations
                     if all(r in m.relations for m in self.components))

    @property
    def loss_scale(self) -> float:
        """The largest of the components' (the loss is one of theirs)."""
        return max(m.loss_scale for m in self.components)

    def __repr__(self) -> str:
        parts = ", ".join(f"{w:.6g}: {m!r}" for m, w in zip(self.components, self.weights,
                                                             strict=True))
        return f"PublicCoinMixture({parts})"

    def _build_losses(self):
        losses = [m.privacy_losses() for m in self.components]
        rem = CoinMixtureLoss(self.weights, [x[0] for x in losses])
        if all(x[0] is x[1] for x in losses):
            return rem, rem
        return rem, CoinMixtureLoss(self.weights, [x[1] for x in losses])

    def rdp(self, orders) -> np.ndarray:
        """Rényi DP at ``orders`` (> 1) from the components' (see the class)."""
        a = np.asarray(orders, dtype=float)
        terms = []
        for m, w in zip(self.components, self.weights, strict=True):
            fn = getattr(m, "rdp", None)
            if fn is None:
                raise ValueError(f"no Rényi-DP formula for the component {m!r}")
            terms.append(math.log(w) + (a - 1.0) * np.asarray(fn(a), dtype=float))
        return np.logaddexp.reduce(np.stack(terms), axis=0) / (a - 1.0)


def truncation_probabilities(q: float, batch: int, n: int) -> tuple[float, float, float]:
    """``(p_T, q_T, q_eff)`` of truncated Poisson sampling of ``n`` records at rate ``q`` to at
    most ``batch`` (see :class:`TruncatedPoisson`), with ``M ~ Binomial(n - 1, q)`` the number of
    other records drawn: ``p_T = P(M >= batch)``; ``q_T = E[q batch / (M + 1) | M >= batch]
    = (batch / n) P(Binomial(n, q) > batch) / p_T``, the record's probability of being kept
    when the batch may be cut; ``q_eff = q P(M < batch) + (batch / n) P(Binomial(n, q) >
    batch)``, its probability of being kept. The identity ``q C(n-1, m) q^m (1-q)^{n-1-m} /
    (m + 1) = C(n, m+1) q^{m+1} (1-q)^{n-m-1} / n`` gives the closed forms. Where ``q_T``
    cannot be formed (the tails underflow) its bound ``q batch / (batch + 1)`` is used, a
    larger rate, which dominates."""
    from scipy.stats import binom  # lazy: scipy.stats is slow to import

    p_t = float(binom.sf(batch - 1, n - 1, q))
    cut = float(binom.sf(batch, n, q)) * batch / n
    q_eff = q * float(binom.cdf(batch - 1, n - 1, q)) + cut
    if p_t <= 0.0:
        return 0.0, 0.0, q
    q_t = cut / p_t
    if not 0.0 < q_t <= 1.0:
        q_t = q * batch / (batch + 1.0)
    return p_t, q_t, q_eff


class TruncatedPoisson(Mechanism):
    """The Gaussian mechanism ``base`` (sensitivity ``c``, noise ``s``) on a truncated Poisson
    batch: each of the ``dataset_size`` = ``n`` records drawn with probability
    ``sampling_rate`` = ``q``, and a batch of more than ``max_batch_size`` = ``B`` records cut
    to a uniformly random subset of ``B`` (Ganesh 2025, "Tighter privacy analysis for
    truncated Poisson sampling", arXiv 2508.15089; dp_accounting's
    ``TruncatedSubsampledGaussianDpEvent``). ``n`` counts the records of the dataset that holds
    the differing record (the other ``n - 1`` are common to both neighbours).

    Known by a :meth:`bracket` of two pairs, with ``M ~ Binomial(n - 1, q)`` the others drawn
    and ``p_T``, ``q_T``, ``q_eff`` of :func:`truncation_probabilities`:

    * upper: a public coin reveals whether ``M >= B`` (the same law on both datasets). If
      not, no batch holding the record is cut and the pair is the Poisson pair at rate
      ``q`` (the others' batch revealed, removed by joint convexity). If so, a batch drawn
      from ``S`` and the record is, in law, a random ``B - 1`` subset ``R`` of ``S``, one more
      record ``y`` of ``S``, and the record kept in place of ``y`` with probability
      ``q B / (M + 1)``; given ``R`` and ``y`` (revealed), ``M`` has the same law whatever
      they are (every ``B`` records are exchangeable), so the pair is the Poisson pair at rate
      ``q_T = E[q B / (M + 1) | M >= B]`` whose shift is the record's contribution minus
      ``y``'s: norm at most ``2c``. Under add/remove that is the Poisson pair of sensitivity
      ``2c`` at rate ``q_T``; under replace-one (two records against ``y``) the antipodal pair
      of sensitivity ``2c`` (:class:`PoissonSubsampled`), dp_accounting's pair for both. The
      mixture over the coin with weights ``1 - p_T``, ``p_T`` is a
      :class:`PublicCoinMixture`: revealing the coin is a finer output, so it dominates.
      Under add/remove this is below dp_accounting's (which takes the replace-one pair for
      the cut batches, "slightly loose" in its words).
    * lower: the mechanism on the datasets whose ``n - 1`` other records contribute ``-c``
      and the record ``+c`` (under replace-one against ``-c``), its output binned:
      :class:`TruncatedPoissonLowerPair`. Cut batches pile up at ``-c B``, where the record,
      when kept, displaces a record at ``-c``: the sum moves by ``2 c``, as in the upper
      pair's cut component.

    With ``B >= n`` (no batch is ever cut) both are the Poisson pair at ``q``: no bracket.
    Defined under add/remove and replace-one (a "special" record would still fill a place in
    the batch: replace-special is not covered).
    """

    FIELDS = ("base", "sampling_rate", "max_batch_size", "dataset_size")

    def __init__(self, base: Gaussian, sampling_rate: float, max_batch_size: int,
                 dataset_size: int, *, neighboring: str = "add_or_remove_one"):
        if not isinstance(base, Gaussian):
            raise ValueError(f"base: TruncatedPoisson supports a Gaussian base, got {base!r}")
        self.base = base
        self.sampling_rate = v.probability_open_closed("sampling_rate", sampling_rate)
        self.max_batch_size = v.count("max_batch_size", max_batch_size, minimum=1)
        self.dataset_size = v.count("dataset_size", dataset_size, minimum=1)
        rel = v.neighboring("neighboring", neighboring)
        if rel == "replace_special":
            raise ValueError("neighboring: TruncatedPoisson is defined under add_or_remove_one "
                             "or replace_one, got 'replace_special'")
        self.neighboring = rel

    @property
    def relations(self) -> tuple[str, ...]:  # type: ignore[override]
        """The relation of this form (:meth:`under` gives the other)."""
        return (self.neighboring,)

    def under(self, relation: str) -> TruncatedPoisson:
        """The form under ``relation`` (add/remove or replace-one), else ``self`` (refused by
        :attr:`relations`)."""
        if relation == self.neighboring or relation not in ("add_or_remove_one", "replace_one"):
            return self
        return TruncatedPoisson(self.base, self.sampling_rate, self.max_batch_size,
                                self.dataset_size, neighboring=relation)

    def __repr__(self) -> str:
        rel = "" if self.neighboring == "add_or_remove_one" else ", neighboring='replace_one'"
        return (f"TruncatedPoisson(sampling_rate={self.sampling_rate!r}, max_batch_size="
                f"{self.max_batch_size}, dataset_size={self.dataset_size}, base={self.base!r}"
                f"{rel})")

    def _poisson(self, q: float, factor: float = 1.0) -> PoissonSubsampled:
        s, c = self.base.sigma, self.base.sensitivity
        return PoissonSubsampled(Gaussian(s, factor * c), q, neighboring=self.neighboring)

    def lower(self, rtol: float, q_eff: float) -> Mechanism:
        """The dominated mechanism: :func:`~tightdp.mechanisms.truncated_lower.lower_pair`
        (cells resolving a loss step of about ``8 rtol``), or where its grids exceed their
        bounds (a count of tens of thousands of likely values below the maximum batch) the
        Poisson pair at the record's inclusion probability ``q_eff``, the mechanism on the
        datasets whose other records contribute 0."""
        pair = lower_pair(self.base.sigma, self.base.sensitivity, self.sampling_rate,
                          self.max_batch_size, self.dataset_size, v.positive("rtol", rtol),
                          neighboring=self.neighboring)
        return self._poisson(q_eff) if pair is None else pair

    def upper(self) -> Mechanism:
        """The dominating mechanism of the class docstring (the Poisson pair at ``q`` when no
        batch is ever cut)."""
        p_t, q_t, _ = truncation_probabilities(self.sampling_rate, self.max_batch_size,
                                               self.dataset_size)
        if p_t == 0.0:
            return self._poisson(self.sampling_rate)
        return PublicCoinMixture([self._poisson(self.sampling_rate), self._poisson(q_t, 2.0)],
                                 [1.0 - p_t, p_t])

    def bracket(self, rtol: float) -> Bracket | None:
        """The two pairs of the class docstring; None when no batch is ever cut."""
        p_t, _, q_eff = truncation_probabilities(self.sampling_rate, self.max_batch_size,
                                                 self.dataset_size)
        if p_t == 0.0:
            return None
        return Bracket(self.upper(), self.lower(rtol, q_eff),
                       "truncated Poisson: the upper pair reveals whether a batch may be cut, "
                       "the lower one is the mechanism on one pair of datasets")

    def _side(self) -> Mechanism:
        return self.upper()

    @property
    def loss_scale(self) -> float:
        """That of the upper pair (the Poisson pair without truncation)."""
        return self._side().loss_scale

    def _build_losses(self):
        return self._side().privacy_losses()

    def to_dict(self) -> dict:
        """The fields of a state file (:mod:`tightdp.mechanisms.fields`); the relation is the
        accountant's."""
        return {"base": mechanism_to_dict(self.base), "sampling_rate": float(self.sampling_rate),
                "max_batch_size": int(self.max_batch_size),
                "dataset_size": int(self.dataset_size)}

    @classmethod
    def from_dict(cls, params: dict, path: str) -> TruncatedPoisson:
        """The mechanism of the fields of :meth:`to_dict`, each checked (an error names the
        field as ``path.name``)."""
        base = cast(Gaussian, base_field(params, path, ("Gaussian",), "TruncatedPoisson"))
        return cls(base, v.probability_open_closed(f"{path}.sampling_rate",
                                                   params["sampling_rate"]),
                   v.count(f"{path}.max_batch_size", params["max_batch_size"], minimum=1),
                   v.count(f"{path}.dataset_size", params["dataset_size"], minimum=1))

    def scaled(self, factor: float) -> TruncatedPoisson:
        """The mechanism with the base's noise multiplied by ``factor``."""
        return TruncatedPoisson(cast(Gaussian, self.base.scaled(factor)), self.sampling_rate,
                                self.max_batch_size, self.dataset_size,
                                neighboring=self.neighboring)
