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
  from ``t`` (see :func:`_gauss_nodes`) and the domain from a bound on the integrand's slope.
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
set is only evaluated where its nodes can matter (:func:`_gauss_window`: a coarse pass with
certified slope bounds), so even ``t`` in the thousands builds its set in about a millisecond;
later evaluations cost microseconds per node. A set of up to 4096 nodes evaluated at a few tilts
only (a bracketing scan passing through its range) is used whole, without that search, until an
evaluation at many tilts builds the windowed one (:func:`_nodes`).
"""

from __future__ import annotations

import math

import numpy as np

from .base import PrivacyLoss
from .discrete import DiscreteLoss
from .gaussian import GaussianLoss
from .mixture import LocationMixtureLoss

__all__ = ["cgf", "cgf_rows", "cgf_and_abs3", "tilted_abs_third_moment", "cgf_supported",
           "loss_sup", "max_tilt", "node_count", "node_bucket", "MAX_NODES"]

_LOG_2PI = math.log(2.0 * math.pi)
#: half-width (in standard deviations of the kernel) of the integration domain beyond the
#: slope bounds; the integrand there is below e^{-R^2/2} = e^{-98} times its maximum.
_R = 14.0

#: most quadrature nodes of one node set (16 bytes each when kept); beyond it the tilt range
#: is not supported (see :func:`max_tilt`)
MAX_NODES = 4_000_000
#: most elements of one temporary (tilts x nodes, or nodes x components) array: 2^22
#: doubles = 32 MB, so that evaluating or building a node set needs well under 1 GB
_BLOCK = 1 << 22
#: node sets of more nodes than this are built on the cells that matter (:func:`_gauss_window`)
_WINDOW_MIN = 1 << 10
#: node sets of at most this many nodes are first used whole at a few tilts (:func:`_nodes`)
_LAZY_MAX = 1 << 12
#: an evaluation at this many tilts of one node set or more uses its windowed form
_MANY = 16
#: number of coarse cells of that search
_COARSE = 128
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
def node_bucket(t: np.ndarray) -> np.ndarray:
    """Node-set bucket of each tilt: ``b = 4`` serves ``[0, 4]``, ``b = 2^j`` (j > 2) serves
    ``(2^{j-1}, 2^j]``."""
    t = np.asarray(t, dtype=float)
    j = np.ceil(np.log2(np.maximum(t, 1e-300)))  # a positive argument: no warning
    return 2.0 ** np.maximum(j, 2.0)


def _gauss_nodes(loss: LocationMixtureLoss, t_max: float, t_min: float | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Trapezoidal nodes for ``int P^{t+1} Q^{-t}`` over the output, Gaussian kernel.

    With ``t_min`` (the node set serves ``[t_min, t_max]``), a node set of more than
    :data:`_WINDOW_MIN` nodes is evaluated only on the cells of :func:`_gauss_window` (the
    other nodes' shares are below ``e^{-92}`` at every tilt served: the trim would drop them).

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
    lo, hi, n = _gauss_layout(loss, t_max)
    if n > MAX_NODES:
        raise ValueError(f"t = {t_max:.3g} is beyond the range where the CGF quadrature of this "
                         f"privacy loss is supported (it would need more than {MAX_NODES:.0e} "
                         "nodes)")
    h = (hi - lo) / (n - 1)
    a, b = loss.a / loss.s, loss.b / loss.s
    ends = np.array([0, n - 1])
    if n > _WINDOW_MIN and t_min is not None:
        sel = _gauss_window(loss, lo, hi, n, t_min, t_max)
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
                  t_max: float) -> np.ndarray:
    """Indices of the nodes ``np.linspace(lo, hi, n)`` of :func:`_gauss_nodes` that can carry
    a share above ``e^{-92}`` of ``E_P[e^{tY}]`` for some ``t`` in ``[t_min, t_max]`` (a
    superset of them), found without evaluating the mixtures at every node.

    The mixtures are evaluated at every m-th node (about :data:`_COARSE` of them) and the
    cells between these points that cannot matter are dropped (:func:`_window_cells`); while
    the kept nodes are still many, the same is done again on them (every m-th kept node)."""
    m = -(-n // _COARSE)
    ic = np.arange(0, n, m)
    if ic[-1] != n - 1:
        ic = np.append(ic, n - 1)
    cells = np.flatnonzero(_window_cells(loss, lo, hi, n, ic, t_min, t_max))
    if not cells.size:
        return np.arange(n)
    # runs of consecutive kept cells: the nodes from a run's first cell start to its last
    # cell's end
    brk = np.flatnonzero(np.diff(cells) > 1)
    first = cells[np.concatenate([[0], brk + 1])]
    last = cells[np.concatenate([brk, [cells.size - 1]])]
    cand = np.concatenate([np.arange(ic[i], ic[j + 1] + 1) for i, j in
                           zip(first.tolist(), last.tolist(), strict=True)])
    while cand.size > _WINDOW_MIN:
        # every m-th kept node: a cell may span a gap of dropped nodes (the bounds hold on
        # the whole interval); a coarse point is kept with either of its two cells
        m = -(-cand.size // _COARSE)
        pos = np.arange(0, cand.size, m)
        if pos[-1] != cand.size - 1:
            pos = np.append(pos, cand.size - 1)
        keep_cell = _window_cells(loss, lo, hi, n, cand[pos], t_min, t_max)
        cell_of = np.minimum(np.arange(cand.size) // m, keep_cell.size - 1)
        keep = keep_cell[cell_of]
        keep[pos[1:]] |= keep_cell  # a cell's right end
        new = cand[keep]
        if new.size > 0.8 * cand.size:
            break
        cand = new
    return cand


def _window_cells(loss: LocationMixtureLoss, lo: float, hi: float, n: int, ic: np.ndarray,
                  t_min: float, t_max: float) -> np.ndarray:
    """For the cells between the consecutive nodes ``ic`` (indices into
    ``np.linspace(lo, hi, n)``), whether a node inside may carry a share above ``e^{-92}``
    for some tilt of ``[t_min, t_max]`` (True: keep the cell).

    The nodes ``ic``, with their own weights, are a subset of the sum, so their CGF is a lower
    bound of the full one, and :func:`_trim_tests` gives test tilts ``tt_k`` and lower bounds
    ``c_k`` of ``K`` with ``w_i + t y_i - K(t) <= max_k G_k(u_i)``, ``G_k = w + tt_k y - c_k``,
    for every node and every ``t`` of the range. ``G_k(u) = const + (1 + t) log P(u) - t
    log Q(u)`` has the slope ``-u + (1 + t) E[a | u] - t E[b | u]`` (posterior means of the
    locations under P and Q, both non-decreasing in u: their derivatives are posterior
    variances), so on a cell ``[u_0, u_1]`` the slope lies in
    ``[-u_1 + (1+t) E[a|u_0] - t E[b|u_1], -u_0 + (1+t) E[a|u_1] - t E[b|u_0]]`` and ``G_k``
    is at most ``min(G_k(u_0) + du max(s_hi, 0), G_k(u_1) + du max(-s_lo, 0))`` there (with
    the trapezoid's full weight at the ends, an upper bound of the halved end weights).
    Cells where this is at most -92 for every k are dropped: their nodes have a share below
    ``e^{-92}`` at every tilt of the range (the test of :func:`_trim`, with 2 of margin for
    rounding)."""
    h = (hi - lo) / (n - 1)
    uc = _linspace_at(lo, hi, n, ic)
    lp, ea = _lse_mean(uc, loss.lpw, loss.a / loss.s)
    lq, eb = _lse_mean(uc, loss.lqw, loss.b / loss.s)
    wc = math.log(h) - 0.5 * _LOG_2PI + lp
    yc = lp - lq
    # the lower bound of K from the nodes as weighted in the sum (the two ends halved)
    w_sum = wc - np.where((ic == 0) | (ic == n - 1), math.log(2.0), 0.0)
    tt, tangent = _trim_tests(yc, w_sum, t_min, t_max)
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


def _gauss_layout(loss: LocationMixtureLoss, t_max: float) -> tuple[float, float, int]:
    """(first node, last node, number of nodes) of :func:`_gauss_nodes`, without allocating."""
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
    the temporary ``(nodes, components)`` arrays stay below ``_BLOCK`` elements (row-wise
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
    rows = max(_BLOCK // max(locs.size, 1), 1)
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
    consecutive kinks for tilts up to ``t_max`` (see :func:`_laplace_nodes`)."""
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
        return _gauss_layout(loss, b)[2]
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


def _laplace_nodes(loss: LocationMixtureLoss, t_max: float) -> tuple[np.ndarray, np.ndarray]:
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
    rows = max(_BLOCK // max(loss.a.size, loss.b.size, 1), 1)

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
    rows = max(_BLOCK // max(yc.size, 1), 1)  # (tests, nodes) temporaries below _BLOCK
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
    Gaussian-kernel set of ``_WINDOW_MIN`` to ``_LAZY_MAX`` nodes is the whole trapezoid grid
    until the windowed set exists (:func:`_gauss_window` costs more than its nodes save at a
    few tilts; the windowed set is built at the first evaluation at many tilts and used from
    then on: the two differ by nodes of share below ``e^{-92}``, so their sums differ in the
    last bits only)."""
    if isinstance(loss, DiscreteLoss):
        keep = loss.p > 0
        return loss.y[keep], np.log(loss.p[keep])
    per_loss = loss.tables.setdefault("cgf_nodes", {})
    hit = per_loss.get(bucket)
    if hit is not None:
        return hit
    if not many and loss.kernel.name == "gaussian" and bucket > 4 and (
            _WINDOW_MIN < _gauss_layout(loss, bucket)[2] <= _LAZY_MAX):
        whole = per_loss.get(("whole", bucket))
        if whole is None:
            whole = per_loss[("whole", bucket)] = _gauss_nodes(loss, bucket)
        return whole
    if bucket not in per_loss:
        t_min = 0.0 if bucket <= 4 else bucket / 2
        if loss.kernel.name == "gaussian":
            y, w = _gauss_nodes(loss, bucket, t_min)
        else:
            y, w = _laplace_nodes(loss, bucket)
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
    temporaries stay below ``_BLOCK`` elements (each tilt's row is computed alone: the same
    numbers as one block). At many tilts (``_MANY``) of a large set (``_WINDOW_MIN`` nodes)
    each tilt's sums run over its window of :func:`_tilt_windows` only (the others' shares
    are below ``e^{-60}`` each).
    """
    rows = max(_BLOCK // max(y.size, 1), 1)
    if t.size > rows:
        return np.concatenate([_node_cumulants(y, w, t[i:i + rows], order, abs3)
                               for i in range(0, t.size, rows)], axis=1)
    # the (tilts, nodes) temporaries are updated in place where the operation is the same
    # (fewer large allocations, each a fresh mapping of pages for a few hundred tilts)
    lw = t[:, None] * y[None, :]
    np.add(w[None, :], lw, out=lw)  # w + t y
    mx = lw.max(axis=1)
    yy = y[None, :]
    if t.size >= _MANY and y.size >= _WINDOW_MIN:
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
