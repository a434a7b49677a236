"""The discretizers of many losses at once (tightdp.pld.families, tightdp.losses.families):
the same laws as one loss at a time, and ranges whose tails hold at most the mass asked."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.special import log_ndtr

import tightdp as td
from tightdp.losses.families import log_cdfs_many
from tightdp.pld.discretize import (
    LazyLower,
    certified_pair_lazy,
    connect_the_dots,
    loss_range,
)
from tightdp.pld.families import (
    build_lowers,
    certified_pairs_lazy_many,
    connect_the_dots_many,
    loss_ranges_many,
)
from tightdp.pld.mgf import MANY_PARTS, LogMgf


def _mechanisms() -> list:
    """Distinct mechanisms of several families: Poisson-subsampled Gaussians (a schedule),
    Poisson-subsampled Laplace, a mixture without closed-form inverse, plain Gaussians."""
    out = [td.PoissonSubsampled(td.Gaussian(1.5 - 0.7 * i / 29), 0.01) for i in range(30)]
    out += [td.PoissonSubsampled(td.Laplace(scale=1.0 + i), 0.05) for i in range(3)]
    out += [td.Gaussian(2.0), td.Gaussian(3.0)]
    return out


def _x_of(y: float, s: float, q: float, hi: float = 200.0) -> float:
    """The output x whose loss ``log(1 - q + q e^{(2x - 1)/(2 s^2)})`` (the remove pair of a
    Poisson-subsampled Gaussian of noise s, sensitivity 1) is y, by brentq."""
    return brentq(lambda x: math.log1p(-q + q * math.exp((2 * x - 1) / (2 * s * s))) - y,
                  -50.0, hi, xtol=1e-14)


def _mixture_log(x: float, s: float, q: float, *, sf: bool) -> float:
    """log of ``(1 - q) Phi(x/s) + q Phi((x - 1)/s)`` (or of the survival functions)."""
    z0, z1 = (-x / s, -(x - 1) / s) if sf else (x / s, (x - 1) / s)
    return float(np.logaddexp(math.log1p(-q) + log_ndtr(z0), math.log(q) + log_ndtr(z1)))


def _same(a, b) -> bool:
    return all(np.array_equal(x, y, equal_nan=True) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize("direction", [0, 1])
def test_log_cdfs_many_is_each_loss_bit_for_bit(direction):
    rng = np.random.default_rng(1)
    losses = [m.privacy_losses()[direction] for m in _mechanisms()]
    pts = [np.sort(rng.normal(0.0, 2.0, int(rng.integers(1, 3000)))) for _ in losses]
    pts[0] = np.array([-np.inf, -1e3, math.log(0.99), 0.0, 1e-9, 5.0, 800.0, np.inf])
    for loss, p, got in zip(losses, pts, log_cdfs_many(losses, pts), strict=True):
        assert _same(loss.log_cdfs(p), got)


def test_subsampled_log_cdfs_many_against_closed_form():
    """P(Y <= y) of the remove pair of a Poisson-subsampled Gaussian, by solving the loss
    ``log(1 - q + q e^{(2x - 1)/(2 s^2)}) = y`` for x with brentq and taking the mixture's
    CDF there: an evaluation independent of the library's inverse."""
    q = 0.01
    sig = [0.8, 1.1, 1.5]
    losses = [td.PoissonSubsampled(td.Gaussian(s), q).privacy_losses()[0] for s in sig]
    ys = np.array([-0.005, 0.0, 0.01, 0.3, 2.0])
    got = log_cdfs_many(losses, [ys] * 3)
    for s, (lpc, _, lqc, _) in zip(sig, got, strict=True):
        for y, a, b in zip(ys, lpc, lqc, strict=True):
            x = _x_of(float(y), s, q)
            assert a == pytest.approx(_mixture_log(x, s, q, sf=False), rel=1e-9)
            assert b == pytest.approx(log_ndtr(x / s), rel=1e-9)


def test_connect_the_dots_many_is_each_loss_bit_for_bit():
    losses = [m.privacy_losses()[0] for m in _mechanisms()]
    ranges = [loss_range(loss, -30.0, coarse=True) for loss in losses]
    grids = [(max(hi - lo, 1e-12) / 256, lo, hi) for lo, hi in ranges]
    for loss, (d, lo, hi), law in zip(losses, grids, connect_the_dots_many(losses, grids),
                                      strict=True):
        one = connect_the_dots(loss, d, lo, hi)
        assert law.offset == one.offset and law.inf_mass == one.inf_mass
        assert np.array_equal(law.probs, one.probs)


