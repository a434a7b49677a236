"""Run accountant calls in a guarded worker process: wall time, tracemalloc peak, and a hard
address-space limit, so that a call that would take 10+ GB or hang fails its test (or its
benchmark row) instead of taking the machine down.

One persistent worker (a fresh ``python`` that sets ``RLIMIT_AS`` before importing numpy,
talking pickle over its stdin/stdout) serves every call; a timeout kills it by its pid and
the next call starts a fresh one. Calls are described by plain dicts (see :func:`run_spec`)
so nothing but data crosses the pipe. The CLI is run in its own process with the same limit
(:func:`run_cli`).

Nothing here imports numpy or tightdp at module level: the worker imports them after its
limit is in place.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

#: hard address-space limit of the worker and of CLI subprocesses (bytes); a call measured
#: above the 2 GB criterion fails anyway, this only keeps the machine alive
HARD_LIMIT = int(os.environ.get("TIGHTDP_EDGES_HARD_LIMIT", 4 * 10**9))
#: the criteria of the issue: every call under 2 GB peak and 60 s
MAX_BYTES = 2 * 10**9
MAX_SECONDS = 60.0
#: the guard's own timeout (a call slower than this is killed and reported "timeout")
GUARD_SECONDS = float(os.environ.get("TIGHTDP_EDGES_GUARD_SECONDS", 65))


def _limit_memory(limit: int = HARD_LIMIT) -> None:
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _quiet_threads() -> None:
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")


# --------------------------------------------------------------------------------------
# what the worker runs
# --------------------------------------------------------------------------------------

def _num(x):
    """A float, a list of floats, or None (numpy arrays/scalars to plain Python)."""
    if x is None:
        return None
    try:
        import numpy as np
        a = np.asarray(x, dtype=float)
        return float(a) if a.ndim == 0 else a.tolist()
    except (TypeError, ValueError):
        return repr(x)


def _mechanism(td, mech):
    kind = mech[0]
    if kind == "gauss":
        return td.Gaussian(mech[1])
    if kind == "sub":
        _, q, sigma = mech
        return td.PoissonSubsampled(td.Gaussian(sigma), q)
    if kind == "laplace":
        return td.Laplace(mech[1])
    if kind == "pure":
        return td.PureDP(mech[1])
    if kind == "swr":  # ("swr", sigma, batch size, dataset size): sampling with replacement
        _, sigma, batch, size = mech
        return td.SampledWithReplacement(td.Gaussian(sigma), batch, size)
    raise KeyError(kind)


def _compose(td, acc, mech, steps: int) -> None:
    """``mech`` composed ``steps`` times; ``("compose", ((part, count), ...))`` composes each
    part its count times (and the whole ``steps`` times)."""
    if mech[0] == "compose":
        for part, count in mech[1]:
            acc.compose(_mechanism(td, part), count * steps)
    else:
        acc.compose(_mechanism(td, mech), steps)


def _replace_one(mech) -> bool:
    """Whether ``mech`` holds a mechanism defined under replace-one only (sampling with
    replacement): its accountant must then hold that relation."""
    if mech[0] == "compose":
        return any(_replace_one(part) for part, _ in mech[1])
    return mech[0] == "swr"


def _accountant(td, name, opts):
    cls = {"pld": td.PLDAccountant, "prv": td.PRVAccountant, "rdp": td.RDPAccountant,
           "fft": td.FFTAccountant, "spa": td.SaddlePointAccountant,
           "gdp": td.GDPAccountant}[name]
    return cls(**opts)


def _result_dict(r) -> dict:
    out = {"type": type(r).__name__}
    for f in ("epsilon", "delta", "lower", "upper", "estimate", "certified", "accountant",
              "note", "converged", "conversion", "noise_multiplier", "sampling_rate", "steps"):
        if hasattr(r, f):
            val = getattr(r, f)
            out[f] = val if isinstance(val, (bool, str)) or val is None else _num(val)
    details = getattr(r, "details", None)
    if isinstance(details, dict):
        out["details"] = {k: (val if isinstance(val, (bool, str, int)) or val is None
                              else _num(val))
                          for k, val in details.items()
                          if isinstance(val, (bool, str, int, float)) or val is None
                          or hasattr(val, "dtype")}
    return out


def _execute(spec: dict):
    import importlib

    import tightdp as td
    kind = spec["kind"]
    if kind in ("epsilon", "delta"):
        opts = dict(spec.get("opts", {}))
        if _replace_one(spec["mech"]):
            opts.setdefault("neighboring", "replace_one")
        acc = _accountant(td, spec["accountant"], opts)
        _compose(td, acc, spec["mech"], spec.get("steps", 1))
        r = acc.epsilon(spec["arg"]) if kind == "epsilon" else acc.delta(spec["arg"])
        return _result_dict(r)
    if kind == "call":
        mod, _, name = spec["target"].partition(":")
        fn = getattr(importlib.import_module(mod), name)
        return _result_dict(fn(*spec.get("args", ()), **spec.get("kwargs", {})))
    raise KeyError(kind)


def _serve() -> None:
    """The worker's loop: pickled specs on stdin, pickled outcomes on the original stdout
    (``sys.stdout`` goes to stderr so that prints cannot corrupt the channel)."""
    import pickle
    import traceback
    import tracemalloc
    _quiet_threads()
    _limit_memory()
    chan_in = sys.stdin.buffer
    chan_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout = sys.stderr
    while True:
        try:
            spec = pickle.load(chan_in)
        except EOFError:
            return
        if spec is None:
            return
        t0 = time.perf_counter()
        tracemalloc.start()
        tracemalloc.reset_peak()
        out: dict = {}
        try:
            out["result"] = _execute(spec)
            out["status"] = "ok"
        except MemoryError:
            out["status"] = "MemoryError"
            out["error_type"] = "MemoryError"
            out["error"] = "MemoryError (address-space limit reached)"
        except ValueError as e:   # includes BudgetExceeded: a clean refusal
            out["status"] = "refused"
            out["error_type"] = type(e).__name__
            out["error"] = str(e)
        except Exception as e:     # noqa: BLE001 -- anything else is a defect to report
            out["status"] = "error"
            out["error_type"] = type(e).__name__
            out["error"] = f"{type(e).__name__}: {e}"
            out["traceback"] = traceback.format_exc()[-2000:]
        out["seconds"] = time.perf_counter() - t0
        out["peak_bytes"] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        pickle.dump(out, chan_out)
        chan_out.flush()


class Guard:
    """One guarded worker process; ``run(spec)`` returns a dict with ``status`` in
    {"ok", "refused", "error", "MemoryError", "killed (memory)", "timeout"}, ``seconds``,
    ``peak_bytes`` (tracemalloc; None when killed), ``result`` or ``error``."""

    def __init__(self, timeout: float = GUARD_SECONDS) -> None:
        self.timeout = timeout
        self._proc = None

    def _start(self) -> None:
        here = os.path.dirname(os.path.abspath(__file__))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [here] + [p for p in sys.path if p and os.path.isdir(p)])
        self._proc = subprocess.Popen(
            [sys.executable, "-c", "import _guard; _guard._serve()"], env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def _kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            os.kill(self._proc.pid, signal.SIGKILL)
            self._proc.wait(5)
        self._proc = None

    def run(self, spec: dict, timeout: float | None = None) -> dict:
        import pickle
        import select
        if self._proc is None or self._proc.poll() is not None:
            self._start()
        timeout = self.timeout if timeout is None else timeout
        t0 = time.perf_counter()
        try:
            pickle.dump(spec, self._proc.stdin)
            self._proc.stdin.flush()
            ready, _, _ = select.select([self._proc.stdout], [], [], timeout)
            if not ready:
                self._kill()
                return {"status": "timeout", "seconds": time.perf_counter() - t0,
                        "peak_bytes": None, "error": f"killed after {timeout:.0f} s"}
            return pickle.load(self._proc.stdout)
        except (EOFError, BrokenPipeError, pickle.UnpicklingError):
            code = self._proc.wait(5) if self._proc is not None else None
            self._kill()
            return {"status": "killed (memory)", "seconds": time.perf_counter() - t0,
                    "peak_bytes": None,
                    "error": f"worker died (exit code {code}) under RLIMIT_AS={HARD_LIMIT}"}

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            try:
                import pickle
                pickle.dump(None, self._proc.stdin)
                self._proc.stdin.flush()
                self._proc.wait(5)
            except Exception:      # noqa: BLE001
                pass
        self._kill()


_CLI_WRAPPER = (
    "import atexit, os, resource, runpy, sys\n"
    "def _rss():\n"
    "    with open(os.environ['TIGHTDP_EDGES_RSS_FILE'], 'w') as f:\n"
    "        f.write(str(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024))\n"
    "atexit.register(_rss)\n"
    "sys.argv[0] = 'tightdp'\n"
    "runpy.run_module('tightdp.cli', run_name='__main__', alter_sys=True)\n"
)


def run_cli(args: list[str], timeout: float = GUARD_SECONDS, cwd: str | None = None) -> dict:
    """``python -m tightdp.cli *args`` under the hard memory limit and a timeout; returns
    ``status`` ("ok" or "timeout"), ``returncode`` (None on timeout), ``stdout``, ``stderr``,
    ``seconds`` and ``max_rss_bytes`` (the CLI process's peak resident set; None when it was
    killed)."""
    import tempfile
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(var, "1")
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as rss_file:
        env["TIGHTDP_EDGES_RSS_FILE"] = rss_file.name
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", _CLI_WRAPPER, *args], cwd=cwd, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=_limit_memory)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            return {"returncode": None, "stdout": out, "stderr": err,
                    "seconds": time.perf_counter() - t0, "max_rss_bytes": None,
                    "status": "timeout"}
        seconds = time.perf_counter() - t0
        text = rss_file.read().strip()
    return {"returncode": proc.returncode, "stdout": out, "stderr": err, "seconds": seconds,
            "max_rss_bytes": int(text) if text else None, "status": "ok"}


def run_python(code: str, timeout: float = GUARD_SECONDS) -> dict:
    """``python -c code`` with this checkout's ``src`` first on ``PYTHONPATH`` (so it runs
    from a plain clone) under the hard memory limit; returns ``returncode`` (None when killed
    at ``timeout``), ``stdout``, ``stderr``, ``seconds`` (wall) and ``max_rss_bytes`` (that
    child's peak resident set, from ``os.wait4``)."""
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([src] + [p for p in [env.get("PYTHONPATH")] if p])
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(var, "1")
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_limit_memory)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        return {"returncode": None, "stdout": out, "stderr": err,
                "seconds": time.perf_counter() - t0, "max_rss_bytes": None}
    seconds = time.perf_counter() - t0
    # communicate() reaped the child; its rusage is in RUSAGE_CHILDREN only as a maximum
    # over all children, so the child reports its own peak (last line of stderr)
    rss = None
    lines = err.strip().splitlines()
    if lines and lines[-1].startswith("MAXRSS "):
        rss = int(lines[-1].split()[1]) * 1024
        err = "\n".join(lines[:-1])
    return {"returncode": proc.returncode, "stdout": out, "stderr": err, "seconds": seconds,
            "max_rss_bytes": rss}


#: appended to the code of :func:`run_python` callers: the child's peak RSS (kB on Linux)
REPORT_RSS = ("\nimport resource, sys\n"
              "print('MAXRSS', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "
              "file=sys.stderr)\n")
