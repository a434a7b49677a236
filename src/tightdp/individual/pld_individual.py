"""Individual epsilon for DP-SGD from gradient-norm histories, with the PLD engine.

Koskela, Tobaben, Honkela, "Individual Privacy Accounting with Gaussian Differential
Privacy", ICLR 2023, Sec. 5 and App. D.

What is computed
----------------
Example ``i`` of a DP-SGD run (Poisson rate ``q``, noise multiplier ``sigma``, clipping norm
``C``) whose gradient norm at step ``t`` is ``g_{i,t}`` sees, at that step, the Poisson
subsampled Gaussian mechanism with sensitivity ``c_{i,t} = min(g_{i,t}, C) / C`` and noise
``sigma`` (noise ratio ``sigma C / min(g_{i,t}, C)``; App. D.3, Lemma 8). Its individual
``eps_i(delta)`` is the privacy curve of the composition of those mechanisms over the steps,
both orders of the pair (remove and add), the larger of the two.

This is the paper's *approximative* individual accountant of Sec. 5: it is the privacy of
example ``i`` under the assumption that its norm sequence had been fixed in advance. The norms
of a real run depend on the noise of earlier steps, and no fully adaptive guarantee is claimed
here; for that use the individual GDP filter (:class:`~tightdp.individual.IndividualGDPFilter`,
Thm. 1). Given the norms, however, each number returned is a certified upper bound on that
composition's eps (computed in floating point: an allowance for rounding,
``64 u (1 + T_i) (1 + log K0)`` with ``u`` the unit roundoff -- about 1e-10 for 1000 steps -- is
added to every delta, which is why targets below 1e-9 are refused):

1. Sensitivity buckets (App. D.2): each ``c_{i,t}`` is rounded *up* to a grid
   ``c_1 < ... < c_B = 1`` (the noise ratio rounded *down*), which can only increase the
   privacy loss: the mechanism with the smaller sensitivity is a post-processing of the one
   with the larger (data-processing inequality; Koskela et al. 2023, Thm. 2 of App. D). A gradient
   norm
   reported as NaN (unknown) is charged the full clipping norm.
2. One certified discretization per bucket: connect-the-dots (Doroshenko et al. 2022) on a
   common grid step ``d`` gives a dominating discrete pair (bucket ``j`` on the grid
   ``s_j + k d`` with its own shift ``s_j``; an example's composed law then lives on
   ``sum_j n_ij s_j + k d``), and one real FFT of it on a common window of ``K`` points is kept
   (precomputed transforms, App. D.1).
3. Per example the transform of the composed PLD is ``prod_j F_j^{n_ij}`` (counts ``n_ij`` per
   bucket), evaluated as ``exp(sum_j n_ij log F_j)`` -- one matrix product for all examples.
4. ``delta`` is evaluated by the Plancherel theorem (App. D.1, Lemma 1): ``sum_y p(y) w(y) =
   (1/K) sum_k P_k conj(W_k)``, with the transforms ``W_k`` of the hockey-stick weights in
   closed form (geometric sums), so no inverse FFT is computed per example. Frequencies whose
   contribution is provably below ``1e-5 * delta`` are dropped per example; the bound on what
   they could contribute (summation by parts: ``|W_k| <= TV(w) / (2 sin(pi k / K))`` with
   ``TV(w) <= 2``, and a monotone envelope of ``|F_j|``) is added to delta.
5. The mass the circular convolution folds into the window is bounded per example by Chernoff
   bounds computed exactly from the discrete bucket laws, and added to delta, as is the mass
   at ``+inf``.
6. ``eps_i`` is found by a vectorized bracket search over the grid points of the window
   (regula falsi on ``log delta`` alternating with bisection) followed by the closed form
   ``delta = A - e^eps B`` on the bracketing interval. The returned eps is
   one at which the certified bound on delta is at most the target.

7. A certified *lower* bound per example comes from the lowered-chords pair of
   :func:`~tightdp.pld.discretize.certified_pair` (a dominated pair, discretized from the same
   evaluation of the loss's CDFs), evaluated the same way with every allowance taken against
   it (truncation ``-2 tau``, folded mass subtracted, mass at ``+inf`` counted): the largest
   grid point where that lower bound on delta still exceeds the target, then the closed form
   on the next interval. Each example gets a certified bracket ``[lower, upper]`` of its
   composition *as recorded* (norm ratios rounded up to the grid). ``upper`` bounds the eps at
   the exact norms too (rounding up only adds loss); ``lower`` does not: at the exact norms
   the eps can be smaller by the bucketing error (about one bucket, ``1 / n_buckets``, of
   sensitivity per step).
8. The remove direction is evaluated first. The add direction of an example is *settled*
   without being evaluated when its certified refined-moments bound (Alghamdi et al., "The
   Saddle-Point Accountant", 2022, eqs. (38), (42), (43): ``delta(eps) <= P(S = inf) + M_t
   e^{K(t) - t eps}`` for every ``t > 0``, ``K`` the composed log-MGF of the connect-the-dots
   bucket laws, from the Chernoff table the window placement already has, each law's
   rounding margin added; :meth:`Direction.rma_eps`) is at most the remove direction's
   certified *lower* bound. The pair's eps is the larger of the two, so the remove
   direction's bracket is then a certified bracket of the pair's: its upper end is above both
   directions' eps, and the add direction's certified lower bound, below its eps, could not
   have raised the lower end. (Evaluated, the add direction could only have raised the upper
   end by a looseness of its own bound larger than the gap; the tests compare both ways: the
   same numbers.)
   ``details["add_direction_settled"]`` counts them. In DP-SGD the remove direction
   typically dominates, so most examples are settled this way and the add direction's
   transforms are skipped for them (figures in docs/scaling.md, section 4).

Grid steps. ``d0`` is half the step the certified :class:`~tightdp.PLDAccountant` needs to
reach ``rtol`` for the worst-case example (every norm at least ``C`` for the largest number of
steps). The discretization error of an example's eps grows like ``(d / eps_i)^2``, so one
step sized for the worst case leaves the small-eps examples' brackets loose.
Examples are therefore grouped by the CLT scale of their composition relative to the worst
case (``mu_i / mu_worst``, Dong, Roth, Su 2022, Cor. 5.4; used only for the choice) and a
group at level ``l`` gets ``d0 / 2^l`` (one level per halving of the scale,
``pld_blocks.LEVEL_OFFSET`` levels fewer for every example); each group is discretized,
transformed and windowed for its own buckets and counts. Examples whose certified bracket is
still wider than ``rtol`` (relative to their upper bound) are evaluated again one level finer,
at most ``MAX_REFINEMENTS`` times (and while half the time budget is left);
``details["loose"]`` counts those left wider, ``converged`` says whether there are none. Only
the one-off discretizations and FFTs depend on ``d``; the cost per example does not.

Blocks. The examples are processed as row blocks, in passes
(:mod:`tightdp.individual.pld_blocks`): in this process or on a Dask cluster
(:mod:`tightdp.individual.distributed`; ``docs/scaling.md``). The group windows are exact
unions over the blocks, and every per-example number depends only on that example's counts
and on the shipped transforms (its own frequency cut-off, rounding allowance and summation
path), so the answer does not depend on the blocks, nor on where they ran.
"""

