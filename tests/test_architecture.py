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
    "progress": 0, "results": 0, "_html": 0,
    "losses": 1,
    "curves": 2,
    "mechanisms": 3,
    "pld": 4,
    "accountants": 5,
    "risk": 5.5,
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


# ------------------------------------------------------------------------------------------
# House limits (CONTRIBUTING.md): module and function sizes, positional parameters, bare
# positional booleans, no reaching into another module's private attributes. Each allowlist
# holds today's violations, one entry per module or function with its reason; an entry must
# be removed when its module is fixed (the test fails on an entry that no longer violates,
# so the lists only shrink).
# ------------------------------------------------------------------------------------------
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
MAX_POSITIONAL = 7
#: today's exceptions, each with its reason; an entry that no longer violates fails the test
#: (the lists only shrink)
BIG_MODULES: dict[str, str] = {}
BIG_FUNCTIONS: dict[str, str] = {}
MANY_POSITIONAL: dict[str, str] = {}
#: module -> (most bare positional booleans it may still have, reason)
BARE_BOOLEANS: dict[str, tuple[int, str]] = {}
#: (module, private attribute of another module's class it reaches into) -> reason
PRIVATE_REACH: dict[tuple[str, str], str] = {}


def _rel(path: pathlib.Path) -> str:
    return path.relative_to(SRC).as_posix()


def _functions(tree: ast.AST) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """(qualified name, node) of every function and method, nested ones included."""
    out = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                out.append((prefix + child.name, child))
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return out


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_names(tree: ast.AST) -> set[str]:
    """The private names a module defines: attributes and methods of its classes
    (``self._x = ...``, ``_x = ...`` or ``def _x`` in a class body), and its module-level
    private functions, classes and variables."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for sub in ast.walk(node):
                if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef):
                    out.add(sub.name)
                elif (isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Store)
                      and isinstance(sub.value, ast.Name) and sub.value.id in ("self", "cls")):
                    out.add(sub.attr)
                elif isinstance(sub, ast.Assign | ast.AnnAssign):
                    targets = sub.targets if isinstance(sub, ast.Assign) else [sub.target]
                    out.update(t.id for t in targets if isinstance(t, ast.Name))
    for node in getattr(tree, "body", []):
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            out.add(node.name)
        elif isinstance(node, ast.Assign):
            out.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return {n for n in out if _is_private(n)}


def _own_object(node: ast.expr) -> bool:
    """``self``, ``cls``, ``super()`` or ``type(self)``: an object's access to its own
    attributes (inherited ones included)."""
    if isinstance(node, ast.Name):
        return node.id in ("self", "cls")
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in ("super", "type"))


def _house(files: dict[str, pathlib.Path]) -> dict[str, dict]:
    """Today's violations of the house limits in ``files`` (relative path -> file)."""
    trees = {rel: ast.parse(f.read_text()) for rel, f in files.items()}
    defined = {rel: _private_names(t) for rel, t in trees.items()}
    anywhere = set().union(*defined.values()) if defined else set()
    found: dict[str, dict] = {"modules": {}, "functions": {}, "positional": {}, "booleans": {},
                              "private": {}}
    for rel, tree in trees.items():
        n = len(files[rel].read_text().splitlines())
        if n > MAX_MODULE_LINES:
            found["modules"][rel] = n
        for qual, fn in _functions(tree):
            size = fn.end_lineno - fn.lineno + 1
            if size > MAX_FUNCTION_LINES:
                found["functions"][f"{rel}::{qual}"] = size
            pos = [a.arg for a in fn.args.posonlyargs + fn.args.args
                   if a.arg not in ("self", "cls")]
            if len(pos) > MAX_POSITIONAL and not fn.name.startswith("_"):
                found["positional"][f"{rel}::{qual}"] = len(pos)
        bools = sum(isinstance(a, ast.Constant) and isinstance(a.value, bool)
                    for node in ast.walk(tree) if isinstance(node, ast.Call) for a in node.args)
        if bools:
            found["booleans"][rel] = bools
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and _is_private(node.attr)
                    and not _own_object(node.value) and node.attr not in defined[rel]
                    and node.attr in anywhere):
                found["private"].setdefault((rel, node.attr), node.lineno)
    return found


HOUSE = {"modules": BIG_MODULES, "functions": BIG_FUNCTIONS, "positional": MANY_POSITIONAL,
         "booleans": BARE_BOOLEANS, "private": PRIVATE_REACH}
WHAT = {"modules": f"modules over {MAX_MODULE_LINES} lines",
        "functions": f"functions over {MAX_FUNCTION_LINES} lines",
        "positional": f"public functions with more than {MAX_POSITIONAL} positional parameters",
        "booleans": "bare positional True/False in calls (make the flag keyword-only)",
        "private": "attributes private to another module's class or module, reached into"}


@pytest.mark.parametrize("rule", sorted(HOUSE))
def test_house_limits(rule):
    """No new violation of a house limit, and no allowlisted entry that no longer violates
    (remove it: the allowlists only shrink)."""
    files = {_rel(f): f for f in sorted(SRC.rglob("*.py"))}
    found = _house(files)[rule]
    allowed = HOUSE[rule]
    if rule == "booleans":
        new = {k: v for k, v in found.items() if v > allowed.get(k, (0, ""))[0]}
    else:
        new = {k: v for k, v in found.items() if k not in allowed}
    stale = sorted(str(k) for k in allowed if k not in found)
    assert not new, f"new {WHAT[rule]} (fix them; see CONTRIBUTING.md):\n" + "\n".join(
        f"  {k}: {v}" for k, v in sorted(new.items(), key=str))
    assert not stale, (f"allowlisted {WHAT[rule]} that no longer violate: remove them from "
                       "the allowlist in tests/test_architecture.py:\n  " + "\n  ".join(stale))
    for entry in allowed.values():  # every entry says why it is there
        assert (entry[1] if isinstance(entry, tuple) else entry).strip()


def test_house_checks_can_fail(tmp_path):
    """The house walkers see what they must, planted in two small modules."""
    a = tmp_path / "a.py"
    b = tmp_path / "b.py"
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    a.write_text(f"def long(p1, p2, p3, p4, p5, p6, p7, p8):\n{body}\n    f(True)\n"
                 + "\n" * MAX_MODULE_LINES)
    b.write_text("class C:\n    def __init__(self):\n        self._x = 1\n"
                 "    def own(self):\n        return self._x\n"
                 "def peek(c):\n    return c._x, c.__dict__\n"
                 "def other(a):\n    return a._y\n")
    found = _house({"a.py": a, "b.py": b})
    assert found["modules"] == {"a.py": MAX_MODULE_LINES + MAX_FUNCTION_LINES + 2}
    assert found["functions"] == {"a.py::long": MAX_FUNCTION_LINES + 2}
    assert found["positional"] == {"a.py::long": 8}
    assert found["booleans"] == {"a.py": 1}
    assert found["private"] == {}  # b reads its own class's _x; a._y is defined nowhere
    a.write_text("from b import C\ndef peek(c: C):\n    c._x = 2\n")
    assert _house({"a.py": a, "b.py": b})["private"] == {("a.py", "_x"): 3}
