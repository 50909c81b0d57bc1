"""The benchmark protocol: stable, disjoint splits; explicit seeds never labelled as a split; held-out scenarios."""

from __future__ import annotations

import importlib

import gymnasium as gym
import numpy as np
import pytest
import yaml

import sfenv
from sfenv.errors import InvalidInput
from sfenv.runs import protocol
from sfenv.scenario import bundled_scenarios

#: protocol 1's ranges, pinned here: changing one in sfenv.runs.protocol must break this test (and bump the version)
PINNED = {"train": (0, 10_000), "validation": (10_000, 20_000), "test": (1_000_000, 1_010_000)}
PINNED_GENERATOR = {"train": (0, 1_000), "validation": (10_000, 11_000), "test": (1_000_000, 1_001_000)}


def test_splits_are_pinned_and_versioned():
    assert protocol.PROTOCOL_VERSION == 1 and protocol.ENV_VERSION == "v6"
    assert {k: (r.start, r.stop) for k, r in protocol.SEED_RANGES.items()} == PINNED
    assert {k: (r.start, r.stop) for k, r in protocol.GENERATOR_SEEDS.items()} == PINNED_GENERATOR
    assert protocol.seeds("test", 3) == [1_000_000, 1_000_001, 1_000_002]
    assert protocol.seeds("validation", 2) == [10_000, 10_001]
    assert protocol.seeds("train", 1) == [0]


def test_every_bundled_scenario_has_three_disjoint_splits():
    assert set(protocol.SCENARIO_SPLITS) == set(bundled_scenarios())
    for name in bundled_scenarios():
        ranges = protocol.seed_ranges(name)
        assert set(ranges) == set(protocol.SPLITS)
        sets = [set(r) for r in ranges.values()]
        assert all(sets) and sum(len(s) for s in sets) == len(set.union(*sets))  # disjoint, none empty
        for split in protocol.SPLITS:
            assert all(protocol.split_of(s, name) == split for s in protocol.seeds(split, 50, name))
    gens = [set(r) for r in protocol.GENERATOR_SEEDS.values()]
    assert sum(len(s) for s in gens) == len(set.union(*gens))


def test_the_seeds_earlier_releases_reported_on_are_not_test_seeds():
    # 100-119 and 200-239 (experiments), 5000-5019 (the outside re-measure), 10000-10015 (model selection)
    for seed in [*range(100, 120), *range(200, 240), *range(5000, 5020), *range(10_000, 10_016)]:
        assert protocol.split_of(seed) != "test"


def test_seeds_refuses_bad_input():
    with pytest.raises(InvalidInput, match="split 'dev'"):
        protocol.seeds("dev", 3)
    for n in (0, -1, 10_001, 2.0, True):
        with pytest.raises(InvalidInput, match="n = "):
            protocol.seeds("train", n)


def test_explicit_seeds_are_never_labelled_as_a_split():
    choice = protocol.resolve_seeds(None, 3, [1, 2, 3])
    assert choice.label == protocol.EXPLICIT and choice.split is None
    assert choice.record() == {"split": "explicit seeds", "seeds": [1, 2, 3], "protocol": 1}
    assert "explicit seeds" in choice.describe()
    with pytest.raises(InvalidInput, match="cannot be labelled as split 'test'"):
        protocol.resolve_seeds("test", 3, [1, 2, 3])
    with pytest.raises(InvalidInput, match="not the first 2 of split 'test'"):
        protocol.SeedChoice((100, 101), "test")
    with pytest.raises(InvalidInput, match="not the first"):  # even the split's own seeds, out of order
        protocol.SeedChoice((1_000_001, 1_000_000), "test")
    ok = protocol.resolve_seeds("validation", 4)
    assert ok.record() == {"split": "validation", "seeds": [10_000, 10_001, 10_002, 10_003], "protocol": 1}
    assert protocol.resolve_seeds(None, 2).label == "test"  # the default split


#: every experiment that takes seeds, its module and extra arguments that make it stop after parsing
EXPERIMENTS = ["learned_vs_heuristics", "expert_vs_heuristic", "bace_sensitivity", "scenario_spread"]


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_experiment_refuses_to_label_explicit_seeds_as_a_split(name, capsys, tmp_path):
    module = importlib.import_module(f"sfenv.experiments.{name}")
    explicit = ["--seed-list", "0-3"] if name == "scenario_spread" else ["--first-seed", "100"]
    with pytest.raises(SystemExit) as e:
        module.main(["--split", "test", *explicit, "--out", str(tmp_path / "out")])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "explicit seeds cannot be labelled as split 'test'" in err


def test_bundled_training_configs_keep_the_protocol():
    from sfenv.agents.learned import bundled_configs, load_config

    names = bundled_configs()
    assert names
    for name in names:
        cfg = load_config(name)
        protocol.check_training_config(cfg, name)  # raises on a held-out scenario or test seeds
        used = {cfg.get("eval_scenario"), cfg.get("scenario") if isinstance(cfg.get("scenario"), str) else None}
        gen = cfg.get("scenario") if isinstance(cfg.get("scenario"), dict) else None
        if gen:
            used.add(gen["generate"].get("base"))
        assert not used & set(protocol.HELD_OUT_SCENARIOS), name
    assert set(protocol.HELD_OUT_SCENARIOS) <= set(bundled_scenarios())


