"""``play_defer``: a learned policy plays a heuristic's decision unless it is surer of its own by a margin."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from model_copies import copy_with_meta
from sfenv.agents.deferral import Deferral, check_play_defer, deferred_action

from sfenv.env import GeoSchedEnv
from sfenv.env.proposers import DecisionRecorder
from sfenv.errors import InvalidInput

ROOT = Path(__file__).resolve().parents[1]
GEO6 = ROOT / "docs" / "results" / "learned" / "v2" / "geo-6-contended-validation.yaml"


# ---------------------------------------------------------------- the setting


def test_a_setting_is_read_as_data() -> None:
    assert check_play_defer(None, "m") is None
    got = check_play_defer({"to": "spantrain+swf", "margin": 1}, "m")
    assert got == Deferral(("spantrain+swf",), 1.0) and isinstance(got.margin, float)
    assert got.record() == {"to": "spantrain+swf", "margin": 1.0}
    assert got.describe() == "deferring to spantrain+swf unless 1 nats surer"
    several = check_play_defer({"to": ["fastest+swf", "spantrain+swf"], "margin": 2.5}, "m")
    assert several == Deferral(("fastest+swf", "spantrain+swf"), 2.5)
    assert several.record() == {"to": ["fastest+swf", "spantrain+swf"], "margin": 2.5}
    assert several.describe() == "deferring to the highest-ranked of fastest+swf, spantrain+swf unless 2.5 nats surer"


@pytest.mark.parametrize(("bad", "field"), [
    ({"to": "spantrain+swf"}, "play_defer:"),
    ({"to": "x", "margin": 1.0, "extra": 1}, "play_defer:"),
    ([1.0], "play_defer:"),
    ({"to": 3, "margin": 1.0}, "play_defer.to"),
    ({"to": "", "margin": 1.0}, "play_defer.to"),
    ({"to": "x" * 65, "margin": 1.0}, "play_defer.to"),
    ({"to": [], "margin": 1.0}, "play_defer.to"),
    ({"to": ["a", "a"], "margin": 1.0}, "play_defer.to"),
    ({"to": ["a", 2], "margin": 1.0}, "play_defer.to"),
    ({"to": [f"h{i}" for i in range(17)], "margin": 1.0}, "play_defer.to"),
    ({"to": "x", "margin": -0.5}, "play_defer.margin"),
    ({"to": "x", "margin": float("nan")}, "play_defer.margin"),
    ({"to": "x", "margin": 51.0}, "play_defer.margin"),
    ({"to": "x", "margin": True}, "play_defer.margin"),
    ({"to": "x", "margin": "1"}, "play_defer.margin"),
])
def test_a_bad_setting_is_refused_naming_the_field(bad: Any, field: str) -> None:
    with pytest.raises(InvalidInput, match=f"where: {field}"):
        check_play_defer(bad, "where")


# ---------------------------------------------------------------- the rule


class _Logits:
    """A stand-in SB3 policy whose action distribution has the given log-probabilities."""

    def __init__(self, log_probs: list[float]) -> None:
        import torch

        self.logits = torch.tensor([log_probs], dtype=torch.float32)
        self.masks: Any = "unset"

    def set_training_mode(self, mode: bool) -> None:
        assert mode is False

    def obs_to_tensor(self, observation: Any) -> tuple[Any, bool]:
        return observation, False

    def get_distribution(self, obs: Any, action_masks: Any = None) -> Any:
        self.masks = action_masks
        logits = self.logits

        class _Dist:
            class distribution:
                pass

        _Dist.distribution.logits = logits  # type: ignore[attr-defined]
        return _Dist


def test_the_heuristic_is_played_unless_the_policy_is_surer_by_more_than_the_margin() -> None:
    log_probs = [np.log(0.5), np.log(0.3), np.log(0.2)]  # greedy 0; 0.51 nats over 1, 0.92 over 2
    policy = _Logits(log_probs)
    mask = np.array([True, True, True])
    assert deferred_action(policy, None, mask, None, 5.0) == (0, False)  # no decision on the menu
    assert deferred_action(policy, None, mask, 0, 5.0) == (0, False)  # the same action: nothing deferred
    assert deferred_action(policy, None, mask, 1, 0.6) == (1, True)
    assert deferred_action(policy, None, mask, 1, 0.5) == (0, False)
    assert deferred_action(policy, None, mask, 2, 0.9) == (0, False)
    assert deferred_action(policy, None, mask, 2, 1.0) == (2, True)
    assert deferred_action(policy, None, mask, 2, 0.0) == (0, False)  # margin 0: the policy's choice
    assert policy.masks is mask  # the mask reaches the distribution
    assert deferred_action(policy, None, np.array([True, True, False]), 2, 50.0) == (0, False)  # masked
    assert deferred_action(policy, None, None, 1, 1.0) == (1, True) and policy.masks is None  # unmasked policy
    assert deferred_action(policy, None, mask, 7, 50.0) == (0, False)  # no such action


def test_among_several_heuristics_the_one_the_policy_ranks_highest_is_deferred_to() -> None:
    policy = _Logits([np.log(0.5), np.log(0.1), np.log(0.3), np.log(0.1)])  # greedy 0, then 2
    mask = np.array([True, True, True, True])
    assert deferred_action(policy, None, mask, [1, 2, 3], 1.0) == (2, True)  # 0.51 nats below the greedy
    assert deferred_action(policy, None, mask, [3, 1], 2.0) == (1, True)  # a tie: the first slot
    assert deferred_action(policy, None, mask, [1, None, 3], 1.0) == (0, False)  # 1.61 nats below
    assert deferred_action(policy, None, mask, [None, None], 50.0) == (0, False)  # none offered
    assert deferred_action(policy, None, mask, [2, 0], 50.0) == (0, False)  # the greedy action is a heuristic's
    assert deferred_action(policy, None, np.array([True, True, False, True]), [2, 3], 50.0) == (3, True)  # 2 masked


def test_each_heuristic_may_have_its_own_margin() -> None:
    """With margins per heuristic the action with the largest log-probability plus its margin is deferred to."""
    policy = _Logits([np.log(0.6), np.log(0.25), np.log(0.1), np.log(0.05)])  # greedy 0; 1 is 0.88, 2 is 1.79 below
    mask = np.array([True, True, True, True])
    assert deferred_action(policy, None, mask, [1, 2], 2.0) == (1, True)  # one margin: the highest-ranked
    assert deferred_action(policy, None, mask, [1, 2], [2.0, 4.0]) == (2, True)  # 2's margin lifts it over 1
    assert deferred_action(policy, None, mask, [1, 2], [2.0, 1.0]) == (1, True)
    assert deferred_action(policy, None, mask, [1, 2], [0.5, 1.5]) == (0, False)  # neither margin is enough
    assert deferred_action(policy, None, mask, [2, 2], [0.5, 2.0]) == (2, True)  # two heuristics' action: the larger
    assert deferred_action(policy, None, mask, [2, None], [4.0, 9.0]) == (2, True)
    assert deferred_action(policy, None, np.array([True, True, False, True]), [1, 2], [0.5, 50.0]) == (0, False)
    rng = np.random.default_rng(0)  # one margin for all, as a number or as a list: the same action
    for _ in range(200):
        log_probs = np.log(rng.dirichlet(np.ones(5)))
        offered = [int(a) if a < 5 else None for a in rng.integers(0, 7, size=3)]
        margin = float(rng.uniform(0, 3))
        assert deferred_action(_Logits(list(log_probs)), None, None, offered, margin) == \
            deferred_action(_Logits(list(log_probs)), None, None, offered, [margin] * 3)
    with pytest.raises(InvalidInput, match="2 margins for 3 heuristic actions"):
        deferred_action(policy, None, mask, [1, 2, 3], [1.0, 2.0])


def test_margins_per_heuristic_are_read_as_data() -> None:
    got = check_play_defer({"to": ["fastest+swf", "spantrain+swf"], "margin": {"spantrain+swf": 4, "fastest+swf": 2}},
                           "m")
    assert got == Deferral(("fastest+swf", "spantrain+swf"), (2.0, 4.0)) and got.margins() == (2.0, 4.0)
    assert got.record() == {"to": ["fastest+swf", "spantrain+swf"],
                            "margin": {"fastest+swf": 2.0, "spantrain+swf": 4.0}}
    assert check_play_defer(got.record(), "m") == got
    assert got.row_margin() == "fastest+swf:2,spantrain+swf:4"
    assert got.describe() == ("deferring to the highest-ranked of fastest+swf, spantrain+swf unless surer by each "
                              "one's margin in nats (fastest+swf 2, spantrain+swf 4)")
    one = check_play_defer({"to": ["a", "b"], "margin": 2}, "m")
    assert one is not None and one.margins() == (2.0, 2.0) and one.row_margin() == 2.0
    for bad, field in (({"a": 1}, "play_defer.margin: a mapping must give"),
                       ({"a": 1, "b": 1, "c": 1}, "play_defer.margin: a mapping"),
                       ({"a": 1, "b": -1}, "play_defer.margin.b"), ({"a": "x", "b": 1}, "play_defer.margin.a")):
        with pytest.raises(InvalidInput, match=f"where: {field}"):
            check_play_defer({"to": ["a", "b"], "margin": bad}, "where")


def test_a_policy_without_action_probabilities_is_refused() -> None:
    with pytest.raises(InvalidInput, match="play_defer needs a policy with action probabilities"):
        deferred_action(object(), None, None, 0, 1.0)


# ---------------------------------------------------------------- the env's side: decision_action


def _decision(env: GeoSchedEnv, name: str) -> Any:
    return next(p.decision for p in env.proposers if isinstance(p, DecisionRecorder) and p.name == name)


def test_decision_action_is_the_slot_of_the_recorded_decision_and_none_when_the_menu_lacks_it() -> None:
    """Walked over states where the floor drops spantrain's decision and states where it does not."""
    if not GEO6.exists():
        pytest.skip("the validation scenario is not in this checkout")
    env = GeoSchedEnv(GEO6, proposers="best+spantrain", num_jobs=30, max_candidates=64, min_relative_mfu=0.7)
    env.reset(seed=10_000)
    offered = dropped = 0
    for _ in range(30):
        for name in ("fastest+swf", "fifo+swf", "spantrain+swf"):
            decision, index = _decision(env, name), env.decision_action(name)
            if decision is None or decision not in env.candidates:
                assert index is None
                dropped += decision is not None
            else:
                assert index is not None and env.candidates[index] == decision and env.action_masks()[index]
                offered += 1
        assert env.decision_action("fastest+swf") in (0, None)  # candidate 0 when there is one
        *_, term, trunc, _ = env.step(0)
        if term or trunc:
            break
    assert offered > 0 and dropped > 0, (offered, dropped)


