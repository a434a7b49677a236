"""The tables of bucket CGFs of one direction (the package docstring, steps 1-2): exact rows
``K_b, ..., K_b''''`` of every bucket at the accountant's bracketing tilts and Chebyshev
interpolants of them on the intervals between those tilts, fitted on demand (halved where a
composition bends too sharply) and cached for the whole query; built once on the driver and
shipped to the workers. They keep within the query's share of the memory budget and its
deadline."""

from __future__ import annotations

import math
import time
from typing import cast

import numpy as np

from ...budget import BudgetExceeded
from ...curves.saddle import T_MAX, T_MAX_QUAD, tilt_grids
from ...losses import GaussianLoss
from ...losses.cgf import cgf, cgf_rows, cgf_supported
from .chebyshev import cheb_coefficients, lobatto

__all__ = ["Piece", "Table", "grid_cell", "DEGREE", "PIECE_BYTES"]

#: degree of the Chebyshev interpolants of the bucket CGFs on each tilt interval (even: the
#: midpoint, where an interval is split, is one of the nodes)
DEGREE = 24
#: an interpolant is accepted when its two trailing coefficients are below this fraction of
#: the row's scale (rows K, K', K'' relative to their maximum on the interval; K''' and K''''
#: relative to K''^{3/2} and K''^2, the scales they enter the SP-MSD1 terms with)
INTERP_RTOL = 1e-12
#: ... plus this multiple of max(1, |K|) (the level of the quadrature's rounding noise)
NOISE_FLOOR = 1e-13
#: the bracketing grids (curves.saddle.tilt_grids: geomspace(1e-4, 64, 33), then down to
#: 1e-12, then up to the tilt cap in chunks; the accountant's solve_tilt uses 65 points on the
#: first: the same root wherever g increases, which the examples flagged reliable satisfy)
_GRID_LO, _GRID_HI, _GRID_POINTS = 1e-4, 64.0, 33
#: bytes one interpolation piece holds per bucket (:class:`Piece`: values, coefficients,
#: end rows, checks, and the coefficients' temporary: about 3 (DEGREE + 1) rows of 5 doubles)
PIECE_BYTES = 8.0 * (3 * 5 * (DEGREE + 1) + 40)
#: buckets whose CGFs are evaluated between two checks of the budget (:meth:`Table.stats`)
_STATS_ROWS = 256


