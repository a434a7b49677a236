"""State and composition files: an accountant as a versioned JSON document.

A long training run saves its accountant and resumes from it; a composition of any mix of
mechanisms can be written by hand and given to ``tightdp epsilon|delta|calibrate --spec FILE``.
The document (schema version 1)::

    {"format": "tightdp-composition", "schema_version": 1, "tightdp_version": "0.1.0",
     "accountant": {"name": "pld", "options": {"rtol": 0.001, "max_points": ...,
                                               "neighboring": "add_or_remove_one",
                                               "max_memory": 2000000000, "max_seconds": 60.0}},
     "composition": [
       {"mechanism": "PoissonSubsampled",
        "params": {"base": {"mechanism": "Gaussian",
                            "params": {"sigma": 1.0, "sensitivity": 1.0}},
                   "q": 0.01},
        "count": 10000}]}

Mechanisms are written by class name and constructor parameters (a subsampled mechanism's
``base`` nested the same way); counts are run-length encoded, one entry per distinct
mechanism (``Accountant.terms``). Every field is required -- :func:`save` writes them all, and
no default is filled in when one is missing -- except that FFT's ``L`` may be ``null`` (the
accountant then widens its domain itself, as ``FFTAccountant(L=None)``), and that
``accountant.options.neighboring`` (the accountant's neighbouring relation) may be absent, as
in files written before it existed: such a file is read under ``"replace_one"`` when its
composition holds a mechanism defined under replace-one and not under add/remove (sampling
without or with replacement, randomized response), else under ``"add_or_remove_one"`` -- the
only relation each such file can have meant (a file mixing both kinds is refused, naming the
entry). Reading checks every
field: a corrupt or hand-edited file raises ``ValueError`` with one line naming the field as a
JSON path (``composition[1].params.sigma``) and the accepted range. Floats are written with
``repr`` precision, so a loaded accountant answers bit for bit as the saved one.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from . import _validate as v
from ._defaults import DEFAULT_RTOL
from ._numerics import BracketError, bisect_log, bracket_of_points, grow_bracket
from ._version import __version__
from .accountants.base import Accountant
from .accountants.fft import FFTAccountant
from .accountants.gdp import GDPAccountant
from .accountants.pld import PLDAccountant
from .accountants.prv import PRVAccountant
from .accountants.rdp import RDPAccountant
from .accountants.spa import METHODS as SPA_METHODS
from .accountants.spa import SaddlePointAccountant
from .mechanisms import (
    ApproxDP,
    DiscreteLaplace,
    Gaussian,
    Laplace,
    MixtureOfGaussians,
    PoissonSubsampled,
    PureDP,
    RandomizedResponse,
    SampledWithoutReplacement,
    SampledWithReplacement,
)
from .mechanisms.base import Mechanism
from .pld.riemann import RIEMANN_METHODS
from .results import Result

__all__ = ["FORMAT", "SCHEMA_VERSION", "to_dict", "from_dict", "dumps", "loads", "save",
           "load", "read_document", "mechanism_to_dict", "mechanism_from_dict",
           "ScaleCalibration", "calibrate_scale", "scaled_mechanism"]

#: the ``format`` field of every document
FORMAT = "tightdp-composition"
#: the schema version this library writes and reads
SCHEMA_VERSION = 1

_TOP = ("format", "schema_version", "tightdp_version", "accountant", "composition")


def _one_line(text: str) -> str:
    return " ".join(str(text).split()) or "invalid value"


def _fail(message: str):
    raise ValueError(_one_line(message))


def _reraise(err: Exception, name: str, path: str):
    """A constructor's error about parameter ``name`` re-raised naming ``path`` instead."""
    msg = _one_line(str(err))
    for sep in (" ", ":"):
        if msg.startswith(name + sep):
            raise ValueError(path + msg[len(name):]) from None
    raise ValueError(f"{path}: {msg}") from None


