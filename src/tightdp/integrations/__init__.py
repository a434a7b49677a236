"""Drop-in accountants for the training libraries users already have.

Each integration lives in its own module and imports its peer library only when imported:

- :mod:`tightdp.integrations.dp_accounting` -- ``from_dp_event`` and ``TightdpAccountant``, a
  ``dp_accounting.PrivacyAccountant`` (for dp_accounting, jax-privacy and TensorFlow Privacy
  code; the DpEvent conversion is in ``dp_events``); install with
  ``pip install tightdp[dp-accounting]``.
- :mod:`tightdp.integrations.opacus` -- ``TightAccountant``, registered as Opacus' accountant
  ``"tightdp"`` on import, and ``get_noise_multiplier``; ``pip install tightdp[opacus]``.
- :mod:`tightdp.integrations.jax_privacy` -- ``TightdpAccountantConfig``, a jax-privacy
  ``DpAccountantConfig``: ``dp_accountant_config=TightdpAccountantConfig()`` in jax-privacy's
  training accountants and calibration; ``pip install -e ".[jax]"``.
"""
