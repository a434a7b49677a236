"""Plots render to non-empty PNG images (Agg backend)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import tightdp as td

mpl = pytest.importorskip("matplotlib")
mpl.use("Agg")
import matplotlib.image as mpimg  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402

from tightdp.plotting import (  # noqa: E402
    plot_epsilon_vs_steps,
    plot_privacy_curve,
    plot_tradeoff,
    tradeoff_curve,
)


def _check_png(path):
    img = mpimg.imread(path)
    assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 100
    assert np.std(img[..., :3]) > 0.01  # not a blank image


def _acc():
    return td.PLDAccountant(rtol=1e-2).compose(td.PoissonSubsampled(td.Gaussian(1.0), 0.05),
                                               100)


def test_privacy_curve(tmp_path):
    ax = plot_privacy_curve(_acc(), epsilon=np.linspace(0, 4, 40))
    ax.figure.savefig(tmp_path / "c.png")
    plt.close(ax.figure)
    _check_png(tmp_path / "c.png")


def test_tradeoff(tmp_path):
    ax = plot_tradeoff(_acc())
    ax.figure.savefig(tmp_path / "t.png")
    plt.close(ax.figure)
    _check_png(tmp_path / "t.png")


def test_tradeoff_of_gaussian_is_below_the_exact_one():
    # Gaussian mechanism: exact trade-off Phi(Phi^-1(1 - alpha) - mu) (Dong, Roth, Su 2019);
    # ours is derived from the certified upper curve, so it may only be lower
    from scipy.stats import norm

    acc = td.PLDAccountant(rtol=1e-3).compose(td.Gaussian(1.0), 1)
    alpha = np.linspace(0.01, 0.99, 21)
    exact = norm.cdf(norm.ppf(1 - alpha) - 1.0)
    ours = tradeoff_curve(acc, alpha, epsilon=np.linspace(-5, 8, 800))
    assert np.all(ours <= exact + 1e-9)
    assert np.max(exact - ours) < 0.02


def test_epsilon_vs_steps(tmp_path):
    ax = plot_epsilon_vs_steps(lambda: td.PoissonSubsampled(td.Gaussian(1.0), 0.05),
                               [10, 50, 100], 1e-5, accountants=("pld", "rdp"), rtol=1e-2)
    ax.figure.savefig(tmp_path / "s.png")
    plt.close(ax.figure)
    _check_png(tmp_path / "s.png")


def test_cli_plot(tmp_path):
    out = tmp_path / "curve.png"
    p = subprocess.run([sys.executable, "-m", "tightdp.cli", "plot", "--sampling-rate", "0.05",
                        "--noise-multiplier", "1", "--steps", "100", "--output", str(out),
                        "--rtol", "1e-2"], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    _check_png(out)


def test_privacy_curve_data_equals_the_single_queries():
    # the plot's curve (one array query over the default 200 eps) against separate queries
    # at single eps: every bracket holds the true delta, so the brackets overlap, and each
    # upper bound is within rtol of the other
    def make():
        return td.PLDAccountant().compose(td.PoissonSubsampled(td.Gaussian(1.0), 0.01), 1000)

    acc = make()
    ax = plot_privacy_curve(acc)
    eps, up = (np.asarray(a, dtype=float) for a in ax.lines[0].get_data())
    plt.close(ax.figure)
    r = acc.delta(eps)
    assert np.array_equal(np.asarray(r.upper), up)
    assert eps.size == 200 and eps[-1] > 4.0  # out to delta ~ 1e-13
    for i in (0, 40, 100, 160, 199):
        one = make().delta(float(eps[i]))
        assert one.lower <= r.upper[i] and r.lower[i] <= one.upper
        assert abs(one.upper - r.upper[i]) <= td.DEFAULT_RTOL * one.upper


@pytest.mark.parametrize("log", [False, True])
def test_plot_roc_renders(tmp_path, log):
    from tightdp.plotting import plot_roc

    r = td.dpsgd_risk(sampling_rate=0.02, noise_multiplier=1.0, steps=200, fpr=0.01)
    ax = plot_roc(r, log=log)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("GDP" in t for t in labels) and any("band" in t for t in labels)
    out = tmp_path / "roc.png"
    ax.figure.savefig(out)
    plt.close(ax.figure)
    assert mpimg.imread(out).std() > 0
