"""``work_conserving``: wait is masked while a candidate can start, in the env and for a saved policy."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from sfenv.agents.learned import LearnedPolicy, make_env_fn, train

import sfenv  # noqa: F401  (registers the ids)
from sfenv.app.evaluate import _episode_task, _instance, _payload, evaluate_agents, run_policy_episode
from sfenv.env import GeoSchedEnv
from sfenv.runs.results import SettingsMismatch
from sfenv.scenario import load_scenario

SMALL = {"n_steps": 64, "batch_size": 64, "n_epochs": 1}


def _masked_random(env: GeoSchedEnv, seed: int, steps: int) -> list[tuple[np.ndarray, dict]]:
    """Masked random steps; each step's mask (before acting) and info."""
    rng = np.random.default_rng(seed)
    _, info = env.reset(seed=seed)
    out = []
    for _ in range(steps):
        mask = env.action_masks()
        _, _, term, trunc, info = env.step(int(rng.choice(np.flatnonzero(mask))))
        out.append((mask, info))
        if term or trunc:
            env.reset()
    return out


def test_wait_is_masked_exactly_while_a_candidate_can_start() -> None:
    """The env asks for a decision when a job could start, so wait is masked there; at an episode's end it is not."""
    env = GeoSchedEnv("spider-8-contended", num_jobs=20, work_conserving=True)
    steps = _masked_random(env, seed=4, steps=300)
    masks = [info["action_mask"] for _, info in steps]  # after each step, terminal states included
    assert sum(not m[:-1].any() for m in masks) >= 2  # episodes ended
    for mask, info in steps:
        assert not info["invalid_action"]
        assert mask[-1] == (not mask[:-1].any())
    for mask in masks:
        assert mask[-1] == (not mask[:-1].any())
    default = GeoSchedEnv("spider-8-contended", num_jobs=20)
    assert all(m[-1] for m, _ in _masked_random(default, seed=4, steps=100))  # off by default: wait always valid


def test_waiting_while_a_candidate_can_start_is_an_invalid_no_op() -> None:
    env = GeoSchedEnv("spider-8", num_jobs=6, work_conserving=True)
    env.reset(seed=1)
    assert env.action_masks()[:-1].any()
    now = env.sim.time
    _, reward, _, _, info = env.step(env.wait_action)
    assert info["invalid_action"] and not info["forced_wait"]
    assert env.sim.time == now and reward == pytest.approx(-env.invalid_action_penalty)
    limited = GeoSchedEnv("spider-8", num_jobs=6, work_conserving=True, invalid_action_limit=1)
    limited.reset(seed=1)
    _, _, _, _, info = limited.step(limited.wait_action)
    assert info["invalid_action"] and info["forced_wait"]  # the limit makes it act as wait, as for other masked actions


def test_bad_value_names_the_argument_and_the_checker_passes() -> None:
    with pytest.raises(ValueError, match="work_conserving='yes'"):
        GeoSchedEnv("spider-8", work_conserving="yes")
    check_env(gym.make("sfenv/GeoSched-v6", num_jobs=6, work_conserving=True).unwrapped, skip_render_check=True)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("wc")
    final = train("maskable-ppo", "spider-8", total_timesteps=128, seed=0, n_envs=2, out_dir=out,
                  env_kwargs={"num_jobs": 6, "obs_mode": "compact"}, algo_kwargs=SMALL, eval_every=128,
                  eval_seeds=[10_000], baselines=["fifo"])
    return str(final.with_name("best_model.zip"))


def _played_by_hand(policy: LearnedPolicy, seed: int, work_conserving: bool) -> tuple[float, int]:
    """The policy's episode stepped here: (mean JCT, waits while a start was possible)."""
    sc = load_scenario("spider-8")
    kwargs = {k: v for k, v in policy.meta["env_kwargs"].items() if k != "num_jobs"}
    env = make_env_fn(sc, policy.spec.flatten, {**kwargs, "work_conserving": work_conserving})()
    obs, _ = env.reset(seed=seed)
    base, done, bad_waits = env.unwrapped, False, 0
    while not done:
        mask = base.action_masks()
        action, _ = policy.predict(obs, deterministic=True, action_masks=mask)
        bad_waits += int(action) == base.wait_action and bool(mask[:-1].any())
        obs, _, term, trunc, _ = env.step(int(action))
        done = term or trunc
    return base.sim.report().to_dict()["mean_jct_s"], bad_waits