@pytest.mark.parametrize("direction,chunk", [(0, None), (1, None), (0, 5000)])
def test_certified_pairs_many_are_each_loss_bit_for_bit(direction, chunk, monkeypatch):
    """Upper and (lowered-chords) lower pairs of many losses on one grid, the lower ones built
    from one evaluation of all losses' sub-nodes (or of chunks of them), equal those of one
    loss at a time: certified_pair's upper, and its lower refined at the same share of the
    largest tent."""
    from tightdp.pld import families

    if chunk is not None:
        monkeypatch.setattr(families, "_CHUNK_POINTS", chunk)
    losses = [m.privacy_losses()[direction] for m in _mechanisms()]
    ranges = [loss_range(loss, -30.0, coarse=True) for loss in losses]
    d = 2e-3
    pairs = certified_pairs_lazy_many(losses, d, ranges)
    lowers = build_lowers([lower for _, lower in pairs])
    for loss, (lo, hi), (up, _), low in zip(losses, ranges, pairs, lowers, strict=True):
        u1, lazy = certified_pair_lazy(loss, d, lo, hi)
        assert np.array_equal(up.probs, u1.probs) and up.offset == u1.offset
        assert isinstance(lazy, LazyLower)
        lazy.share = families.REFINE_SHARE
        l1 = lazy()
        assert np.array_equal(low.probs, l1.probs) and low.offset == l1.offset


def test_many_lower_pairs_stay_below_the_curve():
    """The lower pairs of many losses (lowered chords refined on their larger tents only)
    are below each loss's exact curve (its closed form in normal or Laplace tails,
    loss.delta) at every grid point and between, and are pairs: P-mass 1 with the mass at
    +inf, Q-mass at most 1."""
    losses = [m.privacy_losses()[direction] for m in _mechanisms() for direction in (0, 1)]
    ranges = [loss_range(loss, -30.0, coarse=True) for loss in losses]
    d = 2e-3
    pairs = certified_pairs_lazy_many(losses, d, ranges)
    lowers = build_lowers([lower for _, lower in pairs])
    kinds = set()
    for loss, low in zip(losses, lowers, strict=True):
        eps = np.unique(np.concatenate([np.linspace(-3.0, 5.0, 401), low.ys, low.ys + d / 3]))
        true = loss.delta(eps)
        assert np.all(low.delta(eps) <= true * (1 + 1e-11) + 1e-15)
        assert np.all(low.probs >= 0)
        assert low.probs.sum() + low.inf_mass == pytest.approx(1.0, abs=1e-12)
        kinds.add(low.meta["kind"])
        if low.meta["kind"] == "lowered_chords":
            q = np.sum(low.probs[:-1] * np.exp(-low.ys[:-1]))
            assert q <= 1.0 - loss.neg_inf_mass + 1e-12
    assert "lowered_chords" in kinds


def test_loss_ranges_many_hold_the_tail_asked():
    """Each end found for many losses has at most the mass asked beyond it (P(Y > hi) from
    the closed form at x*(hi) solved by brentq), and is no further out than the single-loss
    coarse range's (the same candidates, so the same ends for these monotone tails)."""
    q, log_tail = 0.01, -30.0
    sig = np.linspace(0.6, 2.0, 20)
    losses = [td.PoissonSubsampled(td.Gaussian(float(s)), q).privacy_losses()[0] for s in sig]
    got = loss_ranges_many(losses, log_tail)
    for s, loss, (lo, hi) in zip(sig, losses, got, strict=True):
        assert (lo, hi) == loss_range(loss, log_tail, coarse=True)
        assert lo == loss.support[0]
        x = _x_of(hi, float(s), q)
        assert _mixture_log(x, float(s), q, sf=True) <= log_tail + 1e-9


def test_stacked_cumulants_match_each_law():
    """K, K', K'' of many laws (the stacked path of LogMgf) against mpmath sums over the
    atoms of each law."""
    import mpmath as mp

    losses = [m.privacy_losses()[0] for m in _mechanisms()[:MANY_PARTS + 4]]
    ranges = [loss_range(loss, -20.0, coarse=True) for loss in losses]
    laws = connect_the_dots_many(losses, [(max(hi - lo, 1e-12) / 64, lo, hi)
                                          for lo, hi in ranges])
    mgf = LogMgf([(law, 2) for law in laws])
    ts = np.array([-1.0, 0.5, 3.0])
    kk, k1, k2 = mgf.cumulants(ts)
    for j, t in enumerate(ts):
        ref = [mp.mpf(0)] * 3
        for law in laws:
            w = [mp.mpf(float(p)) * mp.e ** (mp.mpf(float(t)) * float(y))
                 for p, y in zip(law.probs, law.ys, strict=True) if p > 0]
            ys = [mp.mpf(float(y)) for p, y in zip(law.probs, law.ys, strict=True) if p > 0]
            s = mp.fsum(w)
            mu = mp.fsum(a * b for a, b in zip(w, ys, strict=True)) / s
            ref[0] += 2 * mp.log(s)
            ref[1] += 2 * mu
            ref[2] += 2 * mp.fsum(a * (b - mu) ** 2 for a, b in zip(w, ys, strict=True)) / s
        assert kk[j] == pytest.approx(float(ref[0]), rel=1e-12, abs=1e-14)
        assert k1[j] == pytest.approx(float(ref[1]), rel=1e-12, abs=1e-14)
        assert k2[j] == pytest.approx(float(ref[2]), rel=1e-10, abs=1e-14)
