"""Numerical helpers shared across the package: log-space arithmetic and the safeguarded
scalar solvers. One home for each: a module that needs one of these imports it from here."""

from __future__ import annotations

import numpy as np

__all__ = ["lse_last", "log_sub_exp", "table_start"]


def lse_last(x: np.ndarray) -> np.ndarray:
    """logsumexp over the last axis (rows of -inf give -inf), without scipy's per-call
    overhead; fast paths for one and two components."""
    m = x.shape[-1]
    if m == 1:
        return x[..., 0].copy()
    if m == 2:
        return np.logaddexp(x[..., 0], x[..., 1])
    mx = x.max(axis=-1)
    ms = np.where(np.isfinite(mx), mx, 0.0)
    with np.errstate(divide="ignore"):
        return ms + np.log(np.exp(x - ms[..., None]).sum(axis=-1))


def log_sub_exp(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """log(e^a - e^b) for a >= b, elementwise; -inf where they are equal."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        d = b - a
        out = a + np.log(-np.expm1(np.minimum(d, 0.0)))
    out = np.where(np.isneginf(b), a, out)
    return np.where(np.isneginf(a) | (d >= 0), -np.inf, out)


def table_start(tab_x: np.ndarray, tab_l: np.ndarray, y: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Start of a monotone inversion ``L(x) = y`` from a table ``tab_l = L(tab_x)``
    (``tab_l`` made non-decreasing first): the bracketing table cell ``[a, b]`` of each ``y``
    and the linear interpolate inside it, for a Newton/bisection polish."""
    j = np.clip(np.searchsorted(tab_l, y, side="left"), 1, tab_x.size - 1)
    a, b = tab_x[j - 1], tab_x[j]
    dl = tab_l[j] - tab_l[j - 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        frac = np.where(dl > 0, (y - tab_l[j - 1]) / dl, 0.5)
    return a, b, a + np.clip(frac, 0.0, 1.0) * (b - a)
