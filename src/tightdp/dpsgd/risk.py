"""Attack success of DP-SGD: the front door :func:`dpsgd_risk`, the trade-off curve of one
DP-SGD setting (:func:`tightdp.risk.tradeoff`; calibration to a risk target:
:func:`tightdp.dpsgd.calibrate.calibrate_noise_risk`)."""

from __future__ import annotations

from .. import _validate as v
from .._defaults import DEFAULT_RTOL
from ..risk import DEFAULT_FPR, DEFAULT_TOL, TradeoffResult, tradeoff
from .epsilon import ACCOUNTANT_OPTIONS, composed
from .setting import dpsgd_setting

__all__ = ["dpsgd_risk"]


@v.known_keywords(*ACCOUNTANT_OPTIONS)
def dpsgd_risk(*, noise_multiplier: float, fpr=DEFAULT_FPR,
               sampling_rate: float | None = None, steps: int | None = None,
               epochs: float | None = None, batch_size: int | None = None,
               dataset_size: int | None = None, sampling: str = "poisson",
               steps_per_epoch: int | None = None, selected: int | None = None,
               max_batch_size: int | None = None, accountant: str = "pld",
               rtol: float = DEFAULT_RTOL, tol: float = DEFAULT_TOL, max_memory=None,
               max_seconds=None, **accountant_options) -> TradeoffResult:
    """Certified TPR of the best membership attack at ``fpr`` and its advantage, for the
    DP-SGD setting of :func:`tightdp.dpsgd_epsilon` (same parameters; ``fpr`` in place of
    ``delta``; ``tol`` the TPR bracket's width to aim for; every sampling scheme, and
    ``neighboring=`` where the sampling allows another relation). The curve is that of the
    setting's relation (Dong, Roth & Su 2022, Prop. 2.12; see :mod:`tightdp.risk`).

    Examples
    --------
    >>> r = dpsgd_risk(sampling_rate=0.01, noise_multiplier=1.0, steps=100, fpr=0.01)
    >>> bool(r.tpr_lower[0] <= r.tpr_upper[0] < 0.05)
    True
    """
    setting = dpsgd_setting(noise_multiplier=noise_multiplier, sampling_rate=sampling_rate,
                            steps=steps, epochs=epochs, batch_size=batch_size,
                            dataset_size=dataset_size, sampling=sampling,
                            steps_per_epoch=steps_per_epoch, selected=selected,
                            max_batch_size=max_batch_size)
    acc = composed(setting, accountant=accountant, rtol=rtol, max_memory=max_memory,
                   max_seconds=max_seconds, **accountant_options)
    r = tradeoff(acc, fpr=fpr, tol=tol)
    r.details = {**r.details, "mechanism": setting.describe(),
                 "sampling": setting.sampling.kind, "steps": setting.steps}
    return r

