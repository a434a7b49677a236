"""Input checks shared by every public entry point.

Each check raises ``ValueError`` naming the parameter and the accepted range, so that a user
who passes ``q=1.5`` learns at once which argument is wrong and what would be accepted.
"""

from __future__ import annotations

import difflib
import enum
import functools
import inspect
import math
import numbers
from collections.abc import Callable
from typing import Any, SupportsInt, TypeVar, cast

import numpy as np

from ._defaults import DELTA_MIN


def _as_float(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real | np.floating | np.integer):
        raise ValueError(f"{name} must be a real number, got {value!r}")
    x = float(value)
    if math.isnan(x):
        raise ValueError(f"{name} must be a number, got NaN")
    return x


def positive(name: str, value: object, *, allow_inf: bool = False) -> float:
    """Return ``value`` as a float, checking it lies in (0, inf) (or (0, inf])."""
    x = _as_float(name, value)
    if not x > 0 or (math.isinf(x) and not allow_inf):
        rng = "(0, inf]" if allow_inf else "(0, inf)"
        raise ValueError(f"{name} must be in {rng}, got {value!r}")
    return x


def nonnegative(name: str, value: object, *, allow_inf: bool = False) -> float:
    """Return ``value`` as a float, checking it lies in [0, inf)."""
    x = _as_float(name, value)
    if x < 0 or (math.isinf(x) and not allow_inf):
        rng = "[0, inf]" if allow_inf else "[0, inf)"
        raise ValueError(f"{name} must be in {rng}, got {value!r}")
    return x


def probability_open_closed(name: str, value: object) -> float:
    """A sampling rate: a float in (0, 1]."""
    x = _as_float(name, value)
    if not 0.0 < x <= 1.0:
        raise ValueError(f"{name} must be in (0, 1], got {value!r}")
    return x


def delta_value(name: str, value: object) -> float:
    """A target delta: a float in [DELTA_MIN, 1) (``tightdp.DELTA_MIN`` = 1e-300, the
    smallest delta any query accepts)."""
    x = _as_float(name, value)
    if not 0.0 < x < 1.0:
        raise ValueError(f"{name} must be in (0, 1), got {value!r}")
    if x < DELTA_MIN:
        raise ValueError(f"{name} must be at least {DELTA_MIN:g} (the smallest delta tightdp "
                         f"certifies), got {value!r}")
    return x


def unit_interval(name: str, value: object, *, open_low: bool = False, open_high: bool = False
                  ) -> float:
    """A float in [0, 1] with optionally open ends."""
    x = _as_float(name, value)
    lo_ok = x > 0 if open_low else x >= 0
    hi_ok = x < 1 if open_high else x <= 1
    if not (lo_ok and hi_ok):
        rng = ("(" if open_low else "[") + "0, 1" + (")" if open_high else "]")
        raise ValueError(f"{name} must be in {rng}, got {value!r}")
    return x


def count(name: str, value: object, *, minimum: int = 0) -> int:
    """A whole number >= ``minimum`` (steps, compositions, group size, ...)."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if isinstance(value, numbers.Integral | np.integer):
        n = int(value)
    elif isinstance(value, numbers.Real | np.floating) and not math.isnan(float(value)) \
            and float(value).is_integer():
        n = int(cast(SupportsInt, value))
    else:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if n < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return n


def eps_values(name: str, value: object) -> np.ndarray:
    """One or many epsilon values, each a finite float >= 0 ... or any real: negative eps
    are legal queries of a privacy curve, NaN is not."""
    arr = np.asarray(value, dtype=float)
    if np.any(np.isnan(arr)):
        raise ValueError(f"{name} must not contain NaN")
    if np.any(np.isinf(arr)):
        raise ValueError(f"{name} must be finite, in (-inf, inf)")
    return arr


#: the neighbouring relations, canonical spellings in dp_accounting's words
#: (``NeighboringRelation``): add or remove one record; replace one record by another;
#: replace one record by a special "zero" record (Kairouz et al. 2021, Def. 1.1)
RELATIONS = ("add_or_remove_one", "replace_one", "replace_special")
#: other spellings accepted for them (after lower-casing and "-", "/", " " -> "_")
RELATION_ALIASES = {"add_remove": "add_or_remove_one", "add_or_remove": "add_or_remove_one",
                    "replace": "replace_one", "substitute": "replace_one",
                    "substitution": "replace_one"}


def neighboring(name: str, value: object) -> str:
    """A neighbouring relation as its canonical name (one of :data:`RELATIONS`), from that
    name, an alias of :data:`RELATION_ALIASES`, or an enum member named so (such as
    ``dp_accounting.NeighboringRelation.REPLACE_ONE``)."""
    key = value.name if isinstance(value, enum.Enum) else value
    if isinstance(key, str):
        k = key.strip().lower().replace("-", "_").replace("/", "_").replace(" ", "_")
        k = RELATION_ALIASES.get(k, k)
        if k in RELATIONS:
            return k
    raise ValueError(f"{name} must be one of {', '.join(RELATIONS)} (or "
                     f"{', '.join(RELATION_ALIASES)}), got {value!r}")


class UnknownParameter(TypeError, ValueError):
    """A keyword argument a front door does not take: a ``TypeError`` as Python raises for
    one, and a ``ValueError`` as every other refusal of bad input (one line)."""


_F = TypeVar("_F", bound=Callable[..., Any])


def known_keywords(*passed_on: str) -> Callable[[_F], _F]:
    """Decorate a keyword-only front door so that a keyword argument it does not take (its
    own parameters, and ``passed_on``: the names its ``**options`` accepts) is refused
    before any other check, with one line naming it and the closest parameter
    (``unknown parameter sample_rate; did you mean sampling_rate?``) -- rather than with the
    complaint of a required parameter the misspelt one was meant to give."""
    def decorate(func: _F) -> _F:
        own = [n for n, p in inspect.signature(func).parameters.items()
               if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
        names = own + [n for n in passed_on if n not in own]

        @functools.wraps(func)
        def checked(*args: Any, **kwargs: Any) -> Any:
            for key in kwargs:
                if key not in names:
                    raise UnknownParameter(unknown_parameter(key, names))
            return func(*args, **kwargs)

        return cast(_F, checked)
    return decorate


def unknown_parameter(key: str, names: list[str]) -> str:
    """The one line refusing keyword ``key``: the closest of ``names``, or all of them."""
    close = difflib.get_close_matches(key, names, n=1)
    if close:
        return f"unknown parameter {key}; did you mean {close[0]}?"
    return f"unknown parameter {key}; the parameters are {', '.join(sorted(names))}"
