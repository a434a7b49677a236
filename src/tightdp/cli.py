"""The ``tightdp`` command.

Examples
--------
  tightdp epsilon --sampling-rate 0.01 --noise-multiplier 1.0 --steps 10000 --delta 1e-5
  tightdp delta --sampling-rate 0.01 --noise-multiplier 1.0 --steps 10000 --epsilon 1.0 --json
  tightdp epsilon ... --accountant fft --sampling without-replacement
  tightdp compare --sampling-rate 0.01 --noise-multiplier 1.0 --steps 10000 --delta 1e-5
  tightdp calibrate --sampling-rate 0.01 --steps 10000 --delta 1e-5 --epsilon 3
  tightdp group --group-size 8 --sampling-rate 0.01 --noise-multiplier 1 --steps 2000 \\
      --delta 1e-6
  tightdp plot --sampling-rate 0.01 --noise-multiplier 1 --steps 1000 --output curve.png
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time

EXAMPLES = """examples:
  tightdp epsilon --sampling-rate 0.01 --noise-multiplier 1.0 --steps 10000 --delta 1e-5
  tightdp delta --sampling-rate 0.01 --noise-multiplier 1.0 --steps 10000 --epsilon 1.0 --json
  tightdp epsilon --sampling-rate 0.01 --noise-multiplier 1 --epochs 10 --delta 1e-5 \\
      --accountant prv --eps-error 0.01
  tightdp compare --sampling-rate 0.01 --noise-multiplier 1.0 --steps 10000 --delta 1e-5
  tightdp calibrate --sampling-rate 0.01 --steps 10000 --delta 1e-5 --epsilon 3
  tightdp group --group-size 8 --sampling poisson --sampling-rate 0.01 \\
      --noise-multiplier 1 --steps 2000 --delta 1e-6
  tightdp plot --sampling-rate 0.01 --noise-multiplier 1 --steps 1000 --delta 1e-5 \\
      --output curve.png
