"""Accountants by name (tightdp.accountants.registry): options reach the accountant as given
(0 is a value, not "use the default"), and every accountant gets the resource budget."""

from __future__ import annotations

import pytest

from tightdp.accountants.registry import ACCOUNTANTS, OPTIONS, make_accountant
from tightdp.budget import DEFAULT_MAX_MEMORY, DEFAULT_MAX_SECONDS, Budget


@pytest.mark.parametrize("name,option", [
    ("pld", "rtol"), ("prv", "eps_error"), ("prv", "delta_error"), ("fft", "L"), ("fft", "n"),
])
def test_zero_reaches_the_accountants_validation(name, option):
    with pytest.raises(ValueError, match=f"^{option} must be"):
        make_accountant(name, **{option: 0})


@pytest.mark.parametrize("name", list(ACCOUNTANTS))
def test_budget_forwarded_to_every_accountant(name):
    acc = make_accountant(name, max_memory="500MB", max_seconds=7)
    assert acc.budget == Budget(500_000_000, 7.0)
    assert make_accountant(name).budget == Budget(DEFAULT_MAX_MEMORY, DEFAULT_MAX_SECONDS)


def test_options_given_are_used_none_is_the_default():
    assert make_accountant("pld", rtol=0.25).rtol == 0.25
    assert make_accountant("pld", rtol=None).rtol == 1e-3
    f = make_accountant("fft", L=3.0, n=1000)
    assert (f.L, f.n) == (3.0, 1000)
    p = make_accountant("prv", eps_error=0.5, delta_error=1e-6)
    assert (p.eps_error, p.delta_error) == (0.5, 1e-6)
    assert make_accountant("spa", method="clt").method == "clt"
    assert set(OPTIONS) == set(ACCOUNTANTS)


def test_unknown_option_is_an_error():
    with pytest.raises(ValueError, match="unknown accountant option 'rtl'"):
        make_accountant("pld", rtl=1e-2)
