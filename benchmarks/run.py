"""One runner for the benchmarks: list them, run one, some or all (``--quick`` sizes where a
benchmark has them), keep what each printed and its wall time, store a baseline, compare.

Run::

    PYTHONPATH=src python benchmarks/run.py list
    PYTHONPATH=src python benchmarks/run.py run pld prv --quick            # compare to baseline
    PYTHONPATH=src python benchmarks/run.py run --all --quick --save       # record the baseline
    PYTHONPATH=src python benchmarks/run.py show pld                       # the stored output

Each benchmark runs as its own process (``python benchmarks/bench_<name>.py ARGS``), one after
the other. ``run`` prints the benchmark's output and then, against ``benchmarks/baseline.json``
(the same mode, quick or full): the wall-time ratio, and per markdown table row (matched by
position) the ratio of every time column (a header naming ``time``, ``s``, ``ms`` or
``seconds``) and every other numeric cell that changed. Times on a shared machine are
indicative: compare runs on the same machine and load. ``--save`` writes this run's results
into the baseline (other entries are kept). Benchmarks marked heavy (minutes of machine time,
several processes) run only when
named, never with ``--all``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
BASELINE = HERE / "baseline.json"


@dataclass(frozen=True)
class Bench:
    """A benchmark script and its arguments (full and quick); ``heavy``: not in ``--all``."""

    full: tuple[str, ...] = ()
    quick: tuple[str, ...] | None = None
    heavy: str = ""
    needs: str = ""


BENCHMARKS = {
    "dpsgd": Bench(quick=("--quick",), needs="peers optional"),
    "edges": Bench(quick=("--quick",),
                   heavy="the full battery takes an hour; --quick is 72 guarded calls"),
    "fft": Bench(quick=("--repeat", "1", "--ns", "200000")),
    "group": Bench(quick=("--ks", "4", "--skip-peer")),
    "jax_privacy": Bench(quick=("--quick",), needs="the [jax] extra (jax-privacy)"),
    "individual": Bench(quick=("2000", "200", "--method", "both")),
    "mixture_loss": Bench(quick=("--n", "5000", "--repeat", "1")),
    "opacus": Bench(heavy="no quick size: three accountants asked 100 times over 10^4 steps",
                    needs="the [opacus] extra (torch)"),
    "pld": Bench(quick=("--reps", "1", "--no-tiny")),
    "plot": Bench(quick=("--quick",)),
    "prv": Bench(quick=("--reps", "1")),
    "risk": Bench(quick=("--quick",), needs="riskcal, dp_accounting optional"),
    "recording": Bench(quick=("--sizes", "1e5", "--steps", "16")),
    "sampling": Bench(quick=("--quick", "--skip-peer"),
                      needs="pld-accounting, dp-accounting optional"),
    "scale": Bench(quick=("2e5", "200", "--workers", "2", "--profiles", "2000"),
                   heavy="a Dask LocalCluster of worker processes; 10^7 examples in full",
                   needs="the [dask] extra"),
    "spa": Bench(quick=("--cold-only",)),
    "sweep": Bench(quick=("--n", "40"),
                   heavy="three Dask LocalClusters one after the other",
                   needs="the [dask] extra"),
}

TIME_HEADER = re.compile(r"(time|seconds|\bs\b|\bms\b|\[s\]|\[ms\]|wall)", re.IGNORECASE)
NUMBER = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?x?$")


def _args(name: str, quick: bool) -> tuple[str, ...]:
    b = BENCHMARKS[name]
    return b.quick if quick and b.quick is not None else b.full


def run_one(name: str, *, quick: bool, timeout: float) -> dict:
    """Run one benchmark; its printed output, wall seconds, exit status and the tables."""
    cmd = [sys.executable, str(HERE / f"bench_{name}.py"), *_args(name, quick)]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
        out, err, rc = p.stdout, p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err, rc = f"timed out after {timeout:g} s", -1
    wall = time.perf_counter() - t0
    return {"args": list(cmd[2:]), "quick": quick, "wall_seconds": round(wall, 3),
            "returncode": rc, "stdout": out, "stderr_tail": err.strip().splitlines()[-5:],
            "tables": tables(out)}


def tables(text: str) -> list[dict]:
    """The markdown tables of a benchmark's output: header cells and rows of cells."""
    out: list[dict] = []
    lines = [ln.strip() for ln in text.splitlines()]
    for i, ln in enumerate(lines):
        if ln.startswith("|") and i + 1 < len(lines) and set(lines[i + 1]) <= set("|-: "):
            if not lines[i + 1].startswith("|"):
                continue
            rows = []
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                rows.append(_cells(row))
            out.append({"header": _cells(ln), "rows": rows})
    return out


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _num(cell: str) -> float | None:
    c = cell.replace(",", "").strip()
    if not NUMBER.match(c):
        return None
    return float(c.rstrip("x"))


