"""Subsampled mechanisms: Poisson subsampling, sampling without and with replacement."""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np

from .. import _validate as v
from .._numerics import newton_polish, table_start
from ..losses import LocationMixtureLoss
from .base import Mechanism, location_loss_scale
from .basic import Gaussian, Laplace
from .fields import base_field, choice, mechanism_to_dict

__all__ = ["PoissonSubsampled", "SampledWithoutReplacement", "SampledWithReplacement"]

#: the pairs of the sampling schemes without and with replacement
_PAIRS = ("worst_case", "koskela2020")


def _family(base: Mechanism, who: str) -> tuple[str, float, float]:
    fam = getattr(base, "location_family", None)
    if fam is None:
        raise ValueError(f"{who} supports Gaussian and Laplace base mechanisms, got {base!r}")
    return fam()


def _swor_inverse(q: float, c: float, s: float):
    """Closed-form inverse of the loss of sampling without replacement (substitute), Koskela
    et al. (2020), Sec. 6.2, written for sensitivity ``c`` and noise ``s`` and in log space:
    with ``u = e^{c x / s^2}`` and ``kappa = q e^{-c^2/(2 s^2)}`` the equation ``L(x) = y`` is
    ``kappa u^2 + (1-q)(1-e^y) u - kappa e^y = 0``, whose positive root is taken in the form
    without cancellation for each sign of ``y``. Returns None when ``kappa`` underflows."""
    log_kappa = math.log(q) - c * c / (2.0 * s * s)
    if log_kappa < -600.0:
        return None
    kappa = math.exp(log_kappa)
    log_2k = math.log(2.0) + log_kappa
    k = s * s / c

    def inverse(y):
        y = np.asarray(y, dtype=float)
        ay = np.abs(y)
        a = (1.0 - q) * -np.expm1(-ay)
        with np.errstate(under="ignore"):
            root = np.hypot(a, 2.0 * kappa * np.exp(-ay / 2.0))
        # log u for |y|; the loss is odd in x, so y < 0 mirrors y > 0
        log_u = ay + np.log(a + root) - log_2k
        return k * np.sign(y) * log_u

    return inverse


