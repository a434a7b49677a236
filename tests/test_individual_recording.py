"""Recording per-example gradient norms: the in-memory NormHistory's O(N)-per-step flush and
the on-disk NormRecorder (chunked input, crash-safe resume, dask input and output).

Counts are checked against the bincount formula the flush used before (one step at a time:
``counts[i, bucket(g_i)] += 1``), against placements worked out by hand (norm 0 -> column 0,
NaN and norms above C -> column B, ``0.35 C`` with B = 10 -> column 4), and, for the
recorder, for exact equality with a NormHistory fed the same norms.
"""

from __future__ import annotations

import json
import os
import pickle
import tracemalloc

import numpy as np
import pytest

from tightdp.individual import NormHistory
from tightdp.individual.history import bucket_index
from tightdp.individual.recording import NormRecorder

SETTING = {"sampling_rate": 0.01, "noise_multiplier": 1.0, "clip_norm": 2.0}


def _norms(rng: np.random.Generator, n: int) -> np.ndarray:
    """One step's norms: exponential around C / 2, with zeros, NaN and norms above C."""
    g = rng.exponential(SETTING["clip_norm"] / 2, size=n)
    u = rng.random(n)
    g[u < 0.1] = 0.0
    g[(u >= 0.1) & (u < 0.15)] = np.nan
    g[(u >= 0.15) & (u < 0.2)] *= 10.0
    # hand-placed examples (see _check_placements)
    g[:4] = [0.0, np.nan, 5 * SETTING["clip_norm"], 0.35 * SETTING["clip_norm"]]
    return g


def _bincount_reference(steps: list[np.ndarray], n_buckets: int) -> np.ndarray:
    """The former flush: per step a bincount of ``row * (B + 1) + bucket`` over N x (B + 1)."""
    n, nb = steps[0].size, n_buckets + 1
    grid = np.arange(1, n_buckets + 1) / n_buckets
    out = np.zeros((n, nb), dtype=np.int64)
    c = SETTING["clip_norm"]
    for g in steps:
        idx = bucket_index(np.minimum(g, c) / c, grid)
        out += np.bincount(np.arange(n) * nb + idx, minlength=n * nb).reshape(n, nb)
    return out


def _check_placements(counts: np.ndarray, n_buckets: int, t: int) -> None:
    """Rows 0-3 (norm 0, NaN, 5 C, 0.35 C at every step) by hand; every row sums to t."""
    assert counts[0, 0] == t and counts[1, n_buckets] == t and counts[2, n_buckets] == t
    assert counts[3, int(np.ceil(0.35 * n_buckets - 1e-9))] == t
    assert np.all(counts.sum(axis=1) == t)


def _history(n: int, n_buckets: int, steps: list[np.ndarray]) -> NormHistory:
    h = NormHistory(**SETTING, n_examples=n, n_buckets=n_buckets)
    for g in steps:
        h.step(g)
    return h


# --- NormHistory: the O(N) flush -------------------------------------------------------------
@pytest.mark.parametrize("n, n_buckets, t", [(9001, 100, 70), (5, 10, 3), (300, 300, 65)])
def test_history_counts_equal_bincount_reference(n, n_buckets, t):
    # 9001 rows: three blocks of add_steps, the last one short; 70 steps: one flush of 64
    # steps, then 6 buffered; 300 buckets: uint16 indices
    rng = np.random.default_rng(n)
    steps = [_norms(rng, n) for _ in range(t)]
    h = _history(n, n_buckets, steps)
    assert np.array_equal(h.counts, _bincount_reference(steps, n_buckets))
    _check_placements(h.counts, n_buckets, t)


# --- NormRecorder: the same counts on disk ---------------------------------------------------
def _create(tmp_path, n, n_buckets=10, **kw) -> NormRecorder:
    return NormRecorder.create(tmp_path / "rec", **SETTING, n_examples=n, n_buckets=n_buckets,
                               **kw)


def _as_kind(g: np.ndarray, kind: str, cut: int = 77):
    """One step's norms given as an array, a generator of pieces, or a list of pieces."""
    if kind == "array":
        return g
    pieces = (g[a:a + cut] for a in range(0, g.size, cut))
    return pieces if kind == "generator" else list(pieces)


