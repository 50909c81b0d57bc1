"""Plug-in agents through the CLI: by module path, by file path, by entry point; keywords; bad specs; and no
agent name read from a file (a results file, an entry, a cached episodes file) ever imports code."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
from sfenv.agents.plugins import canonical_spec, split_agent_list

from sfenv.app.cli import main

#: a scheduler module: FIFO's decisions, keywords type-checked so a mis-parsed value fails the run
AGENT_SOURCE = textwrap.dedent('''
    from sfenv.agents.fifo import FIFOAgent


    class Careful(FIFOAgent):
        """FIFO, with keywords that must arrive with their JSON types."""

        def __init__(self, patience=1, scale=1.0, strict=False, label="x"):
            super().__init__()
            if type(patience) is not int or type(scale) is not float or type(strict) is not bool \\
                    or type(label) is not str:
                raise TypeError(f"wrong types: {patience!r} {scale!r} {strict!r} {label!r}")
            if patience < 0:
                raise ValueError("patience must be >= 0")
            self.patience = patience


    class NotAnAgent:
        """No decide method."""


    def careful():
        return Careful()


    class Duck:
        """Only the evaluator's interface: decide(view) and reset(seed)."""

        def __init__(self):
            self.inner = Careful()

        def reset(self, seed=None):
            self.inner.reset(seed)

        def decide(self, view):
            return self.inner.decide(view)


    if __name__ == "__main__":
        raise SystemExit("the __main__ block ran")
