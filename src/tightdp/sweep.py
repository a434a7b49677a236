"""Sweeps: one DP-SGD front door over a grid of settings, in-process or on Dask.

A hyperparameter search asks the same question of thousands of training settings.
:func:`sweep` runs one of the existing front doors on every row of a grid --
:func:`~tightdp.dpsgd_epsilon` (``query="epsilon"``), :func:`~tightdp.dpsgd_delta`
(``"delta"``), :func:`~tightdp.group_epsilon` (``"group"``) or one of the calibrations
:func:`~tightdp.calibrate_noise` / :func:`~tightdp.calibrate_steps` /
:func:`~tightdp.calibrate_sampling_rate` (``"calibrate"``, chosen by the row's ``solve_for``)
-- and gathers the answers in a :class:`SweepTable` (CSV and JSON lines). No accounting is
done here: each row is exactly the front door's answer for the row's parameters, so a row
is certified exactly when the front door certifies it.

The work is embarrassingly parallel. In-process (the default) the rows run one after the
other under a progress bar. With ``workers=N`` (a ``distributed.LocalCluster`` of ``N``
single-threaded worker processes, started and closed by the call), ``scheduler="tcp://..."``
(an existing cluster) or ``client=`` (a ``distributed.Client``), the rows are sent to Dask
in small batches of consecutive rows, one task per batch, each with ``retries``: a batch
whose worker dies is run again elsewhere (Dask reschedules the tasks of a lost worker;
``retries`` also covers an exception on the way). A batch rather than a task per row
because a row can take far less time than Dask spends on a task (a GDP row does), while on
slow rows (PLD, PRV) batching costs nothing (figures in docs/scaling.md, section 3;
``benchmarks/bench_sweep.py``). Batches are kept small (at most
:data:`MAX_BATCH` rows, and at least four tasks per worker thread) so that slow rows still
spread over the workers and a lost worker costs little. The front doors are deterministic,
so the table is the same in-process and on Dask, bit for bit (the ``seconds`` column
aside).
"""

from __future__ import annotations

import csv
import inspect
import itertools
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, cast

from . import _validate as v
from . import dpsgd
from ._dask import (
    connect_scheduler,
    dask_client,
    local_cluster,
    require_distributed,
    warn_malloc_trim,
)
from ._version import __version__
from .accountants.registry import ACCOUNTANTS, CERTIFYING, OPTIONS, make_accountant
from .budget import Budget
from .dpsgd.setting import dpsgd_setting
from .progress import progress_bar
from .results import as_dict

__all__ = ["sweep", "SweepTable", "dask_client", "local_cluster", "QUERIES", "RESULT_COLUMNS",
           "MAX_BATCH"]

#: the questions a row can ask (the ``query`` argument or a row's ``query`` key)
QUERIES = ("epsilon", "delta", "group", "calibrate")

#: the columns every table has after the row's parameters: ``answer`` is the number asked
#: for (eps for "epsilon" and "group", delta for "delta", the calibrated noise multiplier,
#: steps or sampling rate for "calibrate"); ``lower``/``upper`` the certified bracket of the
#: eps or delta the row reports (for "calibrate": of the eps achieved by the calibrated
#: setting, ``upper`` <= the target); ``estimate`` the method's estimate; ``certified``
#: whether ``upper`` is a certified bound; ``converged`` False when a budget made the answer
#: coarser (still certified where ``certified``); ``seconds`` the time of the front door;
#: ``note`` its note; ``error`` the one-line message of a refusal (then the others are empty)
RESULT_COLUMNS = ("answer", "lower", "upper", "estimate", "certified", "converged", "seconds",
                  "note", "error")

#: the most rows one Dask task runs
MAX_BATCH = 16

_SOLVE_FOR: dict[str, Callable[..., Any]] = {
    "noise_multiplier": dpsgd.calibrate_noise, "steps": dpsgd.calibrate_steps,
    "sampling_rate": dpsgd.calibrate_sampling_rate}
_DOOR_SOLVES = {"calibrate_noise": "noise_multiplier", "calibrate_steps": "steps",
                "calibrate_sampling_rate": "sampling_rate"}
_DOORS: dict[str, Callable[..., Any]] = {"epsilon": dpsgd.dpsgd_epsilon, "delta": dpsgd.dpsgd_delta,
          "group": dpsgd.group_epsilon}
_SETTING = ("sampling_rate", "noise_multiplier", "steps", "epochs", "batch_size",
            "dataset_size", "sampling", "steps_per_epoch", "selected", "max_batch_size")
