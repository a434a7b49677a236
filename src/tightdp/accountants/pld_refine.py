"""The grid refinement of the certified PLD accountant, and what it does when the budget stops it.

Both queries of :class:`~tightdp.accountants.pld.PLDAccountant` refine the same way: bound on
a grid of step ``d``; if the bracket is wider than ``rtol``, shrink ``d`` by the measured width
(the error model: the bracket narrows as ``d^2``) and bound again, until the bracket is that
tight or the memory or time budget allows no finer grid. :func:`refine` is that loop, written
once; each query gives it one function, the bounds on one grid and the shrink they ask for.

When the budget stopped the bracket short of ``rtol``, other certified bounds of the same
curve may be tighter (:func:`tighter_bounds`); when not even the coarsest grid fits, the RDP
accountant's upper bound is reported instead (:func:`rdp_fallback`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .._numerics import UNIT_ROUNDOFF
from ..budget import Budget, BudgetExceeded, TimeExceeded
from ..pld.transform import UNIT_ROUNDOFF_EXTENDED
from ..results import EpsilonResult, check_bracket
from .base import Direction

__all__ = ["MAX_TILTS", "TILT_SPACING", "ROUNDING_SHARE", "rounding_heavy", "rounding_matters",
           "tilted_within_budget", "time_refusal",
           "DELTA_FLOOR", "EpsQuery", "QueryStats", "Refinement", "refine", "clamped",
           "eps_answer", "over_budget", "budget_floor", "delta_cuts", "tighter_bounds",
           "rdp_fallback", "quantile_tilts", "tilt_many"]

#: the most tilted compositions one delta(eps) query uses per grid and direction
MAX_TILTS = 12
#: the smallest relative spacing of the tilts of one delta(eps) query (the eps of a law
#: with a heavy upper tail move fast with its tilt: closer tilts centre the same eps)
TILT_SPACING = 0.02
#: the most refinements of one query
MAX_REFINEMENTS = 40
#: delta(eps) queries are refined to rtol for values at least this large
DELTA_FLOOR = 1e-30


@dataclass
class QueryStats:
    """What the compositions of one query used, reported in its details: the most FFT points
    of a composition read, the strongest tilt applied and how many tilted compositions were
    over the budget (each reported only once it happened)."""

    fft_points: int | None = None
    tilt: float | None = None
    tilts_over_budget: int = 0

    def saw(self, points: int) -> None:
        """A composition of ``points`` points was read."""
        self.fft_points = max(self.fft_points or 0, points)

    def tilted(self, lam: float) -> None:
        """A composition tilted by ``lam`` gave a bound."""
        self.tilt = max(self.tilt or 0.0, lam)

    def details(self) -> dict:
        """The entries of the query's details."""
        out: dict = {}
        if self.fft_points is not None:
            out["fft_points"] = self.fft_points
        if self.tilts_over_budget:
            out["tilts_over_budget"] = self.tilts_over_budget
        if self.tilt is not None:
            out["tilt"] = self.tilt
        return out


class EpsQuery:
    """The state of one eps query across its refinements: each direction's certified upper
    bound so far (its pilot's, ``pre``, until it is bounded on a grid) and the grid step of
    its best one, the best lower bound and its step, and the query's :class:`QueryStats`."""

    def __init__(self, dirs: list[Direction], *, pre: dict) -> None:
        self.dirs, self.pre = dirs, pre
        self.best_up = {r: math.inf for r in dirs}
        self.at_step = {r: math.inf for r in dirs}  # grid step of each direction's best upper
        self.tried: set = set()  # the directions bounded on a grid (best_up) at least once
        self.lo = 0.0
        self.lo_step: float | None = None
        self.stats = QueryStats()

    def known(self, r: Direction) -> float:
        """The direction's certified upper bound so far."""
        return self.best_up[r] if r in self.tried else self.pre[r]

    def upper(self) -> float:
        """The certified upper bound on the curve (the maximum over directions) so far."""
        return max(self.known(r) for r in self.dirs)

    def top(self) -> Direction:
        """The direction of the largest bound; of the bounds on a grid on a tie."""
        return max(self.dirs, key=lambda r: (self.known(r), r in self.tried))

    def worth_bounding(self):
        """The directions to bound on the next grid, largest bound first: a direction below
        the largest upper bound cannot raise the maximum (checked as each is bounded)."""
        order = sorted(self.dirs, key=lambda r: -self.known(r) if math.isfinite(self.known(r))
                       else -math.inf)
        for i, r in enumerate(order):
            if i > 0 and self.known(r) <= max(self.known(x) for x in order[:i]):
                continue
            yield r

    def bounded(self, r: Direction, e: float, d: float) -> None:
        """Direction ``r`` has the upper bound ``e`` on the grid ``d``."""
        self.tried.add(r)
        if e < self.best_up[r]:
            self.best_up[r], self.at_step[r] = e, d