def test_the_config_check_catches_each_violation():
    with pytest.raises(InvalidInput, match="eval_scenario uses held-out scenario"):
        protocol.check_training_config({"scenario": "spider-8", "eval_scenario": "geo-8-contended"})
    with pytest.raises(InvalidInput, match="scenario uses held-out"):
        protocol.check_training_config({"scenario": {"generate": {"count": 2, "seed": 1, "base": "geo-8"}}})
    with pytest.raises(InvalidInput, match="not a train generator seed"):
        protocol.check_training_config({"scenario": {"generate": {"count": 2, "seed": 1_000_000}}})
    with pytest.raises(InvalidInput, match="are test seeds"):
        protocol.check_training_config({"scenario": "spider-8", "eval_seeds": [10_000, 1_000_005]})


def test_generated_test_platforms_are_not_training_platforms():
    train_cfg = yaml.safe_load(importlib.resources.files("sfenv").joinpath(
        "hyperparams", "train-generalise-queue1.yml").read_text())
    from sfenv.agents.learned import generated_platforms, generated_scenarios

    trained = generated_scenarios(**train_cfg["scenario"]["generate"])
    test = generated_platforms("test", 8, num_jobs=6)
    assert len(test) == 8 and all(sc.cfg.workload.num_jobs == 6 for sc in test)
    topo = {(t.cfg.topology.generator, t.cfg.topology.seed) for t in trained}
    assert not topo & {(t.cfg.topology.generator, t.cfg.topology.seed) for t in test}
    again = generated_platforms("test", 8, num_jobs=6)  # stable
    assert [t.cfg.model_dump() for t in again] == [t.cfg.model_dump() for t in test]


def test_train_refuses_test_seeds_for_model_selection(tmp_path):
    from sfenv.agents.learned import train

    with pytest.raises(InvalidInput, match="test seeds"):
        train(scenario="spider-8", total_timesteps=64, eval_seeds=[1_000_000], out_dir=tmp_path)
    assert not any(tmp_path.iterdir())


def test_cli_train_refuses_the_test_split(capsys, tmp_path):
    from sfenv.app.cli import main

    assert main(["train", "--eval-split", "test", "--steps", "64", "--out", str(tmp_path)]) == 2
    assert "nothing is chosen on the test split" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_v1_observation_has_no_arrival_share_and_v0_keeps_it():
    kw = {"num_jobs": 6}
    v1, v0 = gym.make("sfenv/GeoSched-v6", **kw), gym.make("sfenv/GeoSched-v0", **kw)
    assert v1.observation_space["time"].shape == (5,) and v0.observation_space["time"].shape == (6,)
    assert not v1.unwrapped.privileged_obs and v0.unwrapped.privileged_obs
    o1, _ = v1.reset(seed=3)
    o0, _ = v0.reset(seed=3)
    sim = v0.unwrapped.sim
    share = sim.view().pending_arrivals / len(sim.jobs)
    assert share > 0  # jobs are still to arrive at the first decision, so the entry is visible
    assert o0["time"][4] == pytest.approx(share)
    # v1 is v0 without that entry, and the rest of the observation is identical
    np.testing.assert_array_equal(o1["time"], np.delete(o0["time"], 4))
    for key in ("regions", "links", "queue", "candidates"):
        np.testing.assert_array_equal(o1[key], o0[key])
    for _ in range(5):  # and it stays so along an episode (same actions, same dynamics)
        a = int(np.flatnonzero(v1.unwrapped.action_masks())[0])
        o1, *_ = v1.step(a)
        o0, *_ = v0.step(a)
        share = v0.unwrapped.sim.view().pending_arrivals / len(v0.unwrapped.sim.jobs)
        assert o0["time"][4] == pytest.approx(share)
        np.testing.assert_array_equal(o1["time"], np.delete(o0["time"], 4))
    compact = gym.make("sfenv/GeoSched-v6", obs_mode="compact", **kw)
    assert compact.observation_space["time"].shape == (5,)
    with pytest.raises(InvalidInput, match="privileged_obs"):
        gym.make("sfenv/GeoSched-v6", privileged_obs="yes")


def test_every_current_id_is_v6_and_every_v5_v4_v3_v2_and_v0_id_is_still_registered():
    """The current ids play each scenario's own settings; the earlier ids add exactly their version's WAN settings
    (env v5's: per-member VM-pair caps and full zero-bubble replays; before it also their sharing model)."""
    from sfenv.registration import ENV_VERSION

    assert ENV_VERSION == protocol.ENV_VERSION == "v6"
    ids = sfenv.register_envs()
    assert ids and all(i.endswith("-v6") for i in ids)
    new_in_v2 = {"sfenv/Geo8Carbon-v6"}  # no model was ever trained on a v0 of these: they have none
    env_v5 = {"vm_pair_cap": "member", "skip_zero_bubble_periods": False}
    for i in ids:
        old = i.removesuffix("-v6") + "-v0"
        if i in new_in_v2:
            assert old not in gym.registry
        else:
            assert old in gym.registry and gym.registry[old].kwargs.get("privileged_obs") is True
        assert "privileged_obs" not in gym.registry[i].kwargs
        assert not {"wan_sharing", *env_v5} & set(gym.registry[i].kwargs)  # the scenario's own settings
        for version in ("v5", "v4", "v3", "v2"):
            previous = gym.registry[i.removesuffix("-v6") + "-" + version]
            assert previous.kwargs == {**gym.registry[i].kwargs, "wan_sharing": version, **env_v5}
    played = gym.make("sfenv/Geo8-v5", num_jobs=3).unwrapped.scenario.cfg.sim
    assert (played.wan_sharing, played.vm_pair_cap, played.skip_zero_bubble_periods) == ("v5", "member", False)
    played = gym.make("sfenv/Geo8-v6", num_jobs=3).unwrapped.scenario.cfg.sim
    assert (played.wan_sharing, played.vm_pair_cap, played.skip_zero_bubble_periods) == ("v5", "server", True)
