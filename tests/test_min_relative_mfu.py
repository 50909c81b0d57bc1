"""``min_relative_mfu``: candidates across regions that the WAN makes inefficient leave the env's menu."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from floor_checks import best_single_region_mfu, plan_mfu
from model_copies import copy_with_meta

from sfenv.env import GeoSchedEnv
from sfenv.errors import InvalidInput
from sfenv.model.perf import Plan

ROOT = Path(__file__).resolve().parents[1]
GEO6 = ROOT / "docs" / "results" / "learned" / "v2" / "geo-6-contended-validation.yaml"


def _play(env: GeoSchedEnv, seed: int, steps: int) -> tuple[int, int, list[tuple[Plan, float, float]]]:
    """Start the first valid candidate each step; (steps, multi-region candidates seen, (plan, mfu, best) per one)."""
    env.reset(seed=seed)
    seen, rows = 0, []
    for n in range(steps):
        for plan in env.candidates:
            if len(plan.regions) > 1:
                seen += 1
                rows.append((plan, plan_mfu(env, plan), best_single_region_mfu(env, plan.job_id)))
        mask = env.action_masks()
        _, _, term, trunc, _ = env.step(int(np.flatnonzero(mask)[0]))
        if term or trunc:
            return n + 1, seen, rows
    return steps, seen, rows


@pytest.mark.parametrize("bad", [0.0, -0.5, 1.5, float("nan"), True, "0.7"])
def test_a_bad_value_is_refused_naming_the_argument(bad: object) -> None:
    with pytest.raises(InvalidInput, match="min_relative_mfu"):
        GeoSchedEnv("spider-8", num_jobs=4, min_relative_mfu=bad)  # type: ignore[arg-type]


def test_off_by_default_and_every_kept_multi_region_candidate_meets_the_floor() -> None:
    """Without the floor the menu offers WAN-bound plans; with it, none below the floor is offered.  (Seed 4: under env
    v6's per-server VM-pair caps this menu seldom holds a plan across regions; seed 3, env v5's choice, holds none
    below the floor.)"""
    if not GEO6.exists():
        pytest.skip("the validation scenario is not in this checkout")
    kw = {"proposers": "best", "num_jobs": 40, "obs_mode": "compact"}
    _, seen_off, rows_off = _play(GeoSchedEnv(GEO6, **kw), seed=4, steps=60)
    below = [(m, b) for _, m, b in rows_off if b > 0 and m < 0.7 * b]
    assert below, "the check needs a state whose menu holds a WAN-bound plan"
    env = GeoSchedEnv(GEO6, min_relative_mfu=0.7, **kw)
    _, seen_on, rows_on = _play(env, seed=4, steps=60)
    assert seen_on < seen_off
    for plan, mfu, best in rows_on:
        assert best == 0.0 or mfu >= 0.7 * best * (1 - 1e-9), plan


@pytest.mark.parametrize("strictest", [{"min_relative_mfu": 1.0}, {"min_spread_speedup": 10.0}])
def test_single_region_candidates_are_never_dropped(strictest: dict) -> None:
    """Both menu tests read plans across regions only: the single-region menu of a first state is unchanged."""
    kw = {"proposers": "best", "num_jobs": 12}
    a, b = GeoSchedEnv("spider-8-contended", **kw), GeoSchedEnv("spider-8-contended", **strictest, **kw)
    a.reset(seed=5)
    b.reset(seed=5)
    single_a = [p for p in a.candidates if len(p.regions) == 1]
    assert single_a
    assert single_a == [p for p in b.candidates if len(p.regions) == 1]


def test_with_work_conserving_the_floored_menu_still_finishes_every_job() -> None:
    """Work-conserving play on the floored menu: masks agree with the menu, nothing invalid, every job finishes."""
    if not GEO6.exists():
        pytest.skip("the validation scenario is not in this checkout")
    env = GeoSchedEnv(GEO6, proposers="best", num_jobs=20, work_conserving=True, min_relative_mfu=1.0)
    env.reset(seed=3)
    for _ in range(400):
        mask = env.action_masks()
        assert mask[-1] == (not mask[:-1].any())
        assert all(len(p.regions) == 1 or plan_mfu(env, p) >= best_single_region_mfu(env, p.job_id) * (1 - 1e-9)
                   for p in env.candidates)
        _, _, term, trunc, info = env.step(int(np.flatnonzero(mask)[0]))
        assert not info["invalid_action"]
        if term or trunc:
            break
    assert term
    assert info["episode_report"]["unfinished"] == 0


def test_teachers_never_offer_a_decision_the_floor_dropped() -> None:
    """A heuristic's decision the floor left out is not injected: the expert waits, the teacher scores the menu."""
    if not GEO6.exists():
        pytest.skip("the validation scenario is not in this checkout")
    from sfenv.agents.imitation import _actions_to_score, expert_action

    from sfenv.env.proposers import DecisionRecorder

    env = GeoSchedEnv(GEO6, proposers="best", num_jobs=40, min_relative_mfu=1.0)
    env.reset(seed=3)
    dropped = 0
    for _ in range(60):
        menu = env.candidates
        decisions = [p.decision for p in env.proposers if isinstance(p, DecisionRecorder) and p.decision is not None]
        dropped += sum(d not in menu for d in decisions)
        for name in ("fastest+swf", "fifo+swf", "spinsearch+swf"):
            a = expert_action(env, name)
            assert a == env.wait_action or 0 <= a < len(menu)
        assert all(a == env.wait_action or a < len(menu) for a in _actions_to_score(env, "proposed", None))
        assert env.candidates == menu  # nothing was injected
        mask = env.action_masks()
        _, _, term, trunc, _ = env.step(int(np.flatnonzero(mask)[0]))
        if term or trunc:
            break
    assert dropped > 0, "the check needs a state where the floor drops a heuristic's decision"


