"""The best fast heuristic's decisions are among the env's candidates with best_heuristic_proposers."""

import pytest
from sfenv.agents.proposer_sets import best_heuristic_proposers
from sfenv.agents.registry import make_agent

from sfenv.env import GeoSchedEnv
from sfenv.scenario import load_scenario
from sfenv.sim import make_simulator


@pytest.mark.parametrize(("scenario", "seed"), [("spider-8-contended", 0), ("geo-8-contended", 1)])
def test_rollout_of_spinsearch_swf_through_the_env_plays_its_own_episode(scenario, seed):
    """At every decision point the agent's plan is a candidate (never injected), and the episode equals its own."""
    sc = load_scenario(scenario).with_overrides(workload={"num_jobs": 40})
    agent = make_agent("spinsearch+swf")
    agent.reset(seed)
    own = make_simulator(sc, seed).run(agent.decide)

    env = GeoSchedEnv(sc, proposers=best_heuristic_proposers(8))
    env.reset(seed=seed)
    agent.reset(seed)
    done, starts = False, 0
    while not done:
        plan = agent.decide(env.view)
        if plan is None:
            action = env.wait_action
        else:
            assert plan in env.candidates, "the heuristic's plan is not among the candidates"
            action = env.candidates.index(plan)
            assert env.action_masks()[action]
            starts += 1
        _, _, terminated, truncated, info = env.step(action)
        assert not info["invalid_action"]
        done = terminated or truncated
    assert starts >= 40
    assert env.sim.report().mean_jct_s == pytest.approx(own.mean_jct_s)


def test_window_jobs_get_spinsearch_plans():
    """Besides the decision, each window job SpinSearch can place has its plan among the candidates."""
    sc = load_scenario("spider-8-contended").with_overrides(workload={"num_jobs": 40})
    spin = make_agent("spinsearch")
    env = GeoSchedEnv(sc, proposers=best_heuristic_proposers(8))
    _, info = env.reset(seed=0)
    checked = 0
    for _ in range(200):
        view = env.view
        for job in view.waiting[:8]:
            plans = [p for p in spin.propose(view, job, 1) if view.can_start(p)]
            if plans:
                assert plans[0] in env.candidates
                checked += 1
        _, _, term, trunc, info = env.step(0 if info["action_mask"][0] else env.wait_action)
        if term or trunc:
            break
    assert checked >= 20


def test_default_proposers_unchanged_by_opt_in():
    env = GeoSchedEnv("spider-8", num_jobs=4)
    assert [type(p).__name__ for p in env.proposers] == ["SingleRegionProposer", "PathProposer"]
    assert [type(p).__name__ for p in best_heuristic_proposers()] == [
        "FirstFitProposer", "FirstFitProposer", "SpinSearchProposer", "SingleRegionProposer", "PathProposer"]
    assert [getattr(p, "name", None) for p in GeoSchedEnv("spider-8", num_jobs=4, proposers="best").proposers] == [
        "fastest+swf", "fifo+swf", "spinsearch+swf", None, None]
    with_spantrain = GeoSchedEnv("spider-8", num_jobs=4, proposers="best+spantrain").proposers
    assert [getattr(p, "name", None) for p in with_spantrain] == [
        "fastest+swf", "fifo+swf", "spantrain+swf", "spinsearch+swf", None, None]
    first_fit = GeoSchedEnv("spider-8", num_jobs=4, proposers="first-fit").proposers
    assert [getattr(p, "name", None) for p in first_fit] == ["fastest+swf", "fifo+swf", None, None]
    assert [type(p).__name__ for p in first_fit[2:]] == ["SingleRegionProposer", "PathProposer"]


def test_named_proposer_sets_and_a_bad_name():
    """Every name of PROPOSER_SETS builds; another name is refused naming the argument."""
    from sfenv.env.proposers import PROPOSER_SETS, named_proposers

    assert PROPOSER_SETS == ("default", "first-fit", "first-fit+spantrain", "best", "best+spantrain", "carbon")
    names = [[getattr(p, "name", None) for p in named_proposers(name)] for name in PROPOSER_SETS]
    assert names == [[None, None], ["fastest+swf", "fifo+swf", None, None],
                     ["fastest+swf", "fifo+swf", "spantrain+swf", None, None],
                     ["fastest+swf", "fifo+swf", "spinsearch+swf", None, None],
                     ["fastest+swf", "fifo+swf", "spantrain+swf", "spinsearch+swf", None, None],
                     ["fastest+swf", "fifo+swf", "spantrain+swf", "forecast-carbon+swf", "lowest-carbon+swf",
                      None, None]]
    with pytest.raises(ValueError, match="proposers='spinsearch'"):
        named_proposers("spinsearch")


def test_unknown_proposer_set_is_refused():
    from sfenv.errors import InvalidInput

    with pytest.raises(InvalidInput, match="proposers"):
        GeoSchedEnv("spider-8", num_jobs=4, proposers="bestest")


@pytest.mark.parametrize(("name", "index", "proposers"), [
    ("fastest+swf", 0, "best"), ("fifo+swf", 1, "best"), ("spantrain+swf", 2, "best+spantrain"),
    ("fastest+swf", 0, "first-fit"), ("fifo+swf", 1, "first-fit")])
@pytest.mark.parametrize(("scenario", "seed"), [("spider-8-contended", 2), ("spider-64", 0)])
def test_first_fit_decisions_are_candidates_and_their_rollout_is_their_own_episode(scenario, seed, name, index,
                                                                                   proposers):
    """fastest+swf's decision is candidate 0; the others' are candidates; playing one gives its own episode."""
    sc = load_scenario(scenario).with_overrides(workload={"num_jobs": 30})
    agent = make_agent(name)
    agent.reset(seed)
    own = make_simulator(sc, seed).run(agent.decide)
    env = GeoSchedEnv(sc, proposers=proposers)
    env.reset(seed=seed)
    done, starts = False, 0
    while not done:
        plan = agent.decide(env.view)
        recorded = env.proposers[index].decision
        assert recorded == plan
        if plan is None:
            action = env.wait_action
        else:
            action = env.candidates.index(plan)
            assert env.action_masks()[action] and (index > 0 or action == 0)
            starts += 1
        _, _, terminated, truncated, _ = env.step(action)
        done = terminated or truncated
    assert starts >= 30
    assert env.sim.report().mean_jct_s == pytest.approx(own.mean_jct_s)


def test_short_paths_equal_networkx_k_shortest_filtered_by_length():
    # the depth-limited enumeration returns the k shortest simple paths of at most 3 regions, as an
    # exhaustive networkx k-shortest-paths search filtered by length does
    import networkx as nx
    import numpy as np

    from sfenv.env.proposers import short_paths

    rng = np.random.default_rng(3)
    g = nx.gnp_random_graph(12, 0.4, seed=3)
    for a, b in g.edges:
        g.edges[a, b]["latency_ms"] = float(rng.uniform(1, 100))
    for s, d in [(0, 5), (2, 9), (7, 11)]:
        if not nx.has_path(g, s, d):
            continue
        every = [p for p in nx.shortest_simple_paths(g, s, d, weight="latency_ms") if len(p) <= 3]
        assert short_paths(g, s, d, 3, 2) == every[:2]
        assert short_paths(g, s, d, 3, 50) == every