def _symmetric_mixture_inverse(ells: np.ndarray, log_w: np.ndarray, c: float, s: float):
    """Inverse of ``L(x) = log sum_l w_l N(x; l c, s^2) - log sum_l w_l N(x; -l c, s^2)``
    (sampling with replacement, Koskela et al. 2020, Sec. 6.3: the positive root of a
    polynomial of order 2m in ``u = e^{c x / s^2}``).

    In ``t = c x / s^2`` the loss is ``LSE(g + l t) - LSE(g - l t)`` with
    ``g_l = log w_l - l^2 c^2 / (2 s^2)``: odd, increasing, with derivative
    ``E+[l] + E-[l]``. Each root is bracketed from a table of the loss (``L(0) = 0`` and the
    bound ``t <= (y + LSE(g) - g_j) / j``), started by interpolation in the table, and
    polished by Newton's method safeguarded by bisection inside the bracket.
    """
    ells = np.asarray(ells, dtype=float)
    g = np.asarray(log_w, dtype=float) - ells * ells * c * c / (2.0 * s * s)
    pos = ells > 0
    lse_g = float(np.logaddexp.reduce(g))
    k = s * s / c

    def loss_and_slope(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        out_l = np.empty_like(t)
        out_d = np.empty_like(t)
        step = max(1, 4_000_000 // max(ells.size, 1))
        for i in range(0, t.size, step):
            tt = t[i:i + step, None]
            vals = []
            for sign in (1.0, -1.0):
                e = g + sign * ells * tt
                m = e.max(axis=1, keepdims=True)
                w = np.exp(e - m)
                tot = w.sum(axis=1)
                vals.append((m[:, 0] + np.log(tot), (w @ ells) / tot))
            out_l[i:i + step] = vals[0][0] - vals[1][0]
            out_d[i:i + step] = vals[0][1] + vals[1][1]
        return out_l, out_d

    def inverse(y):
        y = np.asarray(y, dtype=float)
        shape = y.shape
        ay = np.abs(y).ravel()
        t = np.zeros_like(ay)
        act = ay > 0
        if not act.any() or not pos.any():
            return t.reshape(shape)
        ymax = float(ay.max())
        t_max = float(np.min((ymax + lse_g - g[pos]) / ells[pos]))
        # table of the loss on [0, t_max]: fine near 0 (geometric) and uniform further out
        tab_t = np.unique(np.concatenate([[0.0], np.geomspace(t_max * 1e-9, t_max, 4000),
                                          np.linspace(0.0, t_max, 4000)]))
        tab_l, _ = loss_and_slope(tab_t)
        tab_l = np.maximum.accumulate(tab_l)
        ya = ay[act]
        lo, hi, x = table_start(tab_t, tab_l, ya)
        t[act] = newton_polish(lambda tt, _idx: loss_and_slope(tt), ya, lo, hi, x, iters=100)
        return (k * np.sign(y).ravel() * t).reshape(shape)

    return inverse


def _log_em1_plus(y, q: float) -> np.ndarray:
    """``log(e^y - 1 + q)`` without overflow: ``y + log1p(-(1 - q) e^-y)`` for ``y > 1``
    (``expm1`` overflows above ~709, which made the inverse of the subsampled Gaussian loss
    infinite and lost the mass of every bin above it), ``log(expm1(y) + q)`` below."""
    y = np.asarray(y, dtype=float)
    if y.ndim == 0:
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            big = y + np.log1p(-(1.0 - q) * np.exp(-np.maximum(y, 1.0)))
            small = np.log(np.maximum(np.expm1(np.minimum(y, 1.0)) + q, 1e-300))
        return np.where(y > 1.0, big, small)
    # each point's one branch (the same values); q a number or one per point
    qs = np.broadcast_to(np.asarray(q, dtype=float), y.shape)
    out = np.empty(y.shape)
    up = y > 1.0
    lo = ~up
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        out[up] = y[up] + np.log1p(-(1.0 - qs[up]) * np.exp(-np.maximum(y[up], 1.0)))
        out[lo] = np.log(np.maximum(np.expm1(np.minimum(y[lo], 1.0)) + qs[lo], 1e-300))
    return out


class _PoissonGaussianInverse:
    """The inverse of the Poisson-subsampled Gaussian's loss in closed form (a module-level
    callable rather than a closure, so that losses pickle): the remove pair solves
    ``L(x) = log(1-q + q exp((2cx - c^2)/(2s^2))) = y``, the reflected add pair
    ``L(x) = -log(1-q + q exp((-2cx - c^2)/(2s^2))) = y`` (Koskela et al. 2020, Sec. 6.1)."""

    def __init__(self, q: float, c: float, s: float, add: bool):
        self.q, self.c, self.add = q, c, add
        self.lq = math.log(q)
        self.k = s * s / c

    def __call__(self, y):
        return self._at(y, self.k, self.q, self.lq, self.c)

    def _at(self, y, k, q, lq, c):
        if self.add:
            return -k * (_log_em1_plus(-np.asarray(y, dtype=float), q) - lq) - c / 2
        return k * (_log_em1_plus(y, q) - lq) + c / 2

    def many(self, inverses: list, y: np.ndarray, owner: np.ndarray) -> np.ndarray | None:
        """Each of ``inverses`` (of this class and direction) at the points ``y`` whose
        index in ``inverses`` is ``owner``: the same operations on the same floats as each
        one's call (:func:`tightdp.losses.families.log_cdfs_many`); None if they are not all
        of this class and direction."""
        if any(type(i) is not type(self) or i.add != self.add for i in inverses):
            return None
        k, q, lq, c = (np.array([getattr(i, f) for i in inverses])[owner]
                       for f in ("k", "q", "lq", "c"))
        return self._at(y, k, q, lq, c)


class PoissonSubsampled(Mechanism):
    """``base`` run on a Poisson sample (each record kept independently w.p. ``q``).

    Under add/remove adjacency (and replace-special: the record replaced by one contributing
    nothing gives the same two pairs): remove direction ``P = (1-q) B(0) + q B(c)`` against
    ``Q = B(0)``; add direction the reverse pair, ``P = B(0)`` against
    ``Q = (1-q) B(0) + q B(c)`` (Koskela et al. 2020, Sec. 6.1; Zhu, Dong, Wang 2022 for why
    both directions are needed). The loss of the remove pair is
    ``log(1 - q + q e^{(2 c x - c^2)/(2 s^2)})`` with the closed-form inverse of Koskela et
    al. (2020), Sec. 6.1, for the Gaussian base.

    Under replace-one (``neighboring="replace_one"``, Gaussian base only): the pair
    ``P = (1-q) N(0, s^2) + q N(c, s^2)`` against ``Q = (1-q) N(0, s^2) + q N(-c, s^2)``.
    It is the mechanism on a pair of datasets (the record's contribution ``+c`` replaced by
    ``-c``, the others contributing 0), so it is attained; that it dominates the pair of
    every two records of norm at most ``c`` (with any common contribution of the others,
    removed by joint convexity of the hockey-stick divergence) is the Poisson / substitution
    case of Schuchardt, Stoian, Wollschläger, Günnemann (2024), "Unified mechanism-specific
    amplification by subsampling and group privacy amplification" (NeurIPS 2024), the pair
    ``dp_accounting`` uses for ``REPLACE_ONE``. It is symmetric (``x -> -x`` swaps P and Q),
    so one loss serves both directions. The loss is non-decreasing: with
    ``u = e^{c x / s^2}`` and ``kappa = q e^{-c^2/(2 s^2)}`` it is
    ``log((1-q) + kappa u) - log((1-q) + kappa / u)``, both terms increasing in ``u``; its
    inverse is the closed form of Koskela et al. (2020), Sec. 6.2 (the same pair).

    Build it as ``PoissonSubsampled(base, q)``: an accountant takes it in the form of its
    own relation (:meth:`under`); the state-file form holds ``base`` and ``q`` only (the
    relation is the accountant's). Under replace-one there is no Rényi-DP or GDP formula
    here (refused); a Laplace base is not defined under replace-one.
    """

    def __init__(self, base: Mechanism, q: float, *, neighboring: str = "add_or_remove_one"):
        self.q = v.probability_open_closed("q", q)
        self.base = base
        kern = _family(base, "PoissonSubsampled")[0]
        rel = v.neighboring("neighboring", neighboring)
        if rel == "replace_one" and kern != "gaussian":
            raise ValueError(f"neighboring: PoissonSubsampled is defined under replace_one for "
                             f"a Gaussian base only, got {base!r}")
        self.neighboring = "replace_one" if rel == "replace_one" else "add_or_remove_one"

    @property
    def relations(self) -> tuple[str, ...]:  # type: ignore[override]
        """``("replace_one",)`` for the replace-one form, else add/remove and
        replace-special (the same pairs)."""
        if self.neighboring == "replace_one":
            return ("replace_one",)
        return ("add_or_remove_one", "replace_special")

    def under(self, relation: str) -> PoissonSubsampled:
        """The form of this sampling under ``relation``: the replace-one pair for
        ``"replace_one"`` (Gaussian base), the add/remove pairs for the other relations;
        ``self`` when it is that form already or has none (a Laplace base under
        replace-one, which the accountant then refuses)."""
        want = "replace_one" if relation == "replace_one" else "add_or_remove_one"
        if want == self.neighboring or (want == "replace_one" and _family(
                self.base, "PoissonSubsampled")[0] != "gaussian"):
            return self
        return PoissonSubsampled(self.base, self.q, neighboring=want)

    def __repr__(self) -> str:
        """One line; the relation named only for the replace-one form."""
        rel = "" if self.neighboring == "add_or_remove_one" else ", neighboring='replace_one'"
        return f"PoissonSubsampled(q={self.q!r}, base={self.base!r}{rel})"

    @property
    def loss_scale(self) -> float:
        """That of the base pair (:func:`location_loss_scale`): with probability ``q`` the
        loss is the base mechanism's (at distance ``2c`` under replace-one)."""
        kern, c, s = _family(self.base, "PoissonSubsampled")
        return location_loss_scale(kern, 2.0 * c if self.neighboring == "replace_one" else c,
                                   s)

    def _build_losses(self):
        kern, c, s = _family(self.base, "PoissonSubsampled")
        q = self.q
        if self.neighboring == "replace_one":
            if q == 1.0:   # N(c) against N(-c): the Gaussian at distance 2c
                return Gaussian(s, 2.0 * c).privacy_losses()
            loss = LocationMixtureLoss(kern, [0.0, c], [1 - q, q], [0.0, -c], [1 - q, q], s,
                                       inverse=_swor_inverse(q, c, s))
            return loss, loss
        if q == 1.0:
            return self.base.privacy_losses()
        rem_inv = add_inv = None
        if kern == "gaussian":
            rem_inv = _PoissonGaussianInverse(q, c, s, add=False)
            add_inv = _PoissonGaussianInverse(q, c, s, add=True)

        remove = LocationMixtureLoss(kern, [0.0, c], [1 - q, q], [0.0], [1.0], s,
                                     inverse=rem_inv)
        add = LocationMixtureLoss(kern, [0.0], [1.0], [0.0, -c], [1 - q, q], s, inverse=add_inv)
        return remove, add

    def _no_formula(self, what: str) -> None:
        if self.neighboring == "replace_one":
            raise ValueError(f"no {what} formula for PoissonSubsampled under "
                             "neighboring='replace_one' (the bounds known are for add/remove): "
                             "use the pld or prv accountant")

    def rdp(self, orders) -> np.ndarray:
        """Rényi DP at ``orders`` (> 1), valid for both directions: Gaussian base only
        (Mironov, Talwar, Zhang 2019); see
        :func:`tightdp.curves.rdp.poisson_subsampled_gaussian_rdp`."""
        from ..curves.rdp import poisson_subsampled_gaussian_rdp
        self._no_formula("Rényi-DP")
        if self.q == 1.0:
            return cast(Any, self.base).rdp(orders)
        kern, c, s = _family(self.base, "PoissonSubsampled")
        if kern != "gaussian":
            raise ValueError(f"no Rényi-DP formula for a Poisson-subsampled {kern} mechanism")
        return poisson_subsampled_gaussian_rdp(orders, self.q, c / s)

    def gdp(self) -> tuple[float, bool]:
        """``(mu, exact)`` per step. For ``q < 1`` the central-limit approximation of Bu, Dong,
        Long, Su (2020), *Deep learning with Gaussian DP* (from Dong, Roth, Su 2022, Sec. 5):
        T steps are approximately ``q sqrt(T (e^{mu^2} - 1))``-GDP. NOT a bound: ``exact`` is
        False. Gaussian base only; add/remove only."""
        self._no_formula("GDP")
        if self.q == 1.0:
            return cast(Any, self.base).gdp()
        kern, c, s = _family(self.base, "PoissonSubsampled")
        if kern != "gaussian":
            raise ValueError(f"no GDP formula for a Poisson-subsampled {kern} mechanism")
        if c / s > math.sqrt(700.0):  # e^(mu^2) overflows (and ``**`` would raise)
            raise ValueError(f"noise_multiplier: the CLT approximation of Bu et al. needs "
                             f"e^(1/sigma^2) finite, sigma={s / c:g} is too small for it")
        return self.q * math.sqrt(math.expm1((c / s) ** 2)), False


    FIELDS = ("base", "q")

    def to_dict(self) -> dict:
        """The fields of a state file (:mod:`tightdp.mechanisms.fields`)."""
        return {"base": mechanism_to_dict(self.base), "q": float(self.q)}

    @classmethod
    def from_dict(cls, params: dict, path: str) -> PoissonSubsampled:
        """The mechanism of the fields of :meth:`to_dict`, each checked (an error names
        the field as ``path.name``)."""
        base = base_field(params, path, ("Gaussian", "Laplace"), "PoissonSubsampled")
        return cls(base, v.probability_open_closed(f"{path}.q", params["q"]))

    def scaled(self, factor: float) -> PoissonSubsampled:
        """The mechanism with the base's noise scale multiplied by ``factor`` (a base
        without one kept)."""
        base = self.base.scaled(factor)
        return PoissonSubsampled(self.base if base is None else base, self.q,
                                 neighboring=self.neighboring)


class SampledWithoutReplacement(Mechanism):
    """``base`` run on a batch drawn without replacement (``q = batch / dataset size``), under
    the replace-one relation (one record replaced by another).

    ``pair="worst_case"`` (the default) is the dominating pair over *all* datasets:
    ``P = (1-q) B(0) + q B(2c)`` against ``Q = B(0)``, and the reverse order. It is attained
    when every other record contributes what the replacement contributes (say ``-c``) and the
    replaced record ``+c``: the neighbour's sum never changes, the original's moves by ``2c``
    when the record is drawn (Lebeda, Regehr, Kamath, Steinke 2024, "Avoiding pitfalls for
    privacy accounting of subsampled mechanisms under composition"; Zhu, Dong, Wang 2022).

    ``pair="koskela2020"`` is the pair of Koskela et al. (2020), Sec. 6.2,
    ``P = (1-q) B(0) + q B(c)`` against ``Q = (1-q) B(0) + q B(-c)``, which coincides with
    Poisson subsampling under substitution (their remark). It assumes the other records
    contribute nothing; for DP-SGD with arbitrary clipped gradients it can under-report, so
    use it only to reproduce that paper.

    Defined under replace-one only.
    """

    relations = ("replace_one",)

    def __init__(self, base: Mechanism, q: float, pair: str = "worst_case"):
        self.q = v.probability_open_closed("q", q)
        self.base = base
        if pair not in ("worst_case", "koskela2020"):
            raise ValueError(f"pair must be 'worst_case' or 'koskela2020', got {pair!r}")
        self.pair = pair
        _family(base, "SampledWithoutReplacement")

    @property
    def loss_scale(self) -> float:
        """That of the base pair at twice the sensitivity (the worst-case pair; the
        koskela2020 pair's loss is no larger)."""
        kern, c, s = _family(self.base, "SampledWithoutReplacement")
        return location_loss_scale(kern, 2.0 * c, s)

    def _build_losses(self):
        kern, c, s = _family(self.base, "SampledWithoutReplacement")
        q = self.q
        if self.pair == "worst_case":
            fam = Gaussian(s, 2 * c) if kern == "gaussian" else Laplace(s, 2 * c)
            return PoissonSubsampled(fam, q).privacy_losses()
        inv = _swor_inverse(q, c, s) if kern == "gaussian" else None
        loss = LocationMixtureLoss(kern, [0.0, c], [1 - q, q], [0.0, -c], [1 - q, q], s,
                                   inverse=inv)
        return loss, loss

    def rdp(self, orders) -> np.ndarray:
        """Rényi DP at ``orders`` (> 1): Wang, Balle, Kasiviswanathan (2019), Thm. 9, with the
        base pair ``(B(c), B(-c))`` (distance ``2c``), and for the Gaussian also the
        Poisson-subsampled bound with shift ``2c``; see
        :func:`tightdp.curves.rdp.sampled_without_replacement_gaussian_rdp` and
        :func:`tightdp.curves.rdp.sampled_without_replacement_rdp`."""
        from ..curves.rdp import (
            laplace_rdp,
            sampled_without_replacement_gaussian_rdp,
            sampled_without_replacement_rdp,
        )
        kern, c, s = _family(self.base, "SampledWithoutReplacement")
        if kern == "gaussian":
            return sampled_without_replacement_gaussian_rdp(orders, self.q, c / s)
        r = 2 * c / s
        return sampled_without_replacement_rdp(orders, self.q, lambda a: laplace_rdp(a, r), r)


    FIELDS = ("base", "q", "pair")

    def to_dict(self) -> dict:
        """The fields of a state file (:mod:`tightdp.mechanisms.fields`)."""
        return {"base": mechanism_to_dict(self.base), "q": float(self.q), "pair": self.pair}

    @classmethod
    def from_dict(cls, params: dict, path: str) -> SampledWithoutReplacement:
        """The mechanism of the fields of :meth:`to_dict`, each checked (an error names
        the field as ``path.name``)."""
        base = base_field(params, path, ("Gaussian", "Laplace"), "SampledWithoutReplacement")
        return cls(base, v.probability_open_closed(f"{path}.q", params["q"]),
                   choice(params["pair"], f"{path}.pair", _PAIRS))

    def scaled(self, factor: float) -> SampledWithoutReplacement:
        """The mechanism with the base's noise scale multiplied by ``factor`` (a base
        without one kept)."""
        base = self.base.scaled(factor)
        return SampledWithoutReplacement(self.base if base is None else base, self.q, self.pair)


class SampledWithReplacement(Mechanism):
    """Gaussian mechanism on a batch of ``batch_size`` records drawn with replacement from
    ``dataset_size`` records, under the replace-one relation; the differing record appears
    ``l ~ Binomial(batch_size, 1/dataset_size)`` times.

    ``pair="worst_case"`` (default): the dominating pair over all datasets,
    ``P = sum_l b_l N(2 l c, s^2)`` against ``Q = N(0, s^2)`` and the reverse order (the other
    records contributing what the replacement does; Lebeda et al. 2024 for the argument). It is
    a mixture of Gaussians (Ganesh, Def. 2.8) and is accounted as one.

    ``pair="koskela2020"``: Koskela et al. (2020), Sec. 6.3, ``P = sum_l b_l N(l c, s^2)``
    against ``Q = sum_l b_l N(-l c, s^2)``, which assumes the other records contribute nothing
    (use it to reproduce that paper). Binomial weights below 1e-300 are dropped there and their
    mass given to the outputs that reveal the dataset (loss +inf), which keeps it dominating.

    Defined under replace-one only.
    """

    relations = ("replace_one",)

    def __init__(self, base: Gaussian, batch_size: int, dataset_size: int,
                 pair: str = "worst_case"):
        if not isinstance(base, Gaussian):
            raise ValueError(f"SampledWithReplacement supports a Gaussian base, got {base!r}")
        self.base = base
        self.batch_size = v.count("batch_size", batch_size, minimum=1)
        self.dataset_size = v.count("dataset_size", dataset_size, minimum=1)
        if self.batch_size > self.dataset_size:
            raise ValueError(f"batch_size must be <= dataset_size ({self.dataset_size}), got "
                             f"{batch_size!r}")
        if pair not in ("worst_case", "koskela2020"):
            raise ValueError(f"pair must be 'worst_case' or 'koskela2020', got {pair!r}")
        self.pair = pair

    @property
    def loss_scale(self) -> float:
        """That of the farthest component, sensitivity ``2 c batch_size`` (every draw the
        differing record)."""
        _, c, s = self.base.location_family()
        return location_loss_scale("gaussian", 2.0 * c * self.batch_size, s)

    def _build_losses(self):
        _, c, s = self.base.location_family()
        m, n = self.batch_size, self.dataset_size
        ls = np.arange(m + 1)
        from scipy.stats import binom  # lazy: scipy.stats is slow to import

        w = binom.pmf(ls, m, 1.0 / n)
        if self.pair == "worst_case":
            from .mixture import MixtureOfGaussians

            pos = w > 0  # terms that underflow are below 1e-308 each
            return MixtureOfGaussians(2 * c * ls[pos], w[pos] / w[pos].sum(),
                                      s).privacy_losses()
        keep = w >= 1e-300
        dropped = float(max(0.0, 1.0 - w[keep].sum())) if not keep.all() else 0.0
        locs = ls[keep] * c
        inv = _symmetric_mixture_inverse(ls[keep], np.log(w[keep]), c, s)
        loss = LocationMixtureLoss("gaussian", locs, w[keep], -locs, w[keep], s,
                                   inverse=inv, inf_mass=dropped)
        return loss, loss

    FIELDS = ("base", "batch_size", "dataset_size", "pair")

    def to_dict(self) -> dict:
        """The fields of a state file (:mod:`tightdp.mechanisms.fields`)."""
        return {"base": mechanism_to_dict(self.base), "batch_size": int(self.batch_size),
                "dataset_size": int(self.dataset_size), "pair": self.pair}

    @classmethod
    def from_dict(cls, params: dict, path: str) -> SampledWithReplacement:
        """The mechanism of the fields of :meth:`to_dict`, each checked (an error names
        the field as ``path.name``)."""
        base = base_field(params, path, ("Gaussian",), "SampledWithReplacement")
        b = v.count(f"{path}.batch_size", params["batch_size"], minimum=1)
        n = v.count(f"{path}.dataset_size", params["dataset_size"], minimum=1)
        if b > n:
            raise ValueError(f"{path}.batch_size must be <= dataset_size ({n}), got {b}")
        return cls(cast(Gaussian, base), b, n, choice(params["pair"], f"{path}.pair", _PAIRS))

    def scaled(self, factor: float) -> SampledWithReplacement:
        """The mechanism with the base's noise scale multiplied by ``factor`` (a base
        without one kept)."""
        base = self.base.scaled(factor)
        return SampledWithReplacement(self.base if base is None else base, self.batch_size,
                                      self.dataset_size, self.pair)
