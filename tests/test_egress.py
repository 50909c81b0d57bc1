"""Egress (issue 31 §3): the price table, the bytes per region pair, their bill, and where it shows.

Each test fails if the code is wrong: prices are checked against the source's rows, bytes against
hand-counted activations, bills against bytes x price per direction, and the zero-price episodes
against the episodes recorded before egress existed.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from sfenv.errors import InvalidInput
from sfenv.model.perf import PerfParams, Plan, Stage, evaluate_plan
from sfenv.model.traffic import egress_usd_per_iter, hop_bytes_per_iter, pair_bytes_per_iter
from sfenv.scenario import ScenarioError, load_scenario
from sfenv.sim import SimConfig, Simulator, make_simulator
from sfenv.world.egress import (
    BYTES_PER_GB,
    DEFAULT_USD_PER_GB,
    EGRESS_TABLE_PATH,
    CloudSite,
    egress_price_matrix,
    load_egress_table,
)
from sfenv.world.hardware import get_gpu
from sfenv.world.prices import PriceSeries
from sfenv.world.topology import Link, Region, Topology
from sfenv.world.workload import MODEL_ZOO, JobSpec

AWS_EAST, AWS_WEST = CloudSite("aws", "us-east-1"), CloudSite("aws", "us-west-1")
AWS_TOKYO, GCP_MUMBAI = CloudSite("aws", "ap-northeast-1"), CloudSite("gcp", "asia-south1")
AZ_SYDNEY = CloudSite("azure", "australiaeast")


# ---------------------------------------------------------------- the table
def test_the_bundled_table_loads_and_names_its_source():
    table = load_egress_table()
    assert "Skyplane" in table.source and "Apache-2.0" in table.source and "4602d9ce" in table.source
    readme = (EGRESS_TABLE_PATH.parent / "README.md").read_text()
    assert "Apache License 2.0" in readme and "4602d9cec2083142831f7f208b413ca2bf091bd8" in readme
    assert "2022-12-04" in readme
    # rows of Skyplane's aws_transfer_costs.csv (src,dst,cost) and of its GCP/Azure rules
    assert table.usd_per_gb(AWS_EAST, AWS_WEST) == 0.02
    assert table.usd_per_gb(AWS_EAST, CloudSite("aws", "us-east-2")) == 0.01
    assert table.usd_per_gb(AWS_TOKYO, AWS_EAST) == 0.09  # dearer from Tokyo
    assert table.usd_per_gb(CloudSite("gcp", "asia-south1"), CloudSite("gcp", "asia-southeast1")) == 0.05
    assert table.usd_per_gb(CloudSite("azure", "canadacentral"), AZ_SYDNEY) == 0.05
    assert table.usd_per_gb(AZ_SYDNEY, CloudSite("azure", "canadacentral")) == 0.08
    assert len(table.prices) == 721 and sum(1 for k in table.prices if k[0] == "aws") == 674
    # the held-out other regions, by the same rules: GCP between continents 0.08, 0.15 from or to
    # Australia; Azure from Europe 0.05 between continents, from Asia 0.08; to another cloud 0.0875 / 0.12
    gcp_toronto, gcp_melbourne = CloudSite("gcp", "northamerica-northeast2"), CloudSite("gcp", "australia-southeast2")
    az_paris, az_seoul = CloudSite("azure", "francecentral"), CloudSite("azure", "koreacentral")
    assert table.usd_per_gb(gcp_toronto, CloudSite("gcp", "europe-west4")) == 0.08
    assert table.usd_per_gb(gcp_toronto, gcp_melbourne) == table.usd_per_gb(gcp_melbourne, GCP_MUMBAI) == 0.15
    assert table.usd_per_gb(gcp_toronto, AWS_EAST) == 0.12 and table.usd_per_gb(gcp_melbourne, AWS_EAST) == 0.19
    assert table.usd_per_gb(az_paris, az_seoul) == 0.05 and table.usd_per_gb(az_seoul, az_paris) == 0.08
    assert table.usd_per_gb(az_paris, AWS_EAST) == 0.0875 and table.usd_per_gb(az_seoul, gcp_toronto) == 0.12


def test_inter_cloud_bytes_pay_the_source_clouds_internet_egress():
    table = load_egress_table()
    assert table.usd_per_gb(AWS_EAST, GCP_MUMBAI) == 0.09  # AWS internet egress, not its 0.02 inter-region
    assert table.usd_per_gb(AWS_TOKYO, GCP_MUMBAI) == 0.114
    assert table.usd_per_gb(GCP_MUMBAI, AWS_EAST) == 0.12  # GCP's, from the source side
    assert table.usd_per_gb(GCP_MUMBAI, AZ_SYDNEY) == 0.19  # GCP to Australia
    assert table.usd_per_gb(AZ_SYDNEY, AWS_EAST) == 0.12


def test_inside_a_region_is_free_and_unknown_pairs_are_errors():
    table = load_egress_table()
    assert table.usd_per_gb(AWS_EAST, AWS_EAST) == 0.0
    with pytest.raises(InvalidInput, match="no egress price for bytes leaving aws:mars-1"):
        table.usd_per_gb(CloudSite("aws", "mars-1"), AWS_EAST)
    with pytest.raises(InvalidInput, match="same cloud"):
        table.usd_per_gb(CloudSite("gcp", "asia-south1"), CloudSite("gcp", "europe-west1"))
    # two sfenv regions in one cloud region, a priced pair, and a region without a cloud (flat default)
    m = egress_price_matrix([AWS_EAST, AWS_EAST, AWS_TOKYO, None], table, 0.03)
    assert m[0, 1] == m[1, 0] == 0.0 and np.all(np.diag(m) == 0.0)
    assert m[2, 0] == pytest.approx(0.09 / BYTES_PER_GB) and m[0, 2] == pytest.approx(0.02 / BYTES_PER_GB)
    assert m[3, 0] == m[0, 3] == pytest.approx(0.03 / BYTES_PER_GB)
    flat = egress_price_matrix([AWS_EAST, AWS_TOKYO], None, DEFAULT_USD_PER_GB)
    assert flat[0, 1] == flat[1, 0] == pytest.approx(0.02 / BYTES_PER_GB)


def test_a_scenario_gives_its_regions_clouds_and_checks_them():
    geo = load_scenario("geo-8")
    names = geo.topology.region_names
    m = geo.egress_usd_per_byte * BYTES_PER_GB
    east, tokyo = names.index("aws-us-east-1"), names.index("aws-ap-northeast-1")
    mumbai = names.index("gcp-asia-south1-a")
    assert m[east, tokyo] == pytest.approx(0.02) and m[tokyo, east] == pytest.approx(0.09)
    assert m[east, mumbai] == pytest.approx(0.09) and m[mumbai, east] == pytest.approx(0.12)
    spider = load_scenario("spider-8")  # synthetic: the documented flat default everywhere
    off = ~np.eye(spider.topology.num_regions, dtype=bool)
    assert np.allclose(spider.egress_usd_per_byte[off] * BYTES_PER_GB, DEFAULT_USD_PER_GB)
    off_sc = spider.with_overrides(egress={"default_usd_per_gb": 0.0})
    assert not off_sc.egress_usd_per_byte.any()
    bad = geo.cfg.model_dump()
    bad["topology"]["regions"][0]["cloud_region"] = "us-nowhere-9"
    with pytest.raises(ScenarioError, match=r"regions\[0\]\.cloud_region.*us-nowhere-9"):
        load_scenario(bad)
    bad["topology"]["regions"][0].update(cloud=None)
    with pytest.raises(ScenarioError, match="needs the region's cloud"):
        load_scenario(bad)


# ---------------------------------------------------------------- bytes per pair
def _job(batch: int = 64, iterations: int = 50) -> JobSpec:
    return JobSpec(0, MODEL_ZOO["gpt-1.3b"], batch, iterations, 0.0, 1, 256)


def test_bytes_per_pair_are_activations_forward_and_gradients_back():
    job = _job()
    model = job.model
    plan = Plan(0, (Stage.at(0, 12, dp=2), Stage.at(1, 12, dp=2)), micro_batch=2)
    m = plan.num_microbatches(job)
    act = 2.0 * 2 * model.seq_len * model.hidden  # bf16 x b s h
    expected = act * m * 2  # two replica pairs
    assert pair_bytes_per_iter(plan, job) == {(0, 1): expected, (1, 0): expected}
    assert pair_bytes_per_iter(Plan(0, (Stage.at(0, 24, dp=4),)), job) == {}


def test_bytes_per_pair_sum_to_the_models_wan_bytes_rings_included():
    topo = load_scenario("spider-8").topology
    job = JobSpec(0, MODEL_ZOO["gpt-350m"], 64, 50, 0.0, 1, 256)
    plans = [
        Plan(0, (Stage.at(0, 8, 1, 2), Stage.at(3, 8, 1, 2), Stage.at(5, 8, 1, 2)), micro_batch=2),
        Plan(0, (Stage(12, ((0, 1), (2, 1))), Stage(12, ((1, 1), (2, 1))))),  # rings across two regions
        Plan(0, (Stage(24, ((0, 1), (2, 1), (4, 1))),)),  # a ring over three regions, one way round
    ]
    for plan in plans:
        perf = evaluate_plan(plan, job, topo, PerfParams(memory_headroom=1.0))
        assert perf.feasible, perf.reason
        pairs = pair_bytes_per_iter(plan, job)
        assert sum(pairs.values()) == pytest.approx(perf.wan_bytes_per_iter, rel=1e-12)
    ring = pair_bytes_per_iter(plans[2], job)
    assert set(ring) == {(0, 2), (2, 4), (4, 0)}  # not the reverse directions
    # a relayed route bills every hop: hops carry at least the endpoint bytes
    hops = hop_bytes_per_iter(plans[0], job, topo)
    assert all(topo.link_between(u, v) is not None for u, v in hops)
    assert sum(hops.values()) >= sum(pair_bytes_per_iter(plans[0], job).values())


# ---------------------------------------------------------------- the bill
def _two_clouds(price_ab: float, price_ba: float, iterations: int = 40) -> tuple[Simulator, Plan, JobSpec]:
    regions = [Region("a", get_gpu("A100-80GB"), 8, "z"), Region("b", get_gpu("A100-80GB"), 8, "z")]
    topo = Topology(regions, [Link(0, 1, 10.0, 30.0)])
    job = JobSpec(0, MODEL_ZOO["gpt-1.3b"], 64, iterations, 0.0, 8, 16)
    price = np.array([[0.0, price_ab], [price_ba, 0.0]]) / BYTES_PER_GB
    sim = Simulator(topo, PriceSeries(["z"], np.full((1, 24), 50.0)), [job], SimConfig(), egress_usd_per_byte=price)
    return sim, Plan(0, (Stage.at(0, 12, dp=4), Stage.at(1, 12, dp=4))), job


def test_a_two_region_plan_is_billed_bytes_times_the_price_of_each_direction():
    sim, plan, job = _two_clouds(0.02, 0.09)
    sim.schedule(plan)
    while not sim.done:
        sim.wait()
    pairs = pair_bytes_per_iter(plan, job)
    expected = job.iterations * (pairs[(0, 1)] * 0.02 + pairs[(1, 0)] * 0.09) / BYTES_PER_GB
    rec = sim.records()[0]
    assert rec.egress_usd == pytest.approx(expected, rel=1e-9)
    assert rec.total_cost_usd == rec.cost_usd + rec.egress_usd
    report = sim.report()
    assert report.egress_usd == rec.egress_usd and report.total_cost_usd == report.cost_usd + report.egress_usd
    assert sim.egress_usd() == pytest.approx(expected, rel=1e-9)
    assert sim.view().plan_egress_usd_per_iter(plan) == pytest.approx(expected / job.iterations, rel=1e-12)
    # the same bytes priced the other way round: backward gradients pay the forward price
    swapped, plan2, _ = _two_clouds(0.09, 0.02)
    swapped.schedule(plan2)
    while not swapped.done:
        swapped.wait()
    assert swapped.records()[0].egress_usd == pytest.approx(expected, rel=1e-9)  # symmetric bytes: same sum
    asym = Plan(0, (Stage.at(0, 12, dp=4), Stage.at(1, 12, dp=4)))
    assert egress_usd_per_iter(asym, job, sim.topo, np.array([[0.0, 1.0], [0.0, 0.0]])) == pairs[(0, 1)]


def test_a_single_region_plan_and_a_zero_price_bill_nothing():
    sim, _, _ = _two_clouds(0.02, 0.09)
    sim.schedule(Plan(0, (Stage.at(0, 24, dp=8),)))
    while not sim.done:
        sim.wait()
    assert sim.records()[0].egress_usd == 0.0 and sim.egress_usd() == 0.0
    free, plan, _ = _two_clouds(0.0, 0.0)
    free.schedule(plan)
    while not free.done:
        free.wait()
    assert free.records()[0].egress_usd == 0.0 and free.billing.egress_usd_per_byte is None


def test_a_replan_bills_the_state_it_moves():
    from sfenv.sim import LinkDynamics, SimView

    regions = [Region("a", get_gpu("A100-80GB"), 8, "z"), Region("b", get_gpu("A100-80GB"), 8, "z")]
    topo = Topology(regions, [Link(0, 1, 10.0, 30.0)])
    job = JobSpec(0, MODEL_ZOO["gpt-1.3b"], 64, 200, 0.0, 8, 16)
    price = np.array([[0.0, 0.02], [0.09, 0.0]]) / BYTES_PER_GB
    noop = LinkDynamics((0,), low_factor=1.0, mean_good_s=50.0, mean_bad_s=50.0)
    sim = Simulator(topo, PriceSeries(["z"], np.full((1, 24), 50.0)), [job], SimConfig(), dynamics=noop,
                    rng=np.random.default_rng(0), egress_usd_per_byte=price)
    single = Plan(0, (Stage.at(0, 24, dp=8),))
    moved = Plan(0, (Stage.at(1, 24, dp=8),))
    done: list[float] = []

    def hook(view: SimView) -> list[Plan]:
        if done:
            return []
        done.append(view.time)
        return [moved]

    sim.run(lambda v: single if v.waiting else None, replan=hook)
    assert sim.replans == 1
    model = job.model
    state = (24 * model.layer_params + model.embedding_params) * sim.config.replan_state_bytes_per_param
    assert sim.records()[0].egress_usd == pytest.approx(state * 0.02 / BYTES_PER_GB, rel=1e-12)  # a -> b


# ---------------------------------------------------------------- env: info, report, reward
def _crossing_scenario(egress: dict | None = None, weight: float | None = None):
    """Two clouds' regions too small for any job alone: every plan crosses the WAN."""
    return load_scenario({
        "name": "egress-test",
        "topology": {"regions": [
            {"name": "east", "gpu": "A100-80GB", "gpus": 8, "zone": "z", "cloud": "aws", "cloud_region": "us-east-1"},
            {"name": "tokyo", "gpu": "A100-80GB", "gpus": 8, "zone": "z", "cloud": "aws",
             "cloud_region": "ap-northeast-1"}],
            "links": [{"a": "east", "b": "tokyo", "bandwidth_gbps": 10, "latency_ms": 70}]},
        "prices": {"kind": "time_of_use", "zones": {"z": {"base": 40, "peak": 80}}},
        "workload": {"num_jobs": 3, "models": [{"name": "gpt-1.3b"}], "global_batch": [64],
                     "iterations": [20, 40], "min_gpus": 16, "max_gpus": 16},
        "reward": {"cost_weight": 0.0, **({"egress_weight": weight} if weight is not None else {})},
        **({"egress": egress} if egress is not None else {}),
    })


