"""The package's shape: no module reaches another's private names, no import cycles, short modules.

Walks every module of ``judge`` with ``ast`` (nothing is imported):

* a private name (one leading underscore) is used only inside the module that defines it:
  no ``from judge.x import _y``, no ``obj._attr`` unless this module defines ``_attr`` (``self._attr``
  included: a mixin or base class in another module does not call its class's privates, nor the class
  its mixins'; a hook a base class declares is defined, with its default, in the base's module too), and a
  private module (``_kernels``, ``_validation``: a package's internal helpers, whose own names
  carry no underscore) is imported only by its own package;
* the graph of imports between judge modules (function-level imports included) has no cycle, and
  ``judge.decisions`` imports nothing of ``judge.server`` (the server is the edge);
* no module is over 600 lines, except the numba kernels;
* every module starts with a docstring.

bench/ is a consumer of the library: its scripts run as ``python -m bench.NAME`` and use public names
only, and every file there (scripts and their private helper modules) is held to the same 600 lines and
docstring.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "judge"
MAX_LINES = 600
LONG_OK = {"judge.automaton._kernels"}  # numba kernels specialised per layout
# attributes of third-party objects we must touch, each with its reason
THIRD_PARTY_PRIVATE = {
    "_name_or_path",  # transformers config: the model's hub id or folder
    "_attn_implementation",  # transformers config: sdpa/eager, set before building a tiny model
    "_supports_sdpa",  # transformers model class flag
    "_tokenizer",  # a fast tokenizer's Rust backend (vocabulary pieces)
    "_getframe",
}


def _modules():
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _package(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rsplit(".", 1)[0]


def _resolve(name: str, path: Path, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    base = _package(name, path).split(".")
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(name: str, path: Path):
    """(imported judge module, names taken from it, line) for every import in the module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("judge"):
                    yield a.name, [], node.lineno
        elif isinstance(node, ast.ImportFrom):
            mod = _resolve(name, path, node)
            if mod.startswith("judge"):
                yield mod, [a.name for a in node.names], node.lineno


def _target(mod: str, taken: str) -> str:
    """The judge module an import refers to: ``from judge.x import y`` is module judge.x.y if one exists."""
    sub = f"{mod}.{taken}"
    return sub if sub in MODULES else mod


