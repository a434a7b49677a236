"""numpy's elementwise functions on Python floats: the one place where the math module's
edge semantics (errors at 0, on overflow, NaN ignored by ``min``/``max``) are made numpy's.

The formulas and solvers that serve both one query and arrays are written once with an
arithmetic argument ``xp``: ``numpy`` for arrays, :data:`FLOATS` for a few Python floats
(no per-call costs of numpy on tiny arrays). Both run the same operations in the same order;
the floats' logarithms and exponentials are the math module's, whose last bit may differ
from numpy's, so each path keeps its own numbers. Re-exported by :mod:`tightdp._numerics`.
"""

from __future__ import annotations

import math

__all__ = ["FLOATS", "log0", "exp0", "logaddexp1", "minimum1", "maximum1"]


def log0(x: float) -> float:
    """``math.log`` with numpy's values at 0 (-inf) and below (NaN) instead of an error."""
    if x > 0.0 or x != x:
        return math.log(x)
    return -math.inf if x == 0.0 else math.nan


def exp0(x: float) -> float:
    """``math.exp`` with numpy's value on overflow (inf) instead of an error."""
    return math.exp(x) if x < 709.0 else (math.inf if x == x else x)


def logaddexp1(a: float, b: float) -> float:
    """``np.logaddexp`` of two floats (-inf, inf and NaN as numpy)."""
    if a < b:
        a, b = b, a
    if b == -math.inf or a == math.inf:
        return a
    return a + math.log1p(math.exp(b - a))


def minimum1(a: float, b: float) -> float:
    """``np.minimum`` of two floats: NaN if either is NaN (Python's ``min`` keeps the first
    argument when a comparison with NaN fails), else ``min(a, b)``."""
    if a != a or b != b:
        return math.nan
    return b if b < a else a


def maximum1(a: float, b: float) -> float:
    """``np.maximum`` of two floats: NaN if either is NaN, else ``max(a, b)``."""
    if a != a or b != b:
        return math.nan
    return a if a >= b else b


def _where(cond: bool, a: float, b: float) -> float:
    return a if cond else b


class _Floats:
    """The numpy functions the shared formulas use, on Python floats (numpy's values)."""

    log = staticmethod(log0)
    exp = staticmethod(exp0)
    expm1 = staticmethod(math.expm1)
    log1p = staticmethod(math.log1p)
    sqrt = staticmethod(math.sqrt)
    minimum = staticmethod(minimum1)
    maximum = staticmethod(maximum1)
    logaddexp = staticmethod(logaddexp1)
    where = staticmethod(_where)
    isnan = staticmethod(math.isnan)
    isfinite = staticmethod(math.isfinite)


#: the ``xp`` of the Python-float paths (``numpy`` is the arrays')
FLOATS = _Floats()
