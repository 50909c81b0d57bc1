"""Every registered agent on 5 seeds of every bundled scenario: no plan the simulator rejects,
directly and through the environment (no invalid action)."""

from __future__ import annotations

import gymnasium as gym
import pytest

import sfenv  # noqa: F401
from agents.registry import AGENTS, available_agents, make_agent
from sfenv.registration import ENV_IDS
from sfenv.scenario import bundled_scenarios, load_scenario

AVAILABLE = available_agents()
SEEDS = range(5)
# small budgets keep the search-based agents quick in the default run
FAST = {"ilp": {"time_limit": 1.0}, "genetic": {"population": 12, "generations": 4}}


def _make(name):
    try:
        return make_agent(name, **FAST.get(name, {}))
    except TypeError:  # an agent without these parameters
        return make_agent(name)


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_agent_is_available(name):
    if name not in AVAILABLE:
        pytest.skip(f"agent {name!r} is not implemented yet ({AGENTS[name]} does not import)")
    assert _make(name).name == name


@pytest.mark.parametrize("scenario", bundled_scenarios())
@pytest.mark.parametrize("name", AVAILABLE)
def test_no_rejected_plan_in_the_simulator(name, scenario):
    sc = load_scenario(scenario).with_overrides(workload={"num_jobs": 6})
    for seed in SEEDS:
        agent = _make(name)
        agent.reset(seed)
        report = sc.make_simulator(seed).run(agent.decide)  # InvalidDecision would raise
        assert report.jobs == 6


ENV_FOR = {v: k for k, v in reversed(list(ENV_IDS.items()))}


@pytest.mark.parametrize("scenario", bundled_scenarios())
@pytest.mark.parametrize("name", AVAILABLE)
def test_no_invalid_action_through_the_env(name, scenario):
    env = gym.make(ENV_FOR[scenario], num_jobs=6)
    agent = _make(name).bind(env)
    for seed in SEEDS:
        agent.reset(seed)
        obs, info = env.reset(seed=seed)
        done = False
        while not done:
            action, _ = agent.predict(obs, deterministic=True)
            obs, r, term, trunc, info = env.step(int(action))
            assert not info["invalid_action"], (name, scenario, seed)
            done = term or trunc
    env.close()