#: egress off: no table, no default price
FREE = {"table": "none", "default_usd_per_gb": 0.0}


def _play(sc) -> tuple[float, list[dict], dict]:
    from sfenv.env import GeoSchedEnv

    env = GeoSchedEnv(sc)
    obs, info = env.reset(seed=3)
    total, infos, done = 0.0, [info], False
    while not done:
        valid = np.flatnonzero(info["action_mask"])
        obs, r, term, trunc, info = env.step(int(valid[0]))
        total += r
        infos.append(info)
        done = term or trunc
    return total, infos, info["episode_report"]


def test_info_report_and_reward_carry_egress_with_its_own_weight():
    free_r, _, free_rep = _play(_crossing_scenario(weight=0.0))
    r, infos, rep = _play(_crossing_scenario(weight=0.5))
    assert rep["egress_usd"] > 0 and rep["finished"] == 3
    last = infos[-1]
    assert last["egress_usd"] == pytest.approx(rep["egress_usd"], rel=1e-9)
    assert sum(i["step_egress_usd"] for i in infos) == pytest.approx(rep["egress_usd"], rel=1e-9)
    assert last["total_cost_usd"] == last["cost_usd"] + last["egress_usd"]
    assert rep["total_cost_usd"] == rep["cost_usd"] + rep["egress_usd"]
    assert free_rep["egress_usd"] == rep["egress_usd"]  # the weight changes the reward, not the episode
    assert free_r - r == pytest.approx(0.5 * rep["egress_usd"], rel=1e-9)
    # left out, egress_weight is cost_weight
    from sfenv.env import GeoSchedEnv

    assert GeoSchedEnv(_crossing_scenario(), cost_weight=0.3).egress_weight == 0.3
    assert GeoSchedEnv(_crossing_scenario(), cost_weight=0.3, egress_weight=0.0).egress_weight == 0.0