@dataclass
class Refinement:
    """The grid steps a refinement bounded on (in order), whether its last bracket was
    within rtol, and why it stopped otherwise ("" if it ran out of refinements)."""

    steps: list[float] = field(default_factory=list)
    converged: bool = False
    note: str = ""


def refine(measure: Callable[[float], float | None], d: float, *, widest: float,
           floor: float, budget: Budget, deadline) -> Refinement:
    """Bound on grids of step ``d`` and finer until ``measure`` is content.

    ``measure(d)`` bounds on the grid of step ``d`` and returns ``None`` if the bracket is
    within rtol, else the factor ``sqrt(AIM rtol / relative width)`` by which the error model
    (bracket ~ ``d^2``) asks the step to shrink. The step shrinks by that factor, kept within
    ``[1/16, 1/1.25]`` and :func:`clamped` towards the memory budget's ``floor``, until
    :func:`over_budget` says no finer grid may run. A grid over the budget before any
    bracket exists is retried twice as coarse (up to 4 times the widest loss range
    ``widest``); after one, the refinement stops at the last bracket."""
    run = Refinement()
    for _ in range(MAX_REFINEMENTS):
        it0 = time.perf_counter()
        try:
            shrink = measure(d)
        except BudgetExceeded as err:
            # no bracket yet: coarser until it fits, while time is left
            if not run.steps and d < 4.0 * widest and not deadline.passed():
                d *= 2.0
                continue
            # a refusal for time names its grid step (time_refusal)
            run.note = (str(err) if isinstance(err, TimeExceeded)
                        else f"stopped refining at grid step {d:.3g}: {err}")
            break
        run.steps.append(d)
        if shrink is None:
            run.converged = True
            break
        factor = clamped(d, min(max(shrink, 1.0 / 16), 1.0 / 1.25), floor)
        run.note = over_budget(budget, d * factor, floor, deadline,
                               time.perf_counter() - it0, factor)
        if run.note:
            break
        d *= factor
    return run


def time_refusal(deadline, d: float, stage: str) -> TimeExceeded:
    """The one-line refusal of a stage of a PLD query on the grid step ``d`` that would not
    end within what is left of the query's time (``deadline``); ``stage`` names it and its
    estimated time."""
    left = deadline.seconds_left()
    why = "used up" if left <= 0 else f"nearly used up ({stage}; {left:.3g} s left)"
    return TimeExceeded(f"rtol: max_seconds={deadline.max_seconds:g} {why} at grid step "
                        f"{d:.3g}; raise max_seconds or rtol")


def over_budget(budget: Budget, d: float, floor: float, deadline, last_seconds: float,
                shrink: float) -> str:
    """Why the next refinement (grid step ``d``) may not run, or "" if it may: finer than
    the memory budget allows, or expected to end past the time budget (the last
    refinement's time scaled by the growth in points)."""
    if d < floor:
        return (f"max_memory={budget.max_memory:.3g} bytes allows no finer grid "
                f"than {floor:.3g}: the bracket is certified but wider than rtol; raise "
                "max_memory or rtol")
    # half the time budget for refinements: the rest is margin for the fallback
    expected = deadline.elapsed + last_seconds * 1.5 / max(shrink, 1e-3)
    if expected > 0.5 * deadline.max_seconds:
        return (f"max_seconds={deadline.max_seconds:g} allows no further refinement: the "
                "bracket is certified but wider than rtol; raise max_seconds or rtol")
    return ""


def budget_floor(mgfs: list, spans: list[float], window_tail: float, max_points: int
                 ) -> float:
    """The finest grid step the memory budget allows, before anything is allocated: every
    loss's range (``spans``) and the composed window (from the pilots' Chernoff bounds
    ``mgfs``, which are close to the window :func:`~tightdp.pld.compose.compose` will
    place) in at most ``max_points`` points."""
    widest = max(spans)
    for mgf in mgfs:
        widest = max(widest, mgf.quantile(window_tail, +1)[0]
                     - mgf.quantile(window_tail, -1)[0])
    return 1.25 * widest / max_points


def clamped(d: float, factor: float, floor: float) -> float:
    """The refinement factor, raised so that the next step is not finer than 1.5 times the
    memory budget's ``floor`` when the current one is still clearly coarser (a grid near
    the finest affordable one is tried before giving up, instead of stopping at the
    previous one; not the floor itself, whose peak RSS can come close to max_memory,
    BYTES_PER_POINT being an average)."""
    target = 1.5 * floor
    if d * factor < target and d > 1.2 * target:
        return target / d
    return factor


