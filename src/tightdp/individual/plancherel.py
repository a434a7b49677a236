"""The discretized bucket laws of one direction in the Fourier domain (:class:`Direction`: their
spectra on an FFT window, envelopes and Fourier weights) and the windows that hold the
examples' compositions (:class:`BucketLaws`, :func:`extents`), for the per-example PLD
accountant (Koskela, Tobaben, Honkela 2023, App. D, Lemma 1); the search for each example's
eps on them is :class:`~tightdp.individual.evaluator.Evaluator`. The steps and why each
number is a bound are in the docstring of :mod:`tightdp.individual.pld_individual`."""

from __future__ import annotations

import math
from typing import Any, cast

import numpy as np
from scipy import fft as sfft
from scipy.special import ndtri

from .._numerics import UNIT_ROUNDOFF
from ..budget import BudgetExceeded
from ..curves.saddle import rma_eps
from ..losses import LocationMixtureLoss
from ..pld.compose import MAX_POINTS
from ..pld.discretize import loss_range
from ..pld.grid import DiscretePLD

__all__ = ["BucketLaws", "Direction", "extents", "row_products", "bucket_loss_range",
           "transforms_bytes", "LOG_WINDOW_TAIL", "TRUNC_FRACTION", "PIECE_ROWS"]

#: log of the mass each pure composition may leave outside the FFT window (what leaves it is
#: bounded per example by a Chernoff bound and added to delta, so this only sets accuracy)
LOG_WINDOW_TAIL = math.log(1e-22)
#: frequencies are dropped while their certified contribution is below this fraction of delta
TRUNC_FRACTION = 1e-5


#: bucket laws transformed per FFT call in :class:`Direction`
_FFT_ROWS = 16

#: examples per piece of :meth:`Direction.prepare_piece`
PIECE_ROWS = 4096

#: column counts that are multiples of this give row-independent BLAS products (see
#: :func:`row_products`)
_COLUMN_TILE = 16


def row_products(counts: np.ndarray, m: np.ndarray) -> np.ndarray:
    """``counts @ m`` (``m`` a matrix or a vector) with every row's values independent of the
    other rows. BLAS may sum a product in an order that depends on the shapes: with the
    OpenBLAS numpy ships, a row comes out the same whatever the number of rows and the
    row's position only for at least two rows and a multiple of 16 columns (matrix-vector
    products differ from one row count to another). So vectors go as a column, the columns
    are padded with zeros to a multiple of 16 and a single row to two; an example's numbers
    then do not depend on which examples share its block or its chunk."""
    vec = m.ndim == 1
    mm = m[:, None] if vec else m
    k = mm.shape[1]
    pad = -k % _COLUMN_TILE
    if pad:
        mm = np.concatenate([mm, np.zeros((mm.shape[0], pad))], axis=1)
    c = counts if counts.shape[0] != 1 else np.concatenate([counts, np.zeros_like(counts)])
    out = (c @ mm)[:counts.shape[0], :k]
    return out[:, 0] if vec else out


#: ``exp(x)`` of a double ``x`` below this is 0 (far under half the smallest subnormal,
#: ``e^-745.13``)
_EXP_ZERO = -750.0
#: a column of envelope products whose every entry is below this proves that the columns
#: after it are below :data:`_EXP_ZERO` too (see :meth:`Direction.prepare_piece`)
_EXP_ZERO_SURE = _EXP_ZERO * (1.0 + 1e-9)
#: envelope blocks whose truncation sums :meth:`Direction._cutoffs_of` computes at a time
_CUT_ROWS = 8
#: envelope columns computed past the last one that was below :data:`_EXP_ZERO_SURE` for
#: every example of the previous piece
_ZERO_SLACK = 2


def _zero_tail(prod: np.ndarray, col_max: np.ndarray | None = None) -> int:
    """How many of the last columns of ``prod`` are below :data:`_EXP_ZERO` in every row
    (their exponentials are zeros); ``col_max``: ``np.max(prod, axis=0)`` if already
    computed (exact: the same array)."""
    if prod.shape[0] == 0 or prod.shape[1] == 0:
        return 0
    low = (np.max(prod, axis=0) if col_max is None else col_max) < _EXP_ZERO
    return int(low.size) if low.all() else int(np.argmin(low[::-1]))


