"""The ``tightdp`` command.

Examples
--------
  tightdp epsilon --sampling-rate 0.01 --noise-multiplier 1.0 --steps 10000 --delta 1e-5
  tightdp delta --sampling-rate 0.01 --noise-multiplier 1.0 --steps 10000 --epsilon 1.0 --json
  tightdp epsilon ... --accountant fft --sampling without-replacement
  tightdp compare --sampling-rate 0.01 --noise-multiplier 1.0 --steps 10000 --delta 1e-5
  tightdp calibrate --sampling-rate 0.01 --steps 10000 --delta 1e-5 --epsilon 3
  tightdp epsilon --spec composition.json --delta 1e-5
  tightdp group --group-size 8 --sampling-rate 0.01 --noise-multiplier 1 --steps 2000 \\
      --delta 1e-6
  tightdp plot --sampling-rate 0.01 --noise-multiplier 1 --steps 1000 --output curve.png
  tightdp sweep --sampling-rate 0.01,0.02 --noise-multiplier 0.8,1.0 --steps 1000,10000 \\
      --delta 1e-5 --out sweep.csv --workers 2

Options are strict (an option that does not apply, or conflicts with another, is an error
naming it; no abbreviations); every computing subcommand takes ``--max-memory`` and
``--max-seconds``. Exit status 0, or 2 with one line on stderr (bad input, a refused query,
memory exhausted), or 130 on Ctrl-C. ``--json`` prints strict JSON: infinity is ``null`` with
``"<key>_infinite": true`` beside it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

from ._defaults import DEFAULT_RTOL

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
"""

#: every option string of the command (filled by :func:`build_parser`): a library error's
#: parameter ``name`` is shown as the option ``--name`` (dashes for underscores) when there is
#: one -- the library names its public parameters as the command's flags
_FLAGS: set[str] = set()

#: accountant-specific options: (attribute, option, the accountant that uses it)
_ACCOUNTANT_FLAGS = (("rtol", "--rtol", "pld"), ("eps_error", "--eps-error", "prv"),
                     ("delta_error", "--delta-error", "prv"), ("L", "--L", "fft"),
                     ("n", "--n", "fft"), ("spa_method", "--spa-method", "spa"))


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs) -> None:
        # no abbreviations: `delta ... --delta 5` must not be taken as --delta-error 5
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # one line, exit status 2
        sys.stderr.write(f"tightdp: error: {_one_line(message)}\n")
        raise SystemExit(2)


def _one_line(message: str) -> str:
    """``message`` on one line: every run of whitespace, line breaks included, as one space
    (a multi-line message, e.g. one quoting an array, is never cut in the middle)."""
    return " ".join(str(message).split())


def _flag(word: str) -> str | None:
    """The option ``--word`` (underscores as dashes) if the command has it, else None."""
    flag = "--" + word.replace("_", "-")
    return flag if flag in _FLAGS else None


def _as_flags(message: str) -> str:
    """A library message in the command's words: its leading parameter name, and every
    other ``snake_case`` parameter name, shown as the option that sets it."""
    words = message.split(" ")
    for i, w in enumerate(words):
        core = w.rstrip(",:;.)")
        if core.isidentifier() and (i == 0 or "_" in core) and _flag(core):
            words[i] = _flag(core) + w[len(core):]
    return " ".join(words)


def _fail(message: str) -> None:
    msg = _one_line(message) or "invalid input"
    sys.stderr.write(f"tightdp: error: {_as_flags(msg)}\n")
    raise SystemExit(2)


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def _int(text: str) -> int:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if not x.is_integer():
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}")
    return int(x)


def _memory(text: str) -> int:
    from .budget import parse_memory

    try:
        return parse_memory(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("max_memory ")) from None


def _mechanism_options(p: argparse.ArgumentParser, noise: bool = True, spec: bool = False
                       ) -> None:
    """The DP-SGD options; with ``spec``, also ``--spec FILE`` as their alternative (then
    --noise-multiplier is checked as required by the command, and --sampling defaults to None
    so that giving it with --spec is seen)."""
    g = p.add_argument_group("DP-SGD setting" + (" (or --spec FILE)" if spec else ""))
    g.add_argument("--sampling-rate", type=_float,
                   help="q in (0, 1] (Poisson rate); or give --batch-size and --dataset-size "
                        "(q = B/n), not both")
    if noise:
        g.add_argument("--noise-multiplier", type=_float, required=not spec,
                       help="sigma > 0: noise std / clip norm")
    g.add_argument("--steps", type=_int, help="number of steps >= 0")
    g.add_argument("--epochs", type=_float,
                   help="epochs instead of --steps (steps = ceil(epochs * n / B), or "
                        "ceil(epochs / sampling rate), in exact arithmetic)")
    g.add_argument("--dataset-size", type=_int, help="n (with --batch-size)")
    g.add_argument("--batch-size", type=_int, help="B (with --dataset-size)")
    g.add_argument("--sampling", default=None if spec else "poisson",
                   choices=["poisson", "without-replacement", "with-replacement",
                            "fixed-batch"],
                   help="how batches are drawn (default poisson, add/remove adjacency); "
                        "with-replacement and fixed-batch need --batch-size and "
                        "--dataset-size")
    if spec:
        _spec_option(p)


def _spec_option(p: argparse.ArgumentParser) -> None:
    p.add_argument_group("composition file").add_argument(
        "--spec", metavar="FILE",
        help="a composition of any mechanisms as a JSON state file (tightdp.save; see the "
             "README): instead of the DP-SGD options")


