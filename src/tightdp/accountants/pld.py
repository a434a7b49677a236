"""The certified PLD accountant: the library's default.

Every mechanism's privacy loss is discretized once per grid step ``d`` into two discrete
pairs on the same grid (:func:`tightdp.pld.discretize.certified_pair`): connect-the-dots, a
dominating pair (upper bound), and lowered chords, a dominated pair (lower bound). Both are
composed by the one FFT engine (:mod:`tightdp.pld.compose`), whose truncation is accounted
for in the direction of each bound. Remove and add directions are composed separately and
the curve is their maximum: every direction gets an upper bound, and the lower bound is that
of the direction whose upper bound is largest (any direction's lower bound is one for the
maximum). A query first bounds each direction from its pilot (refined-moments bounds of its
coarse connect-the-dots laws, :mod:`.pld_terms`); a direction whose bound is below another's
upper (eps) or lower (delta) bound cannot raise the maximum there and is not composed.

The grid is chosen from an error model and then checked. Per step, connect-the-dots raises
the cumulant generating function ``K(t)`` of the loss by ``t (t + 1) d^2 / 12`` to leading
order, whatever the loss (each loss value is split between its two neighbouring grid points),
and the lowered chords lower it by at most about ``t (t + 1) d^2 / 6`` (less where their
tents are refined); at the saddle point ``t`` of the composed law at the answer a shift of
``K`` by ``k dK`` moves ``eps`` by about ``k dK / t``, so the bracket on eps is at most about
``k (t + 1) d^2 / 4`` wide, and the model takes ``k (t + 1) d^2 / MODEL_WIDTH`` (the relative
bracket on delta, fitted, ``k (t + 1) (t + 2) d^2 / MODEL_WIDTH``). A coarse
discretization gives the saddle point (saddle-point approximation, Alghamdi et al., eq. (60)),
the model gives ``d``, and the certified bracket decides: if it is wider than ``rtol`` the
step shrinks by the measured width, until it is that tight or the FFT would exceed
``max_points`` (then the tightest bracket found is returned with ``converged=False`` in its
details and a note).

For very small delta the composed law is exponentially tilted towards the answer before the
FFT (see :func:`tightdp.pld.compose.compose`), so that values such as 1e-15 are not buried
under floating-point noise of the transform.
"""

from __future__ import annotations

import contextlib
import functools
import math
import time
from typing import cast

import numpy as np

from .. import _validate as v
from .._defaults import DEFAULT_RTOL
from ..budget import BudgetExceeded, TimeExceeded
from ..curves.saddle import saddle_point_eps
from ..pld.compose import MAX_POINTS, ComposedPLD, compose, composed_inf_mass
from ..pld.families import build_lowers
from ..pld.mgf import MANY_PARTS, LogMgf
from ..results import DeltaResult, EpsilonResult, check_bracket
from .base import Accountant, Direction
from .limits import out_of_reach
from .pld_refine import (
    DELTA_FLOOR,
    MAX_TILTS,
    TILT_SPACING,
    EpsQuery,
    QueryStats,
    budget_floor,
    delta_cuts,
    eps_answer,
    quantile_tilts,
    refine,
    rounding_matters,
    tilt_many,
    tilted_within_budget,
    time_refusal,
)
from .pld_terms import (
    discretize_seconds,
    pilot_delta_upper,
    pilot_eps_upper,
    pilot_laws,
    term_pairs,
    term_ranges,
)

__all__ = ["PLDAccountant"]

