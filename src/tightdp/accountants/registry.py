"""Accountants by name: what the command line and the comparison tools choose from."""

from __future__ import annotations

from collections.abc import Callable

from .base import Accountant

__all__ = ["ACCOUNTANTS", "make_accountant", "CERTIFYING"]


def _pld(o: dict) -> Accountant:
    from .pld import PLDAccountant
    return PLDAccountant(rtol=o.get("rtol") or 1e-3)


def _rdp(o: dict) -> Accountant:
    from .rdp import RDPAccountant
    return RDPAccountant()


def _gdp(o: dict) -> Accountant:
    from .gdp import GDPAccountant
    return GDPAccountant()


def _fft(o: dict) -> Accountant:
    from .fft import FFTAccountant
    return FFTAccountant(L=o.get("L"), n=o.get("n"))  # unset L: widened as needed


def _prv(o: dict) -> Accountant:
    from .prv import PRVAccountant
    return PRVAccountant(eps_error=o.get("eps_error") or 0.01,
                         delta_error=o.get("delta_error") or 1e-9)


def _spa(o: dict) -> Accountant:
    from .spa import SaddlePointAccountant
    return SaddlePointAccountant(method=o.get("spa_method") or "msd1")


#: name -> (factory, one-line description)
ACCOUNTANTS: dict[str, tuple[Callable[[dict], Accountant], str]] = {
    "pld": (_pld, "certified PLD accountant (connect-the-dots upper, dominated lower)"),
    "prv": (_prv, "PRV accountant, Gopi et al. 2021 (certified within eps_error/delta_error)"),
    "rdp": (_rdp, "Renyi DP (moments accountant): a certified upper bound, no lower bound"),
    "fft": (_fft, "Fourier accountant, Koskela et al. 2020 (an approximation with error "
                  "estimates)"),
    "spa": (_spa, "saddle-point accountant, Alghamdi et al. (approximation; certified "
                  "moments bound as upper)"),
    "gdp": (_gdp, "Gaussian DP: exact for Gaussian compositions, CLT approximation for "
                  "subsampling"),
}

#: accountants whose headline number is a certified upper bound
CERTIFYING = ("pld", "prv", "rdp")


def make_accountant(name: str, **options) -> Accountant:
    """A fresh accountant by name (see :data:`ACCOUNTANTS`); options: rtol, L, n,
    eps_error, delta_error, spa_method."""
    key = str(name).strip().lower()
    if key not in ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {', '.join(ACCOUNTANTS)}, got {name!r}")
    return ACCOUNTANTS[key][0](options)
