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
import os
import tempfile
from collections.abc import Callable
from typing import Any, NoReturn, cast

from . import _validate as v
from ._defaults import DEFAULT_RTOL
from ._version import __version__
from .accountants.base import Accountant
from .accountants.fft import FFTAccountant
from .accountants.gdp import GDPAccountant
from .accountants.pld import PLDAccountant
from .accountants.prv import PRVAccountant
from .accountants.rdp import RDPAccountant
from .accountants.spa import METHODS as SPA_METHODS
from .accountants.spa import SaddlePointAccountant
from .dpsgd.scale import ScaleCalibration, check_scale_query, search_scale
from .mechanisms.base import Mechanism
from .mechanisms.fields import (
    check_object,
    choice,
    fail,
    fail_missing,
    flag,
    kind,
    mechanism_from_dict,
    mechanism_missing,
    mechanism_to_dict,
    missing_fields,
    numbers,
    one_line,
)
from .pld.riemann import RIEMANN_METHODS

__all__ = ["FORMAT", "SCHEMA_VERSION", "to_dict", "from_dict", "dumps", "loads", "save",
           "load", "read_document", "mechanism_to_dict", "mechanism_from_dict",
           "ScaleCalibration", "calibrate_scale"]

#: the ``format`` field of every document
FORMAT = "tightdp-composition"
#: the schema version this library writes and reads
SCHEMA_VERSION = 1

_TOP = ("format", "schema_version", "tightdp_version", "accountant", "composition")


def _reraise(err: Exception, name: str, path: str):
    """A constructor's error about parameter ``name`` re-raised naming ``path`` instead."""
    msg = one_line(str(err))
    for sep in (" ", ":"):
        if msg.startswith(name + sep):
            raise ValueError(path + msg[len(name):]) from None
    raise ValueError(f"{path}: {msg}") from None


#: the longest error message (a hand-edited file may hold a value of any length)
_MAX_MESSAGE = 400


def _capped(message: str) -> str:
    msg = one_line(message)
    return msg if len(msg) <= _MAX_MESSAGE else msg[:_MAX_MESSAGE - 3] + "..."


# --- accountants ----------------------------------------------------------------------------
_BUDGET = ("max_memory", "max_seconds")

