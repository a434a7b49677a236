"""What every subcommand shares: the parser class, errors as one line naming the option,
argparse types, and the formatting of numbers and tables (bounds rounded outward)."""

from __future__ import annotations

import argparse
import difflib
import math
import sys
from typing import NoReturn, cast

EXAMPLES = """examples:
  tightdp epsilon --sampling-rate 0.01 --noise-multiplier 1.0 --steps 10000 --delta 1e-5
  tightdp delta --sampling-rate 0.01 --noise-multiplier 1.0 --steps 10000 --epsilon 1.0 --json
  tightdp epsilon --sampling-rate 0.01 --noise-multiplier 1 --epochs 10 --delta 1e-5 \\
      --accountant prv --eps-error 0.01
  tightdp compare --sampling-rate 0.01 --noise-multiplier 1.0 --steps 10000 --delta 1e-5
  tightdp calibrate --sampling-rate 0.01 --steps 10000 --delta 1e-5 --epsilon 3
  tightdp epsilon --spec composition.json --delta 1e-5   (any composition: tightdp.save)
  tightdp group --group-size 8 --sampling poisson --sampling-rate 0.01 \\
      --noise-multiplier 1 --steps 2000 --delta 1e-6
  tightdp plot --sampling-rate 0.01 --noise-multiplier 1 --steps 1000 --delta 1e-5 \\
      --output curve.png
  tightdp individual --counts recording/ --delta 1e-5 --workers 2 --out eps/
      (per-example eps from a NormRecorder directory or a .npy of counts; docs/scaling.md)
  tightdp sweep --sampling-rate 0.01,0.02 --noise-multiplier 0.8,1.0 --steps 1000,10000 \\
      --delta 1e-5 --out sweep.csv   (a table: every combination; --grid FILE.json)
  tightdp spec --sampling-rate 0.01 --noise-multiplier 1 --steps 10000 > run.json
      (the spec file of a setting: then tightdp epsilon --spec run.json --delta 1e-5)
"""


#: every option string of the command (filled by :func:`build_parser`): a library error's
#: parameter ``name`` is shown as the option ``--name`` (dashes for underscores) when there is
#: one -- the library names its public parameters as the command's flags
FLAGS: set[str] = set()

#: the option strings of each subcommand (filled by :func:`build_parser`), for
#: :func:`check_flags`
COMMAND_FLAGS: dict[str, set[str]] = {}


class Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs) -> None:
        # no abbreviations: `delta ... --delta 5` must not be taken as --delta-error 5
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:  # one line, exit status 2
        sys.stderr.write(f"tightdp: error: {one_line(message)}\n")
        raise SystemExit(2)


def one_line(message: str) -> str:
    """``message`` on one line: every run of whitespace, line breaks included, as one space
    (a multi-line message, e.g. one quoting an array, is never cut in the middle)."""
    return " ".join(str(message).split())


def check_flags(argv: list[str], top: set[str]) -> None:
    """Refuse an option the subcommand of ``argv`` does not have, before argparse parses
    (which would first complain of a required option the misspelt one was meant to give):
    one line naming it and, when one of the subcommand's options is close to it
    (:func:`difflib.get_close_matches`), that option. ``top`` holds the options of the
    command itself; tokens after ``--`` are values, not options."""
    command = next((t for t in argv if not t.startswith("-")), None)
    if command not in COMMAND_FLAGS:
        return  # no subcommand, or an unknown one: argparse says so
    options = sorted(COMMAND_FLAGS[command] | top)
    for token in argv:
        if token == "--":
            return
        name = token.split("=", 1)[0]
        if token.startswith("--") and name not in options:
            close = difflib.get_close_matches(name, options, n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            sys.stderr.write(f"tightdp: error: unrecognized arguments: {name}{hint}\n")
            raise SystemExit(2)


def spelling(text: str) -> str:
    """An argparse type for options whose choices are words joined by dashes: underscores
    are accepted for dashes, as the library accepts both (``--sampling fixed_batch``)."""
    return text.strip().lower().replace("_", "-")


def _flag(word: str) -> str | None:
    """The option ``--word`` (underscores as dashes) if the command has it, else None."""
    flag = "--" + word.replace("_", "-")
    return flag if flag in FLAGS else None


def _as_flags(message: str) -> str:
    """A library message in the command's words: its leading parameter name, and every
    other ``snake_case`` parameter name, shown as the option that sets it."""
    words = message.split(" ")
    for i, w in enumerate(words):
        core = w.rstrip(",:;.)")
        if core.isidentifier() and (i == 0 or "_" in core) and _flag(core):
            words[i] = cast(str, _flag(core)) + w[len(core):]
    return " ".join(words)


def dest_of(option: str) -> str:
    """The attribute argparse stores ``option`` under (its default ``dest``: the name without
    the leading dashes, dashes as underscores): the option tables name options only and find
    their values through this, so a renamed option cannot leave a table reading a stale
    attribute (tests/test_cli.py checks every table's options against the parser)."""
    return option.lstrip("-").replace("-", "_")


def option_value(a, option: str):
    """The value of ``option`` in the parsed arguments ``a``; None when not given or when
    the subcommand does not take it."""
    return getattr(a, dest_of(option), None)


def fail(message: str) -> NoReturn:
    msg = one_line(message) or "invalid input"
    sys.stderr.write(f"tightdp: error: {_as_flags(msg)}\n")
    raise SystemExit(2)


def number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def integer(text: str) -> int:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if not x.is_integer():
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}")
    return int(x)


