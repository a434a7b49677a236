"""Mechanisms: their privacy losses against closed forms and mpmath quadrature."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

import tightdp as td


def gdp_delta(mu: float, eps: float) -> float:
    """mu-GDP curve (Balle & Wang 2018, Thm 8), in mpmath."""
    with mp.workdps(50):
        mu, eps = mp.mpf(mu), mp.mpf(eps)
        return float(mp.ncdf(-eps / mu + mu / 2) - mp.e ** eps * mp.ncdf(-eps / mu - mu / 2))


def hockey_stick(p, q, eps: float, lo: float, hi: float) -> float:
    """int (p(x) - e^eps q(x))_+ dx by mpmath quadrature over the region where the integrand
    is positive (an interval for these monotone-loss pairs; its end is found by bisection)."""
    with mp.workdps(40):
        e = mp.e ** mp.mpf(eps)

        def g(x):
            return p(x) - e * q(x)

        xs = [mp.mpf(x) for x in np.linspace(lo, hi, 2001)]
        pos = [g(x) > 0 for x in xs]
        pieces = []
        for i in range(len(xs) - 1):
            if pos[i] != pos[i + 1]:  # refine the sign change
                a, b = xs[i], xs[i + 1]
                for _ in range(120):
                    m = (a + b) / 2
                    if (g(m) > 0) == pos[i]:
                        a = m
                    else:
                        b = m
                pieces.append(a)
        edges = [mp.mpf(lo)] + pieces + [mp.mpf(hi)]
        total = mp.mpf(0)
        for a, b in zip(edges[:-1], edges[1:], strict=True):
            if g((a + b) / 2) > 0:
                total += mp.quad(g, [a, b])
        return float(total)


def npdf(x, m, s):
    return mp.npdf(x, m, s)


@pytest.mark.parametrize("sigma", [0.5, 1.0, 4.0])
@pytest.mark.parametrize("eps", [0.0, 0.5, 3.0])
def test_gaussian_delta_closed_form(sigma, eps):
    got = float(td.Gaussian(sigma).delta(eps))
    assert got == pytest.approx(gdp_delta(1 / sigma, eps), rel=1e-12, abs=1e-300)


def test_gaussian_tails_in_log_space():
    loss, _ = td.Gaussian(1.0).privacy_losses()
    # P(Y > 40) for Y ~ N(1/2, 1): log sf is finite and right
    ls = float(loss.logp_sf(np.array(40.0)))
    assert math.isfinite(ls)
    assert ls == pytest.approx(float(mp.log(mp.ncdf(-(40 - 0.5)))), rel=1e-12)
    # delta near 1e-185 keeps its relative accuracy
    d = float(td.Gaussian(0.5).delta(60.0))
    assert 0 < d < 1e-150 and d == pytest.approx(gdp_delta(2.0, 60.0), rel=1e-9)


@pytest.mark.parametrize("q,sigma,eps", [(0.01, 1.0, 0.5), (0.1, 0.8, 1.0), (0.5, 2.0, 0.2)])
def test_poisson_subsampled_both_directions_vs_mpmath(q, sigma, eps):
    mech = td.PoissonSubsampled(td.Gaussian(sigma), q)
    rem, add = mech.privacy_losses()

    def p(x):
        return (1 - q) * npdf(x, 0, sigma) + q * npdf(x, 1, sigma)

    def q0(x):
        return npdf(x, 0, sigma)

    want_rem = hockey_stick(p, q0, eps, -12 * sigma, 1 + 12 * sigma)
    want_add = hockey_stick(q0, p, eps, -12 * sigma, 1 + 12 * sigma)
    assert float(rem.delta(eps)) == pytest.approx(want_rem, rel=1e-9)
    assert float(add.delta(eps)) == pytest.approx(want_add, rel=1e-9)
    assert float(mech.delta(eps)) == pytest.approx(max(want_rem, want_add), rel=1e-9)


def test_reference_single_step_case_A22(reference_cases):
    case = next(c for c in reference_cases if c["id"] == "A22")
    m = case["mechanism"]
    got = float(td.PoissonSubsampled(td.Gaussian(m["sigma"]), m["q"]).delta(
        case["query"]["eps"]))
    assert case["lower"] * (1 - 1e-12) <= got <= case["upper"] * (1 + 1e-12)


def test_laplace_delta_closed_form():
    # delta(eps) of Laplace with scale b, sensitivity 1: 1 - exp((eps - 1/b)/2) for eps < 1/b
    for b, eps in [(1.0, 0.5), (2.0, 0.1)]:
        want = 1 - math.exp((eps - 1 / b) / 2)
        assert float(td.Laplace(b).delta(eps)) == pytest.approx(want, rel=1e-12)


def test_cdfs_are_consistent():
    for mech in [td.PoissonSubsampled(td.Gaussian(0.7), 0.05), td.Laplace(1.0),
                 td.MixtureOfGaussians([0, 1, 2], [0.9, 0.09, 0.01], 1.0),
                 td.SampledWithoutReplacement(td.Gaussian(1.0), 0.1),
                 td.PoissonSubsampled(td.Laplace(0.5), 0.2)]:
        for loss in mech.privacy_losses():
            y = np.linspace(-3, 3, 13)
            assert np.allclose(loss.p_cdf(y) + loss.p_sf(y), 1.0, atol=1e-12)
            assert np.allclose(loss.q_cdf(y) + loss.q_sf(y), 1.0, atol=1e-12)
            assert np.all(np.diff(loss.p_cdf(y)) >= -1e-15)


def test_mixture_of_gaussians_two_components_is_poisson_subsampled():
    mog = td.MixtureOfGaussians([0.0, 1.0], [0.99, 0.01], 1.0)
    ps = td.PoissonSubsampled(td.Gaussian(1.0), 0.01)
    eps = np.array([0.01, 0.3, 1.0, 2.0])
    assert np.allclose(mog.delta(eps), ps.delta(eps), rtol=1e-10, atol=0)


def test_randomized_response_and_pure_dp():
    rr = td.RandomizedResponse(eps=1.0, num_values=2)
    assert rr.eps == pytest.approx(1.0)
    # eps-DP randomized response has delta(eps) = 0 and delta(0) = tanh(eps/2)
    assert float(rr.delta(1.0)) == pytest.approx(0.0, abs=1e-15)
    assert float(td.PureDP(1.0).delta(0.0)) == pytest.approx(math.tanh(0.5), rel=1e-12)
    ad = td.ApproxDP(1.0, 1e-3)
    assert ad.delta0 == 1e-3
    assert float(ad.delta(1.0)) == pytest.approx(1e-3, rel=1e-12)
    assert float(ad.delta(50.0)) == pytest.approx(1e-3, rel=1e-12)


@pytest.mark.parametrize("make", [
    lambda: td.Gaussian(0.0), lambda: td.Gaussian(-1.0), lambda: td.Gaussian(float("nan")),
    lambda: td.PoissonSubsampled(td.Gaussian(1.0), 0.0),
    lambda: td.PoissonSubsampled(td.Gaussian(1.0), 1.5),
    lambda: td.PoissonSubsampled(td.Gaussian(1.0), float("nan")),
    lambda: td.Laplace(0.0), lambda: td.PureDP(-1.0), lambda: td.ApproxDP(1.0, 1.0),
    lambda: td.RandomizedResponse(1.5, 4), lambda: td.MixtureOfGaussians([-1.0], [1.0], 1.0),
    lambda: td.MixtureOfGaussians([0.0, 1.0], [0.5, 0.6], 1.0),
    lambda: td.SampledWithReplacement(td.Gaussian(1.0), 10, 5),
])
def test_bad_parameters_raise(make):
    with pytest.raises(ValueError):
        make()


def test_error_names_parameter_and_range():
    with pytest.raises(ValueError, match=r"q must be in \(0, 1\]"):
        td.PoissonSubsampled(td.Gaussian(1.0), 2.0)
    with pytest.raises(ValueError, match=r"sigma must be in \(0, inf\)"):
        td.Gaussian(0.0)


# --- mixture-of-Gaussians losses: the log-sum-exp inverse and the log-CDFs ----------------------
# Ganesh, Def. 2.8 (remove pair sum_i p_i N(c_i, s^2) vs N(0, s^2), add pair reversed). The
# references are mpmath (50 digits) on the loss's own float parameters, and the pre-change
# algorithm (safeguarded Newton/bisection on the difference of two logsumexps, log-CDFs by one
# log_ndtr per term and side), which the loss still carries as its generic path.

_EPS = float(np.finfo(float).eps)


def _mog_cases():
    rng = np.random.default_rng(20240607)
    cases = []
    for k, q, s in [(16, 0.01, 1.0), (2, 0.5, 1.3), (5, 0.1, 0.5), (40, 0.002, 2.5),
                    (32, 0.05, 2.0)]:
        c, p = td.dpsgd.group.sensitivity_distribution(k, sampling="poisson",
                                                          sampling_rate=q)
        cases.append((f"binom-k{k}-q{q}-s{s}", c, p, s))
    for i, with_zero in enumerate([True, False, True]):
        m = int(rng.integers(3, 9))
        c = np.sort(rng.uniform(0.05, 5.0, m))
        if with_zero:
            c[0] = 0.0
        p = rng.dirichlet(np.full(m, 0.3))
        p = np.maximum(p, 1e-30)
        cases.append((f"random{i}", c, p / p.sum(), float(rng.uniform(0.4, 3.0))))
    return cases


_MOG = _mog_cases()


def _mp_loss(loss):
    """L(x) and the four CDFs in mpmath, on the float parameters the loss holds."""
    a = [mp.mpf(float(v)) for v in loss.a]
    b = [mp.mpf(float(v)) for v in loss.b]
    lp = [mp.mpf(float(v)) for v in loss.lpw]
    lq = [mp.mpf(float(v)) for v in loss.lqw]
    s = mp.mpf(loss.s)

    def dens(x, locs, lw):
        return mp.fsum(mp.exp(w - (x - c) ** 2 / (2 * s * s))
                       for w, c in zip(lw, locs, strict=True))

    def L(x):
        return mp.log(dens(x, a, lp)) - mp.log(dens(x, b, lq))

    def cdf(x, p_side):
        locs, lw = (a, lp) if p_side else (b, lq)
        return mp.fsum(mp.exp(w) * mp.ncdf((x - c) / s) for w, c in zip(lw, locs, strict=True))

    def sf(x, p_side):
        locs, lw = (a, lp) if p_side else (b, lq)
        return mp.fsum(mp.exp(w) * mp.ncdf((c - x) / s) for w, c in zip(lw, locs, strict=True))

    return L, cdf, sf


def _mp_root(L, y, x0):
    """x with L(x) = y in mpmath: a bracket around the float guess x0 is *verified* by the sign
    of L - y (so the reference does not rely on x0 being right), then refined."""
    y = mp.mpf(float(y))
    d = mp.mpf(1e-10) * max(1, abs(x0))
    x0 = mp.mpf(float(x0))
    for _ in range(40):
        lo, hi = x0 - d, x0 + d
        if L(lo) <= y < L(hi):
            break
        d *= 100
    else:
        raise AssertionError("no bracket")
    for _ in range(400):
        m = (lo + hi) / 2
        if L(m) <= y:
            lo = m
        else:
            hi = m
        if hi - lo < mp.mpf(10) ** -32 * max(1, abs(lo)):
            break
    return lo


def _y_points(loss, n_lin=25):
    """Loss values from the bottom of the support (ulps above a finite end) to far tails."""
    from tightdp.pld.discretize import loss_range
    lo, hi = loss.support
    r_lo, r_hi = loss_range(loss, math.log(1e-300))
    ys = list(np.linspace(r_lo, r_hi, n_lin)[1:-1])
    if math.isfinite(lo):
        ys += [np.nextafter(lo, np.inf)] + [lo + abs(lo) * f for f in (1e-15, 1e-11, 1e-7,
                                                                       1e-3, 0.1)]
    else:
        ys += [r_lo, 2 * r_lo, 10 * r_lo]
    if math.isfinite(hi):
        ys += [np.nextafter(hi, -np.inf)] + [hi - abs(hi) * f for f in (1e-15, 1e-11, 1e-7,
                                                                        1e-3, 0.1)]
    else:
        ys += [r_hi, 2 * r_hi, 10 * r_hi]
    return np.array(sorted(set(float(v) for v in ys)))


@pytest.mark.parametrize("name,c,p,s", _MOG, ids=[m[0] for m in _MOG])
def test_mog_inverse_matches_mpmath(name, c, p, s):
    """x*(y) = sup{x : L(x) <= y} against a 50-digit root, to 1e-12 relative (in fact ~1e-15)
    from ulps above the flat end of the loss to y beyond the 1e-300 tails; the returned point
    is on the safe side, L(x) <= y, for the float loss and (up to rounding) in mpmath."""
    with mp.workdps(50):
        for loss in td.MixtureOfGaussians(c, p, s).privacy_losses():
            assert loss._lse is not None
            L, _, _ = _mp_loss(loss)
            y = _y_points(loss)
            x = loss.inverse(y)
            assert np.all(np.isfinite(x)) and np.all(np.diff(x) >= 0)
            assert np.all(loss.loss(x) <= y)
            for yi, xi in zip(y, x, strict=True):
                ref = _mp_root(L, yi, xi)
                assert abs(mp.mpf(float(xi)) - ref) <= 1e-12 * max(1, abs(ref)), (yi, xi, ref)
                assert L(mp.mpf(float(xi))) <= mp.mpf(float(yi)) + 8 * _EPS * max(1, abs(yi))
            lo, hi = loss.support
            edge = loss.inverse(np.array([lo, hi, np.nan]))
            assert edge[0] == -np.inf and edge[1] == np.inf and np.isnan(edge[2])


def _generic(loss):
    """The same loss on the generic path: two-logsumexp loss, bracketed Newton/bisection."""
    import copy
    g = copy.copy(loss)
    g._lse = None
    return g


def _old_bin_masses(loss, edges):
    """bin_masses as computed before the log-sum-exp path: x*(y) by the generic safeguarded
    Newton/bisection, each log-CDF as logsumexp(log w + log_ndtr(+-z)) over the components."""
    from scipy.special import log_ndtr, logsumexp

    from tightdp.losses import PrivacyLoss
    g = _generic(loss)
    x = g.inverse(edges)
    fin = np.isfinite(x)
    xs = np.where(fin, x, 0.0)[:, None]

    def mix(locs, lw, sign):
        return logsumexp(lw + log_ndtr(sign * (xs - locs) / loss.s), axis=-1)

    tot_p, tot_q = float(logsumexp(loss.lpw)), float(logsumexp(loss.lqw))
    lpc = np.where(fin, mix(loss.a, loss.lpw, 1), np.where(x > 0, tot_p, -np.inf))
    lps = np.where(fin, mix(loss.a, loss.lpw, -1), np.where(x > 0, -np.inf, tot_p))
    lqc = np.where(fin, mix(loss.b, loss.lqw, 1), np.where(x > 0, tot_q, -np.inf))
    lqs = np.where(fin, mix(loss.b, loss.lqw, -1), np.where(x > 0, -np.inf, tot_q))
    return (PrivacyLoss._diff(lpc, lps, 0.0), PrivacyLoss._diff(lqc, lqs, 0.0)), x


def _bin_tolerance(lc, ls, x, dx, dens):
    """What a bin mass can be trusted to, given the inputs' rounding: 1e-12 relative, plus the
    cancellation of subtracting two CDFs (or survival functions) known to relative accuracy
    8 eps (1 + |log|), plus the first-order effect ``density * dx`` of a difference ``dx`` in
    the edges' x*(y)."""
    use_sf = ls[:-1] < math.log(0.5)
    la = np.where(use_sf, ls[:-1], lc[:-1])
    lb = np.where(use_sf, ls[1:], lc[1:])
    with np.errstate(over="ignore", invalid="ignore"):
        canc = 8 * _EPS * (np.exp(la) * (1 + np.abs(la)) + np.exp(lb) * (1 + np.abs(lb)))
        shift = dens[:-1] * dx[:-1] + dens[1:] * dx[1:]
    return np.nan_to_num(canc) + np.nan_to_num(shift)


