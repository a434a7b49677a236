"""eps(delta = 1e-6) against the number of steps for DP-SGD with Poisson subsampling.

q = 0.01, sigma in {1, 2, 3}, up to 10^4 steps (the setting of Koskela, Jälkö, Honkela 2020,
Figs. 1b and 2). Three accountants on one plot:

* the Fourier accountant (``FFTAccountant``, L = 12, n = 10^6): an approximation, with its
  error estimates;
* the RDP accountant (``RDPAccountant``): an upper bound, loose for few steps;
* the certified PLD accountant (``PLDAccountant``): the certified upper bound.

Run: ``python examples/fourier_eps_vs_steps.py --output eps_vs_steps.png`` (about a minute).
"""

from __future__ import annotations

import argparse

import numpy as np

import tightdp
from tightdp import FFTAccountant, Gaussian, PLDAccountant, PoissonSubsampled
from tightdp.progress import progress_bar

Q, DELTA = 0.01, 1e-6


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--output", default="fourier_eps_vs_steps.png", help="PNG file to write")
    ap.add_argument("--points", type=int, default=12, help="number of step counts per curve")
    ap.add_argument("--n", type=int, default=1_000_000, help="grid points of the FFT accountant")
    args = ap.parse_args(argv)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rdp_cls = getattr(tightdp, "RDPAccountant", None)
    steps = np.unique(np.geomspace(10, 10_000, args.points).round().astype(int))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for sigma, color in zip((1.0, 2.0, 3.0), ("C0", "C1", "C2"), strict=True):
        mech = PoissonSubsampled(Gaussian(sigma), Q)
        fa, fa_err, rdp, pld = [], [], [], []
        for k in progress_bar(steps, desc=f"sigma={sigma:g}", unit="run"):
            r = FFTAccountant(12.0, args.n).compose(mech, int(k)).epsilon(DELTA)
            fa.append(r.epsilon)
            fa_err.append(r.details["error_estimate"])
            pld.append(PLDAccountant(rtol=1e-3).compose(mech, int(k)).epsilon(DELTA).upper)
            if rdp_cls is not None:
                rdp.append(rdp_cls().compose(mech, int(k)).epsilon(DELTA).epsilon)
        print(f"sigma={sigma}: max error estimate of the Fourier accountant "
              f"{max(fa_err):.1e}")
        ax.plot(steps, fa, "-", color=color, label=f"Fourier accountant, sigma={sigma:g}")
        ax.plot(steps, pld, "o", mfc="none", color=color,
                label=f"certified PLD (upper), sigma={sigma:g}")
        if rdp:
            ax.plot(steps, rdp, "--", color=color, label=f"RDP, sigma={sigma:g}")
    if rdp_cls is None:
        print("tightdp.RDPAccountant not available: RDP curves skipped")
    ax.set_xscale("log")
    ax.set_xlabel("number of steps k")
    ax.set_ylabel(f"eps at delta = {DELTA:g}")
    ax.set_title(f"Poisson-subsampled Gaussian, q = {Q}")
    ax.legend(fontsize=7, ncol=1)
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