#: the DP-SGD options --spec replaces: (attribute, option)
_SPEC_CONFLICTS = (("sampling_rate", "--sampling-rate"), ("noise_multiplier", "--noise-multiplier"),
                   ("steps", "--steps"), ("epochs", "--epochs"), ("batch_size", "--batch-size"),
                   ("dataset_size", "--dataset-size"), ("sampling", "--sampling"),
                   ("solve_for", "--solve-for"))


def _spec_fail(path: str, message: str) -> None:
    """One line naming the file (not run through :func:`_fail`'s option renaming: a file
    called sigma.json must stay sigma.json)."""
    msg = " ".join(str(message).split()) or "invalid file"
    sys.stderr.write(f"tightdp: error: --spec {path}: {msg}\n")
    raise SystemExit(2)


def _load_spec(a):
    """(document, accountant) of --spec FILE, every field checked; the DP-SGD options it
    replaces are an error naming them."""
    from .state import from_dict, read_document

    given = [opt for attr, opt in _SPEC_CONFLICTS if getattr(a, attr, None) is not None]
    if given:
        _fail(f"--spec gives the whole composition; leave out {', '.join(given)}")
    try:
        with open(a.spec, "rb") as f:
            raw = f.read()
    except OSError as err:
        _spec_fail(a.spec, f"cannot read the file: {err.strerror or err}")
    try:
        doc = read_document(raw)
        return doc, from_dict(doc)
    except ValueError as err:
        _spec_fail(a.spec, str(err))


#: CLI attribute -> the option of a state file's accountant it overrides
_SPEC_OVERRIDES = (("rtol", "rtol"), ("eps_error", "eps_error"), ("delta_error", "delta_error"),
                   ("L", "L"), ("n", "n"), ("spa_method", "method"),
                   ("max_memory", "max_memory"), ("max_seconds", "max_seconds"))


def _spec_accountant(a, doc, file_acc):
    """The accountant of ``epsilon``/``delta --spec``: ``--accountant NAME`` with its options
    from the command line, or else the file's accountant with its options, each accountant
    option given on the command line replacing the file's."""
    from .accountants.registry import make_accountant
    from .state import from_dict

    if a.accountant is not None:
        name = a.accountant
        _check_accountant_flags(a, [name], f"--accountant {name}")
        # the file's relation (written, or inferred for a file without it) goes along
        acc = make_accountant(name, **_acc_opts(a), neighboring=file_acc.neighboring)
    else:
        name = file_acc.name
        _check_accountant_flags(a, [name], f"the {name} accountant of --spec")
        make_accountant(name, **_acc_opts(a))  # the options given, checked by their names
        opts = {**doc["accountant"]["options"], "neighboring": file_acc.neighboring}
        for attr, key in _SPEC_OVERRIDES:
            if getattr(a, attr, None) is not None:
                opts[key] = getattr(a, attr)
        acc = from_dict({**doc, "accountant": {"name": name, "options": opts},
                         "composition": []})
    for mech, k in file_acc.terms:
        acc.compose(mech, k)
    return acc


def _budget_options(p: argparse.ArgumentParser, json_output: bool = True) -> None:
    g = p.add_argument_group("resources")
    g.add_argument("--max-memory", type=_memory, metavar="SIZE",
                   help="memory one accountant query may use, e.g. 2GB, 500MB (default 2GB)")
    g.add_argument("--max-seconds", type=_float, metavar="S",
                   help="time one accountant query may use, in seconds (default 60)")
    if json_output:
        p.add_argument("--json", action="store_true",
                       help="print one JSON object (infinity as null with <key>_infinite: "
                            "true)")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bar on stderr (one is drawn for work running past 2 s "
                        "when stderr is a terminal)")


def _accountant_options(p: argparse.ArgumentParser, accountant_help: str | None = None
                        ) -> None:
    from .accountants.registry import ACCOUNTANTS

    g = p.add_argument_group("accountant")
    g.add_argument("--accountant", choices=list(ACCOUNTANTS),
                   help=accountant_help or "default pld; " + "; ".join(
                       f"{k}: {v[1]}" for k, v in ACCOUNTANTS.items()))
    g.add_argument("--rtol", type=_float,
                   help=f"pld only: relative bracket width (default {DEFAULT_RTOL:g})")
    g.add_argument("--eps-error", type=_float, help="prv only: eps error (default 0.01)")
    g.add_argument("--delta-error", type=_float, help="prv only: delta error (default 1e-9)")
    g.add_argument("--L", type=_float, help="fft only: domain half-width (default 12)")
    g.add_argument("--n", type=_int, help="fft only: number of grid points (default 1e6)")
    g.add_argument("--spa-method", choices=["msd0", "msd1", "clt"],
                   help="spa only: approximation (default msd1)")
    _budget_options(p)


def _check_accountant_flags(a, names: list[str], where: str) -> None:
    """An accountant-specific option is an error unless one of ``names`` uses it."""
    for attr, option, owner in _ACCOUNTANT_FLAGS:
        if getattr(a, attr, None) is not None and owner not in names:
            _fail(f"{option} applies only to the {owner} accountant, not to {where}")


def _budget(a) -> dict:
    """--max-memory / --max-seconds, validated before any work."""
    from .budget import Budget

    b = Budget.make(a.max_memory, a.max_seconds)
    return {"max_memory": b.max_memory, "max_seconds": b.max_seconds}


