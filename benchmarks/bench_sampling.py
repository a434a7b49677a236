"""Benchmark: sampling schemes beyond Poisson -- tightdp against the peers that answer them,
one table per row group, each row printed as it is measured.

* ``allocation``: random allocation (``RandomAllocation``, k of t steps per epoch, E epochs),
  eps at delta by a fresh ``PLDAccountant`` (default rtol 1e-3; the lattice of one epoch is
  cached per (sigma, t, k) in the process, so a setting differing from the one before only
  in E or delta reuses it) against pld-accounting's ``gaussian_allocation_epsilon_range``
  (its default adaptive accuracy).
* ``shuffle``: shuffled fixed batches (``Shuffled``, t batches per epoch, E epochs), ours
  only: no peer certifies shuffling; the bracket is [the attack of Chua et al., no
  amplification].
* ``truncated``: truncated Poisson (n = 1000, q = 0.01, at most 12 per batch, sigma = 1),
  add/remove and replace-one, against dp_accounting's PLD of
  ``TruncatedSubsampledGaussianDpEvent`` (default discretization 1e-4).
* ``replace_one``: the Poisson-subsampled Gaussian (q = 0.01, sigma = 1) under replace-one,
  against dp_accounting's PLD.

Single runs on a shared CPU: times are indicative.

``python benchmarks/bench_sampling.py [--skip-peer] [--quick] [--only GROUP,...]
[--allocation 'sigma,t,k,E,delta;...']``
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable, Iterator

import tightdp as td

#: (sigma, steps t, selected k, epochs E, delta): the targets of random allocation (width
#: within 1e-3 for k = 1, 1 s, 20 times pld-accounting) and small noise
ALLOCATION = [(1.0, 1000, 1, 1, 1e-6), (1.0, 100, 1, 3, 1e-5), (0.8, 1000, 1, 10, 1e-8),
              (0.5, 10000, 1, 10, 1e-5), (0.6, 1000, 1, 1, 1e-5), (1.0, 10000, 10, 10, 1e-5),
              (2.0, 1000, 2, 1, 1e-6)]
#: (sigma, batches per epoch t, epochs E, delta, relation)
SHUFFLE = [(1.0, 100, 10, 1e-5, "replace_special"), (2.0, 1000, 10, 1e-5, "replace_special"),
           (1.0, 100, 10, 1e-5, "replace_one"), (4.0, 10000, 50, 1e-6, "replace_special")]
#: the steps of the truncated Poisson and replace-one rows
STEPS = [1000, 10000]
DELTA = 1e-5


def _ours(mech: td.Mechanism, count: int, delta: float, relation: str
          ) -> tuple[float, float, float]:
    lo, up, wall, _ = _ours_cpu(mech, count, delta, relation)
    return lo, up, wall


def _ours_cpu(mech: td.Mechanism, count: int, delta: float, relation: str
              ) -> tuple[float, float, float, float]:
    """Our bracket, wall and CPU seconds of a fresh accountant's query."""
    start, cpu = time.perf_counter(), time.process_time()
    r = td.PLDAccountant(neighboring=relation).compose(mech, count).epsilon(delta)
    lower = math.nan if r.lower is None else float(r.lower)
    return lower, float(r.upper), time.perf_counter() - start, time.process_time() - cpu


def _peer_allocation(s: tuple) -> tuple[float, float, float]:
    from PLD_accounting import gaussian_allocation_epsilon_range
    sigma, t, k, e, d = s
    start = time.perf_counter()
    up, lo = gaussian_allocation_epsilon_range(delta=d, sigma=sigma, num_steps=t,
                                               num_selected=k, num_epochs=e)
    return lo, up, time.perf_counter() - start


def random_allocation_rows(settings: list[tuple], peer: bool) -> Iterator[str]:
    """One row per setting: our bracket, width and time; the peer's; the time ratio."""
    yield ("| sigma | t | k | E | delta | tightdp [lower, upper] | rel. width | s | CPU s "
           "| peer [lower, upper] | rel. width | peer s | speed-up |")
    yield "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    for s in settings:
        sigma, t, k, e, d = s
        lo, up, sec, cpu = _ours_cpu(td.RandomAllocation(td.Gaussian(sigma), t, k), e, d,
                                     "add_or_remove_one")
        plo = pup = psec = math.nan
        if peer:
            try:
                plo, pup, psec = _peer_allocation(s)
            except ImportError:
                peer = False
        yield (f"| {sigma:g} | {t} | {k} | {e} | {d:g} | [{lo:.5f}, {up:.5f}] "
               f"| {(up - lo) / up:.1e} | {sec:.2f} | {cpu:.2f} | [{plo:.5f}, {pup:.5f}] "
               f"| {(pup - plo) / pup:.1e} | {psec:.1f} | {psec / sec:.0f}x |")


def shuffling_rows(settings: list[tuple]) -> Iterator[str]:
    """One row per setting: our bracket (no amplification above, the attack below) and time."""
    yield "| sigma | t | E | delta | relation | tightdp lower | tightdp upper | s |"
    yield "|---|---|---|---|---|---|---|---|"
    for sigma, t, e, d, rel in settings:
        lo, up, sec = _ours(td.Shuffled(td.Gaussian(sigma), t, neighboring=rel), e, d, rel)
        yield f"| {sigma:g} | {t} | {e} | {d:g} | {rel} | {lo:.5f} | {up:.5f} | {sec:.3f} |"