#: the options the accountants of ``dpsgd_epsilon`` / ``dpsgd_delta`` take by keyword
_ACCOUNTANT_OPTIONS = tuple(sorted({o for opts in OPTIONS.values() for o in opts}))
#: column order of the parameters (others, if a front door grows some, follow sorted)
_ORDER = tuple(dict.fromkeys(("row", "query") + _SETTING + (
    "group_size", "delta", "epsilon", "solve_for", "accountant", "rtol", *_ACCOUNTANT_OPTIONS,
    "sigma_max", "max_steps", "baselines", "conversion", "refine_conversion", "max_memory",
    "max_seconds")))


def _keywords(fn) -> tuple[set[str], set[str]]:
    """(every keyword parameter, the required ones) of a front door."""
    ps = [p for p in inspect.signature(fn).parameters.values()
          if p.kind is inspect.Parameter.KEYWORD_ONLY]
    return {p.name for p in ps}, {p.name for p in ps if p.default is inspect.Parameter.empty}


def _plain(x):
    """A grid value as a plain Python value (numpy scalars as numbers)."""
    return x.item() if hasattr(x, "item") and getattr(x, "ndim", None) == 0 else x


def _rows_of(grid) -> list[dict]:
    """The rows of ``grid``: a dict of lists (their cartesian product, the first key varying
    slowest; a single value stands for a list of one) or a list of dicts."""
    if isinstance(grid, Mapping):
        values = []
        for key, val in grid.items():
            if not isinstance(key, str):
                raise ValueError(f"the keys of the grid must be parameter names, got {key!r}")
            vals = [val] if isinstance(val, str | bytes) or not hasattr(val, "__iter__") \
                else list(val)
            if not vals:
                raise ValueError(f"grid[{key!r}] is empty; give at least one value")
            values.append(vals)
        return [dict(zip(grid, combo, strict=True)) for combo in itertools.product(*values)]
    if isinstance(grid, str | bytes) or not hasattr(grid, "__iter__"):
        raise ValueError(f"grid must be a dict of lists or a list of dicts, got "
                         f"{type(grid).__name__}")
    rows = list(grid)
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise ValueError(f"row {i} of the grid must be a dict of parameters, got "
                             f"{type(row).__name__}")
        for key in row:
            if not isinstance(key, str):
                raise ValueError(f"row {i} of the grid: keys must be parameter names, got "
                                 f"{key!r}")
    return [dict(row) for row in rows]


def _plan(i: int, raw: dict, default_query: str) -> tuple[dict, str, dict]:
    """(the row's parameters as shown in the table, the front door's name, its keyword
    arguments) of grid row ``i``, every value checked that can be checked without running
    the row; a ValueError names the parameter (the caller adds the row)."""
    row = {k: _plain(x) for k, x in raw.items() if x is not None}  # None: not given
    query = str(row.pop("query", default_query)).strip().lower()
    if query not in QUERIES:
        raise ValueError(f"query must be one of {', '.join(QUERIES)}, got {query!r}")
    shown = {"query": query}
    if query == "calibrate":
        solve_for = str(row.pop("solve_for", "noise_multiplier")).strip().lower()
        solve_for = solve_for.replace("-", "_")
        if solve_for not in _SOLVE_FOR:
            raise ValueError(f"solve_for must be one of {', '.join(_SOLVE_FOR)}, got "
                             f"{solve_for!r}")
        shown["solve_for"] = solve_for
        door = next(d for d, x in _DOOR_SOLVES.items() if x == solve_for)
        fn = _SOLVE_FOR[solve_for]
    else:
        door, fn = query, _DOORS[query]
    known, required = _keywords(fn)
    if query in ("epsilon", "delta"):
        known |= set(_ACCOUNTANT_OPTIONS)
    accountant = str(row.get("accountant", "pld")).strip().lower()
    if query == "group":  # group_epsilon is the certified PLD accountant; no choice
        if accountant != "pld":
            raise ValueError(f"accountant must be pld for query 'group' (the certified PLD "
                             f"accountant of group_epsilon), got {row['accountant']!r}")
        row.pop("accountant", None)
    for key in row:
        if key not in known:
            if query == "calibrate" and key in _SETTING:
                raise ValueError(f"{key} does not apply with solve_for="
                                 f"{shown['solve_for']!r} (the unknown); leave it out")
            raise ValueError(f"unknown parameter {key!r} for query {query!r}; the "
                             f"parameters are {', '.join(sorted(known))}")
    missing = sorted(required - set(row))
    if missing:
        raise ValueError(f"{missing[0]} is required by query {query!r}")
    _check_values(query, shown.get("solve_for"), accountant, row)
    shown.update(row)
    shown["accountant"] = accountant
    return shown, door, row


