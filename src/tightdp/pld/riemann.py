"""The ``riemann`` discretizer of the Fourier accountant (Koskela, Jälkö, Honkela 2020).

Koskela et al. (2020), Sec. 5.2 and Alg. 1, divide ``[-L, L]`` into ``n`` equidistant points
``x_i = -L + i dx``, ``dx = 2L/n``, and sample the density ``omega`` of the privacy loss
distribution (Def. 4) there: ``omega_i = omega(x_i)``. The composition then works with the
vector ``omega * dx``, i.e. with the Riemann-sum weights of the density. This module returns
exactly these weights as a :class:`~tightdp.pld.grid.DiscretePLD` with step ``d = dx``.

For even ``n`` the paper's grid coincides with the engine's grid (anchored at 0, values
``j * d``): ``x_i = (i - n/2) d``, so the returned PLD has ``offset = -n/2``.

The result is an *approximation* of the loss law, neither dominating nor dominated: sampled
densities do not sum to one, and the mass outside ``[-L, L)`` is dropped (the truncation of
Sec. 5.1). What was dropped is recorded in ``meta`` so that the accountant can report it.

Two ways to obtain the weights:

``"density"``
    ``dx * omega(x_i)`` with ``omega(s) = f_X(L^{-1}(s)) dL^{-1}(s)/ds`` (Koskela et al. 2020,
    Def. 4). Available where the loss has a density: :class:`GaussianLoss` and
    :class:`LocationMixtureLoss` with the Gaussian kernel (all subsampled Gaussian
    mechanisms of their Sec. 6). This is Algorithm 1 as published and reproduces Tables 1-2.
``"mass"``
    the P-mass of the bin ``(x_i - dx/2, x_i + dx/2]`` (the midpoint rule integrated exactly;
    same ``O(dx^2)`` per-bin error for smooth densities). Works for every
    :class:`~tightdp.losses.PrivacyLoss`, including losses with atoms (Laplace,
    randomized response), which Koskela et al. (Sec. 9) leave to future work.
"""

from __future__ import annotations

import math
from typing import cast

import numpy as np

from .. import _validate as v
from .._numerics import newton_polish, table_start, walk_out
from ..losses import GaussianLoss, LocationMixtureLoss, PrivacyLoss
from .grid import DiscretePLD

__all__ = ["RIEMANN_METHODS", "riemann", "loss_density", "has_density"]

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
#: the weights :func:`riemann` can give (its ``method``)
RIEMANN_METHODS = ("auto", "density", "mass", "published")


def has_density(loss: PrivacyLoss) -> bool:
    """True when :func:`loss_density` can evaluate the PLD density of ``loss``."""
    if isinstance(loss, GaussianLoss):
        return loss.mu > 0
    return isinstance(loss, LocationMixtureLoss) and loss.kernel.name == "gaussian"


def loss_density(loss: PrivacyLoss, y: np.ndarray) -> np.ndarray:
    """Density ``omega(y)`` of the P-law of the privacy loss (Koskela et al. 2020, Def. 4).

    ``omega(y) = f_X(x*(y)) / L'(x*(y))`` where ``x*`` is the inverse of the loss function and
    ``f_X`` the density of P. For the Gaussian mechanism it is the ``N(mu^2/2, mu^2)``
    density (Sec. 6.1 with q = 1). Zero outside the open support of the loss.

    Raises
    ------
    ValueError
        if the loss has no density of this form (see :func:`has_density`).
    """
    y = np.asarray(y, dtype=float)
    if isinstance(loss, GaussianLoss) and loss.mu > 0:
        mu = loss.mu
        z = (y - mu * mu / 2) / mu
        return np.exp(-0.5 * z * z - _LOG_SQRT_2PI) / mu
    if not has_density(loss):
        raise ValueError(f"loss must be a GaussianLoss or a Gaussian LocationMixtureLoss to "
                         f"have a density; got {type(loss).__name__} (use method='mass')")
    loss = cast(LocationMixtureLoss, loss)  # has_density: a location mixture
    lo, hi = loss.support
    if y.ndim == 1 and y.size > 1 and np.all(y[1:] > y[:-1]):
        # sorted grid: work on the contiguous slice inside the support
        i0, i1 = np.searchsorted(y, lo, side="right"), np.searchsorted(y, hi, side="left")
        out = np.zeros(y.shape)
        if i1 > i0:
            x = _sorted_inverse(loss, y[i0:i1])
            out[i0:i1] = np.where(np.isfinite(x), _mixture_density(loss, x), 0.0)
        return out
    out = np.zeros(y.shape)
    inside = (y > lo) & (y < hi)
    if not inside.any():
        return out
    x = loss.inverse(y[inside])
    out[inside] = np.where(np.isfinite(x), _mixture_density(loss, x), 0.0)
    return out