from __future__ import annotations

import functools
import math
import time

import numpy as np

from .. import _validate as v
from .._defaults import DEFAULT_RTOL
from ..accountants.base import Queries
from ..budget import Budget, BudgetExceeded
from ..losses.cgf import cgf
from ..mechanisms.basic import Gaussian
from ..mechanisms.subsampling import PoissonSubsampled
from ..progress import progress_bar
from ..results import EpsilonResult
from . import pld_blocks as pb
from .blocks import (
    DEFAULT_BLOCK_ROWS,
    ResultStore,
    merge_summaries,
    run_with_restarts,
)
from .history import NormHistory
from .plancherel import BucketLaws, Direction, bucket_loss_range, transforms_bytes
from .pld_rounds import SLOTS, Level, Pair, RoundState, Side, slot, todo_levels
from .runner import BlockRunner

__all__ = ["IndividualPLDAccountant", "individual_epsilons"]

#: smallest target delta accepted (below it the rounding allowance would dominate)
MIN_DELTA = 1e-9
#: rounds of halving the grid step of the examples whose bracket is still wider than rtol
MAX_REFINEMENTS = 3
#: frequencies of each bucket spectrum the driver keeps between building a level's transforms
#: and shipping them (the examples' cut-offs are far below; a transform is built again for
#: examples that need more)
KEEP_FREQUENCIES = 4096