def test_egress_off_keeps_electricity_and_everything_else():
    _, _, on = _play(_crossing_scenario())
    _, _, off = _play(_crossing_scenario({"table": "none", "default_usd_per_gb": 0.0}))
    assert off["egress_usd"] == 0.0 and on["egress_usd"] > 0
    assert {k: v for k, v in on.items() if "egress" not in k and k != "total_cost_usd"} == \
        {k: v for k, v in off.items() if "egress" not in k and k != "total_cost_usd"}


def _cost_feature_usd_h(obs: dict, i: int) -> float:
    """Candidate ``i``'s cost feature of a full observation, back in USD/h (the feature's scale inverted)."""
    from sfenv.env.observation import CAND_FEATURES

    scale = math.log1p(1e5)  # the feature is log(1 + USD/h) / log(1 + 10^5) (GeoSchedEnv's docstring)
    return math.expm1(float(obs["candidates"][i * CAND_FEATURES + 4]) * scale)


def test_a_crossing_candidates_cost_feature_adds_the_egress_the_simulator_bills_per_hour():
    from sfenv.env import GeoSchedEnv

    priced, free = GeoSchedEnv(_crossing_scenario()), GeoSchedEnv(_crossing_scenario(FREE))
    obs, _ = priced.reset(seed=3)
    obs_free, _ = free.reset(seed=3)
    assert priced._candidates[0] == free._candidates[0] and len(priced._candidates[0].regions) == 2
    shown = _cost_feature_usd_h(obs, 0) - _cost_feature_usd_h(obs_free, 0)
    # what the simulator bills: play the candidate alone (the job takes every GPU) until it finishes
    _, _, term, _, info = priced.step(0)
    while not term and not priced.sim.records()[0].finished:
        _, _, term, _, info = priced.step(priced.max_candidates)  # wait
    rec = priced.sim.records()[0]
    billed_per_h = rec.egress_usd / (rec.finish - rec.first_start) * 3600.0
    assert billed_per_h > 10.0  # a priced link: far more than the plan's electricity
    assert shown == pytest.approx(billed_per_h, rel=1e-5)
    assert float(obs["candidates"][4]) < 0.9  # room above it: not clipped