class Piece:
    """Chebyshev interpolants of every bucket's CGF rows on one tilt interval ``[a, b]``."""

    def __init__(self, a: float, b: float, vals: np.ndarray):
        self.a, self.b = a, b
        self.t = a + (b - a) * (lobatto(vals.shape[-1] - 1) + 1.0) * 0.5  # from b down to a
        self.vals = vals  # (B, 5, p+1): exact values at the nodes
        # exact rows at a and at b, (10, B): composed = this @ counts (buckets x examples)
        self.ends = np.ascontiguousarray(vals[:, :, [-1, 0]].reshape(vals.shape[0], 10).T)
        self.k_t = np.ascontiguousarray(vals[:, 0, :].T)  # K at the nodes, (p+1, B)
        c = cheb_coefficients(vals)
        p1 = vals.shape[-1]
        # 5 (p+1) rows (K .. K'''', each by degree), one column per bucket: composed = this @
        # counts
        self.coef_t = np.ascontiguousarray(c.transpose(1, 2, 0).reshape(5 * p1, -1))
        tail = np.max(np.abs(c[..., -2:]), axis=-1)  # (B, 5)
        s0 = np.max(np.abs(vals[:, 0]), axis=-1)
        s2 = np.max(np.abs(vals[:, 2]), axis=-1)
        scale = np.stack([s0, np.max(np.abs(vals[:, 1]), axis=-1), s2, s2 ** 1.5, s2 ** 2],
                         axis=1)
        noise = NOISE_FLOOR * np.maximum(1.0, s0)[:, None]
        # every bucket resolved on its own: then so is every composition (the bounds add up;
        # (sum n_b s_b)^{3/2} >= sum n_b s_b^{3/2} for counts n_b >= 1, likewise ^2)
        self.all_ok = bool(np.all(tail <= INTERP_RTOL * scale + noise))
        # otherwise per example: check @ counts = (error bounds of the five composed rows,
        # composed scales of rows 0..2, composed noise level, and the exact composed rows at
        # the midpoint ``m``, a Lobatto node (DEGREE is even): one product for both)
        self.m = float(self.t[DEGREE // 2])
        self.check = np.ascontiguousarray(np.vstack([
            np.column_stack([tail, s0, scale[:, 1], s2, np.maximum(1.0, s0)]).T,
            vals[:, :, DEGREE // 2].T]))
        self.children: list[Piece | None] = [None, None]

    def unresolved(self, m: np.ndarray) -> np.ndarray:
        """Per example (columns of ``m = check @ counts``, counts buckets x examples): is the
        interpolation error bound of its composed rows (``sum_b n_b`` times the two trailing
        coefficients) above the tolerance relative to the composed scales (rows 0..2: their
        maxima; K''' and K'''': K''^{3/2} and K''^2)? (Only for pieces not ``all_ok``.)"""
        s2 = m[7]
        scale = np.stack([m[5], m[6], s2, s2 ** 1.5, s2 ** 2])
        return np.any(m[:5] > INTERP_RTOL * scale + NOISE_FLOOR * m[8], axis=0)


class Table:
    """The bucket CGFs of one direction: exact values at the accountant's bracketing tilts,
    interpolants on the intervals between them (refined on demand), all cached."""

    def __init__(self, losses: list, name: str, limits: tuple[float, float, float] = (
            math.inf, math.inf, math.inf)):
        self.losses = losses
        self.name = name
        # (wall-clock time by which the query must end, bytes the tables of the query may
        # hold, max_seconds): checked before each evaluation of the bucket CGFs (the time,
        # from the rate of the previous one) and before each piece is fitted (the memory)
        self.end, self.max_bytes, self.max_seconds = limits
        self.tilt_seconds = 0.0  # seconds per tilt of the last evaluation, for all buckets
        self.t_cap = T_MAX if all(isinstance(x, GaussianLoss) for x in losses) else T_MAX_QUAD
        self.grids = tilt_grids(_GRID_LO, _GRID_HI, self.t_cap, _GRID_POINTS)
        self._points: dict[int, np.ndarray] = {}
        self._rows_ok = all(cgf_supported(x) is None for x in losses)
        self._rma: dict[int, np.ndarray] = {}
        self._pieces: dict[tuple[float, float], Piece] = {}
        self.n_pieces = 0

    def stats(self, t: np.ndarray) -> np.ndarray:
        """Exact rows ``K_b, ..., K_b''''`` of every bucket at tilts ``t`` (one-dimensional,
        finite, >= 0): (B, 5, len(t)); by :func:`~tightdp.losses.cgf.cgf_rows` (the same
        numbers as :func:`~tightdp.losses.cgf.cgf`, without its checks of the arguments) where
        every loss is supported. Refused (:class:`~tightdp.BudgetExceeded`) if, at the rate
        of the previous evaluation, it would end past the query's time budget."""
        self.check_time(t.size)
        start = time.time()
        b = len(self.losses)
        rows: list[np.ndarray] = []
        for a in range(0, b, _STATS_ROWS):
            part = self.losses[a:a + _STATS_ROWS]
            before = self.node_bytes(part)
            if self._rows_ok:
                rows.extend(cgf_rows(loss, t, 4) for loss in part)
            else:
                rows.extend(cgf(loss, t, 4) for loss in part)
            # the rest of the buckets at the rate of those done: time, and the quadrature
            # nodes the losses keep (the tables' memory that grows with the tilts visited)
            done, now = a + len(part), time.time()
            if done < b:
                more = (now - start) / done * (b - done)
                if now + more > self.end:
                    raise self._late(more, t.size)
                grown = (self.node_bytes(part) - before) / len(part) * (b - done)
                self._check_bytes(self.held_bytes() + grown, self.n_pieces)
        self.tilt_seconds = (time.time() - start) / max(t.size, 1)
        return np.stack(rows)

    def node_bytes(self, losses: list | None = None) -> float:
        """Bytes of the quadrature nodes :func:`~tightdp.losses.cgf.cgf` keeps in the losses
        (all, or ``losses``): the part of the tables that grows with the tilts visited."""
        n = 0
        for loss in self.losses if losses is None else losses:
            for nodes in loss.tables.get("cgf_nodes", {}).values():
                n += sum(x.nbytes for x in nodes)
        return float(n)

    def held_bytes(self) -> float:
        """Bytes the table holds: exact values at the grid tilts (with their refined-moments
        rows), interpolation pieces, quadrature nodes."""
        pts = sum(x.size for x in self._points.values()) * 8.0 * (1.0 + 1.0 / 5)
        return pts + self.n_pieces * PIECE_BYTES * len(self.losses) + self.node_bytes()

    def _check_bytes(self, need: float, pieces: int) -> None:
        if need > self.max_bytes:
            raise BudgetExceeded(
                f"n_buckets: the saddle-point tables of {len(self.losses)} buckets need about "
                f"{need / 1e9:.3g} GB ({pieces} interpolation pieces and the CGF quadrature "
                f"nodes; over their share of max_memory, {self.max_bytes / 1e9:.3g} GB); use "
                "fewer buckets or raise max_memory")

    def _late(self, more: float, tilts: int) -> BudgetExceeded:
        return BudgetExceeded(
            f"n_buckets: the saddle-point tables of {len(self.losses)} buckets would run "
            f"past max_seconds={self.max_seconds:g} (about {more:.3g} s more for {tilts} "
            "tilts); use fewer buckets or raise max_seconds")

    def check_time(self, tilts: int) -> None:
        """Refuse if evaluating every bucket's CGF at ``tilts`` more tilts would end past the
        query's time budget (estimated at the rate of the previous evaluation)."""
        more = tilts * self.tilt_seconds
        if time.time() + more > self.end:
            raise self._late(more, tilts)

    def check_pieces(self, n_new: int) -> None:
        """Refuse before fitting ``n_new`` more interpolation pieces if they would take the
        tables over their share of the memory budget (:data:`PIECE_BYTES` per bucket and
        piece, beside the exact values at the grid tilts) or past the time budget."""
        self._check_bytes(self.held_bytes() + n_new * PIECE_BYTES * len(self.losses),
                          self.n_pieces + n_new)
        self.check_time(n_new * (DEGREE + 1))

    def points(self, gi: int) -> np.ndarray:
        """Exact bucket rows at the tilts of grid ``gi``: shape (B, 5, len(grid))."""
        if gi not in self._points:
            self._points[gi] = self.stats(self.grids[gi])
        return self._points[gi]

    def rma_rows(self, gi: int) -> np.ndarray:
        """Per tilt ``t`` of grid ``gi`` (rows) and bucket (columns), ``t K_b'(t) - K_b(t)``:
        composed with the counts (a matrix product), plus ``log(1 + t)``, the refined-moments
        optimality function ``t K_i'(t) - K_i(t) + log(1 + t)`` of eq. (44) (Alghamdi et al.
        2023), increasing in ``t``."""
        if gi not in self._rma:
            t, pts = self.grids[gi], self.points(gi)
            self._rma[gi] = np.ascontiguousarray((t * pts[:, 1, :] - pts[:, 0, :]).T)
        return self._rma[gi]

    def unfitted(self, keys: set) -> int:
        """How many of the intervals ``keys`` (``(a, b)`` pairs of floats) have no piece yet."""
        return len(keys - set(self._pieces))

    def _fit(self, a: float, b: float) -> Piece:
        self.check_pieces(1)
        t = a + (b - a) * (lobatto(DEGREE) + 1.0) * 0.5
        self.n_pieces += 1
        return Piece(a, b, self.stats(t))

    def piece(self, a: float, b: float) -> Piece:
        """The interpolants on ``[a, b]`` (a bracketing interval of the tilt grids)."""
        key = (float(a), float(b))
        if key not in self._pieces:
            self._pieces[key] = self._fit(*key)
        return self._pieces[key]

    def child(self, pc: Piece, side: int) -> Piece:
        """The left (0) or right (1) half of ``pc``, fitted when first needed."""
        if pc.children[side] is None:
            m = pc.m
            pc.children[side] = self._fit(pc.a, m) if side == 0 else self._fit(m, pc.b)
        return cast(Piece, pc.children[side])


def grid_cell(tab: Table, t: np.ndarray) -> np.ndarray:
    """Index of each tilt ``t`` in the first bracketing grid of ``tab``; -1 where it is not a
    point of that grid (NaN included)."""
    g0 = tab.grids[0]
    k = np.minimum(np.searchsorted(g0, t), g0.size - 1)
    return np.where(g0[k] == t, k, -1)