def row_min(v: np.ndarray) -> np.ndarray:
    """``np.min(v, axis=1)`` for a few columns, one column at a time (a vectorized pass per
    column instead of a short reduction per row; the minimum is exact, in any order)."""
    out = v[:, 0].copy()
    for j in range(1, v.shape[1]):
        np.minimum(out, v[:, j], out=out)
    return out


def row_max(v: np.ndarray) -> np.ndarray:
    """``np.max(v, axis=1)`` for a few columns (see :func:`row_min`)."""
    out = v[:, 0].copy()
    for j in range(1, v.shape[1]):
        np.maximum(out, v[:, j], out=out)
    return out


def bucket_loss_range(loss, log_tail: float) -> tuple[float, float]:
    """Loss interval outside of which each tail has P-mass <= e^log_tail.

    For a Gaussian location mixture with non-decreasing loss ``L`` (every Poisson subsampled
    Gaussian pair here) the P-mass of ``X > max(a) + s z`` and of ``X < min(a) - s z`` is at
    most ``Phi(-z)``, so ``[L(min(a) - s z), L(max(a) + s z)]`` with ``Phi(-z) = e^log_tail``
    qualifies (two loss evaluations instead of a search). Otherwise
    :func:`tightdp.pld.discretize.loss_range`. Connect-the-dots dominates on any range; the
    range only sets its accuracy."""
    if isinstance(loss, LocationMixtureLoss) and loss.kernel.name == "gaussian":
        z = -float(ndtri(math.exp(max(log_tail, -700.0))))
        x = np.array([loss.a.min() - loss.s * z, loss.a.max() + loss.s * z])
        lo, hi = (float(y) for y in loss.loss(x))
        lo = max(lo, loss.support[0])
        hi = min(hi, loss.support[1])
        if math.isfinite(lo) and math.isfinite(hi) and hi > lo:
            return lo, hi
    return loss_range(loss, log_tail)


class BucketLaws:
    """Chernoff data of the discretized bucket laws of one direction (what placing an FFT
    window for a set of examples needs; small, shipped to workers): the log moment generating
    functions at a few tilts, the shifts and the supports."""

    def __init__(self, plds: list[DiscretePLD]):
        ts = np.geomspace(2e-2, 40.0, 12)
        self.t_pos, self.t_neg = ts, -ts
        both = np.concatenate([ts, -ts])
        logm = np.stack([p.log_mgf(both) for p in plds])  # (B, 2 nt)
        self.logm_pos, self.logm_neg = logm[:, :ts.size], logm[:, ts.size:]
        self.shift = np.array([p.shift for p in plds])
        self.ymin = np.array([float(p.ys[0]) for p in plds])  # support of each bucket law
        self.ymax = np.array([float(p.ys[-1]) for p in plds])
        # what the per-example products need, as one matrix (one BLAS product per use)
        self.table = np.column_stack([self.logm_pos, self.logm_neg, self.shift, self.ymax,
                                      self.ymin])
        # per law and unit of count, a bound on the rounding of its log-MGF at the tilts
        # ``t_pos``: a few ulps of the exponents ``log p + t y`` and of their sum, taken as
        # ``1e-11 (1 + t max|y| + max|log p|)`` (as the PLD accountant's pilot bound takes
        # it), and on the rounding of a product of the counts with the log-MGFs of B laws,
        # at most ``gamma_B`` times its terms, ``|K_j(t)| <= t max|y| + max|log p|`` each
        # (the factor ``2 B u`` is below 1e-11 for fewer than 45,000 laws)
        y_abs = np.maximum(np.abs(self.ymin), np.abs(self.ymax))
        # (masses are at most 1: the largest |log p| is that of the smallest positive one)
        lp_abs = np.array([-math.log(float(np.min(p.probs, where=p.probs > 0, initial=1.0)))
                           for p in plds])
        factor = max(1e-11, 2.0 * len(plds) * UNIT_ROUNDOFF)
        self.logm_margin = factor * (1.0 + np.outer(y_abs, ts) + lp_abs[:, None])

    def extent(self, counts: np.ndarray, log_tail: float, d: float) -> tuple[int, int]:
        """Grid-index window ``[i_lo, i_hi]`` holding, for every example (rows of
        ``counts``), all of its composition but at most ``e^log_tail`` on each side (Chernoff:
        ``P(S >= a) <= e^log_tail`` as soon as ``a >= (K(t) - log_tail) / t`` for one ``t > 0``,
        and the mirror for ``t < 0``), clipped to the composed support; the union over the
        examples. Only accuracy depends on it: what lies outside is bounded per example and
        charged (:meth:`Direction.extras_split`). Exact (min/max of per-row values), so the
        union over blocks of examples is the window of all of them."""
        return _window(*self._reach(row_products(counts, self.table), log_tail, d))

    def _reach(self, prod: np.ndarray, log_tail: float, d: float) -> tuple[float, float]:
        """The smallest and largest window coordinate (in grid steps, before rounding out)
        over the examples, from their product with :attr:`table` (see :meth:`extent`)."""
        ts = self.t_pos
        nt = ts.size
        a_hi = row_min((prod[:, :nt] - log_tail) / ts)
        a_lo = row_max((prod[:, nt:2 * nt] - log_tail) / -ts)
        s_ex, c_max, c_min = prod[:, 2 * nt], prod[:, 2 * nt + 1], prod[:, 2 * nt + 2]
        a_hi = np.maximum(np.minimum(a_hi, c_max), d)
        a_lo = np.minimum(np.maximum(a_lo, c_min), 0.0)
        return float(np.min((a_lo - s_ex) / d)), float(np.max((a_hi - s_ex) / d))