def test_a_saved_model_is_played_work_conserving(model: str) -> None:
    plain, wc = LearnedPolicy(model), LearnedPolicy(model, work_conserving=True)
    assert "work_conserving" not in plain.meta["env_kwargs"] and wc.meta["env_kwargs"]["work_conserving"] is True
    row = run_policy_episode(wc, load_scenario("spider-8"), 10_001)
    as_trained = run_policy_episode(plain, load_scenario("spider-8"), 10_001)
    assert row["work_conserving"] is True and "work_conserving" not in as_trained
    jct, bad_waits = _played_by_hand(plain, 10_001, work_conserving=True)
    assert row["mean_jct_s"] == jct and bad_waits == 0
    jct_plain, waits_plain = _played_by_hand(plain, 10_001, work_conserving=False)
    assert waits_plain > 0 and as_trained["mean_jct_s"] == jct_plain != jct  # as trained, this model waits
    with pytest.raises(ValueError, match="work_conserving=1"):
        LearnedPolicy(model, work_conserving=1)  # type: ignore[arg-type]  (a wrong type on purpose)


def test_play_settings_reach_the_evaluator_and_keep_results_apart(model: str, tmp_path) -> None:
    spec = f"model:{model}"
    with pytest.raises(ValueError, match="unknown play setting"):
        _instance(spec, {spec: {"obs_mode": "full"}})
    policy = _instance(spec, {spec: {"work_conserving": True}})
    payload = _payload(policy)  # what a Ray worker receives: the spec and its play settings
    assert payload[1] == {"work_conserving": True}
    sc = load_scenario("spider-8").with_overrides(workload={"num_jobs": 6})
    assert _episode_task(sc, payload, 10_002)["work_conserving"] is True
    out = tmp_path / "r.json"
    rows = evaluate_agents([spec], "spider-8", [10_002], num_jobs=6, out=out, progress=False,
                           agent_kwargs={spec: {"work_conserving": True}})
    assert rows[0]["work_conserving"] is True
    with pytest.raises(SettingsMismatch):  # the same model played as trained is another agent: not mixed in
        evaluate_agents([spec], "spider-8", [10_002], num_jobs=6, out=out, progress=False)



def test_sfenv_evaluate_work_conserving(model: str, tmp_path, capsys) -> None:
    """``sfenv evaluate --work-conserving``: the model's rows say so and the file's settings keep it apart."""
    from sfenv.app.cli import main

    out = tmp_path / "r.json"
    args = ["evaluate", "--agents", f"fifo,model:{model}", "--num-jobs", "6", "--seeds", "1", "--split", "validation",
            "--out", str(out), "--quiet"]
    assert main([*args, "--work-conserving"]) == 0
    rows = json.loads(out.read_text())["episodes"]
    assert {r["agent"].split(":")[0]: r.get("work_conserving") for r in rows} == {"fifo": None, "model": True}
    capsys.readouterr()
    assert main(args) == 0  # played as trained: another setting, written beside the file
    assert "holds results of other settings" in capsys.readouterr().err and (tmp_path / "r-2.json").is_file()
    assert main(["evaluate", "--agents", "fifo", "--work-conserving", "--quiet"]) == 2
    assert capsys.readouterr().err.strip().startswith("sfenv: --work-conserving plays saved models")


@pytest.fixture(scope="module")
def wc_run(tmp_path_factory: pytest.TempPathFactory):
    """A recipe whose play mode is work-conserving (``play:``), trained as the ``model`` fixture is."""
    out = tmp_path_factory.mktemp("wc-play")
    final = train("maskable-ppo", "spider-8", total_timesteps=128, seed=0, n_envs=2, out_dir=out,
                  env_kwargs={"num_jobs": 6, "obs_mode": "compact"}, algo_kwargs=SMALL, eval_every=64,
                  eval_seeds=[10_000, 10_001], tensorboard=False, plot=False, play="work-conserving")
    return final.parent