def _setting_args(a, noise: bool = True) -> dict:
    """The DP-SGD options as the keyword arguments of the library's front doors (the same
    names; the library validates them and names the one at fault)."""
    out = {"steps": a.steps, "epochs": a.epochs, "sampling_rate": a.sampling_rate,
           "batch_size": a.batch_size, "dataset_size": a.dataset_size,
           "sampling": getattr(a, "sampling", None) or "poisson"}
    if noise:
        out["noise_multiplier"] = a.noise_multiplier
    return out


def _setting(a):
    """The validated DP-SGD setting of the options (:func:`tightdp.dpsgd.dpsgd_setting`)."""
    from .dpsgd import dpsgd_setting

    return dpsgd_setting(**_setting_args(a))


def _acc_opts(a) -> dict:
    return {"rtol": a.rtol, "eps_error": a.eps_error, "delta_error": a.delta_error,
            "L": a.L, "n": a.n, "method": a.spa_method, **_budget(a)}


def _clean(out: dict) -> dict:
    """The JSON object of a subcommand: strict JSON values (see :func:`tightdp.as_dict`)."""
    from .results import as_dict

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


def _up(x):
    return None if x is None else RoundUp(x)


def _down(x):
    return None if x is None else RoundDown(x)


def _table(rows: list[list], header: list[str]) -> str:
    cells = [header] + [[format_value(c) for c in r] for r in rows]
    w = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w[i]) for i, c in enumerate(r)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * x for x in w))
    return "\n".join(lines)


def _status(r) -> str:
    """What an accountant's answer is: the ``notes`` column of ``tightdp compare``."""
    if r.certified:
        s = "certified upper+lower" if r.lower is not None else "certified upper only"
    else:
        bounds = [name for name, x in (("upper", r.upper), ("lower", r.lower)) if x is not None]
        s = "approximation" + (f" (certified {'+'.join(bounds)})" if bounds else "")
    if r.details.get("converged", True) is False:
        s += "; coarser (budget)"
    return s


def _short(message: str, width: int = 70) -> str:
    """The first line of ``message``, cut at a word boundary to at most ``width`` chars."""
    line = _one_line(message)
    if len(line) <= width:
        return line
    return line[:width - 3].rsplit(" ", 1)[0] + "..."


def _result_row(r, seconds: float) -> dict:
    """The keys every subcommand's JSON shares, from an accountant's result."""
    return {"lower": r.lower, "upper": r.upper, "accountant": r.accountant,
            "certified": r.certified, "seconds": seconds, "note": r.note}


def _query(a, want: str) -> dict:
    """``tightdp epsilon`` (want="epsilon": eps at --delta) and ``tightdp delta``
    (want="delta": delta at --epsilon): one accountant, one query, its bracket."""
    from . import _validate as v

    given = "delta" if want == "epsilon" else "epsilon"
    if a.spec is not None:
        doc, file_acc = _load_spec(a)
        x = v.delta_value("delta", a.delta) if want == "epsilon" else v.nonnegative(
            "epsilon", a.epsilon)
        acc = _spec_accountant(a, doc, file_acc)
        q = steps = None
        t0 = time.perf_counter()
        r = acc.epsilon(x) if want == "epsilon" else acc.delta(x)
    else:
        from .dpsgd import dpsgd_delta, dpsgd_epsilon

        if a.noise_multiplier is None:
            _fail("the following arguments are required: --noise-multiplier (or give --spec "
                  "FILE)")
        a.sampling = a.sampling or "poisson"
        name = a.accountant or "pld"
        _check_accountant_flags(a, [name], f"--accountant {name}")
        setting = _setting(a)
        q, steps = setting.sampling.sampling_rate, setting.steps
        t0 = time.perf_counter()
        if want == "epsilon":
            r = dpsgd_epsilon(**_setting_args(a), delta=a.delta, accountant=name,
                              **_acc_opts(a))
        else:
            r = dpsgd_delta(**_setting_args(a), epsilon=a.epsilon, accountant=name,
                            **_acc_opts(a))
        x = r.delta if want == "epsilon" else r.epsilon
    value = float(r.epsilon) if want == "epsilon" else float(r.delta)
    sec = time.perf_counter() - t0
    out = {want: value, given: x, **_result_row(r, sec), "estimate": r.estimate,
           "steps": steps, "sampling_rate": q, "noise_multiplier": a.noise_multiplier,
           "sampling": a.sampling, "details": r.details}
    if a.spec is not None:  # the composition is the file's: its total count of steps
        out.update(steps=acc.total_count, spec=a.spec)
    if not a.json:
        kind = "certified upper bound" if r.certified else "approximation (not a bound)"
        shown = _up(value) if r.certified else value
        print(f"{want} = {format_value(shown)}  ({kind}; accountant {r.accountant})")
        print(_table([[_down(r.lower), shown, _up(r.upper), x, sec]],
                     ["lower", want, "upper", given, "seconds"]))
        if r.note:
            print(f"note: {r.note}")
    return out


def _cmd_epsilon(a) -> dict:
    return _query(a, "epsilon")


def _cmd_delta(a) -> dict:
    return _query(a, "delta")