def _check_values(query: str, solve_for: str | None, accountant: str, row: dict) -> None:
    """The values of one row checked with the front doors' own validators (the setting,
    delta, epsilon, group size, the accountant and its options, the budget)."""
    setting = {k: row[k] for k in _SETTING if k in row}
    if query == "calibrate":  # the unknown (left out) at a placeholder: the rest is checked
        unknown = cast(str, solve_for)  # a calibration names what it solves for
        setting[unknown] = {"noise_multiplier": 1.0, "steps": 0, "sampling_rate": 1.0}[unknown]
    s = dpsgd_setting(**setting)
    if "delta" in row:
        v.delta_value("delta", row["delta"])
    if "epsilon" in row:
        (v.positive if query == "calibrate" else v.nonnegative)("epsilon", row["epsilon"])
    budget = Budget.make(row.get("max_memory"), row.get("max_seconds"))
    if query == "group":
        s.sampling.sensitivity_distribution(v.count("group_size", row["group_size"],
                                                    minimum=1))
        v.positive("rtol", row.get("rtol", 1.0))
        return
    if query == "calibrate" and accountant not in CERTIFYING:
        raise ValueError(f"accountant must certify an upper bound for query 'calibrate' "
                         f"({', '.join(CERTIFYING)}), got {row['accountant']!r}")
    if accountant not in ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {', '.join(ACCOUNTANTS)}, got "
                         f"{row['accountant']!r}")
    opts = {k: row[k] for k in ("rtol", *_ACCOUNTANT_OPTIONS) if k in row}
    make_accountant(accountant, **opts, max_memory=budget.max_memory,
                    max_seconds=budget.max_seconds)


def _one_line(message: str) -> str:
    return " ".join(str(message).split()) or "refused"


def _run(door: str, kwargs: dict) -> dict:
    """The result columns of one row: the front door ``door`` called with ``kwargs``; a
    refusal (ValueError, BudgetExceeded) becomes ``error``. Anything else is a bug and
    propagates."""
    t0 = time.perf_counter()
    out = {**dict.fromkeys(RESULT_COLUMNS), "accountant": None}
    try:
        if door in ("epsilon", "delta"):
            r = _DOORS[door](**kwargs)
            out.update(answer=float(getattr(r, door)), upper=_float(r.upper),
                       estimate=_float(r.estimate), certified=bool(r.certified),
                       converged="converged" not in r.details or bool(r.details["converged"]),
                       note=r.note)
        elif door == "group":
            r = dpsgd.group_epsilon(**kwargs)
            out.update(answer=float(r.epsilon), upper=float(r.upper),
                       certified=bool(r.certified), converged=bool(r.converged), note=r.note)
        else:  # a calibration: the bracket is of the eps the calibrated setting achieves
            solve_for = _DOOR_SOLVES[door]
            r = _SOLVE_FOR[solve_for](**kwargs)
            out.update(answer=_plain(getattr(r, solve_for)), upper=float(r.epsilon),
                       certified=True,
                       converged="converged" not in r.details or bool(r.details["converged"]),
                       note=r.details.get("note", ""))
        out.update(lower=_float(r.lower), accountant=r.accountant)
    except ValueError as err:  # a refusal of the front door (BudgetExceeded included)
        out["error"] = _one_line(str(err))
    out["seconds"] = time.perf_counter() - t0
    return out


def _float(x):
    return None if x is None else float(x)


def _run_batch(batch: list[tuple[int, str, dict]]) -> tuple[str, list[tuple[int, dict]]]:
    """One Dask task: the rows ``(index, door, kwargs)`` of a batch, run in order; with the
    version of tightdp that ran them."""
    return __version__, [(i, _run(door, kwargs)) for i, door, kwargs in batch]