@pytest.mark.parametrize("n, chunk_size, buffer_steps", [(19, 1, 3), (53, 7, 1), (1003, 100, 5),
                                                         (1003, 1003, 64), (1003, 5000, 4)])
def test_recorder_counts_equal_history(tmp_path, n, chunk_size, buffer_steps):
    # n not a multiple of the chunk sizes above 1; t not a multiple of the buffers (small n
    # with small chunks: every chunk of every flush is a synced commit)
    t = 23
    rng = np.random.default_rng(chunk_size)
    steps = [_norms(rng, n) for _ in range(t)]
    rec = _create(tmp_path, n, chunk_size=chunk_size, buffer_steps=buffer_steps)
    for s, g in enumerate(steps):
        rec.step(_as_kind(g, ("array", "generator", "list")[s % 3]))
    h = _history(n, 10, steps)
    assert isinstance(rec, NormHistory)
    assert rec.n_steps == h.n_steps == t
    assert np.array_equal(rec.counts, h.counts)
    assert rec.counts.dtype == np.uint32 and not rec.counts.flags.writeable
    _check_placements(rec.counts, 10, t)
    for attr in ("sampling_rate", "noise_multiplier", "clip_norm", "n_examples"):
        assert getattr(rec, attr) == getattr(h, attr)
    assert np.array_equal(rec.grid, h.grid)
    # reopened: the same recording
    again = NormRecorder.open(tmp_path / "rec")
    assert again.n_steps == t and np.array_equal(again.counts, h.counts)


def test_recorder_list_of_scalars_is_one_array(tmp_path):
    g = np.array([0.0, 0.7, 3.0, np.nan, 1.0])
    rec = _create(tmp_path, 5, chunk_size=2)
    rec.step(list(g))
    rec.step([np.float32(x) for x in g])
    assert np.array_equal(rec.counts, _history(5, 10, [g, g.astype(np.float32)]).counts)


def test_recorder_step_many_and_metadata(tmp_path):
    rng = np.random.default_rng(3)
    g = np.stack([_norms(rng, 50) for _ in range(9)], axis=1)
    rec = _create(tmp_path, 50, n_buckets=300, chunk_size=16, buffer_steps=4, dtype="uint16")
    rec.step_many(g)
    h = NormHistory(**SETTING, n_examples=50, n_buckets=300)
    h.step_many(g)
    assert np.array_equal(rec.counts, h.counts)
    doc = json.loads((tmp_path / "rec" / "meta.json").read_text())
    assert doc["format"] == "tightdp-norm-recording" and doc["schema_version"] == 1
    assert (doc["n_steps"], doc["n_flushed"], doc["flush_rows"]) == (9, 9, None)
    assert (doc["dtype"], doc["index_dtype"], doc["chunk_size"]) == ("uint16", "uint16", 16)


# --- crashes ----------------------------------------------------------------------------------
class Crash(Exception):
    pass


def _crash_after(monkeypatch, name: str, k: int) -> None:
    """Let NormRecorder.<name> run k times, then raise Crash instead."""
    real = getattr(NormRecorder, name)
    calls = {"n": 0}

    def wrapped(self, *args, **kwargs):
        if calls["n"] >= k:
            raise Crash(name)
        calls["n"] += 1
        return real(self, *args, **kwargs)

    monkeypatch.setattr(NormRecorder, name, wrapped)


@pytest.mark.parametrize("where, k", [("_flush_chunk", 0), ("_flush_chunk", 2),
                                      ("_flush_chunk", 4), ("_end_flush", 0), ("_commit", 3)])