def _cmd_compare(a) -> dict:
    from . import _validate as v
    from .accountants.registry import ACCOUNTANTS, make_accountant
    from .dpsgd import dpsgd_epsilon

    head = a.accountant or "pld"
    delta = v.delta_value("delta", a.delta)
    setting = _setting(a)  # a bad setting is an error, not a refusing row
    q, steps = setting.sampling.sampling_rate, setting.steps
    # every accountant built first: a bad option is an error, not one refusing row
    for name in ACCOUNTANTS:
        make_accountant(name, **_acc_opts(a))
    t_all = time.perf_counter()
    rows, results = [], []
    for name in ACCOUNTANTS:
        t0 = time.perf_counter()
        try:
            r = dpsgd_epsilon(**_setting_args(a), delta=delta, accountant=name,
                              **_acc_opts(a))
        except ValueError as err:  # the accountant refuses this setting (or its budget)
            sec = time.perf_counter() - t0
            status = "refused: " + _short(str(err), 60)
            results.append({"accountant": name, "epsilon": None, "delta": delta,
                            "lower": None, "upper": None, "certified": False,
                            "seconds": sec, "note": str(err), "status": status,
                            "error": str(err)})
            rows.append([name, None, None, None, "no", sec, status])
            continue
        sec = time.perf_counter() - t0
        status = _status(r)
        results.append({"accountant": name, "epsilon": float(r.epsilon), "delta": delta,
                        **_result_row(r, sec), "status": status})
        rows.append([name, _up(r.epsilon) if r.certified else r.epsilon, _down(r.lower),
                     _up(r.upper), "yes" if r.certified else "no", sec, status])
    if not a.json:
        print(f"eps at delta={delta:g}: q={q}, sigma={a.noise_multiplier}, steps={steps}")
        print(_table(rows, ["accountant", "epsilon", "lower", "upper", "certified",
                            "seconds", "notes"]))
    headline = next(row for row in results if row["accountant"] == head)
    return {**headline, "steps": steps, "sampling_rate": q,
            "noise_multiplier": a.noise_multiplier, "sampling": a.sampling,
            "total_seconds": time.perf_counter() - t_all, "results": results}


def _calibrate_flags(a) -> None:
    """The flags --solve-for leaves unknown or unused are errors, and it needs the others."""
    unknown = {"noise-multiplier": (("noise_multiplier", "--noise-multiplier"),),
               "steps": (("steps", "--steps"), ("epochs", "--epochs")),
               "sampling-rate": (("sampling_rate", "--sampling-rate"),
                                 ("batch_size", "--batch-size"),
                                 ("dataset_size", "--dataset-size"),
                                 ("epochs", "--epochs"))}[a.solve_for]
    for attr, option in unknown:
        if getattr(a, attr) is not None:
            if attr == "epochs" and a.solve_for == "sampling-rate":
                _fail("--epochs needs the sampling rate, the unknown of --solve-for "
                      "sampling-rate; give --steps")
            _fail(f"{option} is the unknown of --solve-for {a.solve_for}; leave it out")
    if a.solve_for != "noise-multiplier" and a.noise_multiplier is None:
        _fail(f"--solve-for {a.solve_for} needs --noise-multiplier")


def _calibrate_spec(a) -> dict:
    """``calibrate --spec FILE``: the smallest common factor of every noise scale in the
    file's composition (:func:`tightdp.state.calibrate_scale`) meeting --epsilon at --delta."""
    from . import _validate as v
    from .accountants.registry import CERTIFYING, make_accountant
    from .dpsgd.calibrate import precision_options
    from .state import calibrate_scale, from_dict

    doc, file_acc = _load_spec(a)
    target = v.positive("epsilon", a.epsilon)
    delta = v.delta_value("delta", a.delta)
    rtol = v.positive("rtol", DEFAULT_RTOL if a.rtol is None else a.rtol)
    budget = _budget(a)
    if a.accountant is not None:
        acc = make_accountant(a.accountant, **precision_options(a.accountant, target, rtol / 4, {
            "max_memory": budget["max_memory"], "max_seconds": budget["max_seconds"]}),
            neighboring=file_acc.neighboring)
    else:
        if file_acc.name not in CERTIFYING:
            _fail(f"--spec: the file's accountant ({file_acc.name}) does not certify an upper "
                  f"bound; give --accountant {' or '.join(CERTIFYING)}")
        opts = {**doc["accountant"]["options"], "neighboring": file_acc.neighboring}
        if a.max_memory is not None:
            opts["max_memory"] = a.max_memory
        acc = from_dict({**doc, "accountant": {"name": file_acc.name, "options": opts},
                         "composition": []})
    for mech, k in file_acc.terms:
        acc.compose(mech, k)
    r = calibrate_scale(acc, epsilon=target, delta=delta, rtol=rtol, max_seconds=a.max_seconds)
    out = {**r.as_dict(), "upper": r.epsilon, "certified": True,
           "noise_multiplier": None, "sampling_rate": None, "steps": acc.total_count,
           "spec": a.spec,
           "note": f"every noise scale of the composition multiplied by scale; epsilon is the "
                   f"certified upper bound ({r.accountant} accountant) there, meeting the "
                   f"target {r.target_epsilon:g}; state is the calibrated composition"}
    if not a.json:
        scale = _up(r.scale)  # shown rounded up: the printed factor still meets the target
        print(f"scale: {format_value(scale)}  (multiplies every noise scale of {a.spec})")
        print(_table([[scale, _up(r.epsilon), _down(r.lower), r.target_epsilon, r.delta,
                       r.seconds]],
                     ["scale", "epsilon (certified)", "lower", "target", "delta",
                      "seconds"]))
    return out


