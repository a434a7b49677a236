"""The quadrature node sets of the CGFs of :mod:`tightdp.losses.cgf` for location mixtures.

A node set is loss values ``y_i`` and log P-masses ``w_i`` with ``E_P[g(Y)] ~= sum_i e^{w_i}
g(y_i)`` for the functions ``g(y) = e^{t y} y^j`` of the CGF and its derivatives, serving the
tilts of one bucket (:func:`node_bucket`): the trapezoidal rule in log space for the Gaussian
kernel (:func:`gauss_nodes`, its layout :func:`gauss_layout`, built only on the cells that can
matter where the set is large), composite Gauss-Legendre with exact tails for the Laplace
kernel (:func:`laplace_nodes`), and their sizes before building them (:func:`node_count`,
:func:`max_tilt`). The trimming and evaluation of the sets are in :mod:`tightdp.losses.cgf`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import cast

import numpy as np

from .base import PrivacyLoss
from .mixture import LocationMixtureLoss

__all__ = ["BLOCK", "MAX_NODES", "WINDOW_MIN", "gauss_layout", "gauss_nodes", "laplace_nodes",
           "max_tilt", "node_bucket", "node_count"]

_LOG_2PI = math.log(2.0 * math.pi)
#: half-width (in standard deviations of the kernel) of the integration domain beyond the
#: slope bounds; the integrand there is below e^{-R^2/2} = e^{-98} times its maximum.
_R = 14.0

#: most quadrature nodes of one node set (16 bytes each when kept); beyond it the tilt range
#: is not supported (see :func:`max_tilt`)
MAX_NODES = 4_000_000
#: most elements of one temporary (tilts x nodes, or nodes x components) array: 2^22
#: doubles = 32 MB, so that evaluating or building a node set needs well under 1 GB
BLOCK = 1 << 22
#: node sets of more nodes than this are built on the cells that matter (:func:`_gauss_window`)
WINDOW_MIN = 1 << 10
#: number of coarse cells of that search
_COARSE = 128

#: the trim's test (:func:`tightdp.losses.cgf._trim_tests`): for node loss values and log
#: weights and a tilt range, the test tilts and the lower bounds of ``K`` there
TrimTests = Callable[[np.ndarray, np.ndarray, float, float], tuple[np.ndarray, np.ndarray]]


def node_bucket(t: np.ndarray) -> np.ndarray:
    """Node-set bucket of each tilt: ``b = 4`` serves ``[0, 4]``, ``b = 2^j`` (j > 2) serves
    ``(2^{j-1}, 2^j]``."""
    t = np.asarray(t, dtype=float)
    j = np.ceil(np.log2(np.maximum(t, 1e-300)))  # a positive argument: no warning
    return 2.0 ** np.maximum(j, 2.0)


def gauss_nodes(loss: LocationMixtureLoss, t_max: float, t_min: float | None = None, *,
                trim_tests: TrimTests | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Trapezoidal nodes for ``int P^{t+1} Q^{-t}`` over the output, Gaussian kernel.

    With ``t_min`` (the node set serves ``[t_min, t_max]``), a node set of more than
    :data:`WINDOW_MIN` nodes is evaluated only on the cells of :func:`_gauss_window` (the
    other nodes' shares are below ``e^{-92}`` at every tilt served: the trim would drop them,
    by its test ``trim_tests``, which the window search applies to coarse cells).

    In units ``u = x / s`` the log integrand is
    ``G(u) = (t+1) log P(u) - t log Q(u)`` with ``G'(u) = -u + (t+1) E_post_P[a/s]
    - t E_post_Q[b/s]``, so ``G'(u) <= -u + D_hi`` and ``G'(u) >= -u + D_lo`` with
    ``D_hi = (t+1) max a/s - t min b/s`` and ``D_lo = (t+1) min a/s - t max b/s``: outside
    ``[D_lo - R, D_hi + R]`` the integrand is below ``e^{-R^2/2}`` of its value at the
    ends. The trapezoidal rule's error for an integrand analytic in the strip ``|Im u| < d``
    is about ``M e^{-2 pi d / h}``, ``M`` the growth of the integrand on the strip's edge. A
    mixture vanishes at distance ``pi / spread`` from the real axis (``spread`` = spread of its
    locations in units of s; ``P^{t+1}`` has branch points there). On the line at half that
    distance ``|P^{t+1} Q^{-t}|`` exceeds its real-axis value by at most ``e^{y^2/2}`` when Q
    is a single Gaussian (triangle inequality for P), and by ``2^{t/2} e^{y^2/2}`` when Q is a
    mixture (``|a + i b| >= (a + b)/sqrt 2``). Hence
    ``h = min(0.5, pi^2 / (45 spread_P), pi^2 / (spread_Q (45 + 0.35 t)))``; 0.5 keeps the
    rule's error for the Gaussian factor below ``e^{-2 pi^2 / h^2} = e^{-79}``.
    """
    lo, hi, n = gauss_layout(loss, t_max)
    if n > MAX_NODES:
        raise ValueError(f"t = {t_max:.3g} is beyond the range where the CGF quadrature of this "
                         f"privacy loss is supported (it would need more than {MAX_NODES:.0e} "
                         "nodes)")
    h = (hi - lo) / (n - 1)
    a, b = loss.a / loss.s, loss.b / loss.s
    ends = np.array([0, n - 1])
    if n > WINDOW_MIN and t_min is not None:
        sel = _gauss_window(loss, lo, hi, n, t_min, t_max, cast(TrimTests, trim_tests))
        u, ends = _linspace_at(lo, hi, n, sel), np.flatnonzero((sel == 0) | (sel == n - 1))
    else:
        u = np.linspace(lo, hi, n)
    lp = _rows_lse(u, loss.lpw, a)
    lq = _rows_lse(u, loss.lqw, b)
    w = math.log(h) - 0.5 * _LOG_2PI + lp
    # trapezoid end weights are halved (negligible mass there anyway)
    w[ends] -= math.log(2.0)
    return lp - lq, w


