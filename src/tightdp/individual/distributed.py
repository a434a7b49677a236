"""Per-example accounting on a Dask cluster (the optional extra ``tightdp[dask]``).

:class:`DaskBlocks` runs the passes of the individual accountants (see
:mod:`tightdp.individual.blocks` for the protocol) with ``dask.distributed``: one task per
block of examples and pass, each block's state between passes kept on the workers as a
future, what the driver computed once (bucket transforms, tables) scattered to every worker
once per pass (broadcast), and only small per-block summaries gathered. A worker lost in the
middle is not a failure: every state is a pure function of the counts and of what was
shipped, so Dask recomputes what it held from its lineage, and the answer is the same.

Counts given as a ``dask.array`` are read block by block by the tasks themselves (from
whatever the array is built on: a :class:`~tightdp.individual.NormRecorder` file, zarr, ...),
again at every pass, so no worker ever holds more than the blocks it is working on. A numpy
array is cut into blocks whose copies live in the cluster (and, as task data, on the
scheduler) for the duration of the query.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Callable

import numpy as np

from .blocks import DEFAULT_BLOCK_ROWS, as_blocks

__all__ = ["DaskBlocks", "require_dask"]

#: how many times a task is retried after an error on a worker (a lost worker is not one)
RETRIES = 2


def require_dask():
    """Import ``dask`` and ``distributed`` or raise a one-line ImportError saying how to get
    them."""
    try:
        import dask
        import distributed
    except ImportError:  # pragma: no cover - the extra is installed in CI
        raise ImportError('per-example accounting on Dask needs the dask extra: pip install '
                          '"tightdp[dask]"') from None
    return dask, distributed


class DaskBlocks:
    """Runs passes over the row blocks of ``counts`` on a Dask cluster: ``client`` (used as
    is), else ``scheduler`` (the address of a running cluster), else a ``LocalCluster`` of
    ``workers`` single-threaded worker processes started here and closed by :meth:`close`."""

    distributed = True

    def __init__(self, counts, *, client=None, scheduler: str | None = None,
                 workers: int | None = None, block_rows: int = DEFAULT_BLOCK_ROWS,
                 memory_limit="auto"):
        dask, distributed = require_dask()
        self._dask = dask
        self._as_completed = distributed.as_completed
        self._cluster = None
        self.owns_client = client is None
        if client is None:
            if scheduler is not None:
                client = distributed.Client(scheduler)
            else:
                self._cluster = distributed.LocalCluster(
                    n_workers=int(workers), threads_per_worker=1, processes=True,
                    dashboard_address=None, memory_limit=memory_limit)
                client = distributed.Client(self._cluster)
        self.client = client
        self.bounds = as_blocks(counts, block_rows)
        if type(counts).__module__.split(".")[0] == "dask":
            # one block per row chunk, all columns; read by the tasks at every pass
            counts = counts.rechunk({1: -1})
            self.blocks = list(counts.to_delayed(optimize_graph=True).ravel())
        else:
            # numpy (or a memmap): each block a task holding its rows, persisted (the data
            # stays in the task, so a lost copy is recomputed)
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

    def run(self, fn: Callable, states: list, *shared,
            on_done: Callable | None = None) -> tuple[list, list]:
        """Apply ``fn(block, state, *shared)`` to every block on the cluster: the new states
        (futures, kept on the workers) and the outs (gathered as blocks complete;
        ``on_done(i, out)`` is called for each)."""
        dly = self._dask.delayed
        shared_f = [self._share(x) for x in shared]
        states = [st if hasattr(st, "key") else self._share(st) for st in states]
        new, outs_f = [], []
        for blk, st in zip(self.blocks, states, strict=True):
            pair = self.client.compute(dly(fn)(blk, st, *shared_f), retries=RETRIES)
            new.append(self.client.submit(operator.getitem, pair, 0, retries=RETRIES))
            outs_f.append(self.client.submit(operator.getitem, pair, 1, retries=RETRIES))
            del pair
        where = {f.key: i for i, f in enumerate(outs_f)}
        outs: list = [None] * len(outs_f)
        for f in self._as_completed(outs_f):
            i = where[f.key]
            outs[i] = f.result()
            if on_done is not None:
                on_done(i, outs[i])
        return new, outs

    def assemble(self, states: list, field: str, lazy: bool = False):
        """The per-example field ``field`` of every block's final state: a dask array
        computed on the cluster (``lazy``) or gathered into one numpy array."""
        get = [self.client.submit(operator.getitem, st, field) for st in states]
        if not lazy:
            return np.concatenate(self.client.gather(get))
        import dask.array as da

        dly = self._dask.delayed
        return da.concatenate([da.from_delayed(dly(f), shape=(b - a,), dtype=float)
                               for f, (a, b) in zip(get, self.bounds, strict=True)])

    def close(self) -> None:
        """Close the client and the cluster if this object started them."""
        if self.owns_client:
            self.client.close()
        if self._cluster is not None:
            self._cluster.close()
