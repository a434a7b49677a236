"""Per-example gradient-norm recording on disk, for up to about 10^9 examples.

:class:`NormRecorder` is :class:`~tightdp.individual.NormHistory` (the same bucketing and the
same counts: Koskela, Tobaben, Honkela 2023, "Individual Privacy Accounting with Gaussian
Differential Privacy", App. D.2) kept in a directory instead of in memory::

    meta.json    the setting and the progress, a versioned JSON document (schema version 1):
                 {"format": "tightdp-norm-recording", "schema_version": 1,
                  "tightdp_version": "0.1.0", "sampling_rate": 0.01, "noise_multiplier": 1.0,
                  "clip_norm": 1.0, "n_examples": 1000000, "n_buckets": 100,
                  "dtype": "uint32", "index_dtype": "uint8", "chunk_size": 1000000,
                  "buffer_steps": 64, "n_steps": 130, "n_flushed": 128, "flush_rows": null}
    counts.npy   the (N, B + 1) counts (a ``.npy`` file, read and written as a memory map)
    steps.log    the bucket indices of the steps recorded since the last flush, one step after
                 the other (N indices of ``index_dtype`` per step)

Each step is read a chunk of ``chunk_size`` examples at a time, bucketed and appended to the
step log, then committed by rewriting ``meta.json`` (``n_steps``; written to a temporary file,
synced, and moved over the old one with :func:`os.replace`, which is atomic). Every
``buffer_steps`` steps the log is added to the counts, a chunk of rows at a time, each chunk
synced to disk and then committed the same way (``flush_rows``: the rows that hold the logged
steps). The counts of a row sum to its number of counted steps, and the steps are counted in
order, so the flush of a chunk is idempotent: a row gets only the logged steps its sum says it
lacks. When a flush is resumed after a crash (:meth:`NormRecorder.open`, or the next call on
the same object), the chunk that was being counted -- its rows may hold different numbers of
the steps -- is completed, never counted twice. A crash at any point therefore leaves every
step either counted once or not recorded at all.

Memory: O(chunk_size) per step (about 50 bytes per example of the chunk for the bucketing);
the flush maps the rows of one chunk of the counts and of the log at a time (resident pages
and address space O(chunk_size * (B + 1 + buffer_steps)) bytes) and counts them a few
thousand rows at a time.
Numpy only; :meth:`NormRecorder.counts_dask` and :meth:`NormRecorder.to_zarr` need the
optional ``dask`` extra.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Iterator

import numpy as np

from .. import _validate as v
from .._version import __version__
from .blocks import is_dask_array, npy_dask
from .history import NormHistory, add_steps, index_dtype

__all__ = ["NormRecorder", "FORMAT", "SCHEMA_VERSION"]

#: the ``format`` field of a recording's ``meta.json``
FORMAT = "tightdp-norm-recording"
#: the schema version this library writes and reads
SCHEMA_VERSION = 1

META, COUNTS, LOG = "meta.json", "counts.npy", "steps.log"
DTYPES = ("uint16", "uint32", "uint64")
_FIELDS = ("format", "schema_version", "tightdp_version", "sampling_rate", "noise_multiplier",
           "clip_norm", "n_examples", "n_buckets", "dtype", "index_dtype", "chunk_size",
           "buffer_steps", "n_steps", "n_flushed", "flush_rows")


def _write_json(path: str, doc: dict) -> None:
    """Replace the file ``path`` by ``doc`` atomically (temporary file, fsync, os.replace)."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)  # make the rename durable
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _import_dask():
    try:
        import dask.array as da
    except ImportError as err:  # pragma: no cover - the extra is installed in CI
        raise ImportError('counts_dask needs dask: pip install "tightdp[dask]"') from err
    return da


