"""Numerical helpers shared across the package: log-space arithmetic, the floating-point
constants and the Python-float forms of a few numpy functions. One home for each: a module
that needs one of these imports it from here.

The safeguarded solvers live in :mod:`tightdp.roots`; their names are also importable from
here (the modules that import them from here get the same functions), as are the Python-float
forms of numpy's functions (``log0``, ``exp0``, ``logaddexp1`` and the namespace ``FLOATS``
of the formulas written once for floats and arrays; their home is ``tightdp.roots._floats``).
"""

from __future__ import annotations

import numpy as np

from .roots import (  # noqa: F401  (the solvers' names, importable from here)
    BracketError,
    bisect,
    bisect_int,
    bisect_log,
    bisect_until,
    bracket_of_points,
    descend_to_fixed_point,
    expand_bracket,
    grow_bracket,
    grow_until,
    newton_bracketed,
    newton_monotone,
    newton_polish,
    newton_scalar,
    secant_start,
    secant_walk,
    step_out,
    table_start,
    walk_out,
)
from .roots._floats import FLOATS, exp0, log0, logaddexp1  # noqa: F401  (one home: there)

__all__ = ["lse_last", "log_sub_exp", "MACHINE_EPSILON", "UNIT_ROUNDOFF", "log0", "exp0",
           "logaddexp1", "FLOATS"]


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


# --- floating-point constants --------------------------------------------------------------
#: the spacing of doubles at 1, ``2**-52`` (``np.finfo(float).eps``)
MACHINE_EPSILON = 2.0 ** -52
#: the unit roundoff of round-to-nearest doubles, ``2**-53`` (half the machine epsilon): the
#: relative error of one correctly rounded operation
UNIT_ROUNDOFF = 2.0 ** -53
