"""Every script in examples/ runs (its --smoke version), from a scratch folder, as a user would run it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))
# what each example must print: a sign it did its job, not only that it exited 0
EXPECTED = {
    "train_and_evaluate.py": ["trained 256 steps", "model:"],
    "write_a_scheduler.py": ["small-cheap", "through the env:"],
    "custom_scenario.py": ["three-regions: 3 regions, 6 jobs", "rejected as expected", "bandwidth_gbps",
                           "env episode: 6 jobs finished"],
}


def test_the_three_examples_are_there():
    assert sorted(p.name for p in EXAMPLES) == sorted(EXPECTED)


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs(script: Path, tmp_path: Path):
    if script.name == "train_and_evaluate.py":
        pytest.importorskip("sb3_contrib", reason="the rl extra is not installed")
    env = {**os.environ, "MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(script), "--smoke"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for text in EXPECTED[script.name]:
        assert text in proc.stdout, f"{script.name}: {text!r} not in its output:\n{proc.stdout[-2000:]}"
    if script.name == "train_and_evaluate.py":
        assert (tmp_path / "runs-example" / "maskable-ppo-spider-8-s0" / "model.zip").exists()
