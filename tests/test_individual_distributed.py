"""Per-example accounting on a real dask.distributed LocalCluster (issue 18): the same numbers
as in process, a worker killed in the middle, memory per worker bounded by the block size."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import numpy as np
import pytest

from tightdp import IndividualPLDAccountant, IndividualSPAAccountant
from tightdp.individual import NormHistory
from tightdp.individual.blocks import DEFAULT_BLOCK_ROWS
from tightdp.sweep import dask_client, local_cluster

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

#: whether this process had MALLOC_TRIM_THRESHOLD_ before any cluster of this module
TRIM_BEFORE = "MALLOC_TRIM_THRESHOLD_" in os.environ

N, T, BUCKETS = 200_000, 50, 20
SETTING = {"sampling_rate": 0.02, "noise_multiplier": 1.0, "clip_norm": 1.0}
DELTA = 1e-5


@pytest.fixture(scope="module")
def counts() -> np.ndarray:
    """Bucket counts of 2e5 examples over 50 steps: norms from 5% to 150% of C."""
    rng = np.random.default_rng(3)
    h = NormHistory(**SETTING, n_examples=N, n_buckets=BUCKETS)
    scale = rng.uniform(0.05, 1.5, N)
    for _ in range(T):
        h.step(scale * rng.uniform(0.5, 1.2, N))
    return h.counts.copy()


@pytest.fixture(scope="module")
def in_process(counts):
    return IndividualPLDAccountant.from_counts(counts, **SETTING, progress=False).epsilon(DELTA)


@pytest.fixture(scope="module")
def client():
    # the library's own LocalCluster (2 single-threaded processes; Dask's default
    # MALLOC_TRIM_THRESHOLD_ would also leak into this process's environment: test_sweep)
    with local_cluster(2, memory_limit="3GB") as cluster, dask_client(cluster) as c:
        yield c


def _same(a, b, rtol=1e-12):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=rtol, atol=0)


@pytest.mark.filterwarnings("ignore:Sending large graph")
def test_pld_on_cluster_equals_in_process(counts, in_process, client):
    dc = da.from_array(counts, chunks=(30_000, -1)).persist()
    r = IndividualPLDAccountant.from_counts(dc, **SETTING, client=client,
                                            progress=False).epsilon(DELTA)
    # the user's cluster and dask counts: lazy per-example arrays on that cluster
    assert isinstance(r.upper, da.Array) and isinstance(r.lower, da.Array)
    _same(r.upper.compute(), in_process.upper)
    _same(r.lower.compute(), in_process.lower)
    assert r.certified and r.details["converged"] == in_process.details["converged"]
    # (other cuts than in process: 30000-row chunks there, the default block size here)
    assert r.details["blocks"] == 7
    assert in_process.details["blocks"] == -(-N // DEFAULT_BLOCK_ROWS) != 7
    # the summary, reduced over blocks, against the gathered arrays
    s = r.details["summary"]
    up = in_process.upper
    assert s["count"] == N and s["max"] == pytest.approx(up.max(), rel=1e-12)
    assert s["worst"][0]["value"] == pytest.approx(up.max(), rel=1e-12)
    assert up[s["worst"][0]["index"]] == pytest.approx(up.max(), rel=1e-12)
    for qq, edge in s["quantiles_upper"].items():
        true_q = np.quantile(up, float(qq), method="inverted_cdf")
        assert true_q <= edge <= true_q * 1.024  # the bin's upper edge: never below


def test_worker_killed_mid_run_same_result(counts, in_process, client):
    """A worker process killed (SIGKILL) while the per-example passes run: the nanny starts
    a new one, Dask recomputes what was lost from its lineage, the answer is unchanged."""
    acc = IndividualPLDAccountant.from_counts(counts, **SETTING, client=client,
                                              block_rows=25_000, progress=False)
    out = {}
    th = threading.Thread(target=lambda: out.setdefault("r", acc.epsilon(DELTA)))
    th.start()
    # wait until the evaluation passes are running, then kill one worker
    deadline = time.time() + 60
    while time.time() < deadline:
        busy = client.processing()
        if sum(len(v) for v in busy.values()) and any("evaluate" in str(k)
                                                       for v in busy.values() for k in v):
            break
        time.sleep(0.05)
    pids = client.run(os.getpid)
    victim = sorted(pids)[0]
    os.kill(pids[victim], signal.SIGKILL)
    assert th.is_alive()  # killed in the middle of the query, not after it
    th.join(120)
    assert not th.is_alive()
    r = out["r"]
    assert isinstance(r.upper, np.ndarray)  # numpy counts: gathered
    _same(r.upper, in_process.upper)
    _same(r.lower, in_process.lower)
    client.wait_for_workers(2, timeout=60)


def test_spa_on_cluster_equals_in_process(counts, client):
    part = counts[:100_000]
    local = IndividualSPAAccountant.from_counts(part, **SETTING, progress=False,
                                                chunk_size=20_000).epsilon(DELTA)
    r = IndividualSPAAccountant.from_counts(part, **SETTING, progress=False, client=client,
                                            chunk_size=20_000).epsilon(DELTA)
    # the worker processes run BLAS single-threaded (the products may round differently)
    _same(r.epsilon, local.epsilon)
    _same(r.upper, local.upper)
    assert np.array_equal(r.details["reliable"], local.details["reliable"])
    assert r.details["summary"]["count"] == part.shape[0]


def test_store_and_memory_per_worker(counts, in_process, tmp_path):
    """On a fresh 2-worker cluster (workers=2, started and closed by the query), results
    written to a store; each worker's peak memory stays within a bound set by the block and
    chunk sizes, whatever N."""
    blocks = 10_000
    acc = IndividualPLDAccountant.from_counts(counts, **SETTING, progress=False, workers=2,
                                              block_rows=blocks, chunk_size=1024,
                                              store=tmp_path / "eps")
    r = acc.epsilon(DELTA)
    peaks = [x / 1e6 for x in r.details["worker_peak_memory"].values()]
    assert isinstance(r.upper, np.memmap)
    _same(r.upper, in_process.upper)
    _same(np.load(tmp_path / "eps" / "lower.npy"), in_process.lower)
    # a block: counts (int64 and float copies, 21 columns) and ~10 per-example arrays; the
    # evaluator: ~6 complex (chunk x frequencies) arrays; the bucket transforms; over the
    # ~200 MB of an idle worker (python, numpy, scipy, dask)
    kmax = max(r.details["max_frequencies_0"], r.details["max_frequencies_1"])
    fft = max(r.details["fft_points_0"], r.details["fft_points_1"])
    bound_mb = 250 + (blocks * (16 * (BUCKETS + 1) + 80) + 96 * 1024 * kmax
                      + 4 * 5 * BUCKETS * 8 * fft) / 1e6
    assert len(peaks) == 2
    assert max(peaks) < bound_mb, (peaks, bound_mb)


def test_cli_individual_on_workers_equals_python_api(counts, tmp_path, capsys):
    from tightdp.cli import main

    path = tmp_path / "counts.npy"
    np.save(path, counts[:20_000])
    local = IndividualPLDAccountant.from_counts(counts[:20_000], **SETTING,
                                                progress=False).epsilon(DELTA)
    assert main(["individual", "--counts", str(path), "--sampling-rate", "0.02",
                 "--noise-multiplier", "1", "--delta", "1e-5", "--workers", "2",
                 "--block-rows", "6000", "--out", str(tmp_path / "eps"), "--json",
                 "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    _same(np.load(tmp_path / "eps" / "epsilon.npy"), local.upper)
    _same(np.load(tmp_path / "eps" / "lower.npy"), local.lower)
    assert out["n_examples"] == 20_000 and out["certified"]
    assert out["max"] == pytest.approx(local.upper.max(), rel=1e-12)
    worst = int(np.argmax(local.upper))
    assert out["worst"][0]["index"] == worst
    assert out["worst"][0]["lower"] == pytest.approx(local.lower[worst], rel=1e-12)
    assert out["quantiles_upper"]["1"] == pytest.approx(local.upper.max(), rel=1e-12)
    with pytest.raises(SystemExit):
        main(["individual", "--counts", str(path), "--sampling-rate", "0.02",
              "--noise-multiplier", "1", "--delta", "1e-5", "--workers", "2",
              "--scheduler", "tcp://127.0.0.1:1"])
    assert "not both" in capsys.readouterr().err


def test_recorder_to_accountants_in_process_and_on_cluster(tmp_path, client, capsys):
    """Norms recorded on disk (NormRecorder) give the same per-example numbers as the same
    norms fed to the accountants in memory: from the memmap in process, from counts_dask on
    the cluster, SPA from_history, and the CLI on the recording's directory."""
    from tightdp import NormRecorder
    from tightdp.cli import main

    rng = np.random.default_rng(5)
    n, t = 10_000, 30
    rec = NormRecorder.create(tmp_path / "rec", **SETTING, n_examples=n, n_buckets=BUCKETS,
                              chunk_size=3_000, buffer_steps=16)
    mem = IndividualPLDAccountant(**SETTING, n_examples=n, n_buckets=BUCKETS, progress=False)
    spa_mem = IndividualSPAAccountant.from_history(mem, progress=False)
    scale = rng.uniform(0.05, 1.5, n)
    for _ in range(t):
        g = scale * rng.uniform(0.5, 1.2, n)
        rec.step(g)
        mem.step(g)
    ref = mem.epsilon(DELTA)
    assert np.array_equal(rec.counts, mem.counts)
    local = IndividualPLDAccountant.from_counts(rec.counts, **SETTING,
                                                progress=False).epsilon(DELTA)
    assert np.array_equal(local.upper, ref.upper) and np.array_equal(local.lower, ref.lower)
    dist = IndividualPLDAccountant.from_counts(rec.counts_dask(), **SETTING, client=client,
                                               progress=False).epsilon(DELTA)
    _same(dist.upper.compute(), ref.upper)
    _same(dist.lower.compute(), ref.lower)
    spa_ref = spa_mem.epsilon(DELTA)  # shares the in-memory counts: sees every step
    spa_rec = IndividualSPAAccountant.from_history(rec, progress=False).epsilon(DELTA)
    assert np.array_equal(spa_rec.epsilon, spa_ref.epsilon)
    with pytest.raises(ValueError, match="records no steps"):
        IndividualSPAAccountant.from_history(rec).step(np.ones(n))
    assert main(["individual", "--counts", str(tmp_path / "rec"), "--delta", "1e-5",
                 "--json", "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["max"] == pytest.approx(ref.upper.max(), rel=1e-12)
    with pytest.raises(SystemExit):
        main(["individual", "--counts", str(tmp_path / "rec"), "--delta", "1e-5",
              "--noise-multiplier", "2"])
    assert "differs from the recording" in capsys.readouterr().err


def test_unreachable_scheduler_is_one_line(counts, monkeypatch):
    from tightdp.individual import distributed as dist

    monkeypatch.setattr(dist, "CONNECT_TIMEOUT", "1s")
    acc = IndividualPLDAccountant.from_counts(counts[:100], **SETTING,
                                              scheduler="tcp://127.0.0.1:1")
    with pytest.raises(ValueError, match="cannot connect to a Dask scheduler"):
        acc.epsilon(DELTA)
    with pytest.raises(ValueError, match="workers must be"):
        IndividualSPAAccountant.from_counts(counts[:100], **SETTING, workers=0)


def test_user_cluster_with_malloc_trim_is_warned(counts, client):
    """Workers of a user's cluster running with Dask's default ``MALLOC_TRIM_THRESHOLD_=65536``
    (glibc returns memory at every large free: measured 1.6-2x the CPU per block) get the
    query a RuntimeWarning saying so; the library's own cluster (``client`` here) none, and
    the answer is the same either way."""
    import warnings

    part = counts[:2000]
    with local_cluster(1, env={"MALLOC_TRIM_THRESHOLD_": "65536"}) as cluster, \
            dask_client(cluster) as user:
        with pytest.warns(RuntimeWarning, match="MALLOC_TRIM_THRESHOLD_=65536"):
            slow = IndividualSPAAccountant.from_counts(part, **SETTING, progress=False,
                                                       client=user).epsilon(DELTA)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        ours = IndividualSPAAccountant.from_counts(part, **SETTING, progress=False,
                                                   client=client).epsilon(DELTA)
    _same(slow.epsilon, ours.epsilon)
    assert "MALLOC_TRIM_THRESHOLD_" not in os.environ or TRIM_BEFORE


def test_npy_memmap_row_slice_on_cluster(counts, tmp_path, client):
    """A row slice of a ``.npy`` file opened as a memmap: the workers read its rows by path
    from the slice's first row (not the file's), and a column slice (not whole rows) goes to
    the cluster as data; both give the in-process numbers of the same rows."""
    path = tmp_path / "counts.npy"
    np.save(path, counts[:9000])
    mm = np.load(path, mmap_mode="r")
    part = mm[3000:7500]
    local = IndividualSPAAccountant.from_counts(np.asarray(part), **SETTING,
                                                progress=False).epsilon(DELTA)
    dist = IndividualSPAAccountant.from_counts(part, **SETTING, progress=False,
                                               client=client, chunk_size=1000).epsilon(DELTA)
    _same(dist.epsilon, local.epsilon)
    _same(dist.upper, local.upper)
    assert dist.details["summary"]["count"] == 4500
    # whole rows as columns 0..10 of a 21-column file: not rows of the file on disk
    wide = np.concatenate([counts[:4000], counts[:4000]], axis=1)
    np.save(tmp_path / "wide.npy", wide)
    cols = np.load(tmp_path / "wide.npy", mmap_mode="r")[:, :BUCKETS + 1]
    local2 = IndividualSPAAccountant.from_counts(np.asarray(cols), **SETTING,
                                                 progress=False).epsilon(DELTA)
    dist2 = IndividualSPAAccountant.from_counts(cols, **SETTING, progress=False,
                                                client=client, chunk_size=1000).epsilon(DELTA)
    _same(dist2.epsilon, local2.epsilon)
