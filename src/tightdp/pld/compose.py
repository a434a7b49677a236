"""FFT composition of discrete PLDs: the one composition engine of the library.

``compose([(pld_1, k_1), ..., (pld_b, k_b)])`` returns the P-law of ``sum_i sum_{r<=k_i} Y_ir``
for independent losses, on the common grid. Each distinct PLD is transformed once and raised
to its count in the Fourier domain (Koskela et al. 2020, Alg. 1; Gopi et al. 2021, Alg. 1),
so ``b`` distinct mechanisms with any counts cost ``O(b N log N)``.

Circular convolution on ``N`` points folds the composed law modulo ``N``. The window of ``N``
points is placed by a Chernoff bound computed exactly from the discrete laws
(``P(S >= a) <= exp(sum_i k_i log M_i(t) - t a)`` for ``t >= 0`` and its mirror for the lower
tail), so that the mass outside it, which is what gets folded, is at most ``tail`` in each
direction. The returned :class:`ComposedPLD` carries those bounds, and the queries use them in
the direction of the bound: an upper bound adds the mass that may lie above the window, a
lower bound subtracts the most that folded-in mass could contribute.

Optionally the laws are exponentially tilted by ``e^{lam y}`` before the transform (the
Esscher transform; Alghamdi et al., Sec. 4, use the same tilt for the saddle point): this
centres the composed law near the eps of interest so that ``delta`` far in the tail (1e-15
and below) is computed from values of order one instead of from FFT rounding noise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import fft as sfft
from scipy.special import logsumexp

from .grid import DiscretePLD, _qmass, _suffix

__all__ = ["ComposedPLD", "compose", "log_chernoff"]

MAX_POINTS = 1 << 25


def _log_mgf_terms(terms, t: np.ndarray) -> np.ndarray:
    """sum_i k_i log E[e^{t Y_i}; finite] for a vector of t."""
    out = np.zeros_like(t, dtype=float)
    for pld, k in terms:
        out += k * pld.log_mgf(t)
    return out


def log_chernoff(terms, a: float, upper: bool) -> float:
    """log of a Chernoff bound on ``P(S >= a)`` (upper) or ``P(S <= a)`` (lower) for the
    composed finite law. Minimized over a geometric grid of t; any t gives a valid bound."""
    ts = np.concatenate([np.geomspace(1e-4, 1e3, 64)])
    if not upper:
        ts = -ts
    vals = _log_mgf_terms(terms, ts) - ts * a
    return float(min(np.min(vals), 0.0))


@dataclass
class ComposedPLD:
    """Composed P-law on a window of the grid, with the bounds on what lies outside.

    ``probs`` are the values in the (possibly tilted) measure; ``log_scale - lam * y`` converts
    them back: the original mass at ``y`` is ``probs * exp(log_scale - lam * y)``.
    """

    d: float
    offset: int
    probs: np.ndarray
    inf_mass: float
    lam: float
    log_scale: float
    log_tail_above: float  # log bound on original P-mass above the window
    log_tail_below: float  # log bound on original P-mass below the window
    log_fold: float  # log bound on tilted mass folded into the window

    @property
    def ys(self) -> np.ndarray:
        return (self.offset + np.arange(self.probs.size)) * self.d

    def _original(self, upper: bool) -> tuple[np.ndarray, np.ndarray]:
        ys = self.ys
        p = np.maximum(self.probs, 0.0) if upper else self.probs
        if self.lam == 0.0 and self.log_scale == 0.0:
            return ys, p
        with np.errstate(over="ignore", under="ignore", divide="ignore"):
            fac = np.exp(self.log_scale - self.lam * ys)
            return ys, p * fac

    def delta_bound(self, eps, upper: bool) -> np.ndarray:
        """Certified upper or lower bound on ``delta(eps)`` of the composed pair."""
        eps = np.asarray(eps, dtype=float)
        ys, p = self._original(upper)
        s0 = _suffix(p)
        s1 = _suffix(_qmass(ys, np.abs(p)) * np.sign(p))
        idx = np.searchsorted(ys, eps, side="right")
        with np.errstate(over="ignore", invalid="ignore"):
            val = s0[idx] - np.exp(np.minimum(eps, 700.0)) * s1[idx]
        val = np.where(idx >= ys.size, 0.0, val)
        if upper:
            val = np.maximum(val, 0.0) + self.inf_mass + math.exp(self.log_tail_above)
            below = eps < ys[0]
            val = val + np.where(below, math.exp(self.log_tail_below), 0.0)
            return np.minimum(val, 1.0)
        # folded-in tilted mass contributes at most fold * max_{y > eps} e^{log_scale - lam y}
        if self.lam >= 0:
            worst = self.log_scale - self.lam * eps
        else:
            worst = np.full_like(eps, self.log_scale - self.lam * ys[-1])
        with np.errstate(over="ignore"):
            fold = np.exp(np.minimum(self.log_fold + worst, 700.0))
        return np.clip(val + self.inf_mass - fold, 0.0, 1.0)

    def epsilon_bound(self, delta: float, upper: bool) -> float:
        """Smallest eps >= 0 at which the bound on delta(eps) is <= delta (monotone search
        over the grid, then the closed form on the bracketing interval)."""
        ys = self.ys
        d_grid = self.delta_bound(ys, upper)
        ok = np.nonzero(d_grid <= delta)[0]
        if ok.size == 0:
            return math.inf
        i = int(ok[0])
        if i == 0:
            lo, hi = ys[0] - 1.0, float(ys[0])
            if float(self.delta_bound(np.asarray(lo), upper)) <= delta:
                return max(0.0, lo) if lo > 0 else 0.0
        else:
            lo, hi = float(ys[i - 1]), float(ys[i])
        # delta_bound is continuous and decreasing on (lo, hi]; bisection to 1e-13 relative
        for _ in range(100):
            m = 0.5 * (lo + hi)
            if float(self.delta_bound(np.asarray(m), upper)) <= delta:
                hi = m
            else:
                lo = m
            if hi - lo <= 1e-13 * max(1.0, abs(hi)):
                break
        return max(hi, 0.0)


def compose(terms: list[tuple[DiscretePLD, int]], *, log_tail: float = -80.0,
            lam: float = 0.0, max_points: int = MAX_POINTS, workers: int | None = None
            ) -> ComposedPLD:
    """Compose ``count`` copies of each PLD; see the module docstring.

    Parameters
    ----------
    terms : list of (pld, count); all PLDs share one grid step.
    log_tail : log of the mass allowed outside the window on each side (tilted measure).
    lam : exponential tilt (0 = none).
    max_points : refuse (ValueError) rather than allocate a larger FFT.
    """
    terms = [(p.trimmed(), int(k)) for p, k in terms if int(k) > 0]
    if not terms:
        return ComposedPLD(1.0, 0, np.ones(1), 0.0, 0.0, 0.0, -math.inf, -math.inf, -math.inf)
    d = terms[0][0].d
    if any(abs(p.d - d) > 1e-15 * d for p, _ in terms):
        raise ValueError("all PLDs in a composition must share one grid step")
    # infinite mass: P(at least one +inf)
    log_fin = sum(k * math.log1p(-p.inf_mass) if p.inf_mass < 1 else -math.inf for p, k in terms)
    inf_mass = -math.expm1(log_fin) if log_fin > -math.inf else 1.0
    # tilt each law and normalize; record the log normalizer
    tilted = []
    log_scale = 0.0
    for p, k in terms:
        ys = p.ys
        pos = p.probs > 0
        lw = np.full(p.probs.size, -np.inf)
        lw[pos] = np.log(p.probs[pos]) + lam * ys[pos]
        c = logsumexp(lw[pos]) if pos.any() else 0.0
        tilted.append((DiscretePLD(d, p.offset, np.exp(lw - c), 0.0), k))
        log_scale += k * c
    # window from Chernoff bounds on the tilted composed law
    mean = sum(k * float(np.dot(t.probs, t.ys)) for t, k in tilted)
    var = sum(k * float(np.dot(t.probs, (t.ys - np.dot(t.probs, t.ys)) ** 2)) for t, k in tilted)
    sd = math.sqrt(max(var, 0.0)) + d
    lo_min = sum(k * t.offset for t, k in tilted) * d
    hi_max = sum(k * (t.offset + t.probs.size - 1) for t, k in tilted) * d

    def find(upper: bool) -> float:
        z = 4.0
        while True:
            a = mean + z * sd if upper else mean - z * sd
            if upper and a >= hi_max:
                return hi_max
            if not upper and a <= lo_min:
                return lo_min
            if log_chernoff(tilted, a, upper) <= log_tail:
                return a
            z *= 1.25

    a_hi, a_lo = find(True), find(False)
    i_lo = int(math.floor(a_lo / d))
    i_hi = int(math.ceil(a_hi / d))
    n = i_hi - i_lo + 1
    if n > max_points:
        raise ValueError(f"the composition needs an FFT of {n} points (> {max_points}); "
                         "ask for a looser tolerance")
    N = sfft.next_fast_len(n, real=True)
    # fold each tilted law mod N and multiply the transforms raised to their counts
    acc = None
    shift = 0
    for t, k in tilted:
        buf = np.zeros(N)
        m = t.probs.size
        idx = np.arange(m) % N
        np.add.at(buf, idx, t.probs) if m > N else buf.__setitem__(slice(0, m), t.probs)
        f = sfft.rfft(buf, workers=workers)
        f = f ** k if k > 1 else f
        acc = f if acc is None else acc * f
        shift += k * t.offset
    res = sfft.irfft(acc, n=N, workers=workers)
    # result position m holds composed index shift + m (mod N); rotate so that index i_lo
    # comes first
    res = np.roll(res, -((i_lo - shift) % N))[:n]
    # bounds on what lies outside the window, in the original measure (untilted Chernoff)
    orig = [(p, k) for p, k in terms]
    log_above = log_chernoff(orig, (i_hi + 1) * d, True) if (i_hi * d) < hi_max else -math.inf
    log_below = log_chernoff(orig, (i_lo - 1) * d, False) if (i_lo * d) > lo_min else -math.inf
    lt_hi = log_chernoff(tilted, (i_hi + 1) * d, True) if (i_hi * d) < hi_max else -math.inf
    lt_lo = log_chernoff(tilted, (i_lo - 1) * d, False) if (i_lo * d) > lo_min else -math.inf
    log_fold = float(np.logaddexp(lt_hi, lt_lo))
    return ComposedPLD(d, i_lo, res, inf_mass, lam, log_scale, log_above, log_below, log_fold)
