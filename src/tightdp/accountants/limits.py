"""Compositions beyond every accountant's numerics, answered in closed form in one place.

Two things put a composition out of reach of the grids, transforms and saddle points of the
accountants: a privacy loss far beyond what floating point resolves (vanishing noise: one
Gaussian step with ``sigma = 1e-100`` has loss ``N(5e199, 1e200)``), and astronomic step
counts (grid and FFT sizes of ``10^18`` points and more, beyond the integers numpy indexes
with). :func:`out_of_reach` detects both from the mechanisms' parameters
(:attr:`~tightdp.mechanisms.Mechanism.loss_scale`) before anything is built, and
:func:`far_epsilon` / :func:`far_delta` answer from closed forms, every one certified:

* every term exactly mu-GDP (Gaussian mechanisms): the exact curve of
  ``sqrt(sum k_i mu_i^2)``-GDP (Dong, Roth, Su 2022, Cor. 2.13 and 3.3), ``lower == upper``;
* else, where every term has a Rényi-DP formula: the RDP upper bound (Mironov 2017, Prop. 1
  and 3; Canonne, Kamath, Steinke 2020, Prop. 12), no lower bound;
* else the trivial bounds ``eps <= inf`` and ``delta <= 1``.

Where the bound is beyond the largest double it is ``inf`` and the note says
``epsilon = inf`` plainly. Such an answer is no under-report: a Gaussian step with
``mu > ~1e154`` has a true eps above the largest double at every delta in (0, 1), and a
Poisson-subsampled one at rate q over T steps has ``delta(eps) -> 1 - (1-q)^T`` for every
finite eps as sigma -> 0.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..curves.gdp import gdp_delta, gdp_epsilon
from ..curves.rdp import DEFAULT_ORDERS, delta_from_rdp, eps_from_rdp
from ..mechanisms.base import Mechanism
from ..results import DeltaResult, EpsilonResult

__all__ = ["COUNT_MAX", "LOSS_SCALE_MAX", "out_of_reach", "far_epsilon", "far_delta"]

#: above this many compositions in total every accountant answers in closed form: the grid
#: accountants' FFT lengths reach numpy's index range (2^63) from about 10^18
COUNT_MAX = 10**16
#: above this composed loss size (sum of count x :attr:`Mechanism.loss_scale`) every
#: accountant answers in closed form: the saddle-point accountant overflows from about
#: 1e79 (sigma = 1e-40 in one Gaussian step), the PLD grids from about 1e159
LOSS_SCALE_MAX = 1e60
#: the largest mu whose exact GDP curve is evaluated (mu^2 / 2 is then a finite double)
_MU_MAX = 1e150
#: relative margin for rounding, applied to the curves' parameters (mu up for an upper bound,
#: down for a lower one; the RDP values up): at these sizes the curves turn within far less
#: than one ulp of eps (delta(eps) of mu-GDP drops from ~1 to ~0 within a few mu of
#: mu^2 / 2, while one ulp of mu^2 / 2 is mu^2 1e-16), so the rounding of mu or of eps alone
#: could put an upper bound below the true value
_ROUNDING = 1e-12

Terms = list[tuple[Mechanism, int]]


def out_of_reach(terms: Terms) -> str | None:
    """Why the composition ``terms`` is beyond the accountants' numerics (the start of a
    note), or None when it is not."""
    total = sum(k for _, k in terms)
    if total > COUNT_MAX:
        return (f"count: {total:.3g} compositions, beyond the {COUNT_MAX:.0e} an accountant "
                "composes numerically")
    scale = sum(float(k) * m.loss_scale for m, k in terms)
    if not scale <= LOSS_SCALE_MAX:
        size = "beyond the largest double" if math.isinf(scale) else f"about {scale:.3g}"
        return (f"noise_multiplier: the privacy loss of the composition is {size} (noise "
                f"this small is beyond the {LOSS_SCALE_MAX:.0e} an accountant resolves "
                "numerically)")
    return None


def _gdp_mu(terms: Terms) -> float | None:
    """mu of the composition when every term is exactly mu-GDP (``inf`` beyond the doubles),
    else None: ``sqrt(sum k_i mu_i^2)`` (Dong, Roth, Su 2022, Cor. 3.3) in log space."""
    logs = []
    for m, k in terms:
        fn = getattr(m, "gdp", None)
        if fn is None:
            return None
        try:
            mu, exact = fn()
        except ValueError:
            return None
        if not exact:
            return None
        # math.log takes Python ints of any size (no conversion to float)
        logs.append(math.log(k) + 2.0 * math.log(mu) if mu > 0 else -math.inf)
    top = max(logs)
    if not math.isfinite(top):
        return top if top > 0 else 0.0
    log_sq = top + math.log(sum(math.exp(x - top) for x in logs))
    return math.exp(log_sq / 2.0) if log_sq / 2.0 < 709.0 else math.inf


def _rdp_total(terms: Terms) -> np.ndarray | None:
    """The composed RDP curve at :data:`DEFAULT_ORDERS` raised by :data:`_ROUNDING` (``inf``
    where beyond the doubles), or None when a term has no Rényi-DP formula."""
    tot = np.zeros_like(DEFAULT_ORDERS)
    for m, k in terms:
        fn = getattr(m, "rdp", None)
        if fn is None:
            return None
        try:
            r = np.asarray(fn(DEFAULT_ORDERS), dtype=float)
        except ValueError:
            return None
        kf = float(k) if k < 10**300 else math.inf
        with np.errstate(over="ignore", invalid="ignore"):
            tot = tot + np.where(r > 0, kf * r, 0.0)
    return np.where(np.isnan(tot), np.inf, tot * (1 + _ROUNDING))


def _note(why: str, source: str, value) -> str:
    inf = "; epsilon = inf (no finite bound in floating point)" if np.any(
        np.isinf(value)) else ""
    return f"{why}; reported: {source}{inf}"


def far_epsilon(terms: Terms, delta: float, name: str, why: str) -> EpsilonResult:
    """eps at ``delta`` of ``terms`` from the closed forms of the module docstring
    (accountant ``name``, note starting with ``why``)."""
    details: dict[str, Any] = {"fallback": "closed_form"}
    mu = _gdp_mu(terms)
    if mu is not None:
        details["mu"] = mu
        up, lower = (gdp_epsilon(mu * (1 + _ROUNDING), delta),
                     gdp_epsilon(mu * (1 - _ROUNDING), delta)) if 0 < mu <= _MU_MAX else (
            (0.0, 0.0) if mu == 0 else (math.inf, None))
        return EpsilonResult(up, delta, lower, up, name, certified=True, estimate=up,
                             note=_note(why, "the exact mu-GDP curve of the Gaussian "
                                        "composition", up), details=details)
    rdp = _rdp_total(terms)
    if rdp is not None:
        eps, order = eps_from_rdp(DEFAULT_ORDERS, rdp, delta)
        details["order"] = order
        source = "the RDP upper bound (no lower bound)"
    else:
        eps, source = math.inf, "the trivial upper bound (no Rényi-DP formula for a term)"
    return EpsilonResult(eps, delta, None, eps, name, certified=True, estimate=eps,
                         note=_note(why, source, eps), details=details)


def far_delta(terms: Terms, epsilon, name: str, why: str) -> DeltaResult:
    """delta at ``epsilon`` (a number or an array) of ``terms`` from the closed forms of the
    module docstring (accountant ``name``, note starting with ``why``)."""
    e = np.asarray(epsilon, dtype=float)
    details: dict[str, Any] = {"fallback": "closed_form"}
    mu = _gdp_mu(terms)
    if mu is not None and 0 < mu <= _MU_MAX:
        up, lower = gdp_delta(mu * (1 + _ROUNDING), e), gdp_delta(mu * (1 - _ROUNDING), e)
        details["mu"] = mu
        return DeltaResult(up, epsilon, lower, up, name, certified=True, estimate=up,
                           note=f"{why}; reported: the exact mu-GDP curve of the Gaussian "
                           "composition", details=details)
    rdp = _rdp_total(terms)
    if rdp is not None:
        d, order = delta_from_rdp(DEFAULT_ORDERS, rdp, e)
        source = "the RDP upper bound (no lower bound)"
    else:
        d, source = np.ones_like(e), "the trivial upper bound delta <= 1"
    out = float(d) if e.ndim == 0 else np.asarray(d, dtype=float)
    return DeltaResult(out, epsilon, None, out, name, certified=True, estimate=out,
                       note=f"{why}; reported: {source}", details=details)
