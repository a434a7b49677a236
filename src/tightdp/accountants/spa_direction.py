"""One direction (remove or add) of the saddle-point accountant
(:class:`~tightdp.SaddlePointAccountant`; Alghamdi et al., *The Saddle-Point Accountant for
Differential Privacy*, arXiv:2208.09595; the equation numbers are that paper's): its composed
CGF (the sum over the terms, eq. (72)) memoized per tilt, and the Berry-Esseen bracket of
Theorem 5 (eqs. (74)-(76)) around SP-CLT with the root search of its ends in eps
(:func:`be_roots`, on :func:`tightdp.roots.roots_decreasing`).
"""

from __future__ import annotations

import math

import numpy as np

from .._numerics import FLOATS
from ..curves.saddle import (
    T_MAX,
    T_MAX_QUAD,
    grid_parts,
    log_clt_theta,
    log_clt_theta1,
    log_theta_max,
    rma_eps,
    saddle_eps,
    saddle_log_delta,
    saddle_log_delta_slope,
    solve_tilt,
    tilt_grids,
)
from ..losses import GaussianLoss, PrivacyLoss
from ..losses.cgf import cgf_rows, loss_sup, max_tilt
from ..roots import roots_decreasing

__all__ = ["Direction", "BERRY_ESSEEN_C", "REL_MARGIN", "log_diff", "be_fixed",
           "log_berry_esseen", "be_end1", "be_roots", "delta_dir"]

#: Berry-Esseen constant for sums of independent, non-identically distributed variables
#: (Shevtsova 2010, sup-norm distance to the normal CDF <= C * sum beta_3 / B^3).
BERRY_ESSEEN_C = 0.5600
_LOG2 = math.log(2.0)
#: relative safety margin (in log) on the certified bounds' numerically evaluated parts
REL_MARGIN = 1e-9


def log_diff(la: np.ndarray, lb: np.ndarray) -> np.ndarray:
    """log(e^la - e^lb) where la > lb, else -inf."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return _log_diff(np, la, lb)


def _log_diff(xp, la, lb):
    """:func:`log_diff` in the arithmetic ``xp`` (numpy or ``FLOATS``)."""
    d = xp.minimum(lb - la, -1e-300)
    return xp.where(lb < la, la + xp.log(-xp.expm1(d)), -math.inf)


def be_fixed(t, ks, rho) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The parts of :func:`log_berry_esseen` that do not depend on eps: ``sqrt(K'')``,
    ``log M_t`` (eq. (42)) and the log of the Berry-Esseen ratio ``min(C rho / K''^{3/2}, 1)``
    (eq. (76)), for a root search in eps at fixed tilts."""
    k2 = ks[2]
    with np.errstate(divide="ignore", invalid="ignore"):
        lb = np.minimum(np.log(BERRY_ESSEEN_C * rho) - 1.5 * np.log(k2), 0.0)
    return np.sqrt(k2), log_theta_max(t), lb


def log_berry_esseen(t, eps, ks, rho, k_margin, slope: bool = False,
                      fixed: tuple | None = None) -> tuple[np.ndarray, ...]:
    """(log SP-CLT, log Berry-Esseen error) at tilt t and eps (Alghamdi et al., Theorem 5,
    eq. (76)), elementwise; ``ks`` the rows K, K', K'' and ``rho`` the sum of the third
    absolute central moments of the tilted summands at ``t``, ``k_margin`` the CGF's error
    margin. With ``slope``, also the derivative of log SP-CLT in eps (the error term's is
    ``-t``; :func:`~tightdp.curves.saddle.log_clt_theta`). ``fixed``: :func:`be_fixed` of
    ``(t, ks, rho)`` when already computed (the same numbers).

    The error term carries the safety margins; callers add ``k_margin + REL_MARGIN`` to
    (upper) or subtract it from (lower) the SP-CLT term before combining."""
    k0, k1 = ks[0], ks[1]
    s, ltm, lb = be_fixed(t, ks, rho) if fixed is None else fixed
    lpre, lerr = _be_terms(t, eps, k0, ltm, lb, k_margin)
    if not slope:
        return lpre + log_clt_theta(t, k1 - eps, s), lerr
    lth, dlth = log_clt_theta(t, k1 - eps, s, slope=True)
    return lpre + lth, lerr, -t - dlth


