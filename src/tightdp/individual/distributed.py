"""Per-example accounting on a Dask cluster (the optional extra ``tightdp[dask]``).

:class:`DaskBlocks` runs the passes of the individual accountants (see
:mod:`tightdp.individual.blocks` for the protocol) with ``dask.distributed``: one task per
block of examples and pass, each block's state between passes kept on the workers as a
future, what the driver computed once (bucket transforms, tables) scattered to every worker
once per pass (broadcast), and only small per-block summaries gathered. A worker lost in the
middle is not a failure: Dask reruns its running tasks elsewhere; if it also held block
state from earlier passes (whose lineage Dask has released), the query starts over
(:data:`~tightdp.individual.blocks.MAX_RESTARTS` times at most). Every state is a pure function
of the counts and of what the driver shipped, so the answer is the same.

Counts given as a ``dask.array`` are read block by block by the tasks themselves (from
whatever the array is built on: a :class:`~tightdp.individual.NormRecorder` file, zarr, ...),
again at every pass, so no worker ever holds more than the blocks it is working on. So are the
rows of a ``.npy`` file opened as a memmap (``np.load(path, mmap_mode="r")``; the workers
must see the same file system). A numpy array in memory is cut into blocks whose copies live
in the cluster (and, as task data, on the scheduler) for the duration of the query.
"""

from __future__ import annotations

import functools
import operator
import uuid
import warnings
from collections.abc import Callable
from concurrent.futures import CancelledError
from typing import cast

import numpy as np

from .._dask import (
    connect_scheduler,
    dask_client,
    local_cluster,
    peak_memory,
    require_distributed,
    warn_malloc_trim,
)
from ..budget import BudgetExceeded
from .blocks import (
    DEFAULT_BLOCK_ROWS,
    LostBlocks,
    as_blocks,
    is_dask_array,
    npy_source,
    read_rows,
)

__all__ = ["DaskBlocks"]

#: how many times a task is retried after an error on a worker (a lost worker is not one)
RETRIES = 1
#: how long to try reaching a scheduler given by its address
CONNECT_TIMEOUT = "20s"


def _own_graph(block):
    """The delayed ``block`` with only the tasks it depends on. ``Array.to_delayed`` gives
    every block the graph of the whole array, so each task of a pass (one per block) would
    carry, pickle and have the scheduler process the tasks of all blocks: driver CPU per
    pass growing with the square of the number of blocks (docs/scaling.md, section 4)."""
    from dask.delayed import Delayed

    try:
        return Delayed(block.key, dict(block.dask.cull({block.key})))
    except (AttributeError, TypeError, ValueError):  # pragma: no cover - other graph types
        return block


def _apply(fn: Callable, block, state, out_only: bool, options: dict, *shared):
    """``fn(block, state, *shared, **options)`` (only its out with ``out_only``: a pass that
    keeps the states), ``block`` read here first where it is a :class:`functools.partial`
    reading it."""
    if isinstance(block, functools.partial):
        block = block()
    res = fn(block, state, *shared, **options)
    return res[1] if out_only else res


def _fields_of(state: dict, fields: tuple[str, ...]) -> dict:
    """The entries ``fields`` of a block's state."""
    return {f: state[f] for f in fields}