# ---------------------------------------------------------------- zero price: today's episodes exactly
FIXTURE = Path(__file__).resolve().parent / "data" / "episode_identity.json"
NEW = ("egress_usd", "total_cost_usd")


def _old_fields(report: dict) -> dict:
    return {k: v for k, v in report.items() if k not in NEW}


def test_zero_egress_prices_make_a_cost_aware_agent_egress_blind():
    """BACE-Pipe on free egress plays what its egress-blind variant plays on billed egress, the bill aside."""
    import episode_identity as ei
    from sfenv.agents.bace_pipe import BACEPipeAgent

    name, overrides = ei.AGENT_SCENARIO
    billed = load_scenario(name).with_overrides(**overrides)
    free = billed.with_overrides(egress={"table": "none", "default_usd_per_gb": 0.0})

    def play(agent: BACEPipeAgent, scenario) -> tuple[dict, tuple[int, int, int]]:
        agent.reset(0)
        sim = make_simulator(scenario, 0)
        report = sim.run(agent.decide, replan=agent.replan if agent.replans else None)
        return report.to_dict(), (sim.replans, sim.events_processed, sim.decisions)

    got, got_counts = play(BACEPipeAgent(), free)
    ref, ref_counts = play(BACEPipeAgent(egress=False), billed)
    assert _old_fields(got) == _old_fields(ref) and got_counts == ref_counts
    assert got["egress_usd"] == 0.0 and ref["egress_usd"] >= 0.0


