"""The BACE-Pipe sensitivity run: permutations, resumable runs, the table."""

from __future__ import annotations

import json

import pytest
from sfenv.experiments.bace_sensitivity import BASELINES, main, permutations, permuted, run_sensitivity, summarise

from sfenv.runs import protocol
from sfenv.scenario import load_scenario


def test_permuted_moves_prices_and_capacities():
    base = load_scenario("bace-6")
    regions = base.cfg.topology.regions
    n = len(regions)
    pp, gp = tuple(range(1, n)) + (0,), tuple(reversed(range(n)))
    sc = permuted(base, pp, gp)
    for i, r in enumerate(sc.cfg.topology.regions):
        assert r.gpus == regions[gp[i]].gpus
        assert sc.cfg.prices.zones[r.zone].base == base.cfg.prices.zones[regions[pp[i]].zone].base
    # the multiset of prices and capacities is unchanged
    assert sorted(r.gpus for r in sc.cfg.topology.regions) == sorted(r.gpus for r in regions)
    perms = permutations(n, 5, seed=3)
    assert perms[0] == (tuple(range(n)), tuple(range(n))) and len(set(perms)) == 5
    assert perms == permutations(n, 5, seed=3)  # seeded


def test_quick_run_writes_a_table_and_resumes(tmp_path, capsys):
    assert main(["--quick", "--out", str(tmp_path)]) == 0
    table = (tmp_path / "summary.md").read_text()
    assert all(f"| {b} | JCT |" in table and f"| {b} | cost |" in table for b in BASELINES)
    rows = json.loads((tmp_path / "runs.json").read_text())
    assert len(rows) == 2 * 5  # 2 permutations x 5 agents x 1 seed
    # ratios are the paired quotients of the saved rows
    summary = summarise(rows)
    by = {(r["perm"], r["agent"]): r for r in rows}
    lcf = next(s for s in summary if s["baseline"] == "lcf" and s["metric"] == "JCT")
    q = sorted(by[(p, "bace-pipe")]["mean_jct_s"] / by[(p, "lcf")]["mean_jct_s"] for p in (0, 1))
    assert lcf["min"] == pytest.approx(q[0]) and lcf["max"] == pytest.approx(q[1])
    # a resumed run plays nothing new; other settings are refused
    again = run_sensitivity(tmp_path, perms=2, seeds=protocol.seeds("test", 1), num_jobs=4, progress=False)
    assert again == rows
    with pytest.raises(ValueError, match="holds runs"):
        run_sensitivity(tmp_path, perms=3, seeds=[0], num_jobs=4, progress=False)