def _be_terms(t, eps, k0, ltm, lb, km) -> tuple:
    """``(K - t eps, log Berry-Esseen error)`` of :func:`log_berry_esseen` (floats or arrays
    alike: the same operations in the same order)."""
    teps = t * eps
    return k0 - teps, k0 + km - teps + _LOG2 + ltm + lb + REL_MARGIN


def be_end1(x: float, t: float, k0: float, k1: float, s: float, ltm: float, lb: float, *,
            km: float, mg: float, upper: bool) -> tuple[float, float]:
    """One end of the Berry-Esseen bracket (Alghamdi et al., Theorem 5, eq. (76)) at eps = x
    in Python floats, with its slope in eps: ``log(SP-CLT e^{mg} + err)`` (``upper``) or
    ``log(SP-CLT e^{-mg} - err)``, from :func:`log_berry_esseen`'s terms (``s, ltm, lb`` of
    :func:`be_fixed`, ``km`` the CGF margin, ``mg`` it plus the relative margin). The same
    formulas as the arrays' form in :func:`be_roots` (:func:`_be_upper`, :func:`_be_lower`
    with ``FLOATS``); the math module's logarithms may differ from numpy's in the last bit,
    far inside ``REL_MARGIN``. Raises ZeroDivisionError where the arrays' form would divide
    by zero."""
    lpre, lerr = _be_terms(t, x, k0, ltm, lb, km)
    lth, dlth = log_clt_theta1(t, k1 - x, s)
    return (_be_upper if upper else _be_lower)(FLOATS, lpre + lth, lerr, -t - dlth, t, mg)


def _be_upper(xp, lclt, lerr, dl, t, mg) -> tuple:
    """The upper end ``log(e^{lclt + mg} + e^lerr)`` and its slope in eps, from the slope
    ``dl`` of ``lclt`` (the error term's is ``-t``), in the arithmetic ``xp``."""
    a = lclt + mg
    v = xp.logaddexp(a, lerr)
    return v, xp.exp(a - v) * dl - xp.exp(lerr - v) * t


def _be_lower(xp, lclt, lerr, dl, t, mg) -> tuple:
    """The lower end ``log(e^{lclt - mg} - e^lerr)`` (-inf where not positive) and its slope,
    as :func:`_be_upper`."""
    a = lclt - mg
    rr = xp.exp(lerr - a)
    return _log_diff(xp, a, lerr), (dl + rr * t) / (1.0 - rr)


#: the rows of :meth:`Direction.stats` from those of ``cgf_rows(..., 5, abs3=True)``: K to
#: K'''', the third absolute moment, then the fifth cumulant
_STATS_ORDER = [0, 1, 2, 3, 4, 6, 5]


