"""Example-level (eps, delta) of DP-SGD: the front door for the common case.

``dpsgd_epsilon`` accounts ``steps`` rounds of DP-SGD with noise multiplier ``sigma`` (noise
standard deviation in units of the clip norm), every iterate released, under add/remove
adjacency (the maximum over both directions), with the certified
:class:`~tightdp.accountants.PLDAccountant`.

* ``sampling="poisson"``: each example joins a round's batch independently with probability
  ``q``; one round is the Poisson-subsampled Gaussian mechanism (Koskela et al. 2020,
  Sec. 6.1; Ganesh, Thm 3.1 with k = 1: sensitivity ``Binomial(1, q)``).
* ``sampling="fixed_batch"``: a uniformly random batch of exactly ``batch_size`` examples per
  round; the guarantee holds for every dataset of at least ``dataset_size`` examples. One round
  is dominated by the mixture of Gaussians with sensitivity ``2 * Hypergeom(B, n + 1, 1)``
  (Ganesh, Thm 3.3 with k = 1): sensitivity 2 (the added example replaces another in the batch)
  with probability ``B / (n + 1)``, else 0.
"""

from __future__ import annotations

import math

from .. import _validate as v
from ..accountants.pld import PLDAccountant
from ..results import EpsilonResult
from .group import _accounting_mechanism, _check_setting

__all__ = ["dpsgd_epsilon"]


def dpsgd_epsilon(sampling_rate: float | None, noise_multiplier: float, steps: int,
                  delta: float, sampling: str = "poisson", batch_size: int | None = None,
                  dataset_size: int | None = None, rtol: float = 1e-3) -> EpsilonResult:
    """Certified example-level eps of DP-SGD at ``delta`` (Koskela et al. 2020, Sec. 6.1 for
    Poisson; Ganesh, Thm 3.3 with k = 1 for fixed batch size).

    Parameters
    ----------
    sampling_rate : q in (0, 1] for Poisson sampling. For fixed batch it may be None, or
        ``batch_size / dataset_size`` (checked; the analysis uses B and n, not q).
    noise_multiplier : sigma > 0.
    steps : number of rounds T >= 0.
    delta : target delta in (0, 1).
    sampling : "poisson" or "fixed_batch".
    batch_size, dataset_size : B >= 1 and n >= B, fixed batch only.
    rtol : relative width of the certified bracket.

    Returns
    -------
    EpsilonResult with ``epsilon`` the certified upper bound, ``lower``/``upper`` the bracket
    and ``details["mechanism"]`` describing the per-round pair.

    Examples
    --------
    >>> r = dpsgd_epsilon(0.01, 1.0, 100, 1e-5, rtol=1e-2)
    >>> r.lower <= r.epsilon == r.upper
    True
    """
    s = sampling.strip().lower().replace("-", "_") if isinstance(sampling, str) else sampling
    if s == "fixed_batch" and sampling_rate is not None:
        q = v.probability_open_closed("sampling_rate", sampling_rate)
        if batch_size is None or dataset_size is None:
            raise ValueError("sampling='fixed_batch' needs batch_size (>= 1) and dataset_size "
                             "(>= batch_size)")
        b = v.count("batch_size", batch_size, minimum=1)
        n = v.count("dataset_size", dataset_size, minimum=1)
        if not math.isclose(q, b / n, rel_tol=1e-9):
            raise ValueError(f"sampling_rate must be None or batch_size / dataset_size "
                             f"(= {b / n!r}) for sampling='fixed_batch', got {sampling_rate!r}")
        sampling_rate = None
    _, s, q, b, n = _check_setting(1, sampling, sampling_rate, batch_size, dataset_size)
    sigma = v.positive("noise_multiplier", noise_multiplier)
    steps = v.count("steps", steps, minimum=0)
    delta = v.delta_value("delta", delta)
    rtol = v.positive("rtol", rtol)
    mech = _accounting_mechanism(1, s, sigma, q, b, n)
    r = PLDAccountant(rtol).compose(mech, steps).epsilon(delta)
    if s == "poisson":
        desc = {"kind": "poisson_subsampled_gaussian", "q": q, "sigma": sigma,
                "sensitivity": 1.0, "steps": steps}
    else:
        desc = {"kind": "mixture_of_gaussians", "standard_deviation": sigma,
                "sensitivities": [0.0, 2.0], "probabilities": [1 - b / (n + 1), b / (n + 1)],
                "steps": steps, "batch_size": b, "dataset_size": n}
    r.details = {**r.details, "mechanism": desc, "sampling": s}
    return r