@pytest.mark.parametrize("resume", ["reopen", "same object"])
def test_recorder_resumes_after_crash_in_flush(tmp_path, monkeypatch, where, k, resume):
    n, cs = 1003, 200  # 6 chunks of rows
    rng = np.random.default_rng(k)
    steps = [_norms(rng, n) for _ in range(11)]
    rec = _create(tmp_path, n, chunk_size=cs, buffer_steps=4)
    for g in steps[:7]:
        rec.step(g)  # one flush done, 3 steps in the log
    with monkeypatch.context() as m:
        _crash_after(m, where, k)
        with pytest.raises(Crash):
            rec.step(steps[7])  # the 4th logged step: the flush crashes
    # "_commit" 3: the step's commit, the flush's start and its first chunk's commits pass;
    # the crash comes after the second chunk was counted, before its progress was committed
    if resume == "reopen":
        rec = NormRecorder.open(tmp_path / "rec")
    for g in steps[8:]:
        rec.step(g)
    assert rec.n_steps == 11
    assert np.array_equal(rec.counts, _history(n, 10, steps).counts)


def test_recorder_resumes_rows_half_updated(tmp_path, monkeypatch):
    """A crash inside the counting of one chunk: its rows hold different numbers of the
    logged steps (a prefix each); the resumed flush completes each row from its sum."""
    import tightdp.individual.recording as recording

    real = recording.add_steps
    n, cs = 1003, 300
    rng = np.random.default_rng(5)
    steps = [_norms(rng, n) for _ in range(10)]
    calls = {"n": 0}

    def partial(counts, logged, **kw):
        calls["n"] += 1
        if calls["n"] < 3:
            return real(counts, logged, **kw)
        real(counts, logged[:2])  # two steps in every row of the chunk
        real(counts[:101], [logged[2][:101]])  # a third in its first 101 rows
        raise Crash("mid-chunk")

    rec = _create(tmp_path, n, chunk_size=cs, buffer_steps=5)
    for g in steps[:4]:
        rec.step(g)
    monkeypatch.setattr(recording, "add_steps", partial)
    with pytest.raises(Crash):
        rec.step(steps[4])
    monkeypatch.undo()
    rec = NormRecorder.open(tmp_path / "rec")
    for g in steps[5:]:
        rec.step(g)
    assert np.array_equal(rec.counts, _history(n, 10, steps).counts)


def test_recorder_flush_is_idempotent_per_row(tmp_path, monkeypatch):
    """Progress lost (meta.json rolled back to the flush's start after 3 of 6 chunks were
    counted): the resumed flush counts nothing twice. Counts that no prefix of the logged
    steps explains are refused."""
    n, cs = 1003, 200
    rng = np.random.default_rng(11)
    steps = [_norms(rng, n) for _ in range(6)]
    rec = _create(tmp_path, n, chunk_size=cs, buffer_steps=4)
    for g in steps[:3]:
        rec.step(g)
    meta = tmp_path / "rec" / "meta.json"
    with monkeypatch.context() as m:
        _crash_after(m, "_flush_chunk", 3)
        with pytest.raises(Crash):
            rec.step(steps[3])
    doc = json.loads(meta.read_text())
    assert doc["flush_rows"] == 600
    meta.write_text(json.dumps(dict(doc, flush_rows=0)))
    rec = NormRecorder.open(tmp_path / "rec")
    for g in steps[4:]:
        rec.step(g)
    assert np.array_equal(rec.counts, _history(n, 10, steps).counts)
    # rows holding more steps than flushed + logged: refused, naming the first
    (tmp_path / "rec" / "steps.log").write_bytes(bytes(2 * n))
    meta.write_text(json.dumps(dict(json.loads(meta.read_text()), n_steps=5, n_flushed=3,
                                    flush_rows=0)))
    with pytest.raises(ValueError, match=r"counts.npy of .* is inconsistent with meta.json: "
                                         r"row 0 counts 6 steps, expected 3 to 5"):
        NormRecorder.open(tmp_path / "rec")


def test_recorder_crash_mid_step_leaves_no_trace(tmp_path):
    n = 1003
    rng = np.random.default_rng(6)
    steps = [_norms(rng, n) for _ in range(6)]
    rec = _create(tmp_path, n, chunk_size=100, buffer_steps=3)
    for g in steps[:4]:
        rec.step(g)

    def failing(g):
        yield g[:500]
        yield g[500:700]
        raise Crash("data source")

    with pytest.raises(Crash):
        rec.step(failing(steps[0] * 0 + 9.0))
    assert rec.n_steps == 4
    rec = NormRecorder.open(tmp_path / "rec")
    assert rec.n_steps == 4
    for g in steps[4:]:
        rec.step(g)
    assert np.array_equal(rec.counts, _history(n, 10, steps).counts)