@pytest.mark.parametrize("name,c,p,s", _MOG, ids=[m[0] for m in _MOG])
def test_mog_bin_masses_unchanged_against_generic_path(name, c, p, s):
    """bin_masses of the new path against the pre-change algorithm on 2001 edges over the
    1e-300 loss range: the edges' x*(y) agree to 1e-12 relative, and every bin agrees to 1e-12
    relative up to what a rounding-level change of x*(y) and of the log-CDFs can cause (deep
    in the tails one ulp of x moves a bin of mass 1e-200 by ~1e-11 relative: the bins there
    are ill-conditioned, not wrong)."""
    from tightdp.pld.discretize import loss_range
    for loss in td.MixtureOfGaussians(c, p, s).privacy_losses():
        lo, hi = loss_range(loss, math.log(1e-300))
        edges = np.linspace(lo, hi, 2001)
        (po, qo), xo = _old_bin_masses(loss, edges)
        loss.tables.pop("last_inverse", None)  # a fresh inverse, not the memo
        pn, qn = loss.bin_masses(edges)
        xn = loss.inverse(edges)
        np.testing.assert_array_equal(np.isfinite(xn), np.isfinite(xo))
        fin = np.isfinite(xn)
        assert np.all(np.abs(xn[fin] - xo[fin]) <= 1e-12 * np.maximum(1, np.abs(xo[fin])))
        xf, xof = np.where(fin, xn, 0.0), np.where(fin, xo, 0.0)
        dx = np.abs(xf - xof) + 4 * np.spacing(np.abs(xf))
        xs = np.where(fin, xn, 0.0)[:, None]
        for (new, old), locs, lw, side in (((pn, po), loss.a, loss.lpw, "p"),
                                            ((qn, qo), loss.b, loss.lqw, "q")):
            dens = np.where(fin, np.exp(lw - 0.5 * ((xs - locs) / loss.s) ** 2).sum(-1)
                            / (loss.s * math.sqrt(2 * math.pi)), 0.0)
            lc = getattr(loss, f"log{side}_cdf")(edges)
            ls = getattr(loss, f"log{side}_sf")(edges)
            tol = 1e-12 * np.maximum(new, old) + _bin_tolerance(lc, ls, xn, dx, dens)
            tol += 1e-300  # subnormal masses carry no relative precision
            bad = np.abs(new - old) > tol
            assert not bad.any(), (side, np.flatnonzero(bad)[:5], new[bad][:5], old[bad][:5])