class IndividualPLDAccountant(NormHistory, BlockRunner, Queries):
    """Streaming individual accountant for DP-SGD (Koskela et al. 2023, Sec. 5 and App. D); see the
    module docstring for what the numbers mean and why they are upper bounds.

    Feed the per-example gradient norms of each step with :meth:`step` (only the bucket counts
    are stored: ``N x B`` integers, see :class:`NormHistory`), or start from recorded counts
    with :meth:`from_counts` (a numpy array, a memmap, or a ``dask.array`` too large for one
    machine), then ask :meth:`epsilon` (a :class:`~tightdp.EpsilonResult` holding one eps per
    example, with its certified lower bound in ``lower``; both bound the composition *as
    recorded*, each norm ratio rounded up to the bucket grid: ``upper`` is also an upper bound
    at the exact norms, ``lower`` is not a lower bound at the exact norms, which can be smaller
    by the bucketing; an array of deltas gives arrays of shape ``delta.shape + (N,)``;
    ``details["summary"]`` holds quantiles, a histogram and the worst examples).
    ``delta(epsilon)`` is not offered.

    The examples are evaluated block by block (``block_rows`` per block, or the row chunks of
    a dask array): in this process by default, on Dask with ``workers``, ``scheduler`` or
    ``client`` (see :mod:`tightdp.individual.distributed`); an example's numbers do not depend
    on the blocks, so both give the same answer.

    Parameters
    ----------
    sampling_rate : Poisson sampling rate ``q`` in (0, 1].
    noise_multiplier : ``sigma > 0``.
    clip_norm : ``C > 0``.
    n_examples : ``N >= 1``.
    n_buckets : size of the uniform sensitivity grid (App. D.2); each ratio ``min(g, C)/C`` is
        rounded up by less than ``1 / n_buckets``.
    rtol : relative accuracy asked of the certified accountant that chooses the coarsest grid
        step ``d0``, and the relative width asked of every example's certified bracket
        (examples wider than it are refined; see the module docstring).
    grid_step : fix ``d0`` instead (skips that accountant run).
    progress : a progress bar on stderr: None (default) draws one for work still running after
        2 s when stderr is a terminal (see :mod:`tightdp.progress`), True always, False never.
        Diagnostics go to the ``"tightdp"`` logger at level INFO.
    max_memory, max_seconds : the budget of one :meth:`epsilon` query (see
        :mod:`tightdp.budget`): sizes are checked before allocating (refusal naming what
        drives the cost) and chunks of examples are sized to fit (per worker on a cluster).
    chunk_size : examples evaluated at once inside a block (fewer when the budget asks).
    block_rows : examples per block for numpy counts.
    workers : run on a ``dask.distributed.LocalCluster`` of this many single-threaded worker
        processes, started and closed by each query (needs ``tightdp[dask]``).
    scheduler : the address of a running Dask scheduler to run on instead.
    client : a ``dask.distributed.Client`` to run on instead; with dask-array counts the
        per-example arrays of the result are then lazy dask arrays on that cluster.
    store : a directory: the per-example ``epsilon.npy`` and ``lower.npy`` are written there
        by the blocks (shared file system) and the result holds them as read-only memmaps.
    fft_workers : threads of the few FFTs of the bucket laws (``scipy.fft`` ``workers``).
    """

    def __init__(self, *, sampling_rate: float, noise_multiplier: float, clip_norm: float,
                 n_examples: int, n_buckets: int = 100, rtol: float = DEFAULT_RTOL,
                 grid_step: float | None = None, progress: bool | None = None,
                 chunk_size: int = 4096, block_rows: int = DEFAULT_BLOCK_ROWS,
                 workers: int | None = None, scheduler: str | None = None, client=None,
                 store=None, fft_workers: int | None = None, max_memory=None,
                 max_seconds=None):
        super().__init__(sampling_rate=sampling_rate, noise_multiplier=noise_multiplier,
                         clip_norm=clip_norm, n_examples=n_examples, n_buckets=n_buckets)
        self.budget = Budget.make(max_memory, max_seconds)
        self.rtol = v.positive("rtol", rtol)
        self.grid_step = None if grid_step is None else v.positive("grid_step", grid_step)
        self.progress = None if progress is None else bool(progress)
        self.fft_workers = fft_workers
        self.chunk_size = v.count("chunk_size", chunk_size, minimum=1)
        self.block_rows = v.count("block_rows", block_rows, minimum=1)
        self._set_where(workers, scheduler, client, store)

    name = "individual-pld"

    # --- evaluation --------------------------------------------------------------------------
    def _choose_step(self, t_max: int, delta: float, info: dict) -> float:
        if self.grid_step is not None:
            return self.grid_step
        from ..accountants.pld import PLDAccountant

        acc = PLDAccountant(self.rtol, max_memory=self.budget.max_memory,
                            max_seconds=self.budget.max_seconds)
        acc.compose(PoissonSubsampled(Gaussian(self.noise_multiplier), self.sampling_rate),
                    t_max)
        r = acc.epsilon(delta)
        info["worst_case"] = {"epsilon": r.epsilon, "lower": r.lower,
                              "upper": r.upper, "steps": t_max}
        step = r.details.get("grid_step_upper", r.details.get("grid_step"))
        if step is None:  # pragma: no cover - the accountant always reports its grid
            raise ValueError("the certified accountant did not report its grid step; pass "
                             "grid_step")
        # half of it: examples with small sensitivities have a relatively larger
        # discretization error at a given step; the per-example cost does not depend on it
        return 0.5 * float(step)

    @functools.cached_property
    def _loss_cache(self) -> dict:
        """Bucket index -> (remove, add) privacy losses, built on first use."""
        return {}

    def _loss(self, j: int, direction: int):
        """Privacy loss of bucket ``j`` (remove: 0, add: 1), built once per accountant."""
        cache = self._loss_cache
        if j not in cache:
            mech = PoissonSubsampled(Gaussian(self.noise_multiplier, float(self.grid[j])),
                                     self.sampling_rate)
            cache[j] = mech.privacy_losses()
        return cache[j][direction]

    @staticmethod
    def _give_up(ex, states: list, lv: int, refinements: int, err: BudgetExceeded) -> list:
        """Level ``lv`` does not fit the memory budget (its laws or its transforms): in a
        refinement round its examples keep the previous round's bracket; in the first round
        they fall back one level coarser (:func:`pld_blocks.give_up`), or, at level 0, the
        query is refused with ``err``."""
        if refinements == 0 and lv == 0:
            raise err
        states, _ = ex.run(pb.give_up, states, lv, refinements > 0, reads=False)
        return states

    def _range(self, j: int, r: int, log_tail: float, cache: dict) -> tuple[float, float]:
        """:func:`~tightdp.individual.plancherel.bucket_loss_range` of bucket ``j`` in
        direction ``r``, kept in ``cache`` (one query's: ``log_tail`` is fixed there)."""
        if ("range", j, r) not in cache:
            cache[("range", j, r)] = bucket_loss_range(self._loss(j, r), log_tail)
        return cache[("range", j, r)]

    def _laws_bytes(self, used: np.ndarray, cols: np.ndarray, d: float,
                    log_tail: float, cache: dict) -> float:
        """Bytes the discretized laws of the buckets ``cols`` (columns of ``used``) take on
        the grid step ``d``, estimated before they are built: per bucket and direction, the
        points of its loss range (:func:`~tightdp.individual.plancherel.bucket_loss_range`,
        two loss evaluations, kept in ``cache``) on the grid, 8 bytes each in both pairs
        (what the round holds until its transforms are built; the transforms need more,
        checked by :class:`Direction`)."""
        points = 0.0
        for c in cols:
            for r in (0, 1):
                lo, hi = self._range(int(used[c]), r, log_tail, cache)
                points += (hi - lo) / d + 3.0
        return 16.0 * points

    def _over_budget(self, ex, states: list, used: np.ndarray, todo: dict, d0: float,
                     log_tail: float, win_tail: float, share: float, cache: dict) -> dict:
        """The levels of ``todo`` (``lv -> (columns mask, examples)``) that do not fit the
        transforms' ``share`` of the memory budget, each with the refusal naming why, found
        before their buckets are discretized (which takes time in proportion to the laws'
        grid points); :meth:`_give_up` decides what becomes of their examples.

        A level is over if its bucket laws alone exceed the share (:meth:`_laws_bytes`). If
        none is but the laws of the round's levels (discretized together) do, the finest
        level is. If the round's laws are costly (above 1/16 of the share: millions of grid
        points), the window of each level is estimated from the moments of its examples'
        compositions (:func:`pld_blocks.reach`), and a level whose transforms on it
        (:func:`~tightdp.individual.plancherel.transforms_bytes`) exceed the share is over:
        the transforms built later would not fit either (the estimate is below the window
        the laws give)."""
        cols = {lv: np.nonzero(mask)[0] for lv, (mask, _) in todo.items()}
        step = {lv: d0 * 2.0 ** -float(lv) for lv in todo}
        need = {lv: self._laws_bytes(used, cols[lv], step[lv], log_tail, cache) for lv in todo}
        advice = "use fewer buckets, a larger rtol or grid_step, or raise max_memory"
        of_share = f"over the transforms' share of max_memory, {share / 1e9:.3g} GB"
        over = {lv: BudgetExceeded(
            f"n_buckets: the laws of {cols[lv].size} buckets on the grid step {step[lv]:.3g} "
            f"need about {need[lv] / 1e9:.3g} GB ({of_share}); {advice}")
            for lv in todo if need[lv] > share}
        total = sum(need.values())
        if total <= share / 16:
            return over
        for c in used.tolist():
            if ("moments", c) not in cache:
                mean, var = (float(x[0]) for x in cgf(self._loss(c, 0), np.zeros(1), 2)[1:])
                cache[("moments", c)] = (mean, var, self._range(c, 0, log_tail, cache)[1])
        table = np.array([cache[("moments", c)] for c in used.tolist()])
        _, outs = ex.run(pb.reach, states, used, table, win_tail, keep_state=True)
        for lv in sorted(set(todo) - set(over)):
            top = max(o.get(lv, 0.0) for o in outs)
            points = int(top / step[lv]) + 3  # the window reaches below 0 too (_window)
            size = transforms_bytes(cols[lv].size, points)
            if size > share:
                over[lv] = BudgetExceeded(
                    f"n_buckets: {cols[lv].size} buckets x a window of at least {points} "
                    f"points on the grid step {step[lv]:.3g} need about {size / 1e9:.3g} GB "
                    f"({of_share}; estimated before discretizing); {advice}")
        if not over and total > share:
            over[max(todo)] = BudgetExceeded(
                f"n_buckets: the laws of the {len(todo)} grid levels of a round need about "
                f"{total / 1e9:.3g} GB ({of_share}); {advice}")
        return over

    def _laws(self, ex, used: np.ndarray, cols: dict, d0: float, log_tail: float) -> dict:
        """Per level ``lv`` (``cols[lv]``: the columns of ``used`` its examples use): its
        buckets discretized on the grid step ``d0 / 2^lv``, ``[[upper plds, lower plds] of
        each direction]`` in the order of ``cols[lv]``. One task per bucket and direction on
        ``ex`` for all the levels that use it (:func:`pld_blocks.discretize_steps`: the
        same pairs as one discretization per level, the CDFs evaluated once)."""
        levels = sorted(cols)
        members = {lv: set(cols[lv].tolist()) for lv in levels}
        buckets = sorted(set().union(*members.values()))
        lvs = [[lv for lv in levels if c in members[lv]] for c in buckets]
        out: dict = {lv: [] for lv in levels}
        for r in (0, 1):
            jobs = [(self._loss(int(used[c]), r), [d0 * 2.0 ** -float(lv) for lv in ls])
                    for c, ls in zip(buckets, lvs, strict=True)]
            got = {}
            for c, ls, pairs in zip(buckets, lvs, ex.map(pb.discretize_steps, jobs, log_tail),
                                    strict=True):
                got.update({(c, lv): p for lv, p in zip(ls, pairs, strict=True)})
            for lv in levels:
                pairs = [got[(int(c), lv)] for c in cols[lv]]
                out[lv].append([[p[0] for p in pairs], [p[1] for p in pairs]])
        return out

    def _epsilon_of(self, delta: float) -> EpsilonResult:
        """Per-example eps at ``delta`` (``epsilon`` of shape ``(N,)``): a certified upper bound
        on the eps of each example's composition given its norms, with a certified lower bound
        (see the module docstring)."""
        if delta < MIN_DELTA:
            raise ValueError(f"delta must be in [{MIN_DELTA}, 1) for the individual accountant "
                             f"(its rounding allowance is ~1e-10), got {delta!r}")
        t0 = time.perf_counter()
        ex = self._executor(self.block_rows)
        try:
            return run_with_restarts(lambda k: self._run(ex, delta, t0, k), self._log)
        finally:
            ex.close()

    def _run(self, ex, delta: float, t0: float, restarts: int = 0) -> EpsilonResult:
        """The passes of :mod:`tightdp.individual.pld_blocks` over the blocks of ``ex``."""
        deadline = self.budget.deadline()
        info: dict = {"blocks": ex.n_blocks, "restarts": restarts}
        states = [{"start": a, "rows": b - a} for a, b in ex.bounds]
        states, outs = ex.run(pb.used_buckets, states, self.grid.size, keep_state=True)
        used = np.nonzero(np.any([o[0] for o in outs], axis=0))[0]
        t_max = max(o[1] for o in outs)
        if used.size:
            d0 = self._choose_step(t_max, delta, info)
            self._log(f"grid step {d0:.3g}, {used.size} buckets, T_max={t_max}")
            x = np.expm1(np.minimum((self.grid[used] / self.noise_multiplier) ** 2, 700.0))
            log_w = math.log(t_max) + math.log(math.expm1(
                min(1.0 / self.noise_multiplier ** 2, 700.0)))
            states, outs = ex.run(pb.init_state, states, used, x, log_w)
            info.update({"grid_step": d0, "buckets": int(used.size)})
            bar = progress_bar(total=2 * sum(outs), desc="per-example epsilon",
                               unit="example", enabled=self.progress)
            try:
                states = self._rounds(ex, states, self._query(used, d0, t_max, delta,
                                                              deadline, info, bar))
            finally:
                bar.close()
        store = None
        if self.store is not None:
            store = ResultStore(self.store, self.n_examples,
                                {"epsilon": np.float64, "lower": np.float64})
        states, outs = ex.run(pb.finish, states, self.name, store, reads=False)
        info["summary"] = merge_summaries(outs)
        if store is not None:
            arrays = store.open()
            upper, lower = arrays["epsilon"], arrays["lower"]
        else:
            arrays = ex.assemble(states, ("upper", "lower"), self._lazy(ex))
            upper, lower = arrays["upper"], arrays["lower"]
        if ex.distributed:
            info["worker_peak_memory"] = ex.worker_peak_memory()
        info["seconds"] = time.perf_counter() - t0
        return self._result(lower, upper, delta, info)

    def _query(self, used: np.ndarray, d0: float, t_max: int, delta: float, deadline,
               info: dict, bar) -> RoundState:
        """The state the rounds of one query share (:class:`RoundState`)."""
        # each bucket is discretized on the loss range outside of which its tails hold at most
        # 1e-7 delta / T_max: what lies above goes to +inf (charged in full to delta), what
        # lies below moves up (upper pair) or is dropped (lower pair), both certified; it
        # moves no eps by more than a 1e-7 relative change of delta does
        log_tail = math.log(1e-7 * delta) - math.log(max(t_max, 1))
        # the window leaves out at most 1e-7 delta of each example's composition
        win_tail = math.log(1e-7 * delta)
        return RoundState(used, d0, delta, deadline, info, bar, log_tail, win_tail,
                      0.25 * self.budget.max_memory)

    def _rounds(self, ex, states: list, q: RoundState) -> list:
        """Rounds of evaluation: each groups the examples still to do by grid level; per
        level the driver discretizes the buckets its examples use (each bucket in one task for
        all the levels of the round that use it), places the window over
        their compositions (a reduction over the blocks), builds the transforms of each
        direction and ships them; then examples whose bracket is wider than ``rtol`` go one
        level finer, at most ``MAX_REFINEMENTS`` times while half the time budget is left. A
        level whose transforms exceed the memory budget keeps its examples' previous bracket
        (a refinement round) or moves them one level coarser (the first round; the levels are
        then grouped again, their buckets and windows with them, before any is evaluated)."""
        while True:
            states = self._round(ex, states, q)
            states, outs = ex.run(pb.check, states, self.rtol, reads=False)
            n_loose = sum(o[0] for o in outs)
            n_wide = sum(o[1] for o in outs)
            if n_loose == 0 or q.refinements >= MAX_REFINEMENTS or q.deadline.passed(0.5):
                break
            q.refinements += 1
        q.info.update({"max_frequencies_0": q.frequencies[Side.REMOVE],
                       "max_frequencies_1": q.frequencies[Side.ADD],
                       "add_direction_settled": q.settled,
                       "grid_steps": sorted(q.steps_used, reverse=True),
                       "refinements": q.refinements, "loose": n_wide,
                       "converged": n_wide == 0})
        return states

    def _round(self, ex, states: list, q: RoundState) -> list:
        """One round: until every example of the round is done (or capped), the levels still
        to do grouped, checked against the budget, built and evaluated."""
        while True:
            states, todo = todo_levels(ex, states, q.used)
            if not todo:
                return states
            over = self._over_budget(ex, states, q.used, todo, q.d0, q.log_tail, q.win_tail,
                                     q.share, q.cache)
            for lv in sorted(over):
                states = self._give_up(ex, states, lv, q.refinements, over[lv])
            if over:
                continue  # grouped again: moved examples join their new level
            states, built = self._build_levels(ex, states, todo, q)
            if built is None:
                continue  # examples moved one level coarser: grouped again
            for side in Side if built else ():
                states = self._evaluate_side(ex, states, built, side, q)

    def _build_levels(self, ex, states: list, todo: dict,
                      q: RoundState) -> tuple[list, dict[int, Level] | None]:
        """The transforms of every level of ``todo``: its buckets discretized, the windows
        over its examples' compositions, then the four transforms of :data:`SLOTS`. A level
        over the memory budget gives up (:meth:`_give_up`); in the first round its examples
        then move one level coarser and None is returned (the levels are grouped again
        before anything is evaluated: a level already built has the buckets, window and
        cut-offs of its own examples only, the moved ones' other buckets would be left out
        of their composition)."""
        jobs = {}
        plds = self._laws(ex, q.used, {lv: np.nonzero(mask)[0]
                                       for lv, (mask, _) in todo.items()}, q.d0, q.log_tail)
        for lv, (mask, _) in todo.items():
            cols = np.nonzero(mask)[0]
            d = q.d0 * 2.0 ** -float(lv)
            jobs[lv] = (cols, [BucketLaws(p) for pair in plds[lv] for p in pair],
                        q.win_tail, d)
        states, outs = ex.run(pb.extents, states, q.used, jobs, keep_state=True)
        built: dict[int, Level] = {}
        for lv in sorted(todo):
            wins = [o[lv] for o in outs if o[lv] is not None]
            win = [(min(w[k][0] for w in wins), max(w[k][1] for w in wins))
                   for k in range(len(SLOTS))]
            cols, laws, _, d = jobs[lv]
            self._log(f"grid step {d:.3g}: {todo[lv][1]} examples, "
                      f"{time.perf_counter() - q.deadline.start:.1f} s")
            level = Level(cols, {}, functools.partial(
                self._transform, plds[lv], laws, d, win, q.share))
            try:
                # each kept with its first KEEP_FREQUENCIES frequencies only (what the
                # examples use, but for rare ones: rebuilt then)
                level.dirs = {sp: level.make(*sp).trimmed(KEEP_FREQUENCIES) for sp in SLOTS}
            except BudgetExceeded as err:
                states = self._give_up(ex, states, lv, q.refinements, err)
                if q.refinements == 0:
                    return states, None
                continue
            for side in Side:
                key = f"fft_points_{int(side)}"
                q.info[key] = max(q.info.get(key, 0), level.dirs[side, Pair.UPPER].K,
                                  level.dirs[side, Pair.LOWER].K)
            built[lv] = level
            q.steps_used.add(d)
        return states, built

    def _transform(self, plds: list, laws: list, d: float, win: list, share: float,
                   side: Side, pair: Pair) -> Direction:
        """The transform of ``pair`` in direction ``side`` of one level."""
        i = slot(side, pair)
        return Direction(plds[side][pair], laws[i], d, win[i], self.fft_workers, share)

    def _evaluate_side(self, ex, states: list, built: dict[int, Level], side: Side,
                       q: RoundState) -> list:
        """One direction of every built level: the tables of every level first, then the
        spectra up to the largest cut-off of the examples (one direction's prepared values
        in the blocks' state at a time), then the evaluation."""
        states, k_max = ex.run(pb.prepare, states, q.used, {
            lv: (lev.cols, [lev.dirs[side, p].trimmed(0) for p in Pair])
            for lv, lev in built.items()}, q.delta, int(side))
        ship = {}
        for lv, lev in built.items():
            pair = []
            for p in Pair:
                k = max([1] + [o[lv][p] for o in k_max if lv in o])
                x = lev.dirs[side, p]
                if k > x.held_frequencies and x.kh > x.held_frequencies:
                    x = lev.make(side, p)
                pair.append(x.trimmed(k))
            ship[lv] = (lev.cols, *pair)

        def done(i, o):
            q.frequencies[side] = max(q.frequencies[side], o[1])
            q.settled += o[2]
            q.bar.update(o[0])

        states, _ = ex.run(pb.evaluate, states, q.used, ship, int(side), q.delta,
                           options={"chunk_size": self.chunk_size,
                                    "max_memory": self.budget.max_memory},
                           on_done=done)
        return states

    def _result(self, lower, upper, delta: float, info: dict) -> EpsilonResult:
        note = ("per example: certified bracket [lower, upper] of the eps of its composition "
                "as recorded (each norm ratio rounded up to the bucket grid j/n_buckets); "
                "upper also bounds the eps at the exact norms, which may lie below lower by "
                "the bucketing error (raise n_buckets to shrink it); not a fully adaptive "
                "guarantee: see IndividualGDPFilter")
        converged = info.get("converged")
        if converged is not None and not converged:
            note += (f"; {info['loose']} brackets wider than rtol={self.rtol:g} (refinement "
                     "stopped by its limit or the time budget)")
        return EpsilonResult(upper, delta, lower, upper, self.name, certified=True,
                             estimate=upper, note=note, details=info)

