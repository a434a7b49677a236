"""Composition evaluated at a few frequencies: the privacy curve of a long composition of
discrete PLDs by Plancherel, without the composed law on its whole window.

The FFT engine (:mod:`tightdp.pld.compose`) builds the composed law on every point of a
window that holds it; the PRV accountant's mesh (Gopi, Lee, Wutschitz 2021, Theorem 5.5)
shrinks like ``eps_error / sqrt(k log(1/delta_error))`` while the window grows like
``sqrt(k)`` (and like ``k`` for the mean), so at small ``eps_error`` or ``delta`` it takes
tens of millions of points. But ``delta(eps)`` is one inner product of the composed law
with a known function, and the composed law of many steps is smooth at the scale of its
standard deviation: its transform is negligible beyond a few hundred frequencies of the
window. This module evaluates the curve from those frequencies alone, with a certified bound
on the rest (the method of the individual accountant, Koskela, Tobaben, Honkela 2023, App. D,
Lemma 1, applied to one composition).

Setting (grid indices ``m``, loss ``y = S + m d``). The laws ``w_i`` are tilted by
``e^{lam y}`` and normalized (:func:`tightdp.pld.compose.tilt`; untilted laws are used as
they are), so that the original finite part of the curve is

    delta_fin(eps) = e^{log_scale - lam eps} sum_m w(m) g_eps(S + m d),
    g_eps(y) = e^{-lam (y - eps)} (1 - e^{eps - y})_+,

with ``w`` the composed tilted law. On a circle of ``N`` points (the Chernoff window
``[i_lo, i_lo + N)`` of :func:`~tightdp.pld.windows.chernoff_window`; ``N`` is free, no
FFT is taken at that length) Parseval's identity for the DFT gives

    sum_n w_circ(n) g(n) = (1/N) sum_j W_j conj(G_j),
    W_j = e^{2 pi i j i_lo / N} prod_i phi_i(2 pi j / N)^{k_i},

``phi_i`` the discrete-time transform of law ``i``, ``G_j`` the DFT of ``g`` on the window,
a difference of two geometric sums in closed form. The frequencies ``|j| <= J`` are
evaluated exactly (Bluestein's chirp transform of each law, phases reduced exactly in
integers); the others are bounded:

* ``|G_j| <= TV(g) / (2 sin(pi |j| / N))`` (summation by parts; ``TV(g) <= 2 max g`` for
  the unimodal ``g``) and ``sin(pi x) >= 2 x`` on ``[0, 1/2]``, so the dropped terms are at
  most ``max g * sum_{j > J} |W_j| / j``;
* ``|phi_i(theta)|`` between the points ``2 pi l / M_i`` of an ``M_i``-point FFT of law
  ``i`` is at most the larger value at the two ends plus ``(pi / M_i) sum_m |m - c| w_i(m)``
  (the transform of the law centred at ``c`` has that Lipschitz constant), and the sum over
  ``j`` beyond ``J`` is taken over blocks ``(J 2^b, J 2^(b+1)]`` with the largest bound of
  the block, ``sum_{j in block} 1/j <= log 2 + 1/(J 2^b)``.

``J`` is the smallest of ``64, 128, ...`` for which that bound is below the window's own
tail allowance; when no ``J`` up to :data:`MAX_FREQUENCIES` (or below ``N / 2``) qualifies,
:func:`compose_spectral` returns ``None`` and the caller composes by FFT.

What the circle adds to the window sum (folded mass) and what lies outside the window are
bounded as for the FFT engine, by the Chernoff bounds at the window's ends: the upper bound
adds the mass above the window times the largest ``g`` there (and the mass below it, times
``max g``, when the window starts above ``eps``), the lower bound subtracts the folded mass
times ``max g``. Rounding: an allowance of ``(k_tot * 8 log2(L) + 64) u`` relative to the
sum of the magnitudes of the terms (the transform's error, raised to the ``k``-th power),
plus the single-step laws' rounding allowance of :func:`tightdp.pld.compose.round_rel`; as
in the rest of the engine this is an allowance, not a proof about floating point.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import fft as sfft

from .._numerics import UNIT_ROUNDOFF, bisect
from .compose import ComposedPLD, composed_inf_mass, round_rel
from .grid import DiscretePLD
from .mgf import LogMgf
from .windows import (
    CHERNOFF_TS,
    ChernoffWindow,
    chernoff_window,
    compose_on_window,
    fft_sizer,
    grid_terms,
)

__all__ = ["MAX_FREQUENCIES", "SpectralPLD", "compose_chernoff", "compose_spectral", "dtft_low"]

#: the most frequencies evaluated exactly (beyond it the caller composes by FFT)
MAX_FREQUENCIES = 1 << 16
#: the envelope FFT of each law has at least this many times its support points
_ENVELOPE_OVERSAMPLING = 4


def dtft_low(x: np.ndarray, n_circle: int, m: int, workers: int | None = None) -> np.ndarray:
    """``X_j = sum_r x_r e^{-2 pi i j r / n_circle}`` for ``j = 0 .. m-1``: the first ``m``
    points of the ``n_circle``-point DFT of ``x`` (zero padded), for any ``n_circle``, by
    Bluestein's chirp transform (``2 j r = j^2 + r^2 - (j - r)^2``: a convolution with the
    chirp ``e^{pi i t^2 / n}``, three FFTs of about ``len(x) + m`` points). The chirp's
    phases ``pi (t^2 mod 2 n) / n`` are reduced exactly in integers, so ``n_circle`` in the
    tens of millions costs no accuracy."""
    x = np.asarray(x, dtype=float)
    n = x.size
    t_max = max(n, m)
    t = np.arange(t_max, dtype=np.int64)
    two_n = 2 * int(n_circle)
    chirp = np.exp(-1j * math.pi * ((t * t) % two_n).astype(float) / n_circle)  # e^{-i pi t^2/N}
    size = sfft.next_fast_len(n + m - 1)
    a = np.zeros(size, dtype=complex)
    a[:n] = x * chirp[:n]
    h = np.zeros(size, dtype=complex)
    h[:m] = np.conj(chirp[:m])  # t = 0 .. m-1
    if n > 1:
        h[size - (n - 1):] = np.conj(chirp[1:n][::-1])  # t = -(n-1) .. -1
    conv = sfft.ifft(sfft.fft(a, workers=workers) * sfft.fft(h, workers=workers),
                     workers=workers)[:m]
    return chirp[:m] * conv


class _Law:
    """One (tilted) law's transform: exact values at the first frequencies of the circle and
    a bound on its modulus beyond (module docstring)."""

    def __init__(self, p: DiscretePLD, workers: int | None):
        self.p = p
        w = p.probs
        self.mass = float(w.sum())
        r = np.arange(w.size)
        c = float(np.dot(r, w)) / self.mass if self.mass > 0 else 0.0
        spread = float(np.dot(np.abs(r - c), w))  # Lipschitz constant of |phi| (index units)
        M = sfft.next_fast_len(_ENVELOPE_OVERSAMPLING * max(w.size, 8), real=True)
        amp = np.abs(sfft.rfft(w, M, workers=workers))
        cell = np.maximum(amp[:-1], amp[1:]) + math.pi / M * spread  # cell [l, l+1]
        cell = np.minimum(cell, self.mass)
        # env[l]: the largest |phi| on [2 pi l / M, pi]
        self.env = np.maximum.accumulate(cell[::-1])[::-1]
        self.M = M

    def envelope(self, theta: np.ndarray) -> np.ndarray:
        """Upper bound on ``|phi(t)|`` for all ``t`` in ``[theta, pi]`` (theta in [0, pi])."""
        idx = np.minimum((theta * self.M / (2.0 * math.pi)).astype(np.int64), self.env.size - 1)
        return self.env[idx]


class SpectralPLD:
    """The curve of a composition from its transform at the frequencies ``|j| <= J`` of a
    circle of ``N`` grid points (see the module docstring); the counterpart of
    :class:`~tightdp.pld.compose.ComposedPLD` for :func:`compose_spectral`."""

    def __init__(self, *, d: float, shift: float, i_lo: int, n: int, spectrum: np.ndarray,
                 log_trunc: float, lam: float, log_scale: float, inf_mass: float,
                 log_above: float, log_below: float, rounding: float, round_rel: float):
        self.d, self.shift, self.i_lo, self.n = d, shift, i_lo, n
        self.spectrum = spectrum  # W_j, j = 0..J
        self.log_trunc = log_trunc  # log of sum_{j > J} |W_j| / j (bound)
        self.lam, self.log_scale, self.inf_mass = lam, log_scale, inf_mass
        self.log_above, self.log_below = log_above, log_below  # tilted masses outside
        self.rounding = rounding  # relative allowance on the terms
        self.round_rel = round_rel
        self._upper_eps: dict = {}  # memo of epsilon_bound(delta, True), asked twice a query
        j = np.arange(spectrum.size)
        self._j = j
        theta = 2.0 * math.pi * j / n
        self._half2 = 2.0 * np.sin(theta / 2.0) ** 2  # 1 - cos(theta), without cancellation
        self._sin = np.sin(theta)
        self._abs = np.abs(spectrum)
        lam_ = lam
        # sup_{u > 0} e^{-lam u} (1 - e^{-u}): at u = log((lam + 1) / lam)
        self.g_max = (1.0 if lam_ <= 0 else
                      math.exp(lam_ * math.log(lam_ / (lam_ + 1.0))) / (lam_ + 1.0))

    @property
    def ys(self) -> np.ndarray:
        """First and last loss values of the window (the window's points are not held)."""
        return np.array([self.y(0), self.y(self.n - 1)])

    @property
    def size(self) -> int:
        return self.n

    def y(self, n: int) -> float:
        return self.shift + (self.i_lo + n) * self.d

    def _g_sup_from(self, u: float) -> float:
        """``sup_{v >= u} g`` with ``g(v) = e^{-lam v} (1 - e^{-v})`` (0 for v <= 0)."""
        if u <= 0:
            return self.g_max
        if self.lam <= 0:
            return 1.0
        u_star = math.log1p(1.0 / self.lam)
        return self.g_max if u <= u_star else math.exp(-self.lam * u) * -math.expm1(-u)

    def _geometric(self, a: float, u0: float, n0: int, count: int) -> np.ndarray:
        """``sum_{r=0}^{count-1} e^{-a (u0 + r d)} z_j^{n0 + r}`` for every kept ``j``
        (``z_j = e^{-2 pi i j / N}``, ``n0 + count = N``), in closed form."""
        d, n = self.d, self.n
        ead = -math.expm1(-a * d)  # 1 - e^{-a d}
        r_ = math.exp(-a * d)
        tail = math.exp(-a * count * d)
        zn0 = np.exp(-2j * math.pi * ((self._j * n0) % n).astype(float) / n)
        den = (ead + r_ * self._half2) + 1j * r_ * self._sin  # 1 - r z, no cancellation
        out = np.empty(self._j.size, dtype=complex)
        with np.errstate(divide="ignore", invalid="ignore"):
            out[1:] = (zn0[1:] - tail) / den[1:]
        # j = 0: sum_r e^{-a r d}
        out[0] = count if a == 0 else -math.expm1(-a * count * d) / ead
        return math.exp(-a * u0) * out

    def _parts(self, eps: float) -> tuple[float, float, float, float, float]:
        """``(C, T, R, above, fold)`` at one eps, in the tilted measure (before the factor
        ``e^{log_scale - lam eps}``): the exact frequencies' value, the truncation bound, the
        rounding allowance, what the upper bound adds for the mass outside, and what the
        lower bound subtracts for the folded mass."""
        d, n = self.d, self.n
        n_eps = int(math.floor((eps - self.shift) / d)) - self.i_lo + 1  # first y_n > eps
        n_eps = max(n_eps, 0)
        while n_eps > 0 and self.y(n_eps - 1) > eps:  # rounding of the floor
            n_eps -= 1
        while n_eps < n and self.y(n_eps) <= eps:
            n_eps += 1
        above = math.exp(self.log_above) * self._g_sup_from(self.y(n - 1) + d - eps)
        if self.y(0) > eps:  # the window starts above eps: mass below it may count
            above += math.exp(self.log_below) * self.g_max
        fold = (math.exp(self.log_above) + math.exp(self.log_below)) * self.g_max
        trunc = self.g_max * math.exp(self.log_trunc)
        if n_eps >= n:
            return 0.0, trunc, 0.0, above, fold
        u0 = self.y(n_eps) - eps
        count = n - n_eps
        g = (self._geometric(self.lam, u0, n_eps, count)
             - self._geometric(self.lam + 1.0, u0, n_eps, count))
        terms = self.spectrum * np.conj(g)
        c = (terms[0].real + 2.0 * float(np.sum(terms[1:].real))) / n
        size = (abs(terms[0]) + 2.0 * float(np.sum(self._abs[1:] * np.abs(g[1:])))) / n
        return c, trunc, self.rounding * size, above, fold

    def _log_factor(self, eps: float) -> float:
        return self.log_scale - self.lam * eps

    def delta_bound(self, eps, *, upper: bool) -> np.ndarray:
        """Certified upper or lower bound on ``delta(eps)`` of the composition (original
        measure), at every eps of an array."""
        e = np.atleast_1d(np.asarray(eps, dtype=float))
        out = np.empty(e.size)
        for i, x in enumerate(e):
            out[i] = self._bound(float(x), upper=upper)
        return out.reshape(np.shape(eps))

    def estimate(self, eps) -> np.ndarray:
        """``delta(eps)`` from the exact frequencies alone (no allowances): an estimate."""
        e = np.atleast_1d(np.asarray(eps, dtype=float))
        out = np.empty(e.size)
        for i, x in enumerate(e):
            c = self._parts(float(x))[0]
            out[i] = min(self._scaled(max(c, 0.0), float(x)) + self.inf_mass, 1.0)
        return out.reshape(np.shape(eps))

    def _scaled(self, v: float, eps: float) -> float:
        if v <= 0:
            return 0.0
        return math.exp(min(self._log_factor(eps) + math.log(v), 700.0))

    def _bound(self, eps: float, *, upper: bool) -> float:
        c, trunc, rnd, above, fold = self._parts(eps)
        v_rel = self.round_rel * math.exp(self.lam * self.d)  # single-step rounding (below)
        if upper:
            val = self._scaled(max(c, 0.0) + trunc + rnd + above + v_rel, eps)
            return min(val * (1 + 1e-10) + self.inf_mass, 1.0)
        # not capped at 1: a lower bound above the upper one is reported, not hidden
        val = self._scaled(c - trunc - rnd - fold - v_rel, eps)
        return max(val * (1 - 1e-10), 0.0) + self.inf_mass

    def epsilon_bound(self, delta: float, *, upper: bool, below: float | None = None) -> float:
        """An eps certified on the asked side of ``eps(delta)`` of the composition: with
        ``upper``, an eps (>= 0) at which the upper bound on the curve is ``<= delta`` (the
        true curve being non-increasing, it stays below from there on; ``inf`` if there is
        none in the window); otherwise an eps at which the lower bound is ``> delta`` (0 if
        none), the one nearest below ``below`` (the window's top by default). Bisection on
        the bound itself, the kept end being the one with the defining property."""
        if delta >= 1.0:
            return 0.0
        top = self.y(self.n - 1) + self.d
        if upper:
            if delta not in self._upper_eps:
                if self._bound(0.0, upper=True) <= delta:
                    e = 0.0
                elif not self._bound(top, upper=True) <= delta:
                    e = math.inf
                else:
                    e = bisect(lambda m: not self._bound(m, upper=True) <= delta, 0.0, top,
                               keep="hi", xtol=1e-13, floor=1.0, iters=100)
                self._upper_eps[delta] = e
            return self._upper_eps[delta]
        return self._last_above(lambda m: self._bound(m, upper=False) > delta,
                                top if below is None else min(below, top))

    def _last_above(self, above, hi: float) -> float:
        """The largest eps in ``[0, hi]`` (to 1e-13) at which ``above`` holds, searched
        downwards from ``hi`` in doubling steps, then by bisection (0 if none is found). The
        curves need not be monotone far below the tilt's centre (the allowances, scaled by
        ``e^{-lam eps}``, swamp them there); the crossing wanted is the one nearest below
        ``hi``."""
        if above(hi):
            return hi
        step = self.d
        lo = hi - step
        while lo > 0 and not above(lo):
            hi, step = lo, 2.0 * step
            lo = hi - step
        if lo <= 0:
            if not above(0.0):
                return 0.0
            lo = 0.0
        return bisect(above, lo, hi, keep="lo", xtol=1e-13, floor=1.0, iters=100)

    def epsilon_estimate(self, delta: float) -> float:
        """eps at which :meth:`estimate` crosses ``delta``, the crossing nearest below the
        certified upper bound's (an estimate)."""
        hi = self.epsilon_bound(delta, upper=True)
        if not math.isfinite(hi) or hi <= 0:
            return hi
        return self._last_above(lambda m: float(self.estimate(m)) > delta, hi)


def compose_spectral(terms: list[tuple[DiscretePLD, int]], *, log_tail: float,
                     lam: float = 0.0, max_frequencies: int = MAX_FREQUENCIES,
                     workers: int | None = None) -> SpectralPLD | None:
    """The composition of ``terms`` ((pld, count) on one grid) for curve queries at a few
    frequencies (module docstring), on a Chernoff window with ``e^log_tail`` beyond each
    end (:func:`_window`), the laws tilted by ``lam``; ``None`` when the transform beyond
    ``max_frequencies`` frequencies (or half the window) cannot be bounded below
    ``e^log_tail``, or there is nothing to compose."""
    terms, work, log_scale = grid_terms(terms, lam)
    win = _window(terms, work, log_tail) if terms else None
    if win is None:
        return None
    return _on_window(terms, work, log_scale, lam, win, log_tail, max_frequencies, workers)


def compose_chernoff(terms: list[tuple[DiscretePLD, int]], *, log_tail: float,
                     lam: float = 0.0, ts: np.ndarray = CHERNOFF_TS,
                     spectral_above: int, max_points: int, refusal: str,
                     workers: int | None = None) -> ComposedPLD | SpectralPLD:
    """The PRV accountant's composition (Gopi, Lee, Wutschitz 2021, Alg. 1) on the Chernoff
    window of :func:`~tightdp.pld.windows.compose_grid_chernoff`: by FFT when the window has
    at most ``spectral_above`` points, else at a few of its frequencies
    (:func:`compose_spectral`), or by FFT after all (within ``max_points``, else
    :class:`~tightdp.budget.BudgetExceeded` with ``refusal``) when the transform's tail cannot
    be bounded. The spectral window is :func:`_window`'s; the FFT window exactly
    :func:`~tightdp.pld.windows.compose_grid_chernoff`'s (parameters ``ts``)."""
    terms, work, log_scale = grid_terms(terms, lam)
    if not terms:
        raise ValueError("nothing to compose")
    win = _window(terms, work, log_tail)
    if win is not None and win.i_hi - win.i_lo + 1 > spectral_above:
        s = _on_window(terms, work, log_scale, lam, win, log_tail, MAX_FREQUENCIES, workers)
        if s is not None:
            return s
    win = chernoff_window(terms, work, log_tail=log_tail, ts=ts,
                          size=fft_sizer(max_points, refusal))
    return compose_on_window(terms, work, log_scale, lam, win, workers)


def _window(terms, work, log_tail: float) -> ChernoffWindow | None:
    """The few-frequency evaluation's window: :func:`~tightdp.pld.windows.chernoff_window`
    at the best Chernoff parameter of each tail (Newton on a coarsened copy of the laws,
    :meth:`~tightdp.pld.mgf.LogMgf.quantile`; any parameter gives a valid bound, and it
    is evaluated exactly): a few exact evaluations of laws of up to millions of atoms instead
    of one per parameter of a grid. None when neither tail needs a parameter."""
    mgf = LogMgf(work)
    best = np.array([abs(mgf.quantile(log_tail, sign)[1]) for sign in (+1, -1)])
    best = np.unique(best[best > 0])
    return chernoff_window(terms, work, log_tail=log_tail, ts=best) if best.size else None


def _on_window(terms, work, log_scale: float, lam: float, win: ChernoffWindow,
               log_tail: float, max_frequencies: int, workers: int | None
               ) -> SpectralPLD | None:
    n = win.i_hi - win.i_lo + 1
    d = terms[0][0].d
    laws = [(_Law(p, workers), k) for p, k in work]
    # the smallest J (64, 128, ...) whose certified tail is below the window's allowance
    J = 64
    log_trunc = math.inf
    while J <= min(max_frequencies, n // 2 - 1):
        log_trunc = _log_tail_sum(laws, J, n)
        if log_trunc <= log_tail:
            break
        J *= 2
    if log_trunc > log_tail:
        return None
    # exact transform at j = 0..J: prod_i phi_i^k_i, phases in integers
    log_w = np.zeros(J + 1, dtype=complex)
    total_offset = 0
    kk_tot = 0
    size = 0
    for (law, k) in laws:
        x = dtft_low(law.p.probs, n, J + 1, workers)
        size = max(size, law.p.probs.size + J)
        with np.errstate(divide="ignore"):
            log_w += k * np.log(x)
        total_offset += k * law.p.offset
        kk_tot += k
    jj = np.arange(J + 1, dtype=np.int64)
    shift_idx = (total_offset - win.i_lo) % n
    phase = 2.0 * math.pi * ((jj * shift_idx) % n).astype(float) / n
    with np.errstate(invalid="ignore"):
        spectrum = np.exp(log_w - 1j * phase)
    spectrum[log_w.real == -np.inf] = 0.0
    rounding = (kk_tot * 8.0 * math.log2(max(size, 2)) + 64.0) * UNIT_ROUNDOFF
    S = sum(k * p.shift for p, k in terms)
    return SpectralPLD(d=d, shift=S, i_lo=win.i_lo, n=n, spectrum=spectrum,
                       log_trunc=log_trunc, lam=lam, log_scale=log_scale,
                       inf_mass=composed_inf_mass(terms), log_above=win.t_above,
                       log_below=win.t_below, rounding=rounding, round_rel=round_rel(terms))


def _log_tail_sum(laws, J: int, n: int) -> float:
    """log of a bound on ``sum_{J < j <= n/2} |W_j| / j`` from the laws' envelopes, over the
    blocks ``(J 2^b, J 2^(b+1)]`` (module docstring)."""
    starts = []
    s = J + 1
    while s <= n // 2:
        starts.append(s)
        s = 2 * s - 1
    if not starts:
        return -math.inf
    st = np.array(starts, dtype=float)
    ends = np.minimum(np.append(st[1:] - 1, n // 2), n // 2)
    theta = 2.0 * math.pi * st / n
    log_env = np.zeros(st.size)
    for law, k in laws:
        with np.errstate(divide="ignore"):
            log_env += k * np.log(law.envelope(theta))
    harmonic = np.log(ends / st) + 1.0 / st  # >= sum_{j = start}^{end} 1/j
    with np.errstate(divide="ignore"):
        vals = log_env + np.log(harmonic)
    vals = vals[np.isfinite(vals)]
    if vals.size == 0:
        return -math.inf
    m = float(vals.max())
    return m + math.log(float(np.exp(vals - m).sum()))