def _other(cls, terms: list, budget: Budget):
    """An accountant of class ``cls`` on the composition ``terms`` and the same budget (one
    whose certified bounds complement the PLD ones), or None if it cannot take it."""
    acc = cls(max_memory=budget.max_memory, max_seconds=budget.max_seconds)
    try:
        for mech, k in terms:
            acc.compose(mech, k)
    except ValueError:
        return None
    return acc


def _rdp(terms: list, budget: Budget):
    """The RDP accountant of the composition, or None if it cannot take it."""
    from .rdp import RDPAccountant

    return _other(RDPAccountant, terms, budget)


def _spa(terms: list, budget: Budget):
    """The saddle-point accountant of the composition (its certified bounds only), or None
    if it cannot take it."""
    from .spa import SaddlePointAccountant

    return _other(SaddlePointAccountant, terms, budget)


def tighter_bounds(terms: list, budget: Budget, delta: float, bracket: tuple[float, float],
                   note: str, details: dict) -> tuple[float, float, str]:
    """When the budget stopped the PLD bracket ``(lo, up)`` short of rtol, other certified
    bounds of the same curve (milliseconds) may be tighter: the RDP accountant's upper bound
    (Mironov 2017; Canonne, Kamath, Steinke 2020), the saddle-point accountant's refined
    moments upper bound (Alghamdi et al., eq. (43)) and its Berry-Esseen lower bound
    (Thm. 5, where informative). Every one of them bounds the same eps, so the largest
    lower and the smallest upper bound are reported, and the note says which; a lower
    bound above an upper one is an inconsistency, reported by
    :func:`~tightdp.results.check_bracket`, never hidden."""
    lo, up = bracket
    details["pld_lower"], details["pld_upper"] = lo, up
    sources = []
    rdp = _rdp(terms, budget)
    if rdp is not None:
        sources.append(("rdp", "RDP accountant's", None, rdp.epsilon(delta).upper))
    spa = _spa(terms, budget)
    if spa is not None:
        try:
            r = spa.epsilon(delta)
        except (ValueError, BudgetExceeded):
            r = None
        if r is not None:
            sources.append(("spa", "saddle-point accountant's", r.lower, r.upper))
    best_up = best_lo = None
    for key, who, s_lo, s_up in sources:
        if s_up is not None and math.isfinite(s_up) and s_up < up:
            best_up, up = (key, who), s_up
        if s_lo is not None and math.isfinite(s_lo) and s_lo > lo:
            best_lo, lo = (key, who), s_lo
    for side, best, word in (("upper", best_up, "smaller"), ("lower", best_lo, "larger")):
        if best is not None:
            details[f"{side}_from"] = best[0]
            note += (f"; the {side} bound reported is the {best[1]} (certified, {word} "
                     "than the PLD one on this grid)")
    return lo, up, note


def rdp_fallback(terms: list, budget: Budget, delta: float, why: str, name: str
                 ) -> EpsilonResult:
    """When not even the coarsest grid fits the budget: the RDP accountant's certified
    upper bound (Mironov 2017 with the conversion of Canonne, Kamath, Steinke 2020), with
    ``lower`` None and a note; or the refusal if RDP cannot take these mechanisms."""
    rdp = _rdp(terms, budget)
    if rdp is None:
        raise BudgetExceeded(why)
    r = rdp.epsilon(delta)
    note = (f"over the budget for a PLD bracket ({why}); reported: the RDP accountant's "
            "certified upper bound, no lower bound")
    return EpsilonResult(r.epsilon, delta, None, r.upper, name, certified=True,
                         estimate=r.epsilon, note=note,
                         details={"fallback": "rdp", "converged": False})


