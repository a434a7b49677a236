"""Cumulant generating functions of privacy loss random variables.

For a privacy loss ``Y = log P(o)/Q(o)`` the cumulant generating function (CGF) under P is

    K(t) = log E_P[exp(t Y)] = log E_Q[exp((t + 1) Y)] = log int P^(t+1) Q^(-t)

(Alghamdi et al., *The Saddle-Point Accountant*, eqs. (22)-(23); equivalently
``K(t) = t D_{t+1}(P || Q)`` in terms of the Renyi divergence of order ``t + 1``).
Its derivatives are the cumulants of the exponentially tilted loss ``Y_t`` whose law is
``e^{t y - K(t)} P_Y(dy)`` (their Definition 7 and eq. (31)): ``K'(t) = E[Y_t]``,
``K''(t) = Var[Y_t]``, ``K'''(t)`` and ``K''''(t)`` the third and fourth cumulants.

How each loss is handled:

* :class:`~tightdp.losses.GaussianLoss` ``(mu)``: closed form,
  ``K(t) = mu^2 t (t + 1) / 2``.
* :class:`~tightdp.losses.DiscreteLoss` (pure DP, randomized response, ...): the
  finite sum ``log sum_i p_i e^{t y_i}`` in log space. A P-mass at ``+inf`` (approximate DP
  with ``delta > 0``) makes ``K(t) = +inf`` for every ``t > 0``.
* :class:`~tightdp.losses.LocationMixtureLoss` with the Gaussian kernel (Poisson
  subsampled Gaussian, mixtures of Gaussians): the integral over the output ``x`` of
  ``P(x)^{t+1} Q(x)^{-t}`` by the trapezoidal rule in log space. The integrand is analytic
  in a strip around the real axis whose half-width is ``pi / (spread of the locations /
  scale)``, so the rule converges geometrically; the step is chosen from that strip and
  from ``t`` (see :func:`~tightdp.losses.quadrature.gauss_nodes`) and the domain from a
  bound on the integrand's slope.
  The accuracy is verified against mpmath in the tests: absolute error of ``K`` below
  ``1e-13 max(1, |K|)`` for scales down to 0.3, sampling rates up to 1, ``t`` up to 60 in the
  fast tests (spot checks up to ``t = 2000`` agree to the same level).
* Laplace-kernel mixtures: Gauss-Legendre on each piece between the kernel's kinks and the
  two exponential tails integrated in closed form.

The quadrature is represented by *nodes*: loss values ``y_i`` and log P-masses ``w_i`` such that
``E_P[g(Y)] ~= sum_i e^{w_i} g(y_i)`` for the functions ``g(y) = e^{t y} y^j`` needed here.
Node sets are cached per loss and per range of ``t`` (``[0, 4]``, ``(4, 8]``, ``(8, 16]``, ...);
nodes whose share of ``E_P[e^{tY}]`` is below ``e^{-90}`` for every ``t`` of the range are
dropped (see :func:`_trim`; sets of at most 8192 nodes are kept whole). A large Gaussian-kernel
set is only evaluated where its nodes can matter (:mod:`tightdp.losses.quadrature`: a coarse
pass with certified slope bounds), so even ``t`` in the thousands builds its set in about a
millisecond;
later evaluations cost microseconds per node. A set of up to 4096 nodes evaluated at a few tilts
only (a bracketing scan passing through its range) is used whole, without that search, until an
evaluation at many tilts builds the windowed one (:func:`_nodes`).
"""

from __future__ import annotations

import math
from typing import cast

import numpy as np

from .base import PrivacyLoss
from .discrete import DiscreteLoss
from .gaussian import GaussianLoss
from .mixture import LocationMixtureLoss
from .quadrature import (
    BLOCK,
    MAX_NODES,
    WINDOW_MIN,
    gauss_layout,
    gauss_nodes,
    laplace_nodes,
    max_tilt,
    node_bucket,
    node_count,
)

