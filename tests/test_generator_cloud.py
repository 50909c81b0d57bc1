"""The cloud-like topology generator (sfenv.world.generators.cloud_topology) and ``generator: cloud``."""

from __future__ import annotations

import numpy as np
import pytest
from sfenv.agents.learned import generated_platforms, generated_scenarios

from sfenv.errors import InvalidInput
from sfenv.scenario import Scenario, load_scenario
from sfenv.world.generators import cloud_topology


def _goodputs(num_regions: int, seeds: range) -> tuple[np.ndarray, np.ndarray]:
    """Directed goodputs of every link over ``seeds``, split into same-cloud and cross-cloud pairs."""
    same, cross = [], []
    for seed in seeds:
        topo = cloud_topology(num_regions, seed)
        cloud = {r["name"]: r["cloud"] for r in topo.regions}
        for link in topo.links:
            (same if cloud[link["a"]] == cloud[link["b"]] else cross).extend(
                [link["pair_gbps_ab"], link["pair_gbps_ba"]])
    return np.array(same), np.array(cross)


def test_every_pair_is_linked_once_and_capacity_is_four_gateways() -> None:
    topo = cloud_topology(9, seed=3)
    pairs = {frozenset((ln["a"], ln["b"])) for ln in topo.links}
    assert len(topo.links) == len(pairs) == 9 * 8 // 2
    for link in topo.links:
        assert link["bandwidth_gbps"] == pytest.approx(4 * min(link["pair_gbps_ab"], link["pair_gbps_ba"]), abs=0.02)
    assert {r["cloud"] for r in topo.regions} <= {"aws", "gcp", "azure"}
    assert all("cloud_region" not in r for r in topo.regions)


def test_goodputs_follow_the_log_normal_statistics() -> None:
    same, cross = _goodputs(12, range(30))
    assert len(same) > 300 and len(cross) > 600
    assert np.median(same) == pytest.approx(4.71, rel=0.08)
    assert np.median(cross) == pytest.approx(4.22, rel=0.06)
    assert np.log(np.concatenate([same, cross])).std() == pytest.approx(0.51, rel=0.06)
    assert np.percentile(np.concatenate([same, cross]), 95) > 2.0 * np.median(cross)  # the right tail


def test_round_trips_span_continents() -> None:
    rtt = np.array([2 * ln["latency_ms"] for s in range(20) for ln in cloud_topology(12, s).links])
    assert np.percentile(rtt, 10) < 60 < 100 < np.median(rtt) < 200 < np.percentile(rtt, 90) < 400


def test_same_seed_same_platform_other_seed_other() -> None:
    assert cloud_topology(8, seed=5) == cloud_topology(8, seed=5)
    assert cloud_topology(8, seed=5).links != cloud_topology(8, seed=6).links


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"num_regions": 1}, "num_regions"),
    ({"clouds": ()}, "clouds"),
    ({"median_gbps_same_cloud": 0.0}, "median_gbps_same_cloud"),
    ({"median_gbps_cross_cloud": -1.0}, "median_gbps_cross_cloud"),
    ({"sigma_log": -0.1}, "sigma_log"),
    ({"gateways": 0}, "gateways"),
])
def test_bad_arguments_name_the_field(kwargs: dict, field: str) -> None:
    args = {"num_regions": 6, "seed": 0, **kwargs}
    with pytest.raises(ValueError, match=field):
        cloud_topology(**args)


def test_scenario_generator_cloud_loads_and_generated_scenarios_mix_it() -> None:
    data = load_scenario("spider-8-contended").cfg.model_dump()
    data["topology"] = {"generator": "cloud", "num_regions": 7, "seed": 11}
    data["prices"] = {"kind": "time_of_use", "days": 2}
    sc = Scenario.from_dict(data)
    assert sc.topology.num_regions == 7 and len(sc.cfg.topology.links) == 0
    assert sc.egress_usd_per_byte[0, 1] == pytest.approx(sc.cfg.egress.default_usd_per_gb / 1e9)
    mixed = generated_scenarios(2, seed=7, generators=("spider", "cloud"), num_jobs=5)
    plain = generated_scenarios(2, seed=7, num_jobs=5)
    kinds = [s.cfg.topology.generator for s in mixed]
    assert set(kinds) == {"spider", "cloud"}
    for m, p in zip(mixed, plain, strict=True):  # the same draws: waxman platforms become cloud ones
        assert m.cfg.topology.num_regions == p.cfg.topology.num_regions
        assert m.cfg.topology.generator == ("cloud" if p.cfg.topology.generator == "waxman" else "spider")


def test_cloud_platform_family_of_a_split() -> None:
    val = generated_platforms("validation", 1, num_jobs=5, family="cloud")
    test = generated_platforms("test", 1, num_jobs=5, family="cloud")
    assert all(s.cfg.topology.generator == "cloud" for s in val + test)
    seeds = {s.cfg.topology.seed for s in val} | {s.cfg.topology.seed for s in test}
    assert len(seeds) == 2  # validation and test draw other platforms
    with pytest.raises(InvalidInput, match="family"):
        generated_platforms("validation", 1, family="clouds")


def test_generated_scenarios_draw_job_mixes_apart_from_everything_else() -> None:
    """With job_mixes each scenario takes one mix; topologies, loads and prices are those drawn without them."""
    mixes = [{"models": [{"name": "gpt-350m", "weight": 1}], "global_batch": [128]},
             {"models": [{"name": "gpt-6.7b", "weight": 1}], "global_batch": [1024], "min_gpus": 16}]
    plain = generated_scenarios(12, seed=7, base="spider-8-contended", num_jobs=5)
    mixed = generated_scenarios(12, seed=7, base="spider-8-contended", num_jobs=5, job_mixes=mixes)
    drawn = set()
    for p, m in zip(plain, mixed, strict=True):
        assert m.name.startswith(p.name + "-mix")
        k = int(m.name.rsplit("-mix", 1)[1])
        drawn.add(k)
        assert m.cfg.topology == p.cfg.topology and m.cfg.prices == p.cfg.prices
        assert m.cfg.workload.load == p.cfg.workload.load and m.cfg.workload.num_jobs == 5
        assert [x.name for x in m.cfg.workload.models] == [mixes[k]["models"][0]["name"]]
        assert m.cfg.workload.global_batch == mixes[k]["global_batch"]
        assert m.cfg.workload.min_gpus == mixes[k].get("min_gpus", p.cfg.workload.min_gpus)
        assert m.cfg.workload.iterations == p.cfg.workload.iterations  # a key the mix leaves is the base's
    assert drawn == {0, 1}
    assert [s.name for s in generated_scenarios(12, seed=7, base="spider-8-contended", num_jobs=5,
                                                job_mixes=mixes)] == [s.name for s in mixed]
    for bad, match in (({"models": []}, "job_mixes: expected a list"), ([{"load": 0.5}], r"job_mixes\[0\]"),
                       ([{}], r"job_mixes\[0\]"), ([mixes[0], "x"], r"job_mixes\[1\]")):
        with pytest.raises(InvalidInput, match=match):
            generated_scenarios(2, seed=7, job_mixes=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown model 'gpt-1t'"):  # the scenario's own check (ScenarioError)
        generated_scenarios(2, seed=7, job_mixes=[{"models": [{"name": "gpt-1t", "weight": 1}]}])
