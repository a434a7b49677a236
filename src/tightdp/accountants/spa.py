"""The saddle-point accountant (Alghamdi et al., *The Saddle-Point Accountant for Differential
Privacy*): constant time in the number of compositions, accurate down to tiny delta.

Notation (rebuilt from the paper's definitions; the equation numbers are the paper's). For the
composed privacy loss ``Y`` (under P) with CGF ``K(t) = log E[e^{tY}]`` (eq. (23)); the CGF of a
composition is the sum of the CGFs (eq. (72)), so ``k`` identical steps cost one evaluation:

* privacy curve ``delta(eps) = E[(1 - e^{eps - Y})_+]``; with the tilted loss ``Y_t``
  (law ``e^{ty - K(t)} P_Y(dy)``, Definition 7) and
  ``theta_t(x) = (1 - e^{-x})_+ e^{-t x}`` (eq. (38)):
  ``delta(eps) = e^{K(t) - t eps} E[theta_t(Y_t - eps)]`` for every ``t > 0`` (eqs. (34), (39));
* contour integral (eq. (28)): ``delta(eps) = (1/2 pi i) int_{t - i inf}^{t + i inf}
  e^{phi(z)} dz`` with ``phi(z) = K(z) - z eps - log z - log(1 + z)`` (eq. (49));
* saddle point (eq. (50)): the unique ``t > 0`` with ``K'(t) = eps + 1/t + 1/(1 + t)``;
* SP-MSD0 (eqs. (7), (60)): ``e^{phi(t)} / sqrt(2 pi phi''(t))``;
* SP-MSD1 (eq. (61)): SP-MSD0 times
  ``1 + phi''''/(8 phi''^2) - 5 phi'''^2/(24 phi''^3)`` (the O(1/k) steepest-descent terms of
  eq. (59)), with ``phi'' = K'' + 1/t^2 + 1/(1+t)^2``, ``phi''' = K''' - 2/t^3 - 2/(1+t)^3``,
  ``phi'''' = K'''' + 6/t^4 + 6/(1+t)^4``;
* SP-CLT (eqs. (8), (66)): ``e^{K(t) - t eps} E[theta_t(Z)]`` with ``Z ~ N(K'(t) - eps, K''(t))``,
  in closed form (Proposition 6): with ``m = K'(t) - eps``, ``s = sqrt(K''(t))``,
  ``E[theta_t(Z)] = e^{-m^2/(2 s^2)} (erfcx(a_1/sqrt 2) - erfcx(a_2/sqrt 2)) / 2``,
  ``a_1 = t s - m/s``, ``a_2 = a_1 + s`` (``erfcx`` the scaled complementary error function);
* refined moments accountant (eqs. (42)-(44)): ``theta_t <= t^t/(1+t)^{1+t}``, hence the
  certified bound ``delta(eps) <= inf_t e^{K(t) - t eps} t^t / (1+t)^{1+t}``;
* Berry-Esseen (Theorem 5, eqs. (74)-(76)): ``theta_t`` rises from 0 to its maximum
  ``M_t = t^t/(1+t)^{1+t}`` and falls back to 0, so its total variation is ``2 M_t`` and
  ``|E theta_t(Y_t - eps) - E theta_t(Z)| <= 2 M_t sup_x |F(x) - Phi(x)|
  <= 2 M_t C sum_j E|Y_{j,t} - K_j'(t)|^3 / K''(t)^{3/2}`` with the Berry-Esseen constant for
  non-identically distributed summands ``C = 0.5600`` (Shevtsova 2010). This brackets the true
  ``delta(eps)`` around SP-CLT; it is informative when the error is below the SP-CLT value.

Everything is computed with ``log delta``, so values down to 1e-30 and below keep their
relative accuracy. Under add/remove adjacency both directions are composed and the curve is
their maximum.

The approximations carry no guarantee: results set ``certified=False`` and report the
approximation as ``epsilon``/``delta``, with the certified refined-moments (and, where
informative, Berry-Esseen) bounds in ``upper``/``lower``.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from .. import _validate as v
from ..curves.saddle import (
    LABELS,
    METHODS,
    UNRELIABLE,
    grid_parts,
    saddle_terms1,
    solve_tilt,
    tilt_grids,
)
from ..losses.cgf import cgf_supported
from ..mechanisms.base import Mechanism
from ..results import DeltaResult, EpsilonResult
from .base import Accountant
from .spa_direction import Direction, be_roots, delta_dir

__all__ = ["SaddlePointAccountant", "METHODS", "UNRELIABLE"]

#: below this delta the FFT-based accountants lose relative precision
SMALL_DELTA = 1e-12


#: without ``bounds``, a direction whose composed loss is bounded by at most this is solved
#: after the other, and skipped if it cannot set the answer
#: (:meth:`SaddlePointAccountant._eps_dirs_pruned`; with ``bounds`` every such direction is):
#: an eps(delta) below 1 is where the skip can fail
_TRY_SKIP = 1.0

#: a direction's delta(eps) whose certified bound is below this fraction of the other's
#: approximation is not solved there (:meth:`SaddlePointAccountant._delta_dirs`)
_NEGLIGIBLE = 1e-3

#: eps(delta): a direction that cannot set the answer's approximation or upper bound is not
#: solved when the lower bound it could add is at most this fraction of the answer's eps
#: (or at most the other direction's lower bound)
_WEAK_LOWER = 0.25

class SaddlePointAccountant(Accountant):
    """The saddle-point accountant (Alghamdi et al.), constant time in the number of steps.

    Parameters
    ----------
    method : "msd1" (default; eq. (61)), "msd0" (eqs. (7)/(60)) or "clt" (eqs. (8)/(66)).
    bounds : also compute the certified refined-moments bound (eq. (43)) and the Berry-Esseen
        bracket (Theorem 5) reported in ``upper``/``lower`` (default True).
    neighboring : the neighbouring relation of the composition, ``"add_or_remove_one"``
        (default), ``"replace_one"`` or ``"replace_special"`` (see
        :class:`~tightdp.accountants.base.Accountant`).

    Every mechanism must have a finite CGF for t > 0: approximate-DP mechanisms with
    ``delta > 0`` (a P-mass at loss +inf) are refused with ValueError.

    ``epsilon``/``delta`` of the results are the saddle-point *approximation* (not a bound:
    ``certified=False``); ``upper`` is the certified refined moments bound (or the
    Berry-Esseen upper bound when tighter), ``lower`` the Berry-Esseen lower bound where that
    is informative, else None.

    Examples
    --------
    >>> from tightdp import SaddlePointAccountant, PoissonSubsampled, Gaussian
    >>> acc = SaddlePointAccountant().compose(PoissonSubsampled(Gaussian(1.0), 0.01), 10_000)
    >>> round(acc.epsilon(1e-5).epsilon, 2)
    6.19
    """

    name = "spa"
    #: the options ``repr`` shows
    REPR_OPTIONS = ("method",)

    def __init__(self, method: str = "msd1", *, bounds: bool = True,
                 neighboring="add_or_remove_one", max_memory=None, max_seconds=None):
        super().__init__(neighboring=neighboring, max_memory=max_memory,
                         max_seconds=max_seconds)
        if method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
        self.method = method
        self.bounds = bool(bounds)

    # --- bookkeeping -------------------------------------------------------------------------
    def supports(self, mechanism: Mechanism) -> None:
        for loss in mechanism.privacy_losses():
            reason = cgf_supported(loss)
            if reason is not None:
                raise ValueError(f"SaddlePointAccountant cannot account for {mechanism!r}: "
                                 f"{reason}; use PLDAccountant")

    def _dirs(self) -> list[Direction]:
        if "dirs" not in self._cache:
            names = ["remove", "add"]
            sym = all(m.symmetric for m, _ in self.terms)
            idx = [0] if sym else [0, 1]
            try:
                self._cache["dirs"] = [
                    Direction([(m.privacy_losses()[i], c) for m, c in self.terms],
                               "both (symmetric)" if sym else names[i]) for i in idx]
            except ValueError as e:
                raise ValueError(f"SaddlePointAccountant: {e}; use PLDAccountant") from None
        deadline = self.budget.deadline()
        for d in self._cache["dirs"]:
            d.deadline = deadline
        return self._cache["dirs"]

    # --- delta(eps) --------------------------------------------------------------------------
    def _delta_dirs(self, eps: np.ndarray) -> tuple[list[dict], int]:
        """:func:`~tightdp.accountants.spa_direction.delta_dir` of every direction, and the
        number of eps at which a direction was not solved because it cannot matter.

        With two directions, the one of the larger supremum (``a``) is solved first. At each
        eps, the other (``b``) has the certified refined-moments bound (eq. (43), valid at
        every tilt) at the tilts of the first bracketing grid (up to 64: cheap quadrature
        node sets, whose CGF values its own solve reuses), minimized over them: ``U_b``.
        Where ``U_b`` is below :data:`_NEGLIGIBLE` times ``a``'s approximation and below its
        upper bound, ``b`` is not solved there: the answer's approximation and upper bound
        (maxima over the directions) are ``a``'s whatever ``b``'s, which lie below ``U_b``,
        and the lower bound loses at most ``U_b`` (below a thousandth of the answer). Its
        log upper bound is ``log U_b`` there. (A subsampled mechanism's add direction at
        large eps: its saddle points lie at tilts of thousands, the costliest node sets.)"""
        dirs = self._dirs()
        if len(dirs) != 2:
            return [delta_dir(d, eps, self.method, bounds=self.bounds) for d in dirs], 0
        ia = 0 if dirs[0].sup >= dirs[1].sup else 1
        a, b = dirs[ia], dirs[1 - ia]
        ra = delta_dir(a, eps, self.method, bounds=self.bounds)
        # (the approximation capped at delta = 1, as the answer's is)
        ref = np.minimum(ra["log_delta"], 0.0) + math.log(_NEGLIGIBLE)
        if self.bounds:
            ref = np.minimum(ref, ra["log_upper"])
        skip = np.zeros(eps.shape, dtype=bool)
        cand = (eps < b.sup) & np.isfinite(ref)
        if cand.any():
            # the solve's first grid, piece by piece as its scan evaluates it (the same
            # arrays and rows, memoized: the scan reads them)
            grid = tilt_grids(1e-4, 64.0, b.t_cap, 65)[0]
            k0 = np.concatenate([b.K(p, 3)[0] for p in grid_parts(grid)])
            ec = eps[cand]
            with np.errstate(invalid="ignore", over="ignore"):
                lu = np.min(b.log_rma(grid[:, None], ec[None, :], k0[:, None]), axis=0)
            skip[cand] = lu < ref[cand]
            u_b = np.full(eps.shape, -np.inf)
            u_b[cand] = lu
        rb = delta_dir(b, eps, self.method, bounds=self.bounds, skip=skip)
        if skip.any():
            rb["log_upper"][skip] = u_b[skip] if self.bounds else np.nan
        return ([ra, rb] if ia == 0 else [rb, ra]), int(skip.sum())

    def _delta_of(self, eps) -> DeltaResult:
        """The saddle-point approximation of ``delta(eps)`` (one or many eps), with the
        certified refined-moments / Berry-Esseen bounds in ``upper`` and ``lower``."""
        eps_arr = v.eps_values("eps", eps)
        t0 = time.perf_counter()
        scalar = eps_arr.ndim == 0
        e = np.atleast_1d(eps_arr).astype(float).ravel()
        if not self.terms:
            z = np.zeros_like(e)
            return DeltaResult(z[0] if scalar else z, eps, z[0] if scalar else z,
                               z[0] if scalar else z, self.name, certified=False,
                               note="no mechanism")
        res, n_skip = self._delta_dirs(e)
        ld = np.max([r["log_delta"] for r in res], axis=0)
        lu = np.max([r["log_upper"] for r in res], axis=0)
        ll = np.max([r["log_lower"] for r in res], axis=0)
        # a log-bound above 0 (far out in long compositions) is the trivial delta <= 1
        est = np.exp(np.minimum(ld, 0.0))
        up = np.exp(np.minimum(lu, 0.0)) if self.bounds else None
        lo = np.exp(ll) if self.bounds else None
        informative = bool(self.bounds and np.all(ll > -np.inf))
        note = self._note(res, informative)
        if n_skip:
            note += (f"; at {n_skip} eps one direction was not solved: its certified bound "
                     f"there is below {_NEGLIGIBLE:g} of the other's delta (no lower bound "
                     "from it)")

        def plain(x):  # JSON-friendly: a float for a scalar query, else a list
            return float(x[0]) if scalar else x.reshape(eps_arr.shape).tolist()

        details = {"method": self.method, "label": LABELS[self.method],
                   "directions": [d.name for d in self._dirs()],
                   "saddle_point": [plain(r["t"]) for r in res],
                   "log_delta": plain(ld),
                   # natural logs of the bounds, meaningful where delta underflows to 0
                   "log_upper": plain(lu) if self.bounds else None,
                   "log_lower": plain(ll) if self.bounds else None,
                   "regime": self._regime(float(np.min(est)), self._worst(res)),
                   "msd1_terms": [plain(r["correction"]) for r in res],
                   "seconds": time.perf_counter() - t0}
        if self.bounds and not informative:
            details["berry_esseen"] = ("uninformative at some eps (its error term exceeds the "
                                       "SP-CLT value there); lower is 0 at those eps")
        if scalar:
            return DeltaResult(float(est[0]), float(e[0]),
                               float(lo[0]) if lo is not None else None,
                               float(up[0]) if up is not None else None,
                               self.name, certified=False, estimate=float(est[0]), note=note,
                               details=details)
        shp = eps_arr.shape
        return DeltaResult(est.reshape(shp), eps_arr, None if lo is None else lo.reshape(shp),
                           None if up is None else up.reshape(shp), self.name,
                           certified=False,
                           estimate=est.reshape(shp), note=note, details=details)

    # --- eps(delta) --------------------------------------------------------------------------
    def _eps_dirs_pruned(self, dirs: list[Direction], log_delta: float
                         ) -> tuple[list[dict], list[tuple[Direction, float, str]]]:
        """:meth:`_eps_dirs` of the directions that can set the answer, and those that
        provably cannot (not solved), each with a certified upper bound on its eps and why.

        With two directions of different suprema (the add direction of a subsampled
        mechanism is bounded by ``k log(1/(1 - q))``), the one of the larger (``a``) is solved
        first; the other (``b``) is not solved when its true eps is shown to be at most
        ``e* = min(eps_a, upper_a)``, the first's approximation and upper bound, by either of:

        * ``sup_b <= e*``: a composed loss bounded by ``sup`` has ``delta(eps) = 0`` for
          ``eps >= sup`` (10 DP-SGD steps at q = 0.01: the add direction's ``sup`` is 0.1);
        * (with ``bounds``) the refined moments bound (eq. (43), valid at every tilt) of
          ``b``'s eps, at the tilts of its first bracketing grid
          (:meth:`Direction.rma_eps_on_grid`), is at most
          ``cut = min(e*, max(lower_a, e*/4))`` (:data:`_WEAK_LOWER`): a small sampling rate
          over many steps, where the add direction's saddle point lies at tilts of tens to
          thousands, the costliest quadrature node sets.

        The answer's approximation and upper bound (maxima over the directions) are then
        ``a``'s: ``b``'s certified upper bound (at most that of eq. (43) at any tilt) is at
        most ``e*``, and so is its approximation unless that exceeded ``b``'s own certified
        bound. ``b``'s lower bound is not computed: the answer's is ``a``'s (None when that
        is uninformative); the one given up is below ``b``'s true eps, so at most the bound
        shown: at most ``a``'s lower bound, or a quarter of the answer. Without ``bounds``
        only the first test is made, and only where ``sup_b`` is at most :data:`_TRY_SKIP`.
        Solving the two apart costs a little more than together when ``b`` is needed
        after all; a warm query after one that needed both solves them together."""
        if len(dirs) == 2:
            a, b = (dirs[0], dirs[1]) if dirs[0].sup >= dirs[1].sup else (dirs[1], dirs[0])
            if b.sup < a.sup and (self.bounds or b.sup <= _TRY_SKIP):
                # a warm query whose last eps needed both solves them together (faster), and
                # drops b's all the same where it cannot set the answer: which directions an
                # answer reports does not depend on the queries before it
                both = self._cache.get("eps_both_needed") is True
                if both:
                    rs = self._eps_dirs(dirs, log_delta)
                    ra, rb = (rs[0], rs[1]) if a is dirs[0] else (rs[1], rs[0])
                else:
                    ra = self._eps_dirs([a], log_delta)[0]
                skip = self._cannot_set(ra, b, log_delta)
                if skip is not None:
                    return [ra], [skip]
                if not both:
                    rb = self._eps_dirs([b], log_delta, ra["upper"] if self.bounds else None)[0]
                    self._cache["eps_both_needed"] = True
                return ([ra, rb] if a is dirs[0] else [rb, ra]), []
        return self._eps_dirs(dirs, log_delta), []

    def _cannot_set(self, ra: dict, b: Direction, log_delta: float
                    ) -> tuple[Direction, float, str] | None:
        """``(b, certified upper bound of b's eps, why)`` when direction ``b`` provably
        cannot set the answer given the other's result ``ra`` and would add no lower bound
        worth its solve (see :meth:`_eps_dirs_pruned`), else None."""
        e_star = min(ra["eps"], ra["upper"]) if self.bounds else ra["eps"]
        if b.sup <= e_star:
            return b, b.sup, f"its composed loss is at most {b.sup:.6g}"
        if not self.bounds:
            return None
        low = ra["lower"] if ra["lower"] is not None else 0.0
        cut = min(e_star, max(low, _WEAK_LOWER * e_star))
        ub = b.rma_eps_on_grid(log_delta, cut)
        if ub <= cut:
            return b, ub, f"its certified refined-moments bound (eq. (43)) is {ub:.6g}"
        return None

    def _eps_dirs(self, dirs: list[Direction], log_delta: float, top: float | None = None
                  ) -> list[dict]:
        """eps(delta) of each direction: the approximation's saddle point and the refined
        moments bound's optimal tilt of every direction in one solve (each step evaluates
        each direction's CGF once, at its own points), then the Berry-Esseen bracket's ends
        of every direction in one root search. ``top``: an upper bound of another direction
        already solved (the Berry-Esseen retry below runs only for the directions that may
        set the answer's upper bound)."""
        if len({d.t_cap for d in dirs}) > 1:  # different tilt ranges: one at a time
            return [r for d in dirs for r in self._eps_dirs([d], log_delta, top)]
        method, nd = self.method, len(dirs)
        per = 2 if self.bounds else 1

        def f_all(t: np.ndarray, need: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            g, dg = np.full((2 * nd, t.size), np.nan), np.full((2 * nd, t.size), np.nan)
            for i, d in enumerate(dirs):  # rows 2i (approximation), 2i + 1 (bound)
                cols = need[2 * i:2 * i + 2].any(axis=0)
                if cols.all():
                    g[2 * i:2 * i + 2], dg[2 * i:2 * i + 2] = d.eps_equations(t, self.method)
                elif cols.any():
                    g[2 * i:2 * i + 2, cols], dg[2 * i:2 * i + 2, cols] = \
                        d.eps_equations(t[cols], self.method)
            return g, dg

        which = (2 * np.arange(nd)[:, None] + np.arange(per)[None, :]).ravel()
        # SP-MSD0/1's slopes are exact (with K^(5)); SP-CLT's is approximate: secant slopes
        # after its first Newton step
        tt, oks = solve_tilt(f_all, np.full(which.size, -log_delta), 1e-4, 64.0,
                             dirs[0].t_cap, which=which,
                             secant=(which % 2 == 0) & (method == "clt"), refine=32,
                             memo=self._cache.setdefault(
                                 ("scan", method, tuple(id(d) for d in dirs)), {}))
        outs: list[dict[str, Any]] = []
        sts = []
        for i, d in enumerate(dirs):
            st = d.stats(tt[per * i:per * (i + 1)])
            sts.append(st)
            t, ok, ks = tt[per * i:per * i + 1], oks[per * i:per * i + 1], st[:5, :1]
            eps_t = d.eps_of_t(t, ks)
            try:  # saddle_log_delta's diagnostics at the saddle point
                k2, k3, k4 = ks[2:5, 0].tolist()
                fb, cm1 = saddle_terms1(k2, k3, k4, float(t[0]), method)
            except ZeroDivisionError:
                _, _, fbs, cms = d.log_delta_at(t, None, method, ks)
                fb, cm1 = bool(fbs[0]), float(cms[0])
            outs.append({"eps": min(float(eps_t[0]), d.sup), "t": float(t[0]),
                         "fallback": fb, "correction": cm1,
                         "beyond": not bool(ok[0]), "upper": None, "lower": None,
                         "name": d.name, "eps_t": float(eps_t[0])})
        if not self.bounds:
            return outs

        # Berry-Esseen bracket (Theorem 5 holds for every tilt): keep each saddle-point tilt
        # fixed and solve the bounds, decreasing in eps, for eps; only closed forms are
        # evaluated (no further CGF quadrature). Elements: (upper, lower) of each direction.
        roots = be_roots([(o["t"], sts[i][:, 0], d.k_margin, up, o["eps_t"])
                          for i, (d, o) in enumerate(zip(dirs, outs, strict=True))
                          for up in (True, False)], log_delta)
        retry = []
        for i, (d, out) in enumerate(zip(dirs, outs, strict=True)):
            tr, k0 = tt[per * i + 1:per * i + 2], sts[i][0, 1:]
            upper = float(d.rma_eps(tr, k0, log_delta)[0])
            x_up = roots[2 * i]
            if x_up is None or not x_up < upper:
                retry.append(i)
            else:
                upper = x_up
            x_lo = roots[2 * i + 1]
            if x_lo is not None:
                out["lower"] = max(x_lo, 0.0)
            out["upper"] = upper
        self._upper_below_saddle(dirs, outs, retry, log_delta, top)
        for d, out in zip(dirs, outs, strict=True):
            # delta(eps) = 0 at and above the essential supremum of the composed loss
            out["upper"] = min(max(out["upper"], 0.0), d.sup)
        return outs

    @staticmethod
    def _upper_below_saddle(dirs: list[Direction], outs: list[dict], retry: list[int],
                            log_delta: float, top: float | None) -> None:
        """Lower the upper bounds ``outs[i]["upper"]`` of the directions ``retry`` (whose
        Berry-Esseen bracket at the saddle point did not improve on the refined-moments
        bound) by the bracket's upper end at tilts below the saddle point (Theorem 5 holds
        at every tilt), in place; ``top`` an upper bound of another direction solved
        before."""
        # where the bracket at the saddle point does not improve on the refined-moments bound
        # (the tilted law far from Gaussian there, as with few effective compositions) and
        # this direction's upper bound is the answer's (the largest), the bracket's upper end
        # at tilts below it, about t 2^(-j/4), where the tilted law may be closer to Gaussian:
        # j = 1, 2, ... (at most 8) while each improves on the last. The tilts are taken on
        # the lattice 2^(i/16) (the point at or below t 2^(-j/4)): the queries at nearby
        # deltas then read their CGF statistics from the memo
        top = max([o["upper"] for o in outs] + ([] if top is None else [top]))
        retry = [i for i in retry if outs[i]["upper"] >= top]
        for j in range(1, 9):
            if not retry:
                break
            elems = []
            for i in retry:
                x = 2.0 ** (math.floor(16.0 * math.log2(outs[i]["t"]) - 4.0 * j) / 16.0)
                elems.append((x, dirs[i].stats(np.array([x]))[:, 0], dirs[i].k_margin, True,
                              outs[i]["upper"]))
            better = []
            for i, x in zip(retry, be_roots(elems, log_delta), strict=True):
                if x is not None and x < outs[i]["upper"]:
                    outs[i]["upper"] = x
                    better.append(i)
            retry = better

    def _epsilon_of(self, delta: float) -> EpsilonResult:
        """The saddle-point approximation of the smallest eps with ``delta(eps) <= delta``,
        with the certified refined-moments / Berry-Esseen bounds in ``upper``/``lower``."""
        delta = v.delta_value("delta", delta)
        t0 = time.perf_counter()
        if not self.terms:
            return EpsilonResult(0.0, delta, 0.0, 0.0, self.name, certified=True,
                                 estimate=0.0)
        ld = math.log(delta)
        res, skipped = self._eps_dirs_pruned(self._dirs(), ld)
        est = max(0.0, max(r["eps"] for r in res))
        upper = lower = None
        if self.bounds:
            upper = max(r["upper"] for r in res)
            lows = [r["lower"] for r in res if r["lower"] is not None]
            lower = max(lows) if lows else None
        note = self._note(res, lower is not None)
        for d, _ub, why in skipped:
            note += (f"; the {d.name} direction cannot set the answer ({why}, at most the "
                     "other's epsilon and upper bound) and was not solved (no lower bound "
                     "from it)")
        details: dict[str, Any]
        details = {"method": self.method, "label": LABELS[self.method],
                   "directions": {r["name"]: {"epsilon": r["eps"], "saddle_point": r["t"],
                                              "upper": r["upper"], "lower": r["lower"],
                                              "msd1_terms": r["correction"]}
                                  for r in res},
                   "regime": self._regime(delta, self._worst(res)),
                   "seconds": time.perf_counter() - t0}
        for d, ub, why in skipped:  # its eps is at most ub <= the answer's: not solved
            details["directions"][d.name] = {
                "epsilon": None, "saddle_point": None, "upper": ub, "lower": None,
                "msd1_terms": None,
                "not_solved": f"{why} <= the other direction's epsilon and upper bound: it "
                              "cannot set the answer"}
        if self.bounds and lower is None:
            details["berry_esseen"] = ("uninformative: its error term exceeds the SP-CLT "
                                       "value, no certified lower bound")
        return EpsilonResult(est, delta, lower, upper, self.name, certified=False, estimate=est,
                             note=note, details=details)

    # --- text --------------------------------------------------------------------------------
    def _note(self, res: list[dict], informative: bool) -> str:
        parts = [f"saddle-point approximation {LABELS[self.method]} (Alghamdi et al.); not a "
                 "certified bound"]
        if self.bounds:
            parts.append("upper = certified refined moments bound (eq. (43)) or Berry-Esseen "
                         "(Thm. 5) upper bound, whichever is smaller")
            parts.append("lower = Berry-Esseen lower bound" if informative else
                         "Berry-Esseen bound uninformative here: no certified lower bound")
        if any(np.any(r["fallback"]) for r in res):
            parts.append("SP-MSD1 correction factor was not positive at some point; SP-MSD0 "
                         "used there")
        if self._worst(res) > UNRELIABLE:
            parts.append("WARNING: the tilted privacy loss is far from Gaussian (few effective "
                         f"compositions, SP-MSD1 terms > {UNRELIABLE}): the approximation may be "
                         "far off; use PLDAccountant or the certified upper bound")
        if any(np.any(r["beyond"]) for r in res):
            parts.append("saddle point beyond the supported tilt range at some point; the "
                         "certified bound is reported there")
        return "; ".join(parts)

    @staticmethod
    def _worst(res: list[dict]) -> float:
        """Largest size of the SP-MSD1 terms among the directions that set the answer."""
        if "log_delta" in res[0]:  # delta(eps): the dominant direction at each eps
            ld = np.array([r["log_delta"] for r in res])
            c = np.array([r["correction"] for r in res])
            dom = np.argmax(ld, axis=0)
            vals = np.abs(np.take_along_axis(c, dom[None], axis=0))
            vals = vals[np.isfinite(vals)]
            return float(vals.max()) if vals.size else 0.0
        r = max(res, key=lambda x: x["eps"])
        return abs(r["correction"]) if math.isfinite(r["correction"]) else 0.0

    @staticmethod
    def _regime(delta: float, correction: float = 0.0) -> str:
        """Which regime the answer is in (said in the result's details)."""
        if correction > UNRELIABLE:
            parts = [f"few effective compositions (SP-MSD1 terms = {correction:.2g} > "
                     f"{UNRELIABLE}): saddle-point approximation unreliable"]
        else:
            parts = [f"saddle-point regime (SP-MSD1 terms = {correction:.2g})"]
        if delta < SMALL_DELTA:
            parts.append("small delta (< 1e-12): FFT/PLD accountants lose relative precision "
                         "here; the saddle-point approximation keeps it (log delta throughout)")
        else:
            parts.append("moderate delta")
        return "; ".join(parts)
