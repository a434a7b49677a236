"""``tightdp sweep``: a table of DP-SGD settings, one query each."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

from .common import (
    dest_of,
    fail,
    integer,
    number,
    option_value,
)
from .options import (
    budget_options,
)

#: ``tightdp sweep``: (option, element type, grid key) of the options taking a
#: comma-separated list of values (the grid is their cartesian product); the grid key is the
#: front doors' parameter name
SWEEP_LISTS = (
    ("--sampling-rate", number, "sampling_rate"),
    ("--noise-multiplier", number, "noise_multiplier"), ("--steps", integer, "steps"),
    ("--epochs", number, "epochs"),
    ("--batch-size", integer, "batch_size"), ("--dataset-size", integer, "dataset_size"),
    ("--sampling", str, "sampling"), ("--steps-per-epoch", integer, "steps_per_epoch"),
    ("--selected", integer, "selected"), ("--max-batch-size", integer, "max_batch_size"),
    ("--group-size", integer, "group_size"),
    ("--delta", number, "delta"), ("--epsilon", number, "epsilon"),
    ("--solve-for", str, "solve_for"), ("--accountant", str, "accountant"),
    ("--rtol", number, "rtol"), ("--eps-error", number, "eps_error"),
    ("--delta-error", number, "delta_error"), ("--L", number, "L"), ("--n", integer, "n"),
    ("--spa-method", str, "method"))


def _values(kind):
    """An argparse type: a comma-separated list of values of ``kind``."""
    def parse(text: str) -> list:
        items = [x.strip() for x in text.split(",")]
        if not all(items):
            raise argparse.ArgumentTypeError(f"expected a comma-separated list, got {text!r}")
        return [kind(x) for x in items]
    return parse


def _sweep_grid(a):
    """The grid of ``tightdp sweep``: --grid FILE (a dict of lists or a list of rows) or the
    list options (their cartesian product); --max-memory / --max-seconds apply to every row
    that does not set its own."""
    lists = {key: option_value(a, option) for option, _, key in SWEEP_LISTS
             if option_value(a, option) is not None}
    budget = {dest_of(o): option_value(a, o) for o in ("--max-memory", "--max-seconds")
              if option_value(a, o) is not None}
    if a.grid is None:
        if not lists:
            fail("give the settings as options (--sampling-rate 0.01,0.02 ...) or --grid FILE")
        return {**budget, **lists}
    if lists:
        given = [opt for opt, _, _ in SWEEP_LISTS if option_value(a, opt) is not None]
        fail(f"--grid gives the settings; leave out {', '.join(given)}")
    try:
        with open(a.grid, encoding="utf-8") as f:
            grid = json.load(f)
    except OSError as err:
        fail(f"--grid {a.grid}: cannot read the file: {err.strerror or err}")
    except ValueError as err:
        fail(f"--grid {a.grid}: not JSON: {err}")
    if isinstance(grid, dict):
        return {**budget, **grid}
    if isinstance(grid, list) and all(isinstance(row, dict) for row in grid):
        return [{**budget, **row} for row in grid]
    fail(f"--grid {a.grid}: must hold a JSON object of lists or a list of objects")


def run(a) -> dict:
    from ..sweep import sweep

    if a.workers is not None and a.scheduler is not None:
        fail("give --workers or --scheduler, not both")
    grid = _sweep_grid(a)
    try:
        table = sweep(grid, query=a.query, workers=a.workers, scheduler=a.scheduler,
                      out=a.out, batch=a.batch)
    except ImportError as err:
        fail(str(err))
    if a.out is None:
        table.to_csv(sys.stdout)
    else:
        print(f"wrote {len(table)} rows to {a.out} ({len(table.errors)} refused)")
    return {}


def register(add: Callable[[str, str], argparse.ArgumentParser]) -> dict:
    """The ``sweep`` subcommand's parser (from ``add(name, help)``); its handler by name."""
    s = add("sweep", "a table of DP-SGD settings: every combination of the comma-separated "
                     "values (or --grid FILE), one query each, in-process or on Dask")
    g = s.add_argument_group("the grid: each option a comma-separated list of values, as in "
                             "the other subcommands (or --grid FILE)")
    for option, kind, _ in SWEEP_LISTS:
        g.add_argument(option, type=_values(kind), metavar="LIST")
    g.add_argument("--grid", metavar="FILE",
                   help="a JSON file: an object of lists (every combination) or a list of "
                        "objects (one per row), keys named as tightdp.sweep's (sampling_rate, "
                        "noise_multiplier, steps, delta, query, ...)")
    s.add_argument("--query", default="epsilon", choices=["epsilon", "delta", "group",
                                                          "calibrate"],
                   help="the question of each row (default epsilon; a --grid row may set its "
                        "own query); calibrate solves for --solve-for (default "
                        "noise_multiplier)")
    s.add_argument("--out", metavar="FILE",
                   help="write the table to FILE.csv or FILE.jsonl (rows appended as they "
                        "complete, then the file in grid order); default CSV on stdout")
    d = s.add_argument_group("where it runs (default in-process)")
    d.add_argument("--workers", type=integer, metavar="N",
                   help="on a Dask LocalCluster of N worker processes (pip install "
                        "\"tightdp[dask]\")")
    d.add_argument("--scheduler", metavar="ADDRESS",
                   help="on the existing Dask cluster at ADDRESS (tcp://host:port)")
    d.add_argument("--batch", type=integer, metavar="ROWS",
                   help="rows per Dask task (default: at most 16, at least 4 tasks per "
                        "worker)")
    budget_options(s, json_output=False)  # the budget of each row's query
    return {"sweep": run}
