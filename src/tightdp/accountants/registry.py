"""Accountants by name: what the command line and the comparison tools choose from."""

from __future__ import annotations

from collections.abc import Callable

from .._defaults import DEFAULT_RTOL
from .base import Accountant

__all__ = ["ACCOUNTANTS", "make_accountant", "CERTIFYING", "OPTIONS"]


def _opt(o: dict, key: str, default):
    """Option ``key`` of ``o``, ``default`` only when it is absent or None: 0 is a value (the
    accountant's own validation then rejects it, naming the option), not "use the default"."""
    x = o.get(key)
    return default if x is None else x


def _budget(o: dict) -> dict:
    """The options every accountant takes: the resource budget (None: the default budget)
    and the neighbouring relation (None: add/remove)."""
    return {"max_memory": o.get("max_memory"), "max_seconds": o.get("max_seconds"),
            "neighboring": _opt(o, "neighboring", "add_or_remove_one")}


def _pld(o: dict) -> Accountant:
    from .pld import PLDAccountant
    return PLDAccountant(rtol=_opt(o, "rtol", DEFAULT_RTOL), **_budget(o))


def _rdp(o: dict) -> Accountant:
    from .rdp import RDPAccountant
    return RDPAccountant(**_budget(o))


def _gdp(o: dict) -> Accountant:
    from .gdp import GDPAccountant
    return GDPAccountant(**_budget(o))


def _fft(o: dict) -> Accountant:
    from .fft import FFTAccountant
    # unset L (None): the accountant widens its domain as needed
    return FFTAccountant(L=o.get("L"), n=o.get("n"), **_budget(o))


def _prv(o: dict) -> Accountant:
    from .prv import PRVAccountant
    return PRVAccountant(eps_error=_opt(o, "eps_error", 0.01),
                         delta_error=_opt(o, "delta_error", 1e-9), **_budget(o))


def _spa(o: dict) -> Accountant:
    from .spa import SaddlePointAccountant
    return SaddlePointAccountant(method=_opt(o, "method", "msd1"), **_budget(o))


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

#: the options each accountant uses (besides ``max_memory``, ``max_seconds`` and
#: ``neighboring``, which all take)
OPTIONS: dict[str, tuple[str, ...]] = {
    "pld": ("rtol",), "prv": ("eps_error", "delta_error"), "rdp": (), "fft": ("L", "n"),
    "spa": ("method",), "gdp": (),
}
_BUDGET_OPTIONS = ("max_memory", "max_seconds", "neighboring")


def make_accountant(name: str, **options) -> Accountant:
    """A fresh accountant by name (see :data:`ACCOUNTANTS`).

    Options: ``rtol`` (pld), ``eps_error`` and ``delta_error`` (prv), ``L`` and ``n`` (fft),
    ``method`` (spa), and ``max_memory`` / ``max_seconds`` / ``neighboring`` (all: the
    budget of one query and the neighbouring relation, see
    :class:`~tightdp.accountants.base.Accountant`). An option that is None
    means the accountant's default; any other value, 0 included, is passed on and validated by
    the accountant. One dictionary of options can serve several accountants (each takes the
    ones it uses); an option no accountant knows is an error.
    """
    key = str(name).strip().lower()
    if key not in ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {', '.join(ACCOUNTANTS)}, got {name!r}")
    known = {o for opts in OPTIONS.values() for o in opts} | set(_BUDGET_OPTIONS)
    unknown = sorted(set(options) - known)
    if unknown:
        raise ValueError(f"unknown accountant option {unknown[0]!r}; the options are "
                         f"{', '.join(sorted(known))}")
    return ACCOUNTANTS[key][0](options)
