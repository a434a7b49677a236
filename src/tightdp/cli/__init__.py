"""The ``tightdp`` command: one module per subcommand, each registering its parser and
handler (``register(add)``); ``common`` and ``options`` hold what they share.

Examples
--------
  tightdp epsilon --sampling-rate 0.01 --noise-multiplier 1.0 --steps 10000 --delta 1e-5
  tightdp delta --sampling-rate 0.01 --noise-multiplier 1.0 --steps 10000 --epsilon 1.0 --json
  tightdp epsilon ... --accountant fft --sampling without-replacement
  tightdp compare --sampling-rate 0.01 --noise-multiplier 1.0 --steps 10000 --delta 1e-5
  tightdp calibrate --sampling-rate 0.01 --steps 10000 --delta 1e-5 --epsilon 3
  tightdp risk --sampling-rate 0.01 --noise-multiplier 1 --steps 10000 --fpr 0.01 0.001
  tightdp calibrate --sampling-rate 0.01 --steps 10000 --tpr 0.05 --fpr 0.01
  tightdp epsilon --spec composition.json --delta 1e-5
  tightdp group --group-size 8 --sampling-rate 0.01 --noise-multiplier 1 --steps 2000 \\
      --delta 1e-6
  tightdp plot --sampling-rate 0.01 --noise-multiplier 1 --steps 1000 --output curve.png
  tightdp sweep --sampling-rate 0.01,0.02 --noise-multiplier 0.8,1.0 --steps 1000,10000 \\
      --delta 1e-5 --out sweep.csv --workers 2
  tightdp spec --sampling-rate 0.01 --noise-multiplier 1 --steps 10000 > run.json

Options are strict (an option that does not apply, or conflicts with another, is an error
naming it; no abbreviations); every computing subcommand takes ``--max-memory`` and
``--max-seconds``. Exit status 0, or 2 with one line on stderr (bad input, a refused query,
memory exhausted), or 130 on Ctrl-C. ``--json`` prints strict JSON: infinity is ``null`` with
``"<key>_infinite": true`` beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable

from . import calibrate, compare, delta, epsilon, group, individual, plot, risk, spec, sweep
from .common import (
    COMMAND_FLAGS,
    EXAMPLES,
    FLAGS,
    Parser,
    RoundDown,
    RoundUp,
    budget_kwargs,
    check_flags,
    format_value,
)
from .common import clean as _clean
from .common import fail as _fail

__all__ = ["main", "build_parser", "format_value", "RoundUp", "RoundDown"]

#: the subcommands, in the order ``tightdp --help`` lists them
_COMMANDS = (epsilon, delta, compare, calibrate, group, plot, individual, sweep, spec, risk)


def _parser_and_handlers() -> tuple[argparse.ArgumentParser, dict[str, Callable]]:
    """The command's parser (every subcommand registered) and the handler of each."""
    from .._version import __version__

    p = Parser(prog="tightdp", description="Tight differential-privacy accounting with "
               "certified bounds.", epilog=EXAMPLES,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"tightdp {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)

    def add(name: str, help_: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help_, description=help_, epilog=EXAMPLES,
                              formatter_class=argparse.RawDescriptionHelpFormatter)

    handlers: dict[str, Callable] = {}
    for command in _COMMANDS:
        handlers.update(command.register(add))
    for command_name, parser in sub.choices.items():
        COMMAND_FLAGS[command_name] = {o for action in parser._actions
                                       for o in action.option_strings}
        FLAGS.update(COMMAND_FLAGS[command_name])
    return p, handlers


def build_parser() -> argparse.ArgumentParser:
    """The parser of the ``tightdp`` command."""
    return _parser_and_handlers()[0]


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``tightdp`` command. Returns 0 on success; bad input or a refused
    query raises ``SystemExit(2)`` after one line on stderr, Ctrl-C ``SystemExit(130)``.
    Other exceptions are bugs and propagate with their traceback. A reader that closes the
    output early (``tightdp ... | head -1``) ends the command quietly, status 0."""
    try:
        code = _main(argv)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last flush
        return code
    except KeyboardInterrupt:
        sys.stderr.write("tightdp: interrupted\n")
        raise SystemExit(130) from None
    except BrokenPipeError:
        # what is left to write goes nowhere: the interpreter's final flush of stdout would
        # raise again (Python docs, "Note on SIGPIPE")
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 0


def _main(argv: list[str] | None) -> int:
    parser, handlers = _parser_and_handlers()
    top = {o for action in parser._actions for o in action.option_strings}
    check_flags(sys.argv[1:] if argv is None else list(argv), top)
    a = parser.parse_args(argv)
    import numpy

    from ..progress import set_progress

    set_progress(False if a.quiet else None)  # every subcommand has --quiet
    try:
        budget_kwargs(a)  # --max-memory / --max-seconds checked before anything else
        with numpy.errstate(all="ignore"):
            out = handlers[a.command](a)
    except ValueError as err:  # bad input, a refusal, BudgetExceeded: one line
        _fail(str(err))
    except MemoryError:
        _fail("out of memory: lower --max-memory (the budget the accountants plan for, "
               "default 2GB) or ask for a coarser result")
    if getattr(a, "json", None):  # sweep writes its table itself
        print(json.dumps(_clean(out), allow_nan=False))
    return 0
