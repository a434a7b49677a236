"""Example-level (eps, delta) of DP-SGD: the front doors for the common case.

``dpsgd_epsilon`` (eps at ``delta``) and ``dpsgd_delta`` (delta at ``epsilon``) account the
rounds of one validated DP-SGD setting (:mod:`tightdp.dpsgd.setting`: Poisson, fixed-batch,
random-allocation or truncated Poisson sampling under add/remove adjacency, sampling without /
with replacement under the substitute relation, shuffling under replace-special), every
iterate released, with the named accountant -- by default the
certified :class:`~tightdp.accountants.PLDAccountant`. Under add/remove adjacency the curve
is the maximum over both directions.
"""

from __future__ import annotations

import numpy as np

from .. import _validate as v
from .._defaults import DEFAULT_RTOL
from ..accountants.base import Accountant
from ..accountants.registry import OPTIONS, make_accountant
from ..results import DeltaResult, EpsilonResult
from .setting import DPSGDSetting, dpsgd_setting

__all__ = ["dpsgd_epsilon", "dpsgd_delta", "dpsgd_accountant", "composed", "RELATION_NOTE"]

#: the note of an answer under replace_special (shuffling's default relation)
RELATION_NOTE = ("under replace_special (zero-out: neighbouring datasets differ in one "
                 "example replaced by a null one with a zero gradient), not add/remove")

#: the keyword arguments the front doors pass on to the accountant (``**accountant_options``)
ACCOUNTANT_OPTIONS = tuple(sorted({o for opts in OPTIONS.values() for o in opts})) + (
    "neighboring",)


def composed(setting: DPSGDSetting, *, accountant: str = "pld", rtol: float = DEFAULT_RTOL,
             max_memory=None, max_seconds=None, **accountant_options) -> Accountant:
    """The accountant ``accountant`` (see :func:`tightdp.accountants.registry.make_accountant`
    for the options) holding the rounds of ``setting`` (``setting.count`` compositions of
    its mechanism: rounds, or epochs), under the neighbouring relation of its sampling
    (:attr:`~tightdp.dpsgd.setting.Sampling.neighboring`), or under a ``neighboring`` option
    naming another relation the sampling allows (:attr:`~tightdp.dpsgd.setting.Sampling.
    relations`: Poisson's and shuffle's ``replace_one``, random allocation's
    ``replace_special``); any
    other relation is refused: one accountant holds one relation."""
    relation = setting.sampling.relation(accountant_options.pop("neighboring", None))
    acc = make_accountant(accountant, rtol=rtol, max_memory=max_memory,
                          max_seconds=max_seconds, neighboring=relation, **accountant_options)
    return acc.compose(setting.mechanism(relation), setting.count)


def _query(want: str, *, accountant, rtol, max_memory, max_seconds, accountant_options,
           **arguments):
    """``want`` ("epsilon" at ``delta``, or "delta" at ``epsilon``) of the setting of the other
    ``arguments`` (a front door's own parameters, passed on whole), with the accountant."""
    x = arguments.pop("delta" if want == "epsilon" else "epsilon")
    dpsgd = dpsgd_setting(**arguments)
    if want == "epsilon":
        x = v.delta_value("delta", x)
    elif np.any(v.eps_values("epsilon", x) < 0):
        raise ValueError(f"epsilon must be in [0, inf), got {x!r}")
    acc = composed(dpsgd, accountant=accountant, rtol=rtol, max_memory=max_memory,
                   max_seconds=max_seconds, **accountant_options)
    r = acc.epsilon(x) if want == "epsilon" else acc.delta(x)
    r.details = {**r.details, "mechanism": dpsgd.describe(),
                 "sampling": dpsgd.sampling.kind, "steps": dpsgd.steps}
    if dpsgd.sampling.per_epoch:
        r.details["epochs"] = dpsgd.count
    if acc.neighboring == "replace_special":
        r.note = "; ".join(p for p in (r.note, RELATION_NOTE) if p)
    return r