#: below this delta the composition is tilted towards the answer
TILT_BELOW = 1e-9
#: a delta query's grid step is modelled on the directions whose Chernoff bound at the
#: largest eps asked precisely is within this log factor of the largest one's
GRID_SHARE = math.log(1e-3)
#: the bracket the error model aims at, as a fraction of the one asked for
AIM = 0.75
#: the error model's bracket is ``k (t + 1) d^2 / MODEL_WIDTH`` wide in eps (module
#: docstring): 4 for connect-the-dots plus plain lowered chords, more where the refined tents
#: of the lowered chords (:mod:`tightdp.pld.discretize`) remove most of the lower side's
#: error (measurements: docs/pld-constants.md)
MODEL_WIDTH = 7.5
#: the same in eps for many distinct terms, their step modelled on the directions that may
#: hold the maximum and their lowered chords refined on the larger tents only
#: (docs/pld-constants.md)
MODEL_WIDTH_MANY = 5.0
#: many terms: a delta query bounds a direction beside the likely largest first on a grid
#: this many times coarser (often enough to show it below the other's lower bound)
COARSE_BESIDE = 4.0
#: the most points the first composition may use before the measured bracket is known
FIRST_POINTS = 1 << 18
#: peak bytes per grid point of a discretization or an FFT composition, with room for the
#: interpreter and the libraries within the budget (docs/pld-constants.md)
BYTES_PER_POINT = 768


