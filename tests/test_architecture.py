"""The package's shape, checked by walking its imports (ARCHITECTURE.md says why it matters):

* no module imports a private name (``_name``) from another module (private *modules* such as
  ``tightdp._numerics`` are the package's shared internals and may be imported);
* no import circle, counting imports inside functions too;
* the layers run one way: nothing imports a module of a layer above its own.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

SRC = pathlib.Path(__file__).resolve().parents[1] / "src" / "tightdp"

# Lower number = lower layer. A module may import from its own layer only inside its own
# package (folder), and from any lower layer.
LAYERS = {
    "_numerics": 0, "roots": 0, "_validate": 0, "_version": 0, "_dask": 0, "budget": 0,
    "_defaults": 0,
    "progress": 0, "results": 0,
    "losses": 1,
    "curves": 2,
    "mechanisms": 3,
    "pld": 4,
    "accountants": 5,
    "dpsgd": 6, "individual": 6,
    "state": 7, "sweep": 7,
    "__init__": 7.5,  # the package root: the public names, built on everything above
    "integrations": 8, "plotting": 8,  # built on the public names
    "cli": 9,
}


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for f in sorted(SRC.rglob("*.py")):
        parts = ("tightdp",) + f.relative_to(SRC).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


MODULES = _modules()


def _is_package(mod: str) -> bool:
    return MODULES[mod].name == "__init__.py"


def _imports(mod: str):
    """(target module, imported names, line) for every import of a tightdp module in ``mod``,
    at module level or inside functions."""
    tree = ast.parse(MODULES[mod].read_text())
    pkg = mod.split(".") if _is_package(mod) else mod.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "tightdp":
                    yield a.name, [], node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg[: len(pkg) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.split(".")[0] != "tightdp":
                continue
            yield target, [a.name for a in node.names], node.lineno


def _edges(mod: str):
    """Modules ``mod`` depends on: the import's target, and submodules imported by name."""
    for target, names, line in _imports(mod):
        subs = [f"{target}.{n}" for n in names if f"{target}.{n}" in MODULES]
        # ``from pkg import submodule`` depends on the submodule (Python runs the package's
        # __init__ first whatever is imported; that alone is not a dependency)
        if target in MODULES and (not names or len(subs) < len(names)):
            yield target, line
        for sub in subs:
            yield sub, line


def _layer(mod: str) -> int:
    parts = mod.split(".")
    key = parts[1] if len(parts) > 1 else "__init__"
    assert key in LAYERS, f"{mod}: add its folder or file to LAYERS in this test"
    return LAYERS[key]


def test_every_module_has_a_layer():
    for mod in MODULES:
        _layer(mod)


def test_no_private_name_imported_across_modules():
    bad = []
    for mod in MODULES:
        for target, names, line in _imports(mod):
            for n in names:
                if not n.startswith("_") or n.startswith("__"):
                    continue
                if f"{target}.{n}" in MODULES:  # a private module: shared internals
                    continue
                bad.append(f"{mod}:{line} imports {n} from {target}")
    assert not bad, "private names imported across modules:\n" + "\n".join(bad)


def test_no_import_circle():
    graph = {m: sorted({t for t, _ in _edges(m) if t != m}) for m in MODULES}
    # a package's __init__ importing its own submodules is not a circle with them unless a
    # submodule imports the package back; Tarjan's strongly connected components
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    comps: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            comps.append(comp)

    for m in graph:
        if m not in index:
            visit(m)
    circles = [sorted(c) for c in comps if len(c) > 1]
    assert not circles, f"import circles: {circles}"


def test_layers_run_one_way():
    bad = []
    for mod in MODULES:
        for target, line in _edges(mod):
            lm, lt = _layer(mod), _layer(target)
            same_pkg = mod.split(".")[:2] == target.split(".")[:2]
            if lt > lm or (lt == lm and not same_pkg and lm != 0):
                bad.append(f"{mod}:{line} (layer {lm}) imports {target} (layer {lt})")
    assert not bad, "imports against the layers:\n" + "\n".join(bad)


@pytest.mark.parametrize("rule", ["private", "circle"])
def test_the_checks_can_fail(tmp_path, rule):
    """The walkers see what they must: a private import and a circle planted in a copy."""
    global MODULES
    saved = MODULES
    try:
        a = tmp_path / "a.py"
        b = tmp_path / "b.py"
        if rule == "private":
            a.write_text("from tightdp.b import _hidden\n")
            b.write_text("_hidden = 1\n")
        else:
            a.write_text("def f():\n    from tightdp import b\n")
            b.write_text("from tightdp.a import f\n")
        MODULES = {"tightdp.a": a, "tightdp.b": b}
        test = (test_no_private_name_imported_across_modules if rule == "private"
                else test_no_import_circle)
        with pytest.raises(AssertionError):
            test()
    finally:
        MODULES = saved


def test_tests_benchmarks_and_examples_import_public_names():
    """Outside the package only public names are imported: no ``_name`` from a tightdp module,
    and no private module, except by its own unit test (``test_numerics.py`` for
    ``tightdp._numerics``)."""
    root = SRC.parents[1]
    bad = []
    files = [f for d in ("tests", "benchmarks", "examples") for f in (root / d).glob("*.py")]
    for f in files:
        if f.name == "test_architecture.py":
            continue
        for node in ast.walk(ast.parse(f.read_text())):
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                continue
            parts = node.module.split(".")
            if parts[0] != "tightdp":
                continue
            private = [p for p in parts[1:] if p.startswith("_")]
            own_test = f.name == f"test{private[0]}.py" if len(private) == 1 else False
            if private and not own_test:
                bad.append(f"{f.name}:{node.lineno} imports the private module {node.module}")
            bad += [f"{f.name}:{node.lineno} imports {a.name} from {node.module}"
                    for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
    assert files and not bad, "private imports outside the package:\n" + "\n".join(bad)