def test_decision_action_refuses_a_name_no_proposer_records() -> None:
    env = GeoSchedEnv("spider-8", num_jobs=6)  # the default proposers record no decision
    env.reset(seed=0)
    with pytest.raises(InvalidInput, match="name='fastest\\+swf'.*recorded: \\[\\]"):
        env.decision_action("fastest+swf")
    env = GeoSchedEnv("spider-8", num_jobs=6, proposers="first-fit")
    env.reset(seed=0)
    with pytest.raises(InvalidInput, match="recorded: \\['fastest\\+swf', 'fifo\\+swf'\\]"):
        env.decision_action("spantrain+swf")
    assert env.decision_action("fastest+swf") == 0


def test_decision_action_is_none_once_no_job_waits() -> None:
    env = GeoSchedEnv("spider-8", num_jobs=2, proposers="first-fit")
    env.reset(seed=0)
    done = False
    while not done:
        *_, term, trunc, _ = env.step(env.decision_action("fastest+swf") or env.wait_action)
        done = term or trunc
    assert env.decision_action("fastest+swf") is None


# ---------------------------------------------------------------- a recipe played with it


def _deferring_walk(policy: Any, seed: int = 10_000) -> list[tuple[int, list[int | None]]]:
    """One episode of spider-8 (12 jobs) played with ``policy.choose``: each step's action and the heuristics'."""
    from sfenv.agents.deferral import heuristic_actions
    from sfenv.agents.learned import make_env_fn

    from sfenv.scenario import load_scenario

    sc = load_scenario("spider-8").with_overrides(workload={"num_jobs": 12})
    env = make_env_fn(sc, policy.spec.flatten, {k: v for k, v in policy.meta["env_kwargs"].items()
                                                 if k != "num_jobs"})()
    obs, _ = env.reset(seed=seed)
    steps: list[tuple[int, list[int | None]]] = []
    done = False
    while not done:
        heuristics = heuristic_actions(env, policy.play_defer)
        action, _ = policy.choose(obs, env.unwrapped.action_masks(), heuristics)
        steps.append((action, heuristics))
        obs, _, term, trunc, _ = env.step(action)
        done = term or trunc
    return steps


