"""Attack success of DP-SGD: the front door :func:`dpsgd_risk` (the trade-off curve of one
DP-SGD setting, :func:`tightdp.risk.tradeoff`) and the risk targets of calibration."""

from __future__ import annotations

import math
import time

from .._defaults import DEFAULT_RTOL
from ..risk import DEFAULT_TOL, RiskTarget, TradeoffResult, calibrate_noise_to_risk, tradeoff
from .calibrate import CalibrationResult
from .epsilon import composed
from .setting import dpsgd_setting

__all__ = ["dpsgd_risk", "calibrate_noise_risk"]


def dpsgd_risk(*, noise_multiplier: float, fpr=(1e-3, 1e-2, 1e-1),
               sampling_rate: float | None = None, steps: int | None = None,
               epochs: float | None = None, batch_size: int | None = None,
               dataset_size: int | None = None, sampling: str = "poisson",
               accountant: str = "pld", rtol: float = DEFAULT_RTOL, tol: float = DEFAULT_TOL,
               max_memory=None, max_seconds=None, **accountant_options) -> TradeoffResult:
    """Certified TPR of the best membership attack at ``fpr`` and its advantage, for the
    DP-SGD setting of :func:`tightdp.dpsgd_epsilon` (same parameters; ``fpr`` in place of
    ``delta``; ``tol`` the TPR bracket's width to aim for). The curve is that of the
    setting's relation (Dong, Roth & Su 2022, Prop. 2.12; see :mod:`tightdp.risk`).

    Examples
    --------
    >>> r = dpsgd_risk(sampling_rate=0.01, noise_multiplier=1.0, steps=100, fpr=0.01)
    >>> bool(r.tpr_lower[0] <= r.tpr_upper[0] < 0.05)
    True
    """
    setting = dpsgd_setting(noise_multiplier=noise_multiplier, sampling_rate=sampling_rate,
                            steps=steps, epochs=epochs, batch_size=batch_size,
                            dataset_size=dataset_size, sampling=sampling)
    acc = composed(setting, accountant=accountant, rtol=rtol, max_memory=max_memory,
                   max_seconds=max_seconds, **accountant_options)
    r = tradeoff(acc, fpr=fpr, tol=tol)
    r.details = {**r.details, "mechanism": setting.describe(),
                 "sampling": setting.sampling.kind, "steps": setting.steps}
    return r


def calibrate_noise_risk(*, tpr: float | None = None, fpr: float | None = None,
                         advantage: float | None = None, sampling_rate: float | None = None,
                         steps: int | None = None, epochs: float | None = None,
                         batch_size: int | None = None, dataset_size: int | None = None,
                         sampling: str = "poisson", accountant: str = "pld",
                         sigma_max: float = 1e4, max_memory=None, max_seconds=None
                         ) -> CalibrationResult:
    """Smallest noise multiplier (to 0.2% relative) whose certified trade-off curve meets
    "TPR <= ``tpr`` at FPR ``fpr``" or "advantage <= ``advantage``", for the DP-SGD setting
    of :func:`tightdp.dpsgd.setting.dpsgd_setting` (any sampling scheme: the search only
    changes the noise multiplier, :meth:`DPSGDSetting.with_noise`). The sigma returned meets
    the target by the certified upper bound; ``details["sigma_infeasible_below"]`` is a sigma
    whose certified curve misses it (see :func:`tightdp.risk.calibrate_noise_to_risk`)."""
    if str(accountant).lower() != "pld":
        raise ValueError(f"accountant must be pld to calibrate to a risk target (its certified "
                         f"two-sided curve), got {accountant!r}")
    goal = RiskTarget.make(tpr=tpr, fpr=fpr, advantage=advantage)
    base = dpsgd_setting(noise_multiplier=1.0, steps=steps, epochs=epochs,
                         sampling_rate=sampling_rate, batch_size=batch_size,
                         dataset_size=dataset_size, sampling=sampling)
    if base.steps < 1:
        raise ValueError(f"steps must be an integer >= 1, got {base.steps!r}")
    t0 = time.perf_counter()
    seen: dict = {}

    def accountant_of(sigma: float):
        return composed(base.with_noise(sigma), accountant="pld", max_memory=max_memory,
                        max_seconds=max_seconds)

    lo, hi, r = calibrate_noise_to_risk(accountant_of, goal, sigma_max=sigma_max,
                                        start=_clt_sigma(goal.gdp_mu(), base), queries=seen)
    return CalibrationResult(
        hi, base.sampling.sampling_rate, base.steps, math.nan, math.nan, math.nan, None,
        "pld", len(seen), time.perf_counter() - t0,
        {"sigma_infeasible_below": lo, "target": goal.describe(),
         "tpr_lower": float(r.tpr_lower[0]), "tpr_upper": float(r.tpr_upper[0]),
         "advantage_lower": r.advantage_lower, "advantage_upper": r.advantage_upper,
         "fpr": goal.fpr, "tpr": goal.tpr, "advantage": goal.advantage})


def _clt_sigma(mu: float, setting) -> float:
    """A starting guess: the sigma at which the central limit theorem's mu of ``steps``
    Poisson-subsampled Gaussian steps, ``q sqrt(T (e^{1/sigma^2} - 1))``, is ``mu`` (Dong,
    Roth & Su, Cor. 5.4), within [0.05, 100]."""
    q, t = setting.sampling.sampling_rate, setting.steps
    ratio = (mu / (q * math.sqrt(t))) ** 2 if q > 0 and mu > 0 else 1.0
    return min(max(1 / math.sqrt(math.log1p(ratio)), 0.05), 100.0)