__all__ = ["cgf", "cgf_rows", "cgf_and_abs3", "tilted_abs_third_moment", "cgf_supported",
           "loss_sup", "max_tilt", "node_count", "node_bucket", "MAX_NODES"]

#: node sets of at most this many nodes are first used whole at a few tilts (:func:`_nodes`)
_LAZY_MAX = 1 << 12
#: an evaluation at this many tilts of one node set or more uses its windowed form
_MANY = 16
#: node sets of at most this many nodes are not trimmed (:func:`_trim`)
_TRIM_MIN = 8192


def cgf_supported(loss: PrivacyLoss) -> str | None:
    """None if :func:`cgf` can evaluate ``loss`` for t > 0, else the reason why not."""
    if isinstance(loss, GaussianLoss):
        return None
    if loss.inf_mass > 0:
        return (f"the privacy loss has mass P(Y = +inf) = {loss.inf_mass:.3g} > 0 (e.g. "
                "approximate DP with delta > 0), so its CGF is +inf for every t > 0")
    if isinstance(loss, DiscreteLoss | LocationMixtureLoss):
        return None
    return f"no CGF available for privacy loss of type {type(loss).__name__}"


def loss_sup(loss: PrivacyLoss) -> float:
    """Essential supremum of the finite part of the loss (``+inf`` if unbounded)."""
    if isinstance(loss, GaussianLoss):
        return math.inf
    if isinstance(loss, DiscreteLoss):
        return float(loss.y[loss.p > 0].max()) if np.any(loss.p > 0) else -math.inf
    return float(loss.support[1])


# ------------------------------------------------------------------------------------------------
# node sets
# ------------------------------------------------------------------------------------------------