def memory_size(text: str) -> int:
    from ..budget import parse_memory

    try:
        return parse_memory(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("max_memory ")) from None


def budget_kwargs(a) -> dict:
    """--max-memory / --max-seconds, validated before any work."""
    from ..budget import Budget

    b = Budget.make(a.max_memory, a.max_seconds)
    return {"max_memory": b.max_memory, "max_seconds": b.max_seconds}


def clean(out: dict) -> dict:
    """The JSON object of a subcommand: strict JSON values (see :func:`tightdp.as_dict`)."""
    from ..results import as_dict

    return as_dict(out)


class RoundUp(float):
    """A value shown rounded up at 6 significant digits (an upper bound on loss, or a
    setting that must not be shown smaller than it is); :class:`RoundDown` rounds down."""


class RoundDown(float):
    pass


def format_value(x) -> str:
    """Six significant digits; a certified upper bound is rounded up and a lower bound down, so
    that the printed number is still a bound (the JSON output has every digit)."""
    if x is None:
        return "-"
    if isinstance(x, float):
        if isinstance(x, RoundUp | RoundDown) and math.isfinite(x) and x != 0.0:
            up = isinstance(x, RoundUp)
            out = f"{float(x):.6g}"
            if (float(out) >= x) if up else (float(out) <= x):
                return out
            # nearest went the wrong way: one unit of the sixth digit the other way
            step = 10.0 ** (math.floor(math.log10(abs(float(out)))) - 5)
            out = f"{float(out) + (step if up else -step):.6g}"
            if (float(out) >= x) if up else (float(out) <= x):
                return out
            return f"{float(x):.17g}"
        return f"{float(x):.6g}"
    return str(x)


def up(x):
    return None if x is None else RoundUp(x)


def down(x):
    return None if x is None else RoundDown(x)


def format_table(rows: list[list], header: list[str]) -> str:
    cells = [header] + [[format_value(c) for c in r] for r in rows]
    w = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w[i]) for i, c in enumerate(r)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * x for x in w))
    return "\n".join(lines)


def status_of(r) -> str:
    """What an accountant's answer is: the ``notes`` column of ``tightdp compare``."""
    if r.certified:
        s = "certified upper+lower" if r.lower is not None else "certified upper only"
    else:
        bounds = [name for name, x in (("upper", r.upper), ("lower", r.lower)) if x is not None]
        s = "approximation" + (f" (certified {'+'.join(bounds)})" if bounds else "")
    if r.details.get("converged") is False:
        s += "; coarser (budget)"
    return s


def short(message: str, width: int = 70) -> str:
    """The first line of ``message``, cut at a word boundary to at most ``width`` chars."""
    line = one_line(message)
    if len(line) <= width:
        return line
    return line[:width - 3].rsplit(" ", 1)[0] + "..."


def result_row(r, seconds: float) -> dict:
    """The keys every subcommand's JSON shares, from an accountant's result."""
    return {"lower": r.lower, "upper": r.upper, "accountant": r.accountant,
            "certified": r.certified, "seconds": seconds, "note": r.note}