def _linspace_at(lo: float, hi: float, n: int, idx: np.ndarray) -> np.ndarray:
    """``np.linspace(lo, hi, n)[idx]`` without building the whole grid (the same float
    operations: ``i * step + lo``, the last point ``hi``)."""
    u = idx.astype(float) * ((hi - lo) / (n - 1)) + lo
    return np.where(idx == n - 1, hi, u)


def _gauss_window(loss: LocationMixtureLoss, lo: float, hi: float, n: int, t_min: float,
                  t_max: float, trim_tests: TrimTests) -> np.ndarray:
    """Indices of the nodes ``np.linspace(lo, hi, n)`` of :func:`gauss_nodes` that can carry
    a share above ``e^{-92}`` of ``E_P[e^{tY}]`` for some ``t`` in ``[t_min, t_max]`` (a
    superset of them), found without evaluating the mixtures at every node.

    The mixtures are evaluated at every m-th node (about :data:`_COARSE` of them) and the
    cells between these points that cannot matter are dropped (:func:`_window_cells`); while
    the kept nodes are still many, the same is done again on them (every m-th kept node)."""
    m = -(-n // _COARSE)
    ic = np.arange(0, n, m)
    if ic[-1] != n - 1:
        ic = np.append(ic, n - 1)
    cells = np.flatnonzero(_window_cells(loss, lo, hi, n, ic, t_min, t_max, trim_tests))
    if not cells.size:
        return np.arange(n)
    # runs of consecutive kept cells: the nodes from a run's first cell start to its last
    # cell's end
    brk = np.flatnonzero(np.diff(cells) > 1)
    first = cells[np.concatenate([[0], brk + 1])]
    last = cells[np.concatenate([brk, [cells.size - 1]])]
    cand = np.concatenate([np.arange(ic[i], ic[j + 1] + 1) for i, j in
                           zip(first.tolist(), last.tolist(), strict=True)])
    while cand.size > WINDOW_MIN:
        # every m-th kept node: a cell may span a gap of dropped nodes (the bounds hold on
        # the whole interval); a coarse point is kept with either of its two cells
        m = -(-cand.size // _COARSE)
        pos = np.arange(0, cand.size, m)
        if pos[-1] != cand.size - 1:
            pos = np.append(pos, cand.size - 1)
        keep_cell = _window_cells(loss, lo, hi, n, cand[pos], t_min, t_max,
                                      trim_tests)
        cell_of = np.minimum(np.arange(cand.size) // m, keep_cell.size - 1)
        keep = keep_cell[cell_of]
        keep[pos[1:]] |= keep_cell  # a cell's right end
        new = cand[keep]
        if new.size > 0.8 * cand.size:
            break
        cand = new
    return cand


def _window_cells(loss: LocationMixtureLoss, lo: float, hi: float, n: int, ic: np.ndarray,
                  t_min: float, t_max: float, trim_tests: TrimTests) -> np.ndarray:
    """For the cells between the consecutive nodes ``ic`` (indices into
    ``np.linspace(lo, hi, n)``), whether a node inside may carry a share above ``e^{-92}``
    for some tilt of ``[t_min, t_max]`` (True: keep the cell).

    The nodes ``ic``, with their own weights, are a subset of the sum, so their CGF is a lower
    bound of the full one, and ``trim_tests`` (the trim's, :data:`TrimTests`) gives test tilts
    ``tt_k`` and lower bounds ``c_k`` of ``K`` with ``w_i + t y_i - K(t) <= max_k G_k(u_i)``,
    ``G_k = w + tt_k y - c_k``, for every node and every ``t`` of the range.
    ``G_k(u) = const + (1 + t) log P(u) - t log Q(u)`` has the slope
    ``-u + (1 + t) E[a | u] - t E[b | u]`` (posterior means of the
    locations under P and Q, both non-decreasing in u: their derivatives are posterior
    variances), so on a cell ``[u_0, u_1]`` the slope lies in
    ``[-u_1 + (1+t) E[a|u_0] - t E[b|u_1], -u_0 + (1+t) E[a|u_1] - t E[b|u_0]]`` and ``G_k``
    is at most ``min(G_k(u_0) + du max(s_hi, 0), G_k(u_1) + du max(-s_lo, 0))`` there (with
    the trapezoid's full weight at the ends, an upper bound of the halved end weights).
    Cells where this is at most -92 for every k are dropped: their nodes have a share below
    ``e^{-92}`` at every tilt of the range (the test of the trim of :mod:`tightdp.losses.cgf`,
    with 2 of margin for rounding)."""
    h = (hi - lo) / (n - 1)
    uc = _linspace_at(lo, hi, n, ic)
    lp, ea = _lse_mean(uc, loss.lpw, loss.a / loss.s)
    lq, eb = _lse_mean(uc, loss.lqw, loss.b / loss.s)
    wc = math.log(h) - 0.5 * _LOG_2PI + lp
    yc = lp - lq
    # the lower bound of K from the nodes as weighted in the sum (the two ends halved)
    w_sum = wc - np.where((ic == 0) | (ic == n - 1), math.log(2.0), 0.0)
    tt, tangent = trim_tests(yc, w_sum, t_min, t_max)
    tc = tt[:, None]
    g = wc[None, :] + tc * yc[None, :] - tangent[:, None]
    du = np.diff(uc)[None, :]
    s_hi = -uc[None, :-1] + (1.0 + tc) * ea[None, 1:] - tc * eb[None, :-1]
    s_lo = -uc[None, 1:] + (1.0 + tc) * ea[None, :-1] - tc * eb[None, 1:]
    with np.errstate(invalid="ignore", over="ignore"):
        bound = np.minimum(g[:, :-1] + du * np.maximum(s_hi, 0.0),
                           g[:, 1:] + du * np.maximum(-s_lo, 0.0))
        return ~(bound <= -92.0).all(axis=0)  # a NaN keeps its cell


def _lse_mean(u: np.ndarray, lw: np.ndarray, locs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``logsumexp(lw - (u_i - locs)^2 / 2)`` and the posterior mean of ``locs`` (weights
    proportional to the terms) at each point ``u_i`` (a few thousand points)."""
    a = lw[None, :] - 0.5 * (u[:, None] - locs[None, :]) ** 2
    mx = a.max(axis=1, keepdims=True)
    e = np.exp(a - mx)
    z = e.sum(axis=1)
    return np.log(z) + mx[:, 0], (e @ locs) / z


def gauss_layout(loss: LocationMixtureLoss, t_max: float) -> tuple[float, float, int]:
    """(first node, last node, number of nodes) of :func:`gauss_nodes`, without allocating."""
    ext = loss.tables.get("cgf_extremes")
    if ext is None:  # the locations' extremes in units of the scale, once per loss
        s = loss.s
        a, b = loss.a / s, loss.b / s
        ext = loss.tables["cgf_extremes"] = (float(a.min()), float(a.max()), float(b.min()),
                                             float(b.max()))
    a_min, a_max, b_min, b_max = ext
    a_spread, b_spread = a_max - a_min, b_max - b_min
    t = t_max
    h = 0.5
    if a_spread > 0:
        h = min(h, math.pi ** 2 / (a_spread * 45.0))
    if b_spread > 0:
        h = min(h, math.pi ** 2 / (b_spread * (45.0 + 0.35 * t)))
    d_hi = max(a_max, (t + 1) * a_max - t * b_min)
    d_lo = min(a_min, (t + 1) * a_min - t * b_max)
    lo, hi = d_lo - _R, d_hi + _R
    return lo, hi, int(math.ceil((hi - lo) / h)) + 1


def _rows_lse(u: np.ndarray, lw: np.ndarray, locs: np.ndarray) -> np.ndarray:
    """``logsumexp(lw - (u_i - locs)^2 / 2)`` for each node ``u_i``, in blocks of nodes so that
    the temporary ``(nodes, components)`` arrays stay below ``BLOCK`` elements (row-wise
    reductions: the same numbers as one block)."""
    if locs.size <= 2:
        # one or two components (the subsampled Gaussian's Q and P): _lse_rows' formula (a
        # single term is itself; two are max + log1p(e^{min - max}), a tie max + log 2:
        # numpy's logaddexp, equal to it up to the last bit) without the (nodes, components)
        # temporaries
        d0 = u - locs[0]
        t0 = lw[0] - 0.5 * (d0 * d0)
        if locs.size == 1:
            return t0
        d1 = u - locs[1]
        return np.logaddexp(t0, lw[1] - 0.5 * (d1 * d1))
    rows = max(BLOCK // max(locs.size, 1), 1)
    if u.size <= rows:
        return _lse_rows(lw - 0.5 * (u[:, None] - locs) ** 2)
    out = np.empty(u.size)
    for i in range(0, u.size, rows):
        uu = u[i:i + rows, None]
        out[i:i + rows] = _lse_rows(lw - 0.5 * (uu - locs) ** 2)
    return out


def _lse_rows(a: np.ndarray) -> np.ndarray:
    """Row-wise log-sum-exp of a finite 2-d array, the same operations (hence the same
    numbers) as ``scipy.special.logsumexp(a, axis=1)`` without its per-call overhead: the
    maximal terms (``m`` of them) are taken out of the sum, ``s = sum(e^{a - max}) / m`` over the
    others, and the result is ``log1p(s) + log(m) + max``."""
    a_max = a.max(axis=1, keepdims=True)
    is_max = a == a_max
    m = is_max.sum(axis=1, keepdims=True, dtype=float)
    with np.errstate(under="ignore"):
        s = np.exp(np.where(is_max, -np.inf, a) - a_max).sum(axis=1, keepdims=True)
    s = np.where(s == 0, s, s / m)
    return (np.log1p(s) + np.log(m) + a_max)[:, 0]


_GL_X, _GL_W = np.polynomial.legendre.leggauss(32)


def _laplace_pieces(loss: LocationMixtureLoss, t_max: float) -> tuple[np.ndarray, np.ndarray]:
    """The kinks of a Laplace-kernel mixture and the number of Gauss-Legendre pieces between
    consecutive kinks for tilts up to ``t_max`` (see :func:`laplace_nodes`)."""
    k = np.unique(np.concatenate([loss.a, loss.b]))
    m = np.ceil((t_max + 1) * 2 * np.diff(k) / loss.s / 4.0).astype(np.int64)
    return k, m


def node_count(loss: PrivacyLoss, t_max: float) -> int:
    """Number of quadrature nodes :func:`cgf` builds for tilts up to ``t_max`` (before
    trimming), computed without building them (0 for closed forms and finite laws)."""
    if not isinstance(loss, LocationMixtureLoss):
        return 0
    b = float(node_bucket(np.asarray(t_max)))
    if loss.kernel.name == "gaussian":
        return gauss_layout(loss, b)[2]
    _, m = _laplace_pieces(loss, b)
    return int(m.sum()) * _GL_X.size + 2


def max_tilt(loss: PrivacyLoss, cap: float = 2048.0) -> float:
    """The largest tilt up to ``cap`` whose node set stays within ``MAX_NODES`` nodes (the
    tilts :func:`cgf` evaluates without refusing); ``cap`` for closed forms and finite laws.
    Raises ValueError if not even the first range ``[0, 4]`` fits."""
    t = float(cap)
    while node_count(loss, t) > MAX_NODES:
        if t <= 4.0:
            raise ValueError("the CGF quadrature of this privacy loss would need more than "
                             f"{MAX_NODES:.0e} nodes even for t <= 4 (scale too small "
                             "against its sensitivity)")
        t = float(node_bucket(np.asarray(t))) / 2.0
    return t


def laplace_nodes(loss: LocationMixtureLoss, t_max: float) -> tuple[np.ndarray, np.ndarray]:
    """Nodes for a Laplace-kernel mixture: composite Gauss-Legendre between the kinks (all
    locations), exact tails (beyond the outermost kink ``P`` and ``Q`` are both multiples of
    ``e^{-|x|/s}``, so the loss is constant there and the P-mass of the tail is closed form)."""
    s = loss.s
    k, pieces = _laplace_pieces(loss, t_max)
    count = int(pieces.sum()) * _GL_X.size + 2
    if count > MAX_NODES:
        raise ValueError(f"t = {t_max:.3g} is beyond the range where the CGF quadrature of this "
                         f"privacy loss is supported (it would need more than {MAX_NODES:.0e} "
                         "nodes)")
    rows = max(BLOCK // max(loss.a.size, loss.b.size, 1), 1)

    def lse(xx, lw, locs):
        return _lse_rows(lw - np.abs(xx - locs) / s)

    def lp_lq(x):
        x = np.asarray(x, dtype=float)
        lp, lq = np.empty(x.size), np.empty(x.size)
        for i in range(0, x.size, rows):  # row-wise reductions in blocks: same numbers
            xx = x[i:i + rows, None]
            lp[i:i + rows] = lse(xx, loss.lpw, loss.a)
            lq[i:i + rows] = lse(xx, loss.lqw, loss.b)
        return lp - math.log(2 * s), lq - math.log(2 * s)

    ys, ws = [], []
    lp, lq = lp_lq(k[[0, -1]])
    # P-mass of the tails: P(x_end) * s
    ys.extend([lp[0] - lq[0], lp[1] - lq[1]])
    ws.extend([lp[0] + math.log(s), lp[1] + math.log(s)])
    for x0, x1, m in zip(k[:-1], k[1:], pieces.tolist(), strict=True):
        # the loss has slope at most 2/s: split so that t * (loss range per piece) <= 4
        edges = np.linspace(x0, x1, m + 1)
        half = 0.5 * np.diff(edges)
        mid = 0.5 * (edges[:-1] + edges[1:])
        x = (mid[:, None] + half[:, None] * _GL_X).ravel()
        wt = (half[:, None] * _GL_W).ravel()
        lpx, lqx = lp_lq(x)
        ys.append(lpx - lqx)
        ws.append(np.log(wt) + lpx)
    y = np.concatenate([np.atleast_1d(np.asarray(v, dtype=float)) for v in ys])
    w = np.concatenate([np.atleast_1d(np.asarray(v, dtype=float)) for v in ws])
    return y, w
