"""Package names and layering: no top-level agents/experiments/scenarios, no import circles.

Static checks read the source (every import, also those inside functions, but not those under
``if TYPE_CHECKING:``); runtime checks import in a fresh interpreter and look at ``sys.modules``.
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
        for f in sorted((REPO / folder).glob("*.py")):
            out[pkg if f.stem == "__init__" else f"{pkg}.{f.stem}"] = f
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


def test_the_import_graph_sees_known_edges():
    """The checker itself: it finds module-level and function-level imports, and skips TYPE_CHECKING ones."""
    g = _graph()
    assert "sfenv.sim" in g["sfenv.env"]  # module level
    assert "sfenv.render" in g["sfenv.env"]  # inside GeoSchedEnv.render
    assert "sfenv.agents.learned" in g["sfenv.agents.evaluate"]
    assert "sfenv.scenario" not in g["sfenv.sim"]  # only for type hints
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles():
    assert _cycles(_graph()) == []


@pytest.mark.parametrize(("a", "b"), [("sfenv.agents.evaluate", "sfenv.agents.learned"),
                                      ("sfenv.env", "sfenv.render")])
def test_former_circles_are_one_way(a, b):
    g = _graph()
    assert b in g[a] and a not in g[b]


def test_scenario_does_not_import_the_simulator_at_module_level():
    assert "sfenv.sim" not in _imports(MODULES["sfenv.scenario"], module_level_only=True)
    assert "sfenv.env" not in _imports(MODULES["sfenv.render"])


def _run(code: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def test_runtime_imports_stay_apart(tmp_path):
    proc = _run("""
        import sys
        import sfenv.env
        assert "sfenv.render" not in sys.modules, "env imports render at module level"
        for m in [m for m in sys.modules if m.startswith("sfenv")]:
            del sys.modules[m]
        import sfenv.render
        assert "sfenv.env" not in sys.modules, "render imports env"
        for m in [m for m in sys.modules if m.startswith("sfenv")]:
            del sys.modules[m]
        from sfenv.scenario import load_scenario
        sc = load_scenario("spider-8").with_overrides(workload={"num_jobs": 3})
        _ = sc.topology, sc.make_jobs(__import__("numpy").random.default_rng(0)), sc.dynamic_links
        assert "sfenv.sim" not in sys.modules, "scenario imports sim"
        for m in [m for m in sys.modules if m.startswith("sfenv")]:
            del sys.modules[m]
        import sfenv.agents.learned
        assert "sfenv.agents.evaluate" not in sys.modules, "learned imports evaluate"
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