def _cmd_calibrate(a) -> dict:
    from .dpsgd import calibrate_noise, calibrate_sampling_rate, calibrate_steps

    if a.spec is not None:
        return _calibrate_spec(a)
    a.solve_for = a.solve_for or "noise-multiplier"
    acc = a.accountant or "pld"
    _calibrate_flags(a)
    common = {"epsilon": a.epsilon, "delta": a.delta, "accountant": acc,
              "rtol": DEFAULT_RTOL if a.rtol is None else a.rtol, **_budget(a)}
    if a.solve_for == "noise-multiplier":
        r = calibrate_noise(**_setting_args(a, noise=False), **common)
    elif a.solve_for == "steps":
        r = calibrate_steps(noise_multiplier=a.noise_multiplier, sampling_rate=a.sampling_rate,
                            batch_size=a.batch_size, dataset_size=a.dataset_size, **common)
    else:
        r = calibrate_sampling_rate(noise_multiplier=a.noise_multiplier, steps=a.steps,
                                    **common)
    out = {**r.as_dict(), "upper": r.epsilon, "certified": True,
           "note": f"epsilon is the certified upper bound ({r.accountant} accountant) at the "
                   f"calibrated setting; it meets the target {r.target_epsilon:g}"}
    if not a.json:
        # noise shown rounded up, a sampling rate down: the printed setting still meets the
        # target
        sigma, rate = _up(r.noise_multiplier), _down(r.sampling_rate)
        print(f"{a.solve_for}: " + format_value({"noise-multiplier": sigma, "steps": r.steps,
                                         "sampling-rate": rate}[a.solve_for]))
        print(_table([[sigma, rate, r.steps, _up(r.epsilon), _down(r.lower),
                       r.target_epsilon, r.delta, r.seconds]],
                     ["noise_multiplier", "sampling_rate", "steps", "epsilon (certified)",
                      "lower", "target", "delta", "seconds"]))
    return out


def _cmd_group(a) -> dict:
    from .dpsgd import group_epsilon

    r = group_epsilon(group_size=a.group_size, **_setting_args(a), delta=a.delta,
                      rtol=DEFAULT_RTOL if a.rtol is None else a.rtol,
                      conversion=a.conversion, **_budget(a))
    out = r.as_dict()
    if not a.json:
        print(f"group of {r.group_size}: epsilon = {format_value(_up(r.epsilon))} (certified upper "
              "bound)")
        row = [_down(r.lower), _up(r.epsilon), r.linear_reference, _up(r.example_epsilon),
               r.seconds]
        head = ["lower", "epsilon", "k * eps_1", "eps_1", "seconds"]
        if a.conversion:
            row.insert(2, _up(r.conversion))
            head.insert(2, "conversion (Lemma 1.1)")
        print(_table([row], head))
        if r.note:
            print(f"note: {r.note}")
    return out


def _load_counts(a):
    """Per-example bucket counts and the DP-SGD setting: a NormRecorder directory (its
    setting, unless the options give one) or a ``.npy`` file (the options give it); the
    counts memory-mapped, never read whole."""
    import os

    import numpy as np

    path = a.counts
    setting = {"sampling_rate": a.sampling_rate, "noise_multiplier": a.noise_multiplier,
               "clip_norm": a.clip_norm}
    if os.path.isdir(path):
        from .individual import NormRecorder

        rec = NormRecorder.open(path)
        for key in setting:
            if setting[key] is None:
                setting[key] = getattr(rec, key)
            elif setting[key] != getattr(rec, key):
                _fail(f"--{key.replace('_', '-')} {setting[key]:g} differs from the recording's "
                      f"{getattr(rec, key):g} ({path})")
        return rec.counts, setting
    if not os.path.exists(path):
        _fail(f"--counts {path!r} does not exist")
    if not path.endswith(".npy"):
        _fail(f"--counts must be a NormRecorder directory or a .npy file of per-example bucket "
              f"counts, got {path!r}")
    for key in ("sampling_rate", "noise_multiplier"):
        if setting[key] is None:
            _fail(f"--{key.replace('_', '-')} is required with a .npy --counts")
    if setting["clip_norm"] is None:
        setting["clip_norm"] = 1.0
    try:
        return np.load(path, mmap_mode="r"), setting
    except (OSError, ValueError) as err:
        _fail(f"--counts {path!r} is not a readable .npy file: {err}")


def _cmd_individual(a) -> dict:
    from .individual import IndividualPLDAccountant, IndividualSPAAccountant

    if a.workers is not None and a.scheduler is not None:
        _fail("give --workers (a local cluster) or --scheduler (a running one), not both")
    counts, setting = _load_counts(a)
    kw = {**setting, "workers": a.workers, "scheduler": a.scheduler, "store": a.out}
    if a.method == "pld":
        kw.update(rtol=DEFAULT_RTOL if a.rtol is None else a.rtol, **_budget(a))
        if a.block_rows is not None:
            kw["block_rows"] = a.block_rows
        cls = IndividualPLDAccountant
    else:
        if a.rtol is not None:
            _fail("--rtol applies to --method pld only")
        if a.block_rows is not None:
            kw["chunk_size"] = a.block_rows
        cls = IndividualSPAAccountant
    t0 = time.perf_counter()
    try:
        r = cls.from_counts(counts, **kw).epsilon(a.delta)
    except ImportError as err:
        _fail(str(err))
    sec = time.perf_counter() - t0
    s = r.details["summary"]
    lower = r.lower
    worst = [{"index": w["index"], "epsilon": w["value"],
              "lower": None if lower is None else float(lower[w["index"]])} for w in s["worst"]]
    out = {"n_examples": s["count"], "delta": a.delta, "accountant": r.accountant,
           "certified": r.certified, "seconds": sec, "max": s["max"], "min": s["min"],
           "mean": s["mean"], "quantiles_upper": s["quantiles_upper"], "worst": worst,
           "converged": r.details.get("converged", True), "out": a.out, "note": r.note}
    if not a.json:
        kind = ("certified upper bounds" if r.certified else
                "saddle-point approximations (NOT bounds; certified upper in upper.npy)")
        print(f"{s['count']} examples: per-example epsilon at delta={a.delta:g} ({kind}; "
              f"{r.accountant}, {sec:.1f} s)")
        print(_table([[q, _up(v)] for q, v in s["quantiles_upper"].items()],
                      ["quantile", "epsilon <= (histogram bin edge)"]))
        print(_table([[w["index"], _up(w["epsilon"]), _down(w["lower"])] for w in worst],
                     ["worst example", "epsilon", "lower"]))
        if a.out:
            print(f"per-example arrays written to {a.out}")
        if r.note:
            print(f"note: {r.note}")
    return out


