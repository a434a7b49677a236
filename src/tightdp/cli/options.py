"""The option groups several subcommands take (the DP-SGD setting, --spec FILE, the accountant
and its options, the budget), and their values as the library's keyword arguments."""

from __future__ import annotations

import argparse
import sys

from .._defaults import DEFAULT_RTOL
from .common import (
    budget_kwargs,
    fail,
    integer,
    memory_size,
    number,
    option_value,
    spelling,
)

#: accountant-specific options: (option, the accountant that uses it)
ACCOUNTANT_FLAGS = (("--rtol", "pld"), ("--eps-error", "prv"), ("--delta-error", "prv"),
                    ("--L", "fft"), ("--n", "fft"), ("--spa-method", "spa"))


def mechanism_options(p: argparse.ArgumentParser, noise: bool = True, spec: bool = False, *,
                      neighboring: bool = True) -> None:
    """The DP-SGD options; with ``spec``, also ``--spec FILE`` as their alternative (then
    --noise-multiplier is checked as required by the command, and --sampling defaults to None
    so that giving it with --spec is seen); ``neighboring``: with --neighboring (for a front
    door that takes the relation)."""
    g = p.add_argument_group("DP-SGD setting" + (" (or --spec FILE)" if spec else ""))
    g.add_argument("--sampling-rate", type=number,
                   help="q in (0, 1] (Poisson rate); or give --batch-size and --dataset-size "
                        "(q = B/n), not both")
    if noise:
        g.add_argument("--noise-multiplier", type=number, required=not spec,
                       help="sigma > 0: noise std / clip norm")
    g.add_argument("--steps", type=integer, help="number of steps >= 0")
    g.add_argument("--epochs", type=number,
                   help="epochs instead of --steps (steps = ceil(epochs * n / B), or "
                        "ceil(epochs / sampling rate), in exact arithmetic)")
    g.add_argument("--dataset-size", type=integer, help="n (with --batch-size)")
    g.add_argument("--batch-size", type=integer, help="B (with --dataset-size)")
    sampling_options(g, default=None if spec else "poisson", neighboring=neighboring)
    if spec:
        spec_option(p)


#: the --sampling choices (the library's SAMPLINGS with dashes)
SAMPLING_CHOICES = ["poisson", "without-replacement", "with-replacement", "fixed-batch",
                    "random-allocation", "shuffle", "truncated-poisson"]


def sampling_options(g, default: str | None = "poisson", *, neighboring: bool = True) -> None:
    """--sampling and the options of the samplings that need more than a rate or sizes;
    with ``neighboring``, --neighboring (the relation, checked by the front door against the
    ones the sampling is accounted under)."""
    g.add_argument("--sampling", default=default, choices=SAMPLING_CHOICES, type=spelling,
                   help="how batches are drawn (default poisson, add/remove adjacency; "
                        "underscores or dashes); "
                        "with-replacement and fixed-batch need --batch-size and "
                        "--dataset-size; random-allocation and shuffle are accounted per "
                        "epoch (--steps-per-epoch, or --batch-size and --dataset-size); "
                        "shuffle under replace-special (zero-out); truncated-poisson needs "
                        "--dataset-size and --max-batch-size")
    g.add_argument("--steps-per-epoch", type=integer,
                   help="random-allocation, shuffle: steps of one epoch (or --batch-size "
                        "and --dataset-size); --steps must be a multiple of it")
    g.add_argument("--selected", type=integer,
                   help="random-allocation: steps of an epoch each example takes part in, "
                        "in [1, --steps-per-epoch] (default 1)")
    g.add_argument("--max-batch-size", type=integer,
                   help="truncated-poisson: largest batch kept, in [1, --dataset-size]")
    if neighboring:
        g.add_argument("--neighboring", metavar="RELATION",
                       help="the neighbouring relation: add_or_remove_one (default of poisson, "
                            "fixed-batch, truncated-poisson), replace_one (default of "
                            "without-replacement, with-replacement; also poisson, "
                            "truncated-poisson, shuffle) or replace_special (default of "
                            "shuffle, random-allocation); aliases add_remove, replace")


def spec_option(p: argparse.ArgumentParser) -> None:
    p.add_argument_group("composition file").add_argument(
        "--spec", metavar="FILE",
        help="a composition of any mechanisms as a JSON state file (tightdp.save; see the "
             "README): instead of the DP-SGD options")


#: the DP-SGD options --spec replaces
SPEC_CONFLICTS = ("--sampling-rate", "--noise-multiplier", "--steps", "--epochs",
                  "--batch-size", "--dataset-size", "--sampling", "--steps-per-epoch",
                  "--selected", "--max-batch-size", "--neighboring", "--solve-for")


def _spec_fail(path: str, message: str) -> None:
    """One line naming the file (not run through :func:`fail`'s option renaming: a file
    called sigma.json must stay sigma.json)."""
    msg = " ".join(str(message).split()) or "invalid file"
    sys.stderr.write(f"tightdp: error: --spec {path}: {msg}\n")
    raise SystemExit(2)