# --- dask -------------------------------------------------------------------------------------
def test_recorder_dask_input_and_output(tmp_path):
    da = pytest.importorskip("dask.array")
    n = 1003
    rng = np.random.default_rng(7)
    steps = [_norms(rng, n) for _ in range(5)]
    rec = _create(tmp_path, n, chunk_size=128, buffer_steps=2)
    for g in steps:
        rec.step(da.from_array(g, chunks=300))
    h = _history(n, 10, steps)
    assert np.array_equal(rec.counts, h.counts)
    lazy = rec.counts_dask(chunks=250)
    assert lazy.chunks[0] == (250, 250, 250, 250, 3) and lazy.dtype == np.uint32
    # the graph holds the file's path, not the counts (44 kB of them)
    assert len(pickle.dumps(dict(lazy.__dask_graph__()))) < 8000
    assert np.array_equal(lazy.compute(), h.counts)
    assert np.array_equal(rec.counts_dask()[500:510].compute(), h.counts[500:510])
    with pytest.raises(ValueError, match=r"grad_norms must be >= 0"):
        rec.step(da.from_array(-steps[0] - 1.0, chunks=300))
    with pytest.raises(ValueError, match=r"grad_norms must have shape \(1003,\), got \(1002,\)"):
        rec.step(da.from_array(steps[0][1:], chunks=300))
    assert rec.n_steps == 5


def test_recorder_to_zarr(tmp_path):
    pytest.importorskip("zarr")
    pytest.importorskip("dask.array")
    import dask.array as da

    rng = np.random.default_rng(8)
    steps = [_norms(rng, 40) for _ in range(3)]
    rec = _create(tmp_path, 40, chunk_size=16)
    for g in steps:
        rec.step(g)
    rec.to_zarr(str(tmp_path / "counts.zarr"))
    back = da.from_zarr(str(tmp_path / "counts.zarr")).compute()
    assert np.array_equal(back, _history(40, 10, steps).counts)


# --- validation -------------------------------------------------------------------------------
def test_recorder_validation(tmp_path):
    n = 10
    rec = _create(tmp_path, n, chunk_size=4)
    good = np.full(n, 0.5)
    cases = [
        (np.ones(n + 1), r"grad_norms must have shape \(10,\), got \(11,\)"),
        (np.ones((n, 1)), r"grad_norms must have shape \(10,\), got \(10, 1\)"),
        ([good[:4], good[4:]], None),  # fine
        ([good[:4], good[4:], good[:1]], r"grad_norms must have shape \(10,\), got more "
                                         r"than 10 norms"),
        ([good[:4], good[4:9]], r"grad_norms must have shape \(10,\), got \(9,\)"),
        ([good[:4], good[4:].reshape(2, 3)], r"1-D pieces of it, got a piece of shape"),
        (np.where(np.arange(n) == 7, -1e-3, 0.5), r"grad_norms must be >= 0 \(NaN = unknown"),
        (iter([good[:8], -good[8:]]), r"grad_norms must be >= 0"),
        (3.0, r"grad_norms must have shape \(10,\), got \(\)"),
    ]
    for bad, msg in cases:
        if msg is None:
            rec.step(bad)
            continue
        with pytest.raises(ValueError, match=msg):
            rec.step(bad)
    assert rec.n_steps == 1
    assert np.array_equal(rec.counts, _history(n, 10, [good]).counts)

    for kw, msg in [({"dtype": "int8"}, r"dtype must be one of 'uint16', 'uint32', 'uint64'"),
                    ({"chunk_size": 0}, r"chunk_size must be an integer >= 1"),
                    ({"buffer_steps": 0}, r"buffer_steps must be an integer >= 1"),
                    ({"n_examples": 0}, r"n_examples must be an integer >= 1"),
                    ({"sampling_rate": 0.0}, r"sampling_rate must be in \(0, 1\]"),
                    ({"n_buckets": 0}, r"n_buckets must be an integer >= 1")]:
        args = {**SETTING, "n_examples": 5, **kw}
        with pytest.raises(ValueError, match=msg):
            NormRecorder.create(tmp_path / "other", **args)
    with pytest.raises(ValueError, match=r"path must not hold a recording already"):
        _create(tmp_path, n)
    with pytest.raises(ValueError, match=r"path must be a norm recording"):
        NormRecorder.open(tmp_path / "nothing")
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match=r"path must be a directory \(or not exist yet\)"):
        NormRecorder.create(tmp_path / "file", **SETTING, n_examples=n)