def eps_answer(q: EpsQuery, run: Refinement, delta: float, *, terms: list, budget: Budget,
               rtol: float, name: str, t0: float, extended: bool) -> EpsilonResult:
    """The PLD accountant's (``name``, on the composition ``terms``) eps query's result from
    its refinement ``run`` (started at ``t0``): the bracket, with the other certified
    bounds' help where the budget stopped it short of rtol (:func:`tighter_bounds`), or the
    RDP fallback if not even one grid fitted; ``extended`` whether it used long-double
    transforms."""
    lo, up, note = q.lo, q.upper(), run.note
    if not run.steps:
        return rdp_fallback(terms, budget, delta,
                            note or "rtol: no grid step fits the memory budget", name)
    check_bracket(lo, up, f"eps at delta={delta!r}", name)
    top = q.top()
    # (a direction never bounded on a grid can be the largest only when the budget
    # stopped its first grid: its pilot's bound is the upper one, the last grid reported)
    step_up = q.at_step[top] if top in q.tried else run.steps[-1]
    details = {"grid_step": step_up, "grid_step_upper": step_up,
               "grid_step_lower": q.lo_step, "grid_steps_tried": run.steps,
               "converged": run.converged, "seconds": time.perf_counter() - t0,
               **q.stats.details(), "extended": extended}
    if not run.converged and not note:
        note = "bracket wider than rtol"
    if not run.converged:
        lo, up, note = tighter_bounds(terms, budget, delta, (lo, up), note, details)
        check_bracket(lo, up, f"eps at delta={delta!r}", name)
        if up - lo <= rtol * up:
            details["converged"] = True
            note += "; with them the bracket is within rtol"
    return EpsilonResult(up, delta, lo, up, name, certified=True, estimate=up,
                         note=note, details=details)


def delta_cuts(e: np.ndarray, pilots: list, k_tot: int, rtol: float
               ) -> tuple[float, float, float]:
    """``(emax, log_tail, window_tail)`` of a delta query at ``e`` (the PLD accountant's, its
    directions' pilots ``pilots``, :class:`~tightdp.pld.mgf.LogMgf`): the largest eps whose
    delta is asked to relative precision ``rtol``, what each step's range and the window
    may leave out."""
    log_tail = math.log(1e-40) - math.log(k_tot)
    # the error model at the largest eps whose delta is asked to relative precision: by
    # the Chernoff estimate K(t) - t K'(t) of log delta at eps = K'(t), decreasing in t
    emax, reach_all = 0.0, 0.0
    ts = np.geomspace(1e-4, 1e4, 81)
    for mgf in pilots:
        kk, k1, _ = mgf.cumulants(ts)
        ok = kk - ts * k1 >= math.log(DELTA_FLOOR)
        reach = float(np.max(k1[ok])) if ok.any() else 0.0
        inside = e[(e > 0) & (e <= reach)]
        emax = max(emax, float(inside.max()) if inside.size else 0.0)
        reach_all = max(reach_all, reach)
    beyond = bool(np.any(e > reach_all))  # the curve is the largest direction's
    # the smallest delta asked to relative precision, overestimated: the Chernoff bound
    # of the pilot at emax (on the wide side for the cuts below). The untilted window
    # leaves out at most 1e-5 rtol of it (values whose bracket that still widens go to
    # the tilted compositions, which keep the e^-80 window: see _delta_at); each step's
    # range leaves out at most 1e-5 rtol of it over all steps, unless a value beyond the
    # reach of relative precision is asked (those keep the 1e-40 cut)
    log_est = max((mgf.log_bound(emax, +1) for mgf in pilots), default=0.0)
    cut = log_est + math.log(rtol) - math.log(1e5)
    wt = min(max(cut, -80.0), -20.0)
    if not beyond:
        log_tail = min(max(cut - math.log(k_tot), log_tail), -25.0)
    return emax, log_tail, wt


#: a composition whose FFT-rounding charge at the answer exceeds this fraction of rtol times
#: delta is redone with extended-precision transforms, and so is every later one of the query
#: (the charge grows with the count and the number of points; docs/pld-constants.md)
ROUNDING_SHARE = 0.25


def rounding_heavy(c, eps, delta, rtol: float) -> bool:
    """Whether the FFT-rounding charge of the composition ``c`` at ``eps`` exceeds
    ``ROUNDING_SHARE`` rtol of ``delta`` (arrays: anywhere) where long double is more
    precise than double (else recomputing cannot lower it)."""
    if not UNIT_ROUNDOFF_EXTENDED < UNIT_ROUNDOFF:
        return False
    charge = c.rounding_charge(np.maximum(eps, 0.0))
    return bool(np.any(charge > ROUNDING_SHARE * rtol * np.asarray(delta)))


def rounding_matters(cache: dict, c, eps, delta, rtol: float) -> bool:
    """Whether :func:`rounding_heavy` holds for the composition ``c`` while the transforms
    are still in double; if so, ``cache["extended"]`` is set: the query's later
    compositions are extended (:func:`tightdp.pld.compose.compose`)."""
    if cache.get("extended") or not rounding_heavy(c, eps, delta, rtol):
        return False
    cache["extended"] = True
    return True


