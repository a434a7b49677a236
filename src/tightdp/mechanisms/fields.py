"""Mechanisms as JSON objects: the registry of mechanisms by class name, and the field checks
their ``from_dict`` (and the state files of :mod:`tightdp.state`) read with.

A mechanism is written as ``{"mechanism": class name, "params": its fields}``: the class's
``to_dict()`` gives the fields, its ``from_dict(params, path)`` checks and reads them back
(a subsampled mechanism's ``base`` nested the same way). A ValueError's one line names the
field by its JSON path (``composition[1].params.sigma``) and the accepted range.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .base import Mechanism

__all__ = ["REGISTRY", "register", "mechanism_to_dict", "mechanism_from_dict", "base_field",
           "one_line", "fail", "kind", "check_object", "choice", "flag", "numbers",
           "missing_fields", "mechanism_missing", "fail_missing"]

#: class name -> mechanism class, in the order errors list them (filled by :func:`register`)
REGISTRY: dict[str, type[Mechanism]] = {}


def register(*classes: type[Mechanism]) -> None:
    """Make ``classes`` readable and writable by name (each implements ``to_dict`` and the
    classmethod ``from_dict``)."""
    for cls in classes:
        REGISTRY[cls.__name__] = cls


def one_line(text: str) -> str:
    return " ".join(str(text).split()) or "invalid value"


def fail(message: str):
    raise ValueError(one_line(message))


def kind(value) -> str:
    """What a JSON value is, for an error message: its type for a container, else its repr
    (cut at 60 characters)."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _join(path: str, key: str) -> str:
    return key if path in ("", "the document") else f"{path}.{key}"


def check_object(value, path: str, fields: tuple[str, ...], optional: tuple[str, ...] = ()
                 ) -> dict:
    """``value`` must be a JSON object with exactly ``fields`` (all required) and any of
    ``optional``."""
    if not isinstance(value, dict):
        fail(f"{path} must be a JSON object with the fields {', '.join(fields)}, got "
             f"{kind(value)}")
    for f in fields:
        if f not in value:
            fail(f"{_join(path, f)} is missing (required; the fields of {path} are "
                 f"{', '.join(fields)})")
    extra = [k for k in value if k not in fields + optional]
    if extra:
        fail(f"{_join(path, extra[0])} is not a field of {path} (the fields are "
             f"{', '.join(fields + optional)})")
    return value


def missing_fields(value, path: str, fields: tuple[str, ...]) -> list[str]:
    """The JSON paths of the ``fields`` a JSON object ``value`` lacks (none if it is not an
    object: :func:`check_object` says so)."""
    if not isinstance(value, dict):
        return []
    return [_join(path, f) for f in fields if f not in value]


def mechanism_missing(d, path: str) -> list[str]:
    """The JSON paths of every field missing from the mechanism object ``d``, nested base
    mechanisms included (a mechanism of unknown name is checked later, naming it)."""
    out = missing_fields(d, path, ("mechanism", "params"))
    if out or not isinstance(d, dict) or d["mechanism"] not in REGISTRY:
        return out
    params = d["params"]
    out = missing_fields(params, f"{path}.params", REGISTRY[d["mechanism"]].FIELDS)
    if isinstance(params, dict):
        for key, x in params.items():
            if isinstance(x, dict):  # a nested mechanism (a subsampled one's base)
                out += mechanism_missing(x, f"{path}.params.{key}")
    return out


def fail_missing(paths: list[str]) -> None:
    """One error naming every missing field (none: nothing to say)."""
    if len(paths) > 1:
        fail(f"{paths[0]} is missing, and so are {', '.join(paths[1:])} (required: every "
             "field is given, none is filled in with a default)")


def choice(value, path: str, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in choices:
        fail(f"{path} must be one of {', '.join(repr(c) for c in choices)}, got {kind(value)}")
    return value


def flag(value, path: str) -> bool:
    if not isinstance(value, bool):
        fail(f"{path} must be true or false, got {kind(value)}")
    return value


def numbers(value, path: str, check: Callable[[str, object], float]) -> list[float]:
    if not isinstance(value, list) or not value:
        fail(f"{path} must be a non-empty list of numbers, got {kind(value)}")
    return [check(f"{path}[{i}]", x) for i, x in enumerate(value)]


def base_field(params: dict, path: str, allowed: tuple[str, ...], who: str) -> Mechanism:
    """The ``base`` mechanism of a subsampled mechanism's ``params`` (at ``path``), one of
    ``allowed``."""
    b = check_object(params["base"], f"{path}.base", ("mechanism", "params"))
    if b["mechanism"] not in allowed:
        fail(f"{path}.base.mechanism must be "
             f"{' or '.join(repr(a) for a in allowed)} for {who}, got {kind(b['mechanism'])}")
    return mechanism_from_dict(b, f"{path}.base")


def mechanism_to_dict(mechanism: Mechanism) -> dict:
    """``{"mechanism": name, "params": {...}}`` of a mechanism (nested for a base). Only the
    registered classes themselves are written (a subclass may hold more than its fields)."""
    name = type(mechanism).__name__
    if REGISTRY.get(name) is not type(mechanism):
        raise ValueError(f"cannot write {mechanism!r} to a state file: the mechanisms it holds "
                         f"are {', '.join(REGISTRY)}")
    return {"mechanism": name, "params": mechanism.to_dict()}


def mechanism_from_dict(d: object, path: str = "mechanism") -> Mechanism:
    """The mechanism of ``{"mechanism": name, "params": {...}}``, every parameter checked;
    a ValueError names the field by its JSON path, starting at ``path``."""
    d = check_object(d, path, ("mechanism", "params"))
    cls = REGISTRY[choice(d["mechanism"], f"{path}.mechanism", tuple(REGISTRY))]
    params = check_object(d["params"], f"{path}.params", cls.FIELDS)
    try:
        return cls.from_dict(params, f"{path}.params")
    except ValueError as err:
        msg = one_line(str(err))
        if msg.startswith(path):
            raise ValueError(msg) from None
        # a check of the constructor not repeated by from_dict: name the mechanism's params
        raise ValueError(f"{path}.params: {msg}") from None
