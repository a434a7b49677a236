"""The per-example saddle-point accountant: :class:`IndividualSPAAccountant`, its budget
(the share of ``max_memory`` for the tables and for a block's arrays) and its passes over the
blocks of examples (:func:`~.block.spa_block`); the maths is in the package docstring."""

from __future__ import annotations

import math
import time

import numpy as np

from ... import _validate as v
from ...accountants.base import Queries
from ...budget import Budget
from ...curves.saddle import LABELS, METHODS, UNRELIABLE
from ...mechanisms.basic import Gaussian
from ...mechanisms.subsampling import PoissonSubsampled
from ...progress import progress_bar
from ...results import EpsilonResult
from ..blocks import ResultStore, merge_summaries, run_with_restarts
from ..history import NormHistory
from ..pld_blocks import used_buckets
from ..runner import BlockRunner
from .block import FIELDS, FLAGS, spa_block
from .solver import Solver
from .tables import Table

__all__ = ["IndividualSPAAccountant"]

#: share of max_memory for the tables of bucket CGFs, and for the arrays of one block
TABLE_SHARE = 0.25
BLOCK_SHARE = 0.25
#: bytes of a block's arrays per example: 16 per bucket of the grid and about 3000 more
#: (see the ``chunk_size`` parameter)
ROW_BYTES_PER_BUCKET, ROW_BYTES = 16.0, 3000.0


def buckets_in_use(block, state, n_buckets: int):
    """Which buckets any example of the block uses (:func:`~..pld_blocks.used_buckets`
    without the steps): the first pass of a query."""
    return used_buckets(block, state, n_buckets, steps=False)