def _theirs(build: Callable, steps: int) -> tuple[float, float]:
    start = time.perf_counter()
    e = build().self_compose(steps).get_epsilon_for_delta(DELTA)
    return float(e), time.perf_counter() - start


def _dp_row(case: str, steps: int, ours: tuple, theirs: tuple | None) -> str:
    lo, up, t1 = ours
    e, t2 = theirs if theirs is not None else (math.nan, math.nan)
    return (f"| {case} | {steps} | {lo:.5f} | {up:.5f} | {t1:.3f} | {e:.5f} | {t2:.3f} | "
            f"{t2 / t1:.1f} |")


_DP_HEAD = ("| case | steps | our lower | our upper | our s | dp_accounting eps | their s "
            "| ratio |", "|---|---|---|---|---|---|---|---|")


def truncated_rows(steps_list: list[int], peer: bool) -> Iterator[str]:
    """Truncated Poisson, both relations, against dp_accounting's PLD."""
    yield from _DP_HEAD
    pld = _dp_accounting() if peer else None
    mech = td.TruncatedPoisson(td.Gaussian(1.0), 0.01, 12, 1000)
    for relation in ("add_or_remove_one", "replace_one"):
        for steps in steps_list:
            theirs = None
            if pld is not None:
                rel = getattr(pld.NeighborRel, relation.upper())
                theirs = _theirs(lambda rel=rel: pld.from_truncated_subsampled_gaussian_mechanism(
                    1000, 0.01, 12, 1.0, neighboring_relation=rel), steps)
            yield _dp_row(f"truncated {relation}", steps, _ours(mech, steps, DELTA, relation),
                          theirs)


def replace_one_rows(steps_list: list[int], peer: bool) -> Iterator[str]:
    """Poisson sampling under replace-one against dp_accounting's PLD."""
    yield from _DP_HEAD
    pld = _dp_accounting() if peer else None
    mech = td.PoissonSubsampled(td.Gaussian(1.0), 0.01)
    for steps in steps_list:
        theirs = None if pld is None else _theirs(lambda: pld.from_gaussian_mechanism(
            1.0, sampling_prob=0.01, neighboring_relation=pld.NeighborRel.REPLACE_ONE), steps)
        yield _dp_row("poisson replace_one", steps, _ours(mech, steps, DELTA, "replace_one"),
                      theirs)


def _dp_accounting():
    """dp_accounting's PLD module, or None where it is not installed."""
    try:
        from dp_accounting.pld import privacy_loss_distribution
    except ImportError:
        return None
    return privacy_loss_distribution


GROUPS = ("allocation", "shuffle", "truncated", "replace_one")


def _setting(text: str) -> tuple:
    """``sigma,t,k,E,delta`` as a setting of :data:`ALLOCATION`."""
    sigma, t, k, e, d = text.split(",")
    return float(sigma), int(float(t)), int(k), int(e), float(d)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-peer", action="store_true")
    ap.add_argument("--quick", action="store_true",
                    help="two allocation and shuffling settings, 1000 steps")
    ap.add_argument("--allocation", default="",
                    help="semicolon list of allocation settings sigma,t,k,E,delta (in place "
                         "of the default ones), e.g. '0.5,10000,1,10,1e-5;1,100,1,3,1e-5'")
    ap.add_argument("--only", default=",".join(GROUPS),
                    help=f"comma list of the row groups to run, of {', '.join(GROUPS)}")
    a = ap.parse_args(argv)
    only = [g.strip() for g in a.only.split(",") if g.strip()]
    if not only or any(g not in GROUPS for g in only):
        ap.error(f"--only takes a comma list of {', '.join(GROUPS)}, got {a.only!r}")
    peer, steps = not a.skip_peer, STEPS[:1] if a.quick else STEPS
    allocation = ALLOCATION[:2] if a.quick else ALLOCATION
    if a.allocation:
        try:
            allocation = [_setting(x) for x in a.allocation.split(";") if x.strip()]
        except ValueError:
            ap.error(f"--allocation takes sigma,t,k,E,delta;..., got {a.allocation!r}")
    groups = {
        "allocation": ("random allocation vs pld-accounting", lambda: random_allocation_rows(
            allocation, peer)),
        "shuffle": ("shuffling (ours only: no peer certifies it)",
                    lambda: shuffling_rows(SHUFFLE[:2] if a.quick else SHUFFLE)),
        "truncated": ("truncated Poisson (n=1000, q=0.01, B=12, sigma=1, delta=1e-5) vs "
                      "dp_accounting", lambda: truncated_rows(steps, peer)),
        "replace_one": ("Poisson (q=0.01, sigma=1, delta=1e-5) under replace-one vs "
                        "dp_accounting", lambda: replace_one_rows(steps, peer)),
    }
    for g in only:
        title, rows = groups[g]
        print(f"\n{title}\n")
        for row in rows():
            print(row, flush=True)


if __name__ == "__main__":
    main()
