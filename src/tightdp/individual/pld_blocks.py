"""The per-block passes of :class:`~tightdp.individual.IndividualPLDAccountant` (Koskela,
Tobaben, Honkela, "Individual Privacy Accounting with Gaussian Differential Privacy", 2023,
App. D): module-level functions ``fn(counts_block, state, *shared) -> (state, out)`` run by an
executor of :mod:`tightdp.individual.blocks` (in process) or
:mod:`tightdp.individual.distributed` (Dask). What they compute and why each number is a bound
is in the docstring of :mod:`tightdp.individual.pld_individual`; the driver there discretizes
the buckets and builds the transforms (once per grid step and direction) and ships them.

A block's state holds, for its examples with at least one step of loss (``act``): the grid
level, the certified bracket so far (``up``, ``lo``), and which examples the current round
still has to evaluate (``todo``). Every per-example number depends only on that example's
counts and on what the driver shipped (each example keeps its own frequency cut-off and
rounding allowance, and the Horner / direct-sum choice is made per example), never on which
examples share its block or its chunk: in process or on a cluster, the same numbers.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from .._numerics import MACHINE_EPSILON
from ..pld.discretize import certified_pairs
from ..results import check_bracket
from .blocks import ResultStore, as_slice, block_summary
from .evaluator import HORNER_MAX, Evaluator
from .plancherel import (
    PIECE_ROWS,
    TRUNC_FRACTION,
    Direction,
    bucket_loss_range,
    row_products,
)
from .plancherel import extents as window_extents

__all__ = ["discretize", "discretize_steps", "used_buckets", "init_state", "groups", "reach",
           "extents",
           "prepare", "evaluate", "give_up", "check", "finish", "bucket_counts", "count_pieces",
           "settled", "MAX_LEVEL", "LEVEL_OFFSET"]

#: grid-step levels: an example at level ``l`` is discretized with step ``d0 / 2^l``
MAX_LEVEL = 12
#: levels saved on every example (the bracket check refines those that need it)
LEVEL_OFFSET = 0.5


def bucket_counts(block: np.ndarray, used: np.ndarray,
                  rows: np.ndarray | None = None, transposed: bool = False) -> np.ndarray:
    """Counts of the buckets ``used`` (grid indices, column ``j + 1`` of the block) of the
    examples ``rows`` (all by default), as floats; ``transposed``: buckets x examples,
    C-contiguous, copied 1024 examples at a time (a transposing copy that stays in cache,
    cheaper than one copy of the whole block)."""
    b = np.asarray(block)
    cols: np.ndarray | slice
    cols = used + 1
    if not transposed:
        # one gather of the rows and columns asked (a slice when the columns are
        # consecutive), then the conversion: cheaper than a copy of the rows first
        cols = as_slice(cols)
        if isinstance(cols, slice):
            return (b[:, cols] if rows is None else b[rows, cols]).astype(float)
        return (b[:, cols] if rows is None else b[np.ix_(rows, cols)]).astype(float)
    if rows is not None:
        b = b[rows]
    out = np.empty((used.size, b.shape[0]))
    for k in range(0, b.shape[0], 1024):
        out[:, k:k + 1024] = b[k:k + 1024, used + 1].T
    return out


def count_pieces(block, used: np.ndarray, ex: np.ndarray
                 ) -> Iterator[tuple[int, np.ndarray]]:
    """The counts of the buckets ``used`` of the examples ``ex`` (rows of the block), one
    piece of :data:`PIECE_ROWS` examples at a time: ``(a, counts of ex[a:a + PIECE_ROWS])``.
    Each piece is gathered while the next steps can use it from cache (a gather of all the
    examples is a fresh allocation of 800 bytes per example, page-faulted in, and products
    reading it from memory instead of cache); every value the
    passes compute from it is per row, so it does not depend on the pieces."""
    for a in range(0, ex.size, PIECE_ROWS):
        yield a, bucket_counts(block, used, ex[a:a + PIECE_ROWS])


def discretize(loss, d: float, log_tail: float) -> tuple:
    """One bucket's privacy loss discretized on the grid step ``d``: the connect-the-dots
    (dominating) and lowered-chords (dominated) pair of
    :func:`~tightdp.pld.discretize.certified_pair` (Doroshenko, Ghazi, Kamath, Kumar,
    Manurangsi, "Connect the Dots: Tighter Discrete Approximations of Privacy Loss
    Distributions", 2022), on the loss range outside of which each tail holds at most
    ``e^log_tail`` (:func:`~tightdp.individual.plancherel.bucket_loss_range`). The driver
    maps :func:`discretize_steps` over the buckets (on the cluster when there is one)."""
    return discretize_steps((loss, [d]), log_tail)[0]


def discretize_steps(job: tuple, log_tail: float) -> list[tuple]:
    """:func:`discretize` of one bucket's loss at several grid steps, ``job = (loss,
    steps)``: the pairs in the order of ``steps``, the same as one :func:`discretize` per
    step (:func:`~tightdp.pld.discretize.certified_pairs`: the loss's CDFs are evaluated
    once, on the finest grid, which holds the points of the others: the grid levels are
    powers of two apart). One task per bucket for all the levels that use it."""
    loss, steps = job
    lo, hi = bucket_loss_range(loss, log_tail)
    return [(up.trimmed(), low.trimmed()) for up, low in certified_pairs(loss, steps, lo, hi)]


def used_buckets(block, state, n_buckets: int, steps: bool = True):
    """Which buckets any example of the block uses, and (with ``steps``; else 0) its largest
    number of lossy steps."""
    c = np.asarray(block)
    if c.ndim != 2 or c.shape[1] != n_buckets + 1:
        raise ValueError(f"counts must have shape (n_examples, {n_buckets + 1}) (column 0: "
                         f"steps with no loss, column j: bucket j/{n_buckets}), got a block "
                         f"of shape {c.shape}")
    if c.size and np.issubdtype(c.dtype, np.signedinteger) and c.min() < 0:
        raise ValueError("counts must be >= 0 (steps per bucket)")
    if not np.issubdtype(c.dtype, np.integer):
        raise ValueError(f"counts must be integers (steps per bucket), got dtype {c.dtype}")
    lossy = c[:, 1:]
    t_max = int(lossy.sum(axis=1, dtype=np.int64).max()) if steps and c.shape[0] else 0
    # a column is used iff the OR of its (integer) counts is not 0: cheaper than any()
    used = (np.bitwise_or.reduce(lossy, axis=0) != 0 if c.shape[0]
            else np.zeros(n_buckets, dtype=bool))
    return state, (used, t_max)


def init_state(block, state, used: np.ndarray, x: np.ndarray, log_w: float):
    """Examples with some loss and their first grid level: one level per halving of the
    CLT scale of their composition below the worst case's, ``mu_i / mu_worst`` with
    ``mu^2 = q^2 sum_t (e^{c_t^2 / sigma^2} - 1)`` (Dong, Roth, Su, "Gaussian differential
    privacy", 2022, Thm. 5.2 / Cor. 5.4; ``x = e^{c_j^2/sigma^2} - 1`` per bucket, ``log_w``
    the worst case's ``log(mu^2 / q^2)``). Only chooses grid steps."""
    b = np.asarray(block)
    cols = as_slice(used + 1)
    if isinstance(cols, slice):
        # consecutive columns: a view, no gather (counts are >= 0: nonzero is positive)
        act = np.nonzero(b[:, cols].any(axis=1))[0]
    else:
        act = np.nonzero(np.any(b[:, cols] > 0, axis=1))[0]
    # row_products per piece of examples (the values are per row: the same)
    prod = np.empty(act.size)
    for a, c in count_pieces(b, used, act):
        prod[a:a + c.shape[0]] = row_products(c, x)
    with np.errstate(divide="ignore"):
        log_i = np.log(np.maximum(prod, 1e-300))
    rel = np.clip(np.exp(0.5 * (log_i - log_w)), 1e-300, 1.0)
    level = np.clip(np.floor(-np.log2(rel) - LEVEL_OFFSET), 0, MAX_LEVEL).astype(np.int64)
    n = act.size
    st = dict(state, act=act, level=level, up=np.full(n, np.inf), lo=np.zeros(n),
              todo=np.ones(n, dtype=bool), capped=np.zeros(n, dtype=bool),
              wide=np.ones(n, dtype=bool), cur_up=np.zeros(n), cur_lo=np.zeros(n))
    return st, n


def groups(block, state, used: np.ndarray):
    """Per grid level still to evaluate this round: the buckets its examples use and how
    many there are."""
    lv_todo = state["level"][state["todo"]]
    if lv_todo.size == 0:
        return state, {}
    b = np.asarray(block)
    out = {}
    for lv in np.unique(lv_todo):
        rows = state["act"][state["todo"] & (state["level"] == lv)]
        # (the largest count of each column over the rows: one pass down the rows)
        out[int(lv)] = (b[rows].max(axis=0)[used + 1] > 0, int(rows.size))
    return state, out


def reach(block, state, used: np.ndarray, table: np.ndarray, log_tail: float):
    """Per grid level still to evaluate: the largest over its examples of an estimate, made
    before any bucket is discretized, of how far above 0 the FFT window of their remove
    direction reaches (in loss units). ``table`` holds per bucket of ``used`` the mean and
    the variance of its privacy loss under P and the top of its loss range; an example's
    composition has mean ``m`` and variance ``V`` (sums over its steps) and reaches
    ``min(m + sqrt(-2 log_tail V), top)``: the Chernoff reach ``min_t (K(t) - log_tail) /
    t`` of :meth:`BucketLaws.extent` with ``K(t) >= m t + V t^2 / 2``, as for a remove
    direction's loss, whose cumulants beyond the second add to ``K`` at ``t > 0`` (equality
    for the Gaussian mechanism), clipped to the composed support like the window. Only the
    budget's choice depends on it (:meth:`IndividualPLDAccountant._transforms_bytes`)."""
    out: dict = {}
    for lv in np.unique(state["level"][state["todo"]]):
        rows = state["act"][state["todo"] & (state["level"] == lv)]
        top = 0.0
        for _, c in count_pieces(block, used, rows):
            prod = row_products(c, table)
            est = np.minimum(prod[:, 0] + np.sqrt(-2.0 * log_tail * np.maximum(prod[:, 1], 0.0)),
                             prod[:, 2])
            top = max(top, float(est.max(initial=0.0)))
        out[int(lv)] = top
    return state, out


def extents(block, state, used: np.ndarray, jobs: dict):
    """For each level of ``jobs`` (``lv -> (cols, laws, log_tail, d)``, ``laws`` a list of
    :class:`BucketLaws`): the FFT window each law set needs for this block's examples of that
    level (None if it has none)."""
    out: dict = {}
    for lv, (cols, laws, log_tail, d) in jobs.items():
        rows = np.nonzero(state["todo"] & (state["level"] == lv))[0]
        if not rows.size:
            out[lv] = None
            continue
        # per piece of examples (count_pieces); the window is the union of the pieces'
        # (exact: floor and ceil of a min and max are the min and max of the floors and ceils)
        win = None
        for _, c in count_pieces(block, used[cols], state["act"][rows]):
            w = window_extents(laws, c, log_tail, d)
            win = w if win is None else [(min(x[0], y[0]), max(x[1], y[1]))
                                         for x, y in zip(win, w, strict=True)]
        out[lv] = win
    return state, out


def _chunks(kk: np.ndarray, kl: np.ndarray, size: int) -> list[np.ndarray]:
    """Chunks of at most ``size`` examples, sorted by cut-off, never mixing examples on both
    sides of :data:`HORNER_MAX` (so each example is summed the same way whatever its
    neighbours)."""
    cls = (kk > HORNER_MAX).astype(np.int64) * 2 + (kl > HORNER_MAX)
    order = np.lexsort((kk, cls))
    out: list[np.ndarray] = []
    for c in np.unique(cls):
        sel = order[cls[order] == c]
        out.extend(sel[s:s + size] for s in range(0, sel.size, size))
    return out


def _prepare_pieces(block, ex: np.ndarray, used: np.ndarray, dirs: tuple, tol: float
                    ) -> list[list[np.ndarray]]:
    """:meth:`Direction.prepare_piece` of the examples ``ex`` (rows of the block) for each
    transform of ``dirs``, the counts gathered one piece at a time (:func:`count_pieces`),
    each piece passed to every transform in order, with the column count its previous piece
    returned."""
    n = ex.size
    outs: list = [None] * len(dirs)
    ncols: list = [None] * len(dirs)
    for a, c in count_pieces(block, used, ex):
        for i, dr in enumerate(dirs):
            vals, ncols[i] = dr.prepare_piece(c, tol, ncols[i])
            if outs[i] is None:
                outs[i] = [np.empty(n, dtype=x.dtype) for x in vals]
            for o, x in zip(outs[i], vals, strict=True):
                o[a:a + c.shape[0]] = x
    return outs


def settled(block, ex: np.ndarray, used: np.ndarray, dr: Direction, lower: np.ndarray,
            delta: float) -> np.ndarray:
    """Which examples ``ex`` (rows of the block) the direction of ``dr`` cannot move: its
    certified refined-moments bound on their eps (:meth:`Direction.rma_eps`, from the
    Chernoff table of its connect-the-dots laws, no transform) is at most ``lower``, their
    certified lower bound from the other direction. The eps of the pair is the larger of
    the two directions', so the other direction's bracket is then that of the pair: its
    upper bound is at least this direction's eps, and this direction's lower bound could
    not raise its lower one. Counts gathered one piece at a time (:func:`count_pieces`)."""
    out = np.empty(ex.size, dtype=bool)
    for a, c in count_pieces(block, used, ex):
        out[a:a + c.shape[0]] = dr.rma_eps(c, delta) <= lower[a:a + c.shape[0]]
    return out


def prepare(block, state, used: np.ndarray, jobs: dict, delta: float, direction: int):
    """First half of :func:`evaluate` in one direction of the pair, for every level of
    ``jobs`` (``lv -> (cols, [dr, dl])``: that direction's transforms, trimmed to their
    tables by :meth:`Direction.trimmed`): per example of the level, the mass at ``+inf``,
    the Chernoff bounds on the folded mass, the composed shift and the frequency cut-off with
    its truncation bound (:meth:`Direction.prepare_piece`), kept in the state until
    :func:`evaluate` of that direction uses them (one direction at a time: the state holds
    one direction's values, not both). In the second direction (add), examples that
    direction cannot move (:func:`settled`, against the first direction's lower bound) are
    left out: :func:`evaluate` keeps the first direction's bracket for them. Returns per
    level the largest cut-off of each transform (of the examples left to evaluate), so that
    the driver ships the spectra up to them only (not the whole window)."""
    prep = dict(state.get("prep", {}))
    out = {}
    tol = TRUNC_FRACTION * delta
    for lv, (cols, (dr, dl)) in jobs.items():
        rows = np.nonzero(state["todo"] & (state["level"] == lv))[0]
        if rows.size == 0:
            continue
        if direction == 1:
            done = settled(block, state["act"][rows], used[cols], dr, state["cur_lo"][rows],
                           delta)
            rows = rows[~done]
        up, low = _prepare_pieces(block, state["act"][rows], used[cols], (dr, dl), tol)
        if up is None:  # every example of the level settled
            prep[(lv, direction)] = (rows,)
            continue
        inf_up, out_up, s_up, kk, tau = up
        inf_low, out_low, s_low, kl, tau_l = low
        # what evaluate needs: the rows it evaluates, the upper allowance inf + outside, the
        # lower credit's inf - outside (the same operations, in the same order, as there)
        prep[(lv, direction)] = (rows, inf_up + out_up, s_up, kk, tau, inf_low - out_low, s_low,
                                 kl, tau_l)
        out[lv] = (int(kk.max()), int(kl.max()))
    return dict(state, prep=prep), out


def evaluate(block, state, used: np.ndarray, jobs: dict, direction: int, delta: float, *,
             chunk_size: int, max_memory: float):
    """Certified ``(lower, upper)`` eps, in one direction, of the block's examples of every
    level of ``jobs`` (``lv -> (cols, dr, dl)``) on the transforms ``dr`` (connect-the-dots,
    dominating) and ``dl`` (lowered chords, dominated), after :func:`prepare` (whose values
    it takes from the state); after the second direction the larger of the two narrows the
    bracket kept (upper: the smaller of the rounds', lower: the larger; an example
    :func:`prepare` found settled keeps the first direction's). Returns how many examples
    were done, the largest number of frequencies kept and how many examples were settled
    without evaluating this direction."""
    st = dict(state, prep=dict(state.get("prep", {})))
    n, k_top, n_settled = 0, 0, 0
    for lv, (cols, dr, dl) in jobs.items():
        prep = st["prep"].pop((lv, direction), None)
        if prep is not None:
            st, (m, k, s) = _evaluate_level(block, st, used, lv, cols, direction, dr, dl, prep,
                                            delta, chunk_size, max_memory)
            n, k_top, n_settled = n + m, max(k_top, k), n_settled + s
    return st, (n, k_top, n_settled)


def _evaluate_level(block, state, used: np.ndarray, lv: int, cols: np.ndarray,
                    direction: int, dr: Direction, dl: Direction, prep: tuple, delta: float,
                    chunk_size: int, max_memory: float):
    """:func:`evaluate` of the examples of level ``lv``, ``prep`` from :func:`prepare`."""
    rows = np.nonzero(state["todo"] & (state["level"] == lv))[0]
    # the rows evaluated: all of the level but, in the second direction, those settled,
    # whose eps there stays 0 (the first direction's bracket is kept)
    todo = prep[0]
    eps_up = np.zeros(rows.size)
    eps_lo = np.zeros(rows.size)
    k_max = 0
    if todo.size:
        at = np.searchsorted(rows, todo)
        eps_up[at], eps_lo[at], k_max = _evaluate_rows(block, state["act"][todo], used[cols],
                                                       dr, dl, prep[1:], delta, chunk_size,
                                                       max_memory)
    st = dict(state)
    if direction == 0:
        st["cur_up"] = state["cur_up"].copy()
        st["cur_lo"] = state["cur_lo"].copy()
        st["cur_up"][rows] = eps_up
        st["cur_lo"][rows] = eps_lo
    else:
        for key in ("up", "lo", "todo"):
            st[key] = state[key].copy()
        st["up"][rows] = np.minimum(st["up"][rows], np.maximum(state["cur_up"][rows], eps_up))
        st["lo"][rows] = np.maximum(st["lo"][rows], np.maximum(state["cur_lo"][rows], eps_lo))
        st["todo"][rows] = False
    return st, (int(rows.size), k_max, int(rows.size - todo.size))


def _evaluate_rows(block, ex: np.ndarray, used: np.ndarray, dr: Direction, dl: Direction,
                   prep: tuple, delta: float, chunk_size: int, max_memory: float
                   ) -> tuple[np.ndarray, np.ndarray, int]:
    """Certified upper and lower eps of the examples ``ex`` (rows of the block) in one
    direction, with their prepared values ``prep``, chunk by chunk; and the largest number
    of frequencies kept."""
    extra, s_up, kk, tau, low_mass, s_low, kl, tau_l = prep
    k_max = max(int(kk.max()), int(kl.max()), 1)
    # a chunk's evaluator holds about six (chunk, frequencies) complex arrays: at most a
    # quarter of the memory budget
    cs = max(1, min(chunk_size, int(0.25 * max_memory / (96.0 * k_max))))
    eps_up = np.empty(ex.size)
    eps_lo = np.empty(ex.size)
    for sel in _chunks(kk, kl, cs):
        # the chunk's counts gathered from the block (while they stay in cache; see
        # count_pieces) and its rounding allowance (sums of integers: exact)
        c = bucket_counts(block, used, ex[sel])
        round_allow = 64 * MACHINE_EPSILON * (1.0 + c.sum(axis=1))
        ev = Evaluator(dr, c, int(kk[sel].max()), tau[sel],
                       extra[sel] + round_allow * (1.0 + np.log(kk[sel])), kk[sel],
                       s_up[sel])
        eps_up[sel] = up = ev.epsilon(delta)
        del ev
        # the lower transforms' examples sorted by their own cut-off (the chunk is sorted by
        # the upper one's), so that the zeros past the cut-offs come first on each frequency
        # (:func:`~tightdp.individual.plancherel.staircase`; the values are per example)
        perm = np.argsort(kl[sel], kind="stable")
        sl = sel[perm]
        ev = Evaluator(dl, c[perm], int(kl[sl].max()), tau_l[sl], np.zeros(sl.size), kl[sl],
                       s_low[sl])
        credit = low_mass[sl] - round_allow[perm] * (1.0 + np.log(kl[sl]))
        eps_lo[sl] = ev.epsilon_lower(delta, up[perm], credit)
        del ev
    return eps_up, eps_lo, k_max


def give_up(block, state, lv: int, capped: bool):
    """The transforms of level ``lv`` do not fit the budget: its examples keep their bracket
    (``capped``: a refinement round) or move one level coarser (first round)."""
    rows = state["todo"] & (state["level"] == lv)
    st = dict(state, level=state["level"].copy(), todo=state["todo"].copy(),
              capped=state["capped"].copy())
    if capped:
        st["capped"][rows] = True
        st["todo"][rows] = False
    else:
        st["level"][rows] -= 1
    return st, None


def check(block, state, rtol: float):
    """After a round: examples whose bracket is wider than ``rtol`` (relative to its upper
    end) are marked for the next round, one level finer unless the budget capped them.
    Returns (how many will be refined, how many are wider than rtol)."""
    up, lo = state["up"], state["lo"]
    wide = ~(up - lo <= rtol * up)
    loose = wide & ~state["capped"]
    level = state["level"].copy()
    level[loose] += 1
    return dict(state, wide=wide, todo=loose, level=level), (int(loose.sum()), int(wide.sum()))


def finish(block, state, name: str, store: ResultStore | None):
    """The block's per-example ``upper`` and ``lower`` (zero for examples without loss),
    checked (a lower bound above an upper one raises, never hidden), written to ``store`` if
    given; returns them and the summary of ``upper``."""
    n = state["rows"]
    upper = np.zeros(n)
    lower = np.zeros(n)
    if "act" in state:  # (no example of the query has any loss: no state was set up)
        upper[state["act"]] = state["up"]
        lower[state["act"]] = state["lo"]
    check_bracket(lower, upper, "per-example eps", name)
    if store is not None:
        store.write(state["start"], {"epsilon": upper, "lower": lower})
    return {"upper": upper, "lower": lower}, block_summary(upper, state["start"])