@pytest.fixture(scope="module")
def deferring_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny recipe whose model defers to ``fastest+swf`` unless 50 nats surer (so nearly always)."""
    pytest.importorskip("sb3_contrib")
    from sfenv.agents.learned import train

    out = tmp_path_factory.mktemp("defer")
    final = train("maskable-ppo", "spider-8", total_timesteps=128, seed=0, n_envs=2, out_dir=out,
                  env_kwargs={"num_jobs": 12, "obs_mode": "compact", "proposers": "best"},
                  algo_kwargs={"n_steps": 64, "batch_size": 64, "n_epochs": 1}, eval_every=64,
                  eval_seeds=[10_000, 10_001], tensorboard=False, plot=False, play="work-conserving",
                  play_defer={"to": "fastest+swf", "margin": 50.0})
    return final.parent


def test_the_recipe_records_it_and_its_evaluations_play_it(deferring_run: Path) -> None:
    """The config and the model record the deferral; the kept model's evaluation is the deferring play's."""
    import yaml
    from sfenv.agents.learned import LearnedPolicy, run_summary

    from sfenv.app.evaluate import run_policy_episode
    from sfenv.scenario import load_scenario

    cfg = yaml.safe_load((deferring_run / "config.yml").read_text())
    assert cfg["play_defer"] == {"to": "fastest+swf", "margin": 50.0}
    policy = LearnedPolicy(deferring_run / "best_model.policy.json")
    assert policy.play_defer == Deferral(("fastest+swf",), 50.0)
    sc = load_scenario("spider-8").with_overrides(workload={"num_jobs": 12})
    rows = [run_policy_episode(policy, sc, s) for s in (10_000, 10_001)]
    assert all(r["defer_to"] == "fastest+swf" and r["defer_margin"] == 50.0 for r in rows)
    assert sum(r["deferred"] for r in rows) > 0
    best = [h for h in json.loads((deferring_run / "eval.json").read_text()) if h["best"]][-1]
    assert np.mean([r["mean_jct_s"] for r in rows]) / 3600 == pytest.approx(best["mean_jct_h"], rel=1e-12)
    alone = LearnedPolicy(deferring_run / "best_model.policy.json", defer=False)
    assert alone.play_defer is None
    rows_alone = [run_policy_episode(alone, sc, s) for s in (10_000, 10_001)]
    assert not any("deferred" in r for r in rows_alone)
    assert [r["mean_jct_s"] for r in rows_alone] != [r["mean_jct_s"] for r in rows]  # the deferral changed play
    assert "deferring to fastest+swf unless 50 nats surer" in run_summary(deferring_run)
    with pytest.raises(InvalidInput, match="this model has none"):
        alone.choose(None, None, 0)


def test_deferring_to_the_heuristic_always_plays_its_decisions(deferring_run: Path) -> None:
    """At 50 nats every offered decision of ``fastest+swf`` is played: the actions are the heuristic's slot."""
    from sfenv.agents.learned import LearnedPolicy

    steps = _deferring_walk(LearnedPolicy(deferring_run / "best_model.policy.json"))
    offered = [(action, heuristic) for action, (heuristic,) in steps if heuristic is not None]
    assert offered and all(action == heuristic for action, heuristic in offered)