class PLDAccountant(Accountant):
    """Certified privacy-loss-distribution accountant.

    Parameters
    ----------
    rtol : relative width of the certified bracket to aim for (eps or delta).
    max_points : the largest FFT it may use; beyond it the tightest bracket is reported.
    neighboring : the neighbouring relation of the composition, ``"add_or_remove_one"``
        (default), ``"replace_one"`` or ``"replace_special"`` (see
        :class:`~tightdp.accountants.base.Accountant`).

    Examples
    --------
    >>> from tightdp import PLDAccountant, PoissonSubsampled, Gaussian
    >>> acc = PLDAccountant().compose(PoissonSubsampled(Gaussian(1.0), 0.01), 10_000)
    >>> r = acc.epsilon(1e-5)
    >>> r.lower <= 6.1877 <= r.upper
    True
    """

    name = "pld"
    #: the options ``repr`` shows
    REPR_OPTIONS = ("rtol",)

    def __init__(self, rtol: float = DEFAULT_RTOL, *, max_points: int = MAX_POINTS,
                 neighboring="add_or_remove_one", max_memory=None, max_seconds=None):
        super().__init__(neighboring=neighboring, max_memory=max_memory,
                         max_seconds=max_seconds)
        self.rtol = v.positive("rtol", rtol)
        self.max_points = v.count("max_points", max_points, minimum=64)

    def _ordered(self, direction: Direction) -> list:
        """(loss, count) in a canonical order, so that the same multiset of mechanisms gives
        bit-identical results however it was composed."""
        return [(mech.privacy_losses()[direction], k)
                for mech, k in sorted(self.terms, key=lambda t: repr(t[0]))]

    def _ranges(self, direction: Direction, log_tail: float) -> list[tuple[float, float]]:
        """The coarse loss range of every term of ``direction`` (:func:`term_ranges`)."""
        return term_ranges(self._cache, [loss for loss, _ in self._ordered(direction)],
                           log_tail)

    def _laws(self, d: float, direction: Direction, log_tail: float, *, upper: bool = True
              ) -> list:
        """Dominating (``upper``) or dominated discrete laws of every term, as (law, count),
        on the grid of step ``d``, over the range outside of which each loss's tails hold at
        most ``e^log_tail`` (the discretizers account for what lies beyond: see
        :mod:`tightdp.pld.discretize`). The dominated ones are built only when asked (a
        query needs those of one direction)."""
        key = ("laws", d, direction, log_tail)
        if key not in self._cache:
            limit = self._max_grid_points()
            terms = self._ordered(direction)
            ranges = self._ranges(direction, log_tail)
            for lo, hi in ranges:
                if (hi - lo) / d + 4 > limit:  # checked before anything is allocated
                    raise BudgetExceeded(
                        f"rtol: a grid step of {d:.3g} over the loss range [{lo:.4g}, {hi:.4g}] "
                        f"needs more than {limit} points (max_memory="
                        f"{self.budget.max_memory:.3g} bytes); raise rtol or max_memory")
            deadline, est = self._cache.get("deadline"), discretize_seconds(ranges, d)
            if deadline is not None and est > deadline.seconds_left():
                raise time_refusal(deadline, d, f"discretizing {len(terms)} losses: {est:.3g} s")
            made = term_pairs([loss for loss, _ in terms], d, ranges)
            self._cache[key] = [(up, lower, k) for (up, lower), (_, k) in zip(made, terms,
                                                                              strict=True)]
        pairs = self._cache[key]
        if upper:
            return [(up, k) for up, _, k in pairs]
        return list(zip(build_lowers([lower for _, lower, _ in pairs]),
                        [k for _, _, k in pairs], strict=True))

    def _composed(self, d: float, direction: Direction, log_tail: float, window_tail: float,
                  *, upper: bool, lam: float = 0.0) -> ComposedPLD:
        """The laws on the grid ``d`` composed (tilted by ``lam``; long double if the query
        asked), in the query's time (``cache["deadline"]``): a tilted or extended one (it
        only tightens a bound) if it should end within half of ``max_seconds``, an
        untilted one within all of it (an extended one over it is composed in double)."""
        extended = bool(self._cache.get("extended"))
        key = ("comp", d, upper, direction, log_tail, window_tail, lam, extended)
        if key in self._cache:
            return self._cache[key]
        deadline = self._cache.get("deadline")
        laws = self._laws(d, direction, log_tail, upper=upper)
        try:
            c = compose(laws, lam=lam,
                        max_points=self._max_grid_points(), log_tail=window_tail,
                        extended=extended, seconds=math.inf if deadline is None else
                        deadline.seconds_left(0.5 if lam or extended else 1.0))
        except TimeExceeded as err:
            if extended and lam == 0.0:  # the double composition's bound is certified too
                self._cache["extended"] = False
                try:
                    return self._composed(d, direction, log_tail, window_tail, upper=upper)
                finally:
                    self._cache["extended"] = True
            raise time_refusal(deadline, d, str(err)) from None
        except BudgetExceeded as err:
            # the engine's refusal states the size before its advice; the advice given here
            # names the options that set the size, once
            size = str(err).split("; ")[0]
            raise BudgetExceeded(f"rtol: {size} (max_memory={self.budget.max_memory:.3g} "
                                 "bytes); raise rtol or max_memory") from None
        if lam == 0.0:  # tilted compositions serve one query each: not kept
            self._cache[key] = c
        return c

    def _mgf(self, d: float, direction: Direction, log_tail: float, *, upper: bool
             ) -> LogMgf:
        key = ("mgf", d, upper, direction, log_tail)
        if key not in self._cache:
            self._cache[key] = LogMgf(self._laws(d, direction, log_tail, upper=upper))
        return self._cache[key]

    def _pilot(self, direction: Direction, log_tail: float) -> LogMgf:
        """Log-MGF of the composition from coarse connect-the-dots laws (each loss on
        ``PILOT_BINS`` bins of its own range): only used to choose the grid step."""
        key = ("pilot", direction, log_tail)
        if key not in self._cache:
            terms = self._ordered(direction)
            laws = pilot_laws([loss for loss, _ in terms], self._ranges(direction, log_tail))
            parts = [(law, k) for law, (_, k) in zip(laws, terms, strict=True)]
            self._cache[key] = LogMgf(parts)
            self._cache[("pilot_inf", direction, log_tail)] = composed_inf_mass(parts)
        return self._cache[key]

    def _saddle(self, mgf: LogMgf, log_delta: float) -> tuple[float, float]:
        """:func:`~tightdp.curves.saddle.saddle_point_eps` of a pilot, remembered."""
        key = ("saddle", id(mgf), log_delta)
        if key not in self._cache:
            self._cache[key] = (saddle_point_eps(mgf.searcher(), log_delta), mgf)
        return self._cache[key][0]

    def _pilot_eps_upper(self, direction: Direction, log_tail: float, delta: float) -> float:
        """A certified upper bound on eps(delta) of one direction from its pilot alone (no
        fine grid), ``inf`` if it has none: the refined-moments bound of its composed
        connect-the-dots pilot laws, which dominate its pair (:func:`pilot_eps_upper`)."""
        mgf = self._pilot(direction, log_tail)
        room = delta - self._cache[("pilot_inf", direction, log_tail)]
        return pilot_eps_upper(mgf, self._saddle(mgf, math.log(delta))[1], room)

    def _grid_step(self, direction_mgfs: list[LogMgf], eps: float | None, log_delta: float,
                   spans: list[float], window_tail: float) -> float:
        """Grid step from the error model (module docstring), capped so that no loss has
        fewer than 16 grid points, and floored so that the first composition has at most
        ``FIRST_POINTS`` points: where the model asks for more (its saddle point is far in
        the tails, where few steps carry the answer and it overstates the error), the
        measured bracket decides."""
        k_tot = max(self.total_count, 1)
        width_const = MODEL_WIDTH if len(self.terms) < MANY_PARTS else MODEL_WIDTH_MANY
        # a loss whose range is tiny (a near point mass) is represented exactly enough by two
        # grid points: the widest one sets the coarsest useful step
        cap = max(max(spans) / 16, 1e-12)
        best, floor = math.inf, budget_floor(direction_mgfs, spans, window_tail,
                                                self._max_grid_points())
        for mgf in direction_mgfs:
            if eps is None:  # epsilon query: eps and t from the saddle point at delta
                e, t = self._saddle(mgf, log_delta)
                if not (math.isfinite(e) and math.isfinite(t)):
                    continue
                width = self.rtol * max(e, 1e-3)
                d = math.sqrt(AIM * width * width_const / (k_tot * (t + 1.0)))
            else:  # delta query at eps: relative width of delta (the tilt of the Q-tail,
                # t + 1, rather than t: it fits the widths and stays right where t -> 0)
                t = mgf.solve_slope(eps)
                d = math.sqrt(AIM * self.rtol * MODEL_WIDTH / (k_tot * (t + 1.0) * (t + 2.0)))
            best = min(best, d)
            span = mgf.quantile(window_tail, +1)[0] - mgf.quantile(window_tail, -1)[0]
            floor = max(floor, span / FIRST_POINTS)
        if not math.isfinite(best):
            best = cap / 4
        return max(min(max(best, floor), cap), floor)

    def _max_grid_points(self) -> int:
        """The most grid points one discretization or composition may have: ``max_points``
        and what the memory budget holds at ``BYTES_PER_POINT``."""
        return min(self.max_points, self.budget.max_items(BYTES_PER_POINT))

    def _spans(self, direction: Direction, log_tail: float) -> list[float]:
        return [max(hi - lo, 1e-12) for lo, hi in self._ranges(direction, log_tail)]

    def composed_laws(self, grid_step: float, *, log_tail: float, window_tail: float
                      ) -> list[tuple[ComposedPLD, ComposedPLD]]:
        """Per direction (remove; add unless every mechanism is symmetric) the untilted
        compositions ``(upper, lower)`` of the dominating and dominated laws on the grid
        ``grid_step`` (those of the eps and delta queries; bracketed mechanisms: the upper
        side's and the lower side's), each loss cut at ``e^log_tail``, the window at
        ``e^window_tail``; ValueError beyond the doubles, BudgetExceeded over the budget."""
        if out_of_reach(self.terms) is not None:
            raise ValueError("noise_multiplier: the composition is beyond floating point "
                             f"({out_of_reach(self.terms)}); no discretized curve exists")
        sides = self._bracket_sides()
        ups, los = (self, self) if sides is None else cast(tuple[PLDAccountant, ...], sides[:2])
        return [(ups._composed(grid_step, r, log_tail, window_tail, upper=True),
                 los._composed(grid_step, r, log_tail, window_tail, upper=False))
                for r in (self._directions() if sides is None else list(Direction))]

    def _eps_at(self, d: float, direction: Direction, delta: float, log_tail: float,
                window_tail: float, *, upper: bool, stats: QueryStats) -> float:
        """The bound on eps(delta) of :meth:`_eps_once`; if the FFT's rounding charge was a
        noticeable part of it, again with extended-precision transforms, keeping the better
        of the two (both are bounds)."""
        probe: list = []
        e = self._eps_once(d, direction, delta, log_tail, window_tail, upper=upper,
                           stats=stats, probe=probe)
        # the composition that gave the bound decides (an untilted one tried beside a tilt
        # is swamped by rounding at tiny delta, and need not be)
        if any(rounding_matters(self._cache, c, x, delta, self.rtol) for c, x in probe
               if x == e and math.isfinite(x)):
            e2 = self._eps_once(d, direction, delta, log_tail, window_tail, upper=upper,
                                stats=stats, probe=[])
            e = min(e, e2) if upper else max(e, e2)
        return e

    def _eps_once(self, d: float, direction: Direction, delta: float, log_tail: float,
                  window_tail: float, *, upper: bool, stats: QueryStats, probe: list
                  ) -> float:
        """The bound (``upper`` or lower) on eps(delta) of one direction on the grid ``d``;
        each composition used and the bound it gave are appended to ``probe``.

        Below ``TILT_BELOW`` the untilted composition cannot see delta (it is below the
        FFT's rounding), so the composition is tilted by ``e^{lam y}`` with ``K'(lam)`` at
        the saddle-point estimate of the answer (Alghamdi et al., eqs. (50), (60), on this
        grid's own CGF), and once more at the eps that tilt gives if it moved. Every tilt
        gives a valid bound (the engine charges the FFT's rounding as amplified by the
        untilt; :meth:`ComposedPLD._noise`); the best of them is kept."""
        c: ComposedPLD | None  # None where a tilt does not fit the budget
        if delta >= TILT_BELOW:
            c = self._composed(d, direction, log_tail, window_tail, upper=upper)
            stats.saw(c.probs.size)
            e = c.epsilon_bound(delta, upper=upper)
            probe.append((c, e))
            return e
        mgf = self._mgf(d, direction, log_tail, upper=upper)
        e0, _ = saddle_point_eps(mgf, math.log(delta))
        if not math.isfinite(e0):  # no saddle point: start from the untilted answer
            c = self._composed(d, direction, log_tail, window_tail, upper=upper)
            stats.saw(c.probs.size)
            e0 = c.epsilon_bound(delta, upper=upper)
            probe.append((c, e0))
            if not (math.isfinite(e0) and e0 > 0):
                return e0
        best = math.inf if upper else -math.inf
        tried: list[float] = []
        squeezed = False  # a tilt did not fit the budget on this grid
        target = e0
        for _ in range(3):
            lam = mgf.solve_slope(target)
            if lam <= 0 or any(abs(lam - x) <= 0.02 * max(x, 1e-3) for x in tried):
                break
            tried.append(lam)
            c, step = tilted_within_budget(
                self._cache, functools.partial(self._composed, direction=direction,
                                               log_tail=log_tail, window_tail=window_tail,
                                               upper=upper, lam=lam),
                (d, upper, direction, log_tail, window_tail), lam, stats=stats)
            squeezed = squeezed or step != d
            if c is None:  # the untilted bound below stands instead
                break
            e = c.epsilon_bound(delta, upper=upper)
            probe.append((c, e))
            stats.tilted(lam)
            stats.saw(c.probs.size)
            best = min(best, e) if upper else max(best, e)
            if not (math.isfinite(e) and e > 0):
                break
            target = e
        if tried and not squeezed:
            return best
        # the untilted composition: at or below the law's mean no tilt helps, and with
        # extended transforms it can beat a tilt pushed to a coarser grid by the budget
        c = self._composed(d, direction, log_tail, window_tail, upper=upper)
        e = c.epsilon_bound(delta, upper=upper)
        probe.append((c, e))
        return min(best, e) if upper else max(best, e)

    def _epsilon_of(self, delta: float) -> EpsilonResult:
        """Certified bracket on the smallest eps with delta(eps) <= ``delta``."""
        delta = v.delta_value("delta", delta)
        t0 = time.perf_counter()
        if not self.terms:
            return EpsilonResult(0.0, delta, 0.0, 0.0, self.name, certified=True)
        self._cache["extended"] = False  # each query decides (rounding_matters)
        self._cache["tilt_fails"] = {}
        k_tot = max(self.total_count, 1)
        # what the single-step cut and the window may leave out: a negligible part of delta
        log_tail = min(math.log(delta) + math.log(self.rtol * 1e-3) - math.log(k_tot), -25.0)
        window_tail = min(math.log(delta) + math.log(self.rtol) - math.log(1e3), -20.0)
        dirs = self._directions()
        deadline = self.budget.deadline()
        spans = [s for r in dirs for s in self._spans(r, log_tail)]
        pilots = [self._pilot(r, log_tail) for r in dirs]
        floor = budget_floor(pilots, spans, window_tail, self._max_grid_points())
        # each direction's pilot bound: one below another's PLD upper bound is not composed
        # (in DP-SGD the add direction often is: docs/pld-constants.md)
        q = EpsQuery(dirs, pre=({r: self._pilot_eps_upper(r, log_tail, delta) for r in dirs}
                                 if len(dirs) > 1 else {r: math.inf for r in dirs}))
        # many terms (each one's work grows with the points): the grid step is modelled on
        # the directions that may hold the maximum, whose bound is not below another's
        # saddle-point estimate (the measured bracket decides in any case); a few terms
        # take the finest step any direction asks for (cheap, tighter brackets)
        est = [self._saddle(p, math.log(delta))[0] for p in pilots]
        top = max([e for e in est if math.isfinite(e)], default=-math.inf)
        near = [p for r, p in zip(dirs, pilots, strict=True)
                if not q.pre[r] < top or len(self.terms) < MANY_PARTS]
        d = self._grid_step(near or pilots, None, math.log(delta), spans, window_tail)

        def measure(d: float) -> float | None:
            """Bound on the grid ``d``; None if within rtol, else the shrink asked for."""
            for r in q.worth_bounding():
                e = self._eps_at(d, r, delta, log_tail, window_tail, upper=True, stats=q.stats)
                q.bounded(r, e, d)
            e_lo = self._eps_at(d, q.top(), delta, log_tail, window_tail, upper=False,
                                stats=q.stats)
            if e_lo > q.lo:
                q.lo, q.lo_step = e_lo, d
            up = q.upper()
            width = up - q.lo
            if math.isinf(up) or width <= self.rtol * up or width <= 1e-12:
                return None
            return math.sqrt(AIM * self.rtol * up / width) if width > 0 else 0.5

        self._cache["deadline"] = deadline
        try:
            run = refine(measure, d, widest=max(spans), floor=floor, budget=self.budget,
                         deadline=deadline)
        finally:
            del self._cache["deadline"]
        return eps_answer(q, run, delta, terms=self.terms, budget=self.budget, rtol=self.rtol,
                          name=self.name, t0=t0, extended=bool(self._cache.get("extended")))

    def _delta_at(self, d: float, direction: Direction, eps: np.ndarray, log_tail: float,
                  window_tail: float, *, upper: bool, stats: QueryStats,
                  below: np.ndarray | None = None) -> np.ndarray:
        """The direction's bound on delta at ``eps`` on the grid ``d``, tilted towards the
        values the untilted composition cannot resolve to rtol; not at the eps where the
        untilted upper bound is already at most ``below`` (another direction's certified
        lower bound: there this direction cannot raise the maximum, whatever its value).
        Where the FFT's rounding is a noticeable part of a value, long double is used (the
        better bound kept): decided on the untilted composition for a few terms, after the
        tilts on the composition that gave each value for many (:func:`tilt_many`)."""
        many = len(self.terms) >= MANY_PARTS
        c = self._composed(d, direction, log_tail, window_tail, upper=upper)
        val = c.delta_bound(eps, upper=upper)
        ok = (val >= DELTA_FLOOR) & (eps > 0)
        if (not many and ok.any()
                and rounding_matters(self._cache, c, eps[ok], val[ok], self.rtol)):
            c = self._composed(d, direction, log_tail, window_tail, upper=upper)
            got = c.delta_bound(eps, upper=upper)
            val = np.minimum(val, got) if upper else np.maximum(val, got)
        stats.saw(c.probs.size)
        # the engine's own charges at these eps (rounding, window): the two bounds of the
        # same composed law differ by them only
        spread = np.abs(val - c.delta_bound(eps, upper=not upper))
        # tiny values, and values whose charges are not small beside rtol (the rounding charge
        # grows with the points above eps): recomputed from compositions tilted towards them.
        # Every tilt gives a valid bound at every eps (the engine charges the rounding as
        # amplified by the untilt), so each eps keeps the best of them.
        need = ((val < TILT_BELOW) | (spread > 0.1 * self.rtol * val)) & (eps > 0)
        if below is not None:
            need &= ~(val <= below)
        todo = np.nonzero(need)[0]
        tilted = functools.partial(self._tilted, d, direction, log_tail, upper=upper,
                                   stats=stats)
        if many:
            tilt_many(tilted, self._mgf(d, direction, log_tail, upper=upper).searcher(),
                      (eps, val, todo, below), c, upper=upper, rtol=self.rtol,
                      cache=self._cache)
        elif todo.size:
            for lam in quantile_tilts(self._mgf(d, direction, log_tail, upper=upper),
                                      eps[todo], MAX_TILTS, TILT_SPACING):
                if below is not None and not np.any(val[todo] > below[todo]):
                    break  # the rest cannot raise the maximum
                ct = tilted(lam)
                if ct is not None:
                    got = ct.delta_bound(eps[todo], upper=upper)
                    val[todo] = (np.minimum(val[todo], got) if upper
                                 else np.maximum(val[todo], got))
        return val

    def _upper_beside(self, d: float, direction: Direction, at: tuple, log_tail: float,
                      window_tail: float, stats: QueryStats) -> np.ndarray:
        """Upper bound on delta of a direction beside the likely largest one at ``at = (eps,
        lo, known)``: ``lo`` that one's certified lower bound, ``known`` this direction's
        certified upper bound so far (its pilot's, :func:`pilot_delta_upper`, then its
        grids'; lowered in place). Where ``known <= lo``, ``delta_r <= known <= lo <=
        delta_0``: the maximum is ``delta_0``, bracketed by that direction's bounds, so
        ``known`` stands and nothing is composed. Elsewhere the direction is bounded on the
        grid ``d`` (many terms: first on one ``COARSE_BESIDE`` times coarser, which often
        settles it); a grid over the time budget leaves ``known``, still certified."""
        eps, lo, known = at
        for step in [d * COARSE_BESIDE, d] if len(self.terms) >= MANY_PARTS else [d]:
            pend = np.nonzero(known > lo)[0]
            if not pend.size:
                break
            with contextlib.suppress(TimeExceeded):
                known[pend] = np.minimum(known[pend], self._delta_at(
                    step, direction, eps[pend], log_tail, window_tail, upper=True,
                    stats=stats, below=lo[pend]))
        return known.copy()

    def _tilted(self, d: float, direction: Direction, log_tail: float, lam: float, *,
                upper: bool, stats: QueryStats) -> ComposedPLD | None:
        """The composition tilted by ``lam`` (window ``e^-80``; 0: the query's untilted one),
        or None over the budget (a strong tilt can need a far wider window): the untilted
        bound stands (coarser grids gave the same brackets later: docs/pld-constants.md)."""
        try:
            ct = self._composed(d, direction, log_tail, self._cache["delta_window"] if lam == 0
                                else -80.0, upper=upper, lam=lam)
        except BudgetExceeded:
            stats.tilts_over_budget += 1
            return None
        stats.saw(ct.probs.size)
        stats.tilted(lam)
        return ct

    def _delta_of(self, eps) -> DeltaResult:
        """Certified bracket on delta(eps) (eps a number or an array)."""
        e, scalar = self._eps_array(eps)
        t0 = time.perf_counter()
        if not self.terms:
            out = 0.0 if scalar else np.zeros_like(e)
            return DeltaResult(out, eps, out, out, self.name, certified=True)
        self._cache["extended"] = False  # each query decides (rounding_matters)
        k_tot = max(self.total_count, 1)
        dirs = self._directions()
        lt0 = math.log(1e-40) - math.log(k_tot)
        pilots = [self._pilot(r, lt0) for r in dirs]
        emax, log_tail, wt = delta_cuts(e, pilots, k_tot, self.rtol)
        spans = [s for r in dirs for s in self._spans(r, log_tail)]
        deadline = self.budget.deadline()
        floor = budget_floor(pilots, spans, wt, self._max_grid_points())
        # the directions by their pilots' Chernoff bound at the largest eps asked precisely;
        # the grid step is modelled on those within a factor GRID_SHARE of the largest there
        # (a direction far below it is the maximum only at smaller eps, where its tilt and
        # so the step it asks for are milder; the measured bracket decides in any case)
        bounds = [mgf.log_bound(emax, +1) for mgf in pilots]
        order = [dirs[i] for i in sorted(range(len(dirs)), key=lambda i: -bounds[i])]
        near = [mgf for mgf, b in zip(pilots, bounds, strict=True) if b >= max(bounds) + GRID_SHARE]
        d = self._grid_step(near, emax, 0.0, spans, wt)
        # each other direction's certified upper bound so far: its pilot's, then its grids'
        known = {r: pilot_delta_upper(p, self._cache[("pilot_inf", r, lt0)], e)
                 for r, p in zip(dirs, pilots, strict=True) if r is not order[0]}
        best: list = []  # the tightest (up, lo, step, stats) of every refinement so far

        def measure(d: float) -> float | None:
            """Bound on the grid ``d``; None if within rtol, else the shrink asked for."""
            stats = QueryStats()
            # the direction likely the largest first, with its lower bound: the others are
            # refined only where their upper bound exceeds it (any direction's lower bound
            # is one of the maximum)
            ups = {order[0]: self._delta_at(d, order[0], e, log_tail, wt, upper=True,
                                            stats=stats)}
            lo = self._delta_at(d, order[0], e, log_tail, wt, upper=False, stats=stats)
            for r in order[1:]:
                ups[r] = self._upper_beside(d, r, (e, lo, known[r]), log_tail, wt, stats)
            up = np.max(np.array([ups[r] for r in dirs]), axis=0)
            for r in order[1:]:  # the lower bound of every direction where it is largest
                top = ups[r] >= up
                if np.any(top):
                    with contextlib.suppress(TimeExceeded):  # order[0]'s lower bound stands
                        lo[top] = np.maximum(lo[top], self._delta_at(
                            d, r, e[top], log_tail, wt, upper=False, stats=stats))
            check_bracket(lo, up, "delta at the eps asked", self.name)
            if best:  # keep the tightest bounds of every refinement
                up, lo = np.minimum(up, best[0]), np.maximum(lo, best[1])
                check_bracket(lo, up, "delta at the eps asked", self.name)
            best[:] = [up, lo, d, stats]
            # relative precision is asked of values >= DELTA_FLOOR; smaller ones are reported
            # with the (still certified) bracket that comes with it
            relw = np.where(up >= DELTA_FLOOR, (up - lo) / np.maximum(up, 1e-300), 0.0)
            rel = float(np.max(relw))
            return None if rel <= self.rtol else math.sqrt(AIM * self.rtol / rel)

        self._cache["deadline"], self._cache["delta_window"] = deadline, wt
        try:
            run = refine(measure, d, widest=max(spans), floor=floor, budget=self.budget,
                         deadline=deadline)
        finally:
            del self._cache["deadline"]
        if not best:
            raise BudgetExceeded(run.note or "rtol: no grid step fits the memory budget")
        up, lo, step, stats = best
        details = {"grid_step": step, "grid_step_upper": step, "grid_step_lower": step,
                   "grid_steps_tried": run.steps, "converged": run.converged,
                   "seconds": time.perf_counter() - t0, **stats.details(),
                   "extended": bool(self._cache.get("extended"))}
        note = run.note
        if not run.converged and not note:
            note = "bracket wider than rtol"
        if scalar:
            up, lo = float(up[0]), float(lo[0])
        return DeltaResult(up, eps, lo, up, self.name, certified=True, estimate=up, note=note,
                           details=details)