def test_zero_egress_changes_nothing_but_the_egress_bill():
    """Egress priced at 0 plays the episode that leaves egress out of the reward: same steps, rewards, power bill."""
    import episode_identity as ei

    base = load_scenario("spider-8-contended")
    free = base.with_overrides(egress={"default_usd_per_gb": 0.0})
    unweighted = base.with_overrides(reward={"egress_weight": 0.0})
    got = ei.play("sfenv/Spider8Contended-v6", {"num_jobs": 10, "scenario": free}, 1)
    ref = ei.play("sfenv/Spider8Contended-v6", {"num_jobs": 10, "scenario": unweighted}, 1)
    assert got["reward_sum"] == ref["reward_sum"] and got["steps"] == ref["steps"]
    assert _old_fields(got["report"]) == _old_fields(ref["report"])
    assert float(got["report"]["egress_usd"]) == 0.0 and float(ref["report"]["egress_usd"]) >= 0.0


# ---------------------------------------------------------------- cost-aware agents
def test_bace_pipe_counts_egress_in_a_paths_cost():
    from agent_worlds import job, region
    from sfenv.agents.bace_pipe import BACEPipeAgent

    def three_regions(cheap_pair: tuple[int, int] | None) -> Simulator:
        regions = [region("a", 24, "z"), region("b", 24, "z"), region("c", 24, "z")]
        topo = Topology(regions, [Link(0, 1, 100, 1), Link(0, 2, 100, 1), Link(1, 2, 100, 1)])
        price = np.full((3, 3), 0.2 / BYTES_PER_GB)
        np.fill_diagonal(price, 0.0)
        if cheap_pair is not None:
            price[cheap_pair] = price[cheap_pair[::-1]] = 0.01 / BYTES_PER_GB
        return Simulator(topo, PriceSeries(["z"], np.full((1, 24), 50.0)),
                         [job(0, model="gpt-6.7b", min_gpus=30, max_gpus=40)], SimConfig(), egress_usd_per_byte=price)

    # equal electricity and speed on every pair: electricity alone picks the first path, (a, b)
    assert BACEPipeAgent(egress=False).decide(three_regions((1, 2)).view()).regions == (0, 1)
    assert BACEPipeAgent().decide(three_regions(None).view()).regions == (0, 1)
    # with egress counted, the pair whose bytes cost 0.01 instead of 0.2 USD/GB wins
    plan = BACEPipeAgent().decide(three_regions((1, 2)).view())
    assert set(plan.regions) == {1, 2}