def _label(row: list[str]) -> str:
    """A row's name in the comparison: its first three cells."""
    return " / ".join(row[:3])


def compare(name: str, new: dict, old: dict) -> list[str]:
    """Lines comparing a run with its baseline: wall ratio, then per table row the ratio of
    each time column and each other numeric cell that changed (rows matched by position: a
    benchmark prints the same rows at the same arguments)."""
    lines = [f"{name}: wall {new['wall_seconds']:.1f} s vs {old['wall_seconds']:.1f} s "
             f"(ratio {new['wall_seconds'] / max(old['wall_seconds'], 1e-9):.2f})"]
    for t_new, t_old in zip(new["tables"], old["tables"], strict=False):
        header = t_new["header"]
        for row, ref in zip(t_new["rows"], t_old["rows"], strict=False):
            if len(ref) != len(row):
                continue
            parts = []
            for h, a, b in zip(header, row, ref, strict=False):
                x, y = _num(a), _num(b)
                if x is None or y is None:
                    continue
                if TIME_HEADER.search(h):
                    parts.append(f"{h} {x / y:.2f}x" if y else f"{h} {a} (was {b})")
                elif a != b:
                    parts.append(f"{h} {a} (was {b})")
            if parts:
                lines.append(f"  {_label(row)}: " + "; ".join(parts))
    return lines


def _load() -> dict:
    return json.loads(BASELINE.read_text()) if BASELINE.exists() else {"runs": {}}


def _mode(quick: bool) -> str:
    return "quick" if quick else "full"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="the benchmarks, their quick arguments and notes")
    r = sub.add_parser("run", help="run benchmarks and compare with the baseline")
    r.add_argument("names", nargs="*")
    r.add_argument("--all", action="store_true", help="every benchmark not marked heavy")
    r.add_argument("--quick", action="store_true", help="the quick size, where there is one")
    r.add_argument("--save", action="store_true", help="store the results as the baseline")
    r.add_argument("--timeout", type=float, default=900.0, help="seconds per benchmark")
    s = sub.add_parser("show", help="print a benchmark's stored output")
    s.add_argument("name", choices=sorted(BENCHMARKS))
    s.add_argument("--quick", action="store_true")
    a = ap.parse_args(argv)

    if a.cmd == "list":
        for name, b in BENCHMARKS.items():
            quick = " ".join(b.quick) if b.quick is not None else "(no quick size)"
            notes = "; ".join(x for x in (f"heavy: {b.heavy}" if b.heavy else "", b.needs) if x)
            print(f"{name:13s} quick: {quick:40s} {notes}")
        return 0
    base = _load()
    if a.cmd == "show":
        run = base["runs"].get(_mode(a.quick), {}).get(a.name)
        if run is None:
            print(f"no stored {_mode(a.quick)} run of {a.name}")
            return 1
        print(run.get("stdout") or run.get("note", ""))
        return 0

    unknown = [n for n in a.names if n not in BENCHMARKS]
    if unknown or not (a.names or a.all):
        ap.error(f"name benchmarks ({', '.join(BENCHMARKS)}) or give --all"
                 + (f"; unknown: {', '.join(unknown)}" if unknown else ""))
    names = a.names or [n for n, b in BENCHMARKS.items() if not b.heavy]
    stored = base["runs"].setdefault(_mode(a.quick), {})
    failed = 0
    report = []
    for name in names:
        print(f"=== {name}: python benchmarks/bench_{name}.py "
              f"{' '.join(_args(name, a.quick))}", flush=True)
        res = run_one(name, quick=a.quick, timeout=a.timeout)
        print(res["stdout"], end="")
        if res["returncode"] != 0:
            failed += 1
            print(f"{name}: exit status {res['returncode']}: " + " | ".join(res["stderr_tail"]))
        old = stored.get(name)
        if old and "wall_seconds" in old and res["returncode"] == 0:
            report += compare(name, res, old)
        else:
            report.append(f"{name}: {res['wall_seconds']:.1f} s (no baseline to compare)")
        if a.save and res["returncode"] == 0:
            stored[name] = res
    print("\n### against benchmarks/baseline.json\n" + "\n".join(report))
    if a.save:
        for name, b in BENCHMARKS.items():  # say why a heavy benchmark has no stored run
            if b.heavy and name not in stored:
                stored[name] = {"note": f"not recorded: {b.heavy}; run it by name"}
        base["recorded"] = {"date": datetime.date.today().isoformat(),
                            "machine": f"{platform.machine()} {platform.python_version()}"}
        BASELINE.write_text(json.dumps(base, indent=1) + "\n")
        print(f"saved to {BASELINE}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
