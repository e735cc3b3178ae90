"""The package's layers point one way and its modules import no cycle: read from the source with `ast`.

errors <- lang <- domain <- ruleset <- engine <- answer <- expert <- {authoring, service} <- cli <- the
public API; the decision log's storage (decisions/) depends only on the bottom layer, and only service/ and
cli/ use it. Every import counts, inside functions too: a function-level import is still a dependency.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = "kentino_expert"
ROOT = Path(__file__).resolve().parent.parent / PACKAGE

# The bottom layer: the error tree and the utilities every layer may use.
BASE = {f"{PACKAGE}.{name}" for name in ("errors", "fastjson", "yamlsrc", "yamlsyntax", "paths", "version",
                                         "sourcefiles")}
# The facade and what builds on it directly: the Expert, `rules check` and its sandbox.
EXPERT = {f"{PACKAGE}.{name}" for name in ("expert", "rulecheck", "sandbox")}
ORDER = ["base", "lang", "domain", "ruleset", "engine", "answer", "expert", "authoring", "service", "cli", "api"]
# Each layer may import itself and the layers listed here (and nothing above it).
ALLOWED = {
    "base": {"base"},
    "decisions": {"base", "decisions"},
    "lang": {"base", "lang"},
    "domain": {"base", "lang", "domain"},
    "ruleset": {"base", "lang", "domain", "ruleset"},
    "engine": {"base", "lang", "domain", "ruleset", "engine"},
    "answer": {"base", "lang", "domain", "ruleset", "engine", "answer"},
    "expert": {"base", "lang", "domain", "ruleset", "engine", "answer", "expert"},
    "authoring": {"base", "lang", "domain", "ruleset", "engine", "answer", "expert", "authoring"},
    "service": {"base", "lang", "domain", "ruleset", "engine", "answer", "expert", "decisions", "service"},
    "cli": set(ORDER) - {"api"} | {"decisions"},
    "api": set(ORDER) | {"decisions"},
}
DURABLE = f"{PACKAGE}.engine.durable"  # the only package that may import durable_rules


def layer_of(module: str) -> str:
    """The layer of a module of the package, by its dotted name."""
    if module in BASE:
        return "base"
    if module in EXPERT:
        return "expert"
    if module in (PACKAGE, f"{PACKAGE}.__main__"):
        return "api"
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in ALLOWED:
        return parts[1]
    raise AssertionError(f"{module} is in no layer: add it to test_layers.py")


def module_name(path: Path) -> str:
    relative = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, modules=()) -> set[str]:
    """Every module `path` imports, as absolute dotted names (relative imports resolved): `from X import y`
    is X.y when that is one of `modules`, else X."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
    return found


def package_graph() -> dict[str, set[str]]:
    """module -> the modules of the package it imports (a package's __init__ counts as a module)."""
    modules = {module_name(path): path for path in ROOT.rglob("*.py")}
    return {name: {other for other in imports_of(path, modules) if other in modules and other != name}
            for name, path in modules.items()}


def upward_imports(graph: dict[str, set[str]], layer) -> list[str]:
    """'a -> b (layer of a may not import layer of b)' for every import against the layer order."""
    return sorted(f"{module} ({layer(module)}) imports {other} ({layer(other)})"
                  for module, others in graph.items() for other in others
                  if layer(other) not in ALLOWED[layer(module)])


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


# -- the checker itself, on graphs made up to break the rules -----------------------------------------

def _layer_by_prefix(module: str) -> str:
    return module.split(".")[0]


def test_an_upward_import_is_found():
    """A lang module importing the domain, or storage importing the answer, is reported; downward is not."""
    graph = {"lang.a": {"domain.b"}, "domain.b": {"lang.c"}, "decisions.d": {"answer.e"}, "answer.e": {"decisions.d"}}
    assert upward_imports(graph, _layer_by_prefix) == [
        "answer.e (answer) imports decisions.d (decisions)", "decisions.d (decisions) imports answer.e (answer)",
        "lang.a (lang) imports domain.b (domain)"]


def test_a_cycle_is_found():
    """Three modules importing in a ring are one cycle; a chain is none."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_relative_imports_are_resolved(tmp_path, monkeypatch):
    """In ruleset/x.py, `from ..lang import nodes` is the module lang.nodes, `from .y import z` the module
    ruleset.y, and an import inside a function counts too."""
    fake = tmp_path / PACKAGE
    (fake / "ruleset").mkdir(parents=True)
    (fake / "ruleset" / "x.py").write_text("from ..lang import nodes\nfrom .y import z\n\ndef f():\n    import json\n")
    monkeypatch.setattr(f"{__name__}.ROOT", fake)
    modules = {f"{PACKAGE}.lang.nodes", f"{PACKAGE}.ruleset.y"}
    assert imports_of(fake / "ruleset" / "x.py", modules) == {f"{PACKAGE}.lang.nodes", f"{PACKAGE}.ruleset.y", "json"}


# -- the package ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def graph():
    return package_graph()


def test_every_module_is_in_a_layer(graph):
    """A new module must be given a layer (a new top-level module fails here until it is)."""
    assert {layer_of(module) for module in graph} <= set(ALLOWED)


def test_layers_point_one_way(graph):
    """No module imports a layer above its own (nor storage anything but the bottom layer)."""
    assert upward_imports(graph, layer_of) == []


def test_no_import_cycle(graph):
    """No two modules import each other, directly or through others."""
    assert cycles(graph) == []


def test_only_the_durable_backend_imports_durable_rules():
    """durable_rules (its C core included) is imported under engine/durable/ and nowhere else."""
    importers = sorted(module_name(path) for path in ROOT.rglob("*.py")
                       if any(name.split(".")[0].startswith("durable") for name in imports_of(path)))
    assert importers and all(name.startswith(DURABLE) for name in importers), importers


def test_modules_stay_small():
    """No module of the package is over 400 lines."""
    long = {module_name(path): n for path in ROOT.rglob("*.py")
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > 400}
    assert long == {}
