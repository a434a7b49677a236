"""Bounds on the mass of a sum of lattice variables outside a window
(losses/allocation_bounds.py) against the exact law by direct convolution."""

from __future__ import annotations

import numpy as np
import pytest

from tightdp.losses.allocation import rounded_lognormal
from tightdp.losses.allocation_bounds import THETAS, mass_above, mass_below, mgf_table


@pytest.mark.parametrize("sigma,t,lo,end", [(1.0, 6, 40, 700), (0.7, 4, 5, 900),
                                            (1.0, 6, 0, 300)])
def test_window_bounds_cover_the_exact_masses(sigma, t, lo, end):
    """Capped lognormal coordinates (h = 0.05, 400 atoms), t - 1 plain and one shifted: the
    bounds are at least the exact masses below ``lo`` and at or above ``end`` (and, Chernoff
    being loose, not far above them)."""
    a = 1.0 / (2.0 * sigma * sigma)
    pq = rounded_lognormal(-a, 2.0 * a, 0.05, 400)
    pp = rounded_lognormal(a, 2.0 * a, 0.05, 400)
    law = pp
    for _ in range(t - 1):
        law = np.convolve(law, pq)
    pmfs = [(pq, mgf_table(pq, THETAS), t - 1), (pp, mgf_table(pp, THETAS), 1)]
    below, above = mass_below(pmfs, lo), mass_above(pmfs, end)
    assert law[:lo].sum() <= below <= 1.0
    assert law[end:].sum() <= above <= 1.0
    # not vacuous: within a factor 20 of the exact masses here
    assert above < 20.0 * law[end:].sum() and below <= 20.0 * law[:lo].sum()