def test_recorder_open_checks_metadata(tmp_path):
    rec = _create(tmp_path, 6, chunk_size=4)
    rec.step(np.ones(6))
    meta = tmp_path / "rec" / "meta.json"
    good = json.loads(meta.read_text())
    for change, msg in [({"format": "tightdp-composition"}, r"format must be "),
                        ({"schema_version": 2}, r"schema_version must be 1"),
                        ({"n_steps": 99}, r"n_steps must be in \[n_flushed, n_flushed \+ "),
                        ({"n_examples": 7}, r"counts.npy must hold a C-ordered uint32 array "
                                            r"of shape \(7, 11\)"),
                        ({"dtype": "uint64"}, r"counts.npy must hold a C-ordered uint64"),
                        ({"index_dtype": "uint16"}, r"index_dtype must be 'uint8'"),
                        ({"n_steps": 3, "n_flushed": 0}, r"steps.log must hold the 3 steps")]:
        meta.write_text(json.dumps(dict(good, **change)))
        with pytest.raises(ValueError, match=msg):
            NormRecorder.open(tmp_path / "rec")
    doc = dict(good)
    del doc["flush_rows"]
    meta.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=r"meta.json must have the field 'flush_rows'"):
        NormRecorder.open(tmp_path / "rec")
    meta.write_text("{not json")
    with pytest.raises(ValueError, match=r"is not valid JSON"):
        NormRecorder.open(tmp_path / "rec")


def test_recorder_refuses_steps_beyond_dtype(tmp_path):
    rec = _create(tmp_path, 3, dtype="uint16", buffer_steps=1)
    meta = tmp_path / "rec" / "meta.json"
    doc = json.loads(meta.read_text())
    meta.write_text(json.dumps(dict(doc, n_steps=65535, n_flushed=65535)))
    rec = NormRecorder.open(tmp_path / "rec")
    with pytest.raises(ValueError, match=r"dtype='uint16' holds at most 65535 steps"):
        rec.step(np.ones(3))


# --- memory -----------------------------------------------------------------------------------
@pytest.mark.slow
def test_recorder_memory_bounded_by_chunk(tmp_path):
    """N = 1e7 examples (1e6 unless TIGHTDP_SLOW=1), 100 steps, chunks of 1e5: the numpy
    memory the recording allocates (tracemalloc: numpy reports its buffers) stays below
    64 bytes per example of a chunk -- independent of N and of the number of steps (the
    counts and the step log are memory maps)."""
    n = 10_000_000 if os.environ.get("TIGHTDP_SLOW") == "1" else 1_000_000
    cs, t = 100_000, 100
    rec = _create(tmp_path, n, n_buckets=100, chunk_size=cs, buffer_steps=64)

    def pieces(s):  # step s's norms, generated a chunk at a time
        for a in range(0, n, cs):
            yield np.random.default_rng((s, a)).exponential(1.0, size=min(cs, n - a))

    tracemalloc.start()
    try:
        for s in range(t):
            rec.step(pieces(s))
        c = rec.counts
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    print(f"peak {peak / 1e6:.1f} MB = {peak / cs:.1f} bytes per example of a chunk")
    assert peak < 64 * cs
    assert rec.n_steps == t
    # every row counts every step; the first chunk's rows as by the in-memory recorder
    for a in range(0, n, cs):
        assert np.all(c[a:a + cs].sum(axis=1) == t)
    first = _history(cs, 100, [next(pieces(s)) for s in range(t)])
    assert np.array_equal(c[:cs], first.counts)
