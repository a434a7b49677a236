"""The Dask pieces shared by the sweeps (:mod:`tightdp.sweep`) and per-example accounting on a
cluster (:mod:`tightdp.individual.distributed`): importing the optional extra with one clear
line when it is missing, the ``LocalCluster`` this library starts, and a worker's peak
memory."""

from __future__ import annotations

import os
import sys
import warnings

from . import _validate as v

__all__ = ["require_distributed", "local_cluster", "peak_memory", "warn_malloc_trim"]

#: a worker's ``MALLOC_TRIM_THRESHOLD_`` below this (bytes) is warned about
#: (:func:`warn_malloc_trim`); Dask's default is 65536
MALLOC_TRIM_WARN = 1 << 20


def require_distributed(what: str):
    """``dask.distributed``, or a one-line ImportError saying that ``what`` needs it and how
    to install it."""
    try:
        import distributed
    except ImportError:  # pragma: no cover - the extra is installed in CI
        raise ImportError(f'{what} needs dask.distributed: pip install "tightdp[dask]"'
                          ) from None
    return distributed


#: attempts at a client's handshake with a scheduler: distributed's own can trip on a
#: transient race (``assert len(msg) == 1`` in ``Client._ensure_connected``; seen once in CI,
#: on a fresh LocalCluster), and a new attempt connects
CONNECT_ATTEMPTS = 3


def dask_client(target, **options):
    """``distributed.Client(target, **options)`` for a cluster or a scheduler's address,
    tried again (up to :data:`CONNECT_ATTEMPTS` times in all) when distributed's handshake
    trips on its internal assertion."""
    distributed = require_distributed("a Dask client")
    for _ in range(CONNECT_ATTEMPTS - 1):
        try:
            return distributed.Client(target, **options)
        except AssertionError:
            pass
    return distributed.Client(target, **options)


def connect_scheduler(address: str, timeout: str):
    """:func:`dask_client` of the running scheduler at ``address``; a one-line ValueError
    naming it when it cannot be reached within ``timeout`` (the ``scheduler=`` of the
    per-example accountants and of sweeps)."""
    try:
        return dask_client(address, timeout=timeout)
    except (OSError, ValueError, AssertionError) as err:
        msg = " ".join(str(err).split())
        raise ValueError(f"scheduler {address!r}: cannot connect to a Dask scheduler there "
                         f"({msg})") from None


def local_cluster(workers: int, **options):
    """The ``distributed.LocalCluster`` this library starts for ``workers=N``: ``workers``
    single-threaded worker processes, a dashboard on a free port, no progress bars from the
    workers (their stderr may be this terminal), and **without** Dask's default
    ``MALLOC_TRIM_THRESHOLD_=65536`` in the workers' environment (the other pre-spawn
    variables, ``OMP_NUM_THREADS=1`` and the like, are kept). That setting makes glibc hand
    memory back to the system at every large free, so every array of a PLD, PRV or FFT query
    is page-faulted in afresh, which costs the workers far more CPU than the same work in
    one process (figures in docs/scaling.md, section 4). The workers hold no
    data between tasks that this setting would protect. (Dask writes the pre-spawn variables
    into this process's ``os.environ`` when it starts a worker, so a cluster started earlier
    in this process with the default leaves the variable set: it is then inherited.)

    Parameters
    ----------
    workers : number of worker processes (>= 1).
    **options : passed on to ``LocalCluster`` (e.g. ``memory_limit="2GB"``).
    """
    workers = v.count("workers", workers, minimum=1)
    distributed = require_distributed(f"a local Dask cluster (workers={workers})")
    import dask

    environ = {k: x for k, x in dask.config.get("distributed.nanny.pre-spawn-environ",
                                                 {}).items() if k != "MALLOC_TRIM_THRESHOLD_"}
    kw = {"threads_per_worker": 1, "processes": True, "dashboard_address": ":0",
          "env": {"TIGHTDP_PROGRESS": "0"}, **options}
    with dask.config.set({"distributed.nanny.pre-spawn-environ": environ}):
        return distributed.LocalCluster(n_workers=workers, **kw)


def malloc_trim_threshold() -> int | None:
    """This process's ``MALLOC_TRIM_THRESHOLD_`` (bytes), None if unset or not a number."""
    try:
        return int(os.environ["MALLOC_TRIM_THRESHOLD_"])
    except (KeyError, ValueError):
        return None


def warn_malloc_trim(client) -> None:
    """Warn (a ``RuntimeWarning``) when workers of ``client``'s cluster run with a small
    ``MALLOC_TRIM_THRESHOLD_`` (Dask's default for the workers its nannies start: 65536):
    glibc then hands memory back at every large free and every array of the accountants is
    page-faulted in afresh, which costs far more CPU per block or sweep row (see
    :func:`local_cluster`, which starts its workers without it). Says nothing when the
    workers cannot be asked."""
    try:
        env = client.run(malloc_trim_threshold)
    except Exception:  # noqa: BLE001 - a diagnostic only: never fails the query
        return
    small = sorted(x for x in env.values() if x is not None and x < MALLOC_TRIM_WARN)
    if small:
        warnings.warn(f"{len(small)} Dask worker(s) run with MALLOC_TRIM_THRESHOLD_={small[0]} "
                      "(Dask's default): per-example accounting and sweeps take 1.6-2x the CPU "
                      "there; start the workers without it (dask config "
                      "distributed.nanny.pre-spawn-environ, or tightdp's workers=N cluster)",
                      RuntimeWarning, stacklevel=3)


def peak_memory() -> int | None:
    """Peak resident set size of this process in bytes: ``VmHWM`` of ``/proc/self/status``
    (Linux; ``getrusage``'s maximum would carry the peak of the process that forked this one
    across fork and exec, as a Dask nanny's workers do), else ``getrusage`` (kB on Linux,
    bytes on macOS), else None."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        import resource
    except ImportError:  # pragma: no cover - not on Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)