''')

SMALL = ["--scenario", "spider-8", "--seeds", "1", "--num-jobs", "2", "--quiet"]


def _module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """Write the scheduler module under a fresh name in ``tmp_path``, on sys.path; return its name."""
    name = f"user_sched_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(AGENT_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name


def _evaluate(agents: str, out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["evaluate", "--agents", agents, *SMALL, "--out", str(out)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_plugin_by_module_path_with_keywords(tmp_path, monkeypatch, capsys):
    name = _module(tmp_path, monkeypatch)
    spec = f'{name}:Careful:strict=true,patience=2,scale=0.5,label="a,b"'
    code, out, err = _evaluate(f"fifo,{spec}", tmp_path / "r.json", capsys)
    assert code == 0, err
    canonical = f'{name}:Careful:label="a,b",patience=2,scale=0.5,strict=true'
    assert canonical in out
    data = json.loads((tmp_path / "r.json").read_text())
    agents = data["settings"]["agents"]
    assert set(agents) == {"fifo", canonical}
    source_sha = hashlib.sha256((tmp_path / f"{name}.py").read_bytes()).hexdigest()
    assert agents[canonical] == {"plugin": canonical, "source": "module", "source_sha": source_sha,
                                 "kwargs": {"label": "a,b", "patience": 2, "scale": 0.5, "strict": True}}
    rows = {r["agent"]: r for r in data["episodes"]}
    # the plug-in subclasses FIFO and decides as it does: same episode
    assert rows[canonical]["mean_jct_s"] == rows["fifo"]["mean_jct_s"]


def test_other_keywords_are_another_agent_in_the_same_file(tmp_path, monkeypatch, capsys):
    name = _module(tmp_path, monkeypatch)
    out = tmp_path / "r.json"
    assert _evaluate(f"{name}:Careful:patience=1", out, capsys)[0] == 0
    assert _evaluate(f"{name}:Careful:patience=2", out, capsys)[0] == 0
    data = json.loads(out.read_text())
    assert sorted(r["agent"] for r in data["episodes"]) == [f"{name}:Careful:patience=1",
                                                            f"{name}:Careful:patience=2"]
    assert data["settings"]["agents"][f"{name}:Careful:patience=2"]["kwargs"] == {"patience": 2}


def test_an_edited_plugin_file_is_another_agent(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    Path("sched.py").write_text(AGENT_SOURCE)
    assert _evaluate("sched.py:Careful", tmp_path / "r.json", capsys)[0] == 0
    Path("sched.py").write_text(AGENT_SOURCE + "\n# edited\n")
    code, _, err = _evaluate("sched.py:Careful", tmp_path / "r.json", capsys)
    assert code == 0
    assert "holds results of other settings" in err and "source_sha" in err
    assert (tmp_path / "r-2.json").exists()


def test_a_plugin_by_file_path_does_not_run_its_main_block(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    Path("mine").mkdir()
    Path("mine/sched.py").write_text(AGENT_SOURCE)
    code, out, err = _evaluate("mine/sched.py:Careful,mine/sched.py:Duck", tmp_path / "r.json", capsys)
    assert code == 0, err
    data = json.loads((tmp_path / "r.json").read_text())
    assert [r["agent"] for r in data["episodes"]] == ["mine/sched.py:Careful", "mine/sched.py:Duck"]
    assert data["settings"]["agents"]["mine/sched.py:Careful"]["source"] == "file"
    jcts = {r["mean_jct_s"] for r in data["episodes"]}
    assert len(jcts) == 1  # the duck-typed wrapper plays the same decisions


BAD_SPECS = {
    "missing-module": ("nosuchmodule_xyz:Careful", "no module named 'nosuchmodule_xyz'"),
    "missing-class": ("{mod}:Nope", "has no 'Nope'"),
    "not-an-agent": ("{mod}:NotAnAgent", "NotAnAgent is not an agent"),
    "a-function": ("{mod}:careful", "is not a class"),
    "missing-file": ("nofile.py:Careful", "no such file"),
    "kw-not-json": ("{mod}:Careful:label=fast", "label=fast is not a JSON scalar"),
    "kw-not-scalar": ("{mod}:Careful:patience=[1]", "is not a JSON scalar"),
    "kw-no-equals": ("{mod}:Careful:patience", "is not name=value"),
    "kw-unknown": ("{mod}:Careful:speed=1", "does not take these keywords"),
    "kw-refused": ("{mod}:Careful:patience=-1", "refused its arguments: patience must be >= 0"),
    "kw-wrong-type": ("{mod}:Careful:patience=1.5", "refused its arguments: wrong types"),
    "class-not-identifier": ("{mod}:1x", "is not a class name"),
}


@pytest.mark.parametrize("case", BAD_SPECS, ids=list(BAD_SPECS))
def test_a_bad_spec_is_one_line_and_exit_2(case, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    spec, words = BAD_SPECS[case]
    code, out, err = _evaluate(spec.format(mod=_module(tmp_path, monkeypatch)), tmp_path / "r.json", capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sfenv: "), err
    assert words in lines[0]
    assert not (tmp_path / "r.json").exists()  # refused before anything was written


def test_a_file_that_is_not_python_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    Path("broken.py").write_text("def (:\n")
    code, _, err = _evaluate("broken.py:Careful", tmp_path / "r.json", capsys)
    assert code == 2 and err.strip().splitlines() == ["sfenv: agent file broken.py: not valid Python (line 1: "
                                                      "invalid syntax)"]


def test_agent_lists_split_keywords_to_their_spec():
    assert split_agent_list('fifo,m:C:a=1,b="x,y",spinsearch,f.py:D,c=2') == \
        ["fifo", 'm:C:a=1,b="x,y"', "spinsearch", "f.py:D:c=2"]
    assert canonical_spec("m:C:b=2,a=1.0") == "m:C:a=1.0,b=2"


def _dist_info(site: Path, module: str) -> None:
    """An installed distribution, as pip lays it out, registering ``my-agent`` in the group sfenv.agents."""
    (site / f"{module}.py").write_text(AGENT_SOURCE)
    info = site / "sfenv_test_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sfenv-test-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[sfenv.agents]\nmy-agent = {module}:Careful\n"
                                           f"fifo = {module}:Careful\n")


def test_sfenv_agents_lists_the_entry_points(tmp_path, monkeypatch, capsys):
    module = f"ep_sched_{uuid.uuid4().hex[:8]}"
    _dist_info(tmp_path, module)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["agents"]) == 0
    out = capsys.readouterr().out
    assert f"my-agent    plug-in {module}:Careful from entry point group sfenv.agents\n" in out
    assert f"fifo        plug-in {module}:Careful from entry point group sfenv.agents (shadowed" in out


def test_a_plugin_by_entry_point_in_a_subprocess(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    module = f"ep_sched_{uuid.uuid4().hex[:8]}"
    _dist_info(site, module)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1", "SFENV_NO_JIT": "1"}  # no compile: two 2-job episodes
    run = subprocess.run([sys.executable, "-m", "sfenv", "evaluate", "--agents", "my-agent,fifo", *SMALL,
                          "--out", "r.json"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "\nmy-agent " in run.stdout
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["settings"]["agents"] == {
        "my-agent": {"plugin": "my-agent", "source": "entry point", "value": f"{module}:Careful",
                     "distribution": "sfenv-test-plugin==0.1"},
        "fifo": {"kwargs": {}},  # the built-in wins over the entry point of its name
    }


# -- nothing read from a file imports code -------------------------------------------------------------------

EVIL = "open({marker!r}, 'w').write('imported')\nclass Evil:\n    def decide(self, view):\n        return None\n"


def _evil_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[str]]:
    """A module and a file that leave a marker when imported; returns the marker and names that name them."""
    marker = tmp_path / "IMPORTED"
    module = f"evil_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(EVIL.format(marker=str(marker)))
    (tmp_path / "evil.py").write_text(EVIL.format(marker=str(marker)))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return marker, [f"{module}:Evil", "evil.py:Evil"]


def _rename_agents(path: Path, names: list[str]) -> None:
    """Rename the file's agents, in settings and rows, to ``names`` in turn (what an editor of the file could do)."""
    data = json.loads(path.read_text())
    old = list(data["settings"]["agents"])
    settings = data["settings"]["agents"]
    mapping = dict(zip(old, names))
    data["settings"]["agents"] = {mapping.get(k, k): v for k, v in settings.items()}
    for row in data["episodes"]:
        row["agent"] = mapping.get(row["agent"], row["agent"])
    path.write_text(json.dumps(data))


def test_validate_never_imports_an_agent_named_in_the_file(tmp_path, monkeypatch, capsys):
    marker, names = _evil_files(tmp_path, monkeypatch)
    assert main(["evaluate", "--agents", "fifo,fastest", *SMALL, "--record-actions", "--out", "e.json"]) == 0
    _rename_agents(tmp_path / "e.json", names)
    code = main(["validate", "e.json", "--replay-only"])
    assert code == 0, capsys.readouterr().err
    code = main(["validate", "e.json"])  # judged as an entry: refused (1 seed), still nothing imported
    assert code == 1
    assert main(["plot", "e.json", "--out-dir", "plots"]) == 0
    assert not marker.exists()


def test_the_leaderboard_cache_never_imports_an_agent_named_in_it(tmp_path, monkeypatch, capsys):
    marker, names = _evil_files(tmp_path, monkeypatch)
    lb = ["leaderboard", "--agents", "fifo", "--scenarios", "spider-8", "--seeds", "1", "--num-jobs", "2", "--quiet",
          "--out-dir", "lb"]
    assert main(lb) == 0
    episodes = tmp_path / "lb" / "episodes" / "spider-8.json"
    data = json.loads(episodes.read_text())
    for name in names:  # other agents' rows added to the cached file, named by code specs
        data["settings"]["agents"][name] = {"kwargs": {}}
        data["episodes"].append({**data["episodes"][0], "agent": name})
    episodes.write_text(json.dumps(data))
    assert main(lb) == 0, capsys.readouterr().err  # the cache is continued; only fifo is ranked
    ranked = json.loads((tmp_path / "lb" / "leaderboard.json").read_text())
    assert ranked["settings"]["agents"] == ["fifo"]
    assert not marker.exists()


def test_a_file_plugin_is_refused_for_ray_workers_before_anything_runs(tmp_path, monkeypatch):
    from sfenv.app.evaluate import evaluate_agents
    from sfenv.errors import InvalidInput

    monkeypatch.chdir(tmp_path)
    Path("sched.py").write_text(AGENT_SOURCE)
    with pytest.raises(InvalidInput, match=r"sched.py:Careful: a file.py:Class plug-in cannot be sent to Ray"):
        evaluate_agents(["sched.py:Careful"], "spider-8", [0], num_jobs=2, out="r.json", progress=False, backend="ray")
    assert not Path("r.json").exists()


def test_a_duck_typed_agent_asks_for_hourly_replanning_only_with_a_hook():
    from sfenv.agents.plugins import DuckAgent
    from sfenv.agents.registry import make_agent

    class Hourly:
        replans = True
        replan_hourly = True

        def decide(self, view):
            return None

    class HourlyWithoutHook(Hourly):
        replans = False

    assert DuckAgent(Hourly()).replan_hourly
    assert not DuckAgent(HourlyWithoutHook()).replan_hourly
    assert make_agent("carbon-elastic+swf").replan_hourly  # orderings keep the placement's wish
