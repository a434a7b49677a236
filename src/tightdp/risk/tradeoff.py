"""The trade-off curve of an accountant's composition and the attack-success measures on it.

:func:`tradeoff` reads the curve off the same certified discretized pairs as the PLD
accountant's eps(delta) (:meth:`tightdp.PLDAccountant.composed_laws`: the dominating
connect-the-dots pairs and the dominated lowered chords, composed by the one FFT engine, every
truncation and rounding charged in the direction of its bound): each direction's composed
upper pair gives certified upper bounds on its profile ``delta(eps)`` at the points of its
grid, the lower pair certified lower bounds, and :mod:`tightdp.risk.curve` turns them into
``beta_lower <= beta(alpha) <= beta_upper`` (Dong, Roth & Su 2022, Prop. 2.12). A dominating
pair's curve lies below the true one and a dominated pair's above (Blackwell order, kept by
composition: Dong, Roth & Su, Lemma C.3). The relation's curve is the symmetrization of the
directions' (:mod:`tightdp.risk.curve`, eq. (2)); each direction's own curve is in
``details["directions"]``.

Other accountants are read through their public ``delta(eps)`` on a grid of eps (a certified
curve where they certify both sides: prv; the upper side only otherwise).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from .. import _validate as v
from ..accountants.base import Accountant
from ..accountants.pld import PLDAccountant
from ..budget import BudgetExceeded
from ..results import Result, check_bracket
from .curve import Profile, profile_samples

__all__ = ["TradeoffResult", "tradeoff", "risk_values", "DEFAULT_TOL", "DEFAULT_FPR"]

#: the default largest width of the TPR bracket at the FPRs asked (absolute)
DEFAULT_TOL = 1e-3
#: the default FPRs of a result
DEFAULT_FPR = (1e-3, 1e-2, 1e-1)
#: the largest spacing of the relation's eps samples (a coarse skeleton over the windows)
SKELETON = 0.05


def risk_values(name: str, x, *, closed: bool = True) -> np.ndarray:
    """``x`` as a float array of probabilities: in [0, 1] (``closed``) or (0, 1); one-line
    ValueError naming ``name`` otherwise."""
    a = np.asarray(x, dtype=float)
    ok = np.isfinite(a) & ((a >= 0) & (a <= 1) if closed else (a > 0) & (a < 1))
    if a.size == 0 or not np.all(ok):
        rng = "[0, 1]" if closed else "(0, 1)"
        raise ValueError(f"{name} must be in {rng}, got {x!r}")
    return a


@dataclass
class TradeoffResult(Result):
    """Certified attack-success bounds at the FPRs asked: ``tpr_lower <= TPR <= tpr_upper``
    of the best membership attack at false-positive rate ``fpr`` (``TPR = 1 - beta(fpr)``),
    and the advantage (largest TPR - FPR, the total variation distance). The curve itself
    answers :meth:`tpr`, :meth:`fnr`, :meth:`posterior`, :meth:`gdp_mu`, :meth:`delta`."""

    fpr: np.ndarray
    tpr_lower: np.ndarray
    tpr_upper: np.ndarray
    advantage_lower: float
    advantage_upper: float
    accountant: str
    neighboring: str
    seconds: float
    note: str = ""
    certified: bool = True
    details: dict = field(default_factory=dict)

    def attach(self, relation: Profile, directions: list[Profile]) -> TradeoffResult:
        """Keep the profiles the curve is read from (not part of :meth:`as_dict`)."""
        self.__dict__["profiles"] = (relation, directions)
        return self

    def _profile(self, direction: int | None) -> Profile:
        relation, dirs = self.__dict__["profiles"]
        if direction is None:
            return relation
        if not 0 <= int(direction) < len(dirs):
            raise ValueError(f"direction must be None or in [0, {len(dirs) - 1}] (0 remove, "
                             f"1 add), got {direction!r}")
        return dirs[int(direction)]

    def fnr(self, fpr, *, direction: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(beta_lower, beta_upper)`` at ``fpr`` (the relation's curve, or one direction's:
        0 remove, 1 add)."""
        return self._profile(direction).beta(risk_values("fpr", fpr).reshape(-1))

    def tpr(self, fpr, *, direction: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(tpr_lower, tpr_upper)`` of the best attack at ``fpr``."""
        lo, hi = self.fnr(fpr, direction=direction)
        return 1.0 - hi, 1.0 - lo

    def posterior(self, prior) -> tuple[np.ndarray, np.ndarray]:
        """Bounds on the success probability of the Bayes-optimal attacker guessing
        membership with prior ``prior`` in (0, 1): ``1 - min_alpha [pi f(alpha) + (1 - pi)
        alpha] = max(pi, 1 - pi) + min(pi, 1 - pi) delta(|log((1 - pi) / pi)|)`` (the
        conjugate of (1) in :mod:`tightdp.risk.curve` at ``e^eps = (1 - pi) / pi``, with the
        mirror identity of a symmetric curve; at pi = 1/2 it is (1 + TV) / 2)."""
        pi = risk_values("prior", prior, closed=False).reshape(-1)
        e = np.abs(np.log1p(-pi) - np.log(pi))
        lo, up = self._profile(None).delta(e)
        big, small = np.maximum(pi, 1 - pi), np.minimum(pi, 1 - pi)
        return big + small * lo, np.minimum(big + small * up, 1.0)

    def gdp_mu(self, *, alpha_min: float = 1e-6) -> tuple[float, float]:
        """``(mu_lower, mu_upper)``: the tightest Gaussian-DP curve below the true one on
        ``[alpha_min, 1 - alpha_min]`` has mu in this bracket; ``G_{mu_upper}`` lies below the
        certified lower curve there (see :meth:`tightdp.risk.curve.Profile.gdp_mu`)."""
        a = float(risk_values("alpha_min", alpha_min, closed=False))
        if not 0 < a < 0.5:
            raise ValueError(f"alpha_min must be in (0, 0.5), got {alpha_min!r}")
        return self._profile(None).gdp_mu(a)

    def delta(self, epsilon) -> tuple[np.ndarray, np.ndarray]:
        """``(lower, upper)`` bounds on delta(epsilon) from the curve's samples (the
        conversion from the curve back to the privacy profile)."""
        e = np.asarray(v.eps_values("epsilon", epsilon), dtype=float)
        return self._profile(None).delta(e)

    def epsilon(self, delta) -> tuple[np.ndarray, np.ndarray]:
        """``(lower, upper)`` bounds on eps(delta) from the curve's samples (the conversion
        from the curve to eps(delta); a sample grid's precision, coarser than the
        accountant's own ``epsilon``)."""
        d = v.delta_value("delta", delta) if np.ndim(delta) == 0 else np.asarray(
            [v.delta_value("delta", x) for x in np.ravel(delta)])
        return self._profile(None).epsilon(d)

    def _repr_html_(self) -> str:
        from .._html import result_html
        rows = [(f"{a:.3g}", f"{lo:.4g}", f"{hi:.4g}")
                for a, lo, hi in zip(self.fpr, self.tpr_lower, self.tpr_upper, strict=True)]
        head = (f"advantage in [{self.advantage_lower:.4g}, {self.advantage_upper:.4g}] "
                f"({self.accountant}, {'certified' if self.certified else 'not certified'})")
        return result_html(head, ("FPR", "TPR lower", "TPR upper"), rows, self._plot_points())

    def _plot_points(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        a = np.geomspace(1e-4, 1.0, 60)
        lo, hi = self.tpr(a)
        return a, lo, hi


def _profiles(acc: PLDAccountant, d: float, *, log_tail: float, window_tail: float,
              eta: float) -> tuple[Profile, list[Profile]]:
    """The relation's profile and each direction's, on the grid ``d`` (module docstring)."""
    laws = acc.composed_laws(d, log_tail=log_tail, window_tail=window_tail)
    dirs, picks = [], []
    for up, lo in laws:
        # the grid points of both windows (a dominated law's window can reach further)
        start = min(up.ys[0], lo.ys[0])
        ys = start + d * np.arange(int(round((max(up.ys[-1], lo.ys[-1]) - start) / d)) + 1)
        du, dl = up.delta_bound(ys, upper=True), lo.delta_bound(ys, upper=False)
        keep = profile_samples(ys, du, dl, eta=eta, step=max(d, 0.02))
        check_bracket(dl[keep], du[keep], "delta on the risk grid", acc.name)
        dirs.append(Profile(ys[keep], du[keep], dl[keep], lo.inf_mass * (1 - 1e-12),
                            symmetric=False))
        picks.append(ys[keep])
    top = max(float(p[-1]) for p in picks)
    z = np.unique(np.concatenate([np.arange(0.0, max(top, 0.0) + SKELETON, SKELETON), *picks]))
    z = z[z >= 0]
    du = np.max([up.delta_bound(z, upper=True) for up, _ in laws], axis=0)
    dl = np.max([lo.delta_bound(z, upper=False) for _, lo in laws], axis=0)
    # the union of the directions' samples, thinned again on the relation's own profile
    keep = profile_samples(z, du, dl, eta=eta, step=SKELETON)
    z, du, dl = z[keep], du[keep], dl[keep]
    inf_lo = max(lo.inf_mass for _, lo in laws) * (1 - 1e-12)
    return Profile(z, du, dl, inf_lo, symmetric=True), dirs


def _pld_curve(acc: PLDAccountant, fpr: np.ndarray, tol: float
               ) -> tuple[Profile, list[Profile], dict]:
    """Profiles of ``acc`` on grids refined until the TPR bracket at ``fpr`` and the
    advantage's are within ``tol`` (or the budget stops it: the last grid that fitted)."""
    k = max(acc.total_count, 1)
    log_tail = min(math.log(tol) - math.log(1e4) - math.log(k), -25.0)
    window_tail = min(math.log(tol) - math.log(1e4), -20.0)
    eta = tol / 8
    d = math.sqrt(2.0 * tol / k)
    deadline = acc.budget.deadline()
    best, steps, widths, note = None, [], [], ""
    while True:
        try:
            rel, dirs = _profiles(acc, d, log_tail=log_tail, window_tail=window_tail,
                                  eta=eta)
        except BudgetExceeded as err:
            if best is None:
                raise
            note = f"the budget stopped the grid at {steps[-1]:.3g} ({err})"
            break
        best = (rel, dirs)
        steps.append(d)
        lo, hi = rel.beta(fpr)
        alo, ahi = rel.advantage()
        width = max(float(np.max(hi - lo)), ahi - alo)
        widths.append(width)
        if width <= tol:
            break
        if len(widths) > 2 and width > 0.7 * widths[-2]:
            note = (f"TPR bracket {width:.3g} wide (tol {tol:g}): it does not narrow with the "
                    "grid (the dominated pair's curve is loose here)")
            break
        if deadline.passed(0.5) or len(steps) >= 8:
            note = f"TPR bracket {width:.3g} wide (tol {tol:g}): the time budget stopped it"
            break
        d *= min(max(math.sqrt(0.5 * tol / width), 0.2), 0.8)
    return best[0], best[1], {"grid_step": steps[-1], "grid_steps_tried": steps,
                              "converged": not note, "note": note}


def _generic_curve(acc: Accountant, tol: float) -> tuple[Profile, list[Profile], dict]:
    """The relation's profile from ``acc.delta`` on an eps grid (any accountant): certified
    on the upper side where the accountant certifies, on the lower where it has a lower
    bound (else 0, which only widens the bracket)."""
    z = np.concatenate([np.linspace(0.0, 2.0, 801), np.linspace(2.0, 60.0, 1200)[1:]])
    r = acc.delta(z)
    up = np.asarray(r.upper if r.upper is not None else np.ones(z.size), dtype=float)
    lo = np.asarray(r.lower if r.lower is not None else np.zeros(z.size), dtype=float)
    rel = Profile(z, up, lo, 0.0, symmetric=True)
    note = r.note if r.lower is not None else "no lower bound from this accountant"
    return rel, [], {"converged": True, "note": note, "certified": bool(r.certified)}


def tradeoff(accountant: Accountant, *, fpr=DEFAULT_FPR, tol: float = DEFAULT_TOL
             ) -> TradeoffResult:
    """Certified bounds on the best membership attack's TPR at ``fpr`` and its advantage,
    for the composition ``accountant`` holds (see the module docstring).

    Parameters
    ----------
    accountant : a tightdp accountant holding the composition (PLD: the certified curve of
        its pairs; others: through their ``delta(eps)``).
    fpr : false-positive rates in [0, 1] (a number or an array).
    tol : the largest width of the TPR bracket to aim for (absolute, > 0).

    Examples
    --------
    >>> import tightdp as td
    >>> acc = td.PLDAccountant().compose(td.Gaussian(1.0), 1)
    >>> r = td.risk.tradeoff(acc, fpr=0.01)
    >>> bool(r.tpr_lower[0] <= 0.0919 <= r.tpr_upper[0])   # Phi(Phi^-1(0.01) + 1)
    True
    """
    if not isinstance(accountant, Accountant):
        raise ValueError(f"accountant must be a tightdp accountant, got {accountant!r}")
    t0 = time.perf_counter()
    a = risk_values("fpr", fpr).reshape(-1)
    tol = v.positive("tol", tol)
    if not accountant.terms:
        rel = Profile(np.zeros(1), np.zeros(1), np.zeros(1), 0.0, symmetric=True)
        dirs: list[Profile] = []
        info: dict = {"converged": True, "note": ""}
    elif isinstance(accountant, PLDAccountant):
        rel, dirs, info = _pld_curve(accountant, a, tol)
    else:
        rel, dirs, info = _generic_curve(accountant, tol)
    lo, hi = rel.beta(a)
    alo, ahi = rel.advantage()
    out = TradeoffResult(a, 1.0 - hi, 1.0 - lo, alo, ahi, accountant.name,
                         accountant.neighboring, time.perf_counter() - t0, info.pop("note"),
                         certified=info.pop("certified", None) is not False, details=info)
    out.details["directions"] = [
        {"direction": ("remove", "add")[i], "tpr_lower": (1 - p.beta(a)[1]).tolist(),
         "tpr_upper": (1 - p.beta(a)[0]).tolist()} for i, p in enumerate(dirs)]
    return out.attach(rel, dirs)
