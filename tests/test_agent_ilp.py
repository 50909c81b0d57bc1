"""The ILP baseline: optimal on brute-forceable instances (with tensor degrees and the all-reduce
term); its TP and micro-batch menu beats its old t = 1, b = 1 family where TP helps; honours its
time limit and falls back to first fit."""

from __future__ import annotations

import time

import numpy as np
import pytest
from agent_worlds import job, region, world
from hypothesis import given, settings
from hypothesis import strategies as st
from sfenv.agents.ilp import ILPAgent, ILPInstance, brute_force_instance, build_instance, objective, solve_instance

from sfenv.scenario import load_scenario
from sfenv.sim import make_simulator
from sfenv.world.topology import Link


@settings(max_examples=20, deadline=None)
@given(
    n=st.integers(1, 3),
    d=st.sampled_from([1, 2]),
    layers=st.integers(2, 6),
    m=st.integers(1, 16),
    seed=st.integers(0, 10_000),
)
def test_milp_is_optimal_on_small_instances(n, d, layers, m, seed):
    rng = np.random.default_rng(seed)
    menus = []
    for _ in range(n):
        opts = {(d * t * int(k), t) for t in (1, 2) for k in rng.integers(1, 3, size=2)}
        menus.append(sorted(opts))
    hop = rng.uniform(0.01, 2.0, size=(n, n))
    np.fill_diagonal(hop, 0.0)
    ar_coef = list(rng.uniform(0.0, 2.0, n)) if d > 1 else None
    ar_const = list(rng.uniform(0.0, 0.5, n)) if d > 1 else None
    inst = ILPInstance(list(range(n)), menus, list(rng.uniform(0.05, 1.0, n)), list(rng.uniform(1.0, 8.0, n)),
                       hop, layers, m, d, min_gpus=d, max_gpus=64, ar_coef=ar_coef, ar_const=ar_const,
                       overlap=float(rng.uniform(0.0, 1.0)))
    exact = brute_force_instance(inst)
    sol = solve_instance(inst, time_limit=10.0)
    if exact is None:
        assert sol is None
        return
    assert sol is not None
    chain, obj, optimal = sol
    assert optimal
    # the returned chain is optimal (recomputed exactly); the solver's own value within its tolerances
    order = [i for i, _, _, _ in chain]
    opts = [(g, t) for _, g, t, _ in chain]
    assert objective(inst, order, opts, [li for *_, li in chain]) == pytest.approx(exact, rel=1e-9, abs=1e-12)
    assert obj == pytest.approx(exact, rel=1e-5, abs=1e-6)


def test_allreduce_term_counts():
    # one region, d = 2: the all-reduce term is in the objective (and equals the brute force)
    base = dict(regions=[0], menus=[[(2, 1), (4, 1)]], alpha=[0.1], mem_layers=[10.0], hop=np.zeros((1, 1)),
                layers=4, m=8, d=2, min_gpus=2, max_gpus=4)
    without = ILPInstance(**base)
    with_ar = ILPInstance(**base, ar_coef=[5.0], ar_const=[0.0], overlap=0.0)
    o1, o2 = solve_instance(without), solve_instance(with_ar)
    assert o1 is not None and o2 is not None
    assert o2[1] > o1[1]
    assert o2[1] == pytest.approx(brute_force_instance(with_ar))
    assert o2[1] == pytest.approx(objective(with_ar, [0], [(4, 1)], [4]))  # 4 GPUs halve the all-reduce


def _tp_world():
    # gpt-6.7b does not fit on one GPU; a global batch of 8 leaves few micro-batches, so a t = 1
    # pipeline pays a large bubble that 8-way tensor parallelism avoids
    return world([region("a", 8, "z"), region("b", 8, "z")], [Link(0, 1, 10.0, 30.0)], {"z": 50.0},
                 [job(0, model="gpt-6.7b", min_gpus=8, max_gpus=16, batch=8)])


def test_tp_and_microbatch_menu_beats_the_old_family():
    sim = _tp_world()
    view = sim.view()
    j = view.waiting[0]
    old = ILPAgent(tp_options=(1,), micro_batches=(1,)).plan(view, j)
    new = ILPAgent().plan(view, j)
    assert old is not None and new is not None
    assert all(s.tp == 1 for s in old[0].stages) and old[0].micro_batch == 1
    assert new[1].iter_time < old[1].iter_time
    assert any(s.tp > 1 for s in new[0].stages)
    assert view.evaluate(new[0], j).feasible