def test_the_table_script_writes_a_table_sfenv_reads(tmp_path):
    from sfenv.experiments.derive_egress_prices import OTHER_CLOUDS, main

    from sfenv.world.egress import read_egress_table

    aws = tmp_path / "aws_transfer_costs.csv"
    aws.write_text("src,dst,cost\nus-east-1,internet,0.09\nus-east-1,us-west-1,0.02\nus-west-1,us-east-1,0.02\n")
    out = tmp_path / "table.csv"
    argv, sys.argv = sys.argv, ["derive_egress_prices", "--aws-csv", str(aws), "--out", str(out)]
    try:
        main()
    finally:
        sys.argv = argv
    table = read_egress_table(out, "test")
    assert len(table.prices) == 3 + len(OTHER_CLOUDS)
    assert table.usd_per_gb(AWS_EAST, AWS_WEST) == 0.02 and table.usd_per_gb(AWS_EAST, GCP_MUMBAI) == 0.09
    # the bundled table holds every one of these GCP and Azure rows
    bundled = load_egress_table().prices
    assert all(bundled[row[:4]] == row[4] for row in OTHER_CLOUDS)


def test_the_platform_total_is_the_sum_of_the_jobs_bills_and_forks_are_independent():
    from sfenv.agents.registry import make_agent

    sim = make_simulator(load_scenario("spider-8").with_overrides(workload={"num_jobs": 12}), 0)
    agent = make_agent("spantrain")
    agent.reset(0)
    checked = 0
    while not sim.done:
        plan = agent.decide(sim.view())
        if plan is None:
            sim.wait()
        else:
            sim.schedule(plan)
            sim.advance()
        total = sum(r.egress_usd for r in sim.records())  # records accrue to each job's last update only
        assert sim.egress_usd() >= total - 1e-9 * max(1.0, total)
        checked += 1
        if checked == 6:
            twin = sim.fork()
            before = sim.egress_usd()
            twin.run(agent.decide)
            assert sim.egress_usd() == before and twin.egress_usd() >= before
    report = sim.report()
    assert report.egress_usd > 0
    assert sim.egress_usd() == pytest.approx(report.egress_usd, rel=1e-9)


