"""Every registered agent on every bundled scenario: no invalid action through the environment on
3 seeds, and no plan the simulator rejects when driven directly (one seed); a variant of another
bundled scenario (``envs.VARIANT_OF``) is played only in the slow run at default budgets.  The search-based
agents run with small budgets here (their plans go through the same code paths); the 5-seed run
at their default budgets is marked slow."""

from __future__ import annotations

import gymnasium as gym
import pytest
from envs import SWEPT_SCENARIOS
from sfenv.agents.registry import AGENTS, available_agents, make_agent

import sfenv  # noqa: F401
from sfenv.registration import ENV_IDS
from sfenv.scenario import bundled_scenarios, load_scenario
from sfenv.sim import make_simulator

AVAILABLE = available_agents()
SEEDS = tuple(range(3))  # 5 until the default run neared its 15-minute budget
#: the slow run at default budgets
SLOW_SEEDS = tuple(range(5))
# 2 seeds through the env for the slowest agents (5 seeds took 30-57 s per scenario for ilp and genetic
# on a loaded 2-core machine, 22-26 s for the deferring carbon agents on spider-64): their plans go
# through the same env path; ilp and genetic play 5 seeds at their default budgets in the slow test
# below, the carbon agents' decisions are checked in test_agent_carbon
FEWER_SEEDS = {name: SEEDS[:2] for name in ("ilp", "genetic", "carbon-defer", "carbon-st")}
# small budgets keep the search-based agents quick in the default run
FAST = {"ilp": {"time_limit": 0.5, "dp_options": (1, 2), "micro_batches": (1,), "max_regions": 8},
        "genetic": {"population": 12, "generations": 4}}
FULL_BUDGET = ("ilp", "genetic")
#: agents whose every-scenario runs are slow-marked: carbon-elastic re-plans every hour a job runs
#: (about 40 s over the bundled scenarios on a loaded 2-core machine, against the default run's
#: budget); its env path is played in the default run by tests/test_agent_carbon.py on geo-8
SLOW_EVERYWHERE = ("carbon-elastic",)


def _agents() -> list:
    return [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_EVERYWHERE else n for n in AVAILABLE]


def _make(name, fast=True):
    return make_agent(name, **(FAST.get(name, {}) if fast else {}))


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_agent_is_available(name):
    if name not in AVAILABLE:
        pytest.skip(f"agent {name!r} is not implemented yet ({AGENTS[name]} does not import)")
    assert _make(name).name == name


@pytest.mark.parametrize("scenario", SWEPT_SCENARIOS)
@pytest.mark.parametrize("name", _agents())
def test_no_rejected_plan_in_the_simulator(name, scenario):
    sc = load_scenario(scenario).with_overrides(workload={"num_jobs": 6})
    agent = _make(name)
    agent.reset(0)
    replan = agent.replan if agent.replan_hourly else None  # the hourly agents' switches checked too
    report = make_simulator(sc, 0).run(agent.decide, replan=replan, replan_hourly=agent.replan_hourly)
    assert report.jobs == 6


ENV_FOR = {v: k for k, v in reversed(list(ENV_IDS.items()))}


def _play(agent, scenario, seeds):
    env = gym.make(ENV_FOR[scenario], num_jobs=6)
    agent = agent.bind(env)
    for seed in seeds:
        agent.reset(seed)
        obs, info = env.reset(seed=seed)
        done = False
        while not done:
            action, _ = agent.predict(obs, deterministic=True)
            obs, r, term, trunc, info = env.step(int(action))
            assert not info["invalid_action"], (agent.name, scenario, seed)
            done = term or trunc
    env.close()


@pytest.mark.parametrize("scenario", SWEPT_SCENARIOS)
@pytest.mark.parametrize("name", _agents())
def test_no_invalid_action_through_the_env(name, scenario):
    _play(_make(name), scenario, FEWER_SEEDS.get(name, SEEDS))


@pytest.mark.slow
@pytest.mark.parametrize("scenario", bundled_scenarios())
@pytest.mark.parametrize("name", [n for n in FULL_BUDGET if n in AVAILABLE])
def test_no_invalid_action_at_default_budgets(name, scenario):
    _play(_make(name, fast=False), scenario, SLOW_SEEDS)
