"""The sfenv train recipe: evaluation callback and TensorBoard, best model, resume, VecNormalize at evaluation,
run folders, hyperparameters from the CLI and YAML, invalid-action fallback for unmasked learners."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

pytest.importorskip("stable_baselines3")
pytest.importorskip("sb3_contrib")

import torch
from sfenv.agents.callbacks import play_episode
from sfenv.agents.learned import LearnedPolicy, load_config, make_env_fn, parse_hp, train

from sfenv.errors import InvalidInput, MissingFile, UntrustedCode
from sfenv.scenario import load_scenario

torch.set_num_threads(1)

SMALL = {"n_steps": 128, "batch_size": 128, "n_epochs": 1}
SEEDS = [10_000, 10_001]


def _scalars(run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out: dict[str, list[tuple[int, float]]] = {}
    for folder in sorted((run / "tb").iterdir()):
        ea = EventAccumulator(str(folder))
        ea.Reload()
        for tag in ea.Tags()["scalars"]:
            out.setdefault(tag, []).extend((e.step, e.value) for e in ea.Scalars(tag))
    return out


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs")
    path = train("maskable-ppo", "spider-8", total_timesteps=512, seed=0, n_envs=2, out_dir=out,
                 env_kwargs={"num_jobs": 6}, algo_kwargs=SMALL, eval_every=256, eval_seeds=SEEDS,
                 baselines=["fifo"], checkpoint_every=256)
    return path


def test_smoke_training_logs_eval_scalars_and_keeps_the_best_model(smoke_run):
    run = smoke_run.parent
    assert smoke_run == run / "model.zip" and run.name == "maskable-ppo-spider-8-s0"
    for f in ("model.json", "model_vecnormalize.pkl", "best_model.zip", "best_model.json", "config.yml",
              "eval.json", "levels.json", "learning_curve.png"):
        assert (run / f).is_file(), f
    history = json.loads((run / "eval.json").read_text())
    assert [h["timesteps"] for h in history] == [256, 512]
    tb = _scalars(run)
    for tag in ("eval/mean_jct_h", "eval/cost_usd", "eval/unfinished", "eval/mean_return"):
        assert [s for s, _ in tb[tag]] == [256, 512], tag
    assert [v for _, v in tb["eval/mean_jct_h"]] == pytest.approx([h["mean_jct_h"] for h in history], rel=1e-6)
    assert [v for _, v in tb["eval/cost_usd"]] == pytest.approx([h["cost_usd"] for h in history], rel=1e-6)
    # best_model is the evaluation point with the highest return: replaying it on the eval seeds gives its figures
    best = max(history, key=lambda h: h["mean_return"])
    policy = LearnedPolicy(run / "best_model.zip")
    assert policy.meta["num_timesteps"] == best["timesteps"]
    env = make_env_fn(load_scenario("spider-8"), False, {k: v for k, v in policy.meta["env_kwargs"].items()})()
    reps = [play_episode(policy.predict, env, s, masked=True) for s in SEEDS]
    assert np.mean([r["mean_jct_s"] for r, _ in reps]) / 3600 == pytest.approx(best["mean_jct_h"], rel=1e-9)
    assert np.mean([ret for _, ret in reps]) == pytest.approx(best["mean_return"], rel=1e-9)
    # the heuristic levels drawn on the curve are FIFO's on the same seeds
    from sfenv.agents.registry import make_agent

    from sfenv.app.evaluate import run_episode

    sc = load_scenario("spider-8").with_overrides(workload={"num_jobs": 6})
    fifo = np.mean([run_episode(make_agent("fifo"), sc, s)["mean_jct_s"] for s in SEEDS]) / 3600
    assert json.loads((run / "levels.json").read_text())["fifo"]["mean_jct_h"] == pytest.approx(fifo)
    assert (run / "learning_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in (run / "checkpoints").glob("*.zip")) == ["model_256_steps.zip",
                                                                          "model_512_steps.zip"]


def test_resume_continues_the_step_count(smoke_run, tmp_path):
    import shutil

    run = tmp_path / "copy"
    shutil.copytree(smoke_run.parent, run)
    with pytest.raises(UntrustedCode, match="--trust-model-code"):  # a resume loads pickles: only when asked
        train(total_timesteps=1024, resume=run, plot=False)
    path = train(total_timesteps=1024, resume=run, plot=False, trust_code=True)
    assert path == run / "model.zip"
    assert json.loads((run / "model.json").read_text())["num_timesteps"] == 1024
    assert LearnedPolicy(path).model.num_timesteps == 1024
    steps = [h["timesteps"] for h in json.loads((run / "eval.json").read_text())]
    assert steps == [256, 512, 768, 1024]
    tb = _scalars(run)
    assert sorted({s for s, _ in tb["eval/mean_jct_h"]}) == [256, 512, 768, 1024]
    assert max(s for s, _ in tb["train/learning_rate"]) > 512  # training went on past the first part's count
    # a run without model.zip resumes from its newest checkpoint
    for f in run.glob("model.*"):
        f.unlink()
    train(total_timesteps=1280, resume=run, plot=False, trust_code=True)
    assert json.loads((run / "model.json").read_text())["num_timesteps"] == 1280
    with pytest.raises(MissingFile, match="config.yml"):
        train(total_timesteps=10, resume=tmp_path, trust_code=True)


def test_saved_vecnormalize_is_applied_at_evaluation(smoke_run):
    from sfenv.app.evaluate import run_policy_episode

    policy = LearnedPolicy(smoke_run)
    vn = policy.vec_normalize
    assert policy.meta["vecnormalize"] == "model_vecnormalize.pkl" and vn is not None and vn.norm_obs
    assert vn.obs_rms["queue"].count > 100  # statistics from training, not a fresh identity
    seen = []
    real = policy.model.predict

    def spy(obs, *a, **kw):
        seen.append({k: np.array(v) for k, v in obs.items()})
        return real(obs, *a, **kw)

    policy.model.predict = spy
    sc = load_scenario("spider-8").with_overrides(workload={"num_jobs": 6})
    run_policy_episode(policy, sc, 3)  # the evaluator's model:PATH path
    env = make_env_fn(sc, False, {k: v for k, v in policy.meta["env_kwargs"].items() if k != "num_jobs"})()
    raw, _ = env.reset(seed=3)
    want = vn.normalize_obs(raw)
    for key in raw:
        assert np.allclose(seen[0][key], want[key])
    assert not np.allclose(seen[0]["queue"], raw["queue"])  # normalisation changed what the policy sees


def test_a_run_folder_per_run_never_overwritten(tmp_path):
    kw = dict(total_timesteps=64, n_envs=1, out_dir=tmp_path, env_kwargs={"num_jobs": 3}, tensorboard=False,
              algo_kwargs={"n_steps": 64, "batch_size": 64, "n_epochs": 1}, eval_every=0, eval_seeds=[5], plot=False)
    a = train("maskable-ppo", "spider-8", **kw)
    stamp = a.stat().st_mtime_ns
    b = train("maskable-ppo", "spider-8", **kw)
    assert a.parent != b.parent and b.parent.name == "maskable-ppo-spider-8-s0-2"
    assert a.stat().st_mtime_ns == stamp


def test_hyperparameters_from_cli_and_yaml(tmp_path, monkeypatch):
    assert parse_hp(["gamma=0.99", "n_steps=64", "policy_kwargs.net_arch=[32, 32]", "normalize_advantage=false"]) == {
        "gamma": 0.99, "n_steps": 64, "policy_kwargs": {"net_arch": [32, 32]}, "normalize_advantage": False}
    for bad in (["gamma"], ["=3"], ["x=[1,"]):
        with pytest.raises(InvalidInput, match="--hp"):
            parse_hp(bad)
    assert load_config("contended")["algo"] == "maskable-ppo"
    cfg = tmp_path / "c.yml"
    cfg.write_text(yaml.safe_dump({"algo": "maskable-ppo", "steps": 64, "n_envs": 1, "normalize": "reward",
                                   "env_kwargs": {"num_jobs": 3, "obs_mode": "compact"}, "eval_every": 0,
                                   "eval_seeds": [7], "hp": {"n_steps": 64, "batch_size": 32, "gamma": 0.9}}))
    bad = tmp_path / "bad.yml"
    bad.write_text("stepz: 3\n")
    with pytest.raises(InvalidInput, match="unknown keys"):
        load_config(bad)
    from sfenv.app.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["train", "--config", str(cfg), "--hp", "gamma=0.95", "--hp", "n_epochs=1", "--seed", "3",
                 "--no-tensorboard", "--no-plot", "--quiet"]) == 0
    run = tmp_path / "runs" / "maskable-ppo-spider-8-s3"
    saved = yaml.safe_load((run / "config.yml").read_text())
    assert saved["hp"]["gamma"] == 0.95 and saved["hp"]["n_steps"] == 64 and saved["hp"]["n_epochs"] == 1
    assert saved["hp"]["ent_coef"] == 0.01  # the tuned default under what was given
    assert saved["normalize"] == "reward" and saved["env_kwargs"]["obs_mode"] == "compact"
    policy = LearnedPolicy(run / "model.zip")  # its weights-only form, which records the hyperparameters
    assert policy.meta["algo_kwargs"]["gamma"] == 0.95 and policy.meta["algo_kwargs"]["n_steps"] == 64
    from sb3_contrib import MaskablePPO

    trained = MaskablePPO.load(run / "model.zip", device="cpu")  # the SB3 zip (our own file) trained with them
    assert trained.gamma == 0.95 and trained.n_steps == 64
    assert policy.vec_normalize is not None and policy.normalize_obs is None  # rewards only
    assert main(["train", "--config", "nope-such", "--quiet"]) == 2


def test_invalid_action_limit_keeps_an_unmasked_policy_moving():
    from sfenv.env import GeoSchedEnv

    def run(limit, cap):
        env = GeoSchedEnv("spider-8", num_jobs=4, invalid_action_limit=limit)
        env.reset(seed=0)
        t0 = env.sim.time
        bad = env.N - 1  # the last candidate slot: empty, hence masked, in a 4-job episode
        forced, term = [], False
        while not term and len(forced) < cap:
            assert not env.action_masks()[bad]
            _, r, terminated, truncated, info = env.step(bad)
            term = terminated or truncated  # no job starts: the horizon ends the episode, truncated
            assert info["invalid_action"] and r <= -env.invalid_action_penalty
            forced.append(info["forced_wait"])
        return env, t0, term, forced

    env, t0, term, forced = run(None, 200)
    assert not term and not any(forced) and env.sim.time == t0  # without the limit, time never moves
    env, t0, term, forced = run(3, 20_000)
    assert term  # every third masked action in a row waited, so the episode reached its end (the horizon)
    assert forced[:6] == [False, False, True, True, True, True]  # the 3rd, and each one after it, waits
    assert env.sim.time > t0
    with pytest.raises(ValueError, match="invalid_action_limit=0"):
        GeoSchedEnv("spider-8", invalid_action_limit=0)


def test_paired_bootstrap_ratio_of_the_experiment():
    from sfenv.experiments.learned_vs_heuristics import paired_bootstrap_ratio

    b = np.array([2.0, 3.0, 4.0, 5.0, 6.0])
    assert paired_bootstrap_ratio(b, b) == (1.0, 1.0, 1.0)  # paired: identical seeds give no spread
    r, lo, hi = paired_bootstrap_ratio(0.9 * b, b)
    assert r == pytest.approx(0.9) and lo == pytest.approx(0.9) and hi == pytest.approx(0.9)
    a = b * np.array([0.7, 1.1, 0.8, 1.0, 0.9])
    r, lo, hi = paired_bootstrap_ratio(a, b)
    assert r == pytest.approx(a.sum() / b.sum()) and lo < r < hi and hi < 1.1 and lo > 0.7


def test_every_bundled_config_is_valid():
    from sfenv.agents.imitation import PRETRAIN_DEFAULTS, parse_lookahead
    from sfenv.agents.learned import bundled_configs

    from sfenv.env import GeoSchedEnv

    names = bundled_configs()
    assert {"contended-distill", "contended-rollout"} <= set(names)
    for name in names:
        cfg = load_config(name)
        GeoSchedEnv("spider-8", **(cfg.get("env_kwargs") or {})).close()  # the env takes its settings
        assert set(cfg.get("pretrain") or {}) <= set(PRETRAIN_DEFAULTS), name
        expert = str((cfg.get("pretrain") or {}).get("expert", ""))
        if expert.startswith("lookahead:"):
            parse_lookahead(expert)  # raises on a malformed spec


def test_episode_objective_is_minus_the_env_return_under_a_cost_weight():
    """The experiment's objective of an episode equals minus the env's undiscounted return on it."""
    import gymnasium as gym
    from sfenv.agents.imitation import expert_action
    from sfenv.agents.registry import make_agent
    from sfenv.experiments.learned_vs_heuristics import episode_objective

    from sfenv.app.evaluate import run_episode
    from sfenv.scenario import load_scenario

    env = gym.make("sfenv/GeoSched-v6", scenario="geo-8-contended-cost", num_jobs=10, proposers="best")
    env.reset(seed=2)
    ret, done = 0.0, False
    while not done:
        _, r, term, trunc, _ = env.step(expert_action(env, "fifo+swf"))
        ret += r
        done = term or trunc
    sc = load_scenario("geo-8-contended-cost").with_overrides(workload={"num_jobs": 10})
    row = run_episode(make_agent("fifo+swf"), sc, 2)
    objective = episode_objective(row, "geo-8-contended-cost", num_jobs=10)
    assert sc.cfg.reward.cost_weight > 0 and row["cost_usd"] > 0
    assert objective == pytest.approx(-ret, rel=1e-6)


def test_a_learned_policy_entry_is_recorded_and_validates(smoke_run, tmp_path):
    """model:PATH episodes record the plans their actions named; the replay reproduces every metric."""
    import copy

    from sfenv.app.evaluate import evaluate_agents
    from sfenv.runs.replay import Rejected, validate_rows

    policy = LearnedPolicy(smoke_run.parent / "best_model.zip")
    assert policy.meta["env_kwargs"]["privileged_obs"] is False  # recorded: trained on env v1's observation
    rows = evaluate_agents([f"model:{smoke_run.parent / 'best_model.zip'}"], "spider-8", [1_000_000, 1_000_001],
                           num_jobs=6, progress=False, record_actions=True)
    rows = json.loads(json.dumps(rows))  # as read back from a file
    assert all(r["actions"]["decisions"] and "privileged_obs" not in r for r in rows)
    assert validate_rows(rows) == 2
    bad = copy.deepcopy(rows)
    bad[1]["cost_usd"] += 0.01
    with pytest.raises(Rejected, match="row 1 .*cost_usd"):
        validate_rows(bad)


def test_generated_test_platforms_are_pooled_with_one_best_heuristic():
    """``--unseen-generated``: every agent on the protocol's test platforms, pairs (platform, seed) pooled."""
    from sfenv.agents.learned import generated_platforms
    from sfenv.experiments.learned_vs_heuristics import compare_generated

    seeds = [1_000_000, 1_000_001]
    res = compare_generated("fifo+swf", ["fifo", "fastest+swf"], 2, seeds, num_jobs=4)
    assert res["platforms"] == [sc.name for sc in generated_platforms("test", 2, num_jobs=4)]
    assert res["platforms"] != [sc.name for sc in generated_platforms("train", 2, num_jobs=4)]
    per = res["per_platform"]
    assert list(per) == res["platforms"]
    mean = {a: np.mean([per[p]["summary"][a]["mean_jct_h"] for p in per]) for a in ("fifo+swf", "fifo", "fastest+swf")}
    best = min(("fifo", "fastest+swf"), key=mean.get)
    assert res["best_heuristic"] == best  # one heuristic for the whole family
    assert res["ratio_to_best"][0] == pytest.approx(mean["fifo+swf"] / mean[best], rel=1e-9)
    assert res["summary"]["fifo"]["mean_jct_h"] == pytest.approx(mean["fifo"], rel=1e-9)


def test_generated_platforms_follow_the_split_asked_for():
    """Model selection plays the protocol's validation platforms, never the test ones."""
    from sfenv.agents.learned import generated_platforms
    from sfenv.experiments.learned_vs_heuristics import compare_generated

    res = compare_generated("fifo+swf", ["fifo"], 1, [10_000], num_jobs=3, split="validation")
    assert res["platforms"] == [sc.name for sc in generated_platforms("validation", 1, num_jobs=3)]
    assert res["platforms"] != [sc.name for sc in generated_platforms("test", 1, num_jobs=3)]


def test_cloud_platforms_are_played_when_asked_for():
    """``--unseen-cloud``: the cloud-like family's platforms of the split (sfenv.runs.protocol.CLOUD_FAMILY)."""
    from sfenv.agents.learned import generated_platforms
    from sfenv.experiments.learned_vs_heuristics import compare_generated

    res = compare_generated("fifo+swf", ["fifo"], 1, [10_000], num_jobs=3, split="validation", family="cloud")
    assert res["platforms"] == [sc.name for sc in generated_platforms("validation", 1, num_jobs=3, family="cloud")]
    assert res["platforms"][0].startswith("gen0-cloud")