def test_a_tampered_play_defer_is_refused_naming_it(deferring_run: Path, tmp_path: Path) -> None:
    from sfenv.agents.learned import LearnedPolicy

    cases = ((["x"], "play_defer: expected"), ({"to": "x", "margin": 99}, "play_defer.margin"))
    for bad, match in cases:
        with pytest.raises(InvalidInput, match=match):
            LearnedPolicy(copy_with_meta(deferring_run, tmp_path, play_defer=bad))


def test_train_refuses_a_deferral_it_cannot_play_before_writing_anything(tmp_path: Path) -> None:
    pytest.importorskip("sb3_contrib")
    from sfenv.agents.learned import train

    kw: dict[str, Any] = {"total_timesteps": 64, "n_envs": 1, "out_dir": tmp_path, "tensorboard": False,
                          "plot": False, "env_kwargs": {"num_jobs": 6, "proposers": "first-fit"}}
    with pytest.raises(InvalidInput, match="name='spantrain\\+swf'"):
        train("maskable-ppo", "spider-8", play_defer={"to": "spantrain+swf", "margin": 1.0}, **kw)
    with pytest.raises(InvalidInput, match="not dqn"):
        train("dqn", "spider-8", play_defer={"to": "fastest+swf", "margin": 1.0}, **kw)
    with pytest.raises(InvalidInput, match="play_defer.margin"):
        train("maskable-ppo", "spider-8", play_defer={"to": "fastest+swf", "margin": -1}, **kw)
    assert list(tmp_path.iterdir()) == []


