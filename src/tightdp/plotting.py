"""Plots (matplotlib, the ``[plot]`` extra): the privacy curve with its certified band, the
trade-off (f-DP) curve, and eps against the number of steps for several accountants."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from .accountants.base import Accountant
from .accountants.registry import make_accountant
from .mechanisms.base import Mechanism
from .progress import progress_bar
from .risk import TradeoffResult

__all__ = ["plot_privacy_curve", "plot_tradeoff", "plot_epsilon_vs_steps", "tradeoff_curve",
           "plot_roc", "pyplot"]


def pyplot():
    """matplotlib's pyplot (Agg backend unless one is chosen), or an ImportError saying how to
    install it."""
    try:
        import matplotlib

        matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("plotting needs matplotlib: pip install 'tightdp[plot]'") from err
    return plt


def plot_privacy_curve(accountant: Accountant, epsilon: np.ndarray | None = None, ax=None,
                       label: str | None = None):
    """delta(eps) on a log axis, with the certified band between lower and upper bounds."""
    plt = pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    with progress_bar(total=2, desc="privacy curve", unit="query") as bar:
        if epsilon is None:
            e_mid = float(accountant.epsilon(1e-6).epsilon)
            epsilon = np.linspace(0.0, max(2.0 * e_mid, 1.0), 200)
        bar.update(1)
        r = accountant.delta(np.asarray(epsilon, dtype=float))
        bar.update(1)
    name = label or accountant.name
    up = np.asarray(r.upper if r.upper is not None else r.delta, dtype=float)
    ax.semilogy(epsilon, up, label=f"{name} upper" if r.certified else f"{name} estimate")
    if r.lower is not None:
        lo = np.maximum(np.asarray(r.lower, dtype=float), 1e-300)
        ax.fill_between(epsilon, lo, up, alpha=0.3, label=f"{name} certified band")
    ax.set_xlabel("epsilon")
    ax.set_ylabel("delta(epsilon)")
    ax.grid(visible=True, which="both", alpha=0.3)
    ax.legend()
    return ax


def tradeoff_curve(accountant: Accountant, alpha: np.ndarray, epsilon: np.ndarray | None = None
                   ) -> np.ndarray:
    """Trade-off function ``beta(alpha)`` implied by the certified upper curve delta(eps):
    ``beta(alpha) = max_eps max(0, 1 - delta(eps) - e^eps alpha, e^-eps (1 - delta(eps) - alpha))``
    (Dong, Roth, Su 2019, Prop. 2.12; a lower bound on the true trade-off, hence safe)."""
    with progress_bar(total=2, desc="trade-off curve", unit="query") as bar:
        if epsilon is None:
            # beyond eps(1e-12) the curve adds nothing visible to beta
            epsilon = np.linspace(0.0, max(float(accountant.epsilon(1e-12).epsilon), 1.0),
                                  300)
        bar.update(1)
        r = accountant.delta(epsilon)
        bar.update(1)
    d = np.asarray(r.upper if r.upper is not None else r.delta, dtype=float)
    a = np.asarray(alpha, dtype=float)[:, None]
    e = np.asarray(epsilon, dtype=float)[None, :]
    with np.errstate(over="ignore"):
        b1 = 1 - d[None, :] - np.exp(e) * a
        b2 = np.exp(-e) * (1 - d[None, :] - a)
    return np.clip(np.max(np.maximum(b1, b2), axis=1), 0.0, 1.0)


def plot_tradeoff(accountant: Accountant, ax=None, label: str | None = None):
    """The trade-off (f-DP) curve: type II against type I error of the best test."""
    plt = pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 5))
    alpha = np.linspace(0, 1, 201)
    ax.plot(alpha, tradeoff_curve(accountant, alpha), label=label or accountant.name)
    ax.plot(alpha, 1 - alpha, "k:", lw=0.8, label="perfect privacy")
    ax.set_xlabel("type I error alpha")
    ax.set_ylabel("type II error beta")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.legend()
    return ax


def plot_epsilon_vs_steps(mechanism_factory: Callable[[], Mechanism], steps: Sequence[int],
                          delta: float, accountants: Sequence[str] = ("pld", "rdp"), ax=None,
                          **options):
    """eps(delta) against the number of steps, one line per accountant (with the certified
    band for those that give both bounds)."""
    plt = pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4))
    steps = list(steps)
    bar = progress_bar(total=len(steps) * len(accountants), desc="epsilon against steps",
                       unit="query")
    for name in accountants:
        ups: list = []
        los: list = []
        for t in steps:
            acc = make_accountant(name, **options).compose(mechanism_factory(), t)
            r = acc.epsilon(delta)
            ups.append(r.epsilon)
            los.append(r.lower if r.lower is not None else np.nan)
            bar.update(1)
        line = ax.plot(steps, ups, label=name)[0]
        if not np.all(np.isnan(los)):
            ax.fill_between(steps, los, ups, color=line.get_color(), alpha=0.25)
    bar.close()
    ax.set_xlabel("steps")
    ax.set_ylabel(f"epsilon at delta={delta:g}")
    ax.grid(visible=True, alpha=0.3)
    ax.legend()
    return ax


def plot_roc(result: TradeoffResult, ax=None, *, log: bool = False, gdp: bool = True,
             label: str | None = None):
    """The ROC view of a trade-off result (:func:`tightdp.risk.tradeoff`,
    :func:`tightdp.dpsgd_risk`): the best attack's TPR against FPR, the certified band
    between ``tpr_lower`` and ``tpr_upper``, and (``gdp``) the TPR ``1 - G_mu(FPR)`` of the
    nearest Gaussian-DP curve certified to lie below the true one, ``mu = mu_upper`` of
    :meth:`TradeoffResult.gdp_mu` (Dong, Roth & Su 2022, eq. (2.4)); ``log`` puts both axes
    on log scales (the small FPRs of membership inference)."""
    from scipy.stats import norm

    plt = pyplot()
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 5))
    fpr = np.geomspace(1e-6, 1.0, 300) if log else np.linspace(0.0, 1.0, 301)
    lo, hi = result.tpr(fpr)
    name = label or result.accountant
    line = ax.plot(fpr, hi, lw=1, label=f"{name} TPR upper (certified)")[0]
    ax.fill_between(fpr, lo, hi, color=line.get_color(), alpha=0.35,
                    label=f"{name} certified band")
    if gdp:
        _, mu = result.gdp_mu()
        if np.isfinite(mu):
            ax.plot(fpr, norm.sf(norm.isf(fpr) - mu), "--", lw=0.8, color="0.3",
                    label=f"{mu:.3g}-GDP")
    ax.plot(fpr, fpr, "k:", lw=0.8, label="random guess")
    ax.set_xlabel("false-positive rate (FPR)")
    ax.set_ylabel("true-positive rate (TPR)")
    if log:
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylim(max(1e-6, float(np.min(lo[lo > 0])) if np.any(lo > 0) else 1e-6), 1.0)
    else:
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
    ax.legend(fontsize=8)
    return ax
