"""User paths: from a folder outside the repository, relative inputs are read and outputs written there.

Covers the ``sfenv`` command and ``run.sh`` (which must not change into the repository).
"""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from sfenv.runs import protocol
from sfenv.runs.results import read_results

REPO = Path(__file__).resolve().parents[1]
SFENV = Path(sys.executable).with_name("sfenv")  # the installed console script


def _user_scenario(folder: Path) -> Path:
    """A scenario file of the user's own, with a name no bundled scenario has."""
    text = (REPO / "scenarios" / "spider-8.yaml").read_text()
    lines = ["name: my-world" if ln.startswith("name:") else ln for ln in text.splitlines()]
    path = folder / "my.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _sfenv(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    cmd = [str(SFENV)] if SFENV.exists() else [sys.executable, "-m", "sfenv"]
    return subprocess.run([*cmd, *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def _repo_state() -> set[str]:
    """Untracked files in the repository (results must never land there)."""
    out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=REPO, capture_output=True,
                         text=True).stdout
    return {ln[3:] for ln in out.splitlines() if ln.startswith("??")}


def _no_outputs_in_repo(before: set[str]) -> bool:
    """No new untracked output of ours in the repository (other new files may come from elsewhere)."""
    new = _repo_state() - before
    return not [p for p in new if p.endswith(("out.json", "out.csv", "my.yaml")) or p.startswith(("results/", "runs/"))]


def test_relative_scenario_and_outputs_resolve_in_the_callers_folder(tmp_path):
    _user_scenario(tmp_path)
    before = _repo_state()
    proc = _sfenv(["run", "--scenario", "my.yaml", "--num-jobs", "3"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "scenario my-world" in proc.stdout and "3/3" in proc.stdout
    proc = _sfenv(["evaluate", "--agents", "fifo", "--scenario", "my.yaml", "--num-jobs", "3", "--seeds", "2",
                   "--out", "out.json", "--csv", "sub/out.csv", "--quiet"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = read_results(tmp_path / "out.json")[1]
    assert {(r["scenario"], r["seed"]) for r in rows} == {("my-world", s) for s in protocol.seeds("test", 2)}
    assert (tmp_path / "sub" / "out.csv").read_text().count("\n") == 3  # header + 2 episodes
    assert _no_outputs_in_repo(before)


def test_benchmark_writes_its_results_in_the_callers_folder(tmp_path):
    _user_scenario(tmp_path)
    before = _repo_state()
    proc = _sfenv(["benchmark", "--agents", "fifo", "--scenario", "my.yaml", "--seeds", "2", "--num-jobs", "3",
                   "--no-plots", "--quiet"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "results" / "my-world" / "episodes.csv").is_file()
    assert _no_outputs_in_repo(before)


def test_train_writes_runs_in_the_callers_folder(tmp_path):
    pytest.importorskip("stable_baselines3")
    proc = _sfenv(["train", "--algo", "a2c", "--steps", "10", "--num-jobs", "3", "--n-envs", "1", "--eval-seeds", "1",
                   "--no-tensorboard", "--no-plot", "--quiet"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "runs" / "a2c-spider-8-s0" / "model.zip").is_file()  # a run folder per run
    assert (tmp_path / "runs" / "a2c-spider-8-s0" / "model.json").is_file()


def _installed_venv() -> Path | None:
    """This interpreter's venv if run.sh would use it as is (its stamp matches pyproject), else None."""
    venv = Path(sys.prefix)
    stamp = venv / ".sfenv-installed"
    want = hashlib.sha256((REPO / "pyproject.toml").read_bytes()).hexdigest()[:16]
    if stamp.is_file() and stamp.read_text().strip() == want and (venv / "bin" / "sfenv").exists():
        return venv
    return None


def test_run_sh_keeps_the_callers_folder(tmp_path):
    venv = _installed_venv()
    if venv is None:
        pytest.skip("run.sh would install first: this venv's .sfenv-installed stamp does not match pyproject.toml")
    _user_scenario(tmp_path)
    before = _repo_state()
    env = {**os.environ, "VENV": str(venv)}
    proc = subprocess.run(["bash", str(REPO / "run.sh"), "evaluate", "--agents", "fifo", "--scenario", "my.yaml",
                           "--num-jobs", "3", "--seeds", "1", "--out", "out.json", "--quiet"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert read_results(tmp_path / "out.json")[1][0]["scenario"] == "my-world"
    assert _no_outputs_in_repo(before)


def _fake_venv(folder: Path) -> Path:
    """A stand-in venv whose python and sfenv only log how they were called (and from where)."""
    bin_ = folder / "venv" / "bin"
    bin_.mkdir(parents=True)
    log = folder / "calls.log"
    for name in ("python", "sfenv"):
        script = bin_ / name
        script.write_text(f'#!/usr/bin/env bash\necho "{name} $PWD $*" >> "{log}"\n')
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return folder / "venv"


def test_run_sh_set_up_says_what_it_does_and_runs_the_benchmark_by_default(tmp_path):
    venv = _fake_venv(tmp_path)
    user = tmp_path / "user"
    user.mkdir()
    env = {**os.environ, "VENV": str(venv)}
    proc = subprocess.run(["bash", str(REPO / "run.sh")], cwd=user, env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    steps = [ln for ln in proc.stderr.splitlines() if ln.startswith("run.sh: [")]
    assert [s.split("]")[0] for s in steps] == ["run.sh: [1/3", "run.sh: [2/3", "run.sh: [3/3"]
    assert "set-up done" in proc.stderr
    calls = (tmp_path / "calls.log").read_text().splitlines()
    assert any("pip install" in c and f"-e {REPO}[fast,rl,zoo,dev,docs]" in c for c in calls)
    assert calls[-1] == f"sfenv {user} benchmark"  # the main job, in the caller's folder
    # set up once: the second call goes straight to the command, with the caller's relative paths
    proc = subprocess.run(["bash", str(REPO / "run.sh"), "run", "--scenario", "my.yaml"], cwd=user, env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "[1/3" not in proc.stderr
    assert (tmp_path / "calls.log").read_text().splitlines()[-1] == f"sfenv {user} run --scenario my.yaml"
    # options alone are the main job's; --help stays sfenv's own
    for args, called in ((["--seeds", "3"], "benchmark --seeds 3"), (["--help"], "--help")):
        proc = subprocess.run(["bash", str(REPO / "run.sh"), *args], cwd=user, env=env, capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert (tmp_path / "calls.log").read_text().splitlines()[-1] == f"sfenv {user} {called}"
