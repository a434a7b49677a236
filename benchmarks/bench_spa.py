"""Benchmark: the saddle-point accountant (Alghamdi et al.) on DP-SGD.

Poisson-subsampled Gaussian, q = 0.01, sigma = 1, add/remove (both directions), steps from 10
to 1e7. Targets (issue 6): eps(delta) <= 5 ms per query independent of the number of steps,
delta(eps) for 100 eps in one vectorized call <= 20 ms.

Times are the median of repeated queries after one warm-up query per accountant (the warm-up
builds the cached quadrature node sets of the CGF; its time is reported separately as
"first"). Both the bare approximation (``bounds=False``) and the default (approximation plus
the certified refined-moments bound and the Berry-Esseen bracket) are timed.

``cold()`` (issue 17) times the query a user makes after composing: construct the mechanism and
the accountant, compose, ask once (``epsilon(1e-5)``, or ``delta`` at 100 eps), each run from
scratch (a fresh mechanism, hence no cached CGF node sets), beside the certified PLD
accountant's cold ``epsilon(1e-5)`` in the same process, with the ratio; "warm" is a further
``epsilon`` query on the composed accountant at another delta (node sets built). Targets: cold
eps <= 3 ms, cold delta at 100 eps <= 10 ms, warm <= 1 ms.

Run: ``python benchmarks/bench_spa.py [--cold-only] [--accuracy] [--pld] [--gaussian]``;
``--cold-only`` runs only the cold/warm table; ``--accuracy`` adds a
table of SP-MSD0 / SP-MSD1 / SP-CLT errors against the reference brackets of
../shared/reference/cases.json, ``--pld`` one against the certified PLD accountant on the DP-SGD
grid of issue 6 (slow: minutes), ``--gaussian`` the SP-MSD0/MSD1 errors for mu-GDP.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from tightdp import Gaussian, PoissonSubsampled, SaddlePointAccountant

STEPS = [10, 1_000, 100_000, 10_000_000]
DELTAS = [1e-5, 1e-8, 1e-10, 1e-15]


def _median_ms(fn, reps: int) -> float:
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(out)


#: (q, sigma, steps) of the cold-query table: DP-SGD q=0.01, sigma=1 from 10 to 1e7 steps, and
#: the issue's workloads (q=0.3, sigma=0.45, 2000 steps; q=1e-5, sigma=0.5, 1e6 steps)
COLD_CASES = [(0.01, 1.0, 10), (0.01, 1.0, 1_000), (0.01, 1.0, 10_000), (0.01, 1.0, 100_000),
              (0.01, 1.0, 10_000_000), (0.3, 0.45, 2_000), (1e-5, 0.5, 1_000_000)]


def cold(reps: int = 7, pld_reps: int = 3) -> None:
    """Cold and warm query times of the SPA beside the PLD accountant's cold query."""
    from tightdp import PLDAccountant

    def spa_eps(q, sigma, k):
        return SaddlePointAccountant().compose(PoissonSubsampled(Gaussian(sigma), q),
                                               k).epsilon(1e-5)

    print("### Cold queries (construct + compose + one query; fresh mechanism each run), "
          f"median of {reps} (PLD: {pld_reps}), delta = 1e-5\n")
    print("| q | sigma | steps | SPA eps cold [ms] | SPA delta(100 eps) cold [ms] | "
          "SPA eps warm [ms] | PLD eps cold [ms] | PLD / SPA (cold) | SPA eps [lower, upper] |"
          " PLD [lower, upper] |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    spa_eps(0.01, 1.0, 1000)  # imports and first-call set-up outside the timings
    for q, sigma, k in COLD_CASES:
        r = spa_eps(q, sigma, k)
        t_eps = _median_ms(lambda q=q, s=sigma, k=k: spa_eps(q, s, k), reps)
        eps = np.linspace(0.05, 3.0 * max(r.epsilon, 0.1), 100)
        t_del = _median_ms(lambda q=q, s=sigma, k=k, e=eps: SaddlePointAccountant().compose(
            PoissonSubsampled(Gaussian(s), q), k).delta(e), reps)
        acc = SaddlePointAccountant().compose(PoissonSubsampled(Gaussian(sigma), q), k)
        acc.epsilon(1e-5)
        ds = iter(np.geomspace(1e-6, 1e-4, 4 * reps + 1))
        t_warm = _median_ms(lambda a=acc, it=ds: a.epsilon(float(next(it))), reps)
        res = {}

        def pld_eps(q=q, s=sigma, k=k, out=res):
            out["r"] = PLDAccountant().compose(PoissonSubsampled(Gaussian(s), q),
                                               k).epsilon(1e-5)

        t_pld = _median_ms(pld_eps, pld_reps)
        p = res["r"]
        lo = f"{r.lower:.4f}" if r.lower is not None else "-"
        print(f"| {q:g} | {sigma:g} | {k:.0e} | {t_eps:.2f} | {t_del:.2f} | {t_warm:.2f} | "
              f"{t_pld:.2f} | {t_pld / t_eps:.1f} | [{lo}, {r.upper:.4f}] | "
              f"[{p.lower:.4f}, {p.upper:.4f}] |", flush=True)
    print()


def timing(q: float = 0.01, sigma: float = 1.0) -> None:
    print(f"### SaddlePointAccountant timing (Poisson subsampled Gaussian, q={q}, "
          f"sigma={sigma}, add/remove)\n")
    print("| steps | bounds | first query [ms] | eps(delta) per query [ms] | "
          "delta(eps), 100 eps [ms] | eps(1e-5) | [lower, upper] |")
    print("|---|---|---|---|---|---|---|")
    mech = PoissonSubsampled(Gaussian(sigma), q)
    for k in STEPS:
        for bounds in (False, True):
            acc = SaddlePointAccountant("msd1", bounds=bounds).compose(mech, k)
            t0 = time.perf_counter()
            r = acc.epsilon(1e-5)
            first = (time.perf_counter() - t0) * 1e3
            for d in DELTAS:  # warm the node caches of the tilts these queries need
                acc.epsilon(d)
            per_q = statistics.median(
                _median_ms(lambda d=d, a=acc: a.epsilon(d), 5) for d in DELTAS)
            eps = np.linspace(0.05, 3.0 * max(r.epsilon, 0.1), 100)
            acc.delta(eps)
            t_d = _median_ms(lambda a=acc, e=eps: a.delta(e), 5)
            br = f"[{r.lower:.4f}, {r.upper:.4f}]" if bounds and r.lower is not None else (
                f"[-, {r.upper:.4f}]" if bounds else "-")
            print(f"| {k:.0e} | {bounds} | {first:.1f} | {per_q:.2f} | {t_d:.2f} | "
                  f"{r.epsilon:.6f} | {br} |")
    print()


def accuracy() -> None:
    path = Path(__file__).resolve().parents[2] / "shared" / "reference" / "cases.json"
    cases = json.loads(path.read_text())["cases"]
    print("### SPA relative error against the reference brackets (DP-SGD, add/remove)\n")
    print("| case | q | sigma | steps | epochs | query | reference | MSD0 | MSD1 | CLT | "
          "certified upper ok |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for c in cases:
        m = c["mechanism"]
        if m["kind"] != "poisson_subsampled_gaussian" or m["neighboring"] != "add_remove":
            continue
        mech = PoissonSubsampled(Gaussian(m["sigma"], m["sensitivity"]), m["q"])
        q = c["query"]
        errs = {}
        ok = True
        for meth in ("msd0", "msd1", "clt"):
            acc = SaddlePointAccountant(meth).compose(mech, m["steps"])
            if q["type"] == "eps_at_delta":
                r = acc.epsilon(q["delta"])
                val = r.epsilon
            else:
                r = acc.delta(q["eps"])
                val = r.delta
            errs[meth] = val / c["best"] - 1
            ok &= r.upper >= c["lower"]
        qs = (f"eps @ delta={q['delta']:.0e}" if q["type"] == "eps_at_delta"
              else f"delta @ eps={q['eps']}")
        print(f"| {c['id']} | {m['q']} | {m['sigma']} | {m['steps']} | "
              f"{m['q'] * m['steps']:g} | {qs} | {c['best']:.6g} | {errs['msd0']:+.1e} | "
              f"{errs['msd1']:+.1e} | {errs['clt']:+.1e} | {ok} |")
    print()


def pld_table(rtol: float = 1e-5) -> None:
    """SP-MSD0/MSD1/CLT eps against the certified PLD accountant's bracket (the issue's
    DP-SGD grid: q = 0.01, sigma in {0.8, 1, 2}, 1 to 100 epochs, delta in {1e-5, 1e-10})."""
    from tightdp import PLDAccountant

    print(f"### SPA eps vs. certified PLD bracket (q=0.01, add/remove; PLD rtol={rtol})\n")
    print("| sigma | epochs | delta | PLD [lower, upper] | MSD0 | MSD1 | CLT | "
          "SPA upper (certified) | regime |")
    print("|---|---|---|---|---|---|---|---|---|")
    q = 0.01
    for sigma in (0.8, 1.0, 2.0):
        mech = PoissonSubsampled(Gaussian(sigma), q)
        for epochs in (1, 3, 10, 30, 100):
            k = int(round(epochs / q))
            pld = PLDAccountant(rtol=rtol).compose(mech, k)
            for delta in (1e-5, 1e-10):
                ref = pld.epsilon(delta)
                mid = 0.5 * (ref.lower + ref.upper)
                row = {}
                for meth in ("msd0", "msd1", "clt"):
                    r = SaddlePointAccountant(meth).compose(mech, k).epsilon(delta)
                    row[meth] = r
                errs = " | ".join(f"{row[m].epsilon / mid - 1:+.1e}" for m in
                                  ("msd0", "msd1", "clt"))
                up = row["msd1"].upper
                reg = "unreliable" if "unreliable" in row["msd1"].details["regime"] else "ok"
                print(f"| {sigma} | {epochs} | {delta:.0e} | [{ref.lower:.6f}, {ref.upper:.6f}] "
                      f"| {errs} | {up:.4f} (>= lower: {up >= ref.lower}) | {reg} |",
                      flush=True)
    print()


def gaussian_table() -> None:
    """SP-MSD0 / SP-MSD1 relative errors for mu-GDP (Gaussian compositions) against the closed
    form ``Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)`` evaluated in log space."""
    from scipy.optimize import brentq
    from scipy.special import log_ndtr

    def log_delta(eps: float, mu: float) -> float:
        la = log_ndtr(-eps / mu + mu / 2)
        lb = log_ndtr(-eps / mu - mu / 2)
        return float(la + np.log1p(-np.exp(eps + lb - la)))

    print("### Gaussian compositions (mu-GDP): relative errors against the closed form\n")
    print("| mu | delta | eps | MSD0 err eps | MSD1 err eps | MSD0 err delta | MSD1 err delta "
          "| CLT err eps |")
    print("|---|---|---|---|---|---|---|---|")
    for mu in (0.5, 1.0, 2.0, 3.0, 5.0):
        accs = {m: SaddlePointAccountant(m, bounds=False).compose(Gaussian(1.0 / mu))
                for m in ("msd0", "msd1", "clt")}
        for d in (1e-2, 1e-5, 1e-10, 1e-20, 1e-30):
            ld = float(np.log(d))
            et = brentq(lambda e, m=mu, ld=ld: log_delta(e, m) - ld, 1e-6,
                        mu * mu / 2 + 15 * mu, xtol=1e-14, rtol=1e-15)
            ee = {m: a.epsilon(d).epsilon / et - 1 for m, a in accs.items()}
            de = {m: a.delta(et).delta / d - 1 for m, a in accs.items()}
            print(f"| {mu} | {d:.0e} | {et:.6g} | {ee['msd0']:+.2e} | {ee['msd1']:+.2e} | "
                  f"{de['msd0']:+.2e} | {de['msd1']:+.2e} | {ee['clt']:+.1e} |")
    print()


if __name__ == "__main__":
    cold()
    if "--cold-only" in sys.argv:
        sys.exit(0)
    timing()
    if "--accuracy" in sys.argv:
        accuracy()
    if "--pld" in sys.argv:
        pld_table()
    if "--gaussian" in sys.argv:
        gaussian_table()
