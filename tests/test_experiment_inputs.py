"""Experiment scripts refuse bad input files and names with one ``sfenv:`` line, before any work starts.

Each case used to end in a traceback (MemoryError, RecursionError, TypeError, IndexError, KeyError,
numpy's pickle error), a hang on a FIFO, or, for ``--heuristics``, a crash after all the work.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sfenv.experiments import (
    bace_sensitivity,
    carbon,
    claims,
    imitation_accuracy,
    learned_vs_heuristics,
    scenario_spread,
)

from sfenv.errors import InvalidInput

DEEP = "[" * 100_000 + "]" * 100_000


def _script(name: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", f"sfenv.experiments.{name}", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120)


def _one_line(run: subprocess.CompletedProcess) -> str:
    assert run.returncode == 2, run.stdout + run.stderr
    assert "Traceback" not in run.stderr and run.stdout == ""
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith("sfenv: ")
    return line


_ROW = {"arm": "fastest", "kind": "baseline", "seed": 1, "carbon_signal": "x", "carbon_kg": 1.0, "mean_jct_s": 2.0,
        "cost_usd": 3.0, "unfinished": 0}


@pytest.mark.parametrize("text, message", [
    ("[1, 2, 3]", "row 1: expected a JSON object of an episode, got a number"),
    ("{}", "expected a carbon episode rows file: a JSON list of episode rows, got a JSON object"),
    ("[]", "holds no episode rows"),
    (json.dumps({"settings": {}, "episodes": []}), "got a JSON object"),  # an `sfenv evaluate --out` file
    (DEEP, "not a JSON carbon episode rows file (nested too deeply)"),
    (json.dumps([{**_ROW, "seed": "1"}]), "row 1: seed '1': expected an integer"),
    (json.dumps([{k: v for k, v in _ROW.items() if k != "carbon_kg"}]), "row 1: no 'carbon_kg'"),
    (json.dumps([_ROW, _ROW]), "row 2: arm 'fastest' seed 1 is given twice"),
    (json.dumps([{**_ROW, "arm": "x"}]), "no row of the baseline arm 'fastest'"),
    (json.dumps([_ROW, {**_ROW, "arm": "x", "seed": 2}]), "arm 'x' shares no seed with the baseline"),
])
def test_carbon_rows_are_checked(tmp_path, text, message):
    path = tmp_path / "rows.json"
    path.write_text(text)
    with pytest.raises(InvalidInput, match="rows.json") as e:
        carbon.read_carbon_rows(path)
    assert message in str(e.value)


def test_carbon_rows_from_a_device_or_a_fifo_are_one_line(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in ("/dev/zero", str(fifo)):
        line = _one_line(_script("carbon", "--rows", path, cwd=tmp_path))
        assert path in line and "not a regular file" in line
    good = tmp_path / "good.json"
    good.write_text(json.dumps([_ROW]))
    assert carbon.read_carbon_rows(good) == [_ROW]


@pytest.mark.parametrize("text, message", [
    ("[1]", "row 1: expected a JSON object"),
    ("[{", "not a JSON scenario_spread rows file"),
    (json.dumps({"settings": {}, "episodes": []}), "got a JSON object"),
])
def test_scenario_spread_refuses_a_bad_file_to_resume(tmp_path, text, message):
    out = tmp_path / "spread.json"
    out.write_text(text)
    with pytest.raises(InvalidInput, match="spread.json") as e:
        scenario_spread.run_spread(["spider-8"], ["fifo"], [0], out=out, resume=True, num_jobs=2, progress=False)
    assert message in str(e.value)


def test_bace_sensitivity_and_claims_read_their_settings_within_a_bound(tmp_path):
    out = tmp_path / "sens"
    out.mkdir()
    (out / "runs.json").write_text("[]")
    (out / "config.json").write_text(DEEP)
    with pytest.raises(InvalidInput, match="config.json: not a JSON bace_sensitivity settings file"):
        bace_sensitivity.run_sensitivity(out, 1, [0], num_jobs=2, progress=False)
    config = {"scenario": "bace-6", "perms": 1, "seeds": [0], "num_jobs": 2, "perm_seed": 0}
    (out / "config.json").write_text(json.dumps(config))
    (out / "runs.json").write_text(json.dumps([{"perm": 0, "agent": "fifo", "seed": "0"}]))
    with pytest.raises(InvalidInput, match="runs.json: row 1: seed '0': expected an integer"):
        bace_sensitivity.run_sensitivity(out, 1, [0], num_jobs=2, progress=False)
    c_out = tmp_path / "claims"
    c_out.mkdir()
    os.mkfifo(c_out / "config.json")
    with pytest.raises(InvalidInput, match=r"config.json: a FIFO \(named pipe\), not a regular file"):
        claims.run_claims(claims.CLAIMS[:1], [0], c_out, num_jobs=2, progress=False)


def test_learned_vs_heuristics_refuses_unknown_names_before_training(tmp_path):
    with pytest.raises(InvalidInput, match="--heuristics: unknown agent 'nope'"):
        learned_vs_heuristics.reference_agents("fifo,nope")
    with pytest.raises(InvalidInput, match="no reference agent"):
        learned_vs_heuristics.reference_agents(" , ")
    assert learned_vs_heuristics.reference_agents("fifo, fifo,cheapest") == ["fifo", "cheapest"]
    line = _one_line(_script("learned_vs_heuristics", "--heuristics", "nope", "--out", "o", cwd=tmp_path))
    assert "unknown agent 'nope'" in line and not (tmp_path / "o").exists()


def _states(path: Path, **arrays: np.ndarray) -> Path:
    base = {"obs_x": np.zeros((2, 3), np.float32), "mask": np.zeros((2, 4), bool), "act": np.zeros(2, int),
            "scenario": np.asarray(["a", "b"])}
    np.savez_compressed(path, **{**base, **arrays})
    return path


def test_imitation_states_files_are_read_with_a_bound(tmp_path, monkeypatch):
    obs, mask, act, names = imitation_accuracy._load(_states(tmp_path / "ok.npz"))
    assert set(obs) == {"x"} and mask.shape == (2, 4) and list(names) == ["a", "b"]
    monkeypatch.setattr(imitation_accuracy, "MAX_STATES_BYTES", 10_000)  # the file is ~1 kB, its arrays 16 kB
    bomb = _states(tmp_path / "bomb.npz", obs_x=np.zeros(2000))
    assert bomb.stat().st_size < 10_000
    with pytest.raises(InvalidInput, match=r"bomb.npz: not a readable states file \(its arrays declare more"):
        imitation_accuracy._load(bomb)
    objects = _states(tmp_path / "objects.npz", obs_x=np.asarray([{}, 1], dtype=object))
    with pytest.raises(InvalidInput, match="objects.npz: .*holds Python objects"):
        imitation_accuracy._load(objects)
    short = _states(tmp_path / "short.npz", act=np.zeros(3, int))
    with pytest.raises(InvalidInput, match="short.npz: the arrays hold different numbers of states"):
        imitation_accuracy._load(short)
    no_act = tmp_path / "no-act.npz"
    np.savez(no_act, obs_x=np.zeros((2, 3)), mask=np.zeros((2, 4), bool), scenario=np.asarray(["a", "b"]))
    with pytest.raises(InvalidInput, match="no-act.npz: no array 'act'"):
        imitation_accuracy._load(no_act)
    (tmp_path / "junk.npz").write_text("junk\n")
    line = _one_line(_script("imitation_accuracy", "fit", "--train", "junk.npz", "--validation", "ok.npz",
                             cwd=tmp_path))
    assert line.startswith("sfenv: junk.npz: not an .npz archive")