@pytest.mark.parametrize("name,c,p,s", _MOG[:4] + _MOG[5:6], ids=[m[0] for m in _MOG[:4]
                                                                   + _MOG[5:6]])
def test_mog_log_cdfs_and_bins_match_mpmath(name, c, p, s):
    """The four log-CDFs at the computed x*(y) against mpmath (to ~1e-15 of |log|), and the bin
    masses between those points against mpmath differences (survival functions above the
    median), within the cancellation tolerance of :func:`_bin_tolerance`."""
    rng = np.random.default_rng(7)
    with mp.workdps(50):
        for loss in td.MixtureOfGaussians(c, p, s).privacy_losses():
            _, cdf, sf = _mp_loss(loss)
            ys = _y_points(loss, n_lin=12)
            ys = ys[np.isfinite(loss.inverse(ys))]
            edges = np.sort(np.concatenate([ys, ys + rng.uniform(1e-4, 1e-2, ys.size)]))
            edges = edges[(edges > loss.support[0]) & (edges < loss.support[1])]
            x = loss.inverse(edges)
            got = {(ps, c_): getattr(loss, f"log{ps}_{'cdf' if c_ else 'sf'}")(edges)
                   for ps in "pq" for c_ in (True, False)}
            pb, qb = loss.bin_masses(edges)
            for side, bins in (("p", pb), ("q", qb)):
                ref_c = [cdf(mp.mpf(float(v)), side == "p") for v in x]
                ref_s = [sf(mp.mpf(float(v)), side == "p") for v in x]
                for j in range(edges.size):
                    for val, ref in ((got[(side, True)][j], ref_c[j]),
                                     (got[(side, False)][j], ref_s[j])):
                        lr = mp.log(ref)
                        assert abs(mp.mpf(float(val)) - lr) <= 4e-15 * max(1, abs(lr))
                tol = _bin_tolerance(got[(side, True)], got[(side, False)], x,
                                     np.zeros_like(x), np.zeros_like(x))
                for j in range(edges.size - 1):
                    ref = (ref_c[j + 1] - ref_c[j]) if ref_s[j] > 0.5 else (ref_s[j]
                                                                           - ref_s[j + 1])
                    err = abs(mp.mpf(float(bins[j])) - ref)
                    assert err <= 1e-12 * ref + tol[j] + mp.mpf(1e-300), (side, j)