def _check_output(path: str) -> None:
    """--output must be a .png file that can be written: checked before any work."""
    import os

    if not path.lower().endswith(".png"):
        _fail(f"--output must be a .png file, got {path!r}")
    full = os.path.abspath(path)
    parent = os.path.dirname(full)
    if os.path.isdir(full):
        _fail(f"--output {path!r} is a directory")
    if not os.path.isdir(parent):
        _fail(f"--output {path!r}: directory {parent!r} does not exist")
    if os.path.exists(full) and not os.access(full, os.W_OK):
        _fail(f"--output {path!r} exists and is not writable")
    if not os.access(parent, os.W_OK | os.X_OK):
        _fail(f"--output {path!r}: directory {parent!r} is not writable")


def _cmd_plot(a) -> dict:
    import numpy as np

    from . import _validate as v
    from .accountants.registry import make_accountant

    _check_output(a.output)
    if a.kind == "steps":
        if a.accountant is not None:
            _fail("--accountant does not apply to --kind steps: use --accountants")
        names = [x.strip() for x in (a.accountants or "pld,rdp").split(",") if x.strip()]
        from .accountants.registry import ACCOUNTANTS

        bad = [x for x in names if x not in ACCOUNTANTS]
        if bad or not names:
            _fail(f"--accountants must be a comma list of {', '.join(ACCOUNTANTS)}, got "
                  f"{a.accountants!r}")
        _check_accountant_flags(a, names, f"--accountants {','.join(names)}")
    else:
        if a.accountants is not None:
            _fail(f"--accountants applies only to --kind steps, not --kind {a.kind}: use "
                  "--accountant")
        names = [a.accountant or "pld"]
        _check_accountant_flags(a, names, f"--accountant {names[0]}")
    delta = v.delta_value("delta", a.delta if a.delta is not None else 1e-5)
    setting = _setting(a)
    q, steps, mech = setting.sampling.sampling_rate, setting.steps, setting.mechanism()
    opts = {**_acc_opts(a), "neighboring": setting.sampling.neighboring}
    for name in names:  # the options are checked before the plotting starts
        make_accountant(name, **opts)
    try:
        from .plotting import plot_epsilon_vs_steps, plot_privacy_curve, plot_tradeoff, pyplot

        plt = pyplot()
    except ImportError as err:
        _fail(str(err))
    t0 = time.perf_counter()
    if a.kind == "steps":
        grid = sorted({max(1, int(round(steps * f))) for f in np.linspace(0.05, 1, 12)})
        ax = plot_epsilon_vs_steps(lambda: mech, grid, delta, accountants=names, **opts)
        acc = make_accountant(names[0], **opts).compose(mech, steps)
    else:
        acc = make_accountant(names[0], **opts).compose(mech, steps)
        ax = plot_privacy_curve(acc) if a.kind == "curve" else plot_tradeoff(acc)
    ax.set_title(f"q={q}, sigma={a.noise_multiplier}, steps={steps}")
    ax.figure.tight_layout()
    ax.figure.savefig(a.output, dpi=120)
    plt.close(ax.figure)
    r = acc.epsilon(delta)
    sec = time.perf_counter() - t0
    if not a.json:
        print(f"wrote {a.output}")
        kind = "certified upper bound" if r.certified else "approximation (not a bound)"
        shown = _up(r.epsilon) if r.certified else r.epsilon
        print(f"epsilon = {format_value(shown)} at delta={delta:g}  ({kind}; accountant "
              f"{r.accountant})")
    return {"epsilon": float(r.epsilon), "delta": delta, **_result_row(r, sec),
            "steps": steps, "sampling_rate": q, "noise_multiplier": a.noise_multiplier,
            "sampling": a.sampling, "output": a.output, "kind": a.kind}


#: ``tightdp sweep``: (attribute, option, element type) of the options taking a
#: comma-separated list of values (the grid is their cartesian product); the grid key is the
#: attribute (the front doors' parameter name), except ``method`` for --spa-method
_SWEEP_LISTS = (
    ("sampling_rate", "--sampling-rate", _float),
    ("noise_multiplier", "--noise-multiplier", _float), ("steps", "--steps", _int),
    ("epochs", "--epochs", _float),
    ("batch_size", "--batch-size", _int), ("dataset_size", "--dataset-size", _int),
    ("sampling", "--sampling", str), ("group_size", "--group-size", _int),
    ("delta", "--delta", _float), ("epsilon", "--epsilon", _float),
    ("solve_for", "--solve-for", str), ("accountant", "--accountant", str),
    ("rtol", "--rtol", _float), ("eps_error", "--eps-error", _float),
    ("delta_error", "--delta-error", _float), ("L", "--L", _float), ("n", "--n", _int),
    ("spa_method", "--spa-method", str))


