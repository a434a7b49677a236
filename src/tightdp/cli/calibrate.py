"""``tightdp calibrate``: the smallest noise (or most steps, or largest rate) meeting (eps,
delta), or the common noise scale factor of a --spec FILE's composition."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from .._defaults import DEFAULT_RTOL
from .common import (
    budget_kwargs,
    dest_of,
    down,
    fail,
    format_table,
    format_value,
    integer,
    number,
    option_value,
    spelling,
    up,
)
from .options import (
    budget_options,
    load_spec,
    relation_kwargs,
    sampling_options,
    setting_args,
    spec_option,
)

#: the unknowns of ``calibrate`` (its --solve-for choices) and the options giving each
UNKNOWNS = {"noise-multiplier": ("--noise-multiplier",),
            "steps": ("--steps", "--epochs"),
            # the epoch schemes fix their rate by their steps per epoch
            "sampling-rate": ("--sampling-rate", "--batch-size", "--dataset-size",
                              "--steps-per-epoch")}


def _inferred_unknown(a) -> str:
    """The unknown of ``calibrate`` without --solve-for: the one of noise multiplier, steps
    and sampling rate that no option gives; none or several left out is an error saying
    what to give (or which --solve-for fits)."""
    missing = [u for u, options in UNKNOWNS.items()
               if all(getattr(a, dest_of(o)) is None for o in options)]
    if len(missing) == 1:
        return missing[0]
    if not missing:
        fail("calibrate solves for the one of --noise-multiplier, --steps and --sampling-rate "
             "that is left out; all three are given: leave out the unknown (or name it with "
             "--solve-for noise-multiplier|steps|sampling-rate)")
    fail(f"calibrate solves for one unknown; {' and '.join('--' + u for u in missing)} are "
         f"left out: give all but the unknown (--solve-for {'|'.join(missing)})")


def _calibrate_flags(a) -> None:
    """The flags --solve-for leaves unknown or unused are errors, and it needs the others."""
    unknown = UNKNOWNS[a.solve_for] + (("--epochs",) if a.solve_for == "sampling-rate"
                                       else ())
    for option in unknown:
        if getattr(a, dest_of(option)) is not None:
            if option == "--epochs" and a.solve_for == "sampling-rate":
                fail("--epochs needs the sampling rate, the unknown of --solve-for "
                      "sampling-rate; give --steps")
            fail(f"{option} is the unknown of --solve-for {a.solve_for}; leave it out")
    if a.solve_for != "noise-multiplier" and a.noise_multiplier is None:
        fail(f"--solve-for {a.solve_for} needs --noise-multiplier")


def _calibrate_spec(a) -> dict:
    """``calibrate --spec FILE``: the smallest common factor of every noise scale in the
    file's composition (:func:`tightdp.state.calibrate_scale`) meeting --epsilon at --delta."""
    from .. import _validate as v
    from ..accountants.registry import CERTIFYING, make_accountant
    from ..dpsgd.calibrate import precision_options
    from ..state import calibrate_scale, from_dict

    doc, file_acc = load_spec(a)
    target = v.positive("epsilon", a.epsilon)
    delta = v.delta_value("delta", a.delta)
    rtol = v.positive("rtol", DEFAULT_RTOL if a.rtol is None else a.rtol)
    budget = budget_kwargs(a)
    if a.accountant is not None:
        acc = make_accountant(a.accountant, **precision_options(a.accountant, target, rtol / 4, {
            "max_memory": budget["max_memory"], "max_seconds": budget["max_seconds"]}),
            neighboring=file_acc.neighboring)
    else:
        if file_acc.name not in CERTIFYING:
            fail(f"--spec: the file's accountant ({file_acc.name}) does not certify an upper "
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
        scale = up(r.scale)  # shown rounded up: the printed factor still meets the target
        print(f"scale: {format_value(scale)}  (multiplies every noise scale of {a.spec})")
        print(format_table([[scale, up(r.epsilon), down(r.lower), r.target_epsilon, r.delta,
                       r.seconds]],
                     ["scale", "epsilon (certified)", "lower", "target", "delta",
                      "seconds"]))
    return out


def _calibrate_risk(a) -> dict:
    """``calibrate --tpr X --fpr Y`` / ``--advantage A``: the smallest noise multiplier (the
    most steps, the largest sampling rate) whose certified trade-off curve meets the risk
    target (:func:`tightdp.calibrate_noise`, ``calibrate_steps``,
    ``calibrate_sampling_rate``)."""
    for option in ("--epsilon", "--delta", "--spec"):
        if getattr(a, dest_of(option)) is not None:
            fail(f"{option} does not apply to a risk target (--tpr/--fpr/--advantage); "
                 "leave it out")
    if a.accountant not in (None, "pld"):
        fail("--accountant: a risk target is calibrated with pld (its two-sided curve)")
    if a.rtol is not None and a.solve_for in (None, "noise-multiplier") \
            and a.noise_multiplier is None:
        fail("--rtol does not apply to --solve-for noise-multiplier with a risk target "
             "(the noise is found to 0.2%); leave it out")
    a.accountant = "pld"
    r = _solve(a, {"tpr": a.tpr, "fpr": a.fpr, "advantage": a.advantage})
    d = r.details
    out = {**r.as_dict(), "upper": d["tpr_upper"] if a.advantage is None else
           d["advantage_upper"], "certified": True, "sampling": a.sampling,
           "note": f"the curve at the calibrated setting meets {d['target']} by its certified "
                   "upper bound"}
    if not a.json:
        sigma, rate = up(r.noise_multiplier), down(r.sampling_rate)
        value = {"noise-multiplier": sigma, "steps": r.steps, "sampling-rate": rate}
        print(f"{a.solve_for}: {format_value(value[a.solve_for])}  ({d['target']}, certified)")
        print(format_table([[sigma, rate, r.steps, d["tpr_lower"], d["tpr_upper"],
                             d["advantage_lower"], d["advantage_upper"], r.seconds]],
                           ["noise_multiplier", "sampling_rate", "steps", "tpr lower",
                            "tpr upper", "adv lower", "adv upper", "seconds"]))
    return out


def _solve(a, target: dict):
    """The front door of --solve-for (inferred when not given) called with the options and
    ``target`` (epsilon and delta, or the risk target's tpr, fpr, advantage)."""
    from ..dpsgd import calibrate_noise, calibrate_sampling_rate, calibrate_steps

    a.solve_for = a.solve_for or _inferred_unknown(a)
    a.sampling = a.sampling or "poisson"
    _calibrate_flags(a)
    common = {**target, "accountant": a.accountant or "pld", **budget_kwargs(a),
              **relation_kwargs(a)}
    if a.solve_for == "noise-multiplier":
        if a.rtol is not None:
            common["rtol"] = a.rtol
        return calibrate_noise(**setting_args(a, noise=False), **common)
    common["rtol"] = DEFAULT_RTOL if a.rtol is None else a.rtol
    if a.solve_for == "steps":
        setting = setting_args(a)
        for unknown in ("steps", "epochs"):
            setting.pop(unknown)
        return calibrate_steps(**setting, **common)
    for option in ("--steps-per-epoch", "--selected", "--max-batch-size"):
        if option_value(a, option) is not None:
            fail(f"{option} does not apply to --solve-for sampling-rate (poisson or "
                 "without-replacement sampling)")
    return calibrate_sampling_rate(noise_multiplier=a.noise_multiplier, steps=a.steps,
                                   sampling=a.sampling, **common)


def run(a) -> dict:
    risk = a.tpr is not None or a.fpr is not None or a.advantage is not None
    if risk:
        return _calibrate_risk(a)
    if a.epsilon is None or a.delta is None:
        fail("the following arguments are required: --epsilon and --delta (or a risk "
             "target: --tpr with --fpr, or --advantage)")
    if a.spec is not None:
        return _calibrate_spec(a)
    r = _solve(a, {"epsilon": a.epsilon, "delta": a.delta})
    out = {**r.as_dict(), "upper": r.epsilon, "certified": True, "sampling": a.sampling,
           "neighboring": r.details.get("neighboring"),
           "note": f"epsilon is the certified upper bound ({r.accountant} accountant) at the "
                   f"calibrated setting; it meets the target {r.target_epsilon:g}"}
    if not a.json:
        # noise shown rounded up, a sampling rate down: the printed setting still meets the
        # target
        sigma, rate = up(r.noise_multiplier), down(r.sampling_rate)
        print(f"{a.solve_for}: " + format_value({"noise-multiplier": sigma, "steps": r.steps,
                                         "sampling-rate": rate}[a.solve_for]))
        print(format_table([[sigma, rate, r.steps, up(r.epsilon), down(r.lower),
                       r.target_epsilon, r.delta, r.seconds]],
                     ["noise_multiplier", "sampling_rate", "steps", "epsilon (certified)",
                      "lower", "target", "delta", "seconds"]))
    return out


def register(add: Callable[[str, str], argparse.ArgumentParser]) -> dict:
    """The ``calibrate`` subcommand's parser (from ``add(name, help)``); its handler by name."""
    s = add("calibrate", "smallest noise (or most steps, or largest rate) meeting (eps, delta)")
    g = s.add_argument_group("DP-SGD setting")
    g.add_argument("--sampling-rate", type=number,
                   help="q in (0, 1]; or --batch-size and --dataset-size (q = B/n)")
    g.add_argument("--noise-multiplier", type=number, help="sigma (for --solve-for steps/"
                   "sampling-rate)")
    g.add_argument("--steps", type=integer, help="number of steps")
    g.add_argument("--epochs", type=number, help="epochs instead of --steps")
    g.add_argument("--dataset-size", type=integer, help="n (with --batch-size)")
    g.add_argument("--batch-size", type=integer, help="B (with --dataset-size)")
    sampling_options(g, default=None)
    s.add_argument("--epsilon", type=number, help="target eps > 0 (with --delta)")
    s.add_argument("--delta", type=number, help="delta in [1e-300, 1)")
    r = s.add_argument_group("risk target (instead of --epsilon/--delta)")
    r.add_argument("--tpr", type=number, help="TPR of the best attack at --fpr at most this")
    r.add_argument("--fpr", type=number, help="false-positive rate in (0, 1) of --tpr")
    r.add_argument("--advantage", type=number, help="advantage (TPR - FPR) at most this")
    s.add_argument("--solve-for", default=None, type=spelling, choices=list(UNKNOWNS),
                   help="the unknown (default: the one of --noise-multiplier, --steps, "
                        "--sampling-rate left out); do not give it as an option")
    spec_option(s)
    s.add_argument("--accountant", choices=["pld", "prv", "rdp"],
                   help="a certifying accountant (default pld)")
    s.add_argument("--rtol", type=number,
                   help=f"relative precision (default {DEFAULT_RTOL:g}); with --spec, of the "
                        "scale factor (the accountant keeps the file's precision unless "
                        "--accountant is given)")
    budget_options(s)
    return {"calibrate": run}