def test_mog_loss_lse_form_matches_mpmath():
    """The log-sum-exp form of L(x) agrees with mpmath to rounding (the generic difference of
    two logsumexps loses ~eps x^2 / s^2 to cancellation at large |x|; this one does not)."""
    with mp.workdps(50):
        for _, c, p, s in _MOG[:4]:
            for loss in td.MixtureOfGaussians(c, p, s).privacy_losses():
                L, _, _ = _mp_loss(loss)
                x = np.linspace(-80 * s, 80 * s + c.max(), 41)
                got = loss.loss(x)
                bmax = float(np.max(np.abs(c))) / s ** 2
                for xi, gi in zip(x, got, strict=True):
                    ref = L(mp.mpf(float(xi)))
                    assert abs(mp.mpf(float(gi)) - ref) <= 1e-14 * (1 + abs(ref)
                                                                     + bmax * abs(xi))


def test_location_mixture_slope_and_with_inverse_public_api():
    """``slope`` is L'(x) (against mpmath's derivative of the log-ratio of the two mixtures);
    ``with_inverse`` rebuilds the same loss with the given inverse, used inside the support;
    ``has_closed_inverse`` says which."""
    a, pw, b, qw, s = [0.0, 1.0, 2.5], [0.5, 0.3, 0.2], [0.0, 0.7], [0.6, 0.4], 1.3
    loss = td.LocationMixtureLoss("gaussian", a, pw, b, qw, s)

    def lr(x):
        p = sum(w * mp.exp(-(x - c) ** 2 / (2 * s * s)) for c, w in zip(a, pw, strict=True))
        q = sum(w * mp.exp(-(x - c) ** 2 / (2 * s * s)) for c, w in zip(b, qw, strict=True))
        return mp.log(p / q)

    xs = np.array([-6.0, -1.0, 0.0, 0.4, 2.0, 7.5])
    got = loss.slope(xs)
    for x, g in zip(xs, got, strict=True):
        with mp.workdps(40):
            want = float(mp.diff(lr, mp.mpf(x)))
        assert g == pytest.approx(want, rel=1e-12, abs=1e-14)
    assert not loss.has_closed_inverse
    calls = []

    def inv(y):
        calls.append(y.size)
        return loss.inverse(y)

    fast = loss.with_inverse(inv)
    assert fast.has_closed_inverse and fast is not loss
    ys = np.array([-0.1, 0.0, 0.3])  # inside the support (-0.18, inf)
    assert np.array_equal(fast.inverse(ys), loss.inverse(ys)) and calls == [3]
    assert np.array_equal(fast.loss(xs), loss.loss(xs))
    assert fast.support == loss.support and fast.inf_mass == loss.inf_mass
    lap = td.LocationMixtureLoss("laplace", [1.0], [1.0], [0.0], [1.0], 1.0)
    with pytest.raises(ValueError, match="Gaussian kernel"):
        lap.slope(xs)