def _trim(y: np.ndarray, w: np.ndarray, t_min: float, t_max: float
          ) -> tuple[np.ndarray, np.ndarray]:
    """Drop the nodes whose share of ``E_P[e^{tY}]`` is below ``e^{-90}`` for every t in
    ``[t_min, t_max]``.

    The share of node i is ``exp(w_i + t y_i - K(t))``. On ``[t_1, t_2]`` the convex ``K``
    lies above both tangents at ``t_1`` and ``t_2``, so the log-share is at most the maximum of
    ``w_i + t y_i - max(tangent_1(t), tangent_2(t))`` over the interval, which is attained at
    an end or where the tangents cross: a rigorous test on a finite set of tilts.
    """
    tt, tangent = _trim_tests(y, w, t_min, t_max)
    # the test: node i is kept when some test k has w_i + tt_k y_i - tangent_k > -90. It is
    # evaluated (the same expression) only on the candidates of a cheap superset: the upper
    # envelope of the lines tt_k y - tangent_k, one lookup per node, with a margin of 1 (the
    # envelope's rounding is far below it)
    cand = _envelope_candidates(y, w, tt, tangent, -91.0)
    keep = np.zeros(y.size, dtype=bool)
    yc, wc = y[cand], w[cand]
    kc = np.zeros(yc.size, dtype=bool)
    rows = max(BLOCK // max(yc.size, 1), 1)  # (tests, nodes) temporaries below BLOCK
    for i in range(0, tt.size, rows):
        sl = slice(i, i + rows)
        kc |= ((wc[None, :] + tt[sl, None] * yc[None, :] - tangent[sl, None])
               > -90.0).any(axis=0)
    keep[cand] = kc
    if not keep.any():
        return y, w
    # the quadrature is a weighted sum: negligible terms may be dropped anywhere
    return y[keep], w[keep]


def _trim_tests(y: np.ndarray, w: np.ndarray, t_min: float, t_max: float
                ) -> tuple[np.ndarray, np.ndarray]:
    """The test tilts ``tt`` and lower bounds ``tangent`` of ``K`` there used by :func:`_trim`:
    every ``t`` in ``[t_min, t_max]`` has ``w_i + t y_i - K(t) <= max_k (w_i + tt_k y_i -
    tangent_k)`` for every node i, ``K`` the CGF of the nodes ``(y, w)`` or of any node set
    containing them (a larger sum of positive terms only raises ``K``)."""
    if t_min == 0.0:
        ts = np.concatenate([[0.0], np.geomspace(1e-3, t_max, 48)])
    else:
        ts = np.linspace(t_min, t_max, 33)
    ks = _node_cumulants(y, w, ts, 1)
    k0, k1 = ks[0], ks[1]
    # the test tilts of every interval at once (the same float operations as one interval at
    # a time): each interval's ends and the tangents' crossing point, clipped to the interval
    t1, t2 = ts[:-1], ts[1:]
    k0a, k0b, k1a, k1b = k0[:-1], k0[1:], k1[:-1], k1[1:]
    den = k1b - k1a
    with np.errstate(divide="ignore", invalid="ignore"):
        tx = np.where(den > 0, ((k0a - k1a * t1) - (k0b - k1b * t2)) / den, t1)
    tx = np.minimum(np.maximum(tx, t1), t2)
    tt = np.concatenate([t1, t2, tx])
    tangent = np.concatenate([np.maximum(k0a + k1a * (x - t1), k0b + k1b * (x - t2))
                              for x in (t1, t2, tx)])
    return tt, tangent


def _envelope_candidates(y: np.ndarray, w: np.ndarray, slopes: np.ndarray,
                         offsets: np.ndarray, level: float) -> np.ndarray:
    """Indices of the nodes with ``w_i + max_k (slopes_k y_i - offsets_k) > level`` (the max
    by the upper envelope of the lines: sort by slope, drop the lines never on top, locate each
    ``y_i`` among the envelope's breakpoints). All nodes when some value is not finite."""
    ok = np.isfinite(slopes) & np.isfinite(offsets)
    if not (np.all(np.isfinite(y)) and np.all(np.isfinite(w))) or not ok.any() or np.any(
            np.isneginf(offsets)):
        return np.arange(y.size)
    a, c = slopes[ok], offsets[ok]  # a NaN/+inf offset never keeps a node: left out
    order = np.lexsort((c, a))  # by slope; among equal slopes the smallest offset last kept
    a, c = a[order], c[order]
    hull_a: list[float] = []
    hull_c: list[float] = []
    for ai, ci in zip(a.tolist(), c.tolist(), strict=True):
        if hull_a and hull_a[-1] == ai:  # same slope: keep the higher line (smaller offset)
            if ci >= hull_c[-1]:
                continue
            hull_a.pop()
            hull_c.pop()
        while len(hull_a) >= 2:
            # the middle line is never on top if the new line overtakes the first no later
            # than the middle one does
            a1, c1, a2, c2 = hull_a[-2], hull_c[-2], hull_a[-1], hull_c[-1]
            if (c2 - c1) * (ai - a1) >= (ci - c1) * (a2 - a1):
                hull_a.pop()
                hull_c.pop()
            else:
                break
        hull_a.append(ai)
        hull_c.append(ci)
    ha, hc = np.array(hull_a), np.array(hull_c)
    breaks = (hc[1:] - hc[:-1]) / (ha[1:] - ha[:-1])  # line j+1 on top for y beyond breaks[j]
    j = np.searchsorted(breaks, y)
    # the lines on both sides of the breakpoint, so that a rounding in the breakpoints never
    # picks a line below the envelope
    jl = np.maximum(j - 1, 0)
    f = np.maximum(ha[j] * y - hc[j], ha[jl] * y - hc[jl])
    return np.flatnonzero(w + f > level)


def _nodes(loss: PrivacyLoss, bucket: float, many: bool = True
           ) -> tuple[np.ndarray, np.ndarray]:
    """(loss values, log P-masses) representing the law of Y under P for the tilts of
    ``bucket`` (see :func:`node_bucket`). For an evaluation at a few tilts (``many=False``) a
    Gaussian-kernel set of ``WINDOW_MIN`` to ``_LAZY_MAX`` nodes is the whole trapezoid grid
    until the windowed set exists (its window search costs more than its nodes save at a
    few tilts; the windowed set is built at the first evaluation at many tilts and used from
    then on: the two differ by nodes of share below ``e^{-92}``, so their sums differ in the
    last bits only)."""
    if isinstance(loss, DiscreteLoss):
        keep = loss.p > 0
        return loss.y[keep], np.log(loss.p[keep])
    loss = cast(LocationMixtureLoss, loss)  # the other losses with nodes
    per_loss = loss.tables.setdefault("cgf_nodes", {})
    hit = per_loss.get(bucket)
    if hit is not None:
        return hit
    if not many and loss.kernel.name == "gaussian" and bucket > 4 and (
            WINDOW_MIN < gauss_layout(loss, bucket)[2] <= _LAZY_MAX):
        whole = per_loss.get(("whole", bucket))
        if whole is None:
            whole = per_loss[("whole", bucket)] = gauss_nodes(loss, bucket)
        return whole
    if bucket not in per_loss:
        t_min = 0.0 if bucket <= 4 else bucket / 2
        if loss.kernel.name == "gaussian":
            y, w = gauss_nodes(loss, bucket, t_min, trim_tests=_trim_tests)
        else:
            y, w = laplace_nodes(loss, bucket)
        # a small set is kept whole: its negligible nodes cost less than the trim's test
        per_loss[bucket] = _trim(y, w, t_min, bucket) if y.size > _TRIM_MIN else (y, w)
    return per_loss[bucket]


def _eval_nodes(loss: PrivacyLoss, tv: np.ndarray, order: int, *, abs3: bool) -> np.ndarray:
    """:func:`_node_cumulants` on the node set of each tilt's bucket."""
    if isinstance(loss, DiscreteLoss):
        y, w = _nodes(loss, 4.0)
        return _node_cumulants(y, w, tv, order, abs3)
    if tv.size <= 2 and (tv <= 4.0).all():  # one or two tilts in the first node set
        # (the solvers' common case; the bucket of node_bucket, without its operations)
        return _node_cumulants(*_nodes(loss, 4.0), tv, order, abs3)
    bk = node_bucket(tv)
    if bk.size and np.all(bk == bk[0]):  # one node set (the common case): no masks
        y, w = _nodes(loss, float(bk[0]), tv.size >= _MANY)
        return _node_cumulants(y, w, tv, order, abs3)
    rows = order + 1 + int(abs3)
    out = np.empty((rows, tv.size))
    for b in np.unique(bk):
        sel = bk == b
        y, w = _nodes(loss, float(b), int(sel.sum()) >= _MANY)
        out[:, sel] = _node_cumulants(y, w, tv[sel], order, abs3)
    return out


def _tilt_windows(lw: np.ndarray, mx: np.ndarray, y: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Each tilt's nodes of :func:`_node_cumulants` cut to one window: the consecutive nodes
    from the first to the last whose log weight ``lw`` is at least ``mx - 60`` (its tilt's
    largest, ``mx``, minus 60), widened to the widest window of the block (the same width
    for every tilt, placed inside the nodes). The nodes outside carry a share below
    ``e^{-60}`` each, ``N e^{-60}`` together: far under the rounding of the sums. Returns the
    log weights and loss values of the windows, ``(tilts, width)`` arrays, or ``lw`` and
    ``y[None, :]`` unchanged where the windows would not halve the work."""
    n = y.size
    keep = lw >= (mx - 60.0)[:, None]
    first = keep.argmax(axis=1)
    last = n - 1 - keep[:, ::-1].argmax(axis=1)
    wid = int((last - first).max()) + 1
    if 2 * wid > n:
        return lw, y[None, :]
    idx = np.minimum(first, n - wid)[:, None] + np.arange(wid)
    return np.take_along_axis(lw, idx, axis=1), y[idx]


def _node_cumulants(y: np.ndarray, w: np.ndarray, t: np.ndarray, order: int,
                    abs3: bool = False) -> np.ndarray:
    """K and its derivatives from nodes: cumulants of the tilted law ``e^{t y_i + w_i - K}``.

    Returns rows ``K, K', ..., K^(order)`` (``order`` up to 5; the fifth cumulant
    ``mu_5 - 10 mu_3 mu_2`` of the central moments) and, if ``abs3``, one more row
    ``E|Y_t - K'(t)|^3``. Evaluated in blocks of tilts so that the ``(tilts, nodes)``
    temporaries stay below ``BLOCK`` elements (each tilt's row is computed alone: the same
    numbers as one block). At many tilts (``_MANY``) of a large set (``WINDOW_MIN`` nodes)
    each tilt's sums run over its window of :func:`_tilt_windows` only (the others' shares
    are below ``e^{-60}`` each).
    """
    rows = max(BLOCK // max(y.size, 1), 1)
    if t.size > rows:
        return np.concatenate([_node_cumulants(y, w, t[i:i + rows], order, abs3)
                               for i in range(0, t.size, rows)], axis=1)
    # the (tilts, nodes) temporaries are updated in place where the operation is the same
    # (fewer large allocations, each a fresh mapping of pages for a few hundred tilts)
    lw = t[:, None] * y[None, :]
    np.add(w[None, :], lw, out=lw)  # w + t y
    mx = lw.max(axis=1)
    yy = y[None, :]
    if t.size >= _MANY and y.size >= WINDOW_MIN:
        lw, yy = _tilt_windows(lw, mx, y)
    lw -= mx[:, None]
    p = np.exp(lw, out=lw)
    z = p.sum(axis=1)
    k0 = mx + np.log(z)
    out = [k0]
    if order == 0 and not abs3:
        return np.array(out)
    p /= z[:, None]
    m1 = p @ y if yy.shape[0] == 1 else np.einsum("ij,ij->i", p, yy)
    out.append(m1)
    if order >= 2 or abs3:
        dev = yy - m1[:, None]
        pd = p * dev
        pd *= dev  # p dev^2
        m2 = pd.sum(axis=1)
        out.append(m2)
        if order >= 3 or abs3:  # the third and higher rows only when wanted
            pd *= dev  # p dev^3
            out.append(pd.sum(axis=1))
            a3 = np.abs(pd).sum(axis=1) if abs3 else None
            if order >= 4:
                pd *= dev  # p dev^4
                out.append(pd.sum(axis=1) - 3.0 * m2 * m2)
            if order >= 5:  # the fifth cumulant: mu_5 - 10 mu_3 mu_2
                pd *= dev  # p dev^5
                out.append(pd.sum(axis=1) - 10.0 * out[3] * m2)
        out = out[: order + 1]
        if abs3:
            out.append(a3)
    return np.array(out[: order + 1 + int(abs3)])


# ------------------------------------------------------------------------------------------------
# public functions
# ------------------------------------------------------------------------------------------------
def cgf(loss: PrivacyLoss, t, order: int = 0) -> np.ndarray:
    """The CGF ``K(t) = log E_P[e^{tY}]`` of a privacy loss and its derivatives in ``t``.

    Alghamdi et al., *The Saddle-Point Accountant*, eq. (23); the derivatives are the cumulants
    of the tilted loss (their eq. (31) and Definition 7).

    Parameters
    ----------
    loss : the privacy loss (one direction of a mechanism).
    t : one or many tilts, each in ``[0, inf)``.
    order : highest derivative wanted, 0 to 4.

    Returns
    -------
    array of shape ``(order + 1,) + shape(t)``: ``K, K', ..., K^(order)`` at each ``t``.
    ``K = +inf`` (derivatives NaN) for ``t > 0`` when ``P(Y = +inf) > 0``.
    """
    if not isinstance(order, int) or not 0 <= order <= 4:
        raise ValueError(f"order must be an integer in [0, 4], got {order!r}")
    t_arr = np.asarray(t, dtype=float)
    if np.any(np.isnan(t_arr)) or np.any(t_arr < 0) or np.any(np.isinf(t_arr)):
        raise ValueError("t must be finite and in [0, inf)")
    shape = t_arr.shape
    tv = t_arr.reshape(-1)
    if isinstance(loss, GaussianLoss):
        m2 = loss.mu ** 2
        cols = [m2 * tv * (tv + 1) / 2, m2 * (2 * tv + 1) / 2, np.full_like(tv, m2),
                np.zeros_like(tv), np.zeros_like(tv)]
        return np.array(cols[: order + 1]).reshape((order + 1,) + shape)
    if loss.inf_mass > 0:
        # E_P[e^{tY}] = +inf for t > 0; at t = 0 it is 1 and the moments are infinite
        out = np.where(tv > 0, math.inf, 0.0)[None, :] * np.ones((order + 1, 1))
        out[1:] = np.nan
        return out.reshape((order + 1,) + shape)
    reason = cgf_supported(loss)
    if reason is not None:
        raise ValueError(reason)
    out = _eval_nodes(loss, tv, order, abs3=False)
    return out.reshape((order + 1,) + shape)


def cgf_rows(loss: PrivacyLoss, tv: np.ndarray, order: int, abs3: bool = False) -> np.ndarray:
    """:func:`cgf` (with ``abs3``: :func:`cgf_and_abs3`'s rows up to ``order``, then
    ``E|Y_t - K'(t)|^3``) for a loss :func:`cgf_supported` accepts (no P-mass at ``+inf``) and
    a one-dimensional float array ``tv`` of tilts known to be finite and non-negative, without
    checking either: the solvers' inner loop (the same operations, hence the same numbers, as
    the checked functions; Alghamdi et al., eqs. (23), (31), (76)). ``order`` may be 5 here:
    the fifth cumulant, for the exact slope of the SP-MSD1 equation."""
    if isinstance(loss, GaussianLoss):
        m2 = loss.mu ** 2
        cols = [m2 * tv * (tv + 1) / 2, m2 * (2 * tv + 1) / 2, np.full_like(tv, m2),
                np.zeros_like(tv), np.zeros_like(tv), np.zeros_like(tv)][: order + 1]
        if abs3:
            cols.append(np.full(tv.shape, 2.0 * math.sqrt(2.0 / math.pi) * loss.mu ** 3))
        return np.array(cols)
    return _eval_nodes(loss, tv, order, abs3=abs3)


def tilted_abs_third_moment(loss: PrivacyLoss, t) -> np.ndarray:
    """``E|Y_t - K'(t)|^3`` of the tilted loss ``Y_t`` (the Berry-Esseen numerator of
    Alghamdi et al., Theorem 5 / eq. (76)), vectorized in ``t >= 0``."""
    t_arr = np.asarray(t, dtype=float)
    if np.any(np.isnan(t_arr)) or np.any(t_arr < 0) or np.any(np.isinf(t_arr)):
        raise ValueError("t must be finite and in [0, inf)")
    if isinstance(loss, GaussianLoss):
        return np.full(t_arr.shape, 2.0 * math.sqrt(2.0 / math.pi) * loss.mu ** 3)
    reason = cgf_supported(loss)
    if reason is not None:
        raise ValueError(reason)
    tv = t_arr.reshape(-1)
    return _eval_nodes(loss, tv, 0, abs3=True)[-1].reshape(t_arr.shape)


def cgf_and_abs3(loss: PrivacyLoss, t: np.ndarray) -> np.ndarray:
    """Rows ``K, K', K'', K''', K''''`` and ``E|Y_t - K'(t)|^3`` in one pass, for a
    one-dimensional array ``t`` of tilts in ``[0, inf)``; see :func:`cgf` and
    :func:`tilted_abs_third_moment` (Alghamdi et al., eqs. (23), (31), (76))."""
    tv = np.asarray(t, dtype=float)
    if isinstance(loss, GaussianLoss):
        return np.concatenate([cgf(loss, tv, 4), tilted_abs_third_moment(loss, tv)[None]])
    reason = cgf_supported(loss)
    if reason is not None:
        raise ValueError(reason)
    return _eval_nodes(loss, tv, 4, abs3=True)