"""

# Python parameter names -> the option that sets them (for one-line error messages)
_OPTION_OF = {
    "q": "--sampling-rate", "sampling_rate": "--sampling-rate",
    "sigma": "--noise-multiplier", "noise_multiplier": "--noise-multiplier",
    "count": "--steps", "steps": "--steps", "delta": "--delta", "eps": "--epsilon",
    "target_epsilon": "--epsilon", "batch_size": "--batch-size",
    "dataset_size": "--dataset-size", "group_size": "--group-size", "rtol": "--rtol",
    "eps_error": "--eps-error", "delta_error": "--delta-error", "L": "--L", "n": "--n",
    "epochs": "--epochs", "method": "--spa-method",
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit status 2
        sys.stderr.write(f"tightdp: error: {message.splitlines()[0]}\n")
        raise SystemExit(2)


def _fail(message: str) -> None:
    msg = message.strip().splitlines()[0] if message.strip() else "invalid input"
    m = re.match(r"([A-Za-z_]+)\b(.*)", msg)
    if m and m.group(1) in _OPTION_OF:
        msg = _OPTION_OF[m.group(1)] + m.group(2)
    sys.stderr.write(f"tightdp: error: {msg}\n")
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


def _mechanism_options(p: argparse.ArgumentParser, noise: bool = True) -> None:
    g = p.add_argument_group("DP-SGD setting")
    g.add_argument("--sampling-rate", type=_float, help="q in (0, 1] (Poisson rate or B/n)")
    if noise:
        g.add_argument("--noise-multiplier", type=_float, required=True,
                       help="sigma > 0: noise std / clip norm")
    g.add_argument("--steps", type=_int, help="number of steps >= 0")
    g.add_argument("--epochs", type=_float,
                   help="epochs instead of --steps (steps = ceil(epochs / sampling rate))")
    g.add_argument("--dataset-size", type=_int, help="n (with --batch-size)")
    g.add_argument("--batch-size", type=_int, help="B (with --dataset-size)")
    g.add_argument("--sampling", default="poisson",
                   choices=["poisson", "without-replacement", "with-replacement",
                            "fixed-batch"],
                   help="how batches are drawn (default poisson, add/remove adjacency)")


def _accountant_options(p: argparse.ArgumentParser) -> None:
    from .accountants.registry import ACCOUNTANTS

    g = p.add_argument_group("accountant")
    g.add_argument("--accountant", default="pld", choices=list(ACCOUNTANTS),
                   help="; ".join(f"{k}: {v[1]}" for k, v in ACCOUNTANTS.items()))
    g.add_argument("--rtol", type=_float, help="pld: relative bracket width (default 1e-3)")
    g.add_argument("--eps-error", type=_float, help="prv: eps error (default 0.01)")
    g.add_argument("--delta-error", type=_float, help="prv: delta error (default 1e-9)")
    g.add_argument("--L", type=_float, help="fft: domain half-width (default 12)")
    g.add_argument("--n", type=_int, help="fft: number of grid points (default 1e6)")
    g.add_argument("--spa-method", choices=["msd0", "msd1", "clt"], help="spa: approximation")
    p.add_argument("--json", action="store_true", help="print one JSON object")


def _setting(a) -> tuple[float | None, int]:
    from . import _validate as v

    q = a.sampling_rate
    if q is None and a.batch_size is not None and a.dataset_size is not None:
        q = a.batch_size / a.dataset_size
    if a.steps is None and a.epochs is None:
        _fail("give --steps (an integer >= 0) or --epochs (a number > 0)")
    if a.steps is not None and a.epochs is not None:
        _fail("give only one of --steps and --epochs")
    if a.steps is not None:
        steps = v.count("steps", a.steps, minimum=0)
    else:
        epochs = v.positive("epochs", a.epochs)
        if q is None:
            _fail("--epochs needs --sampling-rate (or --batch-size and --dataset-size)")
        q = v.probability_open_closed("sampling_rate", q)
        steps = int(math.ceil(epochs / q - 1e-9))
    return q, steps


def _mechanism(a, q):
    from . import _validate as v
    from .mechanisms import (
        Gaussian,
        PoissonSubsampled,
        SampledWithoutReplacement,
        SampledWithReplacement,
    )

    sigma = v.positive("noise_multiplier", a.noise_multiplier)
    if a.sampling == "poisson":
        if q is None:
            _fail("--sampling-rate must be given, in (0, 1]")
        return PoissonSubsampled(Gaussian(sigma), q)
    if a.sampling == "without-replacement":
        if q is None:
            _fail("--sampling-rate must be given, in (0, 1]")
        return SampledWithoutReplacement(Gaussian(sigma), q)
    if a.batch_size is None or a.dataset_size is None:
        _fail(f"--sampling {a.sampling} needs --batch-size (>= 1) and --dataset-size (>= B)")
    if a.sampling == "with-replacement":
        return SampledWithReplacement(Gaussian(sigma), a.batch_size, a.dataset_size)
    from .group import group_mechanism

    return group_mechanism(1, sigma, "fixed_batch", batch_size=a.batch_size,
                           dataset_size=a.dataset_size)


def _acc_opts(a) -> dict:
    return {"rtol": a.rtol, "eps_error": a.eps_error, "delta_error": a.delta_error,
            "L": a.L, "n": a.n, "spa_method": a.spa_method}


def _clean(x):
    if isinstance(x, float) and (math.isnan(x)):
        return None
    if isinstance(x, float) and math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if isinstance(x, dict):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_clean(v) for v in x]
    if hasattr(x, "tolist"):
        return _clean(x.tolist())
    if isinstance(x, bool | int | float | str) or x is None:
        return x
    return str(x)


class _Up(float):
    """A value shown rounded up at 6 significant digits (an upper bound on loss, or a
    setting that must not be shown smaller than it is); :class:`_Down` rounds down."""


class _Down(float):
    pass


def _fmt(x) -> str:
    """Six significant digits; a certified upper bound is rounded up and a lower bound down, so
    that the printed number is still a bound (the JSON output has every digit)."""
    if x is None:
        return "-"
    if isinstance(x, float):
        if isinstance(x, _Up | _Down) and math.isfinite(x) and x != 0.0:
            up = isinstance(x, _Up)
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
    return None if x is None else _Up(x)


def _down(x):
    return None if x is None else _Down(x)


def _table(rows: list[list], header: list[str]) -> str:
    cells = [header] + [[_fmt(c) for c in r] for r in rows]
    w = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w[i]) for i, c in enumerate(r)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * x for x in w))
    return "\n".join(lines)


def _query(a, want: str) -> dict:
    """``tightdp epsilon`` (want="epsilon": eps at --delta) and ``tightdp delta``
    (want="delta": delta at --epsilon): one accountant, one query, its bracket."""
    from . import _validate as v
    from .accountants.registry import make_accountant

    given = "delta" if want == "epsilon" else "epsilon"
    x = v.delta_value("delta", a.delta) if want == "epsilon" else v.nonnegative("eps",
                                                                                 a.epsilon)
    q, steps = _setting(a)
    mech = _mechanism(a, q)
    t0 = time.perf_counter()
    acc = make_accountant(a.accountant, **_acc_opts(a)).compose(mech, steps)
    r = acc.epsilon(x) if want == "epsilon" else acc.delta(x)
    value = float(r.epsilon) if want == "epsilon" else float(r.delta)
    out = {want: value, "lower": r.lower, "upper": r.upper, given: x,
           "accountant": r.accountant, "certified": r.certified, "estimate": r.estimate,
           "seconds": time.perf_counter() - t0, "steps": steps, "sampling_rate": q,
           "noise_multiplier": a.noise_multiplier, "sampling": a.sampling, "note": r.note,
           "details": r.details}
    if not a.json:
        kind = "certified upper bound" if r.certified else "approximation (not a bound)"
        shown = _up(value) if r.certified else value
        print(f"{want} = {_fmt(shown)}  ({kind}; accountant {r.accountant})")
        print(_table([[_down(r.lower), shown, _up(r.upper), x, out["seconds"]]],
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

    delta = v.delta_value("delta", a.delta)
    q, steps = _setting(a)
    mech = _mechanism(a, q)
    rows, results = [], []
    for name in ACCOUNTANTS:
        t0 = time.perf_counter()
        try:
            r = make_accountant(name, **_acc_opts(a)).compose(mech, steps).epsilon(delta)
        except ValueError as err:
            results.append({"accountant": name, "error": str(err)})
            rows.append([name, None, None, None, "n/a", time.perf_counter() - t0])
            continue
        sec = time.perf_counter() - t0
        results.append({"accountant": name, "epsilon": r.epsilon, "lower": r.lower,
                        "upper": r.upper, "certified": r.certified, "seconds": sec,
                        "note": r.note})
        rows.append([name, _up(r.epsilon) if r.certified else r.epsilon, _down(r.lower),
                     _up(r.upper), "yes" if r.certified else "no", sec])
    if not a.json:
        print(f"eps at delta={delta:g}: q={q}, sigma={a.noise_multiplier}, steps={steps}")
        print(_table(rows, ["accountant", "epsilon", "lower", "upper", "certified",
                            "seconds"]))
    return {"delta": delta, "steps": steps, "sampling_rate": q,
            "noise_multiplier": a.noise_multiplier, "results": results}


def _cmd_calibrate(a) -> dict:
    from .calibrate import calibrate_noise, calibrate_sampling_rate, calibrate_steps

    acc = a.accountant if a.accountant in ("pld", "prv", "rdp") else "pld"
    rtol = a.rtol or 1e-3
    if a.solve_for == "noise-multiplier":
        q, steps = _setting(a)
        if q is None:
            _fail("--sampling-rate must be given, in (0, 1]")
        r = calibrate_noise(a.epsilon, a.delta, q, steps, accountant=acc, rtol=rtol)
    elif a.solve_for == "steps":
        if a.noise_multiplier is None or a.sampling_rate is None:
            _fail("--solve-for steps needs --noise-multiplier and --sampling-rate")
        r = calibrate_steps(a.epsilon, a.delta, a.sampling_rate, a.noise_multiplier,
                            accountant=acc, rtol=rtol)
    else:
        if a.noise_multiplier is None or a.steps is None:
            _fail("--solve-for sampling-rate needs --noise-multiplier and --steps")
        r = calibrate_sampling_rate(a.epsilon, a.delta, a.noise_multiplier, a.steps,
                                    accountant=acc, rtol=rtol)
    out = r.as_dict()
    if not a.json:
        # noise shown rounded up, a sampling rate down: the printed setting still meets the
        # target
        sigma, rate = _up(r.noise_multiplier), _down(r.sampling_rate)
        print(f"{a.solve_for}: " + _fmt({"noise-multiplier": sigma, "steps": r.steps,
                                         "sampling-rate": rate}[a.solve_for]))
        print(_table([[sigma, rate, r.steps, _up(r.epsilon), _down(r.lower),
                       r.target_epsilon, r.delta, r.seconds]],
                     ["noise_multiplier", "sampling_rate", "steps", "epsilon (certified)",
                      "lower", "target", "delta", "seconds"]))
    return out


def _cmd_group(a) -> dict:
    from .group import group_epsilon

    q, steps = _setting(a)
    sampling = "fixed_batch" if a.sampling == "fixed-batch" else a.sampling
    if sampling not in ("poisson", "fixed_batch"):
        _fail("--sampling must be poisson or fixed-batch for group")
    r = group_epsilon(a.group_size, a.noise_multiplier, steps, a.delta, sampling=sampling,
                      sampling_rate=q if sampling == "poisson" else None,
                      batch_size=a.batch_size, dataset_size=a.dataset_size,
                      rtol=a.rtol or 1e-3)
    out = r.as_dict()
    if not a.json:
        print(f"group of {r.group_size}: epsilon = {_fmt(_up(r.epsilon))} (certified upper "
              "bound)")
        print(_table([[_down(r.lower), _up(r.epsilon), _up(r.conversion), r.linear_reference,
                       _up(r.example_epsilon), r.seconds]],
                     ["lower", "epsilon", "conversion (Lemma 1.1)", "k * eps_1",
                      "eps_1", "seconds"]))
    return out


def _cmd_plot(a) -> dict:
    import numpy as np

    from . import _validate as v
    from .accountants.registry import make_accountant
    from .plotting import _plt, plot_epsilon_vs_steps, plot_privacy_curve, plot_tradeoff

    q, steps = _setting(a)
    mech = _mechanism(a, q)
    plt = _plt()
    acc = make_accountant(a.accountant, **_acc_opts(a)).compose(mech, steps)
    if a.kind == "curve":
        ax = plot_privacy_curve(acc)
    elif a.kind == "tradeoff":
        ax = plot_tradeoff(acc)
    else:
        delta = v.delta_value("delta", a.delta if a.delta is not None else 1e-5)
        grid = sorted({max(1, int(round(steps * f))) for f in np.linspace(0.05, 1, 12)})
        ax = plot_epsilon_vs_steps(lambda: mech, grid, delta,
                                   accountants=[s.strip() for s in a.accountants.split(",")])
    ax.set_title(f"q={q}, sigma={a.noise_multiplier}, steps={steps}")
    ax.figure.tight_layout()
    ax.figure.savefig(a.output, dpi=120)
    plt.close(ax.figure)
    if not a.json:
        print(f"wrote {a.output}")
    return {"output": a.output, "kind": a.kind}


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="tightdp", description="Tight differential-privacy accounting with "
                "certified bounds.", epilog=EXAMPLES,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def add(name: str, help_: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help_, description=help_, epilog=EXAMPLES,
                              formatter_class=argparse.RawDescriptionHelpFormatter)

    s = add("epsilon", "eps at a given delta for DP-SGD, with its certified bracket")
    _mechanism_options(s)
    s.add_argument("--delta", type=_float, required=True, help="delta in (0, 1)")
    _accountant_options(s)

    s = add("delta", "delta at a given eps for DP-SGD, with its certified bracket")
    _mechanism_options(s)
    s.add_argument("--epsilon", type=_float, required=True, help="eps >= 0")
    _accountant_options(s)

    s = add("compare", "every accountant on one setting: value, bracket, certified, time")
    _mechanism_options(s)
    s.add_argument("--delta", type=_float, required=True, help="delta in (0, 1)")
    _accountant_options(s)

    s = add("calibrate", "smallest noise (or most steps, or largest rate) meeting (eps, delta)")
    g = s.add_argument_group("DP-SGD setting")
    g.add_argument("--sampling-rate", type=_float, help="q in (0, 1]")
    g.add_argument("--noise-multiplier", type=_float, help="sigma (for --solve-for steps/"
                   "sampling-rate)")
    g.add_argument("--steps", type=_int, help="number of steps")
    g.add_argument("--epochs", type=_float, help="epochs instead of --steps")
    g.add_argument("--dataset-size", type=_int)
    g.add_argument("--batch-size", type=_int)
    s.add_argument("--epsilon", type=_float, required=True, help="target eps > 0")
    s.add_argument("--delta", type=_float, required=True, help="delta in (0, 1)")
    s.add_argument("--solve-for", default="noise-multiplier",
                   choices=["noise-multiplier", "steps", "sampling-rate"])
    s.add_argument("--accountant", default="pld", choices=["pld", "prv", "rdp"])
    s.add_argument("--rtol", type=_float, help="relative precision (default 1e-3)")
    s.add_argument("--json", action="store_true", help="print one JSON object")

    s = add("group", "group-level eps of DP-SGD (Ganesh): groups of up to k examples")
    _mechanism_options(s)
    s.add_argument("--group-size", type=_int, required=True, help="k >= 1")
    s.add_argument("--delta", type=_float, required=True, help="delta in (0, 1)")
    s.add_argument("--rtol", type=_float, help="relative bracket width (default 1e-3)")
    s.add_argument("--json", action="store_true", help="print one JSON object")

    s = add("plot", "draw the privacy curve, the trade-off curve or eps against steps (PNG)")
    _mechanism_options(s)
    s.add_argument("--kind", default="curve", choices=["curve", "tradeoff", "steps"])
    s.add_argument("--delta", type=_float, help="delta for --kind steps (default 1e-5)")
    s.add_argument("--accountants", default="pld,rdp", help="for --kind steps: comma list")
    s.add_argument("--output", required=True, help="PNG file to write")
    _accountant_options(s)
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``tightdp`` command; returns the exit status."""
    parser = build_parser()
    a = parser.parse_args(argv)
    import numpy

    handlers = {"epsilon": _cmd_epsilon, "delta": _cmd_delta, "compare": _cmd_compare,
                "calibrate": _cmd_calibrate, "group": _cmd_group, "plot": _cmd_plot}
    try:
        with numpy.errstate(all="ignore"):
            out = handlers[a.command](a)
    except ValueError as err:
        _fail(str(err))
    if getattr(a, "json", False):
        print(json.dumps(_clean(out)))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
