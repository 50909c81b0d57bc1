"""The benchmark scripts run at tiny sizes and measure what they claim to (no timing asserts)."""

from __future__ import annotations

import json

import pytest
from sfenv.experiments import bench_agents, bench_env, bench_sim


def test_bench_sim_runs_a_workload_to_the_end():
    row = bench_sim.run("spider-8", jobs=20, rate_scale=1.0)
    assert row["finished"] == 20 and row["events"] >= 40  # an arrival and a completion per job
    assert row["evals_per_s"] > 0 and row["heap_ref_s"] > 0


def test_bench_env_counts_steps():
    assert bench_env.steps_per_s("sfenv/Spider8-v0", 50, masked=True, num_jobs=5) > 0


def test_bench_env_training_share_is_a_fraction_of_the_run():
    share, wall = bench_env.training_share(64)  # one MaskablePPO rollout of 1,024 steps
    assert 0.0 < share < 1.0 and wall > 0
    assert bench_env.StepTimer.total == pytest.approx(share * wall)  # the timer measured the env in this run


def test_bench_agents_times_every_agent_on_the_same_points(tmp_path):
    names = ["spinsearch", "fifo", "ilp"]
    row = bench_agents.decision_times("spider-8", names, points=2, num_jobs=4)
    assert row["points"] == 2 and set(row["mean_s"]) == set(names)
    assert all(row["max_s"][n] >= row["mean_s"][n] > 0 for n in names)
    assert row["planned"]["fifo"] >= 1  # FIFO drives the episode, so it plans at some decision point
    table = bench_agents.format_rows([row], names)
    assert "ilp/spin" in table and "spider-8" in table
    out = tmp_path / "r.json"
    bench_agents.atomic_write_json(out, [row])
    assert json.loads(out.read_text())[0]["points"] == 2
