"""The PRV accountant of Gopi, Lee and Wutschitz (2021), with certified bounds.

Pipeline (Gopi et al. 2021, Algorithms 1 and 2, Theorem 5.5):

1. every privacy loss is truncated and discretized on the grid ``j * h`` by the
   mean-preserving discretizer :func:`tightdp.pld.mean_preserving.mean_preserving`;
2. the discretized laws are composed by the library's one FFT engine
   (:func:`tightdp.pld.windows.compose_grid_chernoff`, Algorithm 1's circular convolution:
   each distinct PLD transformed once and raised to its count in the Fourier domain, so
   ``b`` distinct mechanisms cost ``O(b (L/h) log(L/h))``) on a window placed by an exact
   Chernoff bound of the discretized laws, whose value at the window's ends enters the
   bounds exactly as in :func:`tightdp.pld.compose.compose`;
3. the composed discrete curve ``delta~`` is turned into certified bounds by the coupling
   argument (Lemma 5.2 with Lemma 5.3):

       delta~(eps + eps_error) - delta_error <= delta(eps) <= delta~(eps - eps_error) + delta_error

   (Theorem 5.5, eq. (8)), where ``delta~`` on the right (left) is the engine's certified
   upper (lower) bound on the composed discrete curve, which includes the mass outside the
   engine's FFT window and the mass folded into it by the circular convolution.

``delta_error`` is spent as follows (each side separately):

* at most ``delta_error / 2`` on the coupling: ``P(sum_i (Y_i - Y~_i) > eps_error)``, a
  Chernoff bound from :func:`tightdp.pld.mean_preserving.coupling_log_mgf` (Hoeffding, as in
  Lemma 5.3, plus the certified residual of the mean preservation);
* at most ``delta_error / 4`` on truncating every ``Y_i`` to ``[lo_i, hi_i]`` (union bound
  over all ``k`` steps, each tail at most ``delta_error / (4 k)``, found from the loss's
  exact tail function);
* at most ``delta_error / 8`` on the engine's window (its Chernoff-placed window with tail
  ``delta_error / 16`` on each side).

The mesh is Theorem 5.5's ``h = eps_error / sqrt(k/2 * log(2 / delta_error))`` (our
Hoeffding constant ``2/delta_error`` instead of ``12/delta_error`` because the per-step
error spans ``h`` given ``Y`` and only one side is needed per bound); it shrinks if the
certified residual of the mean preservation makes the coupling bound exceed its budget.

Domain ``L``: Lemma 5.4 / Remark 5.6 of the paper size the domain from an (eps, delta)
guarantee of each mechanism and of the composition (via RDP in the reference
implementation). Here the two roles are played by rigorous bounds computed on the spot:
the per-step truncation from the exact tail of each loss, and the composed window from the
exact Chernoff bound ``P(S >= a) <= exp(sum_i k_i log M_i(t) - t a)`` of the discretized laws,
whose value at the window's ends is included in the bounds. Neither relies on a fixed
domain, which is why small ``delta`` is safe (the reference implementation's fixed
assumptions break there).

Small delta: for an ``epsilon(delta)`` query the accountant spends at most
``min(delta_error, delta / 1000) / 4`` as its ``delta_error`` (the mesh depends on it only
through ``sqrt(log(1/delta_error))``), so ``delta`` down to 1e-12 and below get meaningful
bounds; the value used is in ``details``. Below ``delta = 1e-8`` the composition is
exponentially tilted towards the answer (the engine's Esscher tilt, as in the certified PLD
accountant), so that such values are not computed from the FFT's rounding noise.

Long compositions: when the engine's window would exceed ``spectral_above`` points (2^20 by
default; small eps_error and delta on long compositions need windows of tens of millions of
points: docs/pld-constants.md), the composed
curve is evaluated at a few hundred frequencies of the same window instead
(:mod:`tightdp.pld.spectral`: Plancherel with a certified bound on the frequencies left out,
the same window, fold and tail charges), and every eps(delta) query is then answered on
compositions tilted towards it (that evaluation's rounding allowance grows with the number of
steps; the tilt makes it relative to the answer).

Floating point: as in the rest of the engine (and Gopi et al., Sec. 6), rounding in the FFT
and in the bin masses is not part of the certificate; the few-frequency evaluation adds an
explicit allowance for its own.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any

import numpy as np

from .. import _validate as v
from ..budget import BudgetExceeded, Deadline
from ..curves.saddle import saddle_point_eps
from ..pld.compose import MAX_POINTS, ComposedPLD
from ..pld.discretize import loss_range
from ..pld.mean_preserving import coupling_log_mgf, mean_preserving
from ..pld.mgf import LogMgf
from ..pld.spectral import SpectralPLD, compose_chernoff
from ..progress import progress_bar
from ..results import DeltaResult, EpsilonResult, check_bracket
from .base import Accountant

__all__ = ["PRVAccountant"]

#: share of delta_error for the coupling (Hoeffding) bound
_SHARE_COUPLING = 0.5
#: share of delta_error for the per-step truncation (all steps together, one side)
_SHARE_TRUNC = 0.25
#: engine window tail per side (upper bound adds one, lower bound subtracts <= two)
_SHARE_WINDOW = 1.0 / 16.0
#: mesh below Theorem 5.5's value, leaving room for the certified mean-preservation residual
_MESH_SLACK = 0.995
#: below this delta (or delta bound) the composition is tilted towards the answer
_TILT_BELOW = 1e-8
#: the same for compositions evaluated at a few frequencies: their rounding allowance grows
#: with the number of steps (the transform's error raised to the k-th power: 2e-8 of the
#: transform's size at 10^6 steps), which the tilt makes relative to the answer
_TILT_SPECTRAL = 1e-2
#: for eps(delta) the delta error actually spent, as a fraction of min(delta_error,
#: delta/1000): the bracket in eps is widened beyond 2 t by about eta * |d eps / d delta|,
#: and a smaller eta keeps that within the 2 (eps_error - t) of room at a small cost in mesh
_DE_EPS = 0.25
#: what to change when the time budget runs out
_TIME_ADVICE = "use a larger eps_error, a larger max_seconds, or the pld accountant"
#: edges whose bin masses are timed to estimate a discretization's time before it is made
_TIME_SAMPLE = 256
#: first coupling radius tried, as a fraction of eps_error
_T_START = 0.95
#: peak bytes per FFT point of a query (the composition's arrays; the per-step laws are
#: small beside them), with room for the interpreter and the libraries. Smaller than the
#: PLD accountant's figure, which is sized for its discretizations: that one would refuse
#: windows that fit the budget (tracemalloc figures in docs/pld-constants.md).
BYTES_PER_POINT = 192
#: compositions whose FFT window would exceed this many points are evaluated at a few
#: frequencies instead (:mod:`tightdp.pld.spectral`), when its tail bound allows
SPECTRAL_ABOVE = 1 << 20
#: the refusal of a composition over max_points (formatted with n and max_points)
_REFUSAL = ("eps_error: the composition needs an FFT of {n} points (> {max_points}, the "
            "smaller of max_points and what max_memory holds); use a larger eps_error, "
            "max_points or max_memory")


class PRVAccountant(Accountant):
    """Privacy random variable accountant (Gopi, Lee, Wutschitz 2021) with certified bounds.

    Parameters
    ----------
    eps_error : additive error in eps of the guarantee (Theorem 5.5), in (0, inf)
    delta_error : additive error in delta of the guarantee (Theorem 5.5), in (0, 1); for
        ``epsilon(delta)`` queries at most ``min(delta_error, delta / 1000) / 4`` is spent
        (reported as ``details["delta_error"]``; ``details["eta_up"]``/``["eta_low"]`` are
        the amounts actually used).
    max_points : refuse (ValueError) rather than run a larger FFT.
    spectral_above : compositions whose FFT window would have more points than this are
        evaluated at a few frequencies of the window instead (:mod:`tightdp.pld.spectral`:
        the same bounds, certified the same way, in time and memory that grow with the
        single-step laws rather than with the window), unless the transform beyond
        :data:`~tightdp.pld.spectral.MAX_FREQUENCIES` frequencies cannot be bounded
        (few steps): then by FFT, within ``max_points``. 0 always tries it first.
    neighboring : the neighbouring relation of the composition, ``"add_or_remove_one"``
        (default), ``"replace_one"`` or ``"replace_special"`` (see
        :class:`~tightdp.accountants.base.Accountant`).

    Results: ``epsilon(delta)`` returns ``lower = eps_low``, ``estimate`` (eps of the
    discrete composed curve) and ``upper = eps_up = epsilon``, with ``certified=True``;
    ``delta(eps)`` the same for delta.

    Examples
    --------
    >>> from tightdp import PRVAccountant, PoissonSubsampled, Gaussian
    >>> acc = PRVAccountant(eps_error=0.01, delta_error=1e-8)
    >>> r = acc.compose(PoissonSubsampled(Gaussian(1.0), 0.01), 10_000).epsilon(1e-5)
    >>> r.lower <= 6.1877 <= r.upper and r.upper - r.lower <= 0.02
    True
    """

    name = "prv"
    #: the options ``repr`` shows
    REPR_OPTIONS = ("eps_error", "delta_error")

    def __init__(self, eps_error: float = 0.01, delta_error: float = 1e-9, *,
                 max_points: int = MAX_POINTS, spectral_above: int = SPECTRAL_ABOVE,
                 neighboring="add_or_remove_one", max_memory=None, max_seconds=None):
        super().__init__(neighboring=neighboring, max_memory=max_memory,
                         max_seconds=max_seconds)
        self.spectral_above = v.count("spectral_above", spectral_above, minimum=0)
        self.eps_error = v.positive("eps_error", eps_error)
        self.delta_error = v.delta_value("delta_error", delta_error)
        # the FFT may not exceed max_points nor what the memory budget holds (at
        # BYTES_PER_POINT): checked before every allocation
        self.max_points = min(v.count("max_points", max_points, minimum=64),
                              self.budget.max_items(BYTES_PER_POINT))
        #: the running query's clock (set by each query; discretizations check it)
        self._deadline: Deadline | None = None

    # --- building blocks -------------------------------------------------------------------
    def mesh(self, delta_error: float, t: float | None = None) -> float:
        """Theorem 5.5's mesh with our Hoeffding constant: the largest ``h`` with
        ``exp(-2 t^2 / (k h^2)) <= delta_error / 2`` (k = total steps, t the coupling radius,
        ``eps_error`` by default); Gopi et al. 2021, Theorem 5.5 and Lemma 5.3."""
        k = max(self.total_count, 1)
        t = self.eps_error if t is None else t
        beta = _SHARE_COUPLING * delta_error
        # -log(beta), not log(1/beta): 1/beta overflows to inf below beta ~ 5.6e-309, which
        # made the mesh 0 (and a division by zero); a beta that is not a normal float is
        # refused by :func:`_query_delta_error`
        return t / math.sqrt(k / 2.0 * -math.log(beta))

    def _pieces(self, h: float, delta_error: float, direction: int):
        key = ("pieces", h, delta_error, direction)
        if key not in self._cache:
            k_tot = max(self.total_count, 1)
            # in logs: the quotient underflows for delta_error near the float minimum
            log_tail = math.log(_SHARE_TRUNC) + math.log(delta_error) - math.log(k_tot)
            out = []
            for mech, k in self.terms:
                loss = mech.privacy_losses()[direction]
                fin = 1.0 - loss.inf_mass if loss.inf_mass < 1 else 1.0
                lo, hi = loss_range(loss, log_tail + math.log(fin))
                if (hi - lo) / h > self.max_points:
                    raise ValueError(
                        f"discretizing {mech!r} needs {(hi - lo) / h:.3g} grid points "
                        f"(> max_points={self.max_points}); use a larger eps_error")
                check = self._time_check(mech, loss, h, lo, hi)
                out.append((mean_preserving(loss, h, lo, hi, check=check), k))
            self._cache[key] = out
        return self._cache[key]

    def _check_deadline(self) -> None:
        """Refuse (BudgetExceeded naming eps_error) once the running query's max_seconds is
        used up: called before each discretization block and each composition."""
        if self._deadline is not None:
            self._deadline.check("eps_error", _TIME_ADVICE)

    def _time_check(self, mech, loss, h: float, lo: float, hi: float):
        """Before discretizing ``loss`` on ``[lo, hi]`` with mesh ``h``: refuse if its
        estimated time (the bin masses of :data:`_TIME_SAMPLE` edges spread over the range,
        the fastest of three timings, times the number of edges) does not fit in what is left
        of the query's ``max_seconds``; else the check the discretization calls between
        blocks (it refuses once the time is used up). Both name ``eps_error``, which sets
        the number of edges."""
        deadline = self._deadline
        if deadline is None:
            return None
        edges = (hi - lo) / h + 2
        if edges > 4 * _TIME_SAMPLE:
            step = (hi - lo) / _TIME_SAMPLE
            loss.bin_masses(lo + step * np.arange(8))  # the first call may build tables
            took = math.inf
            for r in range(3):  # the fastest of three: a one-off pause is not the cost;
                # new points each time (a loss may cache what it has inverted)
                sample = lo + step * (np.arange(_TIME_SAMPLE) + (r + 1) / 4.0)
                start = time.perf_counter()
                loss.bin_masses(sample)
                took = min(took, time.perf_counter() - start)
            est = took / _TIME_SAMPLE * edges
            if deadline.elapsed + est > deadline.max_seconds:
                raise BudgetExceeded(
                    f"eps_error: discretizing {mech!r} on {edges:.3g} grid points would take "
                    f"about {est:.3g} s (over max_seconds={deadline.max_seconds:g}); use a "
                    "larger eps_error (the points grow as 1/eps_error), a larger max_seconds, "
                    "or the pld accountant")
        return self._check_deadline

    @staticmethod
    def _coupling_bound(pieces, t: float) -> float:
        """``P(sum_i X_i > t)`` bound (either sign): Chernoff with the per-step MGF bound of
        :func:`coupling_log_mgf`, minimized over a grid of theta around Hoeffding's optimum
        (any theta >= 0 gives a valid bound)."""
        h = pieces[0][0].d
        k = sum(c for _, c in pieces)
        th0 = 4.0 * t / (k * h * h)
        thetas = th0 * np.array([0.5, 0.7, 0.85, 1.0, 1.2])
        val = -thetas * t
        for pld, c in pieces:
            val = val + c * coupling_log_mgf(pld, thetas)
        return float(math.exp(min(float(np.min(val)), 0.0)))

    def _plan(self, delta_error: float, t: float, direction: int):
        """Mesh, discretized pieces and error terms for one direction (cached)."""
        key = ("plan", delta_error, t, direction)
        if key in self._cache:
            return self._cache[key]
        h = self.mesh(delta_error, t) * _MESH_SLACK
        budget = _SHARE_COUPLING * delta_error
        for _ in range(30):
            pieces = self._pieces(h, delta_error, direction)
            coup = self._coupling_bound(pieces, t)
            if coup <= budget:
                break
            h *= 0.9
        else:  # pragma: no cover - the residual is O(h^2); never seen
            raise ValueError("could not meet the coupling budget; use a larger delta_error")
        trunc_up = sum(k * p.meta["tail_above"] for p, k in pieces)
        trunc_lo = sum(k * p.meta["tail_below"] for p, k in pieces)
        plan = {"h": h, "pieces": pieces, "coupling": coup,
                "eta_up": coup + trunc_up, "eta_low": coup + trunc_lo}
        self._cache[key] = plan
        return plan

    def _compose(self, pieces, log_tail: float, lam: float) -> ComposedPLD | SpectralPLD:
        """Algorithm 1's composition, by FFT on the Chernoff window, or, when that window
        would exceed ``spectral_above`` points, at a few of its frequencies (the same curve,
        bounded the same way; :mod:`tightdp.pld.spectral`) if the transform's tail can be
        bounded, else by FFT within ``max_points``."""
        return compose_chernoff(pieces, log_tail=log_tail, lam=lam,
                                spectral_above=min(self.spectral_above, self.max_points),
                                max_points=self.max_points, refusal=_REFUSAL)

    def _composed(self, delta_error: float, t: float, direction: int, lam: float = 0.0
                  ) -> tuple[ComposedPLD | SpectralPLD, dict]:
        key = ("comp", delta_error, t, direction, lam)
        if key not in self._cache:
            self._check_deadline()
            plan = self._plan(delta_error, t, direction)
            log_tail = math.log(_SHARE_WINDOW * delta_error)
            c = self._compose(plan["pieces"], log_tail, lam)
            values = c.spectrum if isinstance(c, SpectralPLD) else c.probs
            if not np.all(np.isfinite(values)):
                raise ValueError("the composed PLD is not finite (overflow); use a larger "
                                 "eps_error or delta")
            self._cache[key] = (c, plan)
        return self._cache[key]

    def _composed_for(self, delta_error: float, t: float, direction: int, eps: float
                      ) -> tuple[ComposedPLD | SpectralPLD, dict]:
        """Composition tilted towards ``eps`` (untilted when the curve there is large enough
        for the FFT's rounding not to matter)."""
        lam = self._log_mgf(delta_error, t, direction).searcher().tilt_to_mean(eps)
        lam = 0.0 if lam <= 0 else 2.0 ** (round(4 * math.log2(lam)) / 4)  # reuse nearby tilts
        return self._composed(delta_error, t, direction, lam)

    def _spectral(self, delta_error: float, t: float, direction: int) -> bool:
        """Whether the untilted composition is evaluated at a few frequencies (then every
        eps(delta) query is answered on compositions tilted towards it: see
        ``_TILT_SPECTRAL``)."""
        return isinstance(self._composed(delta_error, t, direction)[0], SpectralPLD)

    def _log_mgf(self, delta_error: float, t: float, direction: int) -> LogMgf:
        """The exact log-MGF of the composition of the discretized laws (cached)."""
        key = ("mgf", delta_error, t, direction)
        if key not in self._cache:
            self._cache[key] = LogMgf(self._plan(delta_error, t, direction)["pieces"])
        return self._cache[key]

    # --- queries ---------------------------------------------------------------------------
    def _first_at_most(self, c: ComposedPLD, target: float) -> tuple[int, int]:
        """The first window index ``i >= i0`` (``i0`` the last grid point below 0) at which
        the engine's upper bound on the composed curve is ``<= target``, or the window's
        size if there is none: a bisection over the grid, the upper bound being
        non-increasing (a non-negative law's curve, plus charges that only shrink as eps
        grows; should rounding ever break that, the index found is still one where the bound
        is at most ``target``, only possibly a later one). Cached per composition."""
        key = ("first", id(c), target)
        if key not in self._cache:
            n = c.probs.size
            i0 = max(int(np.searchsorted(c.ys, 0.0, side="left")) - 1, 0)

            def ok(i: int) -> bool:
                return bool(c.grid_bound(i, i + 1, upper=True)[2][0] <= target)

            if ok(i0):
                i = i0
            elif not ok(n - 1):
                i = n
            else:
                lo, hi = i0, n - 1  # bound(lo) > target >= bound(hi)
                while hi - lo > 1:
                    mid = (lo + hi) // 2
                    lo, hi = (lo, mid) if ok(mid) else (mid, hi)
                i = hi
            self._cache[key] = (i0, i)
        return self._cache[key]

    def _invert(self, c: ComposedPLD | SpectralPLD, target: float, *, upper: bool,
                exact: bool = False) -> float:
        """eps at which the engine's bound on the composed curve crosses ``target``, from
        the bound at a few grid points (:meth:`ComposedPLD.grid_bound`).

        Upper (``upper=True``): the first grid point ``e >= 0`` with ``bound(e) <= target``
        (the true curve is non-increasing, so it is below target from there on). Lower: the
        last grid point where ``bound > target``, searched below the first point where the
        upper bound is ``<= target`` (the lower bound is at most the upper one at every
        point, so none lies above it). Either is within one mesh ``h`` of the crossing, on
        the safe side. With ``exact=True`` (estimates only) the crossing inside the
        interval is solved in closed form, the curve of a discrete law being ``A - B e^eps``
        between grid points (Koskela et al. 2020, eq. (4.2)).
        """
        if target <= 0:
            return math.inf
        if target >= 1:
            return 0.0
        if isinstance(c, SpectralPLD):  # the curve at any eps: no grid to round to
            if exact:
                return c.epsilon_estimate(target)
            if upper:
                return c.epsilon_bound(target, upper=True)
            # searched downwards from the upper bound's crossing (as on the grid below)
            return c.epsilon_bound(target, upper=False, below=c.epsilon_bound(target, upper=True))
        i0, i = self._first_at_most(c, target)
        ys = c.ys
        if not upper:
            # any eps at which a lower bound on the curve is above target is below the true
            # eps(target): the last such grid point (the lower curve need not be monotone:
            # below a tilt's centre the charge for amplified rounding can sink it to 0), in
            # blocks downwards from the upper bound's crossing
            stop, block = i, 4096
            while stop > i0:
                start = max(stop - block, i0)
                first, _, dg = c.grid_bound(start, stop, upper=False)
                above = np.nonzero(dg > target)[0]
                if above.size:
                    return max(float(ys[first + int(above[-1])]), 0.0)
                stop, block = start, 4 * block
            return c.epsilon_bound(target, upper=False) if ys[i0] > 0 else 0.0
        if i >= ys.size:
            return math.inf
        if i == i0:
            if ys[i0] <= 0:  # the bound is already below target at some eps <= 0
                return 0.0
            return c.epsilon_bound(target, upper=upper)  # crossing below the window
        a, b = float(ys[i - 1]), float(ys[i])
        if not exact:
            return max(b, 0.0)
        d_a, d_b = (float(x) for x in c.grid_bound(i - 1, i + 1, upper=True)[2])
        e = b
        if d_a > d_b and d_a > target:
            frac = (d_a - target) / (d_a - d_b)
            e = min(max(a + math.log1p(frac * math.expm1(b - a)), a), b)
        return max(e, 0.0)

    def _eps_once(self, delta: float, de: float, t: float) -> tuple[float, float, float, dict]:
        ups, los, ests = [], [], []
        info: dict = {}
        for direction in self._directions():
            plan = self._plan(de, t, direction)
            comps = []
            if delta < _TILT_BELOW or self._spectral(de, t, direction):
                # below the FFT's rounding the untilted answer is noise: tilt towards the
                # saddle-point estimate of the answer on the discretized laws' own CGF
                # (Alghamdi et al., eqs. (50), (60)), then once more towards the answer that
                # tilt gives; every composition gives valid bounds, the best are kept. The
                # untilted composition is only made if there is no saddle point.
                # (on the log-MGF's coarsened copy: only the tilt depends on it)
                e0, _ = saddle_point_eps(self._log_mgf(de, t, direction).searcher(),
                                         math.log(delta))
                if not math.isfinite(e0):
                    comps = [self._composed(de, t, direction)[0]]
                    e0 = self._invert(comps[0], delta, upper=True, exact=True)
                if math.isfinite(e0) and e0 > 0:
                    comps = [self._composed_for(de, t, direction, e0)[0]]
                    e1 = self._invert(comps[0], delta, upper=True, exact=True)
                    if math.isfinite(e1) and e1 > 0 and abs(e1 - e0) > 1e-3 * e0:
                        comps.append(self._composed_for(de, t, direction, e1)[0])
                    info["tilt"] = max([info.get("tilt", 0.0)] + [x.lam for x in comps])
                    if delta >= _TILT_BELOW:  # the untilted one (made already) counts too
                        untilted = self._composed(de, t, direction)[0]
                        if all(x is not untilted for x in comps):
                            comps.insert(0, untilted)
            if not comps:
                comps = [self._composed(de, t, direction)[0]]
            ups.append(min(self._invert(x, delta - plan["eta_up"], upper=True) for x in comps) + t)
            los.append(max(max(self._invert(x, delta + plan["eta_low"], upper=False) for x in comps)
                           - t, 0.0))
            ests.append(self._invert(comps[-1], delta, upper=True, exact=True))
            c = comps[-1]
            info["mesh"] = plan["h"]
            info["fft_points"] = max(info.get("fft_points", 0), _points(c))
            if isinstance(c, SpectralPLD):
                info["frequencies"] = max(info.get("frequencies", 0), c.spectrum.size)
            info["coupling_error"] = max(info.get("coupling_error", 0.0), plan["coupling"])
            info["eta_up"] = max(info.get("eta_up", 0.0), plan["eta_up"])
            info["eta_low"] = max(info.get("eta_low", 0.0), plan["eta_low"])
            info["domain"] = (float(c.ys[0]), float(c.ys[-1]))
        return max(ups), max(los), max(ests), info

    def _epsilon_of(self, delta: float) -> EpsilonResult:
        """Certified bracket ``[eps_low, eps_up]`` on the smallest eps with
        ``delta(eps) <= delta`` (Gopi et al. 2021, Theorem 5.5 read for eps):

        ``eps_up = eps~_up(delta - eta_up) + t`` and
        ``eps_low = eps~_low(delta + eta_low) - t``, where ``eps~`` inverts the engine's
        upper/lower bound on the composed discrete curve (rounded to the grid point on the
        safe side, at most one mesh away), ``eta`` (<= ``delta_error``)
        collects the coupling and truncation terms and ``t <= eps_error`` is the coupling
        radius. ``t`` starts at ``0.95 eps_error`` and is lowered if needed so that
        ``eps_up - eps_low <= 2 eps_error`` (the delta shift by ``eta`` widens the bracket a
        little beyond ``2 t``).
        """
        delta = v.delta_value("delta", delta)
        t0 = time.perf_counter()
        if not self.terms:
            return EpsilonResult(0.0, delta, 0.0, 0.0, self.name, certified=True, estimate=0.0)
        de = _query_delta_error(self.delta_error, delta)
        t = _T_START * self.eps_error
        self._deadline = self.budget.deadline()
        for _ in progress_bar(range(4), desc="PRV: coupling radius", unit="try"):
            self._check_deadline()
            up, lo, est, info = self._eps_once(delta, de, t)
            excess = (up - lo) - 2 * t
            if not math.isfinite(up) or up - lo <= 2 * self.eps_error or lo == 0.0:
                break
            t_new = self.eps_error - 0.6 * excess
            if t_new <= 0.25 * self.eps_error:
                break
            t = min(t_new, 0.9 * t)
        check_bracket(lo, up, f"eps at delta={delta!r}", self.name)
        info.update({"delta_error": de, "eps_error": self.eps_error, "coupling_radius": t,
                     "seconds": time.perf_counter() - t0})
        return EpsilonResult(up, delta, lo, up, self.name, certified=True, estimate=est,
                             details=info)

    def _delta_of(self, eps) -> DeltaResult:
        """Certified bracket on ``delta(eps)`` (eps a number or an array; Gopi et al. 2021,
        Theorem 5.5, eq. (8)): ``[delta~_low(eps + eps_error) - eta_low,
        delta~_up(eps - eps_error) + eta_up]`` with ``eta <= delta_error``."""
        e, scalar = self._eps_array(eps)
        t0 = time.perf_counter()
        if not self.terms:
            z = 0.0 if scalar else np.zeros_like(e)
            return DeltaResult(z, eps, z, z, self.name, certified=True, estimate=z)
        de = self.delta_error
        t = self.eps_error
        self._deadline = self.budget.deadline()
        # arrays, floats for a scalar query
        up: Any = np.zeros_like(e)
        lo: Any = np.zeros_like(e)
        est: Any = np.zeros_like(e)
        info: dict = {"delta_error": de, "eps_error": t}
        for direction in self._directions():
            c, plan = self._composed(de, t, direction)
            u_d = c.delta_bound(e - t, upper=True)
            l_d = c.delta_bound(e + t, upper=False)
            e_d = c.delta_bound(e, upper=True)
            small = np.nonzero(u_d < (_TILT_SPECTRAL if isinstance(c, SpectralPLD)
                                      else _TILT_BELOW))[0]
            if small.size:  # recompute tiny values on compositions tilted towards them
                groups: dict = {}
                # at most 8 tilts: each tiny value uses the tilt of the nearest representative
                reps = np.unique(np.quantile(e[small], np.linspace(0.0, 1.0, min(small.size, 8)),
                                             method="nearest"))
                comps = [self._composed_for(de, t, direction, float(r))[0]
                         for r in progress_bar(reps, desc="PRV: tilted compositions",
                                               unit="tilt")]
                for j in small:
                    ct = comps[int(np.argmin(np.abs(reps - e[j])))]
                    groups.setdefault(id(ct), (ct, []))[1].append(j)
                for ct, idx in groups.values():
                    idx = np.asarray(idx)
                    u_d[idx] = ct.delta_bound(e[idx] - t, upper=True)
                    l_d[idx] = ct.delta_bound(e[idx] + t, upper=False)
                    e_d[idx] = ct.delta_bound(e[idx], upper=True)
                    info["tilt"] = max(info.get("tilt", 0.0), ct.lam)
            up = np.maximum(up, np.minimum(u_d + plan["eta_up"], 1.0))
            lo = np.maximum(lo, np.maximum(l_d - plan["eta_low"], 0.0))
            est = np.maximum(est, e_d)
            info["mesh"] = plan["h"]
            info["fft_points"] = max(info.get("fft_points", 0), _points(c))
            if isinstance(c, SpectralPLD):
                info["frequencies"] = max(info.get("frequencies", 0), c.spectrum.size)
        check_bracket(lo, up, "delta at the eps asked", self.name)
        info["seconds"] = time.perf_counter() - t0
        if scalar:
            up, lo, est = float(up[0]), float(lo[0]), float(est[0])
        return DeltaResult(up, eps, lo, up, self.name, certified=True, estimate=est, details=info)


def _query_delta_error(delta_error: float, delta: float) -> float:
    """The delta error spent by an ``epsilon(delta)`` query,
    ``_DE_EPS * min(delta_error, delta / 1000)``, or a refusal naming delta where that is
    not a normal float (its shares -- down to a sixteenth, divided by the number of steps
    for the truncation -- must stay representable, or the mesh and the tails degenerate).
    With delta >= DELTA_MIN = 1e-300 it is at least 2.5e-304."""
    de = _DE_EPS * min(delta_error, delta / 1000.0)
    if not de >= 1e3 * sys.float_info.min:
        raise ValueError(f"delta must be >= {4e6 * sys.float_info.min:.3g} for the prv "
                         f"accountant (its delta error delta/4000 must be a normal float), "
                         f"got {delta!r}")
    return de


def _points(c: ComposedPLD | SpectralPLD) -> int:
    """Points of the composition's window (evaluated at a few frequencies when spectral)."""
    return c.n if isinstance(c, SpectralPLD) else c.probs.size
