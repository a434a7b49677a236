"""One block of examples through the saddle-point accountant (the package docstring, steps
1-5): :func:`spa_block`, the function the executors apply to every block.

Examples are processed in blocks (``chunk_size``), so the intermediate arrays stay small
whatever ``N``; inside one, the counts are held as buckets x examples (the fast layout for the
products with few rows), ordered by the refined-moments brackets of the directions (so that the
examples of a piece are mostly adjacent and the products take views of the counts rather than
copies of their columns; gathered in that order from the integer rows), and the saddle points
are solved :data:`~.products.SUB_CHUNK` examples at a time (in cache). Every per-example number
is computed column by column, so it does not depend on the order or on the other examples of
the block (up to the summation order of the matrix products)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...curves.saddle import UNRELIABLE
from ..blocks import ResultStore, block_summary
from .brackets import bracket, rma_brackets
from .products import groups_of
from .solver import Solver
from .tables import Table, grid_cell

__all__ = ["spa_block", "FIELDS", "FLAGS"]

#: the per-example fields of a result and their types
FIELDS = {"epsilon": np.float64, "upper": np.float64, "reliable": np.bool_,
          "msd1_terms": np.float64}
#: the per-example flags counted over the blocks
FLAGS = ("beyond", "fallback", "unresolved", "unreliable")



@dataclass
class _Best:
    """Per example with loss, over the directions solved so far: the largest eps, the largest
    certified bound, and the flags (an unreliable direction may under-report, and then the
    larger of the two, the answer, may be wrong even if the other is reliable)."""

    eps: np.ndarray
    upper: np.ndarray
    size: np.ndarray
    beyond: np.ndarray
    fallback: np.ndarray
    unresolved: np.ndarray

    @classmethod
    def empty(cls, n: int) -> _Best:
        return cls(np.full(n, -np.inf), np.zeros(n), np.zeros(n), np.zeros(n, dtype=bool),
                   np.zeros(n, dtype=bool), np.zeros(n, dtype=bool))


def _upper(solver: Solver, tab: Table, cnt: np.ndarray, br_rma: dict, log_delta: float,
           steps: np.ndarray, best: _Best, *, first: bool) -> np.ndarray:
    """The certified bound of the direction of ``tab`` (package docstring, step 4). After the
    first direction, the examples whose bound in this one provably stays at most both the
    bound and the eps already found change neither (their bound, -inf here, is below both);
    the bound of the others as in the first."""
    if first:
        return solver.rma(tab, cnt, br_rma, log_delta, steps)
    up = np.full(cnt.shape[1], -np.inf)
    full = np.nonzero(~solver.rma_below(tab, cnt, br_rma, log_delta, steps,
                                        np.minimum(best.upper, best.eps)))[0]
    if full.size:
        up[full] = solver.rma(tab, np.take(cnt, full, axis=1),
                              {k: x[full] for k, x in br_rma.items()},
                              log_delta, steps[full])
    return up


def _saddle_points(solver: Solver, tab: Table, c: np.ndarray, hint_hi: np.ndarray,
                   target: float) -> tuple[dict, np.ndarray]:
    """The saddle points of the examples (columns of ``c``) in the direction of ``tab``:
    bracketed from the cell of the refined-moments bracket's upper end ``hint_hi`` (the
    saddle point is near the refined-moments optimum), assigned to the pieces that resolve
    them, iterated. Returns their numbers and where no saddle point is in range."""
    m = c.shape[1]
    out = {"eps": np.empty(m), "t": np.full(m, np.nan),
           "fallback": np.zeros(m, dtype=bool), "size": np.zeros(m),
           "unresolved": np.zeros(m, dtype=bool)}
    br = bracket(tab, c, target, kind="spa", method=solver.method,
                 hint=grid_cell(tab, hint_hi))
    lo, hi = br["lo"], br["hi"]
    miss = np.isnan(lo)
    found = np.nonzero(~miss)[0]
    leaves: list = []
    tab.check_pieces(tab.unfitted({(float(a), float(b))
                                   for a, b in zip(lo[found], hi[found], strict=True)}))
    for g in groups_of(lo[found]):
        rows = found[g]
        solver.solve(tab, tab.piece(lo[rows[0]], hi[rows[0]]), c, rows, rows, target,
                     out=out, leaves=leaves)
    solver.newton(leaves, c, target, out)
    return out, miss


def _directions(solver: Solver, tables: list[Table], brs: list[dict], cnt: np.ndarray,
                log_delta: float) -> _Best:
    """Both directions of the examples with loss (package docstring, step 5): the bound of
    each, and the saddle point only where that bound exceeds the eps found so far (a
    direction whose certified bound is at most it cannot raise the true eps above it)."""
    n = cnt.shape[1]
    best = _Best.empty(n)
    steps = cnt.sum(axis=0)  # integers: exact whatever the order of the sum
    for i, (tab, br_rma) in enumerate(zip(tables, brs, strict=True)):
        up = _upper(solver, tab, cnt, br_rma, log_delta, steps, best, first=i == 0)
        best.upper = np.maximum(best.upper, up)
        need = np.nonzero(up > best.eps)[0]
        if need.size == 0:
            continue
        c = cnt if need.size == n else cnt[:, need]
        out, miss = _saddle_points(solver, tab, c, br_rma["hi"][need], -log_delta)
        out["eps"][miss] = up[need][miss]  # no saddle point in range: the bound
        best.eps[need] = np.maximum(best.eps[need], out["eps"])
        best.size[need] = np.maximum(best.size[need], np.nan_to_num(out["size"], nan=np.inf))
        best.beyond[need] |= miss
        best.fallback[need] |= out["fallback"]
        best.unresolved[need] |= out["unresolved"]
    return best


def spa_block(block, state, used: np.ndarray, tables: list[Table], log_delta: float,
              solver: Solver, store: ResultStore | None):
    """The saddle-point eps, certified upper bound and flags of one block of examples (the
    package docstring, steps 1-5); written to ``store`` if given. Returns the block's arrays
    (``FIELDS``) and ``(examples, interpolation pieces per table, summary of epsilon, flag
    counts)``."""
    n_all = state["rows"]
    eps, upper, terms = np.zeros(n_all), np.zeros(n_all), np.zeros(n_all)
    reliable = np.ones(n_all, dtype=bool)
    flags = {k: np.zeros(n_all, dtype=bool) for k in FLAGS[:3]}
    act = np.zeros(0, dtype=np.int64)
    if used.size:
        # the examples with loss, their refined-moments brackets and counts (buckets x
        # examples: the fast layout for the products with few rows here), ordered by them
        act, brs, cnt = rma_brackets(tables, block, used + 1, -log_delta)
    if act.size:
        assert cnt is not None  # counts are None only when no example has loss
        best = _directions(solver, tables, brs, cnt, log_delta)
        eps[act] = np.maximum(best.eps, 0.0)
        upper[act] = best.upper
        terms[act] = best.size
        flags["beyond"][act] = best.beyond
        flags["fallback"][act] = best.fallback
        flags["unresolved"][act] = best.unresolved
        reliable[act] = (best.size <= UNRELIABLE) & ~best.beyond & ~best.unresolved
    res = {"epsilon": eps, "upper": upper, "reliable": reliable, "msd1_terms": terms}
    if store is not None:
        store.write(state["start"], res)
    counts = {k: int(f.sum()) for k, f in flags.items()}
    counts["unreliable"] = int((~reliable).sum())
    return res, (n_all, {tb.name: tb.n_pieces for tb in tables},
                 block_summary(eps, state["start"]), counts)
