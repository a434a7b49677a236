"""The per-example accounting cases that ran past the 2 GB / 60 s budget (the runaway
reports), as code for a child process (:func:`_guard.run_python`): counts built from a fixed
seed, one query, and one JSON line on stdout: ``{"status": "ok" | "refused", ...}``; and
:func:`check_budget_case`, the check of their budget. Shared by
``tests/test_individual.py``, ``tests/test_individual_spa.py`` and
``benchmarks/bench_edges.py``."""

from __future__ import annotations

#: builds ``counts``: per example a random number of lossy steps (up to ``tmax``) spread over
#: a few of ``used`` random columns of ``buckets``; column 0 the steps without loss; example
#: 0 has ``tmax`` steps, every chosen column is used at least once
COUNTS = """
import json, numpy as np, tightdp as td
def counts(n, buckets, used, tmax, kmax, seed):
    rng = np.random.default_rng(seed)
    cols = np.sort(rng.choice(np.arange(1, buckets + 1), size=used, replace=False))
    c = np.zeros((n, buckets + 1), dtype=np.int64)
    tot = rng.integers(1, tmax + 1, size=n)
    tot[0] = tmax
    for i in range(n):
        k = int(rng.integers(1, kmax))
        pick = rng.choice(cols, size=k, replace=False)
        c[i, pick] = rng.multinomial(tot[i], np.ones(k) / k)
    miss = np.setdiff1d(cols, np.nonzero(c[:, 1:].any(axis=0))[0] + 1)
    c[np.arange(miss.size) % n, miss] += 1
    c[:, 0] = rng.integers(0, 100, size=n)
    return c
def answer(run):
    try:
        out = run()
    except td.BudgetExceeded as e:
        out = {"status": "refused", "error": str(e)}
    print(json.dumps(out))
"""

#: 3,000 examples x 5,000 buckets (2,091 used, up to 2.4e6 steps), q = 0.01, sigma = 1.05,
#: delta = 3e-7 (individual PLD); if answered, example 0's upper bound and the certified
#: lower bound of the PLD accountant on its composition (each step rounded up to its bucket)
PLD_CASE = COUNTS + """
c = counts(3000, 5000, 2091, 2_400_000, 40, 0)
def run():
    r = td.IndividualPLDAccountant.from_counts(c, sampling_rate=0.01, noise_multiplier=1.05,
                                               clip_norm=1.0).epsilon(3e-7)
    acc = td.PLDAccountant()
    for j in np.nonzero(c[0, 1:])[0]:
        acc.compose(td.PoissonSubsampled(td.Gaussian(1.05, (j + 1) / 5000), 0.01),
                    int(c[0, j + 1]))
    return {"status": "ok", "upper0": float(r.upper[0]),
            "reference_lower0": float(acc.epsilon(3e-7).lower)}
answer(run)
"""

#: 3,000 examples x 5,000 buckets (3,895 used, up to 6e3 steps), q = 1e-3, sigma = 2.15,
#: delta = 1e-3 (individual saddle point); if answered, example 0's certified upper bound
#: and the PLD accountant's certified lower bound on its composition
SPA_CASE = COUNTS + """
c = counts(3000, 5000, 3895, 6000, 60, 1)
def run():
    r = td.IndividualSPAAccountant.from_counts(c, sampling_rate=1e-3, noise_multiplier=2.15,
                                               clip_norm=1.0).epsilon(1e-3)
    acc = td.PLDAccountant()
    for j in np.nonzero(c[0, 1:])[0]:
        acc.compose(td.PoissonSubsampled(td.Gaussian(2.15, (j + 1) / 5000), 1e-3),
                    int(c[0, j + 1]))
    return {"status": "ok", "upper0": float(r.upper[0]),
            "reference_lower0": float(acc.epsilon(1e-3).lower)}
answer(run)
"""


def check_budget_case(code: str, *, seconds: float | None = None) -> dict:
    """Run a runaway case above in a child process and check the budget: it exits normally
    within ``seconds`` (default the 60 s budget) and 2 GB peak RSS, with an answer or a
    one-line BudgetExceeded naming n_buckets; an answer's example-0 upper bound is at least
    the PLD accountant's certified lower bound on the same composition (computed
    independently in the child)."""
    import json

    from _guard import MAX_BYTES, MAX_SECONDS, REPORT_RSS, run_python
    out = run_python(code + REPORT_RSS, timeout=2 * MAX_SECONDS)
    assert out["returncode"] == 0, out["stderr"][-2000:]
    assert out["seconds"] < (MAX_SECONDS if seconds is None else seconds), out
    assert out["max_rss_bytes"] is not None and out["max_rss_bytes"] < MAX_BYTES, out
    res = json.loads(out["stdout"].strip().splitlines()[-1])
    if res["status"] == "refused":
        assert "\n" not in res["error"].strip() and res["error"].startswith("n_buckets"), res
    else:
        assert res["upper0"] >= res["reference_lower0"] > 0, res
    return res