class NormRecorder(NormHistory):
    """Per-example gradient-norm history of a DP-SGD run, counted on disk.

    The same recorder as :class:`NormHistory` (``isinstance(recorder, NormHistory)``; the same
    attributes ``sampling_rate``, ``noise_multiplier``, ``clip_norm``, ``n_examples``,
    ``grid``, ``n_steps``; the same bucketing: the ratio ``min(g_i, C) / C`` rounded *up* to
    ``j / B``, NaN charged the full clipping norm) and the same counts, bit for bit, kept in a
    directory (see the module's documentation for the layout and why a crash at any point
    leaves each step counted once or not at all). Work per step is O(N) vector work, a chunk
    of ``chunk_size`` examples at a time; memory is O(chunk_size), whatever N and the number
    of steps. One process records into a directory at a time.

    Make one with :meth:`create`; resume one with :meth:`open` (or ``NormRecorder(path)``).
    """

    n_steps: int  # read from the recording's meta.json: always known

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        meta = os.path.join(self.path, META)
        if not os.path.isfile(meta):
            raise ValueError(f"path must be a norm recording (a directory holding {META}), "
                             f"got {self.path!r}")
        with open(meta) as f:
            try:
                doc = json.load(f)
            except json.JSONDecodeError as err:
                raise ValueError(f"{meta} is not valid JSON: {err}") from None
        self._doc = self._checked(doc)
        d = self._doc
        self._set_setting(d["sampling_rate"], d["noise_multiplier"], d["clip_norm"],
                          d["n_examples"], d["n_buckets"])
        self.dtype = np.dtype(d["dtype"])
        self.index_dtype = np.dtype(d["index_dtype"])
        self.chunk_size = d["chunk_size"]
        self.buffer_steps = d["buffer_steps"]
        self.n_steps = d["n_steps"]
        self._offset = self._counts_header()
        if not os.path.isfile(self._file(LOG)):
            open(self._file(LOG), "wb").close()
        size = os.path.getsize(self._file(LOG))
        if size < self._pending() * self._step_bytes():
            raise ValueError(f"{LOG} must hold the {self._pending()} steps {META} records "
                             f"since the last flush, got {size} bytes")
        if d["flush_rows"] is not None:
            self._flush()  # a flush was interrupted: complete it

    # --- making and opening ----------------------------------------------------------------
    @classmethod
    def create(cls, path: str | os.PathLike, *, sampling_rate: float, noise_multiplier: float,
               clip_norm: float, n_examples: int, n_buckets: int = 100,
               chunk_size: int = 1_000_000, buffer_steps: int = 64,
               dtype: str = "uint32") -> NormRecorder:
        """Create an empty recording in the directory ``path`` (made if missing; it must not
        hold a recording already).

        Parameters
        ----------
        path : the directory.
        sampling_rate, noise_multiplier, clip_norm, n_examples, n_buckets : the DP-SGD setting
            and the sensitivity grid, as for :class:`NormHistory`.
        chunk_size : examples read, bucketed and counted together (memory is O(chunk_size)).
        buffer_steps : steps kept in the step log before they are added to the counts (each
            flush rewrites the counts: larger is faster, the log holds ``buffer_steps * N``
            indices).
        dtype : of the counts: ``"uint16"`` (at most 65535 steps), ``"uint32"`` or
            ``"uint64"``.
        """
        probe = NormHistory.setting_only(sampling_rate=sampling_rate,
                                         noise_multiplier=noise_multiplier,
                                         clip_norm=clip_norm, n_examples=n_examples,
                                         n_buckets=n_buckets)
        chunk_size = v.count("chunk_size", chunk_size, minimum=1)
        buffer_steps = v.count("buffer_steps", buffer_steps, minimum=1)
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(map(repr, DTYPES))}, got "
                             f"{dtype!r}")
        path = os.fspath(path)
        if os.path.exists(path) and not os.path.isdir(path):
            raise ValueError(f"path must be a directory (or not exist yet), got {path!r}")
        if os.path.exists(os.path.join(path, META)):
            raise ValueError(f"path must not hold a recording already (open it with "
                             f"NormRecorder.open), got {path!r}")
        os.makedirs(path, exist_ok=True)
        nb = probe.grid.size + 1
        with open(os.path.join(path, COUNTS), "wb") as f:  # a .npy of zeros (sparse)
            header = {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
                      "fortran_order": False, "shape": (probe.n_examples, nb)}
            np.lib.format.write_array_header_1_0(f, header)
            f.truncate(f.tell() + probe.n_examples * nb * np.dtype(dtype).itemsize)
        open(os.path.join(path, LOG), "wb").close()
        doc = {"format": FORMAT, "schema_version": SCHEMA_VERSION,
               "tightdp_version": __version__, "sampling_rate": probe.sampling_rate,
               "noise_multiplier": probe.noise_multiplier, "clip_norm": probe.clip_norm,
               "n_examples": probe.n_examples, "n_buckets": int(probe.grid.size),
               "dtype": dtype, "index_dtype": index_dtype(nb).name, "chunk_size": chunk_size,
               "buffer_steps": buffer_steps, "n_steps": 0, "n_flushed": 0, "flush_rows": None}
        _write_json(os.path.join(path, META), doc)  # last: the recording now exists
        return cls(path)

    @classmethod
    def open(cls, path: str | os.PathLike) -> NormRecorder:
        """Resume the recording in the directory ``path``: the steps committed before a crash
        are there (counted once), a step being recorded when it happened is not; a flush that
        was interrupted is completed first."""
        return cls(path)

    @staticmethod
    def _checked(doc: object) -> dict:
        """``doc`` if it is a metadata document this version reads (one-line ValueError
        naming the field otherwise)."""
        if not isinstance(doc, dict):
            raise ValueError(f"{META} must hold a JSON object, got {type(doc).__name__}")
        for k in _FIELDS:
            if k not in doc:
                raise ValueError(f"{META} must have the field {k!r}")
        if doc["format"] != FORMAT:
            raise ValueError(f"format must be {FORMAT!r}, got {doc['format']!r}")
        if doc["schema_version"] != SCHEMA_VERSION:
            raise ValueError(f"schema_version must be {SCHEMA_VERSION} (the version this "
                             f"tightdp reads), got {doc['schema_version']!r}")
        for k in ("n_examples", "n_buckets", "chunk_size", "buffer_steps"):
            v.count(k, doc[k], minimum=1)
        for k in ("n_steps", "n_flushed"):
            v.count(k, doc[k])
        if doc["dtype"] not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(map(repr, DTYPES))}, got "
                             f"{doc['dtype']!r}")
        if doc["index_dtype"] != index_dtype(doc["n_buckets"] + 1).name:
            raise ValueError(f"index_dtype must be {index_dtype(doc['n_buckets'] + 1).name!r} "
                             f"for {doc['n_buckets']} buckets, got {doc['index_dtype']!r}")
        if not doc["n_flushed"] <= doc["n_steps"] <= doc["n_flushed"] + doc["buffer_steps"]:
            raise ValueError(f"n_steps must be in [n_flushed, n_flushed + buffer_steps] = "
                             f"[{doc['n_flushed']}, {doc['n_flushed'] + doc['buffer_steps']}],"
                             f" got {doc['n_steps']}")
        r = doc["flush_rows"]
        if r is not None:
            v.count("flush_rows", r)
            if r > doc["n_examples"]:
                raise ValueError(f"flush_rows must be null or in [0, n_examples], got {r}")
        return doc

    # --- files ------------------------------------------------------------------------------
    def _file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def _commit(self, **changes) -> None:
        """Update the metadata on disk (atomically) and here."""
        doc = dict(self._doc, **changes)
        _write_json(self._file(META), doc)
        self._doc = doc

    def _pending(self) -> int:
        """Steps in the log, not yet in the counts."""
        return self._doc["n_steps"] - self._doc["n_flushed"]

    def _step_bytes(self) -> int:
        return self.n_examples * self.index_dtype.itemsize

    # --- recording --------------------------------------------------------------------------
    def _pieces(self, grad_norms) -> Iterator[np.ndarray]:
        """One step's norms as float arrays of at most ``chunk_size`` values, in order, with
        the shape checked (a wrong total raises once it is known)."""
        n, cs = self.n_examples, self.chunk_size
        shape_error = f"grad_norms must have shape ({n},), got "
        if is_dask_array(grad_norms):
            if grad_norms.shape != (n,):
                raise ValueError(shape_error + str(grad_norms.shape))
            sources: Iterable = (grad_norms.blocks[i].compute()
                                 for i in range(grad_norms.numblocks[0]))
        elif isinstance(grad_norms, np.ndarray) or hasattr(grad_norms, "__array__") or (
                isinstance(grad_norms, list | tuple)
                and (len(grad_norms) == 0 or np.ndim(grad_norms[0]) == 0)) or not isinstance(
                grad_norms, Iterable):
            g = np.asarray(grad_norms)
            if g.shape != (n,):
                raise ValueError(shape_error + str(g.shape))
            sources = (g,)
        else:
            sources = grad_norms
        total = 0
        for src in sources:
            src = np.asarray(src)
            if src.ndim != 1:
                raise ValueError(f"grad_norms must be one array of shape ({n},) or 1-D pieces "
                                 f"of it, got a piece of shape {src.shape}")
            for a in range(0, src.size, cs):
                piece = np.asarray(src[a:a + cs], dtype=float)
                total += piece.size
                if total > n:
                    raise ValueError(shape_error + f"more than {n} norms")
                yield piece
        if total != n:
            raise ValueError(shape_error + f"({total},)")

    def step(self, grad_norms) -> None:
        """Record one step: ``grad_norms[i]`` is example ``i``'s gradient norm (NaN = unknown,
        charged the full clipping norm), given as a numpy array ``(N,)``, a ``dask.array``
        ``(N,)`` (computed one of its blocks at a time: keep them near ``chunk_size``), or an
        iterable of 1-D arrays, the consecutive pieces of the ``(N,)`` array. The step counts
        once its last piece is written; an error or a crash before that leaves no trace."""
        if self._doc["flush_rows"] is not None:
            self._flush()  # an earlier flush failed: complete it before logging on
        top = int(np.iinfo(self.dtype).max)
        if self.n_steps + 1 > top:
            raise ValueError(f"a recording with dtype={self.dtype.name!r} holds at most {top} "
                             f"steps; create it with a wider dtype ('uint32', 'uint64')")
        slot = self._pending() * self._step_bytes()
        with open(self._file(LOG), "r+b") as f:
            f.seek(slot)
            for piece in self._pieces(grad_norms):
                f.write(self._buckets(piece, self.index_dtype).tobytes())
            f.flush()
            os.fsync(f.fileno())
        self._commit(n_steps=self._doc["n_steps"] + 1)
        self.n_steps = self._doc["n_steps"]
        if self._pending() >= self.buffer_steps:
            self._flush()

    # --- flushing ---------------------------------------------------------------------------
    def _counts_header(self) -> int:
        """Check the header of the counts file; return where its data starts."""
        shape = (self.n_examples, self.grid.size + 1)
        try:
            with open(self._file(COUNTS), "rb") as f:
                version = np.lib.format.read_magic(f)
                read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                        else np.lib.format.read_array_header_2_0)
                got, fortran, dtype = read(f)
                offset = f.tell()
        except (OSError, ValueError) as err:
            raise ValueError(f"{COUNTS} of {self.path!r} cannot be read: {err}") from None
        if got != shape or dtype != self.dtype or fortran:
            raise ValueError(f"{COUNTS} must hold a C-ordered {self.dtype} array of shape "
                             f"{shape}, got {dtype} {got}")
        if os.path.getsize(self._file(COUNTS)) < offset + math.prod(shape) * dtype.itemsize:
            raise ValueError(f"{COUNTS} of {self.path!r} is shorter than its header says")
        return offset

    def _flush(self) -> None:
        """Add the logged steps to the counts, a chunk of rows at a time; resumes an
        interrupted flush (``flush_rows`` set) where it stopped."""
        if self._pending() == 0 and self._doc["flush_rows"] is None:
            return
        if self._doc["flush_rows"] is None:
            self._commit(flush_rows=0)
        for a in range(self._doc["flush_rows"], self.n_examples, self.chunk_size):
            self._flush_chunk(a, min(a + self.chunk_size, self.n_examples))
        self._end_flush()

    def _flush_chunk(self, a: int, b: int) -> None:
        """Add the logged steps to rows ``[a, b)`` (only these rows of the files are mapped),
        make them durable, commit the progress.

        Idempotent: every step counts one bucket in every row, so a row's sum less
        ``n_flushed`` is the number of logged steps it holds already (a prefix of them: the
        steps are counted in order), and only the others are added -- after a crash inside
        this chunk its rows may hold different numbers of them."""
        nb, isz = self.grid.size + 1, self.index_dtype.itemsize
        nf, k = self._doc["n_flushed"], self._pending()
        # plain ndarray views of the maps: slicing a np.memmap costs a Python-level wrapper
        steps = [np.memmap(self._file(LOG), dtype=self.index_dtype, mode="r",
                           offset=s * self._step_bytes() + a * isz, shape=(b - a,)
                           ).view(np.ndarray) for s in range(k)]
        if steps:
            block = np.memmap(self._file(COUNTS), dtype=self.dtype, mode="r+",
                              offset=self._offset + a * nb * self.dtype.itemsize,
                              shape=(b - a, nb))
            rows = block.view(np.ndarray)
            done = rows.sum(axis=1, dtype=np.int64) - nf
            if np.any(done < 0) or np.any(done > k):
                bad = int(np.nonzero((done < 0) | (done > k))[0][0])
                raise ValueError(f"{COUNTS} of {self.path!r} is inconsistent with {META}: row "
                                 f"{a + bad} counts {int(done[bad]) + nf} steps, expected "
                                 f"{nf} to {nf + k}")
            if not done.any():
                add_steps(rows, steps)  # the usual case: none counted yet
            elif not np.all(done == k):
                flat = rows.reshape(-1)
                for s in range(k):
                    lack = np.nonzero(done <= s)[0]
                    np.add.at(flat, lack * nb + steps[s][lack], np.ones(lack.size, self.dtype))
            block.flush()
            del block, rows
        del steps
        self._commit(flush_rows=b)

    def _end_flush(self) -> None:
        """Commit: the logged steps are counted, the log is empty."""
        self._commit(n_flushed=self._doc["n_steps"], flush_rows=None)
        with open(self._file(LOG), "r+b") as f:
            f.truncate(0)

    # --- reading ----------------------------------------------------------------------------
    @property
    def counts(self) -> np.memmap:
        """``(N, B + 1)`` read-only memory map of the counts (column 0: no loss, column j:
        ratio rounded up to ``j / B``), after counting the logged steps. Read it a block of
        rows at a time when N is large."""
        self._flush()
        return np.load(self._file(COUNTS), mmap_mode="r")

    def counts_dask(self, chunks: int | None = None):
        """The counts as a ``dask.array`` of blocks of ``chunks`` rows (default
        ``chunk_size``), each read from the file by the task that needs it (the graph holds
        the path, not the data). Computed when asked: record no step until then."""
        _import_dask()
        rows = self.chunk_size if chunks is None else v.count("chunks", chunks, minimum=1)
        self._flush()
        return npy_dask(self._file(COUNTS), self._offset, (self.n_examples, self.grid.size + 1),
                        self.dtype, rows)

    def to_zarr(self, url: str, **kwargs) -> None:
        """Write the counts to a zarr store at ``url`` (through :meth:`counts_dask`;
        ``kwargs`` go to ``dask.array.to_zarr``)."""
        self.counts_dask().to_zarr(url, **kwargs)

    def __repr__(self) -> str:
        return (f"NormRecorder({self.path!r}, n_examples={self.n_examples}, "
                f"n_buckets={self.grid.size}, n_steps={self.n_steps})")