# ---------------------------------------------------------------- play_env: the floor for play only


#: the floor of every GeoSchedEnv the fixture's training built, with its work_conserving flag
BUILT: list[tuple[float | None, bool]] = []


@pytest.fixture(scope="module")
def floored_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny recipe trained without the floor and played with it (``play_env``), work-conserving."""
    pytest.importorskip("sb3_contrib")
    from sfenv.agents.learned import train

    out = tmp_path_factory.mktemp("floor-play")
    init = GeoSchedEnv.__init__

    def recording(self: GeoSchedEnv, *args: object, **kwargs: object) -> None:
        init(self, *args, **kwargs)  # type: ignore[arg-type]
        BUILT.append((self.min_relative_mfu, self.work_conserving))

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(GeoSchedEnv, "__init__", recording)
        final = train("maskable-ppo", "spider-8", total_timesteps=128, seed=0, n_envs=2, out_dir=out,
                      env_kwargs={"num_jobs": 20, "obs_mode": "compact", "proposers": "best"}, eval_scenario=GEO6,
                      algo_kwargs={"n_steps": 64, "batch_size": 64, "n_epochs": 1}, eval_every=64,
                      eval_seeds=[10_000, 10_001], tensorboard=False, plot=False, play="work-conserving",
                      play_env={"min_relative_mfu": 0.7})
    return final.parent


def test_play_env_is_recorded_kept_out_of_training_and_played(floored_run: Path) -> None:
    """The config and the model record the floor; the training envs lack it; the kept model is played with it."""
    import json

    import yaml
    from sfenv.agents.learned import LearnedPolicy

    from sfenv.app.evaluate import run_policy_episode
    from sfenv.scenario import load_scenario

    cfg = yaml.safe_load((floored_run / "config.yml").read_text())
    assert cfg["play_env"] == {"min_relative_mfu": 0.7} and "min_relative_mfu" not in cfg["env_kwargs"]
    policy = LearnedPolicy(floored_run / "best_model.zip")
    assert policy.meta["play_env"] == {"min_relative_mfu": 0.7}
    assert policy.meta["env_kwargs"]["min_relative_mfu"] == 0.7 and policy.play == "work-conserving"
    best = [h for h in json.loads((floored_run / "eval.json").read_text()) if h["best"]][-1]
    sc = load_scenario(GEO6).with_overrides(workload={"num_jobs": 20})
    rows = [run_policy_episode(policy, sc, s) for s in (10_000, 10_001)]
    assert all(r["min_relative_mfu"] == 0.7 and r["work_conserving"] for r in rows)
    assert np.mean([r["mean_jct_s"] for r in rows]) / 3600 == pytest.approx(best["mean_jct_h"], rel=1e-12)
    from sfenv.agents.learned import run_summary

    assert "played work-conserving, min_relative_mfu 0.7)" in run_summary(floored_run)
    # the training envs had no floor, the evaluations that kept the model had it (with work-conserving play)
    assert (None, False) in BUILT and (0.7, True) in BUILT and set(BUILT) == {(None, False), (0.7, True)}


def test_a_tampered_play_env_is_refused_naming_it(floored_run: Path, tmp_path: Path) -> None:
    """A model file's play_env may hold only play settings with plain values: it is data, not arguments."""

    from sfenv.agents.learned import LearnedPolicy

    for bad, match in (({"obs_mode": "full"}, "play_env.obs_mode"), ({"min_relative_mfu": "x"}, "play_env.min_"),
                       ([0.7], "play_env: expected a mapping")):
        with pytest.raises(InvalidInput, match=match):
            LearnedPolicy(copy_with_meta(floored_run, tmp_path, play_env=bad))