class SweepTable:
    """The answer of :func:`sweep`: one row (a dict) per grid row, in the order of the grid.

    Each row holds ``row`` (its index in the grid), ``query``, the parameters it was run
    with (as given; ``accountant`` is the one that answered, ``solve_for`` the unknown of a
    calibration) and the :data:`RESULT_COLUMNS`. Iterating gives the rows; ``len`` their
    number; ``table[i]`` row ``i``.

    Attributes
    ----------
    rows : list of dict, every row with every column (None where it does not apply).
    columns : tuple of str, the column names in order.
    """

    def __init__(self, rows: list[dict], columns: tuple[str, ...]):
        self.rows = rows
        self.columns = tuple(columns)

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[dict]:
        return iter(self.rows)

    def __getitem__(self, i: int) -> dict:
        return self.rows[i]

    def __repr__(self) -> str:
        refused = sum(r["error"] is not None for r in self.rows)
        return f"SweepTable({len(self.rows)} rows, {refused} refused)"

    @property
    def errors(self) -> list[dict]:
        """The rows the front door refused (their ``error`` says why)."""
        return [r for r in self.rows if r["error"] is not None]

    def to_csv(self, path) -> None:
        """Write the table as CSV (a header, then one line per row; numbers at full
        precision, ``inf`` for an infinity, empty for None) to a path or a text file."""
        _write(path, self.columns, self.rows, "csv")

    def to_jsonl(self, path) -> None:
        """Write the table as JSON lines (one strict JSON object per row, see
        :func:`tightdp.as_dict`: an infinity is null with ``<key>_infinite: true``) to a
        path or a text file."""
        _write(path, self.columns, self.rows, "jsonl")


def _format_of(path) -> str:
    name = os.fspath(path).lower()
    for ext, fmt in ((".csv", "csv"), (".jsonl", "jsonl"), (".ndjson", "jsonl")):
        if name.endswith(ext):
            return fmt
    raise ValueError(f"out must be a .csv or .jsonl file, got {os.fspath(path)!r}")


class _Lines:
    """Rows written one by one to an open text file as CSV or JSON lines."""

    def __init__(self, f, columns: tuple[str, ...], fmt: str):
        self.f, self.columns, self.fmt = f, columns, fmt
        if fmt == "csv":
            self.csv = csv.DictWriter(f, fieldnames=list(columns), lineterminator="\n")
            self.csv.writeheader()

    def write(self, row: dict) -> None:
        if self.fmt == "csv":
            self.csv.writerow({k: ("" if row[k] is None else row[k]) for k in self.columns})
        else:
            self.f.write(json.dumps(as_dict({k: row[k] for k in self.columns}),
                                    allow_nan=False) + "\n")


def _write(target, columns: tuple[str, ...], rows: list[dict], fmt: str) -> None:
    """All ``rows`` to ``target`` (a path, written whole then moved into place, or an open
    text file)."""
    if hasattr(target, "write"):
        lines = _Lines(target, columns, fmt)
        for row in rows:
            lines.write(row)
        return
    path = os.fspath(target)
    tmp = f"{path}.part"
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        lines = _Lines(f, columns, fmt)
        for row in rows:
            lines.write(row)
    os.replace(tmp, path)


def _check_out(out) -> str:
    """The format of ``out=`` and a writable place for it, checked before any work."""
    fmt = _format_of(out)
    path = os.path.abspath(os.fspath(out))
    parent = os.path.dirname(path)
    if os.path.isdir(path):
        raise ValueError(f"out {os.fspath(out)!r} is a directory")
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"out {os.fspath(out)!r}: directory {parent!r} does not exist or is "
                         "not writable")
    return fmt