@v.known_keywords(*ACCOUNTANT_OPTIONS)
def dpsgd_epsilon(*, noise_multiplier: float, delta: float, sampling_rate: float | None = None,
                  steps: int | None = None, epochs: float | None = None,
                  batch_size: int | None = None, dataset_size: int | None = None,
                  sampling: str = "poisson", steps_per_epoch: int | None = None,
                  selected: int | None = None, max_batch_size: int | None = None,
                  accountant: str = "pld", rtol: float = DEFAULT_RTOL, max_memory=None,
                  max_seconds=None, **accountant_options) -> EpsilonResult:
    """eps of DP-SGD at ``delta``: a certified upper bound with the default PLD accountant
    (Koskela, Jälkö, Honkela 2020, "Computing tight differential privacy guarantees using
    FFT", Sec. 6.1, for Poisson; Ganesh 2024, "Tight group-level DP guarantees for DP-SGD with
    sampling via mixture of Gaussians mechanisms", Thm 3.3 with k = 1, for fixed batch).

    Parameters
    ----------
    noise_multiplier : sigma > 0.
    delta : target delta in (0, 1).
    sampling_rate : q in (0, 1] (poisson, without_replacement); or
    batch_size, dataset_size : B >= 1 and n >= B (needed for fixed_batch, with_replacement).
    steps, epochs : rounds (integer >= 0) or epochs (> 0), exactly one; see
        :func:`tightdp.dpsgd.setting.steps_of_epochs` for the rounding (up).
    sampling : "poisson" (default), "fixed_batch", "without_replacement", "with_replacement",
        "random_allocation", "shuffle" or "truncated_poisson" (see
        :mod:`tightdp.dpsgd.setting` for each one's reference and relation).
    steps_per_epoch, selected : random_allocation and shuffle: the rounds of one epoch (or
        give batch_size and dataset_size), and for random_allocation the rounds each example
        takes part in (default 1).
    max_batch_size : truncated_poisson: the largest batch kept.
    accountant : "pld" (default), "prv", "rdp", "fft", "spa" or "gdp".
    rtol : relative width of the certified bracket (pld).
    max_memory, max_seconds : the budget of the query (see :mod:`tightdp.budget`).
    **accountant_options : ``eps_error``, ``delta_error`` (prv), ``L``, ``n`` (fft),
        ``method`` (spa: "msd1", "msd0" or "clt"); ``neighboring``: another relation the
        sampling allows (shuffle: "replace_one"; random_allocation: "replace_special").

    Returns
    -------
    EpsilonResult with ``details["mechanism"]`` describing the pair of one round (one epoch
    for random_allocation and shuffle, with ``details["epochs"]``) and
    ``details["neighboring"]`` the relation.

    Examples
    --------
    >>> r = dpsgd_epsilon(sampling_rate=0.01, noise_multiplier=1.0, steps=100, delta=1e-5,
    ...                   rtol=1e-2)
    >>> r.lower <= r.epsilon == r.upper
    True
    """
    return _query("epsilon", **locals())


@v.known_keywords(*ACCOUNTANT_OPTIONS)
def dpsgd_delta(*, noise_multiplier: float, epsilon: float,
                sampling_rate: float | None = None, steps: int | None = None,
                epochs: float | None = None, batch_size: int | None = None,
                dataset_size: int | None = None, sampling: str = "poisson",
                steps_per_epoch: int | None = None, selected: int | None = None,
                max_batch_size: int | None = None, accountant: str = "pld",
                rtol: float = DEFAULT_RTOL, max_memory=None, max_seconds=None,
                **accountant_options) -> DeltaResult:
    """delta of DP-SGD at ``epsilon`` (one value or an array): the setting and accountant of
    :func:`dpsgd_epsilon`, queried the other way (a certified upper bound with PLD).

    Examples
    --------
    >>> r = dpsgd_delta(sampling_rate=0.01, noise_multiplier=1.0, steps=100, epsilon=1.0,
    ...                 rtol=1e-2)
    >>> r.lower <= r.delta == r.upper
    True
    """
    return _query("delta", **locals())


@v.known_keywords(*ACCOUNTANT_OPTIONS)
def dpsgd_accountant(*, noise_multiplier: float, sampling_rate: float | None = None,
                     steps: int | None = None, epochs: float | None = None,
                     batch_size: int | None = None, dataset_size: int | None = None,
                     sampling: str = "poisson", steps_per_epoch: int | None = None,
                     selected: int | None = None, max_batch_size: int | None = None,
                     accountant: str = "pld", rtol: float = DEFAULT_RTOL, max_memory=None,
                     max_seconds=None, **accountant_options) -> Accountant:
    """The accountant :func:`dpsgd_epsilon` and :func:`dpsgd_delta` query for the same
    arguments (less the target): the rounds of the setting composed, under the neighbouring
    relation of its sampling. Saved (:func:`tightdp.save`), it is the spec file of the
    setting, which ``tightdp epsilon|delta|compare|calibrate --spec FILE`` read back
    (``tightdp spec`` writes it from the command line).

    Examples
    --------
    >>> acc = dpsgd_accountant(sampling_rate=0.01, noise_multiplier=1.0, steps=100, rtol=1e-2)
    >>> acc.total_count, acc.neighboring
    (100, 'add_or_remove_one')
    """
    setting = dpsgd_setting(noise_multiplier=noise_multiplier, sampling_rate=sampling_rate,
                            steps=steps, epochs=epochs, batch_size=batch_size,
                            dataset_size=dataset_size, sampling=sampling,
                            steps_per_epoch=steps_per_epoch, selected=selected,
                            max_batch_size=max_batch_size)
    return composed(setting, accountant=accountant, rtol=rtol, max_memory=max_memory,
                    max_seconds=max_seconds, **accountant_options)
