"""A policy stopped at the step limit is scored on the finished episode, in training and in the evaluator.

A policy that never lets time pass (here: a masked action at every step once it has started a few
jobs) is stopped after ``max(max_episode_steps, 100 x jobs)`` steps; the rest of its episode is
played with waits (:meth:`sfenv.env.GeoSchedEnv.wait_to_end`), so its report counts every job and
its return every wait.  The reference is the same policy waiting through ``env.step`` instead of
stalling: the same simulator trajectory, with no penalties.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from sfenv.agents.callbacks import play_episode

from sfenv.app.evaluate import run_policy_episode
from sfenv.env import GeoSchedEnv
from sfenv.scenario import load_scenario
from sfenv.sim.metrics import EpisodeReport

STARTS = 3  # decisions the policy takes before it stalls
SEED = 10_003
SCENARIO = load_scenario("spider-8").with_overrides(workload={"num_jobs": 6})


class _Staller:
    """A saved policy's face: the first valid candidate for :data:`STARTS` decisions, then a masked action or wait.

    :param stall: after those decisions, pick a masked action (time never passes) instead of waiting.
    :param env: when given, the simulator's time and finished jobs at the first stall are recorded.
    """

    name = "model:stall.zip"
    spec = SimpleNamespace(flatten=False)

    def __init__(self, stall: bool, env: GeoSchedEnv | None = None) -> None:
        self.stall, self.env = stall, env
        self.meta: dict = {}  # trained with no env settings
        self.observation_space = GeoSchedEnv(SCENARIO).observation_space
        self.decisions = 0
        self.at_stall: dict[str, float] = {}

    def predict(self, obs: Any, state: Any = None, episode_start: Any = None, deterministic: bool = True,
                action_masks: np.ndarray | None = None) -> tuple[np.int64, None]:
        mask = np.asarray(action_masks, dtype=bool)
        self.decisions += 1
        if self.decisions <= STARTS:
            starts = np.flatnonzero(mask[:-1])
            return np.int64(starts[0] if starts.size else len(mask) - 1), None
        if self.env is not None and not self.at_stall:
            self.at_stall = {"time": self.env.sim.time, "finished": self.env.sim.report().finished}
        if self.stall:
            masked = np.flatnonzero(~mask)
            assert masked.size, "no masked action to stall with"
            return np.int64(masked[0]), None
        return np.int64(len(mask) - 1), None


def _report(row: dict) -> dict:
    return {f.name: row[f.name] for f in dataclasses.fields(EpisodeReport)}


def test_a_stopped_policy_is_scored_on_the_finished_episode() -> None:
    stalled_env, waiting_env = GeoSchedEnv(SCENARIO), GeoSchedEnv(SCENARIO)
    stall = _Staller(stall=True, env=stalled_env)
    stopped, stopped_ret = play_episode(stall.predict, stalled_env, SEED, masked=True)
    played, played_ret = play_episode(_Staller(stall=False).predict, waiting_env, SEED, masked=True)
    assert stopped["stopped_early"] and not played["stopped_early"]
    assert _report(stopped) == _report(played)  # the finished episode, as if the policy had waited
    # ...and not the episode as it stood when the policy stalled
    assert stopped["makespan_s"] > stall.at_stall["time"] and stopped["finished"] > stall.at_stall["finished"]
    assert stopped["unfinished"] == 6 - stopped["finished"] > 0  # jobs never started count, censored
    limit = max(SCENARIO.cfg.env.max_episode_steps, 100 * 6)
    assert stall.decisions == limit
    penalty = stalled_env.invalid_action_penalty * (limit - STARTS)
    assert stopped_ret == pytest.approx(played_ret - penalty, rel=1e-9)  # the waits' rewards are in the return


def test_training_time_evaluation_and_the_evaluator_agree_on_a_stopped_policy() -> None:
    """play_episode (training's evaluation) and run_policy_episode (sfenv evaluate) finish the episode alike."""
    report, _ = play_episode(_Staller(stall=True).predict, GeoSchedEnv(SCENARIO), SEED, masked=True)
    row = run_policy_episode(_Staller(stall=True), SCENARIO, SEED, record_actions=True)  # type: ignore[arg-type]
    assert row["stopped_early"] and report["stopped_early"]
    assert _report(row) == _report(report)
    assert row["actions"]["decisions"][-1] is None  # the waits played on are in the action log