def test_the_play_mode_selects_the_model_and_is_what_it_is_evaluated_with(wc_run) -> None:
    """The best model is kept by work-conserving play, and sfenv evaluate plays it so without being told."""
    import yaml
    from sfenv.agents.learned import run_summary

    assert yaml.safe_load((wc_run / "config.yml").read_text())["play"] == "work-conserving"
    policy = LearnedPolicy(wc_run / "best_model.zip")  # no play argument: the recipe's mode, from the metadata
    assert policy.meta["play"] == "work-conserving" and policy.play == "work-conserving"
    assert policy.meta["env_kwargs"]["work_conserving"] is True
    best = [h for h in json.loads((wc_run / "eval.json").read_text()) if h["best"]][-1]
    assert policy.meta["num_timesteps"] == best["timesteps"]
    sc = load_scenario("spider-8").with_overrides(workload={"num_jobs": 6})
    played = [run_policy_episode(policy, sc, s) for s in (10_000, 10_001)]
    assert all(r["work_conserving"] for r in played)
    assert np.mean([r["mean_jct_s"] for r in played]) / 3600 == pytest.approx(best["mean_jct_h"], rel=1e-12)
    as_trained = LearnedPolicy(wc_run / "best_model.zip", work_conserving=False)
    assert as_trained.play == "as-trained"
    other = [run_policy_episode(as_trained, sc, s)["mean_jct_s"] for s in (10_000, 10_001)]
    assert np.mean(other) / 3600 != pytest.approx(best["mean_jct_h"], rel=1e-6)  # the mode matters for this model
    assert "played work-conserving" in run_summary(wc_run)


def test_learned_vs_heuristics_plays_the_recipe_mode_unless_told(wc_run, tmp_path) -> None:
    from sfenv.experiments.learned_vs_heuristics import main

    args = ["--model", str(wc_run / "best_model.zip"), "--split", "validation", "--seeds", "2", "--num-jobs", "6",
            "--heuristics", "fifo", "--scenario", "spider-8"]
    recorded = main([*args, "--out", str(tmp_path / "a")])
    best = [h for h in json.loads((wc_run / "eval.json").read_text()) if h["best"]][-1]
    assert recorded["play"] == "work-conserving" and recorded["work_conserving"] is True
    model = next(a for a in recorded["summary"] if a.startswith("model:"))
    assert recorded["summary"][model]["mean_jct_h"] == pytest.approx(best["mean_jct_h"], rel=1e-12)  # as selected
    told = main([*args, "--play", "as-trained", "--out", str(tmp_path / "b")])
    assert told["play"] == "as-trained" and told["summary"][model]["mean_jct_h"] != recorded["summary"][model][
        "mean_jct_h"]


def test_a_bad_play_mode_is_refused_naming_it(tmp_path) -> None:
    with pytest.raises(ValueError, match="play = 'eager'"):
        train("maskable-ppo", "spider-8", total_timesteps=64, out_dir=tmp_path, play="eager")


def test_sfenv_evaluate_plays_the_recorded_mode_and_play_overrides_it(wc_run, tmp_path, capsys) -> None:
    from sfenv.app.cli import main

    spec = f"model:{wc_run / 'best_model.zip'}"
    args = ["evaluate", "--agents", spec, "--num-jobs", "6", "--seeds", "1", "--split", "validation", "--quiet"]
    assert main([*args, "--out", str(tmp_path / "a.json")]) == 0
    assert json.loads((tmp_path / "a.json").read_text())["episodes"][0]["work_conserving"] is True
    assert main([*args, "--play", "as-trained", "--out", str(tmp_path / "b.json")]) == 0
    assert "work_conserving" not in json.loads((tmp_path / "b.json").read_text())["episodes"][0]
    capsys.readouterr()
    assert main([*args, "--play", "as-trained", "--work-conserving"]) == 2
    assert capsys.readouterr().err.strip() == "sfenv: --work-conserving and --play as-trained: give one of them"