def _window(lo: float, hi: float) -> tuple[int, int]:
    """Grid-index window from the reach of :meth:`BucketLaws._reach` (one point of margin
    on each side)."""
    return int(math.floor(lo)) - 1, int(math.ceil(hi)) + 1


def extents(laws: list[BucketLaws], counts: np.ndarray, log_tail: float,
            d: float) -> list[tuple[int, int]]:
    """``[law.extent(counts, log_tail, d) for law in laws]``, from one product of the counts
    with the tables of all ``laws`` per piece of :data:`PIECE_ROWS` examples (each column's
    values are those of the separate products, and the window is the min / max of per-row
    values, so it is the same)."""
    table = np.column_stack([law.table for law in laws])
    widths = np.cumsum([0] + [law.table.shape[1] for law in laws])
    lo = [math.inf] * len(laws)
    hi = [-math.inf] * len(laws)
    for a in range(0, counts.shape[0], PIECE_ROWS):
        prod = row_products(counts[a:a + PIECE_ROWS], table)
        for i, law in enumerate(laws):
            r_lo, r_hi = law._reach(prod[:, widths[i]:widths[i + 1]], log_tail, d)
            lo[i], hi[i] = min(lo[i], r_lo), max(hi[i], r_hi)
    return [_window(a, b) for a, b in zip(lo, hi, strict=True)]


def _wrap_onto(out: np.ndarray, offset: int, probs: np.ndarray) -> None:
    """``out[i] = sum of probs[j] over (offset + j) mod K = i`` (``K = out.size``): the law
    wrapped onto the window, as ``np.bincount((offset + arange) % K, probs, minlength=K)``
    gives it. When the law has at most ``K`` atoms each window point gets at most one, so
    that is the atom plus 0.0 (what the bincount sums, from 0.0): two slices, no index
    array; otherwise the bincount."""
    K, n = out.size, probs.size
    if n > K:
        out[:] = np.bincount((offset + np.arange(n)) % K, weights=probs, minlength=K)
        return
    out[:] = 0.0
    a = offset % K
    first = min(n, K - a)
    np.add(probs[:first], 0.0, out=out[a:a + first])
    if first < n:
        np.add(probs[first:], 0.0, out=out[:n - first])


