"""Benchmark: attack success (TPR at FPR, advantage) and calibration to a risk target --
tightdp.risk against riskcal 1.5.1 and dp_accounting 0.6, in one run.

Setting: Poisson DP-SGD, q = 0.01, sigma = 1, 10^4 steps. Rows:

* building the curve (tightdp: ``dpsgd_risk``, its certified bracket; dp_accounting: the
  connect-the-dots PLD at grid 1e-4, ``self_compose``; riskcal reads that PLD);
* TPR at 100 FPR values after the composition is built (tightdp: ``TradeoffResult.tpr``;
  riskcal: ``get_beta_from_pld``; dp_accounting 0.6 has no TPR function here, so its row is
  the Neyman-Pearson test of its remove PLD computed by this script);
* one calibration to "TPR <= 5% at FPR 1%" (tightdp: ``calibrate_noise(tpr=, fpr=)``;
  riskcal: ``find_noise_multiplier_for_err_rates``, minutes: skipped with ``--quick``).

Single runs on a shared CPU: times are indicative. Prints a markdown table.

``python benchmarks/bench_risk.py [--quick]``
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import tightdp as td

Q, SIGMA, T = 0.01, 1.0, 10_000
FPR3 = np.array([1e-3, 1e-2, 1e-1])
FPR100 = np.geomspace(1e-5, 1.0, 100)


class _Clock:
    """Wall and CPU seconds of a block (the CPU is shared: CPU time is the steadier one)."""

    def __enter__(self) -> _Clock:
        self.w, self.c = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc) -> None:
        self.w, self.c = time.perf_counter() - self.w, time.process_time() - self.c


def _row(who: str, what: str, clock: _Clock, value: str) -> None:
    print(f"| {who} | {what} | {clock.w:.4g} | {clock.c:.4g} | {value} |")


def ours(quick: bool) -> None:
    with _Clock() as k:
        r = td.dpsgd_risk(sampling_rate=Q, noise_multiplier=SIGMA, steps=T, fpr=FPR3)
    _row("tightdp", "curve (3 FPR) + advantage", k,
         " ".join(f"[{lo:.5f}, {hi:.5f}]" for lo, hi in zip(r.tpr_lower, r.tpr_upper,
                                                             strict=True))
         + f"; adv [{r.advantage_lower:.5f}, {r.advantage_upper:.5f}]")
    with _Clock() as k:
        lo, hi = r.tpr(FPR100)
    _row("tightdp", "TPR at 100 FPR", k,
         f"largest width {np.max(hi - lo):.2e}")
    with _Clock() as k:
        c = td.calibrate_noise(tpr=0.05, fpr=0.01, sampling_rate=Q, steps=T)
    _row("tightdp", "calibrate TPR<=0.05 @ FPR 0.01", k,
         f"sigma {c.noise_multiplier:.5f} ({c.evaluations} curves)")


def _np_tpr(pmf, alpha: np.ndarray) -> np.ndarray:
    d = pmf.to_dense_pmf()
    p = d._probs
    ls = (d._lower_loss + np.arange(p.size)) * d._discretization
    qa = np.cumsum((p * np.exp(-ls))[::-1])[::-1]
    pb = np.cumsum(p)
    i = np.clip(np.searchsorted(-qa, -alpha), 2, p.size - 1)
    w = (alpha - qa[i]) / (qa[i - 1] - qa[i])
    return 1 - (pb[i - 1] + (pb[i - 2] - pb[i - 1]) * w)


def peers(quick: bool) -> None:
    try:
        from dp_accounting.pld import privacy_loss_distribution as pm
    except ImportError:
        return
    with _Clock() as k:
        pld = pm.from_gaussian_mechanism(standard_deviation=SIGMA, sampling_prob=Q,
                                         use_connect_dots=True,
                                         value_discretization_interval=1e-4).self_compose(T)
    _row("dp_accounting", "PLD build (grid 1e-4)", k,
         f"adv {pld.get_delta_for_epsilon(0):.5f}")
    with _Clock() as k:
        tpr = _np_tpr(pld._pmf_remove, FPR100)
    _row("dp_accounting", "TPR at 100 FPR (NP test of its PLD)", k,
         " ".join(f"{x:.5f}" for x in _np_tpr(pld._pmf_remove, FPR3)) + f" ({tpr.size})")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from riskcal.analysis import get_beta_from_pld
            from riskcal.calibration.dpsgd import find_noise_multiplier_for_err_rates
    except ImportError:
        return
    with _Clock() as k:
        b = np.asarray(get_beta_from_pld(pld, alpha=FPR100))
    _row("riskcal", "TPR at 100 FPR", k,
         " ".join(f"{x:.5f}" for x in 1 - np.asarray(get_beta_from_pld(pld, alpha=FPR3)))
         + f" ({b.size})")
    if quick:
        return
    with _Clock() as k, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = find_noise_multiplier_for_err_rates(beta=0.95, alpha=0.01, sample_rate=Q,
                                                num_steps=T)
    _row("riskcal", "calibrate TPR<=0.05 @ FPR 0.01", k,
         f"sigma {float(getattr(s, 'noise_multiplier', s)):.5f}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="skip riskcal's calibration")
    a = ap.parse_args(argv)
    print(f"q={Q}, sigma={SIGMA}, steps={T}\n")
    print("| library | task | seconds | cpu seconds | result |")
    print("|---|---|---|---|---|")
    ours(a.quick)
    peers(a.quick)


if __name__ == "__main__":
    main()