def _values(kind):
    """An argparse type: a comma-separated list of values of ``kind``."""
    def parse(text: str) -> list:
        items = [x.strip() for x in text.split(",")]
        if not all(items):
            raise argparse.ArgumentTypeError(f"expected a comma-separated list, got {text!r}")
        return [kind(x) for x in items]
    return parse


def _sweep_grid(a):
    """The grid of ``tightdp sweep``: --grid FILE (a dict of lists or a list of rows) or the
    list options (their cartesian product); --max-memory / --max-seconds apply to every row
    that does not set its own."""
    lists = {"method" if attr == "spa_method" else attr: getattr(a, attr)
             for attr, _, _ in _SWEEP_LISTS if getattr(a, attr) is not None}
    budget = {k: getattr(a, k) for k in ("max_memory", "max_seconds") if getattr(a, k) is not None}
    if a.grid is None:
        if not lists:
            _fail("give the settings as options (--sampling-rate 0.01,0.02 ...) or --grid FILE")
        return {**budget, **lists}
    if lists:
        given = [opt for attr, opt, _ in _SWEEP_LISTS if getattr(a, attr) is not None]
        _fail(f"--grid gives the settings; leave out {', '.join(given)}")
    try:
        with open(a.grid, encoding="utf-8") as f:
            grid = json.load(f)
    except OSError as err:
        _fail(f"--grid {a.grid}: cannot read the file: {err.strerror or err}")
    except ValueError as err:
        _fail(f"--grid {a.grid}: not JSON: {err}")
    if isinstance(grid, dict):
        return {**budget, **grid}
    if isinstance(grid, list) and all(isinstance(row, dict) for row in grid):
        return [{**budget, **row} for row in grid]
    _fail(f"--grid {a.grid}: must hold a JSON object of lists or a list of objects")


def _cmd_sweep(a) -> dict:
    from .sweep import sweep

    if a.workers is not None and a.scheduler is not None:
        _fail("give --workers or --scheduler, not both")
    grid = _sweep_grid(a)
    try:
        table = sweep(grid, query=a.query, workers=a.workers, scheduler=a.scheduler,
                      out=a.out, batch=a.batch)
    except ImportError as err:
        _fail(str(err))
    if a.out is None:
        table.to_csv(sys.stdout)
    else:
        print(f"wrote {len(table)} rows to {a.out} ({len(table.errors)} refused)")
    return {}