def test_a_scenario_can_name_its_own_price_table(tmp_path):
    (tmp_path / "prices.csv").write_text("src_cloud,src_region,dst_cloud,dst_region,usd_per_gb\n"
                                         "acme,r1,acme,r2,0.5\nacme,r2,acme,r1,0.25\n")
    data = {
        "name": "own-table",
        "topology": {"regions": [{"name": "x", "gpu": "A100-80GB", "gpus": 8, "zone": "z", "cloud": "acme",
                                  "cloud_region": "r1"},
                                 {"name": "y", "gpu": "A100-80GB", "gpus": 8, "zone": "z", "cloud": "acme",
                                  "cloud_region": "r2"}],
                     "links": [{"a": "x", "b": "y", "bandwidth_gbps": 10, "latency_ms": 10}]},
        "prices": {"kind": "time_of_use", "zones": {"z": {"base": 40, "peak": 80}}},
        "egress": {"table": "prices.csv"},
    }
    path = tmp_path / "own.yaml"
    path.write_text(yaml.safe_dump(data))
    m = load_scenario(path).egress_usd_per_byte * BYTES_PER_GB
    assert m[0, 1] == pytest.approx(0.5) and m[1, 0] == pytest.approx(0.25)
    data["egress"]["table"] = "missing.csv"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ScenarioError, match=r"egress\.table.*missing\.csv"):
        load_scenario(path)


@pytest.mark.parametrize(("rows", "message"), [
    ("us-east-1,internet,-0.09\n", r"line 2, column 'cost'"),
    ("us-east-1,internet,cheap\n", r"line 2, column 'cost'"),
    (" ,us-west-1,0.02\n", r"line 2: an empty region"),
])
def test_the_table_script_names_a_bad_source_row_and_keeps_the_table(tmp_path, rows, message):
    from sfenv.experiments.derive_egress_prices import rows_from

    aws = tmp_path / "aws_transfer_costs.csv"
    aws.write_text("src,dst,cost\n" + rows)
    with pytest.raises(InvalidInput, match=message):
        rows_from(aws)
    out = tmp_path / "table.csv"
    out.write_text("kept")
    proc = subprocess.run([sys.executable, "-m", "sfenv.experiments.derive_egress_prices", "--aws-csv", str(aws),
                           "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.startswith("sfenv: ") and proc.stderr.count("\n") == 1
    assert out.read_text() == "kept"