def test_menus_respect_the_server_and_the_heads():
    sc = load_scenario("spider-8")
    sim = make_simulator(sc, 0)
    view = sim.view()
    j = view.waiting[0]
    inst = build_instance(view, j, d=2, b=2, tp_options=(1, 2, 4, 8))
    assert inst is not None and inst.b == 2
    for r, menu in zip(inst.regions, inst.menus):
        per_server = sim.topo.regions[r].gpus_per_server
        assert menu and all(t <= per_server and j.model.heads % t == 0 and g % (2 * t) == 0 for g, t in menu)
        assert {t for _, t in menu} == {t for t in (1, 2, 4, 8) if t <= per_server and j.model.heads % t == 0}


def test_time_limit_is_honoured():
    sc = load_scenario("spider-64")
    sim = make_simulator(sc, 0)
    view = sim.view()
    job0 = view.waiting[0]
    inst = build_instance(view, job0, d=1, tp_options=(1, 2, 4, 8))
    assert inst is not None and len(inst.regions) == 64
    t = time.perf_counter()
    sol = solve_instance(inst, time_limit=0.5)
    elapsed = time.perf_counter() - t
    assert inst.stats["variables"] > 64 * 64  # the ordering arcs alone: the search space blow-up
    assert elapsed < 30.0  # model building + a 0.5 s solve, not an unbounded search
    if sol is not None:
        assert sol[2] is False or elapsed < 5.0


def test_agent_plans_are_feasible_and_counted():
    sc = load_scenario("spider-8").with_overrides(workload={"num_jobs": 4})
    sim = make_simulator(sc, 1)
    agent = ILPAgent(time_limit=1.0, dp_options=(1, 2))
    plan = agent.decide(sim.view())
    assert plan is not None and sim.view().evaluate(plan).feasible
    assert agent.solves >= 1 and agent.evaluations >= 1


def test_solver_timeout_falls_back_to_first_fit_and_the_episode_ends():
    # 64 regions and a 0.05 s limit: HiGHS finds no incumbent, so without the fallback no job
    # would ever start and the episode would idle to its horizon
    sc = load_scenario("spider-64").with_overrides(workload={"num_jobs": 2})
    agent = ILPAgent(time_limit=0.05, dp_options=(1,), micro_batches=(1,), max_regions=None)
    report = make_simulator(sc, 0).run(agent.decide)
    assert agent.fallbacks >= 1
    assert report.finished == 2


def test_the_default_budget_is_nodes_so_the_load_cannot_change_the_plans(monkeypatch):
    """By default every MILP gets 1,000 nodes and at most the 16 regions with the most free compute; the wall
    clock is only a safety (30 s, 15x the slowest such solve measured), so a slower machine gives the same plan."""
    from sfenv.agents import ilp

    asked = []
    real = ilp.solve

    def spy(prob, time_limit=2.0, grace_s=5.0, node_limit=None):
        asked.append((time_limit, node_limit))
        return real(prob, time_limit, grace_s, node_limit=node_limit)

    monkeypatch.setattr(ilp, "solve", spy)
    sc = load_scenario("spider-32").with_overrides(workload={"num_jobs": 2})
    plans = []
    for safety in (30.0, 300.0):
        agent = ILPAgent(time_limit=safety, dp_options=(1, 2), micro_batches=(1,))
        view = make_simulator(sc, 0).view()
        plans.append(agent.plan(view, view.waiting[0])[0])
        assert agent.time_limited == 0 and agent.last_stats["stopped_by"] in ("", "nodes")
    assert plans[0] == plans[1]
    assert {nodes for _, nodes in asked} == {1000} and ILPAgent().time_limit == 30.0 and ILPAgent().max_regions == 16
    with pytest.raises(ValueError, match="node_limit"):
        ILPAgent(node_limit=0)


def test_results_of_the_ilps_earlier_defaults_are_not_resumed_with_its_new_ones():
    """A results file records the ILP's revision (2: the node budget), so a file written under the 2 s wall-clock
    defaults (no revision) has other settings and is refused rather than mixed."""
    from sfenv.app.evaluate import agent_settings

    assert agent_settings("ilp") == {"kwargs": {}, "revision": 2}
    assert agent_settings("genetic") == {"kwargs": {}}
