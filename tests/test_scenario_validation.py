"""Bad scenario input raises ScenarioError naming the source, the field, the value and the expectation."""

from __future__ import annotations

import copy

import pytest

from sfenv.scenario import Scenario, ScenarioError, load_scenario

GOOD = {
    "name": "ok",
    "topology": {
        "regions": [
            {"name": "a", "gpu": "A100-80GB", "gpus": 8, "zone": "z"},
            {"name": "b", "gpu": "V100", "gpus": 8, "zone": "z"},
        ],
        "links": [{"a": "a", "b": "b", "bandwidth_gbps": 10, "latency_ms": 5}],
    },
    "prices": {"zones": {"z": {"base": 30, "peak": 60}}},
}


def bad(mutate) -> dict:
    d = copy.deepcopy(GOOD)
    mutate(d)
    return d


def test_good_scenario_loads():
    sc = Scenario.from_dict(GOOD)
    assert sc.topology.num_regions == 2


@pytest.mark.parametrize(
    "mutate,needles",
    [
        (lambda d: d["topology"]["regions"][0].pop("gpus"), ["topology.regions[0].gpus", "(missing)"]),
        (lambda d: d["topology"]["links"][0].update(bandwidth_gbps=-1),
         ["bandwidth_gbps", "-1", "greater than or equal to 0.001"]),
        (lambda d: d["topology"]["regions"][1].update(gpu="B200X"), ["gpu", "B200X", "unknown GPU type"]),
        (lambda d: d["topology"]["links"][0].update(b="mars"), ["topology.links[0].b", "mars", "region name"]),
        (lambda d: d["topology"].update(links=[]), ["disconnected", "topology"]),
        (lambda d: d["topology"]["regions"][0].update(gpus="many"), ["gpus", "many"]),
        # text where a number goes is refused, not read as the number (pydantic's lax mode would)
        (lambda d: d["topology"]["regions"][0].update(gpus="8"),
         ["topology.regions[0].gpus", "expected a number, got the text '8'"]),
        (lambda d: d["topology"]["links"][0].update(latency_ms="1e3"), ["latency_ms", "got the text '1e3'"]),
        (lambda d: d["prices"]["zones"]["z"].update(base="30"), ["prices.zones.z.base", "got the text '30'"]),
        (lambda d: d.update(workload={"iterations": [10, 5]}), ["iterations", "low <= high"]),
        (lambda d: d["prices"]["zones"].pop("z"), ["prices", "missing", "z"]),
        (lambda d: d.update(sim={"schedule": "zb-h9"}), ["sim.schedule", "zb-h9", "1f1b"]),
        (lambda d: d.update(typo_section={}),
         ["typo_section", "unknown field", "known here: carbon, description, dynamics"]),
    ],
)
def test_malformed_scenarios_are_named(mutate, needles):
    with pytest.raises(ScenarioError) as e:
        Scenario.from_dict(bad(mutate), source="my.yaml")
    msg = str(e.value)
    assert "my.yaml" in msg
    for needle in needles:
        assert needle in msg, (needle, msg)


def test_file_errors_name_the_path(tmp_path):
    p = tmp_path / "broken.yaml"
    p.write_text("name: x\ntopology:\n  regions:\n    - {name: a, gpu: A100-80GB, gpus: -3, zone: z}\n")
    with pytest.raises(ScenarioError) as e:
        load_scenario(p)
    assert str(p) in str(e.value) and "gpus" in str(e.value) and "-3" in str(e.value)


def test_bad_yaml_and_unknown_names(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("name: [unclosed\n")
    with pytest.raises(ScenarioError, match="not valid YAML"):
        load_scenario(p)
    with pytest.raises(ScenarioError, match="no bundled scenario named 'nope'.*spider-8"):
        load_scenario("nope")
    with pytest.raises(ScenarioError, match="file not found"):
        load_scenario(tmp_path / "missing.yaml")


def test_overrides_are_validated():
    sc = load_scenario("spider-8")
    assert sc.with_overrides(workload={"num_jobs": 3}).cfg.workload.num_jobs == 3
    with pytest.raises(ScenarioError, match="num_jobs"):
        sc.with_overrides(workload={"num_jobs": 0})


@pytest.mark.parametrize("generator", ["waxman", "cloud", "spider"])
def test_more_regions_than_the_bound_are_refused_before_any_route(generator):
    """``MAX_REGIONS`` (256): a 1,024-region cloud scenario did not load in 15 minutes; it is refused at once."""
    from sfenv.scenario import MAX_REGIONS

    cfg = {"name": "big", "topology": {"generator": generator, "num_regions": MAX_REGIONS + 1}}
    with pytest.raises(ScenarioError) as e:
        Scenario.from_dict(cfg, source="big.yaml")
    assert "topology.num_regions" in str(e.value) and "256" in str(e.value)
    regions = [{"name": f"r{i}", "gpu": "A100-80GB", "gpus": 8, "zone": "z"} for i in range(MAX_REGIONS + 1)]
    with pytest.raises(ScenarioError, match="topology.regions"):
        Scenario.from_dict({**GOOD, "topology": {"regions": regions, "links": []}}, source="big.yaml")
