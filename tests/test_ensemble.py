"""Ensembles: several weights-only policies played as one (``<stem>.ensemble.json``, mean of their probabilities)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from model_copies import copy_with_meta

from sfenv.errors import InvalidInput, MissingFile

DEFER = {"to": ["fastest+swf", "spantrain+swf"], "margin": {"fastest+swf": 0.5, "spantrain+swf": 1.0}}
ENV = {"num_jobs": 12, "obs_mode": "compact", "proposers": "best+spantrain"}


@pytest.fixture(scope="module")
def members(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding two tiny recipes trained alike with seeds 0 and 1 (``m0/``, ``m1/``)."""
    pytest.importorskip("sb3_contrib")
    from sfenv.agents.learned import train

    out = tmp_path_factory.mktemp("ensemble")
    for seed in (0, 1):
        final = train("maskable-ppo", "spider-8", total_timesteps=128, seed=seed, n_envs=2, out_dir=out / "runs",
                      env_kwargs=ENV, algo_kwargs={"n_steps": 64, "batch_size": 64, "n_epochs": 1}, eval_every=64,
                      eval_seeds=[10_000], tensorboard=False, plot=False, play="work-conserving", play_defer=DEFER)
        (out / f"m{seed}").mkdir()
        for f in final.parent.glob("best_model.policy.*"):
            shutil.copy(f, out / f"m{seed}" / f.name)
    return out


def _ensemble(folder: Path, names: list[str], stem: str = "e") -> Path:
    from sfenv.agents import model_files

    return model_files.write_ensemble_file(folder / f"{stem}.ensemble.json",
                                           [folder / name for name in names], overwrite=True)


def _observations(policy: Any, count: int = 40) -> list[tuple[Any, np.ndarray]]:
    """Observations and masks of one spider-8 episode (12 jobs) played by ``policy.predict``."""
    from sfenv.agents.learned import make_env_fn

    from sfenv.scenario import load_scenario

    sc = load_scenario("spider-8").with_overrides(workload={"num_jobs": 12})
    env = make_env_fn(sc, policy.spec.flatten, {k: v for k, v in policy.meta["env_kwargs"].items()
                                                 if k != "num_jobs"})()
    obs, _ = env.reset(seed=10_003)
    seen = []
    done = False
    while not done and len(seen) < count:
        mask = env.unwrapped.action_masks()
        seen.append((obs, mask))
        action, _ = policy.predict(obs, deterministic=True, action_masks=mask)
        obs, _, term, trunc, _ = env.step(int(np.asarray(action).item()))
        done = term or trunc
    return seen


def test_the_ensemble_plays_the_log_of_its_members_mean_probability(members: Path) -> None:
    """Each action's log-probability is log(mean of the members' probabilities), each on its own statistics."""
    from sfenv.agents.learned import LearnedPolicy

    ens = LearnedPolicy(_ensemble(members, ["m0/best_model.policy.json", "m1/best_model.policy.json"]))
    one, two = (LearnedPolicy(members / f"m{i}" / "best_model.policy.json") for i in (0, 1))
    assert ens.play == "work-conserving" and ens.play_defer == one.play_defer
    assert ens.meta["env_kwargs"] == one.meta["env_kwargs"]
    differ = 0
    for obs, mask in _observations(ens):
        a, b = one.log_probs(obs, mask), two.log_probs(obs, mask)
        offered = np.asarray(mask, dtype=bool)
        by_hand = np.full(a.shape, -np.inf)
        by_hand[offered] = np.log((np.exp(a[offered]) + np.exp(b[offered])) / 2)
        got = ens.log_probs(obs, mask)
        np.testing.assert_allclose(got[offered], by_hand[offered], rtol=1e-9, atol=1e-12)
        assert np.all(got[~offered] < -1e6)
        action, _ = ens.predict(obs, deterministic=True, action_masks=mask)
        assert int(action) == int(np.argmax(by_hand))
        differ += not np.allclose(a[offered], b[offered])
    assert differ > 0  # the two members are different policies


def test_an_ensemble_of_copies_plays_the_member_episode_for_episode(members: Path) -> None:
    """Two copies of one model give its probabilities, so the evaluator's rows are the member's, deferrals included."""
    from sfenv.agents.learned import LearnedPolicy

    from sfenv.app.evaluate import run_policy_episode
    from sfenv.scenario import load_scenario

    shutil.copytree(members / "m0", members / "m0-copy", dirs_exist_ok=True)
    ens = LearnedPolicy(_ensemble(members, ["m0/best_model.policy.json", "m0-copy/best_model.policy.json"], "copies"))
    one = LearnedPolicy(members / "m0" / "best_model.policy.json")
    sc = load_scenario("spider-8").with_overrides(workload={"num_jobs": 12})
    for seed in (10_000, 10_001):
        got, want = run_policy_episode(ens, sc, seed), run_policy_episode(one, sc, seed)
        for key in ("mean_jct_s", "total_cost_usd", "decisions", "deferred", "defer_to", "defer_margin"):
            assert got[key] == want[key], key