#: accountant name -> (class, option names, options of an accountant)
_ACCOUNTANTS: dict[str, tuple[type, tuple[str, ...], Callable[[Any], dict]]] = {
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
    kw: dict[str, Any] = {}
    for key, x in o.items():
        p = f"{path}.{key}"
        if key in ("error_estimate", "allow_truncation", "bounds"):
            kw[key] = flag(x, p)
        elif key == "method":
            kw[key] = choice(x, p, SPA_METHODS if name == "spa" else RIEMANN_METHODS)
        elif key == "orders":
            kw[key] = numbers(x, p, lambda q, y: v.positive(q, y))
        elif key == "L" and x is None:
            kw[key] = None
        elif key == "max_memory" and isinstance(x, str):
            kw[key] = x  # a size such as "2GB": parse_memory checks it
        elif key == "neighboring":
            kw[key] = x  # a relation's name: the constructor checks it
        else:
            if isinstance(x, bool) or not isinstance(x, int | float):
                fail(f"{p} must be a number, got {kind(x)}")
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
    a = check_object(d, "accountant", ("name", "options"))
    name = choice(a["name"], "accountant.name", tuple(_ACCOUNTANTS))
    cls, names, _ = _ACCOUNTANTS[name]
    o = check_object(a["options"], "accountant.options", names + _BUDGET, optional=("neighboring",))
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
        msg = one_line(str(err))
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


def _missing(doc: object) -> list[str]:
    """The JSON paths of every required field the document lacks, at every level that is
    there to look into (``accountant.options.neighboring`` is optional)."""
    out = missing_fields(doc, "the document", _TOP)
    if not isinstance(doc, dict):
        return out
    a = doc.get("accountant")
    out += missing_fields(a, "accountant", ("name", "options"))
    if isinstance(a, dict) and a.get("name") in _ACCOUNTANTS:
        out += missing_fields(a.get("options"), "accountant.options",
                              _ACCOUNTANTS[a["name"]][1] + _BUDGET)
    comp = doc.get("composition")
    for i, entry in enumerate(comp if isinstance(comp, list) else []):
        out += mechanism_missing(entry, f"composition[{i}]")
        out += missing_fields(entry, f"composition[{i}]", ("count",))
    return out


def _from_dict(doc: object) -> Accountant:
    fail_missing(_missing(doc))  # several missing fields: all named at once
    d = check_object(doc, "the document", _TOP)
    if d["format"] != FORMAT:
        fail(f"format must be {FORMAT!r}, got {kind(d['format'])}")
    sv = d["schema_version"]
    if isinstance(sv, bool) or not isinstance(sv, int) or sv != SCHEMA_VERSION:
        fail(f"schema_version must be {SCHEMA_VERSION} (the version this tightdp reads), got "
              f"{kind(sv)}")
    if not isinstance(d["tightdp_version"], str) or not d["tightdp_version"].strip():
        fail(f"tightdp_version must be a version string such as '0.1.0', got "
              f"{kind(d['tightdp_version'])}")
    cls, kw = _accountant_options(d["accountant"])
    acc = _accountant_from(cls, kw)
    comp = d["composition"]
    if not isinstance(comp, list):
        fail(f"composition must be a list of {{mechanism, params, count}} objects, got "
              f"{kind(comp)}")
    entries = []
    for i, entry in enumerate(comp):
        path = f"composition[{i}]"
        e = check_object(entry, path, ("mechanism", "params", "count"))
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
            raise ValueError(f"{path}: {one_line(str(err))}") from None
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


#: :func:`fail` (it always raises ValueError), typed as never returning
_refuse = cast("Callable[[str], NoReturn]", fail)


def read_document(text: str | bytes) -> object:
    """Parse the JSON text of a document (no checks of its fields: see :func:`from_dict`).
    Truncated or corrupt JSON, NaN/Infinity, a repeated field: ValueError, one line."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as err:
            _refuse(f"not UTF-8 text (corrupt file?): byte {err.start}")
    try:
        return json.loads(text, parse_constant=_reject_constant,
                          object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as err:
        # some of json's messages end with "at" ("Unterminated string starting at")
        where = f"line {err.lineno} column {err.colno}"
        at = " " if err.msg.endswith(" at") else " at "
        _refuse(f"not valid JSON (truncated or corrupt?): {err.msg}{at}{where}")
    except RecursionError:
        _refuse("not a valid document: JSON nested too deeply")
    except ValueError as err:
        _refuse(f"not a valid document: {err}")


def dumps(acc: Accountant) -> str:
    """The document of :func:`to_dict` as JSON text."""
    return json.dumps(to_dict(acc), indent=1, allow_nan=False) + "\n"


def loads(text: str | bytes) -> Accountant:
    """The accountant of a document's JSON text (see :func:`from_dict`)."""
    return from_dict(read_document(text))


def save(acc: Accountant, path: str | os.PathLike) -> None:
    """Write the accountant to ``path`` as JSON (see :func:`to_dict`). The file is replaced
    atomically: a crash while writing leaves the previous file intact. A write that fails
    raises the OSError naming ``path`` (not the temporary file written beside it)."""
    text = dumps(acc)
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tightdp-", suffix=".tmp", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as err:
        _remove(tmp)
        raise type(err)(err.errno, err.strerror, path) from None
    except BaseException:
        _remove(tmp)
        raise


def _remove(tmp: str | None) -> None:
    """Remove the temporary file of a failed :func:`save`, if it was created."""
    if tmp is not None and os.path.exists(tmp):
        os.unlink(tmp)


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
def calibrate_scale(acc: Accountant, *, epsilon: float, delta: float,
                    rtol: float = DEFAULT_RTOL, scale_max: float = 1e4,
                    max_seconds: float | None = None) -> ScaleCalibration:
    """The smallest factor ``s`` such that the composition of ``acc`` with every noise scale
    multiplied by ``s`` has certified ``eps(delta) <= epsilon`` (the target): the search of
    :func:`tightdp.dpsgd.scale.search_scale`, on fresh accountants of ``acc``'s document.

    ``acc`` must certify an upper bound (pld, prv or rdp); its options and memory budget are
    kept, ``max_seconds`` (default: the accountant's) bounds the whole search. The result's
    ``state`` is the calibrated accountant's document, with ``acc``'s own budget.
    """
    check_scale_query(acc, epsilon=epsilon, delta=delta, rtol=rtol)
    doc = to_dict(acc)
    name, options = doc["accountant"]["name"], doc["accountant"]["options"]

    def fresh(budget: dict) -> Accountant:
        return from_dict({**doc, "accountant": {"name": name, "options": {**options, **budget}},
                          "composition": []})

    def document(scaled: Accountant) -> dict:
        out = to_dict(scaled)  # with the accountant's own budget, not the search's time left
        out["accountant"]["options"].update(max_memory=int(acc.budget.max_memory),
                                            max_seconds=float(acc.budget.max_seconds))
        return out

    return search_scale(acc, epsilon=epsilon, delta=delta, fresh=fresh, document=document,
                        rtol=rtol, scale_max=scale_max, max_seconds=max_seconds)