# --- field checks ---------------------------------------------------------------------------
def _object(value, path: str, fields: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict:
    """``value`` must be a JSON object with exactly ``fields`` (all required) and any of
    ``optional``."""
    if not isinstance(value, dict):
        _fail(f"{path} must be a JSON object with the fields {', '.join(fields)}, got "
              f"{_kind(value)}")
    for f in fields:
        if f not in value:
            _fail(f"{_join(path, f)} is missing (required; the fields of {path} are "
                  f"{', '.join(fields)})")
    extra = [k for k in value if k not in fields + optional]
    if extra:
        _fail(f"{_join(path, extra[0])} is not a field of {path} (the fields are "
              f"{', '.join(fields + optional)})")
    return value


def _join(path: str, key: str) -> str:
    return key if path in ("", "the document") else f"{path}.{key}"


def _kind(value) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


#: the longest error message (a hand-edited file may hold a value of any length)
_MAX_MESSAGE = 400


def _capped(message: str) -> str:
    msg = _one_line(message)
    return msg if len(msg) <= _MAX_MESSAGE else msg[:_MAX_MESSAGE - 3] + "..."


def _string(value, path: str, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        _fail(f"{path} must be one of {', '.join(repr(c) for c in choices)}, got {_kind(value)}")
    return value


def _bool(value, path: str) -> bool:
    if not isinstance(value, bool):
        _fail(f"{path} must be true or false, got {_kind(value)}")
    return value


def _numbers(value, path: str, check: Callable[[str, object], float]) -> list[float]:
    if not isinstance(value, list) or not value:
        _fail(f"{path} must be a non-empty list of numbers, got {_kind(value)}")
    return [check(f"{path}[{i}]", x) for i, x in enumerate(value)]


def _pos(path, x):
    return v.positive(path, x)


def _nonneg(path, x):
    return v.nonnegative(path, x)


def _rate(path, x):
    return v.probability_open_closed(path, x)


def _prob(path, x):
    return v.unit_interval(path, x)


def _int_at_least(minimum: int):
    return lambda path, x: v.count(path, x, minimum=minimum)


# --- mechanisms -----------------------------------------------------------------------------
_PAIRS = ("worst_case", "koskela2020")


def _base(d: dict, path: str, allowed: tuple[str, ...], who: str) -> Mechanism:
    b = _object(d["base"], f"{path}.base", ("mechanism", "params"))
    if b["mechanism"] not in allowed:
        _fail(f"{path}.base.mechanism must be "
              f"{' or '.join(repr(a) for a in allowed)} for {who}, got {_kind(b['mechanism'])}")
    return mechanism_from_dict(b, f"{path}.base")


def _mixture(d: dict, path: str) -> MixtureOfGaussians:
    c = _numbers(d["sensitivities"], f"{path}.sensitivities", _nonneg)
    p = _numbers(d["probabilities"], f"{path}.probabilities", _prob)
    if len(c) != len(p):
        _fail(f"{path}.probabilities must have one entry per sensitivity ({len(c)}), got "
              f"{len(p)}")
    if abs(math.fsum(p) - 1.0) > 1e-9:
        _fail(f"{path}.probabilities must sum to 1 (within 1e-9), got sum {math.fsum(p)!r}")
    sigma = _pos(f"{path}.sigma", d["sigma"])
    m = MixtureOfGaussians(c, p, sigma)
    arr = np.asarray(p, dtype=float)
    # probabilities that sum to 1 up to rounding (as a saved, already normalized mixture's
    # do) are kept bit for bit; renormalizing them would move the last bits
    if abs(float(arr.sum()) - 1.0) <= 4 * arr.size * np.finfo(float).eps:
        m.probabilities = arr
    return m


def _swr(d: dict, path: str) -> SampledWithReplacement:
    base = _base(d, path, ("Gaussian",), "SampledWithReplacement")
    b = v.count(f"{path}.batch_size", d["batch_size"], minimum=1)
    n = v.count(f"{path}.dataset_size", d["dataset_size"], minimum=1)
    if b > n:
        _fail(f"{path}.batch_size must be <= dataset_size ({n}), got {b}")
    return SampledWithReplacement(base, b, n, _string(d["pair"], f"{path}.pair", _PAIRS))


#: mechanism name -> (class, parameter names, builder from (params, path), params of a mechanism)
_MECHANISMS: dict[str, tuple[type, tuple[str, ...], Callable, Callable]] = {
    "Gaussian": (Gaussian, ("sigma", "sensitivity"),
                 lambda d, p: Gaussian(_pos(f"{p}.sigma", d["sigma"]),
                                       _pos(f"{p}.sensitivity", d["sensitivity"])),
                 lambda m: {"sigma": float(m.sigma), "sensitivity": float(m.sensitivity)}),
    "Laplace": (Laplace, ("scale", "sensitivity"),
                lambda d, p: Laplace(_pos(f"{p}.scale", d["scale"]),
                                     _pos(f"{p}.sensitivity", d["sensitivity"])),
                lambda m: {"scale": float(m.scale), "sensitivity": float(m.sensitivity)}),
    "DiscreteLaplace": (
        DiscreteLaplace, ("noise_parameter", "sensitivity"),
        lambda d, p: DiscreteLaplace(
            _pos(f"{p}.noise_parameter", d["noise_parameter"]),
            v.count(f"{p}.sensitivity", d["sensitivity"], minimum=1)),
        lambda m: {"noise_parameter": float(m.noise_parameter),
                   "sensitivity": int(m.sensitivity)}),
    "RandomizedResponse": (
        RandomizedResponse, ("noise_parameter", "num_values"),
        lambda d, p: RandomizedResponse(
            v.unit_interval(f"{p}.noise_parameter", d["noise_parameter"], open_low=True),
            v.count(f"{p}.num_values", d["num_values"], minimum=2)),
        lambda m: {"noise_parameter": float(m.noise_parameter),
                   "num_values": int(m.num_values)}),
    "PureDP": (PureDP, ("eps",), lambda d, p: PureDP(_nonneg(f"{p}.eps", d["eps"])),
               lambda m: {"eps": float(m.eps)}),
    "ApproxDP": (ApproxDP, ("eps", "delta"),
                 lambda d, p: ApproxDP(_nonneg(f"{p}.eps", d["eps"]),
                                       v.unit_interval(f"{p}.delta", d["delta"],
                                                       open_high=True)),
                 lambda m: {"eps": float(m.eps), "delta": float(m.delta0)}),
    "PoissonSubsampled": (
        PoissonSubsampled, ("base", "q"),
        lambda d, p: PoissonSubsampled(
            _base(d, p, ("Gaussian", "Laplace"), "PoissonSubsampled"), _rate(f"{p}.q", d["q"])),
        lambda m: {"base": mechanism_to_dict(m.base), "q": float(m.q)}),
    "SampledWithoutReplacement": (
        SampledWithoutReplacement, ("base", "q", "pair"),
        lambda d, p: SampledWithoutReplacement(
            _base(d, p, ("Gaussian", "Laplace"), "SampledWithoutReplacement"),
            _rate(f"{p}.q", d["q"]), _string(d["pair"], f"{p}.pair", _PAIRS)),
        lambda m: {"base": mechanism_to_dict(m.base), "q": float(m.q), "pair": m.pair}),
    "SampledWithReplacement": (
        SampledWithReplacement, ("base", "batch_size", "dataset_size", "pair"), _swr,
        lambda m: {"base": mechanism_to_dict(m.base), "batch_size": int(m.batch_size),
                   "dataset_size": int(m.dataset_size), "pair": m.pair}),
    "MixtureOfGaussians": (
        MixtureOfGaussians, ("sensitivities", "probabilities", "sigma"), _mixture,
        lambda m: {"sensitivities": [float(x) for x in m.sensitivities],
                   "probabilities": [float(x) for x in m.probabilities],
                   "sigma": float(m.sigma)}),
}


def mechanism_to_dict(mechanism: Mechanism) -> dict:
    """``{"mechanism": name, "params": {...}}`` of a mechanism (nested for a base)."""
    for name, (cls, _, _, params) in _MECHANISMS.items():
        if type(mechanism) is cls:
            return {"mechanism": name, "params": params(mechanism)}
    raise ValueError(f"cannot write {mechanism!r} to a state file: the mechanisms it holds are "
                     f"{', '.join(_MECHANISMS)}")


def mechanism_from_dict(d: object, path: str = "mechanism") -> Mechanism:
    """The mechanism of ``{"mechanism": name, "params": {...}}``, every parameter checked;
    a ValueError names the field by its JSON path, starting at ``path``."""
    d = _object(d, path, ("mechanism", "params"))
    name = _string(d["mechanism"], f"{path}.mechanism", tuple(_MECHANISMS))
    _, fields, build, _ = _MECHANISMS[name]
    params = _object(d["params"], f"{path}.params", fields)
    try:
        return build(params, f"{path}.params")
    except ValueError as err:
        msg = _one_line(str(err))
        if msg.startswith(path):
            raise ValueError(msg) from None
        # a check of the constructor not repeated above: name the mechanism's parameters
        raise ValueError(f"{path}.params: {msg}") from None


# --- accountants ----------------------------------------------------------------------------
_BUDGET = ("max_memory", "max_seconds")

#: accountant name -> (class, option names, options of an accountant)
_ACCOUNTANTS: dict[str, tuple[type, tuple[str, ...], Callable[[Accountant], dict]]] = {
    "pld": (PLDAccountant, ("rtol", "max_points"),
            lambda a: {"rtol": float(a.rtol), "max_points": int(a.max_points)}),
    "prv": (PRVAccountant, ("eps_error", "delta_error", "max_points", "spectral_above"),
            lambda a: {"eps_error": float(a.eps_error), "delta_error": float(a.delta_error),
                       "max_points": int(a.max_points),
                       "spectral_above": int(a.spectral_above)}),
    "fft": (FFTAccountant, ("L", "n", "error_estimate", "method", "allow_truncation"),
            lambda a: {"L": None if a.auto_L else float(a.L), "n": int(a.n),
                       "error_estimate": bool(a.error_estimate), "method": a.method,
                       "allow_truncation": bool(a.allow_truncation)}),
    "rdp": (RDPAccountant, ("orders",), lambda a: {"orders": [float(x) for x in a.orders]}),
    "gdp": (GDPAccountant, (), lambda a: {}),
    "spa": (SaddlePointAccountant, ("method", "bounds"),
            lambda a: {"method": a.method, "bounds": bool(a.bounds)}),
}


def _options_from(name: str, o: dict, path: str) -> dict:
    """The keyword arguments of accountant ``name`` from its ``options`` object: types checked
    here (the constructor checks the ranges)."""
    kw = {}
    for key, x in o.items():
        p = f"{path}.{key}"
        if key in ("error_estimate", "allow_truncation", "bounds"):
            kw[key] = _bool(x, p)
        elif key == "method":
            kw[key] = _string(x, p, SPA_METHODS if name == "spa" else RIEMANN_METHODS)
        elif key == "orders":
            kw[key] = _numbers(x, p, lambda q, y: v.positive(q, y))
        elif key == "L" and x is None:
            kw[key] = None
        elif key == "max_memory" and isinstance(x, str):
            kw[key] = x  # a size such as "2GB": parse_memory checks it
        elif key == "neighboring":
            kw[key] = x  # a relation's name: the constructor checks it
        else:
            if isinstance(x, bool) or not isinstance(x, int | float):
                _fail(f"{p} must be a number, got {_kind(x)}")
            kw[key] = x
    return kw


def to_dict(acc: Accountant) -> dict:
    """The versioned JSON document of an accountant: its name and settings (budget included),
    its composition run-length encoded, the library version (see the module docstring)."""
    found = [(n, opts) for n, (cls, _, opts) in _ACCOUNTANTS.items() if type(acc) is cls]
    if not found:
        known = ", ".join(c.__name__ for c, _, _ in _ACCOUNTANTS.values())
        raise ValueError(f"cannot write {type(acc).__name__} to a state file: the accountants "
                         f"it holds are {known}")
    name, options = found[0]
    opts = {**options(acc), "neighboring": acc.neighboring,
            "max_memory": int(acc.budget.max_memory),
            "max_seconds": float(acc.budget.max_seconds)}
    return {"format": FORMAT, "schema_version": SCHEMA_VERSION, "tightdp_version": __version__,
            "accountant": {"name": name, "options": opts},
            "composition": [{**mechanism_to_dict(m), "count": int(k)} for m, k in acc.terms]}


def _accountant_options(d: object) -> tuple[type, dict]:
    """(class, keyword arguments) of the ``accountant`` object, types checked."""
    a = _object(d, "accountant", ("name", "options"))
    name = _string(a["name"], "accountant.name", tuple(_ACCOUNTANTS))
    cls, names, _ = _ACCOUNTANTS[name]
    o = _object(a["options"], "accountant.options", names + _BUDGET, optional=("neighboring",))
    return cls, _options_from(name, o, "accountant.options")


def _legacy_relation(mechanisms: list[Mechanism]) -> str:
    """The relation of a file without ``accountant.options.neighboring`` (written before the
    field existed): replace-one when a mechanism is defined under it and not under add/remove,
    else add/remove (the default then)."""
    for m in mechanisms:
        if "add_or_remove_one" not in m.relations and "replace_one" in m.relations:
            return "replace_one"
    return "add_or_remove_one"


def _accountant_from(cls: type, kw: dict) -> Accountant:
    try:
        return cls(**kw)
    except ValueError as err:
        msg = _one_line(str(err))
        for key in sorted(kw, key=len, reverse=True):
            if msg.startswith(key + " ") or msg.startswith(key + ":"):
                _reraise(err, key, f"accountant.options.{key}")
        raise ValueError(f"accountant.options: {msg}") from None


def from_dict(doc: object, *, kind: type[Accountant] | None = None) -> Accountant:
    """An accountant from a document written by :func:`to_dict` (or by hand): every field
    checked, the composition composed. A ValueError's one line names the field by its JSON
    path (``composition[1].params.sigma``) and the accepted range. With ``kind`` (an
    accountant class), a document holding another accountant is refused."""
    try:
        acc = _from_dict(doc)
    except ValueError as err:
        raise ValueError(_capped(str(err))) from None
    if kind is not None and type(acc) is not kind:
        raise ValueError(f"accountant.name: the document holds a {acc.name!r} accountant, "
                         f"not a {kind.__name__}")
    return acc


def _from_dict(doc: object) -> Accountant:
    d = _object(doc, "the document", _TOP)
    if d["format"] != FORMAT:
        _fail(f"format must be {FORMAT!r}, got {_kind(d['format'])}")
    sv = d["schema_version"]
    if isinstance(sv, bool) or not isinstance(sv, int) or sv != SCHEMA_VERSION:
        _fail(f"schema_version must be {SCHEMA_VERSION} (the version this tightdp reads), got "
              f"{_kind(sv)}")
    if not isinstance(d["tightdp_version"], str) or not d["tightdp_version"].strip():
        _fail(f"tightdp_version must be a version string such as '0.1.0', got "
              f"{_kind(d['tightdp_version'])}")
    cls, kw = _accountant_options(d["accountant"])
    acc = _accountant_from(cls, kw)
    comp = d["composition"]
    if not isinstance(comp, list):
        _fail(f"composition must be a list of {{mechanism, params, count}} objects, got "
              f"{_kind(comp)}")
    entries = []
    for i, entry in enumerate(comp):
        path = f"composition[{i}]"
        e = _object(entry, path, ("mechanism", "params", "count"))
        count = v.count(f"{path}.count", e["count"], minimum=0)
        entries.append((path, count, mechanism_from_dict(
            {"mechanism": e["mechanism"], "params": e["params"]}, path)))
    if "neighboring" not in kw:
        relation = _legacy_relation([m for _, _, m in entries])
        if relation != acc.neighboring:
            acc = _accountant_from(cls, {**kw, "neighboring": relation})
    for path, count, mech in entries:
        try:
            acc.compose(mech, count)
        except ValueError as err:  # this accountant does not support the mechanism
            raise ValueError(f"{path}: {_one_line(str(err))}") from None
    return acc


# --- files ----------------------------------------------------------------------------------
def _reject_constant(name: str):
    raise ValueError(f"{name} is not a JSON number (numbers must be finite)")


def _no_duplicates(pairs: list) -> dict:
    out = {}
    for k, x in pairs:
        if k in out:
            raise ValueError(f"field {k!r} appears twice in one object")
        out[k] = x
    return out


def read_document(text: str | bytes) -> object:
    """Parse the JSON text of a document (no checks of its fields: see :func:`from_dict`).
    Truncated or corrupt JSON, NaN/Infinity, a repeated field: ValueError, one line."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as err:
            _fail(f"not UTF-8 text (corrupt file?): byte {err.start}")
    try:
        return json.loads(text, parse_constant=_reject_constant,
                          object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as err:
        _fail(f"not valid JSON (truncated or corrupt?): {err.msg} at line {err.lineno} column "
              f"{err.colno}")
    except RecursionError:
        _fail("not a valid document: JSON nested too deeply")
    except ValueError as err:
        _fail(f"not a valid document: {err}")


def dumps(acc: Accountant) -> str:
    """The document of :func:`to_dict` as JSON text."""
    return json.dumps(to_dict(acc), indent=1, allow_nan=False) + "\n"


def loads(text: str | bytes) -> Accountant:
    """The accountant of a document's JSON text (see :func:`from_dict`)."""
    return from_dict(read_document(text))


def save(acc: Accountant, path: str | os.PathLike) -> None:
    """Write the accountant to ``path`` as JSON (see :func:`to_dict`). The file is replaced
    atomically: a crash while writing leaves the previous file intact."""
    text = dumps(acc)
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tightdp-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load(path: str | os.PathLike) -> Accountant:
    """The accountant saved in ``path`` (see :func:`from_dict`). A malformed file raises
    ValueError with one line: the file, the field's JSON path and the accepted range; a file
    that cannot be read raises OSError."""
    with open(path, "rb") as f:
        raw = f.read()
    try:
        return loads(raw)
    except ValueError as err:
        raise ValueError(f"{os.fspath(path)}: {err}") from None


# --- calibration of a composition's noise -------------------------------------------------
def scaled_mechanism(mechanism: Mechanism, factor: float) -> Mechanism:
    """``mechanism`` with every noise scale multiplied by ``factor``: the ``sigma`` of a
    Gaussian or mixture of Gaussians, the ``scale`` of a Laplace mechanism, also as the base of
    a subsampled mechanism. The others (discrete Laplace, whose noise is an integer law,
    randomized response, pure and approximate DP) are returned unchanged."""
    m = mechanism
    if type(m) is Gaussian:
        return Gaussian(m.sigma * factor, m.sensitivity)
    if type(m) is Laplace:
        return Laplace(m.scale * factor, m.sensitivity)
    if type(m) is MixtureOfGaussians:
        out = MixtureOfGaussians(m.sensitivities, m.probabilities, m.sigma * factor)
        out.probabilities = m.probabilities
        return out
    if type(m) is PoissonSubsampled:
        return PoissonSubsampled(scaled_mechanism(m.base, factor), m.q)
    if type(m) is SampledWithoutReplacement:
        return SampledWithoutReplacement(scaled_mechanism(m.base, factor), m.q, m.pair)
    if type(m) is SampledWithReplacement:
        return SampledWithReplacement(scaled_mechanism(m.base, factor), m.batch_size,
                                      m.dataset_size, m.pair)
    return m


def _has_noise(m: Mechanism) -> bool:
    return type(m) in (Gaussian, Laplace, MixtureOfGaussians) or (
        type(m) in (PoissonSubsampled, SampledWithoutReplacement, SampledWithReplacement))


@dataclass
class ScaleCalibration(Result):
    """The smallest common factor of the noise scales of a composition that meets
    ``(target_epsilon, delta)`` by a certified upper bound (see :func:`calibrate_scale`)."""

    scale: float
    delta: float
    target_epsilon: float
    epsilon: float  # certified upper bound at the returned scale (<= target_epsilon)
    lower: float | None
    accountant: str
    evaluations: int
    seconds: float
    details: dict = field(default_factory=dict)
    #: the calibrated accountant's document (:func:`from_dict` rebuilds it)
    state: dict = field(default_factory=dict)


def _scale_search(meets: Callable[[float], bool], rtol: float, scale_max: float,
                  target: float, delta: float) -> tuple[float | None, float]:
    """The search of :func:`calibrate_scale` on the predicate ``meets`` (cached by the
    caller): ``(lo, hi)``, ``hi`` the smallest factor found to meet the target, ``lo`` below
    it not meeting it (None when every factor tried down to about 1e-3 met it)."""
    met, miss = grow_bracket(meets, 1.0, 0.5, limit=5e-4, on_limit="return")
    if met is not None:  # 1 meets: halve while the target is met, down to about 1e-3
        lo, hi = (miss if miss >= 5e-4 else None), met
    else:  # double while it is missed, up to scale_max
        try:
            lo, hi = grow_bracket(lambda s: not meets(s), 1.0, 2.0, limit=scale_max,
                                  what="the noise scale factor")
        except BracketError:
            raise ValueError(
                f"no common noise scale factor up to {scale_max:g} meets eps={target:g} at "
                f"delta={delta:g} (mechanisms without noise, or too many steps); relax the "
                "target") from None
    if lo is not None:  # bisection in log space (hi meets the target throughout)
        lo, hi = bisect_log(lambda s: not meets(s), lo, hi, rtol=rtol / 4)
    return lo, hi



def calibrate_scale(acc: Accountant, *, epsilon: float, delta: float,
                    rtol: float = DEFAULT_RTOL, scale_max: float = 1e4, max_seconds=None
                    ) -> ScaleCalibration:
    """The smallest factor ``s`` such that the composition of ``acc`` with every noise scale
    multiplied by ``s`` (:func:`scaled_mechanism`) has certified ``eps(delta) <= epsilon``
    (the target).

    Bisection on ``log s`` until the bracket is within ``rtol / 4`` relative; the upper end,
    a factor whose certified upper bound meets the target, is returned. Only a factor whose
    bound was computed and meets the target is ever returned (so the answer is certified
    whatever the shape of eps in ``s``); a query the accountant refuses counts as not meeting
    it. That the factor is also the smallest (to ``rtol``) rests on eps decreasing in ``s``:
    the pair of a location mechanism with more noise has a larger trade-off function (for the
    Gaussian it is a post-processing -- rescale and add independent noise; for the Laplace
    mechanism its hockey-stick divergence decreases in ``scale / sensitivity``), hence is a
    post-processing of the pair with less noise by Blackwell's theorem (Blackwell 1953,
    "Equivalent comparisons of experiments"; Dong, Roth, Su 2022, "Gaussian differential
    privacy", Sec. 2), and the same kernel carries every subsampling mixture along.
    ``acc`` must certify an upper bound (pld, prv or rdp); its options and memory budget are
    kept, ``max_seconds`` (default: the accountant's) bounds the whole search.
    """
    from .accountants.registry import CERTIFYING
    from .dpsgd.calibrate import OutOfTime, SearchClock

    if acc.name not in CERTIFYING:
        raise ValueError(f"accountant must certify an upper bound ({', '.join(CERTIFYING)}) "
                         f"to calibrate, got {acc.name!r}")
    target = v.positive("epsilon", epsilon)
    delta = v.delta_value("delta", delta)
    rtol = v.positive("rtol", rtol)
    if not any(_has_noise(m) for m, _ in acc.terms):
        raise ValueError("the composition has no mechanism with a noise scale (Gaussian, "
                         "Laplace, MixtureOfGaussians, or one of these subsampled) to "
                         "calibrate")
    doc = to_dict(acc)
    clock = SearchClock(acc.budget.max_memory,
                   acc.budget.max_seconds if max_seconds is None else max_seconds)
    t0 = time.perf_counter()
    cache: dict[float, tuple[object, Accountant | None]] = {}

    def build(s: float) -> Accountant:
        budget = clock.options()
        d = {**doc, "accountant": {"name": doc["accountant"]["name"], "options": {
            **doc["accountant"]["options"], **budget}}, "composition": []}
        out = from_dict(d)
        for m, k in acc.terms:
            out.compose(scaled_mechanism(m, s), k)
        return out

    def meets(s: float) -> bool:
        if s not in cache:
            scaled = build(s)
            try:
                cache[s] = (scaled.epsilon(delta), scaled)
            except ValueError:  # refused (budget, range): not known to meet the target
                cache[s] = (None, None)
        r = cache[s][0]
        return r is not None and r.epsilon <= target

    details: dict = {}
    try:
        lo, hi = _scale_search(meets, rtol, scale_max, target, delta)
    except OutOfTime:
        lo, hi = bracket_of_points({s: not meets(s) for s in cache}, keep="hi")
        if hi is None:
            from .budget import BudgetExceeded
            raise BudgetExceeded(
                f"max_seconds: the search found no noise scale factor meeting eps={target:g} "
                f"at delta={delta:g} within max_seconds={clock.deadline.max_seconds:g}; raise "
                "max_seconds") from None
        details = clock.note(lo if lo is not None else 0.0, hi)
    r, scaled = cache[hi]
    details.setdefault("scale_infeasible_below", lo)
    out = to_dict(scaled)  # with the accountant's own budget, not the search's time left
    out["accountant"]["options"].update(max_memory=int(acc.budget.max_memory),
                                        max_seconds=float(acc.budget.max_seconds))
    return ScaleCalibration(hi, delta, target, float(r.epsilon), r.lower, acc.name,
                            len(cache), time.perf_counter() - t0, details, out)
