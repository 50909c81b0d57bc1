"""Package names and layering: the layer order of docs/architecture.md, no import circles, no top-level agents/....

Static checks read the source (every import, also those inside functions, but not those under
``if TYPE_CHECKING:``); runtime checks import in a fresh interpreter and look at ``sys.modules``.
The layers, from the bottom: ``base`` (errors, hashing, interrupts, registration, the package itself) ->
``world`` -> ``model`` -> ``scenario`` -> ``sim`` -> ``env`` and ``runs`` (side by side, neither
importing the other) -> ``agents`` -> ``app``; ``experiments`` are scripts on top.  A module imports
modules of its own layer and of the layers below it, never above.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: source folder -> installed package (pyproject's package-dir)
PACKAGES = {"sfenv": "sfenv", "agents": "sfenv.agents", "experiments": "sfenv.experiments"}


def _modules() -> dict[str, Path]:
    out = {}
    for folder, pkg in PACKAGES.items():
        base = REPO / folder
        for f in sorted(base.rglob("*.py")):
            rel = f.relative_to(base).with_suffix("").parts
            if pkg == "sfenv" and rel[0] in ("agents", "experiments", "hyperparams", "data"):
                continue  # not sfenv's own source (hyperparams holds only its path helper)
            parts = rel[:-1] if rel[-1] == "__init__" else rel
            out[".".join((pkg, *parts))] = f
    return out


MODULES = _modules()


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _imports(path: Path, module_level_only: bool = False) -> set[str]:
    """sfenv modules imported by ``path`` at run time (a package import counts as its ``__init__``)."""
    found: set[str] = set()

    def visit(node: ast.AST, top: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for sub in child.orelse:
                    visit(sub, top)
                continue
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                if not module_level_only:
                    visit(child, False)
                continue
            if isinstance(child, ast.ImportFrom) and child.module and child.level == 0:
                for name in [child.module] + [f"{child.module}.{a.name}" for a in child.names]:
                    if name in MODULES:
                        found.add(name)
            elif isinstance(child, ast.Import):
                found.update(a.name for a in child.names if a.name in MODULES)
            visit(child, top)

    visit(ast.parse(path.read_text()), True)
    return found


def _graph() -> dict[str, set[str]]:
    return {name: _imports(path) - {name} for name, path in MODULES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
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
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


#: layer -> the layers it may import (its own layer always)
ALLOWED: dict[str, set[str]] = {
    "base": set(),
    "world": {"base"},
    "model": {"base", "world"},
    "scenario": {"base", "world", "model"},
    "sim": {"base", "world", "model", "scenario"},
    "env": {"base", "world", "model", "scenario", "sim"},
    "runs": {"base", "world", "model", "scenario", "sim"},
    "agents": {"base", "world", "model", "scenario", "sim", "env", "runs"},
    "app": {"base", "world", "model", "scenario", "sim", "env", "runs", "agents"},
    "experiments": {"base", "world", "model", "scenario", "sim", "env", "runs", "agents", "app"},
}
#: deprecated shims, each a function-level import that warns and goes with the old API in the next release
#: (CHANGELOG, 0.2.0): (importer, imported)
DEPRECATED_SHIMS = {("sfenv.scenario", "sfenv.sim"), ("sfenv.sim.engine", "sfenv.sim.episode")}


def layer_of(module: str) -> str:
    """The layer a module belongs to."""
    parts = module.split(".")
    if module == "sfenv.__main__":
        return "app"
    if len(parts) == 1 or parts[1] in ("errors", "hashing", "interrupts", "registration", "_moved"):
        return "base"
    if parts[1] == "scenario":
        return "scenario"
    assert parts[1] in ALLOWED, f"{module}: no layer; add it to docs/architecture.md and ALLOWED"
    return parts[1]


def test_the_import_graph_sees_known_edges():
    """The checker itself: it finds module-level and function-level imports, and skips TYPE_CHECKING ones."""
    g = _graph()
    assert "sfenv.sim" in g["sfenv.env.geosched"]  # module level
    assert "sfenv.env.render" in g["sfenv.env.geosched"]  # inside GeoSchedEnv.render
    assert "sfenv.agents.learned" in g["sfenv.app.evaluate"]
    assert "sfenv.sim.engine" not in g["sfenv.sim.view"]  # only for type hints
    assert {"sfenv.sim.engine", "sfenv.world.topology", "sfenv.agents.base", "sfenv.experiments.claims"} <= set(g)
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_every_module_has_a_layer():
    assert {layer_of(m) for m in MODULES} == set(ALLOWED)


def test_no_module_imports_a_layer_above_its_own():
    """The layer order itself: every import (also inside functions) goes down or stays in its layer."""
    upward = sorted((a, b) for a, targets in _graph().items() for b in targets
                    if layer_of(b) != layer_of(a) and layer_of(b) not in ALLOWED[layer_of(a)]
                    and (a, b) not in DEPRECATED_SHIMS)
    assert upward == []


def test_nothing_below_the_application_layer_imports_agents():
    below = [(a, b) for a, targets in _graph().items() for b in targets
             if b.startswith("sfenv.agents") and layer_of(a) not in ("agents", "app", "experiments")]
    assert below == []


def test_the_deprecated_shims_are_still_there_and_only_they_climb():
    g = _graph()
    for a, b in DEPRECATED_SHIMS:
        assert b in g[a] and b not in _imports(MODULES[a], module_level_only=True)


def test_the_layer_check_catches_an_upward_import():
    assert layer_of("sfenv.sim.engine") == "sim" and "env" not in ALLOWED["sim"]
    assert layer_of("sfenv.agents.base") == "agents" and "app" not in ALLOWED["agents"]
    assert "runs" not in ALLOWED["env"] and "env" not in ALLOWED["runs"]


def test_no_import_cycles():
    """No two modules import each other, through any path (layers cannot see cycles inside one layer)."""
    graph = {a: {b for b in targets if (a, b) not in DEPRECATED_SHIMS} for a, targets in _graph().items()}
    assert _cycles(graph) == []


@pytest.mark.parametrize(("a", "b"), [("sfenv.app.evaluate", "sfenv.agents.learned"),
                                      ("sfenv.env.geosched", "sfenv.env.render")])
def test_former_circles_are_one_way(a, b):
    g = _graph()
    assert b in g[a] and a not in g[b]


def test_scenario_does_not_import_the_simulator_at_module_level():
    assert "sfenv.sim" not in _imports(MODULES["sfenv.scenario"], module_level_only=True)
    assert "sfenv.env.geosched" not in _imports(MODULES["sfenv.env.render"])


def _run(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def test_runtime_imports_stay_apart(tmp_path):
    proc = _run("""
        import sys
        import sfenv.env
        assert "sfenv.env.render" not in sys.modules, "env imports render at module level"
        assert not [m for m in sys.modules if m.startswith(("sfenv.agents", "sfenv.app", "sfenv.runs"))]
        for m in [m for m in sys.modules if m.startswith("sfenv")]:
            del sys.modules[m]
        import sfenv.sim
        assert not [m for m in sys.modules if m.startswith(("sfenv.env", "sfenv.agents", "sfenv.app", "sfenv.runs"))]
        for m in [m for m in sys.modules if m.startswith("sfenv")]:
            del sys.modules[m]
        from sfenv.scenario import load_scenario
        sc = load_scenario("spider-8").with_overrides(workload={"num_jobs": 3})
        _ = sc.topology, sc.make_jobs(__import__("numpy").random.default_rng(0)), sc.dynamic_links
        assert "sfenv.sim" not in sys.modules, "scenario imports sim"
        for m in [m for m in sys.modules if m.startswith("sfenv")]:
            del sys.modules[m]
        import sfenv.agents.learned
        assert "sfenv.app.evaluate" not in sys.modules, "learned imports evaluate"
        print("ok")
    """, tmp_path)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


@pytest.mark.parametrize("name", ["agents", "experiments", "scenarios"])
def test_no_top_level_package_of_the_old_names(tmp_path, name):
    """From a neutral folder, the old top-level names are not importable (they live under sfenv.)."""
    proc = _run(f"import {name}", tmp_path)
    assert proc.returncode != 0 and "ModuleNotFoundError" in proc.stderr
    proc = _run(f"import sfenv.{name}", tmp_path)
    assert proc.returncode == 0, proc.stderr
