"""The one-large-coordinate part of random allocation's lattice (losses/allocation_tail.py):
exact mean-preserving coarsening, and the part's mass and mean against the lognormal's
closed forms."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from scipy.stats import norm

from tightdp.losses.allocation import rounded_lognormal
from tightdp.losses.allocation_tail import coarsen, tail_part


def test_coarsen_keeps_mass_and_mean_exactly():
    """Dyadic masses (exact in binary): the rounded law has the same mass and mean, to the
    last bit, recomputed in rationals."""
    rng = np.random.default_rng(3)
    law = rng.integers(0, 1024, size=37) / 1024.0
    lo, shift = 13, 3
    out, f0 = coarsen(law, lo, shift)
    mass = sum(Fraction(x) for x in law)
    mean = sum(Fraction(x) * (lo + i) for i, x in enumerate(law))
    assert sum(Fraction(x) for x in out) == mass
    assert sum(Fraction(x) * (f0 + i) * 2 ** shift for i, x in enumerate(out)) == mean
    assert np.all(out >= 0)


def test_tail_part_mass_and_mean_match_closed_forms():
    """t = 3 coordinates, sigma = 0.8, cap c = R 2^e0 h: the part with one coordinate in
    (c, 16 c] has Q-mass 3 P(c < w <= 16c) P(w <= c)^2 and first moment
    3 [E(w; c < w <= 16c) P(w <= c)^2 + 2 P(c < w <= 16c) E(w; w <= c) P(w <= c)] (every
    rounding keeps the mean; lognormal partial moments, E w = 1)."""
    sigma, t, h, cells, e0, n_oct = 0.8, 3, 0.05, 64, 2, 4
    a = 1.0 / (2.0 * sigma * sigma)
    sd = math.sqrt(2.0 * a)
    pq = rounded_lognormal(-a, 2.0 * a, h, cells << e0)
    body = np.convolve(pq, pq)       # the other two coordinates, exact up to rounding
    ws = [[rounded_lognormal(-a, 2.0 * a, h * 2.0 ** (e0 + j), 2 * cells, cells)]
          for j in range(n_oct)]
    part = tail_part([(t, body, 1e-15, 1e-15)], 0, h, e0, cells, ws)
    c = cells * 2 ** e0 * h
    below = norm.cdf((math.log(c) + a) / sd)                        # P(w <= c)
    mid = norm.cdf((math.log(16 * c) + a) / sd) - below             # P(c < w <= 16 c)
    m_below = norm.cdf((math.log(c) - a) / sd)                      # E(w; w <= c)
    m_mid = norm.cdf((math.log(16 * c) - a) / sd) - m_below         # E(w; c < w <= 16c)
    mass = t * mid * below ** 2
    mean = t * (m_mid * below ** 2 + 2 * mid * m_below * below)
    assert abs(part.mass.sum() - mass) <= part.l1 + 1e-9 * mass
    assert abs((part.mass * part.s).sum() - mean) <= part.l1_s + 1e-9 * mean
    assert part.s.min() >= c and np.all(part.pointwise >= 0) and part.l1 > 0