def build_parser() -> argparse.ArgumentParser:
    from ._version import __version__

    p = _Parser(prog="tightdp", description="Tight differential-privacy accounting with "
                "certified bounds.", epilog=EXAMPLES,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"tightdp {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def add(name: str, help_: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help_, description=help_, epilog=EXAMPLES,
                              formatter_class=argparse.RawDescriptionHelpFormatter)

    s = add("epsilon", "eps at a given delta for DP-SGD (or any composition: --spec FILE), "
                       "with its certified bracket")
    _mechanism_options(s, spec=True)
    s.add_argument("--delta", type=_float, required=True, help="delta in (0, 1)")
    _accountant_options(s)

    s = add("delta", "delta at a given eps for DP-SGD (or any composition: --spec FILE), "
                     "with its certified bracket")
    _mechanism_options(s, spec=True)
    s.add_argument("--epsilon", type=_float, required=True, help="eps >= 0")
    _accountant_options(s)

    s = add("compare", "every accountant on one setting: value, bracket, certified, time")
    _mechanism_options(s)
    s.add_argument("--delta", type=_float, required=True, help="delta in (0, 1)")
    _accountant_options(s, "the headline row of the JSON output (default pld); every "
                           "accountant runs, each with its own options")

    s = add("calibrate", "smallest noise (or most steps, or largest rate) meeting (eps, delta)")
    g = s.add_argument_group("DP-SGD setting (Poisson sampling)")
    g.add_argument("--sampling-rate", type=_float,
                   help="q in (0, 1]; or --batch-size and --dataset-size (q = B/n)")
    g.add_argument("--noise-multiplier", type=_float, help="sigma (for --solve-for steps/"
                   "sampling-rate)")
    g.add_argument("--steps", type=_int, help="number of steps")
    g.add_argument("--epochs", type=_float, help="epochs instead of --steps")
    g.add_argument("--dataset-size", type=_int, help="n (with --batch-size)")
    g.add_argument("--batch-size", type=_int, help="B (with --dataset-size)")
    s.add_argument("--epsilon", type=_float, required=True, help="target eps > 0")
    s.add_argument("--delta", type=_float, required=True, help="delta in (0, 1)")
    s.add_argument("--solve-for", default=None,
                   choices=["noise-multiplier", "steps", "sampling-rate"],
                   help="the unknown (default noise-multiplier); do not give it as an option")
    _spec_option(s)
    s.add_argument("--accountant", choices=["pld", "prv", "rdp"],
                   help="a certifying accountant (default pld)")
    s.add_argument("--rtol", type=_float,
                   help=f"relative precision (default {DEFAULT_RTOL:g}); with --spec, of the "
                        "scale factor (the accountant keeps the file's precision unless "
                        "--accountant is given)")
    _budget_options(s)

    s = add("group", "group-level eps of DP-SGD (Ganesh): groups of up to k examples")
    _mechanism_options(s)
    s.add_argument("--group-size", type=_int, required=True, help="k >= 1")
    s.add_argument("--delta", type=_float, required=True, help="delta in (0, 1)")
    s.add_argument("--rtol", type=_float, help=f"relative bracket width (default {DEFAULT_RTOL:g})")
    s.add_argument("--conversion", action="store_true",
                   help="also compute the Lemma 1.1 conversion baseline (costly: it needs "
                        "the example-level curve at very small delta)")
    _budget_options(s)

    s = add("plot", "draw the privacy curve, the trade-off curve or eps against steps (PNG)")
    _mechanism_options(s)
    s.add_argument("--kind", default="curve", choices=["curve", "tradeoff", "steps"])
    s.add_argument("--delta", type=_float,
                   help="delta of the eps reported (and of --kind steps), default 1e-5")
    s.add_argument("--accountants",
                   help="--kind steps only: comma list of accountants (default pld,rdp)")
    s.add_argument("--output", required=True, help="PNG file to write")
    _accountant_options(s, "--kind curve/tradeoff: the accountant (default pld)")
    s = add("individual", "per-example eps of DP-SGD from recorded bucket counts, in process "
                          "or on Dask (--workers / --scheduler)")
    s.add_argument("--counts", required=True,
                   help="a NormRecorder directory, or a .npy file: examples x (n_buckets + 1) "
                        "integer counts (column 0: steps without loss, column j: norm ratio "
                        "rounded up to j/n_buckets)")
    s.add_argument("--sampling-rate", type=_float,
                   help="q in (0, 1] (default: the recording's)")
    s.add_argument("--noise-multiplier", type=_float,
                   help="sigma > 0 (default: the recording's)")
    s.add_argument("--clip-norm", type=_float,
                   help="C > 0 (the counts already hold ratios; default: the recording's, or 1)")
    s.add_argument("--delta", type=_float, required=True, help="delta in [1e-9, 1)")
    s.add_argument("--method", default="pld", choices=["pld", "spa"],
                   help="pld: certified brackets (default); spa: saddle-point approximation")
    s.add_argument("--rtol", type=_float,
                   help=f"relative bracket width per example (pld; default {DEFAULT_RTOL:g})")
    g = s.add_argument_group("where it runs")
    g.add_argument("--workers", type=_int, help="start a Dask LocalCluster of N worker "
                   "processes (needs tightdp[dask])")
    g.add_argument("--scheduler", metavar="ADDRESS",
                   help="the address of a running Dask scheduler, e.g. tcp://host:8786")
    g.add_argument("--block-rows", type=_int, help="examples per block (task)")
    g.add_argument("--out", metavar="DIR",
                   help="write the per-example arrays there (epsilon.npy, lower.npy, ...)")
    _budget_options(s)

    s = add("sweep", "a table of DP-SGD settings: every combination of the comma-separated "
                     "values (or --grid FILE), one query each, in-process or on Dask")
    g = s.add_argument_group("the grid: each option a comma-separated list of values, as in "
                             "the other subcommands (or --grid FILE)")
    for attr, option, kind in _SWEEP_LISTS:
        g.add_argument(option, dest=attr, type=_values(kind), metavar="LIST")
    g.add_argument("--grid", metavar="FILE",
                   help="a JSON file: an object of lists (every combination) or a list of "
                        "objects (one per row), keys named as tightdp.sweep's (sampling_rate, "
                        "noise_multiplier, steps, delta, query, ...)")
    s.add_argument("--query", default="epsilon", choices=["epsilon", "delta", "group",
                                                          "calibrate"],
                   help="the question of each row (default epsilon; a --grid row may set its "
                        "own query); calibrate solves for --solve-for (default "
                        "noise_multiplier)")
    s.add_argument("--out", metavar="FILE",
                   help="write the table to FILE.csv or FILE.jsonl (rows appended as they "
                        "complete, then the file in grid order); default CSV on stdout")
    d = s.add_argument_group("where it runs (default in-process)")
    d.add_argument("--workers", type=_int, metavar="N",
                   help="on a Dask LocalCluster of N worker processes (pip install "
                        "\"tightdp[dask]\")")
    d.add_argument("--scheduler", metavar="ADDRESS",
                   help="on the existing Dask cluster at ADDRESS (tcp://host:port)")
    d.add_argument("--batch", type=_int, metavar="ROWS",
                   help="rows per Dask task (default: at most 16, at least 4 tasks per "
                        "worker)")
    _budget_options(s, json_output=False)  # the budget of each row's query
    for parser in sub.choices.values():
        _FLAGS.update(o for action in parser._actions for o in action.option_strings)
    return p


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
    parser = build_parser()
    a = parser.parse_args(argv)
    import numpy

    handlers = {"epsilon": _cmd_epsilon, "delta": _cmd_delta, "compare": _cmd_compare,
                "calibrate": _cmd_calibrate, "group": _cmd_group, "plot": _cmd_plot,
                "individual": _cmd_individual, "sweep": _cmd_sweep}
    from .progress import set_progress

    set_progress(False if getattr(a, "quiet", False) else None)
    try:
        _budget(a)  # --max-memory / --max-seconds checked before anything else
        with numpy.errstate(all="ignore"):
            out = handlers[a.command](a)
    except ValueError as err:  # bad input, a refusal, BudgetExceeded: one line
        _fail(str(err))
    except MemoryError:
        _fail("out of memory: lower --max-memory (the budget the accountants plan for, "
              "default 2GB) or ask for a coarser result")
    if getattr(a, "json", False):
        print(json.dumps(_clean(out), allow_nan=False))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