class Direction:
    """The composed CGF of one direction (remove or add) of the recorded terms."""

    def __init__(self, parts: list[tuple[PrivacyLoss, int]], name: str):
        self.parts = parts  # (loss, count)
        self._cols: dict = {}  # tilt -> the rows of stats() there
        self._memo_k: dict = {}
        # the eps(delta) equations on the bracketing grids (they do not depend on delta):
        # (method, tilts) -> (g, dg); a few grids per method
        self.grid_values: dict = {}
        self.deadline = None  # the running query's clock (set by the accountant)
        self.name = name
        self.gaussian_only = all(isinstance(loss, GaussianLoss) for loss, _ in parts)
        self.sup = sum(c * loss_sup(loss) for loss, c in parts)
        # the largest tilt whose quadrature node sets stay bounded (cgf.MAX_NODES nodes,
        # blocked temporaries: memory well under 1 GB); beyond it only certified bounds at
        # the cap are reported ("beyond the supported tilt range")
        self.t_cap = T_MAX if all(
            isinstance(loss, GaussianLoss) or not hasattr(loss, "kernel") for loss, _ in parts
        ) else min(max_tilt(loss, T_MAX_QUAD) for loss, _ in parts if hasattr(loss, "kernel"))
        # tolerance for certified use of the numerical CGF: quadrature and summation error
        # (verified below 1e-13 absolute per step in the tests) with a wide safety factor.
        self.k_margin = 0.0 if self.gaussian_only else sum(c for _, c in parts) * 1e-11

    def stats(self, t: np.ndarray) -> np.ndarray:
        """Rows K, K', K'', K''', K'''' of the composed CGF (the sum over the terms, eq. (72)),
        the sum of the third absolute central moments of the tilted summands (eq. (76)) and
        the fifth cumulant K^(5) (the exact slope of SP-MSD1), at the tilts ``t`` (1-d).
        Memoized per tilt (the 1024 most recent): an eps(delta) query's Newton steps fill it,
        and its final evaluation at the roots, which are evaluated points
        (:func:`~tightdp.curves.saddle.solve_tilt`'s ``refine``), reads it. A tilt's rows are
        its own reductions over the nodes, so a hit gives the numbers an evaluation would up
        to the last bits of the matrix products (a valid evaluation either way)."""
        t = np.asarray(t, dtype=float).reshape(-1)
        tl = t.tolist()
        cols = self._cols
        got = [cols.get(x) for x in tl]
        miss = [j for j, c in enumerate(got) if c is None]
        if not miss:
            return np.array(got).T
        tm = t if len(miss) == len(tl) else t[miss]
        out = self._rows(tm, 5, abs3=True)[_STATS_ORDER]
        for j, col in zip(miss, out.T, strict=True):
            got[j] = cols[tl[j]] = col.copy()
        while len(cols) > 1024:
            del cols[next(iter(cols))]  # the oldest
        return np.array(got).T

    def moments(self, t: np.ndarray, abs3: bool) -> np.ndarray:
        """Rows K .. K'''' at the tilts ``t`` (1-d) and, with ``abs3``, the sum of the third
        absolute central moments (the rows of :meth:`stats` without K^(5), not memoized: a
        delta(eps) query's saddle points, many at once)."""
        return self._rows(np.asarray(t, dtype=float).reshape(-1), 4, abs3=abs3)

    def _rows(self, t: np.ndarray, order: int, *, abs3: bool) -> np.ndarray:
        """The composed rows ``K .. K^(order)`` (and, with ``abs3``, the third absolute
        moments) at the tilts ``t``: the sum over the terms of ``count x`` each loss's rows
        (eq. (72); :func:`~tightdp.losses.cgf.cgf_rows`, without the checks of ``cgf``: the
        tilts come from the solvers), within the query's time budget."""
        if self.deadline is not None:
            self.deadline.check("max_seconds", "the CGF quadrature of these mechanisms is slow "
                                "(wide mixtures); raise max_seconds or use the pld accountant")
        out = np.zeros((order + 1 + int(abs3), t.size))
        for loss, c in self.parts:
            out += c * cgf_rows(loss, t, order, abs3=abs3)
        return out

    def K(self, t: np.ndarray, order: int) -> np.ndarray:
        """Rows ``K .. K^(order)`` at the tilts ``t`` (1-d): from the memoized :meth:`stats`
        where they are there, else only these rows (the same operations, hence the same
        numbers: a Newton step needs no third absolute moment), memoized alike."""
        t = np.asarray(t, dtype=float).reshape(-1)
        key = t.tobytes()
        if t.size <= 2 and all(x in self._cols for x in t.tolist()):
            st = self.stats(t)
            return st[[0, 1, 2, 3, 4, 6]] if order == 5 else st[: order + 1]
        part = self._memo_k.pop(key, None)
        if part is not None:
            self._memo_k[key] = part  # most recently used last
            if part.shape[0] > order:
                return part[: order + 1]
        out = self._rows(t, order, abs3=False)
        if len(self._memo_k) >= 64:
            del self._memo_k[next(iter(self._memo_k))]  # the least recently used
        self._memo_k[key] = out
        return out

    def rho(self, t: np.ndarray) -> np.ndarray:
        """Sum of the third absolute central moments of the tilted summands."""
        return self.stats(t)[5]

    # --- the approximations at a tilt t, with eps the saddle-point eps(t) or a given eps ------
    def log_delta_at(self, t: np.ndarray, eps: np.ndarray | None, method: str,
                     ks: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
        """:func:`saddle_log_delta` at tilt ``t`` with this direction's composed CGF."""
        if ks is None:
            ks = self.K(t, 4)
        return saddle_log_delta(ks, t, eps, method)

    def eps_of_t(self, t: np.ndarray, ks: np.ndarray | None = None) -> np.ndarray:
        if ks is None:
            ks = self.K(t, 1)
        return saddle_eps(ks, t)

    def log_rma(self, t: np.ndarray, eps: np.ndarray, k0: np.ndarray) -> np.ndarray:
        """log of the refined moments bound at tilt t (eq. (43)); valid for every t > 0."""
        return k0 + self.k_margin - t * eps + log_theta_max(t)

    def rma_eps(self, t: np.ndarray, k0: np.ndarray, log_delta: float) -> np.ndarray:
        """The refined moments bound (eq. (43)) solved for eps at ``delta``: at each tilt
        ``t > 0`` (``k0 = K(t)``), a certified upper bound on eps(delta)."""
        return rma_eps(k0 + self.k_margin, t, log_delta)

    def log_be(self, t, eps, ks, rho) -> tuple[np.ndarray, ...]:
        """:func:`log_berry_esseen` with this direction's margin."""
        return log_berry_esseen(t, eps, ks, rho, self.k_margin)

    def eps_equations(self, t: np.ndarray, method: str) -> tuple[np.ndarray, np.ndarray]:
        """Rows (approximation, refined moments) of the eps(delta) equations of direction
        ``d`` at the tilts ``t``, with their slopes in log t: ``-log delta_approx`` at the
        saddle point of ``t``, and ``t K'(t) - K(t) + log(1 + t)`` (eq. (43) solved for eps:
        increasing in t, its root the optimal tilt; any t gives a bound). On a bracketing
        grid they do not depend on delta and are kept per direction: the grids' pieces are the
        read-only arrays of :func:`~tightdp.curves.saddle.solve_tilt`'s scan (a Newton step's
        tilts are a fresh array)."""
        if not t.flags.writeable:
            key = (method, t.tobytes())
            hit = self.grid_values.get(key)
            if hit is None:
                hit = self.grid_values[key] = self._eps_equations_at(t, method)
            return hit
        return self._eps_equations_at(t, method)

    def _eps_equations_at(self, t: np.ndarray, method: str) -> tuple[np.ndarray, np.ndarray]:
        # a Newton step's tilts: all the rows (the third absolute moment too), memoized per
        # tilt, since the roots are evaluated points whose statistics the query then reads;
        # a bracketing grid's: the cumulants only
        if t.flags.writeable:
            st = self.stats(t)
            ks, k5 = st[:5], st[6]
        else:
            st = self.K(t, 5)
            ks, k5 = st[:5], st[5]
        # -log delta_approx and its slope in log t (saddle_log_delta_slope; exact with K^(5))
        ld, d_ld, l1p = saddle_log_delta_slope(ks, t, method, k5)
        g, dg = np.empty((2, t.size)), np.empty((2, t.size))
        g[0], g[1] = -ld, t * ks[1] - ks[0] + l1p
        dg[0], dg[1] = d_ld, t * (t * ks[2] + 1.0 / (1.0 + t))
        return g, dg

    def rma_eps_on_grid(self, log_delta: float, target: float) -> float:
        """The least certified eps(delta) bound of the refined moments accountant (eq. (43):
        ``(K(t) + log(t^t/(1+t)^(1+t)) - log delta) / t`` at every tilt ``t > 0``) over the
        pieces of this direction's first bracketing grid, evaluated in increasing order until one
        brings it to ``target`` or below, or until it rises again: the bound is unimodal in
        ``t`` (its slope has the sign of ``t K'(t) - K(t) + log(1 + t)`` minus a constant,
        increasing), so the grid's later tilts cannot go below its least value so far. The
        CGF rows are those its own solve's scan reads from the memo, should it be solved
        after all."""
        best = math.inf
        for p in grid_parts(tilt_grids(1e-4, 64.0, self.t_cap, 65)[0]):
            k0 = self.K(p, 5)[0]
            with np.errstate(invalid="ignore", over="ignore"):
                e = self.rma_eps(p, k0, log_delta)
            e = e[np.isfinite(e)]
            if e.size:
                best = min(best, float(e.min()))
            if best <= target or (e.size and e[-1] > best):
                break
        return best


def delta_dir(d: Direction, eps: np.ndarray, method: str, *, bounds: bool,
              skip: np.ndarray | None = None) -> dict:
    """log delta approximation and certified log bounds of one direction (not solved at
    the eps of ``skip``: -inf there)."""
    n = eps.shape
    out = {"log_delta": np.full(n, -np.inf), "log_upper": np.full(n, -np.inf),
           "log_lower": np.full(n, -np.inf), "t": np.full(n, np.nan),
           "fallback": np.zeros(n, dtype=bool), "beyond": np.zeros(n, dtype=bool),
           "correction": np.zeros(n)}
    live = eps < d.sup  # at or above the loss's supremum delta is exactly 0
    if skip is not None:
        live &= ~skip
    if not live.any():
        return out
    e = eps[live]
    m = e.size

    # the saddle point (eq. (50)) and, for the bounds, the refined moments bound's optimal
    # tilt (eq. (43)/(44): K'(t) + log(t/(1+t)) = eps), solved together on one CGF
    # evaluation per step
    def f_both(t, need=None):  # both rows are cheap: "need" not used
        # with the second derivatives in log t (Halley's steps in solve_tilt): of
        # K' - 1/t - 1/(1+t) and of K' + log(t/(1+t)), from the third cumulant K^(3)
        ks = d.K(t, 3)
        g = [d.eps_of_t(t, ks), ks[1] + np.log(t) - np.log1p(t)]
        dg = [t * (ks[2] + 1.0 / t ** 2 + 1.0 / (1.0 + t) ** 2),
              t * (ks[2] + 1.0 / (t * (1 + t)))]
        t2 = t * t
        d2 = [dg[0] + t2 * (ks[3] - 2.0 / t ** 3 - 2.0 / (1.0 + t) ** 3),
              dg[1] + t2 * (ks[3] - (1.0 + 2.0 * t) / (t * (1.0 + t)) ** 2)]
        return np.array(g), np.array(dg), np.array(d2)

    if bounds:
        which = np.repeat([0, 1], m)
        tt, okk = solve_tilt(f_both, np.concatenate([e, e]), 1e-4, 64.0, d.t_cap,
                             which=which)
        t, ok, tr = tt[:m], okk[:m], tt[m:]
        # the approximation's rows and the Berry-Esseen moment at the saddle points; only K
        # at the bound's tilts
        st = d.moments(t, abs3=True)
        ks, kr = st[:5], d.K(tr, 0)[0]
    else:
        t, ok = solve_tilt(f_both, e, 1e-4, 64.0, d.t_cap, which=np.zeros(m, int))
        ks = d.moments(t, abs3=False)
    ld, _, fb, cm1 = d.log_delta_at(t, e, method, ks)
    lup = d.log_rma(t, e, ks[0])  # replaced below by the optimal-tilt value
    llo = np.full(e.shape, -np.inf)
    if bounds:
        lup = d.log_rma(tr, e, kr)
        lclt, lerr = d.log_be(t, e, ks, st[5])
        mg = d.k_margin + REL_MARGIN
        lbe_up = np.logaddexp(lclt + mg, lerr)
        lup = np.minimum(lup, lbe_up)
        with np.errstate(invalid="ignore", divide="ignore"):
            llo = log_diff(lclt - mg, lerr)
    # beyond the tilt range the quadrature supports: only the certified bound remains
    ld = np.where(ok, ld, lup)
    out["log_delta"][live] = ld
    out["log_upper"][live] = lup if bounds else np.nan
    out["log_lower"][live] = llo
    out["t"][live] = t
    out["fallback"][live] = fb
    out["correction"][live] = cm1
    out["beyond"][live] = ~ok
    return out



def be_roots(elems: list[tuple], log_delta: float) -> list[float | None]:
    """Ends of the Berry-Esseen bracket of eps(delta) (Alghamdi et al., Theorem 5, which
    holds at every tilt): for each element ``(t, stats, k_margin, upper, start)`` the eps
    at which the bound on the curve at the tilt ``t`` (``stats``: the rows of
    :meth:`Direction.stats` there) meets ``delta``, on its safe side
    (:func:`~tightdp.curves.saddle.roots_decreasing`, started at ``start``); None where
    there is none (a lower end uninformative there; an upper end whose root lies below 0
    while the bound at 0 exceeds delta: a root below 0, a saddle point at a negative eps
    as for delta near 1, says nothing unless the bound at 0 is <= delta). Only closed
    forms are evaluated, in Python floats (:func:`be_end1`) unless a division by zero
    sends an evaluation to the arrays' form."""
    te = np.array([e[0] for e in elems])
    kse = np.array([e[1][:3] for e in elems]).T
    rhoe = np.array([e[1][5] for e in elems])
    kme = np.array([e[2] for e in elems])
    kinds = np.array([e[3] for e in elems])
    mge = kme + REL_MARGIN
    fixed = be_fixed(te, kse, rhoe)  # what the root search does not change
    cols = list(zip(*(a.tolist() for a in (te, kse[0], kse[1], *fixed, kme, mge, kinds)),
                    strict=True))

    def bracket(x: np.ndarray, sel: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
        """log of the bracket's upper (kinds True) or lower end at eps = x, with slopes,
        for the elements ``sel`` (all by default)."""
        if sel is None:
            try:
                vs = [be_end1(xj, *c[:6], km=c[6], mg=c[7], upper=c[8])
                      for xj, c in zip(x.tolist(), cols, strict=True)]
            except ZeroDivisionError:
                vs = None
            if vs is not None:
                return np.array([v[0] for v in vs]), np.array([v[1] for v in vs])
            t0, mg, ks_, rho_, km_, kd, fx = te, mge, kse, rhoe, kme, kinds, fixed
        else:
            t0, mg, ks_, rho_, km_, kd, fx = te[sel], mge[sel], kse[:, sel], rhoe[sel], \
                kme[sel], kinds[sel], None
        lclt, lerr, dl = log_berry_esseen(t0, x, ks_, rho_, km_, slope=True, fixed=fx)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            lup, dup = _be_upper(np, lclt, lerr, dl, t0, mg)
            llo, dlo = _be_lower(np, lclt, lerr, dl, t0, mg)
        return np.where(kd, lup, llo), np.where(kd, dup, dlo)

    # the lower ends only where informative at the start (else NaN)
    roots = roots_decreasing(bracket, log_delta, np.array([e[4] for e in elems]), te,
                             kinds).tolist()
    out: list[float | None] = []
    for j, (x, up) in enumerate(zip(roots, kinds.tolist(), strict=True)):
        if not math.isfinite(x):
            out.append(None)
        elif up and x < 0.0:
            at0 = bracket(np.array([0.0]), np.array([j]))[0][0]
            out.append(0.0 if at0 <= log_delta else None)
        else:
            out.append(x)
    return out