def test_discrete_single_application_lower_bound():
    """DiscreteLoss.delta_lower: the hockey-stick sum of a pair with finitely many atoms less
    its rounding charge. Against the closed form of three-outcome pairs, sum_i (p_i -
    e^eps q_i)_+ in mpmath (50 digits): below it, by no more than ~1e4 units of roundoff of
    the masses involved (at most 1 + e^eps here)."""
    from tightdp.losses.discrete import DiscreteLoss
    mp.mp.dps = 50
    p, q = [0.6, 0.3, 0.1], [0.1, 0.3, 0.6]
    loss = DiscreteLoss(np.log(p) - np.log(q), p, q)
    for eps in (0.0, 0.3, 1.0, 1.7, 1.79):
        exact = float(sum(max(mp.mpf(a) - mp.e ** mp.mpf(eps) * mp.mpf(b), 0)
                          for a, b in zip(p, q, strict=True)))
        low = float(loss.delta_lower(eps))
        assert low <= exact and exact - low <= 1e-12
    assert float(loss.delta_lower(2.0)) == 0.0
    # a mechanism with that pair in both directions answers it as its single application
    rr = td.RandomizedResponse(eps=math.log(3.0))
    got = rr.single_delta_lower(np.array([0.2, 0.9]))
    exact_rr = np.maximum(0.75 - np.exp([0.2, 0.9]) * 0.25, 0.0)
    assert np.all(got <= exact_rr) and np.all(exact_rr - got <= 1e-13)
    assert td.Gaussian(1.0).single_delta_lower(0.5) is None   # not finitely many atoms