def test_a_config_with_a_bad_deferral_is_refused_naming_the_field(tmp_path: Path) -> None:
    from sfenv.agents.learned import load_config

    path = tmp_path / "c.yml"
    path.write_text("play_defer: {to: spantrain+swf, margin: fast}\n")
    with pytest.raises(InvalidInput, match="play_defer.margin"):
        load_config(path)
    path.write_text("play_defer: {to: spantrain+swf, margin: 2}\n")
    assert load_config(path)["play_defer"] == {"to": "spantrain+swf", "margin": 2.0}


def test_learned_vs_heuristics_records_and_says_the_deferral(deferring_run: Path, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from sfenv.experiments.learned_vs_heuristics import main

    res = main(["--model", str(deferring_run / "best_model.policy.json"), "--split", "validation", "--seeds", "1",
                "--num-jobs", "6", "--heuristics", "fifo", "--scenario", "spider-8", "--out", str(tmp_path)])
    assert res["play_defer"] == {"to": "fastest+swf", "margin": 50.0}
    assert "deferring to fastest+swf unless 50 nats surer" in capsys.readouterr().out


def test_deferring_to_several_plays_one_of_their_decisions_and_rows_name_them(deferring_run: Path,
                                                                              tmp_path: Path) -> None:
    """A model whose meta defers to two heuristics at 50 nats plays one of their offered actions at every step."""
    from sfenv.agents.learned import LearnedPolicy

    from sfenv.app.evaluate import run_policy_episode
    from sfenv.scenario import load_scenario

    policy = LearnedPolicy(copy_with_meta(deferring_run, tmp_path,
                                          play_defer={"to": ["fifo+swf", "fastest+swf"], "margin": 50.0}))
    offered = [(action, hs) for action, hs in _deferring_walk(policy) if any(h is not None for h in hs)]
    assert offered and all(action in hs for action, hs in offered)
    row = run_policy_episode(policy, load_scenario("spider-8").with_overrides(workload={"num_jobs": 12}), 10_000)
    assert row["defer_to"] == "fifo+swf,fastest+swf" and row["defer_margin"] == 50.0


# ---------------------------------------------------------------- whose decisions it starts (experiments)


def _agreement_by_hand(policy: Any, sc: Any, seed: int, reference: str) -> Counter[str]:
    """The counts of ``decision_agreement`` for one episode, classified here step by step."""
    from sfenv.agents.deferral import heuristic_actions
    from sfenv.agents.learned import make_env_fn

    kwargs = {k: v for k, v in policy.meta["env_kwargs"].items() if k != "num_jobs"}
    env = make_env_fn(sc, policy.spec.flatten, kwargs)()
    obs, _ = env.reset(seed=seed)
    counts: Counter[str] = Counter()
    done = False
    while not done:
        mask = env.unwrapped.action_masks()
        actions = dict(zip(policy.play_defer.to, heuristic_actions(env, policy.play_defer), strict=True))
        action, took = policy.choose(obs, mask, list(actions.values()))
        counts["deferred"] += took
        if action == len(mask) - 1:
            counts["waits"] += 1
        else:
            counts["starts"] += 1
            same = sorted(n for n, a in actions.items() if a == action)
            if actions[reference] is None:
                counts[f"{reference} offered none"] += 1
            elif actions[reference] == action:  # the reference's, whoever else recorded the same decision
                counts[f"= {reference}"] += 1
            else:
                counts["= " + ("|".join(same) if same else "no heuristic's")] += 1
        obs, _, term, trunc, _ = env.step(action)
        done = term or trunc
    return counts


def test_decision_agreement_counts_each_start_once_as_classified_by_hand(deferring_run: Path, tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Its counts are the same episode's classified independently; the categories add up to the starts."""
    from sfenv.agents.learned import LearnedPolicy
    from sfenv.experiments.decision_agreement import count_agreement, main

    from sfenv.scenario import load_scenario

    spec = copy_with_meta(deferring_run, tmp_path, play_defer={"to": ["fifo+swf", "fastest+swf"], "margin": 0.5})
    counts = count_agreement(str(spec), "spider-8", [10_000, 10_001], reference="fifo+swf", num_jobs=12)
    sc = load_scenario("spider-8").with_overrides(workload={"num_jobs": 12})
    by_hand = _agreement_by_hand(LearnedPolicy(spec), sc, 10_000, "fifo+swf")
    by_hand += _agreement_by_hand(LearnedPolicy(spec), sc, 10_001, "fifo+swf")
    assert counts == dict(sorted(by_hand.items()))
    kinds = [k for k in counts if k.startswith("=") or k.endswith("offered none")]
    assert counts["starts"] == sum(counts[k] for k in kinds) >= 12
    assert len(kinds) >= 2  # the policy does not always start fifo+swf's decision here
    assert main(["--model", str(spec), "--scenario", "spider-8", "--reference", "fifo+swf", "--seeds", "1"]) is None
    assert "split validation" in capsys.readouterr().out


def test_decision_agreement_refuses_a_model_without_deferral_or_a_reference_it_does_not_name(
        deferring_run: Path, tmp_path: Path) -> None:
    from sfenv.experiments.decision_agreement import AgreementCounter

    with pytest.raises(InvalidInput, match="reference: 'spantrain\\+swf' is not one of"):
        AgreementCounter(deferring_run / "best_model.policy.json")
    with pytest.raises(InvalidInput, match="has no play_defer"):
        AgreementCounter(copy_with_meta(deferring_run, tmp_path, play_defer=None), reference="fastest+swf")


def test_a_model_with_margins_per_heuristic_plays_them_and_its_rows_say_so(deferring_run: Path,
                                                                          tmp_path: Path) -> None:
    """At 50 nats for fifo+swf and 0 for fastest+swf, fifo+swf's offered decision is played at every step."""
    from sfenv.agents.learned import LearnedPolicy

    from sfenv.app.evaluate import run_policy_episode
    from sfenv.scenario import load_scenario

    policy = LearnedPolicy(copy_with_meta(deferring_run, tmp_path, play_defer={
        "to": ["fifo+swf", "fastest+swf"], "margin": {"fifo+swf": 50.0, "fastest+swf": 0.0}}))
    assert policy.play_defer is not None and policy.play_defer.margins() == (50.0, 0.0)
    offered = [(action, fifo) for action, (fifo, _) in _deferring_walk(policy) if fifo is not None]
    assert offered and all(action == fifo for action, fifo in offered)
    row = run_policy_episode(policy, load_scenario("spider-8").with_overrides(workload={"num_jobs": 12}), 10_000)
    assert row["defer_to"] == "fifo+swf,fastest+swf" and row["defer_margin"] == "fifo+swf:50,fastest+swf:0"
