"""The mechanism interface: a dominating pair per direction of the neighbouring relation."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from ..losses import PrivacyLoss
from ..losses.discrete import DiscreteLoss

__all__ = ["Bracket", "Mechanism", "location_loss_scale", "tv_lipschitz"]


def location_loss_scale(kernel: str, distance: float, scale: float) -> float:
    """The size of the privacy loss of a location pair ``K(x - distance)`` against ``K(x)``
    (noise of standard deviation, or Laplace scale, ``scale``), from the parameters alone:
    for the Gaussian kernel, with ``r = distance / scale``, the loss is ``N(r^2/2, r^2)``
    under P (Balle & Wang 2018), so ``r^2/2 + r`` (mean plus one standard deviation); for the
    Laplace kernel the loss is bounded by ``r`` (Dwork & Roth 2014, Thm. 3.6). A mixture of
    such pairs (subsampling) has no larger loss values where its mass is. Python floats: the
    value overflows to ``inf`` (no exception, no warning) when the noise vanishes."""
    r = distance / scale
    return r * r / 2.0 + r if kernel == "gaussian" else r


def tv_lipschitz(eta_p: float, eta_q: float, epsilon):
    """The slack per application (``Bracket.lower_slack``) of a pair within total variation
    ``eta_p`` (under P) and ``eta_q`` (under Q) of the pair it stands for: the hockey-stick
    divergence ``sup_A P(A) - e^eps Q(A)`` is 1-Lipschitz in P's and ``e^eps``-Lipschitz in
    Q's total variation, also inside a product (``TV(P x R, P' x R) = TV(P, P')``); the
    larger over the two directions (P and Q swap roles)."""
    with np.errstate(over="ignore"):
        g = np.exp(np.asarray(epsilon, dtype=float))
    return np.maximum(eta_p + g * eta_q, eta_q + g * eta_p)


class Bracket(NamedTuple):
    """A mechanism known by two pairs rather than one (:meth:`Mechanism.bracket`).

    ``upper``: a mechanism whose pairs dominate every neighbouring pair of the real one (its
    curve is above: answers from it are upper bounds). ``lower``: a mechanism whose pairs
    are dominated by a neighbouring pair of the real one -- the real mechanism run on one
    pair of neighbouring datasets, or a post-processing of it -- so that its curve is below
    and stays below under composition (Blackwell's theorem: a post-processing of every
    composition). Both are ordinary mechanisms (exact, valid pairs of probability
    distributions), so every accountant answers them. ``gap``: why the two differ by more
    than the discretization -- "" when they converge to one curve as ``rtol`` shrinks, else
    a sentence stating what is known (results carry it as their note). ``upper_count``: the
    number of applications of ``upper`` that dominate one of the real mechanism (a bound by
    composition, e.g. random allocation of ``k`` of ``t`` steps by ``k`` of one of
    ``t // k``).

    ``lower_slack``: None when ``lower`` is exactly dominated; else a function of epsilon
    (a number or an array) bounding how much one application of ``lower``'s computed pair
    may raise delta(epsilon) of any composition above what a dominated pair gives (a
    numerically computed post-processing; e.g. :func:`tv_lipschitz` of total-variation
    bounds), called after ``lower``'s losses are built; the answers subtract it times the
    count (:mod:`tightdp.accountants.bracketed`).
    ``upper_slack``: the same for ``upper`` (per application of ``upper``) and a dominating
    pair; the answers add it.
    ``upper_fallback``: None, or a mechanism whose pairs also dominate one application of
    the real mechanism (a coarser bound known in closed form, e.g. no amplification), with
    no slack; the answers' upper bound is the smaller of the two sides' certified upper
    bounds (each an upper bound: so is their minimum), the fallback's where the computed
    side's slack leaves it no finite bound.
    """

    upper: Mechanism
    lower: Mechanism
    gap: str = ""
    upper_count: int = 1
    lower_slack: Callable | None = None
    upper_slack: Callable | None = None
    upper_fallback: Mechanism | None = None


class Mechanism:
    """A randomized algorithm described by its worst-case (dominating) pair of distributions.

    Subclasses implement :meth:`_build_losses`, returning the PLRV of the *remove* pair
    and of the *add* pair. Under add/remove adjacency they differ in general; under the
    replace-one relation (and for symmetric mechanisms) both are the same object. Accountants
    compose every remove pair together and every add pair together and report the maximum:
    a direction is never dropped.

    ``relations`` names the neighbouring relations (:data:`tightdp._validate.RELATIONS`)
    under which the pair dominates every pair of neighbouring datasets; an accountant holds
    one relation and refuses a mechanism not defined under it. A subclass states its own
    (the default is add/remove only).
    """

    relations: tuple[str, ...] = ("add_or_remove_one",)

    def _build_losses(self) -> tuple[PrivacyLoss, PrivacyLoss]:
        raise NotImplementedError

    def under(self, relation: str) -> Mechanism:
        """The mechanism whose pair is the one of this algorithm under ``relation`` (a name of
        :data:`tightdp._validate.RELATIONS`): ``self`` for a mechanism with one pair for all
        its relations. A mechanism whose dominating pair depends on the relation (Poisson
        sampling: add/remove against replace-one) returns its form for ``relation``, or
        ``self`` when it has none (the accountant then refuses it by :attr:`relations`).
        Accountants compose ``mechanism.under(their relation)``."""
        return self

    def bracket(self, rtol: float) -> Bracket | None:
        """None for a mechanism whose pair is exact: dominating every neighbouring pair and
        attained by one (every mechanism with a closed-form pair). A mechanism whose tight
        pair is not known (or only through a computation with a resolution of its own)
        returns a :class:`Bracket`: the accountants then answer the upper bound from
        ``upper`` and the lower bound from ``lower`` (:mod:`tightdp.accountants.bracketed`),
        and ``privacy_losses()`` is ``upper``'s. ``rtol``: the relative width the answer is
        asked to (a construction with a resolution of its own resolves that finely)."""
        return None

    @functools.cached_property
    def _losses(self) -> tuple[PrivacyLoss, PrivacyLoss]:
        """The pair built once per mechanism (a cached property writes the instance's own
        dictionary, so it also works on frozen dataclasses)."""
        return self._build_losses()

    def privacy_losses(self) -> tuple[PrivacyLoss, PrivacyLoss]:
        """(remove, add) privacy losses; the same object twice when symmetric."""
        return self._losses

    def __getstate__(self) -> dict:
        """Pickle/deepcopy state without the cached losses (rebuilt on first use)."""
        state = self.__dict__.copy()
        state.pop("_losses", None)
        return state

    @property
    def loss_scale(self) -> float:
        """The size of the privacy loss of one application (a magnitude, not a bound), from
        the parameters where they say it (``location_family``: :func:`location_loss_scale`),
        else the largest finite end of the losses' supports (0 for an unbounded loss with no
        such description). The accountants compare it with the range of floating point
        before any loss is built (:mod:`tightdp.accountants.limits`)."""
        fam = getattr(self, "location_family", None)
        if fam is not None:
            return location_loss_scale(*fam())
        ends = [abs(e) for loss in self.privacy_losses() for e in loss.support
                if math.isfinite(e)]
        return max(ends, default=0.0)

    @property
    def symmetric(self) -> bool:
        rem, add = self.privacy_losses()
        return rem is add

    def delta(self, eps) -> np.ndarray:
        """delta(eps) of a single application: the max over both directions."""
        rem, add = self.privacy_losses()
        d = rem.delta(eps)
        return d if rem is add else np.maximum(d, add.delta(eps))

    def single_delta_lower(self, eps) -> np.ndarray | None:
        """A certified lower bound on delta(eps) of ONE application of this pair (the larger
        over both directions), for a pair with finitely many atoms (:class:`DiscreteLoss`:
        its exact hockey-stick sum less its rounding, :meth:`DiscreteLoss.delta_lower`);
        None for other pairs. The answers of a composition whose lower side is one
        application of a dominated pair take it (:mod:`tightdp.accountants.bracketed`)."""
        rem, add = self.privacy_losses()
        if not (isinstance(rem, DiscreteLoss) and isinstance(add, DiscreteLoss)):
            return None
        d = rem.delta_lower(eps)
        return d if rem is add else np.maximum(d, add.delta_lower(eps))

    def _key(self) -> tuple:
        """Hashable identity of the mechanism's parameters (used for caching)."""
        return (type(self).__name__, tuple(sorted(
            (k, v if not isinstance(v, np.ndarray) else tuple(v.tolist()))
            for k, v in self.__dict__.items() if not k.startswith("_")
            and not isinstance(v, Mechanism | PrivacyLoss))),
            tuple(v._key() for v in self.__dict__.values() if isinstance(v, Mechanism)))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Mechanism) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items()
                           if not k.startswith("_"))
        return f"{type(self).__name__}({params})"

    #: the names of the fields :meth:`to_dict` writes (a class with a state-file form
    #: states its own and is registered in :mod:`tightdp.mechanisms.fields`)
    FIELDS: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        """The fields of the mechanism's state-file form (``{name: JSON value}``)."""
        raise ValueError(f"{type(self).__name__} has no state-file form (no to_dict)")

    @classmethod
    def from_dict(cls, params: dict, path: str) -> Mechanism:
        """The mechanism of the fields written by :meth:`to_dict`, each checked; a
        ValueError names the field as ``path.name`` with the accepted range."""
        raise ValueError(f"{path}: {cls.__name__} has no state-file form (no from_dict)")

    def scaled(self, factor: float) -> Mechanism | None:
        """The mechanism with every noise scale multiplied by ``factor``, or None when it has
        no noise scale to multiply (a subclass with one says so)."""
        return None