def test_the_evaluator_plays_an_ensemble_as_a_model_and_repeats_it(members: Path) -> None:
    """``model:PATH.ensemble.json`` is an agent like any model: its rows name it and repeat exactly."""
    from sfenv.app.evaluate import evaluate_agents

    spec = f"model:{_ensemble(members, ['m0/best_model.policy.json', 'm1/best_model.policy.json'], 'ev')}"
    runs = [evaluate_agents([spec], "spider-8", seeds=[10_000, 10_001], num_jobs=12, progress=False)
            for _ in range(2)]
    rows = [[{k: v for k, v in r.items() if not k.startswith("decision_time")} for r in run] for run in runs]
    assert rows[0] == rows[1]
    assert {r["agent"] for r in rows[0]} == {spec} and all(r["work_conserving"] for r in rows[0])
    assert all(r["defer_to"] == "fastest+swf,spantrain+swf" for r in rows[0])


@pytest.mark.parametrize(("edit", "match"), [
    (lambda d: d.update(members=["m0/best_model.policy.json"]), "members: expected a list of 2"),
    (lambda d: d.update(members=["m0/best_model.policy.json"] * 2), "listed twice"),
    (lambda d: d.update(members=["m0/best_model.policy.json", "../outside/x.policy.json"]), "leads out of"),
    (lambda d: d.update(members=["m0/best_model.policy.json", "/etc/x.policy.json"]), "absolute path"),
    (lambda d: d.update(members=["m0/best_model.policy.json", "m1/best_model.policy.npz"]), "not a weights-only spec"),
    (lambda d: d.update(members="m0/best_model.policy.json"), "members: expected a list"),
    (lambda d: d.update(combine="mean-logit"), "combine: expected"),
    (lambda d: d.update(format="sfenv-policy"), "format: expected"),
    (lambda d: d.update(extra=1), "exactly the fields"),
])
def test_a_bad_ensemble_file_is_refused_naming_the_field(members: Path, edit: Any, match: str) -> None:
    from sfenv.agents.learned import LearnedPolicy

    path = _ensemble(members, ["m0/best_model.policy.json", "m1/best_model.policy.json"], "bad")
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))
    with pytest.raises(InvalidInput, match=match):
        LearnedPolicy(path)


def test_members_that_disagree_on_how_they_are_played_are_refused(members: Path) -> None:
    from sfenv.agents.learned import LearnedPolicy

    copy_with_meta(members / "m1", members / "m1-other", play_defer={"to": "fastest+swf", "margin": 2.0})
    path = _ensemble(members, ["m0/best_model.policy.json", "m1-other/best_model.policy.json"], "disagree")
    with pytest.raises(InvalidInput, match="members disagree on play_defer"):
        LearnedPolicy(path)
    missing = _ensemble(members, ["m0/best_model.policy.json", "m1/best_model.policy.json"], "missing")
    missing.write_text(missing.read_text().replace("m1/", "gone/"))
    with pytest.raises(MissingFile):
        LearnedPolicy(missing)


def test_writing_an_ensemble_refuses_outside_members_and_overwriting(members: Path, tmp_path: Path) -> None:
    from sfenv.agents import model_files

    inside = [members / "m0" / "best_model.policy.json", members / "m1" / "best_model.policy.json"]
    with pytest.raises(InvalidInput, match="not inside the ensemble's folder"):
        model_files.write_ensemble_file(tmp_path / "x.ensemble.json", inside)
    with pytest.raises(InvalidInput, match="ends with .ensemble.json"):
        model_files.write_ensemble_file(members / "x.json", inside)
    path = model_files.write_ensemble_file(members / "once.ensemble.json", inside)
    with pytest.raises(InvalidInput, match="not overwritten"):
        model_files.write_ensemble_file(path, inside)
    assert model_files.read_ensemble_file(path) == [p.resolve() for p in inside]


def test_the_cli_refuses_a_bad_ensemble_in_one_line(members: Path, tmp_path: Path) -> None:
    import subprocess
    import sys

    path = _ensemble(members, ["m0/best_model.policy.json", "m1/best_model.policy.json"], "cli")
    path.write_text(path.read_text().replace("mean-probability", "vote"))
    done = subprocess.run([sys.executable, "-m", "sfenv", "evaluate", "--agents", f"model:{path}",
                           "--scenario", "spider-8", "--seeds", "1", "--num-jobs", "12", "--out",
                           str(tmp_path / "r.json")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and done.stderr.startswith("sfenv: ") and "combine" in done.stderr


def test_a_results_file_names_an_ensemble_by_its_file_and_every_member(members: Path) -> None:
    """Another member's weights make another agent: a results file never mixes the two ensembles' episodes."""
    from sfenv.app.evaluate import agent_settings

    path = _ensemble(members, ["m0/best_model.policy.json", "m1/best_model.policy.json"], "settings")
    spec = f"model:{path}"
    before = agent_settings(spec)["model_sha"]
    assert before and agent_settings(spec)["model_sha"] == before
    copy_with_meta(members / "m1", members / "m1-retouched", note="another member")
    path.write_text(path.read_text().replace('"m1/', '"m1-retouched/'))
    assert agent_settings(spec)["model_sha"] != before
    spec_file = members / "m1-retouched" / "best_model.policy.json"
    retouched = agent_settings(spec)["model_sha"]
    spec_file.write_text(spec_file.read_text().replace("another member", "yet another"))
    assert agent_settings(spec)["model_sha"] != retouched  # the ensemble file unchanged, a member's spec changed
