"""The sfenv command line."""

from __future__ import annotations

import subprocess
import sys

from sfenv.app.cli import main
from sfenv.runs import protocol
from sfenv.runs.results import read_results


def test_run_prints_metrics(capsys):
    assert main(["run", "--agent", "fifo", "--num-jobs", "5", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "mean JCT" in out and "electricity cost" in out and "5/5" in out


def test_evaluate_writes_results(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["evaluate", "--agents", "fifo,cheapest", "--seeds", "2", "--num-jobs", "4", "--out", str(out),
                 "--quiet"]) == 0
    rows = read_results(out)[1]
    test_seeds = protocol.seeds("test", 2)  # the default split
    assert {(r["agent"], r["seed"]) for r in rows} == {(a, s) for a in ("fifo", "cheapest") for s in test_seeds}
    assert "cheapest" in capsys.readouterr().out


def test_bad_input_exits_2_without_traceback(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ntopology: {regions: [{name: a, gpu: NOPE, gpus: 1, zone: z}]}\n")
    for args in (["run", "--scenario", str(bad)], ["run", "--agent", "nope"], ["run", "--scenario", "nope"]):
        proc = subprocess.run([sys.executable, "-m", "sfenv", *args], capture_output=True, text=True)
        assert proc.returncode == 2, args
        assert "Traceback" not in proc.stderr and proc.stderr.startswith("sfenv:")
    cmd = [sys.executable, "-m", "sfenv", "run", "--scenario", str(bad)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert "NOPE" in proc.stderr and "gpu" in proc.stderr


def test_lists(capsys):
    assert main(["scenarios"]) == 0 and "spider-64" in capsys.readouterr().out
    assert main(["agents"]) == 0 and "bace-pipe" in capsys.readouterr().out
