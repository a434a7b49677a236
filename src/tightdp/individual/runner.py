"""Where an individual accountant's blocks of examples run -- in this process
(:class:`~tightdp.individual.blocks.LocalBlocks`) or on Dask
(:class:`~tightdp.individual.distributed.DaskBlocks`) -- and where its per-example arrays go;
and the accountants' ``from_counts`` (Koskela, Tobaben, Honkela 2023, App. D.2: an example's
privacy depends on its norms only through its bucket counts)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import _validate as v
from .blocks import LocalBlocks, is_dask_array
from .distributed import DaskBlocks

__all__ = ["BlockRunner"]


class BlockRunner:
    """Mixin of the individual accountants: ``workers`` / ``scheduler`` / ``client`` choose
    Dask, ``store`` a directory for the per-example arrays."""

    if TYPE_CHECKING:  # provided by the accountant class this is mixed into
        counts: Any
        attach: Callable[..., Any]

    def _set_where(self, workers: int | None, scheduler: str | None, client, store) -> None:
        self.workers = None if workers is None else v.count("workers", workers, minimum=1)
        self.scheduler = scheduler
        self.client = client
        self.store = store

    def _executor(self, block_rows: int):
        """The executor of one query over :attr:`counts` in blocks of ``block_rows`` rows (a
        dask array keeps its chunks)."""
        if self.workers is None and self.scheduler is None and self.client is None:
            return LocalBlocks(self.counts, block_rows)
        return DaskBlocks(self.counts, client=self.client, scheduler=self.scheduler,
                          workers=self.workers, block_rows=block_rows)

    def _lazy(self, ex) -> bool:
        """Are the per-example arrays left on the cluster (the user's client, dask counts)?"""
        return ex.distributed and not ex.owns_client and is_dask_array(self.counts)

    @classmethod
    def from_counts(cls, counts, *, sampling_rate: float, noise_multiplier: float,
                    clip_norm: float, **kwargs):
        """An accountant over recorded bucket counts (``N x (n_buckets + 1)`` integers: column
        0 the steps without loss, column ``j`` the steps whose norm ratio was rounded up to
        ``j / n_buckets``): :attr:`NormHistory.counts`, a
        :class:`~tightdp.individual.NormRecorder`'s (a memmap) or its ``counts_dask()``, any
        numpy array, memmap or ``dask.array``; read block by block, never copied whole.
        ``kwargs`` as for the constructor (``n_buckets`` is the number of columns minus one).
        It answers queries and records no further steps."""
        return cls.attach(counts, sampling_rate=sampling_rate,
                          noise_multiplier=noise_multiplier, clip_norm=clip_norm, **kwargs)