def _own_private_names(tree) -> set:
    """Private names this module defines: functions, classes, class attributes, ``self._x`` / ``__slots__``."""
    own = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name.startswith("_"):
            own.add(node.name)
        elif isinstance(node, ast.Call) and ast.unparse(node.func) == "object.__setattr__" and len(node.args) > 1 \
                and isinstance(node.args[1], ast.Constant) and str(node.args[1].value).startswith("_"):
            own.add(node.args[1].value)  # object.__setattr__(self, "_x", ...): a frozen object's own slot
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            targets = [e for t in targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
            for t in targets:
                if isinstance(t, ast.Attribute) and t.attr.startswith("_"):
                    if isinstance(t.value, ast.Name) and t.value.id in ("self", "cls"):
                        own.add(t.attr)
                elif isinstance(t, ast.Name) and t.id == "__slots__" and isinstance(node.value, (ast.Tuple, ast.List)):
                    own |= {e.value for e in node.value.elts if isinstance(e, ast.Constant)}
                elif isinstance(t, ast.Name) and t.id.startswith("_"):
                    own.add(t.id)
    return own


def test_no_private_names_across_modules():
    bad = []
    for name, path in MODULES.items():
        pkg = _package(name, path)
        for mod, names, line in _imports(name, path):
            for n in names:
                target = _target(mod, n)
                if target != mod:  # importing a module: private modules only within their package
                    private = n.startswith("_") and not n.startswith("__")
                    if private and target.rsplit(".", 1)[0] != pkg:
                        bad.append(f"{path}:{line}: imports private module {target}")
                elif n.startswith("_") and not n.startswith("__") and mod != name:
                    bad.append(f"{path}:{line}: from {mod} import {n}")
            if not names:
                last = mod.rsplit(".", 1)[-1]
                if last.startswith("_") and mod.rsplit(".", 1)[0] != pkg:
                    bad.append(f"{path}:{line}: imports private module {mod}")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        own = _own_private_names(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                owner = node.value
                if node.attr in THIRD_PARTY_PRIVATE or node.attr in own:
                    continue
                bad.append(f"{path}:{node.lineno}: .{node.attr} of {ast.unparse(owner)}")
    assert not bad, "private names reached from outside their module:\n" + "\n".join(bad)


def test_no_import_cycles():
    graph = {}
    for name, path in MODULES.items():
        deps = set()
        for mod, names, _ in _imports(name, path):
            targets = {_target(mod, n) for n in names} or {mod}
            for t in targets:
                while t not in MODULES and "." in t:
                    t = t.rsplit(".", 1)[0]
                if t in MODULES and t != name and t != "judge":
                    deps.add(t)
        graph[name] = deps
    # a package's __init__ re-exports its submodules; submodules must not import their own package back
    state, stack, cycles = {}, [], []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for d in sorted(graph.get(n, ())):
            if state.get(d) == 1:
                cycles.append(stack[stack.index(d):] + [d])
            elif d not in state:
                visit(d)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def _unit(module: str) -> str:
    """The package or top-level module of judge a module belongs to: judge.calibration.bias -> judge.calibration."""
    return ".".join(module.split(".")[:2])


def test_no_import_cycles_between_packages_and_top_level_modules():
    """The coarse graph (judge.calibration, judge.fusion, judge.classifier, ...) is acyclic too: no package
    imports a module that imports the package back (the calibration package held the Classifier's calibrated
    half, which imported judge.fusion, which imports judge.calibration)."""
    graph: dict[str, set] = {}
    for name, path in MODULES.items():
        for mod, names, _ in _imports(name, path):
            for t in {_target(mod, n) for n in names} or {mod}:
                while t not in MODULES and "." in t:
                    t = t.rsplit(".", 1)[0]
                if t in MODULES and t != "judge" and _unit(t) != _unit(name):
                    graph.setdefault(_unit(name), set()).add(_unit(t))
    state, stack, cycles = {}, [], []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for d in sorted(graph.get(n, ())):
            if state.get(d) == 1:
                cycles.append(stack[stack.index(d):] + [d])
            elif d not in state:
                visit(d)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n)
    assert not cycles, "import cycles between packages:\n" + "\n".join(" -> ".join(c) for c in cycles)


#: packages that must not import another (function-level imports included): the edge imports the core
LAYERS_APART = {"judge.decisions": ("judge.server",)}


def test_the_core_never_imports_the_server():
    """judge.decisions takes questions and rows and returns answers; the wire form, labelled files and HTTP
    (judge.server) import it, never the other way round (issue 30: no decisions -> server edge)."""
    bad = []
    for name, path in MODULES.items():
        for pkg, banned in LAYERS_APART.items():
            if name != pkg and not name.startswith(pkg + "."):
                continue
            bad += [f"{path}:{line}: imports {mod}" for mod, _, line in _imports(name, path)
                    if any(mod == b or mod.startswith(b + ".") for b in banned)]
    assert not bad, "a core package imports the server:\n" + "\n".join(bad)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_is_short_and_says_what_it_does(name):
    path = MODULES[name]
    text = path.read_text(encoding="utf-8")
    n = text.count("\n")
    if name not in LONG_OK:
        assert n <= MAX_LINES, f"{path} has {n} lines (limit {MAX_LINES}): split it along its seams"
    assert ast.get_docstring(ast.parse(text)), f"{path} has no module docstring"


# ----------------------------------------------------------------------------- bench/: a consumer
BENCH = ROOT.parent / "bench"
# private attributes bench/ touches on the peers it measures, each with its reason
BENCH_PEER_PRIVATE = {
    "_client",  # anyjev's JevTypeSafeAdapter: its HTTP client swapped for the in-process TestClient
    "_judge_shim", "_judge_capture", "_judge_bench_no_space",  # bench's own marks on CAPPr's functions
}


def test_bench_uses_the_library_through_public_names_only():
    """bench/ runs as ``python -m bench.NAME``: no ``sys.path`` edits, and nothing private of ``judge``
    (no private module, no private name, no ``obj._attr`` of a judge object) — what a user can call."""
    bad = []
    for path in sorted(BENCH.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        own = _own_private_names(tree)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                mod = node.module if isinstance(node, ast.ImportFrom) else None
                names = [a.name for a in node.names]
                for full in ([mod] if mod else names):
                    if full and full.startswith("judge") and any(p.startswith("_") for p in full.split(".")[1:]):
                        bad.append(f"{path.name}:{node.lineno}: imports private module {full}")
                if mod and mod.startswith("judge"):
                    bad += [f"{path.name}:{node.lineno}: from {mod} import {n}" for n in names
                            if n.startswith("_") and not n.startswith("__")]
            elif isinstance(node, ast.Attribute):
                if node.attr == "path" and isinstance(node.value, ast.Name) and node.value.id == "sys":
                    bad.append(f"{path.name}:{node.lineno}: edits or reads sys.path (run it as python -m bench.NAME)")
                elif node.attr.startswith("_") and not node.attr.startswith("__"):
                    owner = node.value
                    if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                        continue
                    if node.attr in THIRD_PARTY_PRIVATE or node.attr in BENCH_PEER_PRIVATE or node.attr in own:
                        continue
                    bad.append(f"{path.name}:{node.lineno}: .{node.attr} of {ast.unparse(owner)}")
    assert not bad, "bench/ reaches past the public API:\n" + "\n".join(bad)


@pytest.mark.parametrize("name", sorted(p.name for p in BENCH.glob("*.py")))
def test_bench_module_is_short_and_says_what_it_does(name):
    """The library's rule, for bench/ too: a script past it moves a self-contained part (tables, prompts,
    pure helpers) into a private helper module of the package, ``bench/_NAME.py``."""
    path = BENCH / name
    text = path.read_text(encoding="utf-8")
    n = text.count("\n")
    assert n <= MAX_LINES, f"{path} has {n} lines (limit {MAX_LINES}): move a self-contained part to bench/_NAME.py"
    assert ast.get_docstring(ast.parse(text)), f"{path} has no module docstring"


def _engine_only_members() -> set:
    """Public members of the Engine (methods, and ``self.X_`` attributes it sets) that neither the Scorer
    protocol nor a declared capability (judge.engine.protocol.CAPABILITIES) declares."""
    from judge.engine import Engine
    from judge.engine.protocol import CAPABILITIES, Closing, Scorer

    def members(cls) -> set:
        return {n for n in dir(cls) if not n.startswith("_")} | set(getattr(cls, "__annotations__", {}))

    tree = ast.parse((ROOT / "engine" / "engine.py").read_text(encoding="utf-8"))
    attrs = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
             and n.value.id == "self" and n.attr.endswith("_") and not n.attr.startswith("_")}
    # the attributes Scorer documents, set by setup() (not annotated: isinstance(Engine(), Scorer) holds before it)
    declared = members(Scorer) | members(Closing) | set().union(*(members(c) for c in CAPABILITIES)) | {
        "tokenizer_", "end_id_"}
    return (members(Engine) | attrs) - declared


def test_engine_only_members_are_used_only_through_declared_capabilities():
    """Outside judge/engine/ (and in bench/) a scorer is used through the Scorer protocol and the
    capabilities of judge.engine.protocol: no ``obj.X`` or ``getattr(obj, "X")`` of an Engine member
    that neither declares (add it to a capability, with an isinstance check where it is used)."""
    only = _engine_only_members()
    assert "memory_bound" not in only and "search" not in only and "set_root" not in only
    paths = [p for n, p in MODULES.items() if not n.startswith("judge.engine")] + sorted(BENCH.glob("*.py"))
    bad = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            name = None
            if isinstance(node, ast.Attribute) and node.attr in only:
                if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                    name = node.attr
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr") \
                    and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and node.args[1].value in only:
                name = node.args[1].value
            if name:
                bad.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: .{name}")
    assert not bad, f"Engine-only members {sorted(only)} used outside the engine:\n" + "\n".join(bad)
