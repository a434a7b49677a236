"""Mean-preserving discretization of a privacy loss (Gopi, Lee, Wutschitz 2021, Algorithm 2),
on the engine's grid ``j * h`` anchored at 0, with the data its coupling analysis needs.

What Algorithm 2 does and what we do instead
--------------------------------------------
Algorithm 2 puts the mass of each centred bin on its centre and then shifts the whole
support by one ``mu`` so that the mean of the discretized loss equals the mean of the
truncated loss. Here, to stay on the engine's uniform grid anchored at 0 (so that PLDs of
different mechanisms share one grid and compose without shifts), each bin ``(g_j, g_{j+1}]``
is split between its two end points so that the bin's *conditional mean* is preserved: the
upper point receives ``u_j = E_P[(Y - g_j)/h ; g_j < Y <= g_{j+1}]`` and the lower point the
rest of the bin's P-mass.

Why the coupling analysis (Lemmas 5.2 and 5.3) still holds, with the same constant
    Couple ``Y`` in bin ``j`` with ``Y~ = g_{j+1}`` with probability ``r(Y) = (Y - g_j)/h``
    and ``Y~ = g_j`` otherwise. This reproduces the discretized masses exactly, and given
    ``Y`` the error ``X = Y - Y~`` takes two values ``h`` apart with conditional mean
    ``E[X | Y] = 0``. Hoeffding's lemma applied conditionally on all the ``Y_i`` then gives
    ``P(sum_i X_i >= t) <= exp(-2 t^2 / (k h^2))`` for ``k`` steps: the bound of Lemma 5.3
    (Gopi et al., proof of Lemma 5.3 via Hoeffding), with a range ``h`` per step (the
    paper's centred bins also have range ``h``). Lemma 5.2 then converts it into the
    sandwich of Theorem 5.5, eq. (8).

How ``u_j`` is obtained without a quadrature
    The P- and Q-masses of each bin are exact (``PrivacyLoss.bin_masses``), and
    ``Q_bin = E_P[e^{-Y}; bin]``. On the bin, ``e^{-y}`` lies below its chord by
    ``e^{-g_j} gamma(r)`` with ``gamma(r) = 1 - r (1 - e^{-h}) - e^{-r h}`` in
    ``[0, gamma_max]``, so

        u_j = u_ctd - E_P[gamma(r); bin] / (1 - e^{-h}),
        u_ctd = (P_bin - e^{g_j} Q_bin) / (1 - e^{-h})        (the connect-the-dots split)

    Since ``gamma(r) <= (h^2/2) r (1 - r)`` (their difference is convex and vanishes at
    ``r = 0, 1``) and ``E[r (1 - r); bin] <= u_j - u_j^2 / P_bin`` (Jensen), ``u_j`` lies in
    ``[u_lo, u_ctd]`` where ``u_lo`` solves ``u + c (u - u^2/P_bin) = u_ctd`` with
    ``c = h^2 / (2 (1 - e^{-h}))``: a bracket of relative width about ``h / 8`` for a smooth
    bin, and of width 0 for a bin whose mass sits at one of its ends (atoms on the grid are
    kept exactly). We place ``u_est`` by the same relation with ``E[gamma]`` of a bin of
    uniform density and certify the residual: with the coupling
    scaled bin by bin (``r' = lambda_j r`` or ``1 - lambda_j (1 - r)``) the marginals are
    still exact and ``|E[X | Y]| <= h rho_j`` on bin ``j``, where ``rho_j`` is the largest
    relative mismatch compatible with the bracket. The accountant adds these bounded
    conditional means to the Hoeffding bound through the moment generating function
    ``E[e^{theta X}] <= e^{theta^2 h^2 / 8} sum_j P_j e^{theta h rho_j}``
    (:func:`coupling_log_mgf`).

Truncation (the role of the domain ``L``)
    The loss is clipped to ``[lo, hi]`` (grid points): the P-mass at or below ``lo`` sits on
    ``lo`` and the finite P-mass above ``hi`` on ``hi``. The clipped variable differs from
    ``Y`` only on those tails, whose probabilities are returned in ``meta`` so that the
    accountant can add them to ``delta_error`` (only the upper tail matters for the upper
    bound, only the lower tail for the lower bound).

Mass at +infinity (Gopi et al., Sec. 4)
    ``P(Y = +inf)`` is kept as ``inf_mass``; the coupling is built for the law of ``Y``
    conditioned on being finite, and the engine's composition puts
    ``1 - prod_i (1 - delta_i)^{k_i}`` at +infinity. All masses in ``meta`` are conditional
    on ``Y`` being finite.

Floating point: like the rest of the engine (and Gopi et al., Sec. 6) the analysis is exact
arithmetic on the bin masses; their rounding (about 1e-16 absolute per bin) is not
certified.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy.special import logsumexp

from ..losses import PrivacyLoss
from .grid import DiscretePLD

__all__ = ["mean_preserving", "chunked_bin_masses", "coupling_log_mgf", "gamma_constants"]


def gamma_constants(h: float) -> tuple[float, float]:
    """``(gamma_mean, gamma_max)`` of ``gamma(r) = 1 - r (1 - e^{-h}) - e^{-r h}`` on
    ``[0, 1]``: the gap between ``e^{-y}`` and its chord on a bin of width ``h`` (in units of
    ``e^{-g_j}``), averaged over ``r`` and maximized (at ``r* = log(h / (1 - e^{-h})) / h``).
    """
    a = -math.expm1(-h)  # 1 - e^{-h}
    # mean: 1 - a/2 - a/h; written to avoid cancellation for small h (series below 1e-3)
    if h < 1e-3:
        mean = h * h / 12.0 - h ** 3 / 24.0 + h ** 4 / 80.0
    else:
        mean = 1.0 - a / 2.0 - a / h
    r_star = math.log(h / a) / h
    if h < 1e-3:
        gmax = h * h / 8.0 - h ** 3 / 16.0 + h ** 4 / 48.0
        gmax *= 1.0 + 1e-6  # series truncation slack (relative error below h^2)
    else:
        gmax = 1.0 - r_star * a - math.exp(-r_star * h)
    return max(mean, 0.0), max(gmax, 0.0)


def _split_root(u_ctd: np.ndarray, p: np.ndarray, c: float) -> np.ndarray:
    """Root ``u`` in ``[0, p]`` of ``u + c (u - u^2 / p) = u_ctd`` (increasing in ``u`` for
    ``c < 1``), in the cancellation-free form ``2 u_ctd / (1 + c + sqrt((1+c)^2 - 4 c u_ctd/p))``.
    Atoms at a bin end (``u_ctd`` = 0 or ``p``) give back ``u_ctd`` exactly."""
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(p > 0, u_ctd / p, 0.0)
    disc = np.sqrt(np.maximum((1.0 + c) ** 2 - 4.0 * c * frac, 0.0))
    return np.clip(2.0 * u_ctd / (1.0 + c + disc), 0.0, p)


#: bin masses are computed this many edges at a time when a caller checks its time budget
#: between blocks (the inversion of a wide mixture's loss is the slow part, so the budget is
#: checked within it; docs/pld-constants.md)
CHUNK = 1 << 14


def chunked_bin_masses(loss: PrivacyLoss, g: np.ndarray, check: Callable[[], None] | None
                       ) -> tuple[np.ndarray, np.ndarray]:
    """``loss.bin_masses(g)``, in blocks of :data:`CHUNK` edges with ``check()`` called
    before each (it raises to stop: a time budget), when ``check`` is given. Each bin depends
    on its two edges only, so the blocks (overlapping by one edge) give the same masses."""
    if check is None or g.size <= CHUNK + 1:
        if check is not None:
            check()
        return loss.bin_masses(g)
    pbs, qbs = [], []
    for start in range(0, g.size - 1, CHUNK):
        check()
        pb, qb = loss.bin_masses(g[start:start + CHUNK + 1])
        pbs.append(pb)
        qbs.append(qb)
    return np.concatenate(pbs), np.concatenate(qbs)


def mean_preserving(loss: PrivacyLoss, h: float, lo: float, hi: float, *,
                    check: Callable[[], None] | None = None) -> DiscretePLD:
    """Discretize ``loss`` on the grid ``j * h`` preserving each bin's conditional mean
    (Gopi, Lee, Wutschitz 2021, Algorithm 2, adapted as described in the module docstring).

    Parameters
    ----------
    loss : the privacy loss (P-law of ``Y = log P/Q``; Q-law used for the bin means)
    h : mesh (grid step), > 0
    lo, hi : truncation range; rounded outwards to grid points
    check : called between blocks of the bin masses (:func:`chunked_bin_masses`); raises to
        stop the discretization (a caller's time budget)

    Returns
    -------
    DiscretePLD with ``meta`` holding
        ``tail_below``, ``tail_above``: P(Y <= lo) and P(hi < Y < inf), conditional on finite;
        ``bin_p``, ``bin_rho``: per-bin conditional P-mass and the relative mean mismatch
        bound ``rho_j`` (see :func:`coupling_log_mgf`);
        ``mean_error``: bound on ``|E[Y_clipped] - E[Y~]|`` (conditional on finite).
    """
    if not (h > 0 and math.isfinite(h)):
        raise ValueError(f"h must be in (0, inf), got {h!r}")
    j_lo = int(math.floor(lo / h))
    j_hi = int(math.ceil(hi / h))
    if j_hi <= j_lo:
        j_hi = j_lo + 1
    g = np.arange(j_lo, j_hi + 1) * h
    pb, qb = chunked_bin_masses(loss, g, check)  # bins (g_j, g_{j+1}]
    a = -math.expm1(-h)
    # connect-the-dots split: u_ctd = P_bin (1 - rho_q) / (1 - e^{-h}), rho_q = e^{g_j} Q/P
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        log_rho = np.log(qb) + g[:-1] - np.log(pb)
        rho_q = np.exp(np.nan_to_num(log_rho, nan=0.0, neginf=-np.inf, posinf=0.0))
    rho_q = np.clip(rho_q, math.exp(-h), 1.0)
    u_ctd = np.where(pb > 0, pb * (1.0 - rho_q) / a, 0.0)
    g_mean, _ = gamma_constants(h)
    u_hi = np.clip(u_ctd, 0.0, pb)
    # gamma(r) <= (h^2/2) r (1 - r) (the difference is convex and vanishes at r = 0, 1) and
    # E[r(1-r)] <= u - u^2/P (Jensen), so u_mp + c (u_mp - u_mp^2/P) >= u_ctd, c = h^2/(2a)
    u_lo = _split_root(u_hi, pb, h * h / (2.0 * a))
    # estimate: the same relation with E[gamma] of a bin of uniform density (4 gamma_mean)
    u_est = np.clip(_split_root(u_hi, pb, 4.0 * g_mean / a), u_lo, u_hi)
    # relative mismatch bound: max over u in [u_lo, u_hi] of the scaling needed
    with np.errstate(divide="ignore", invalid="ignore"):
        r1 = np.where(u_hi > u_est, (u_hi - u_est) / u_hi, 0.0)
        r2 = np.where(u_est > u_lo, (u_est - u_lo) / (pb - u_lo), 0.0)
    rho = np.clip(np.nan_to_num(np.maximum(r1, r2), nan=1.0, posinf=1.0), 0.0, 1.0)
    n = g.size
    probs = np.zeros(n)
    probs[:-1] += pb - u_est
    probs[1:] += u_est
    # clipped tails: P(Y <= lo) on lo, P(hi < Y < inf) on hi
    p_below = float(loss.p_cdf(np.asarray(g[0])))
    p_above = math.exp(loss.log_finite_sf(float(g[-1])))
    probs[0] += p_below
    probs[-1] += p_above
    probs = np.maximum(probs, 0.0)
    inf_mass = float(loss.inf_mass)
    fin = 1.0 - inf_mass if inf_mass < 1.0 else 1.0
    total = float(probs.sum())
    if not abs(total - (1.0 - inf_mass)) <= 1e-9:  # also catches NaN
        raise ValueError(f"the loss's CDF is inconsistent on [{g[0]:.6g}, {g[-1]:.6g}]: the "
                         f"discretized finite mass is {total!r}, expected {1.0 - inf_mass!r}")
    mean_err = float(h * np.sum(np.maximum(u_hi - u_est, u_est - u_lo))) / fin
    meta = {
        "kind": "mean_preserving",
        "tail_below": p_below / fin,
        "tail_above": p_above / fin,
        "bin_p": pb / fin,
        "bin_rho": rho,
        "mean_error": mean_err,
    }
    return DiscretePLD(h, j_lo, probs, inf_mass, meta)


def coupling_log_mgf(pld: DiscretePLD, theta) -> np.ndarray:
    """Bound on ``log E[e^{theta X}]`` (and on ``log E[e^{-theta X}]``) for the per-step
    coupling error ``X = Y_clipped - Y~`` of a :func:`mean_preserving` discretization.

    Given ``Y`` in bin ``j``, ``X`` takes two values ``h`` apart with mean in
    ``[-h rho_j, h rho_j]``; Hoeffding's lemma (Gopi et al. 2021, proof of Lemma 5.3) bounds
    the centred part by ``e^{theta^2 h^2 / 8}``, so

        log E[e^{+-theta X}] <= theta^2 h^2 / 8 + log(sum_j P_j e^{theta h rho_j} + P_rest)

    where ``P_rest`` is the mass of the clipped atoms (for which ``X = 0``). With exact
    mean preservation (all ``rho_j = 0``) this is Hoeffding's ``theta^2 h^2 / 8``.
    """
    theta = np.atleast_1d(np.asarray(theta, dtype=float))
    h = pld.d
    p = np.asarray(pld.meta["bin_p"])
    rho = np.asarray(pld.meta["bin_rho"])
    pos = p > 0
    lp = np.log(p[pos])
    rest = max(1.0 - float(p.sum()), 0.0)
    terms = lp[None, :] + np.abs(theta)[:, None] * h * rho[pos][None, :]
    if rest > 0:
        extra = np.full((theta.size, 1), math.log(rest))
        terms = np.concatenate([terms, extra], axis=1)
    lse = logsumexp(terms, axis=1)
    return theta * theta * h * h / 8.0 + np.maximum(lse, 0.0)