class DaskBlocks:
    """Runs passes over the row blocks of ``counts`` on a Dask cluster: ``client`` (used as
    is), else ``scheduler`` (the address of a running cluster), else a ``LocalCluster`` of
    ``workers`` single-threaded worker processes started here and closed by :meth:`close`."""

    distributed = True

    def __init__(self, counts, *, client=None, scheduler: str | None = None,
                 workers: int | None = None, block_rows: int = DEFAULT_BLOCK_ROWS,
                 memory_limit="auto"):
        distributed = require_distributed("per-example accounting on Dask")
        import dask

        self._dask = dask
        self._as_completed = distributed.as_completed
        self._killed_worker = distributed.KilledWorker
        self._cluster = None
        self.owns_client = client is None
        if client is None:
            if scheduler is not None:
                client = connect_scheduler(scheduler, CONNECT_TIMEOUT)
            else:
                # neither client nor scheduler: the caller gave workers
                self._cluster = local_cluster(cast(int, workers), memory_limit=memory_limit)
                client = dask_client(self._cluster)
        self.client = client
        if self._cluster is None:  # a cluster of the user's: is it set up to run us fast?
            warn_malloc_trim(client)
        src = npy_source(counts)
        if src is not None:
            # rows of a .npy file on disk (shared file system; a row slice of it reads from
            # its first row's offset): each task reads its rows by path, itself (no read
            # task whose output the scheduler would place elsewhere: a task runs where its
            # block's state is, and the rows are read there: a separate read task may be
            # placed apart from the state, and rows or states then move between workers at
            # every pass; docs/scaling.md, section 4)
            self.bounds = as_blocks(counts, block_rows)
            nb = int(counts.shape[1])
            self.blocks = [functools.partial(read_rows, src[0], src[1], counts.dtype.str, a, b,
                                             nb) for a, b in self.bounds]
            return
        self.bounds = as_blocks(counts, block_rows)
        if is_dask_array(counts):
            # one block per row chunk, all columns; read by the tasks at every pass
            counts = counts.rechunk({1: -1})
            self.blocks = [_own_graph(d) for d in counts.to_delayed(optimize_graph=True).ravel()]
        else:
            # numpy: each block a task holding its rows, persisted (the data stays in the
            # task, so a lost copy is recomputed)
            mk = dask.delayed(np.ascontiguousarray, pure=True)
            with warnings.catch_warnings():  # the data has to go to the cluster: on purpose
                warnings.filterwarnings("ignore", message="Sending large graph")
                self.blocks = client.persist([mk(np.ascontiguousarray(counts[a:b]))
                                              for a, b in self.bounds])

    @property
    def n_blocks(self) -> int:
        return len(self.bounds)

    def _share(self, obj):
        """Scatter ``obj`` to every worker (one future; small and large objects alike, so
        the task graphs stay small and nothing in them is mistaken for a task)."""
        return self.client.scatter([obj], broadcast=True, hash=False)[0]

    def run(self, fn: Callable, states: list, *shared, keep_state: bool = False,
            on_done: Callable | None = None, reads: bool = True,
            options: dict | None = None) -> tuple[list, list]:
        """Apply ``fn(block, state, *shared, **options)`` to every block on the cluster (the
        ``options``: a few small keyword values shipped with each task): the new states
        (futures, kept on the workers; the old ones with ``keep_state``, for passes that only
        read) and the outs (gathered as blocks complete; ``on_done(i, out)`` is called for
        each). ``reads=False``: ``fn`` does not read the counts (``block`` is None: the
        tasks do not read them, a pass over the states alone). Raises
        :class:`~tightdp.individual.blocks.LostBlocks` when a lost worker took state whose
        lineage Dask no longer has (the caller starts over)."""
        dly = self._dask.delayed
        blocks = self.blocks if reads else [None] * len(self.blocks)
        shared_f = [self._share(x) for x in shared]
        plain = [j for j, st in enumerate(states) if not hasattr(st, "key")]
        if plain:  # the first pass's small dicts: scattered in one call (one round trip)
            states = list(states)
            futs = self.client.scatter([states[j] for j in plain], broadcast=True, hash=False)
            for j, fut in zip(plain, futs, strict=True):
                states[j] = fut
        # one graph for the pass (one message to the scheduler, not one per block), its tasks
        # named after ``fn`` (the dashboard's and the tests' view of the passes); a pass
        # that keeps the states has one task per block, returning only its out
        tag = f"{getattr(fn, '__name__', 'pass')}-{uuid.uuid4().hex}"
        opts = dict(options or {})
        tasks = [dly(_apply)(fn, blk, st, keep_state, opts, *shared_f,
                             dask_key_name=(tag, i))
                 for i, (blk, st) in enumerate(zip(blocks, states, strict=True))]
        if keep_state:
            pairs = []
            outs_f = self.client.compute(tasks, retries=RETRIES)
            new = states
        else:
            pairs = self.client.compute(tasks, retries=RETRIES)
            n = len(pairs)
            outs_f = self.client.map(operator.getitem, pairs, [1] * n, retries=RETRIES,
                                     pure=False)
            new = self.client.map(operator.getitem, pairs, [0] * n, retries=RETRIES,
                                  pure=False)
        where = {f.key: i for i, f in enumerate(outs_f)}
        outs: list = [None] * len(outs_f)
        try:
            # the outs of the blocks completed since the last look, fetched together (one
            # round trip per batch, not one per block)
            for batch in self._as_completed(outs_f).batches():
                for f, out in zip(batch, self.client.gather(batch), strict=True):
                    i = where[f.key]
                    outs[i] = out
                    if on_done is not None:
                        on_done(i, out)
        except CancelledError as e:
            self.client.cancel(pairs + outs_f)
            raise LostBlocks(f"a Dask worker was lost with per-example state: {e}") from None
        except self._killed_worker as e:
            self.client.cancel(pairs + outs_f)
            raise BudgetExceeded(
                "block_rows: the workers running one block's task kept dying (Dask gave up: "
                f"{e}); typically a block over the workers' memory: use smaller block_rows or "
                "chunk_size, or workers with more memory") from None
        return new, outs

    def map(self, fn: Callable, items: list, *args) -> list:
        """``[fn(x, *args) for x in items]``, one task per item on the cluster, gathered."""
        futs = self.client.map(fn, items, *[[a] * len(items) for a in args], pure=False,
                               retries=RETRIES)
        try:
            return self.client.gather(futs)
        except CancelledError as e:
            raise LostBlocks(f"a Dask worker was lost: {e}") from None

    def assemble(self, states: list, fields: tuple[str, ...], lazy: bool = False) -> dict:
        """The per-example fields ``fields`` of every block's final state: dask arrays
        computed on the cluster (``lazy``) or gathered into numpy arrays (the fields of all
        blocks in one fetch)."""
        if not lazy:
            parts = self.client.gather(self.client.map(_fields_of, states,
                                                       [tuple(fields)] * len(states)))
            return {f: np.concatenate([p[f] for p in parts]) for f in fields}
        import dask.array as da

        dly = self._dask.delayed
        out = {}
        for f in fields:
            get = [self.client.submit(operator.getitem, st, f) for st in states]
            out[f] = da.concatenate([da.from_delayed(dly(g), shape=(b - a,), dtype=float)
                                     for g, (a, b) in zip(get, self.bounds, strict=True)])
        return out

    def worker_peak_memory(self) -> dict:
        """Each worker's peak resident memory since it started, in bytes (None where the
        platform does not say)."""
        return self.client.run(peak_memory)

    def close(self) -> None:
        """Close the client and the cluster if this object started them."""
        if self.owns_client:
            self.client.close()
        if self._cluster is not None:
            self._cluster.close()
