"""tightdp as jax-privacy's DP accountant: ``dp_accountant_config=TightdpAccountantConfig()``.

jax-privacy (2.x) builds the accountant of every analysis from a ``DpAccountantConfig``
(``jax_privacy.accounting.DpsgdTrainingAccountant(dp_accountant_config=...)``, the
user-level and single-release accountants, and through them ``calibrate_noise_multiplier``,
``calibrate_num_updates`` and ``calibrate_batch_size``): its ``create_accountant()`` returns a
``dp_accounting.PrivacyAccountant``, to which jax-privacy composes ``DpEvent`` trees (Poisson
sampled Gaussians, fixed batches as Poisson sampling at doubled sensitivity, noise schedules as
runs of events, mixtures of Gaussians for user-level DP) and asks ``get_epsilon(delta)``.

:class:`TightdpAccountantConfig` returns a :class:`TightdpPLDAccountant`: the
:class:`~tightdp.integrations.dp_accounting.TightdpAccountant` of the certified PLD
accountant, so every epsilon jax-privacy reports is tightdp's certified upper bound (the
connect-the-dots dominating pair of Doroshenko et al. 2022 composed by FFT, truncation
accounted for). Nothing else in the user's code changes.

The config is a subclass of jax-privacy's ``PldAccountantConfig``, and the accountant one of
dp_accounting's ``PLDAccountant``, because both are PLD accountants: jax-privacy's
user-level analysis (Chua et al. 2024, arXiv:2401.10294) checks for them by ``isinstance``, as
the analysis composes ``MixtureOfGaussiansDpEvent``, which only a PLD accountant takes. Every
method of the dp_accounting interface (``compose``, ``supports``, ``get_epsilon``,
``get_delta``) is tightdp's (``TightdpAccountant`` comes first in the method resolution
order); the inherited ``value_discretization_interval`` is not used (tightdp chooses its grid
to reach ``rtol``). Truncated batches (``TruncatedSubsampledGaussianDpEvent``) are
:class:`tightdp.TruncatedPoisson`; an event tightdp cannot certify is refused with a one-line
``ValueError`` naming it, never accounted approximately.
"""

from __future__ import annotations

import dataclasses

try:
    from dp_accounting import NeighboringRelation as _Relation
    from dp_accounting.pld import PLDAccountant as _DpaPLDAccountant
    from jax_privacy.accounting import PldAccountantConfig
except ImportError as err:  # pragma: no cover - exercised only without the extra
    raise ImportError("tightdp.integrations.jax_privacy needs jax-privacy: "
                      "pip install -e \".[jax]\"") from err

from .. import _validate as v
from .._defaults import DEFAULT_RTOL
from ..budget import Budget
from .dp_accounting import TightdpAccountant

__all__ = ["TightdpAccountantConfig", "TightdpPLDAccountant"]


class TightdpPLDAccountant(TightdpAccountant, _DpaPLDAccountant):
    """:class:`~tightdp.integrations.dp_accounting.TightdpAccountant` with the certified PLD
    accountant, also a dp_accounting ``PLDAccountant`` by type (see the module docstring):
    ``get_epsilon`` is tightdp's certified upper bound.

    Parameters
    ----------
    neighboring_relation : ``dp_accounting.NeighboringRelation``; jax-privacy uses
        ``ADD_OR_REMOVE_ONE``.
    rtol : relative width of the certified bracket (default :data:`tightdp.DEFAULT_RTOL`).
    max_memory, max_seconds : the budget of one query (see :mod:`tightdp.budget`).
    """

    def __init__(self, neighboring_relation=_Relation.ADD_OR_REMOVE_ONE, *,
                 rtol: float = DEFAULT_RTOL, max_memory=None, max_seconds=None) -> None:
        TightdpAccountant.__init__(self, neighboring_relation, accountant="pld", rtol=rtol,
                                   max_memory=max_memory, max_seconds=max_seconds)


@dataclasses.dataclass(kw_only=True, slots=True)
class TightdpAccountantConfig(PldAccountantConfig):
    """jax-privacy's accountant configuration for tightdp's certified PLD accountant.

    Parameters
    ----------
    rtol : relative width of the certified bracket on epsilon (default
        :data:`tightdp.DEFAULT_RTOL`).
    max_memory, max_seconds : the budget of one epsilon query (bytes or a string such as
        ``"2GB"``, seconds; default 2 GB and 60 s, :mod:`tightdp.budget`).

    Examples
    --------
    >>> from jax_privacy.accounting import DpParams, DpsgdTrainingAccountant
    >>> acc = DpsgdTrainingAccountant(dp_accountant_config=TightdpAccountantConfig())
    >>> p = DpParams(noise_multipliers=1.0, num_samples=60_000, batch_size=600, delta=1e-5)
    >>> round(acc.compute_epsilon(10_000, p), 2)
    6.19
    """

    rtol: float = DEFAULT_RTOL
    max_memory: int | float | str | None = None
    max_seconds: float | None = None

    def __post_init__(self) -> None:
        self.rtol = v.positive("rtol", self.rtol)
        Budget.make(self.max_memory, self.max_seconds)  # checked now, not at the first query

    def create_accountant(self) -> TightdpPLDAccountant:
        """A new :class:`TightdpPLDAccountant` (an empty composition)."""
        return TightdpPLDAccountant(rtol=self.rtol, max_memory=self.max_memory,
                                    max_seconds=self.max_seconds)