class IndividualSPAAccountant(NormHistory, BlockRunner, Queries):
    """Individual eps of DP-SGD by the saddle-point accountant, per example: an approximation.

    Koskela et al. 2023 (Sec. 5, App. D.2) for the individual composition and the sensitivity
    buckets;
    Alghamdi et al. 2023 eqs. (50), (60), (61), (66), (72) for the approximation and
    eqs. (42)-(44) for the certified ``upper``; see the package docstring. Meant for very large
    ``N``, where the certified :class:`~tightdp.individual.IndividualPLDAccountant` is slower;
    its numbers are approximations (``certified=False`` in the result), not bounds.

    Feed the per-example gradient norms of each step with :meth:`step` (or share the history of
    another accountant with :meth:`from_history`), then ask :meth:`epsilon`: an
    :class:`~tightdp.EpsilonResult` with arrays ``(N,)`` (shape ``delta.shape + (N,)`` for an
    array of deltas):

    * ``epsilon`` (= ``estimate``): the saddle-point approximation of each example's eps at
      ``delta`` (max over the remove/add directions). **Not certified** (``certified`` is
      False): it may be below the true eps. Where the saddle point is outside the supported
      tilt range the certified ``upper`` is reported instead.
    * ``upper``: certified upper bound on each example's eps (refined moments bound,
      Alghamdi et al. 2023, eq. (43)), given its recorded norms; ``lower`` is None.
    * ``details["reliable"]``: bool array ``(N,)``; False where the SP-MSD1 correction terms of
      a direction that was solved exceed ``UNRELIABLE`` (few effective compositions: the
      approximation can be far off, in either direction), where the saddle point is beyond
      the tilt range, or where the interpolation tolerance was not met. Examples with no
      recorded loss (every norm 0) have ``epsilon = upper = 0`` and are reliable (exact).
    * ``details``: also the method, timings, counts of flagged examples, ``msd1_terms``
      (array ``(N,)``: the largest size of the SP-MSD1 terms over the directions solved).

    ``delta(epsilon)`` is not offered.

    Parameters
    ----------
    sampling_rate, noise_multiplier, clip_norm, n_examples, n_buckets : the DP-SGD setting and
        the sensitivity grid, as in :class:`~tightdp.IndividualPLDAccountant`.
    method : "msd1" (default, eq. (61)), "msd0" (eqs. (7)/(60)) or "clt" (eqs. (8)/(66)).
    progress : a progress bar on stderr: None (default) draws one for work still running after
        2 s when stderr is a terminal (see :mod:`tightdp.progress`), True always, False never.
    chunk_size : examples processed at once (a block); the arrays of a block take about
        ``chunk_size * (16 n_buckets + 3000)`` bytes (~300 MB for the default 65536 and 100
        buckets), whatever ``N``. A dask array of counts is processed by its row chunks.
    workers, scheduler, client : solve the blocks on Dask (a ``LocalCluster`` of ``workers``
        processes started and closed by each query, a running scheduler's address, or a
        client), as for :class:`~tightdp.IndividualPLDAccountant`; the tables of bucket CGFs
        are built once and shipped to every worker.
    store : a directory the per-example arrays are written to (``epsilon.npy``, ``upper.npy``,
        ``reliable.npy``, ``msd1_terms.npy``); the result holds them as read-only memmaps.
    max_memory, max_seconds : the budget of one :meth:`epsilon` query (see
        :mod:`tightdp.budget`): blocks hold fewer than ``chunk_size`` examples where their
        arrays would exceed a quarter of ``max_memory``; the tables of bucket CGFs (one
        interpolation piece per tilt interval an example's saddle point lies in, each about
        3 kB per bucket) are refused (:class:`~tightdp.BudgetExceeded`) before they would
        exceed a quarter of it, and every evaluation of them before it would end past
        ``max_seconds`` (estimated at the rate of the previous one).
    """

    def __init__(self, *, sampling_rate: float, noise_multiplier: float, clip_norm: float,
                 n_examples: int, n_buckets: int = 100, method: str = "msd1",
                 progress: bool | None = None, chunk_size: int = 65536,
                 workers: int | None = None, scheduler: str | None = None, client=None,
                 store=None, max_memory=None, max_seconds=None):
        super().__init__(sampling_rate=sampling_rate, noise_multiplier=noise_multiplier,
                         clip_norm=clip_norm, n_examples=n_examples, n_buckets=n_buckets)
        self.budget = Budget.make(max_memory, max_seconds)
        if method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
        self.method = method
        self.progress = None if progress is None else bool(progress)
        self.chunk_size = v.count("chunk_size", chunk_size, minimum=1)
        self._set_where(workers, scheduler, client, store)

    name = "individual-spa"

    @classmethod
    def from_history(cls, history: NormHistory, **kwargs) -> IndividualSPAAccountant:
        """An accountant over the norms already recorded in ``history`` (for instance an
        :class:`~tightdp.individual.IndividualPLDAccountant`, or a
        :class:`~tightdp.individual.NormRecorder` on disk), without copying them: the two share
        one count array, so steps recorded later in either are seen by both (an in-memory
        history; a recorder's counts are read-only here) (``kwargs``: as for the
        constructor)."""
        if not isinstance(history, NormHistory):
            raise ValueError(f"history must be a NormHistory, got {type(history).__name__}")
        counts = history.counts  # flushed; shared
        writable = (type(counts) is np.ndarray and counts.flags.writeable)
        return cls.attach(counts, sampling_rate=history.sampling_rate,
                          noise_multiplier=history.noise_multiplier,
                          clip_norm=history.clip_norm, n_steps=history.n_steps,
                          recording=writable, **kwargs)

    # --- evaluation --------------------------------------------------------------------------
    def _tables(self, used: np.ndarray, end: float) -> list[Table]:
        """The tables of bucket CGFs of each direction, with the query's limits (``end``:
        the wall-clock time by which it must end; the memory share split between them)."""
        mechs = [PoissonSubsampled(Gaussian(self.noise_multiplier, float(self.grid[j])),
                                   self.sampling_rate) for j in used]
        dirs = [0] if all(m.symmetric for m in mechs) else [0, 1]
        names = ["remove", "add"] if len(dirs) == 2 else ["both (symmetric)"]
        limits = (end, TABLE_SHARE * self.budget.max_memory / len(dirs),
                  self.budget.max_seconds)
        return [Table([m.privacy_losses()[d] for m in mechs], names[i], limits)
                for i, d in enumerate(dirs)]

    def _block_rows(self) -> int:
        """``chunk_size``, or fewer examples if a block's arrays would exceed their share of
        the memory budget (``ROW_BYTES_PER_BUCKET n_buckets + ROW_BYTES`` bytes each)."""
        per_row = ROW_BYTES_PER_BUCKET * self.grid.size + ROW_BYTES
        return min(self.chunk_size, max(1, int(BLOCK_SHARE * self.budget.max_memory
                                                // per_row)))

    def _epsilon_of(self, delta: float) -> EpsilonResult:
        """Saddle-point approximation of every example's eps at ``delta`` (NOT certified), with
        a certified per-example upper bound (refined moments) and a reliability flag; see the
        class and package docstrings. The examples are solved block by block
        (:func:`spa_block`), in this process or on Dask."""
        t0 = time.perf_counter()
        info: dict = {"method": self.method, "label": LABELS[self.method]}
        ex = self._executor(self._block_rows())
        try:
            arr, flags = run_with_restarts(lambda k: self._run(ex, delta, info, t0, k),
                                           self._log)
        finally:
            ex.close()
        return self._result(arr, delta, flags, info, t0)

    def _run(self, ex, delta: float, info: dict, t0: float, restarts: int):
        """The passes over the blocks of ``ex``: the buckets used, then :func:`spa_block`."""
        info["restarts"] = restarts
        end = time.time() + self.budget.max_seconds - (time.perf_counter() - t0)
        states = [{"start": a, "rows": b - a} for a, b in ex.bounds]
        states, outs = ex.run(buckets_in_use, states, self.grid.size, keep_state=True)
        used = np.nonzero(np.any([o[0] for o in outs], axis=0))[0]
        tables = self._tables(used, end) if used.size else []
        info["directions"] = [tb.name for tb in tables]
        bar = progress_bar(total=self.n_examples, desc="per-example epsilon (saddle point)",
                           unit="example", enabled=self.progress)
        done = [0]

        def update(i, o):
            bar.update(o[0])
            done[0] += o[0]
            self._log(f"saddle points: {done[0]}/{self.n_examples} examples, "
                      f"{time.perf_counter() - t0:.1f} s")

        store = None
        if self.store is not None:
            store = ResultStore(self.store, self.n_examples, FIELDS)
        try:
            states, outs = ex.run(spa_block, states, used, tables, math.log(delta),
                                  Solver(self.method), store, on_done=update)
        finally:
            bar.close()
        info["summary"] = merge_summaries([o[2] for o in outs])
        info["interpolation_pieces"] = {tb.name: max(o[1].get(tb.name, 0) for o in outs)
                                        for tb in tables}
        flags = {k: sum(o[3][k] for o in outs) for k in FLAGS}
        if ex.distributed:
            info["worker_peak_memory"] = ex.worker_peak_memory()
        if store is not None:
            arr = store.open()
        else:
            arr = ex.assemble(states, tuple(FIELDS), self._lazy(ex))
        return arr, flags

    def _result(self, arr: dict, delta: float, flags: dict, info: dict,
                t0: float) -> EpsilonResult:
        n_unrel = flags["unreliable"]
        parts = [f"saddle-point approximation {LABELS[self.method]} (Alghamdi et al.) of each "
                 "example's eps given its recorded norms; NOT a certified bound (the certified "
                 "per-example numbers come from IndividualPLDAccountant; the fully adaptive "
                 "guarantee is the individual GDP filter's)",
                 "upper = certified refined moments bound (eq. (43)) per example"]
        if n_unrel:
            parts.append(f"WARNING: {n_unrel} example(s) flagged unreliable (see "
                         "details['reliable']): few effective compositions (SP-MSD1 terms > "
                         f"{UNRELIABLE}), saddle point "
                         "beyond the tilt range, or interpolation tolerance not met; use upper "
                         "or IndividualPLDAccountant for them")
        if flags["beyond"]:
            parts.append(f"{flags['beyond']} example(s) with the saddle point beyond "
                         "the supported tilt range: the certified upper is reported as epsilon")
        if flags["fallback"]:
            parts.append("SP-MSD1 correction factor not positive for "
                         f"{flags['fallback']} example(s); SP-MSD0 used there")
        info.update({"reliable": arr["reliable"], "unreliable": n_unrel,
                     "beyond": flags["beyond"], "fallback": flags["fallback"],
                     "interpolation_unresolved": flags["unresolved"],
                     "msd1_terms": arr["msd1_terms"], "seconds": time.perf_counter() - t0})
        eps = arr["epsilon"]
        return EpsilonResult(eps, delta, None, arr["upper"], self.name, certified=False,
                             estimate=eps, note="; ".join(parts), details=info)