def individual_epsilons(grad_norms, *, sampling_rate: float, noise_multiplier: float,
                        clip_norm: float, delta: float, n_buckets: int = 100,
                        rtol: float = DEFAULT_RTOL, grid_step: float | None = None,
                        progress: bool | None = None, max_memory=None, max_seconds=None
                        ) -> EpsilonResult:
    """Individual eps of every example of a DP-SGD run (Koskela et al. 2023, Sec. 5, App. D).

    Parameters
    ----------
    grad_norms : array ``(N, T)`` of per-example gradient norms at each step (NaN = unknown,
        charged the clipping norm).
    sampling_rate, noise_multiplier, clip_norm : ``q``, ``sigma``, ``C`` of DP-SGD.
    delta : target delta in ``[1e-9, 1)``.
    n_buckets, rtol, grid_step, progress, max_memory, max_seconds : see
        :class:`IndividualPLDAccountant`.

    Returns
    -------
    EpsilonResult : ``epsilon`` (= ``upper``) an array ``(N,)``, each a certified upper bound
        on the eps of that example's composition *given its norms* (the approximative
        accountant of Sec. 5, not a fully adaptive guarantee; see the module docstring), and
        ``lower`` the certified lower bounds (brackets within ``rtol`` unless
        ``details["converged"]`` is False).
    """
    g = np.asarray(grad_norms)
    if g.ndim != 2:
        raise ValueError(f"grad_norms must be a 2-d array (N examples x T steps), got shape "
                         f"{g.shape}")
    acc = IndividualPLDAccountant(sampling_rate=sampling_rate, noise_multiplier=noise_multiplier,
                                  clip_norm=clip_norm, n_examples=g.shape[0],
                                  n_buckets=n_buckets, rtol=rtol, grid_step=grid_step,
                                  progress=progress, max_memory=max_memory,
                                  max_seconds=max_seconds)
    acc.step_many(g)
    return acc.epsilon(delta)