def tilted_within_budget(cache: dict, composed: Callable, key: tuple, lam: float, *,
                         stats: QueryStats) -> tuple:
    """``(composition, step)``: ``composed(step)``, the composition tilted by ``lam`` on the
    grid ``d`` of ``key = (d, upper, direction, log_tail, window_tail)``, or, if its window is
    over the budget (a strongly tilted law can need a far wider one: the far end of the
    per-step range dominates it), on a coarser grid (any grid's bound is a bound): those of
    the query's earlier refinements, whose laws are discretized already (``cache`` keys
    ``("laws", step, direction, log_tail)``), else (the first grid) 2, 4 or 8 times
    coarser; ``(None, 0.0)`` if none fits."""
    d, upper, direction, log_tail, window_tail = key
    done = sorted(k[1] for k in cache
                  if isinstance(k, tuple) and k[0] == "laws" and k[1] > d
                  and k[2] == direction and k[3] == log_tail)
    # a tilt at least as strong as one already over the budget on a grid is not tried
    # on it again (the window grows with the tilt there: the far end dominates)
    fails = cache.setdefault("tilt_fails", {})
    for step in [d, *(done[:3] or [2 * d, 4 * d, 8 * d])]:
        k = (step, upper, direction, log_tail, window_tail)
        if lam >= fails.get(k, math.inf):
            continue
        try:
            return composed(step), step
        except BudgetExceeded:
            stats.tilts_over_budget += 1
            fails[k] = min(lam, fails.get(k, math.inf))
    return None, 0.0


def quantile_tilts(mgf, eps: np.ndarray, most: int, spacing: float) -> list[float]:
    """The tilts of a delta query's values ``eps`` (a few terms): those centring at most
    ``most`` quantiles of them (``K'(lam) = eps`` on the log-MGF ``mgf``), increasing, of
    which tilts within a relative ``spacing`` of one another (they centre the same eps)
    keep one."""
    reps = np.quantile(eps, np.linspace(0.0, 1.0, min(eps.size, most)), method="nearest")
    lams: list[float] = []
    for lam in sorted(mgf.solve_slope(float(r)) for r in np.unique(reps)):
        if lam > 0 and not (lams and lam <= lams[-1] * (1 + spacing)):
            lams.append(lam)
    return lams


def tilt_many(tilted: Callable, search, work: tuple, c, *, upper: bool, rtol: float,
              cache: dict) -> None:
    """The tilts of a delta query of many terms (each composition costs a transform per
    distinct law), updating the values in place: ``work = (eps, val, todo, below)``, the
    eps asked, their bounds so far (from the untilted composition ``c``), the indices to
    tilt for and another direction's lower bound (or None); ``upper``: the side bounded.
    One tilt serves every eps it
    resolves (its own charges within 0.1 rtol of the value), and the next is placed at the
    largest eps left, on the coarsened log-MGF ``search`` (any tilt gives a bound);
    ``tilted(lam)`` is the tilted composition or None. Then the composition that gave each
    value is redone in long double where its rounding charge is a noticeable part of it
    (:func:`rounding_heavy`; ``cache["extended"]`` is set for the rest of the query)."""
    eps, val, todo, below = work
    used, src = [(0.0, c)], np.zeros(eps.size, dtype=int)
    tried: list[float] = []
    while todo.size and len(tried) < MAX_TILTS:
        if below is not None and not np.any(val[todo] > below[todo]):
            break  # the rest cannot raise the maximum
        top = int(todo[np.argmax(eps[todo])])
        lam = search.solve_slope(float(eps[top]))
        todo = todo[todo != top]
        if lam <= 0 or any(abs(lam - x) <= TILT_SPACING * x for x in tried):
            continue
        tried.append(lam)
        ct = tilted(lam)
        if ct is None:
            continue
        at = np.append(todo, top)
        got = ct.delta_bound(eps[at], upper=upper)
        better = got < val[at] if upper else got > val[at]
        val[at[better]], src[at[better]] = got[better], len(used)
        used.append((lam, ct))
        spread = np.abs(got - ct.delta_bound(eps[at], upper=not upper))
        todo = at[:-1][~(spread[:-1] <= 0.1 * rtol * val[at[:-1]])]
    if cache.get("extended"):
        return
    redo = [i for i, (_, comp) in enumerate(used)
            if (src == i).any() and rounding_heavy(comp, eps[src == i], val[src == i], rtol)]
    if redo:
        cache["extended"] = True  # and every later composition of the query
    for i in redo:
        at = np.nonzero(src == i)[0]
        cx = tilted(used[i][0])
        if cx is not None:
            got = cx.delta_bound(eps[at], upper=upper)
            val[at] = np.minimum(val[at], got) if upper else np.maximum(val[at], got)