def _sorted_inverse(loss: LocationMixtureLoss, y: np.ndarray) -> np.ndarray:
    """``x*(y)`` for an increasing array ``y`` inside the support.

    Uses the loss's closed form where it has one; otherwise the loss is tabulated on a fine
    grid of outputs (it is increasing), each root is bracketed in the table, started by
    interpolation and polished by Newton's method safeguarded by the bracket. This replaces
    one independent root search per grid point, which is far slower on 10^6 points.
    """
    if loss.has_closed_inverse:
        return loss.inverse(y)
    s = loss.s
    lo = min(loss.a.min(), loss.b.min()) - 2 * s
    hi = max(loss.a.max(), loss.b.max()) + 2 * s
    _, lo = walk_out(lambda x: not loss.loss(np.asarray([x]))[0] <= y[0], lo, -(hi - lo + s),
                     max_moves=200, on_limit="return", what="the table's left end")
    _, hi = walk_out(lambda x: not loss.loss(np.asarray([x]))[0] >= y[-1], hi, hi - lo + s,
                     max_moves=200, on_limit="return", what="the table's right end")
    tab_x = np.linspace(lo, hi, 20001)
    tab_l = np.maximum.accumulate(loss.loss(tab_x))
    a, b, x = table_start(tab_x, tab_l, y)

    def loss_and_slope(xx: np.ndarray, _idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return loss.loss(xx), loss.slope(xx)

    out = newton_polish(loss_and_slope, y, a, b, x, iters=60, floor=s)
    return out


def _with_fast_inverse(loss: PrivacyLoss) -> PrivacyLoss:
    """The same location-mixture loss, when it has no closed-form inverse, rebuilt with
    :func:`_sorted_inverse` (one tabulation + Newton for all points) as its inverse
    (:meth:`LocationMixtureLoss.with_inverse`), so that its CDFs and bin masses on 10^6
    points are computed in seconds; other losses are returned as they are."""
    if not isinstance(loss, LocationMixtureLoss) or loss.has_closed_inverse:
        return loss

    def inverse(y: np.ndarray) -> np.ndarray:
        y = np.asarray(y, dtype=float).ravel()
        order = np.argsort(y, kind="stable")
        out = np.empty_like(y)
        out[order] = _sorted_inverse(loss, y[order])
        return out

    return loss.with_inverse(inverse)


def _mixture_terms(x: np.ndarray, locs: np.ndarray, lw: np.ndarray, s: float
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``sum_i w_i exp(-(x - a_i)^2 / (2 s^2))`` as ``e^m * tot`` and the posterior mean."""
    if locs.size == 1:
        z = (x - locs[0]) / s
        return lw[0] - 0.5 * z * z, np.ones_like(x), np.full_like(x, locs[0])
    if locs.size == 2:
        # two components: the log-ratio of the two terms is linear in x, one exp per point
        a0, a1 = float(locs[0]), float(locs[1])
        z = (x - a0) / s
        dl = (lw[1] - lw[0]) + (a1 - a0) * (2.0 * x - a0 - a1) / (2.0 * s * s)
        e = np.exp(-np.abs(dl))
        tot = 1.0 + e
        m = lw[0] - 0.5 * z * z + np.maximum(dl, 0.0)
        mean = np.where(dl > 0, a1 + a0 * e, a0 + a1 * e) / tot
        return m, tot, mean
    z = (x[:, None] - locs) / s
    lp = lw - 0.5 * z * z
    m = lp.max(axis=1)
    e = np.exp(lp - m[:, None])
    tot = e.sum(axis=1)
    return m, tot, (e @ locs) / tot


def _mixture_density(loss: LocationMixtureLoss, x: np.ndarray) -> np.ndarray:
    """``f_P(x) / L'(x)`` for a Gaussian location mixture, ``L'(x) = (E_P[a|x] - E_Q[b|x]) / s^2``
    (the derivative of the log-ratio of two mixtures; Koskela et al. 2020, Def. 4)."""
    s = loss.s
    m, tot, mean_p = _mixture_terms(x, loss.a, loss.lpw, s)
    _, _, mean_q = _mixture_terms(x, loss.b, loss.lqw, s)
    slope = (mean_p - mean_q) / (s * s)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        dens = np.exp(m - _LOG_SQRT_2PI - math.log(s)) * tot / slope
    return np.where(slope > 0, dens, 0.0)


def riemann(loss: PrivacyLoss, L: float, n: int, method: str = "auto") -> DiscretePLD:
    """Koskela et al.'s discretization of a privacy loss on ``[-L, L)`` with ``n`` points.

    Parameters
    ----------
    loss : the privacy loss (one direction of a mechanism).
    L : truncation radius, ``L > 0``.
    n : number of grid points, an even integer ``>= 2``; the grid step is ``d = 2L/n``.
    method : ``"density"`` (Alg. 1: ``dx * omega(x_i)``), ``"mass"`` (bin masses of the
        centred bins), ``"auto"`` (density where the loss has one, else masses) or
        ``"published"`` (the density sampled at the float64 points that
        ``numpy.linspace(-L, L - dx, n)`` gives instead of at the exact ``x_i``: how the
        published Tables 1 and 2 of the paper were computed: their last digits are
        the rounding of those points, amplified by the composition; the weights stand at the
        ``x_i`` as always).

    Returns
    -------
    DiscretePLD with ``d = 2L/n``, ``offset = -n/2``, ``n`` weights, the loss's own mass at
    ``+inf``, and ``meta`` holding ``mass_below``/``mass_above`` (P-mass of finite losses
    below ``-L - d/2`` and above ``L - d/2``, dropped by the truncation of Sec. 5.1).
    """
    L = v.positive("L", L)
    if L > 500:
        raise ValueError(f"L must be in (0, 500], got {L!r}")
    n = v.count("n", n, minimum=2)
    if n % 2:
        raise ValueError(f"n must be an even integer >= 2 (Koskela et al.'s half-swap D "
                         f"needs n/2), got {n!r}")
    if method not in RIEMANN_METHODS:
        raise ValueError(f"method must be one of {RIEMANN_METHODS}, got {method!r}")
    if method == "auto":
        method = "density" if has_density(loss) else "mass"
    if method == "published" and not has_density(loss):
        raise ValueError(f"method: 'published' samples a density, which {loss!r} has not; use "
                         "'mass'")
    loss = _with_fast_inverse(loss)
    d = 2.0 * L / n
    half = n // 2
    xs = (np.arange(n) - half) * d  # = -L + i d
    lo_edge, hi_edge = xs[0] - d / 2, xs[-1] + d / 2
    if method == "density":
        probs = loss_density(loss, xs) * d
    elif method == "published":
        probs = loss_density(loss, np.linspace(-L, L - d, n)) * d
    else:
        edges = np.concatenate([xs - d / 2, [hi_edge]])
        probs, _ = loss.bin_masses(edges)
    mass_below = float(loss.p_cdf(np.asarray(lo_edge)))
    mass_above = max(float(loss.p_sf(np.asarray(hi_edge))) - loss.inf_mass, 0.0)
    meta = {"kind": "riemann", "method": method, "L": L, "n": n,
            "mass_below": mass_below, "mass_above": mass_above}
    return DiscretePLD(d, -half, np.asarray(probs, dtype=float), float(loss.inf_mass), meta)