def _batches(plans: list[tuple[int, str, dict]], threads: int, batch: int | None
             ) -> list[list[tuple[int, str, dict]]]:
    """Consecutive rows in batches of ``batch`` rows (default: at most :data:`MAX_BATCH`,
    and at least four tasks per worker thread)."""
    if batch is None:
        batch = max(1, min(MAX_BATCH, len(plans) // (4 * max(threads, 1))))
    return [plans[i:i + batch] for i in range(0, len(plans), batch)]


def _distributed():
    return require_distributed("a sweep on Dask (workers=, scheduler=, client=)")


def sweep(grid, *, query: str = "epsilon", workers: int | None = None,
          scheduler: str | None = None, client=None, out=None, progress: bool | None = None,
          batch: int | None = None, retries: int = 2) -> SweepTable:
    """Run a DP-SGD front door on every row of a grid of settings; a table of the answers.

    Parameters
    ----------
    grid : a dict of lists (the cartesian product of the values, the first key varying
        slowest; a single value is a list of one), or a list of dicts (one per row). The keys
        are the front doors' keyword parameters, named as on the command line:
        ``sampling_rate``, ``noise_multiplier``, ``steps`` or ``epochs``, ``batch_size``,
        ``dataset_size``, ``sampling``, ``delta`` (epsilon, group, calibrate), ``epsilon``
        (delta; calibrate: the target), ``group_size`` (group), ``accountant`` and its options
        (``rtol``, ``eps_error``, ``delta_error``, ``L``, ``n``, ``method``), ``max_memory``,
        ``max_seconds``, and per row ``query`` and ``solve_for`` (calibrate:
        "noise_multiplier", the default, "steps" or "sampling_rate"). A None value means
        "not given" (the front door's default).
    query : the question of rows without a ``query`` key: "epsilon" (:func:`dpsgd_epsilon`),
        "delta" (:func:`dpsgd_delta`), "group" (:func:`group_epsilon`, always the PLD
        accountant) or "calibrate" (:func:`calibrate_noise`, :func:`calibrate_steps` or
        :func:`calibrate_sampling_rate` by ``solve_for``).
    workers : run on a ``distributed.LocalCluster`` of this many single-threaded worker
        processes (:func:`local_cluster`), started and closed by this call (needs
        ``tightdp[dask]``; in a script, call it under ``if __name__ == "__main__":``, as
        the worker processes are spawned and import the main module).
    scheduler : run on the existing Dask cluster at this address ("tcp://host:port").
    client : run on this ``distributed.Client`` (left open). At most one of ``workers``,
        ``scheduler`` and ``client``; none: in-process.
    out : a ``.csv`` or ``.jsonl`` file: rows are appended as they complete (so a long
        sweep is not lost), and the file is rewritten in grid order at the end.
    progress : a progress bar on stderr (None: automatic, see :mod:`tightdp.progress`).
    batch : rows per Dask task (default: at most :data:`MAX_BATCH`, and at least four tasks
        per worker thread).
    retries : how many times Dask runs a failed task again (a worker lost mid-task is
        rescheduled by Dask itself).

    Returns
    -------
    SweepTable, its rows in the order of the grid. A row the front door refuses
    (``ValueError``, ``BudgetExceeded``) keeps the one-line message in ``error`` and the
    sweep goes on; so does a batch Dask gives up on because every worker that ran it died
    (``KilledWorker``, typically a row over the workers' memory): its rows say so in
    ``error``. Any other exception is a bug and propagates (the rows done are in ``out``).

    Raises
    ------
    ValueError : a bad grid, before any work: the message names the row and the parameter.
    ImportError : ``workers``, ``scheduler`` or ``client`` without dask.distributed.

    Examples
    --------
    >>> t = sweep({"sampling_rate": [0.01, 0.02], "noise_multiplier": 1.0, "steps": 100,
    ...            "delta": 1e-5, "accountant": "rdp"}, progress=False)
    >>> [round(r["answer"], 3) for r in t]
    [1.214, 1.843]
    """
    workers, batch, retries, query = _checked_options(
        workers=workers, scheduler=scheduler, client=client, batch=batch, retries=retries,
        progress=progress, query=query)
    fmt = None if out is None else _check_out(out)
    shown, plans, columns = _planned(grid, query)
    on_dask = workers is not None or scheduler is not None or client is not None
    distributed = _distributed() if on_dask else None
    done = _execute(plans, shown, columns, out=out, fmt=fmt, distributed=distributed,
                    dask=(workers, scheduler, client, batch, retries), progress=progress)
    return _finished(done, columns, out, fmt)


def _execute(plans: list[tuple[int, str, dict]], shown: list[dict], columns: tuple, *, out,
             fmt, distributed, dask: tuple[Any, Any, Any, Any, Any],
             progress: bool | None) -> list[dict | None]:
    """Run every plan (in process, or on Dask with ``dask`` = (workers, scheduler, client,
    batch, retries)); each row recorded as it completes, appended to ``out`` if given."""
    done: list[dict | None] = [None] * len(plans)
    f = None if out is None else open(out, "w", newline="", encoding="utf-8")
    try:
        lines = None if f is None else _Lines(f, columns, cast(str, fmt))  # fmt: out's

        def record(i: int, result: dict) -> None:
            row = {**shown[i], **{k: x for k, x in result.items() if x is not None}}
            done[i] = kept = {k: row.get(k) for k in columns}
            if lines is not None:
                lines.write(kept)
                lines.f.flush()

        with progress_bar(total=len(plans), desc="sweep", unit="setting",
                          enabled=progress) as bar:
            if distributed is None:
                for i, door, kwargs in plans:
                    record(i, _run(door, kwargs))
                    bar.update(1)
            else:
                _on_dask(distributed, plans, *dask, record, bar)
    finally:
        if f is not None:
            f.close()
    return done


def _checked_options(*, workers, scheduler, client, batch, retries, progress, query
                     ) -> tuple[int | None, int | None, int, str]:
    """``(workers, batch, retries, query)`` of :func:`sweep`, validated before any work."""
    if sum(x is not None for x in (workers, scheduler, client)) > 1:
        raise ValueError("give at most one of workers, scheduler and client")
    if workers is not None:
        workers = v.count("workers", workers, minimum=1)
    if batch is not None:
        batch = v.count("batch", batch, minimum=1)
    retries = v.count("retries", retries, minimum=0)
    if progress is not None and not isinstance(progress, bool):
        raise ValueError(f"progress must be True, False or None, got {progress!r}")
    query = str(query).strip().lower()
    if query not in QUERIES:
        raise ValueError(f"query must be one of {', '.join(QUERIES)}, got {query!r}")
    return workers, batch, retries, query


def _planned(grid, query: str) -> tuple[list[dict], list[tuple[int, str, dict]], tuple]:
    """The rows of ``grid`` as shown in the table, the plan of each (row, front door, keyword
    arguments), and the table's columns; a bad row is a ValueError naming it."""
    raw = _rows_of(grid)
    if not raw:
        raise ValueError("grid must hold at least one row")
    shown, plans = [], []
    for i, r in enumerate(raw):
        try:
            s, door, kwargs = _plan(i, r, query)
        except ValueError as err:
            raise ValueError(f"row {i} of the grid: {_one_line(str(err))}") from None
        shown.append({"row": i, **s})
        plans.append((i, door, kwargs))
    present = {k for s in shown for k in s}
    columns = tuple(k for k in _ORDER if k in present) + tuple(
        sorted(present - set(_ORDER))) + RESULT_COLUMNS
    return shown, plans, columns


def _finished(done: list[dict | None], columns: tuple, out, fmt) -> SweepTable:
    """The table of the recorded rows (``out`` rewritten in grid order)."""
    rows = [r for r in done if r is not None]
    if len(rows) != len(done):  # defensive: every task's rows are recorded or it raised
        raise RuntimeError(f"sweep: {len(done) - len(rows)} rows have no result; this is a "
                           "bug in tightdp")
    table = SweepTable(rows, columns)
    if out is not None:
        _write(out, columns, rows, cast(str, fmt))
    return table


def _lost(batch: list[tuple[int, str, dict]], err: Exception) -> list[tuple[int, dict]]:
    """Error rows for a batch Dask gave up on (every worker that ran it died: typically a
    row over the workers' memory)."""
    first, last = batch[0][0], batch[-1][0]
    message = (f"not computed: the Dask workers running rows {first}-{last} of the grid died "
               f"each time ({_one_line(str(err))}); run these rows with a lower max_memory or "
               "on workers with more memory")
    return [(i, {**dict.fromkeys(RESULT_COLUMNS), "accountant": None, "error": message})
            for i, _, _ in batch]


def _on_dask(distributed, plans, workers, scheduler, client, batch, retries, record, bar,
             connect_timeout: str = "20s") -> None:
    """Run ``plans`` on Dask (see :func:`sweep`), calling ``record(i, result)`` as each
    batch completes."""
    cluster = own = None
    try:
        if workers is not None:
            cluster = local_cluster(workers)
            client = own = dask_client(cluster)
        elif scheduler is not None:
            client = own = connect_scheduler(scheduler, connect_timeout)
        if cluster is None:  # a cluster of the user's: is it set up to run us fast?
            warn_malloc_trim(client)
        threads = sum(client.nthreads().values()) or 1
        batches = {}
        for b in _batches(plans, threads, batch):
            batches[client.submit(_run_batch, b, retries=retries, pure=False)] = b
        futures = list(batches)
        try:
            for fut in distributed.as_completed(futures):
                try:
                    version, results = fut.result()
                except distributed.KilledWorker as err:  # its workers kept dying: not a bug
                    version, results = __version__, _lost(batches[fut], err)
                if version != __version__:
                    raise ValueError(f"the Dask workers run tightdp {version} and this process "
                                     f"tightdp {__version__}; install the same version on the "
                                     "workers")
                for i, result in results:
                    record(i, result)
                bar.update(len(results))
                fut.release()
        finally:
            client.cancel([f for f in futures if not f.done()])
    finally:
        if own is not None:
            own.close()
        if cluster is not None:
            cluster.close()