def test_a_model_played_with_both_floors_records_them(floored_run: Path, tmp_path: Path) -> None:
    """``min_spread_speedup`` is a play setting too: a model recording it is played with it, and rows say so."""

    from sfenv.agents.learned import LearnedPolicy

    from sfenv.app.evaluate import run_policy_episode
    from sfenv.scenario import load_scenario

    spec_path = copy_with_meta(floored_run, tmp_path, play_env={"min_relative_mfu": 0.7, "min_spread_speedup": 1.0,
                                                                "spread_wait": "queue"})
    policy = LearnedPolicy(spec_path)
    assert policy.meta["env_kwargs"]["min_spread_speedup"] == 1.0
    row = run_policy_episode(policy, load_scenario(GEO6).with_overrides(workload={"num_jobs": 12}), 10_000)
    assert row["min_spread_speedup"] == 1.0 and row["min_relative_mfu"] == 0.7 and row["unfinished"] == 0
    assert row["spread_wait"] == "queue"


def test_a_model_played_with_an_exempt_decision_records_it(floored_run: Path, tmp_path: Path) -> None:
    """``floor_exempt`` is a play setting: the model's env gets it and its rows name it."""

    from sfenv.agents.learned import LearnedPolicy

    from sfenv.app.evaluate import run_policy_episode
    from sfenv.scenario import load_scenario

    spec_path = copy_with_meta(floored_run, tmp_path,
                               play_env={"min_relative_mfu": 0.7, "floor_exempt": ["spinsearch+swf"]})
    policy = LearnedPolicy(spec_path)
    assert policy.meta["env_kwargs"]["floor_exempt"] == ["spinsearch+swf"]
    row = run_policy_episode(policy, load_scenario(GEO6).with_overrides(workload={"num_jobs": 12}), 10_000)
    assert row["floor_exempt"] == "spinsearch+swf" and row["min_relative_mfu"] == 0.7 and row["unfinished"] == 0
    assert "floor_exempt_from" not in row  # both floors, the default
    copy_with_meta(floored_run, tmp_path, play_env={"min_relative_mfu": 0.7, "floor_exempt": ["spinsearch+swf"],
                                                    "floor_exempt_from": ["min_relative_mfu"]})
    policy = LearnedPolicy(spec_path)
    assert policy.meta["env_kwargs"]["floor_exempt_from"] == ["min_relative_mfu"]
    row = run_policy_episode(policy, load_scenario(GEO6).with_overrides(workload={"num_jobs": 12}), 10_000)
    assert row["floor_exempt_from"] == "min_relative_mfu"
    copy_with_meta(floored_run, tmp_path, play_env={"floor_exempt": ["spantrain+swf"]})  # not a recorded decision
    with pytest.raises(InvalidInput, match="floor_exempt"):
        run_policy_episode(LearnedPolicy(spec_path), load_scenario(GEO6).with_overrides(workload={"num_jobs": 12}),
                           10_000)


def test_a_config_with_a_bad_play_env_is_refused(tmp_path: Path) -> None:
    from sfenv.agents.learned import load_config

    for text, match in (("play_env: {work_conserving: true}\n", "play_env.work_conserving"),
                        ("play_env: 0.7\n", "play_env: expected a mapping")):
        path = tmp_path / "c.yml"
        path.write_text(text)
        with pytest.raises(InvalidInput, match=match):
            load_config(path)
    path.write_text("play_env: {min_relative_mfu: 0.7}\n")
    assert load_config(path)["play_env"] == {"min_relative_mfu": 0.7}


def test_learned_vs_heuristics_records_the_play_settings(floored_run: Path, tmp_path: Path, capsys) -> None:
    from sfenv.experiments.learned_vs_heuristics import main

    res = main(["--model", str(floored_run / "best_model.zip"), "--split", "validation", "--seeds", "1",
                "--num-jobs", "6", "--heuristics", "fifo", "--scenario", "spider-8", "--out", str(tmp_path)])
    assert res["play_env"] == {"min_relative_mfu": 0.7} and res["play"] == "work-conserving"
    out = capsys.readouterr().out
    assert "min_relative_mfu 0.7" in out
    # a model trained elsewhere: no training time is recorded for it (not the few microseconds of checks)
    assert res["train_wall_s"] is None and "a model trained elsewhere" in out and "training 0.0 min" not in out


def test_gym_make_takes_it_and_the_checker_passes() -> None:
    """As a Gymnasium user passes it: through ``gym.make`` on a registered id, and the env checker passes."""
    import gymnasium as gym
    from gymnasium.utils.env_checker import check_env

    import sfenv  # noqa: F401  (registers the ids)

    env = gym.make("sfenv/GeoSched-v6", num_jobs=6, min_relative_mfu=0.7)
    assert env.unwrapped.min_relative_mfu == 0.7
    check_env(env.unwrapped, skip_render_check=True)
