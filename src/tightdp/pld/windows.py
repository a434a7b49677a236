"""Compositions on a window planned ahead: the Fourier accountant's fixed window, and the
window placed by Chernoff bounds on a fixed grid of parameters (the PRV accountant's, also
used by the few-frequency evaluation of :mod:`tightdp.pld.spectral`).

Both run the engine's transform (:func:`tightdp.pld.transform.circular_product`); the
Chernoff windows return a :class:`~tightdp.pld.compose.ComposedPLD` with the bounds on what
lies outside, as :func:`tightdp.pld.compose.compose` does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

import numpy as np
from scipy import fft as sfft

from ..budget import BudgetExceeded
from .compose import MAX_POINTS, ComposedPLD, composed_inf_mass, round_rel, tilt
from .grid import DiscretePLD
from .transform import circular_product

__all__ = ["CHERNOFF_TS", "ChernoffWindow", "chernoff_window", "compose_fixed_window",
           "compose_grid_chernoff", "compose_on_window", "fft_sizer", "grid_terms"]


def compose_fixed_window(terms: list[tuple[DiscretePLD, int]], lo_index: int, n: int, *,
                         workers: int | None = None, noise_bound: bool = True,
                         extended: bool = False) -> DiscretePLD:
    """Circular composition on the fixed window of grid indices ``[lo_index, lo_index + n)``.

    This is the composition of the Fourier accountant as published (Koskela, Jälkö, Honkela
    2020, Sec. 5.2, Alg. 1, and Sec. 5.5 for varying mechanisms): every law is folded modulo
    ``n``, transformed once, raised to its count in the Fourier domain, and the product is
    transformed back; composed mass outside the window wraps around (the periodisation of
    eq. (5.1)). With ``lo_index = -n/2`` the fold places the loss value 0 at position 0, which
    is the paper's half-swap ``D``, and the final rotation is its second ``D``:
    ``C^k dx = D F^{-1}(F(D omega dx)^k)``.

    Unlike :func:`compose` there is no window placement and no bound on what wrapped around:
    the result is the approximation of the paper, to be used with its error estimates.

    Parameters
    ----------
    terms : (pld, count) pairs on one grid (same ``d`` and ``shift``).
    lo_index : grid index of the first point of the window.
    n : window length (number of FFT points).
    noise_bound : also bound the floating-point error of the result (``meta["log_noise"]``);
        False skips it (about a quarter of the time) for a caller that reports no bound: the
        Fourier accountant. The law is the same to the bit either way.
    extended : forward transforms and powering in long double (see :func:`compose`): the
        algorithm's value without the float64 rounding that the k-th power amplifies.

    Returns
    -------
    DiscretePLD on the window (``offset = lo_index``), mass at ``+inf`` composed exactly.
    """
    terms = [(p, int(k)) for p, k in terms if int(k) > 0]
    if n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    if not terms:
        probs = np.zeros(n)
        probs[(-lo_index) % n] = 1.0
        return DiscretePLD(1.0, lo_index, probs, 0.0)
    d, shift0 = terms[0][0].d, terms[0][0].shift
    if any(abs(p.d - d) > 1e-15 * d or p.shift != shift0 for p, _ in terms):
        raise ValueError("all PLDs in a composition must share one grid (step and shift)")
    inf_mass = composed_inf_mass(terms)
    total_shift = sum(k * p.shift for p, k in terms)
    res, log_noise = circular_product(terms, n, lo_index, workers, noise_bound or extended,
                                       extended=extended)
    meta = {"kind": "fixed_window", "log_noise": log_noise} if noise_bound else \
        {"kind": "fixed_window"}
    return DiscretePLD(d, lo_index, res, inf_mass, meta, total_shift)


#: the Chernoff parameters ``t`` at which :func:`compose_grid_chernoff` places its window
CHERNOFF_TS = np.geomspace(1e-2, 1e3, 30)


def compose_grid_chernoff(terms: list[tuple[DiscretePLD, int]], *, log_tail: float,
                          lam: float = 0.0, max_points: int = MAX_POINTS,
                          workers: int | None = None, ts: np.ndarray = CHERNOFF_TS,
                          refusal: str = "the composition needs an FFT of {n} points "
                                         "(> {max_points}); ask for a looser tolerance"
                          ) -> ComposedPLD:
    """:func:`compose` with the window placed by Chernoff bounds on a fixed grid of
    parameters ``ts`` (the PRV accountant's composition; Gopi, Lee, Wutschitz 2021, Alg. 1).

    The window ``[a_lo, a_hi]`` is the smallest for which the Chernoff bound
    ``P(S >= a) <= exp(sum_i k_i log M_i(t) - t a)`` (and its mirror for the lower tail) is
    at most ``e^log_tail`` at some ``t`` of ``ts``, solved in closed form for each ``t``:
    the moment generating functions are evaluated once (``len(ts)`` values per law) instead
    of by a Newton search per side as in :func:`compose`. The window is widened to a fast
    FFT length (the extra points spread over both sides, never below the support of the
    sum) and the Chernoff bounds at its actual ends are stored in the returned
    :class:`ComposedPLD`, whose queries add the mass above the window (upper bound,
    original measure) and subtract the most the mass folded into it can contribute (lower
    bound, tilted measure), as for :func:`compose`.

    Parameters
    ----------
    terms : list of (pld, count) on one grid (same step and shift); the laws are used as
        they are (not trimmed, and not normalized when ``lam = 0``).
    log_tail : log of the mass allowed outside the window on each side (tilted measure).
    lam : exponential tilt (0 = none; see :func:`tilt`).
    max_points : refuse (:class:`~tightdp.budget.BudgetExceeded`) rather than run a larger
        FFT; ``refusal`` is its message, formatted with ``n`` and ``max_points``.
    ts : the Chernoff parameters (positive), increasing.
    """
    terms, work, log_scale = grid_terms(terms, lam)
    if not terms:
        return ComposedPLD(1.0, 0, np.ones(1), 0.0, 0.0, 0.0, -math.inf, -math.inf, -math.inf)
    win = chernoff_window(terms, work, log_tail=log_tail, ts=ts,
                          size=fft_sizer(max_points, refusal))
    return compose_on_window(terms, work, log_scale, lam, win, workers)


def grid_terms(terms, lam: float = 0.0) -> tuple[list, list, float]:
    """``(terms, work, log_scale)``: the (pld, count) pairs with a positive count, checked to
    share one grid (step and shift), and the laws to compose, ``terms`` tilted by ``lam``
    with the log normalizer of :func:`tilt` (``terms`` themselves, and 0, when
    ``lam = 0``); empty lists when nothing is composed. The common start of
    :func:`compose_grid_chernoff` and of the few-frequency evaluation
    (:mod:`tightdp.pld.spectral`)."""
    terms = [(p, int(k)) for p, k in terms if int(k) > 0]
    if not terms:
        return [], [], 0.0
    d, shift0 = terms[0][0].d, terms[0][0].shift
    if any(abs(p.d - d) > 1e-15 * d or p.shift != shift0 for p, _ in terms):
        raise ValueError("all PLDs in a composition must share one grid (step and shift)")
    work, log_scale = tilt(terms, lam) if lam != 0.0 else (terms, 0.0)
    return terms, work, log_scale


def fft_sizer(max_points: int, refusal: str):
    """``size(n)`` for :func:`chernoff_window`: the fast FFT length for ``n`` points, or
    :class:`~tightdp.budget.BudgetExceeded` (``refusal`` formatted with ``n`` and
    ``max_points``) when ``n > max_points``."""
    def size(n: int) -> int:
        if n > max_points:
            raise BudgetExceeded(refusal.format(n=n, max_points=max_points))
        return sfft.next_fast_len(n, real=True)
    return size


def compose_on_window(terms, work, log_scale: float, lam: float, win: ChernoffWindow,
                      workers: int | None = None) -> ComposedPLD:
    """The circular composition of the laws ``work`` (``terms`` tilted by ``lam`` with
    ``log_scale``, or ``terms`` themselves) on the window ``win`` (an FFT length), with the
    bounds at its ends: the end of :func:`compose_grid_chernoff`."""
    d = terms[0][0].d
    n_fft = win.i_hi - win.i_lo + 1
    res, log_noise = circular_product(work, n_fft, win.i_lo, workers)
    S = sum(k * p.shift for p, k in terms)  # total grid shift of the composed law
    log_fold = float(np.logaddexp(win.t_above, win.t_below))
    return ComposedPLD(d, win.i_lo, res, composed_inf_mass(terms), lam, log_scale,
                       win.log_above, win.log_below, log_fold, S, log_noise, round_rel(terms))


@dataclass(frozen=True)
class ChernoffWindow:
    """A window ``[i_lo, i_hi]`` of grid indices of a composed law and the logs of Chernoff
    bounds on the mass beyond its ends: ``t_above``/``t_below`` in the measure of the laws
    composed (tilted, or as given), ``log_above``/``log_below`` in the original measure."""

    i_lo: int
    i_hi: int
    t_above: float
    t_below: float
    log_above: float
    log_below: float


def chernoff_window(terms: list[tuple[DiscretePLD, int]],
                    work: list[tuple[DiscretePLD, int]], *, log_tail: float,
                    ts: np.ndarray = CHERNOFF_TS, size=None) -> ChernoffWindow:
    """The window of :func:`compose_grid_chernoff`: the smallest ``[a_lo, a_hi]`` for which
    the Chernoff bound ``P(S >= a) <= exp(sum_i k_i log M_i(t) - t a)`` on the composition
    of the laws ``work`` (and its mirror for the lower tail) is at most ``e^log_tail`` at
    some ``t`` of ``ts``, solved in closed form for each ``t``, as grid indices (one point
    of margin each side, never beyond the support of the sum); ``size(n)`` (optional) maps
    its number of points to the one used (a fast FFT length; it may refuse), the extra
    points spread over both sides. The bounds at the final ends are evaluated for ``work``
    and, when it differs (a tilt), for the original laws ``terms``."""
    lm_pos = cast(np.ndarray, sum(k * p.log_mgf(ts) for p, k in work))
    lm_neg = cast(np.ndarray, sum(k * p.log_mgf(-ts) for p, k in work))
    d = terms[0][0].d
    S = sum(k * p.shift for p, k in terms)  # total grid shift of the composed law
    a_hi = float(np.min((lm_pos - log_tail) / ts))
    a_lo = float(np.max((log_tail - lm_neg) / ts))
    lo_min = sum(k * p.offset for p, k in terms)
    hi_max = sum(k * (p.offset + p.probs.size - 1) for p, k in terms)
    i_lo = max(int(math.floor((a_lo - S) / d)) - 1, lo_min)
    i_hi = min(int(math.ceil((a_hi - S) / d)) + 1, hi_max)
    n = i_hi - i_lo + 1
    if size is not None:
        m = size(n)
        # spread the extra points over both sides, never beyond the support of the sum
        i_lo = max(i_lo - (m - n) // 2, lo_min)
        n = m
    top, bot = S + (i_lo + n) * d, S + (i_lo - 1) * d
    inside_hi, inside_lo = i_lo + n - 1 < hi_max, i_lo > lo_min

    def edges(lp: np.ndarray, ln: np.ndarray) -> tuple[float, float]:
        above = min(float(np.min(lp - ts * top)), 0.0) if inside_hi else -math.inf
        below = min(float(np.min(ln + ts * bot)), 0.0) if inside_lo else -math.inf
        return above, below

    t_above, t_below = edges(lm_pos, lm_neg)
    if work is terms:
        log_above, log_below = t_above, t_below
    else:
        log_above, log_below = edges(cast(np.ndarray, sum(k * p.log_mgf(ts) for p, k in terms)),
                                     cast(np.ndarray, sum(k * p.log_mgf(-ts) for p, k in terms)))
    return ChernoffWindow(i_lo, i_lo + n - 1, t_above, t_below, log_above, log_below)