def transforms_bytes(n_buckets: int, n_points: int) -> float:
    """Bytes the transforms of :class:`Direction` hold for ``n_buckets`` laws on a window of
    ``n_points`` FFT points (five ``(B, K/2)`` float arrays and the FFT buffers of
    ``_FFT_ROWS`` laws), checked before they are allocated."""
    B, K = n_buckets, n_points
    return 8.0 * (5 * B * (K // 2 + 1) + 3 * min(B, _FFT_ROWS) * K)


class Direction:
    """Precomputed transforms of the bucket PLDs for one direction of the pair, on the FFT
    window ``window = (i_lo, i_hi)`` of grid indices (from :meth:`BucketLaws.extent`)."""

    spec: np.ndarray | None  # the bucket spectra; None in a :meth:`trimmed` copy

    def __init__(self, plds: list[DiscretePLD], laws: BucketLaws, d: float,
                 window: tuple[int, int], fft_workers: int | None = None,
                 max_bytes: float = math.inf):
        """The stages in order: the window's size checked against the budget, the spectra
        of the laws, the Chernoff tables, the envelopes for the truncation bound, the columns
        of the per-piece product, and the closed-form Fourier weights."""
        self.d = d
        self.t_pos, self.t_neg = laws.t_pos, laws.t_neg
        self.logm_pos, self.logm_neg = laws.logm_pos, laws.logm_neg
        self.shift, self.ymin, self.ymax = laws.shift, laws.ymin, laws.ymax
        self.table = laws.table
        self.K = self._check_memory(len(plds), window, max_bytes)
        self.i_lo = window[0]
        self.kh = self.K // 2 + 1  # frequencies of the half spectrum
        self._spectra(plds, fft_workers)
        self._tables(laws)
        self._envelopes()
        self._pad_columns()
        self._weights()

    @staticmethod
    def _check_memory(n_laws: int, window: tuple[int, int], max_bytes: float) -> int:
        """The FFT length of ``window``, refused (:class:`~tightdp.BudgetExceeded`) before
        the transforms of ``n_laws`` laws on it would exceed ``max_bytes``."""
        i_lo, i_hi = window
        n = i_hi - i_lo + 1
        if n > MAX_POINTS:
            raise BudgetExceeded(f"rtol: the window needs {n} grid points (> {MAX_POINTS}); "
                                 "use a larger rtol or grid_step")
        K = sfft.next_fast_len(n, real=True)
        need = transforms_bytes(n_laws, K)
        if need > max_bytes:
            raise BudgetExceeded(
                f"n_buckets: {n_laws} buckets x a window of {K} points need about "
                f"{need / 1e9:.3g} GB (over the transforms' share of max_memory, "
                f"{max_bytes / 1e9:.3g} GB); use fewer buckets, a larger rtol or grid_step, "
                "or raise max_memory")
        return K

    def _spectra(self, plds: list[DiscretePLD], fft_workers: int | None) -> None:
        """The spectra of the bucket laws wrapped onto the window, their finite and infinite
        masses. Log-modulus and phase are taken on demand for the first frequencies only
        (:meth:`spectra`), the per-example cut-offs keeping few of them."""
        B, K, kh = len(plds), self.K, self.kh
        self.spec = np.empty((B, kh), dtype=complex)
        self._log_abs = self._phase = np.empty((B, 0))
        self.mass = np.empty(B)
        self.inf = np.empty(B)
        # the laws wrapped onto the window, transformed _FFT_ROWS at a time (one call over a
        # few rows runs several transforms side by side)
        buf = np.empty((min(B, _FFT_ROWS), K))
        for j0 in range(0, B, _FFT_ROWS):
            part = plds[j0:j0 + _FFT_ROWS]
            for i, p in enumerate(part):
                _wrap_onto(buf[i], p.offset, p.probs)
                self.mass[j0 + i] = float(p.probs.sum())
                self.inf[j0 + i] = float(p.inf_mass)
            self.spec[j0:j0 + len(part)] = sfft.rfft(buf[:len(part)], axis=-1,
                                                     workers=fft_workers)

    def _tables(self, laws: BucketLaws) -> None:
        """The Chernoff table with the log of each bucket's finite mass (composed mass at
        +inf), and what :meth:`rma_eps` needs: the log-MGFs at the tilts raised by their
        rounding margins, and the log of the finite mass."""
        self.table_inf = np.column_stack([self.table,
                                          np.log1p(-np.minimum(self.inf, 1.0 - 1e-16))])
        self.rma_table = np.column_stack([self.logm_pos + laws.logm_margin,
                                          self.table_inf[:, -1]])

    def _envelopes(self) -> None:
        """The window rotation, the frequency weights, and the envelope blocks of the
        truncation bound: ``max_{k' >= starts[b]} |F_j(k')|`` and the weights of the
        blocks."""
        K, kh = self.K, self.kh
        # window rotation: window position m holds absolute grid index i_lo + m
        k = np.arange(kh)
        self.win_phase = 2.0 * np.pi * ((k * (self.i_lo % K)) % K) / K
        # frequency weights (rfft half-spectrum: conjugate pairs counted twice)
        om = np.full(kh, 2.0)
        om[0] = 1.0
        if K % 2 == 0:
            om[-1] = 1.0
        self.omega = om
        with np.errstate(divide="ignore"):
            tw = om / (2.0 * K * np.sin(np.pi * k / K))
        tw[0] = np.inf
        starts = np.unique(np.concatenate([np.arange(1, min(kh, 33)),
                                           np.round(np.geomspace(32, kh, 64)).astype(int)]))
        starts = starts[starts < kh]
        self.starts = starts
        # maxima per block, then from the right
        block_max = np.maximum.reduceat(np.abs(cast(np.ndarray, self.spec)), starts, axis=1)
        env = np.maximum.accumulate(block_max[:, ::-1], axis=1)[:, ::-1]
        self.log_env = np.log(np.maximum(env, 1e-300))  # (B, nb)
        ends = np.append(starts[1:], kh)
        self.block_w = np.array([tw[s:e].sum() for s, e in zip(starts, ends, strict=True)])

    def _pad_columns(self) -> None:
        """Everything :meth:`prepare_piece` needs from the counts, as one matrix: one BLAS
        product per piece of examples (each column's values are those of the separate
        products: BLAS sums every entry over the buckets alike wherever its column lies, see
        docs/scaling.md; another BLAS could change last bits, but alike for every block, as
        row_products keeps rows independent). The frequency cut-offs need the envelope blocks
        from the last one down to where no example is within tol any more, rarely the first
        few (single frequencies): those (``env_split``, the product's columns a multiple of
        16) come in a second product, only for the pieces that reach them."""
        ni, nb = self.table_inf.shape[1], self.log_env.shape[1]
        split = (ni + nb) % _COLUMN_TILE
        self.env_split = min(nb, split + (_COLUMN_TILE if split < 8 else 0))
        self.prep_table = np.column_stack([self.table_inf, self.log_env[:, self.env_split:]])

    def _weights(self) -> None:
        """The closed-form Fourier weights: ``1 - z`` and ``1 - e^{-d} z`` (``z = e^{-2 pi i
        k / K}``) without cancellation at small ``k`` (``1 - cos t = 2 sin(t/2)^2``), their
        conjugate reciprocals ``g1, g2`` and ``gh``; zero at ``k = 0``."""
        K, d = self.K, self.d
        t = 2.0 * np.pi * np.arange(self.kh) / K
        vers = 2.0 * np.sin(t / 2.0) ** 2
        one_z = vers + 1j * np.sin(t)
        ed = math.exp(-d)
        one_rz = (-math.expm1(-d) + ed * vers) + 1j * ed * np.sin(t)
        with np.errstate(divide="ignore", invalid="ignore"):
            self.g1 = np.conj(1.0 / one_z)
            self.g2 = np.conj(1.0 / one_rz)
            self.gh = np.conj(-math.expm1(-d) / (one_z * one_rz))
        self.g1[0] = 0.0
        self.g2[0] = 0.0
        self.gh[0] = 0.0

    @property
    def held_frequencies(self) -> int:
        """How many frequencies of log-modulus and phase :meth:`spectra` holds already (all a
        trimmed direction can answer)."""
        return self._log_abs.shape[1]

    # --- per-example quantities --------------------------------------------------------------
    def extras(self, counts: np.ndarray) -> np.ndarray:
        """inf mass + Chernoff bounds on the mass above and below the window."""
        inf_mass, outside = self.extras_split(counts)
        return inf_mass + outside

    def extras_split(self, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The composed mass at ``+inf`` and a Chernoff bound on the finite mass outside
        the window (what the circular convolution may fold into it), per example."""
        return self._extras_of(row_products(counts, self.table_inf))

    def rma_eps(self, counts: np.ndarray, delta: float) -> np.ndarray:
        """Per example (rows of ``counts``) a certified upper bound on the eps at ``delta`` of
        its composition in this direction, from the Chernoff table alone (no transform): the
        refined-moments bound (Alghamdi et al., "The Saddle-Point Accountant", 2022, eqs.
        (38), (42), (43); :func:`~tightdp.curves.saddle.rma_eps`), the smallest over the
        tilts :attr:`t_pos`. An upper bound on the true eps for the transform of the
        dominating (connect-the-dots) laws only, the one it is asked of; on the lowered
        chords it would bound their own, smaller, curve.

        With ``S`` the composition of the bucket laws (the connect-the-dots laws dominate the
        pair, and so does their composition), ``delta(eps) <= P(S = inf) + M_t e^{K(t) - t
        eps}`` for every ``t > 0`` (``(1 - e^{-x})_+ <= M_t e^{t x}``), with ``K(t) = sum_j
        n_j log E[e^{t Y_j}; Y_j finite]`` computed exactly from the discrete laws. Each
        law's log-MGF is raised by its rounding margin (:attr:`BucketLaws.logm_margin`, per
        count; the product's own rounding, ``gamma_B`` of the terms, and that of the last
        operations are far below it), the composed mass at ``+inf`` by a relative 1e-9. An
        example whose mass at ``+inf`` leaves no room below ``delta`` gets ``inf``."""
        nt = self.t_pos.size
        prod = row_products(counts, self.rma_table)
        room = delta + np.expm1(prod[:, nt]) * (1.0 + 1e-9)  # delta - P(S = inf)
        ok = room > 0
        log_room = np.log(np.where(ok, room, 1.0))
        eps = row_min(rma_eps(prod[:, :nt], self.t_pos, log_room[:, None]))
        return np.where(ok, np.maximum(eps, 0.0), np.inf)

    def prepare_piece(self, piece: np.ndarray, tol: float, ncols: int | None = None
                      ) -> tuple[tuple[np.ndarray, ...], int]:
        """Per example of one piece (rows of ``piece``): ``(inf_mass, outside, shift, kk,
        tau)``, the values of :meth:`extras_split`, of the composed grid shift ``counts @
        shift`` and of :meth:`cutoffs`, from one product with the first ``ncols`` columns of
        :attr:`prep_table` (None: all; see :meth:`_prep_product`); and how many columns to
        compute for the next piece. The caller passes the pieces of :data:`PIECE_ROWS`
        examples in order with the count returned
        (:func:`~tightdp.individual.pld_blocks._prepare_pieces`: each piece gathered from
        the block while it stays in cache, for both transforms of a direction; every value is
        computed per row, so it does not depend on the pieces)."""
        nt = self.t_pos.size
        ni = self.table_inf.shape[1]
        width = self.prep_table.shape[1]
        prod, ncols, col_max = self._prep_product(piece, width if ncols is None else ncols)
        inf_mass, outside = self._extras_of(prod[:, :ni])
        shift = prod[:, 2 * nt].copy()
        segs = ((self.env_split, prod[:, ni:], width - prod.shape[1], col_max),
                (0, lambda piece=piece: row_products(piece, self.log_env[:, :self.env_split]),
                 0, None))
        kk, tau = self._cutoffs_of(segs, tol)
        return (inf_mass, outside, shift, kk, tau), ncols

    def _prep_product(self, piece: np.ndarray, ncols: int
                      ) -> tuple[np.ndarray, int, np.ndarray | None]:
        """The product of ``piece`` with the first ``ncols`` columns of :attr:`prep_table`,
        or with all of them unless its last column shows that the rest are below exp's
        underflow for every example; how many columns to compute for the next piece; and
        the maxima over the examples of its envelope columns (which :meth:`_cutoffs_of`
        reads too; None without rows or envelope columns).

        The envelope columns run over the blocks of frequencies upwards, and each bucket's
        envelope is non-increasing from one block to the next (a maximum over the
        frequencies from the block on), so with counts ``n_j >= 0`` the exact product
        ``x_b = sum_j n_j log env_j(b)`` is non-increasing in ``b``. The computed value is
        within ``gamma_B sum_j n_j |log env_j(b)|`` of it (``gamma_B ~ B u``, whatever the
        order of the sums; the terms are <= 0 but for rounding-size positive ones), so a
        column computed below ``_EXP_ZERO (1 + 1e-9)`` for every example proves that every
        later column would be computed below ``_EXP_ZERO``: its exponential is 0, it adds
        nothing to the truncation sums (:meth:`_cutoffs_of` treats those blocks as zero
        blocks), and it need not be computed. The columns computed are those of the whole
        product (as for the split at :attr:`env_split`)."""
        width = self.prep_table.shape[1]
        prod = row_products(piece, self.prep_table[:, :ncols])
        if ncols < width and not np.all(prod[:, -1] < _EXP_ZERO_SURE):
            rest = row_products(piece, self.prep_table[:, ncols:])
            prod = np.concatenate([prod, rest], axis=1)
        ni = self.table_inf.shape[1]
        env = prod[:, ni:]
        if env.shape[0] == 0 or env.shape[1] == 0:
            return prod, width, None
        col_max = np.max(env, axis=0)
        sure = col_max < _EXP_ZERO_SURE
        # the first column of the run of sure ones at the end (none: past the last column)
        run = env.shape[1] if sure.all() else int(np.argmin(sure[::-1]))
        first = env.shape[1] - run
        need = ni + first + 1 + _ZERO_SLACK
        # (row_products pads the columns to a multiple of _COLUMN_TILE: those come free)
        return prod, min(width, need + (-need % _COLUMN_TILE)), col_max

    def _extras_of(self, prod: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`extras_split` from the product of the counts with :attr:`table_inf`."""
        nt = self.t_pos.size
        inf_mass = -np.expm1(prod[:, -1])
        s = prod[:, 2 * nt:2 * nt + 1]
        top = s + (self.i_lo + self.K) * self.d  # smallest loss above the window
        bot = s + (self.i_lo - 1) * self.d  # largest loss below the window
        up = row_min(prod[:, :nt] - self.t_pos * top)
        lo = row_min(prod[:, nt:2 * nt] - self.t_neg * bot)
        # no mass at all outside the window when the composed support fits in it
        up = np.where(prod[:, 2 * nt + 1] < top[:, 0], -np.inf, up)
        lo = np.where(prod[:, 2 * nt + 2] > bot[:, 0], -np.inf, lo)
        return inf_mass, np.exp(np.minimum(up, 0.0)) + np.exp(np.minimum(lo, 0.0))

    def cutoffs(self, counts: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray]:
        """Per example: number of frequencies kept (0..kk-1) and the certified bound tau on
        ``sum_{dropped k} omega_k |P_k| / (2 K sin(pi k / K))``."""
        # contributions as (block, example) rows: the bound on the blocks b' >= b is summed
        # from the last block down, one row at a time (the same additions in the same order
        # as a cumulative sum over the reversed blocks); each example keeps the first block
        # from which it is <= tol, and the sums only grow, so the loop stops at the first
        # block where no example is within tol
        return self._cutoffs_of([(0, row_products(counts, self.log_env), 0, None)], tol)

    def _cutoffs_of(self, segs, tol: float) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`cutoffs` from the products of the counts with the envelope blocks:
        ``segs`` lists ``(b0, prod, nz, col_max)`` from the last blocks down, ``prod`` the
        product with the blocks ``b0, b0 + 1, ...`` (or a callable computing it when
        reached, i.e. when some example is still within ``tol`` after the blocks above it),
        then ``nz`` blocks not computed whose exponentials are known to be 0 for every
        example, up to the previous segment's ``b0``; ``col_max`` the maxima of the columns
        of ``prod`` over the examples, if already computed (else None).

        Per example the bound on the blocks ``b' >= b`` is summed from the last block down
        (a running sum along the rows: the same additions, in the same order, as one block
        at a time); the sums only grow, so each example is within ``tol`` on the blocks from
        the last one down to some block ``b_i`` and keeps ``starts[b_i]`` frequencies and
        that sum as its bound ``tau``."""
        # set at the first segment
        n: Any = None
        kk: Any = None
        tau: Any = None
        tail: Any = None
        for b0, prod, nz, col_max in segs:
            if callable(prod):
                prod = prod()
            if kk is None:
                n = prod.shape[0]
                kk = np.full(n, self.kh, dtype=self.starts.dtype)
                tau = np.zeros(n)
                tail = np.zeros(n)
            nbs = prod.shape[1] + nz
            # the last blocks, where every example's contribution is exp(x) = 0 (x below
            # the underflow; the ``nz`` blocks after the columns of ``prod`` are such, not
            # computed): the sums do not change there, so each example within tol on
            # entering them keeps the lowest of them and its sum so far, as block by block
            z = nz + _zero_tail(prod, col_max)
            if z:
                ok = tail <= tol
                kk[ok] = self.starts[b0 + nbs - z]
                tau[ok] = tail[ok]
                if not ok.any():
                    break
                nbs -= z
                prod = prod[:, :nbs]
            # (block, example) contributions, the blocks from the last down (row j + 1 holds
            # block b0 + nbs - 1 - j) below the running sum's start (row 0)
            # computed _CUT_ROWS blocks at a time, down to where every example's sum is
            # above tol (the sums only grow: the blocks below change no cut-off and no tau)
            c = np.empty((nbs + 1, n))
            c[0] = tail
            src = prod.T[::-1]
            w = self.block_w[b0:b0 + nbs][::-1, None]
            done = nbs
            for r0 in range(0, nbs, _CUT_ROWS):
                r1 = min(nbs, r0 + _CUT_ROWS)
                part = c[1 + r0:1 + r1]
                np.minimum(src[r0:r1], 0.0, out=part)
                np.exp(part, out=part)
                part *= w[r0:r1]
                for i in range(1 + r0, 1 + r1):
                    np.add(c[i - 1], c[i], out=c[i])
                if r1 < nbs and np.all(c[r1] > tol):
                    done = r1
                    break
            # how many of the segment's blocks keep each example within tol (a prefix: the
            # sums only grow; none below ``done``)
            j = np.count_nonzero(c[1:1 + done] <= tol, axis=0)
            got = np.nonzero(j)[0]
            kk[got] = self.starts[b0 + nbs - j[got]]
            tau[got] = c[j[got], got]
            if not np.any(j == nbs):
                break
            tail = c[nbs]
        return kk, tau

    def trimmed(self, kk: int) -> Direction:
        """A copy holding what evaluating examples that keep at most ``kk`` frequencies
        needs (the tables of :meth:`prepare_piece`, :meth:`spectra` up to ``kk``, the frequency
        weights up to ``kk``), without the spectra of the whole window: what is shipped to
        the workers (``kk = 0``: for :meth:`prepare_piece` only). The values are those of this
        direction (elementwise, whatever the number of frequencies taken)."""
        kk = int(min(kk, self.kh))
        out = object.__new__(Direction)
        out.__dict__.update(self.__dict__)
        out.spec = None
        if kk:
            out._log_abs, out._phase = (np.ascontiguousarray(a) for a in self.spectra(kk))
        else:
            out._log_abs = out._phase = np.empty((self.mass.size, 0))
        for name in ("win_phase", "omega", "g1", "g2", "gh"):
            setattr(out, name, getattr(self, name)[:kk].copy())
        return out

    def spectra(self, kk: int) -> tuple[np.ndarray, np.ndarray]:
        """``log |F_j(k)|`` and ``arg F_j(k)`` of the bucket laws for ``k < kk``."""
        if self._log_abs.shape[1] < kk:
            if self.spec is None:
                raise ValueError(f"this trimmed direction holds {self._log_abs.shape[1]} "
                                 f"frequencies, {kk} asked")
            n = min(self.spec.shape[1], max(kk, 2 * self._log_abs.shape[1]))
            f = self.spec[:, :n]
            self._log_abs = np.log(np.maximum(np.abs(f), 1e-300))
            self._phase = np.angle(f)
        return self._log_abs[:, :kk], self._phase[:, :kk]

    def transform(self, counts: np.ndarray, kk: int) -> np.ndarray:
        """``P_k`` of the composed law in window coordinates for ``k < kk``."""
        log_abs, phase = self.spectra(kk)
        lr = row_products(counts, log_abs)
        li = row_products(counts, phase) + self.win_phase[:kk]
        return np.exp(lr) * (np.cos(li) + 1j * np.sin(li))