def load_spec(a):
    """(document, accountant) of --spec FILE, every field checked; the DP-SGD options it
    replaces are an error naming them."""
    from ..state import from_dict, read_document

    given = [opt for opt in SPEC_CONFLICTS if option_value(a, opt) is not None]
    if given:
        fail(f"--spec gives the whole composition; leave out {', '.join(given)}")
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


#: (option, the option of a state file's accountant it overrides)
SPEC_OVERRIDES = (("--rtol", "rtol"), ("--eps-error", "eps_error"),
                  ("--delta-error", "delta_error"), ("--L", "L"), ("--n", "n"),
                  ("--spa-method", "method"), ("--max-memory", "max_memory"),
                  ("--max-seconds", "max_seconds"))


def spec_accountant(a, doc, file_acc):
    """The accountant of ``epsilon``/``delta --spec``: ``--accountant NAME`` with its options
    from the command line, or else the file's accountant with its options, each accountant
    option given on the command line replacing the file's."""
    from ..accountants.registry import make_accountant
    from ..state import from_dict

    if a.accountant is not None:
        name = a.accountant
        check_accountant_flags(a, [name], f"--accountant {name}")
        # the file's relation (written, or inferred for a file without it) goes along
        acc = make_accountant(name, **accountant_kwargs(a), neighboring=file_acc.neighboring)
    else:
        name = file_acc.name
        check_accountant_flags(a, [name], f"the {name} accountant of --spec")
        make_accountant(name, **accountant_kwargs(a))  # the options given, checked by their names
        opts = {**doc["accountant"]["options"], "neighboring": file_acc.neighboring}
        for option, key in SPEC_OVERRIDES:
            if option_value(a, option) is not None:
                opts[key] = option_value(a, option)
        acc = from_dict({**doc, "accountant": {"name": name, "options": opts},
                         "composition": []})
    for mech, k in file_acc.terms:
        acc.compose(mech, k)
    return acc


def budget_options(p: argparse.ArgumentParser, json_output: bool = True) -> None:
    g = p.add_argument_group("resources")
    g.add_argument("--max-memory", type=memory_size, metavar="SIZE",
                   help="memory one accountant query may use, e.g. 2GB, 500MB (default 2GB)")
    g.add_argument("--max-seconds", type=number, metavar="S",
                   help="time one accountant query may use, in seconds (default 60)")
    if json_output:
        p.add_argument("--json", action="store_true",
                       help="print one JSON object (infinity as null with <key>_infinite: "
                            "true)")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bar on stderr (one is drawn for work running past 2 s "
                        "when stderr is a terminal)")


def accountant_options(p: argparse.ArgumentParser, accountant_help: str | None = None
                        ) -> None:
    from ..accountants.registry import ACCOUNTANTS

    g = p.add_argument_group("accountant")
    g.add_argument("--accountant", choices=list(ACCOUNTANTS),
                   help=accountant_help or "default pld; " + "; ".join(
                       f"{k}: {v[1]}" for k, v in ACCOUNTANTS.items()))
    g.add_argument("--rtol", type=number,
                   help=f"pld only: relative bracket width (default {DEFAULT_RTOL:g})")
    g.add_argument("--eps-error", type=number, help="prv only: eps error (default 0.01)")
    g.add_argument("--delta-error", type=number, help="prv only: delta error (default 1e-9)")
    g.add_argument("--L", type=number, help="fft only: domain half-width (default 12)")
    g.add_argument("--n", type=integer, help="fft only: number of grid points (default 1e6)")
    g.add_argument("--spa-method", choices=["msd0", "msd1", "clt"],
                   help="spa only: approximation (default msd1)")
    budget_options(p)


def check_accountant_flags(a, names: list[str], where: str) -> None:
    """An accountant-specific option is an error unless one of ``names`` uses it."""
    for option, owner in ACCOUNTANT_FLAGS:
        if option_value(a, option) is not None and owner not in names:
            fail(f"{option} applies only to the {owner} accountant, not to {where}")


def setting_args(a, noise: bool = True) -> dict:
    """The DP-SGD options as the keyword arguments of the library's front doors (the same
    names; the library validates them and names the one at fault)."""
    out = {"steps": a.steps, "epochs": a.epochs, "sampling_rate": a.sampling_rate,
           "batch_size": a.batch_size, "dataset_size": a.dataset_size,
           "sampling": getattr(a, "sampling", None) or "poisson",
           "steps_per_epoch": a.steps_per_epoch, "selected": a.selected,
           "max_batch_size": a.max_batch_size}
    if noise:
        out["noise_multiplier"] = a.noise_multiplier
    return out


def relation_kwargs(a) -> dict:
    """``{"neighboring": --neighboring}`` when given (the front doors check it), else {}."""
    rel = getattr(a, "neighboring", None)
    return {} if rel is None else {"neighboring": rel}


def dpsgd_setting_of(a):
    """The validated DP-SGD setting of the options (:func:`tightdp.dpsgd.dpsgd_setting`)."""
    from ..dpsgd import dpsgd_setting

    return dpsgd_setting(**setting_args(a))


def accountant_kwargs(a) -> dict:
    return {"rtol": a.rtol, "eps_error": a.eps_error, "delta_error": a.delta_error,
            "L": a.L, "n": a.n, "method": a.spa_method, **budget_kwargs(a)}
