"""BACE-Pipe behaviour on constructed cases."""

from __future__ import annotations

from agent_worlds import job, region, world
from sfenv.agents.bace_pipe import BACEPipeAgent

from sfenv.model.perf import PerfParams
from sfenv.sim import SimConfig
from sfenv.world.topology import Link


def test_prefers_the_cheaper_of_two_equal_regions():
    for cheap in (0, 1):
        prices = {"z0": 30.0 if cheap == 0 else 90.0, "z1": 30.0 if cheap == 1 else 90.0}
        # two identical regions, each able to hold the job: equal-speed paths, only the price differs
        single = world([region("a", 32, "z0"), region("b", 32, "z1")], [Link(0, 1, 10, 10)], prices,
                       [job(0, min_gpus=8, max_gpus=32)])
        plan = BACEPipeAgent().decide(single.view())
        assert plan is not None and plan.regions == (cheap,)
        # a job bigger than either region: the path spans both, Cost-Min fills the cheap one first
        span = world([region("a", 24, "z0"), region("b", 24, "z1")], [Link(0, 1, 100, 1)], prices,
                     [job(0, model="gpt-6.7b", min_gpus=30, max_gpus=40)])
        by = BACEPipeAgent().decide(span.view()).gpus_by_region()
        assert by[cheap] > by[1 - cheap]


def test_no_head_of_line_blocking():
    # head job needs more GPUs than are free; small jobs behind it must start
    jobs = [job(0, model="gpt-13b", min_gpus=64, max_gpus=64), job(1, min_gpus=8, max_gpus=16, arrival=1.0),
            job(2, min_gpus=8, max_gpus=16, arrival=2.0)]
    sim = world([region("a", 32, "z0"), region("b", 16, "z0")], [Link(0, 1, 1, 50)], {"z0": 50.0}, jobs)
    agent = BACEPipeAgent()
    while len(sim.waiting) < 3:
        sim.wait()
    plan = agent.decide(sim.view())
    assert plan is not None and plan.job_id in (1, 2)
    # the FIFO-ordered ablation without priority still skips the infeasible head (no blocking either)
    assert BACEPipeAgent(priority=False).decide(sim.view()).job_id in (1, 2)


def test_ablation_switches_change_behaviour():
    # priority: a long job arrives first, a short one second; priority serves the short one first
    jobs = [job(0, iterations=5000, min_gpus=8, max_gpus=8), job(1, iterations=50, min_gpus=8, max_gpus=8, arrival=1.0)]
    sim = world([region("a", 8, "z0")], [], {"z0": 50.0}, jobs)
    while len(sim.waiting) < 2:
        sim.wait()
    assert BACEPipeAgent().decide(sim.view()).job_id == 1
    assert BACEPipeAgent(priority=False).decide(sim.view()).job_id == 0
    # pathfinder: the only second region sits behind a very slow link; the stall-free rule refuses it
    slow = world([region("a", 16, "z0"), region("b", 16, "z0")], [Link(0, 1, 0.01, 200)], {"z0": 50.0},
                 [job(0, model="gpt-6.7b", min_gpus=24, max_gpus=32)])
    assert BACEPipeAgent().decide(slow.view()) is None
    plan = BACEPipeAgent(pathfinder=False).decide(slow.view())
    assert plan is not None and len(plan.regions) == 2
    # cost_min: fill by price vs by capacity
    prices = {"z0": 90.0, "z1": 20.0}
    cm = world([region("a", 24, "z0"), region("b", 20, "z1")], [Link(0, 1, 100, 1)], prices,
               [job(0, model="gpt-6.7b", min_gpus=32, max_gpus=32)])
    with_cm = BACEPipeAgent().decide(cm.view()).gpus_by_region()
    without = BACEPipeAgent(cost_min=False).decide(cm.view()).gpus_by_region()
    assert with_cm.get(1, 0) > without.get(1, 0)


# ---------------------------------------------------------------- K*, strict start, paths, TP
import itertools  # noqa: E402

import pytest  # noqa: E402
from sfenv.agents.bace_pipe import K_GRID, k_star, knee_point, pp_plan  # noqa: E402

from sfenv.scenario import load_scenario  # noqa: E402
from sfenv.sim import make_simulator  # noqa: E402
from sfenv.world.workload import MODEL_ZOO, JobSpec  # noqa: E402


def test_knee_point_on_hand_curves():
    # perfect scaling keeps growing to the last point
    assert knee_point([(k, 100.0 / k) for k in (1, 2, 4, 8, 16)]) == 16
    # T = C/k + a: doubling k from k gives marginal/average = (C/2k)/(C/2k + a) >= 1/2 iff 2k <= C/a
    c, a = 64.0, 1.0
    curve = [(k, c / k + a) for k in (1, 2, 4, 8, 16, 32, 64, 128)]
    assert knee_point(curve, 0.5) == 64
    assert knee_point(curve, 0.8) < knee_point(curve, 0.5)  # a stricter threshold stops earlier
    # a dip (e.g. recomputation switching on) does not stop the search if a later point passes
    assert knee_point([(8, 10.0), (16, 11.0), (32, 2.0)]) == 32
    with pytest.raises(ValueError):
        knee_point([])


def _bace6_job(model) -> JobSpec:
    return JobSpec(0, model, 256, 100, 0.0, 8, 256)


def test_kstar_below_grid_top_and_grows_with_model_size():
    view = make_simulator(load_scenario("bace-6"), 0).view()
    sizes = ["gpt-1.3b", "gpt-6.7b", "gpt-13b"]
    ks = [k_star(view, _bace6_job(MODEL_ZOO[m])).k for m in sizes]
    assert all(k < K_GRID[-1] for k in ks), ks
    assert ks == sorted(ks) and ks[0] < ks[-1], ks
    # the bace-6 models: the 14B one stays below its 128-GPU cap, and no model's K* is the memory minimum
    sc = load_scenario("bace-6")
    models = {m.name: m.spec() for m in sc.cfg.workload.models}
    bace = {n: k_star(view, JobSpec(0, m, 256, 100, 0.0, 8, 128)) for n, m in models.items()}
    assert bace["qwen2.5-14b"].k < 128
    assert all(b.k > b.curve[0][0] for b in bace.values())
    # the knee is the rule's answer on the curve the model gives
    for b in bace.values():
        assert b.k == knee_point(b.curve)


def test_never_starts_below_kstar_it_waits():
    # K* GPUs exist, but another job holds 8 of them: enough is free for a smaller pipeline (CR-LCF,
    # capped at K* but not held to it, starts one), but BACE-Pipe waits
    from sfenv.agents.bace_baselines import CRLCFAgent

    j = job(0, model="gpt-13b", min_gpus=8, max_gpus=64)
    agent = BACEPipeAgent()
    two = world([region("a", 64, "z0"), region("b", 64, "z0")], [Link(0, 1, 100, 1)], {"z0": 50.0}, [j])
    kk = agent.kstar(two.view(), j).k
    assert kk >= 24
    blocker = job(0, model="gpt-1.3b", min_gpus=8, max_gpus=8)
    target = job(1, model="gpt-13b", min_gpus=8, max_gpus=64, arrival=1.0)
    sim = world([region("a", kk // 2 + 8, "z0"), region("b", kk - kk // 2 - 8, "z0")], [Link(0, 1, 100, 1)],
                {"z0": 50.0}, [blocker, target])
    while len(sim.waiting) < 2:
        sim.wait()
    view = sim.view()
    first = next(p for p in CRLCFAgent().propose(view, blocker) if view.can_start(p))
    assert first.regions == (0,)
    sim.schedule(first)
    assert agent.kstar(view, target).k == kk
    assert int(view.free_gpus.sum()) == kk - 8
    assert CRLCFAgent().decide(view) is not None
    assert agent.decide(view) is None
    # with enough GPUs it starts on exactly K*
    plan = agent.decide(two.view())
    assert plan is not None and plan.gpus == kk


def test_bace6_episode_every_run_on_kstar_gpus():
    sc = load_scenario("bace-6")
    agent = BACEPipeAgent()
    sim = make_simulator(sc, 0)
    view = sim.view()
    sim.run(agent.decide)
    for rec in sim.records():
        kk = agent.kstar(view, view.job(rec.job_id)).k
        assert rec.segments, f"job {rec.job_id} never ran"
        for _, _, placement in rec.segments:
            assert sum(n for _, n in placement) == kk


def test_picks_cheapest_feasible_path_not_the_first_start():
    # region 0 is the largest (tried first by every start order) and the dearest; two cheap
    # regions together hold K* = 16; the cheapest path is theirs, found by brute force too
    j = job(0, model="gpt-1.3b", min_gpus=16, max_gpus=16, iterations=500)
    # (big-dear has H100s: the fastest region, so without Cost-Min another path wins than with it)
    regs = [region("big-dear", 16, "dear", gpu="H100-SXM"), region("cheap-a", 8, "a"), region("cheap-b", 8, "b"),
            region("mid", 8, "mid")]
    links = [Link(0, 1, 100, 5), Link(1, 2, 100, 5), Link(2, 3, 100, 5), Link(0, 3, 100, 5)]
    sim = world(regs, links, {"dear": 300.0, "a": 40.0, "b": 60.0, "mid": 150.0}, [j])
    view = sim.view()
    agent = BACEPipeAgent()
    plan = agent.decide(view)
    assert plan is not None and set(plan.regions) == {1, 2} and plan.gpus == 16
    best = float("inf")
    for n in range(1, 5):
        for path in itertools.permutations(range(4), n):
            res = agent.path_plan(view, j, list(path), 16)
            if res is not None:
                best = min(best, agent.job_cost_usd(view, j, res[1]))
    assert agent.job_cost_usd(view, j, view.evaluate(plan, j)) == pytest.approx(best)
    # without Cost-Min the fastest of the paths it examines wins instead
    fast = BACEPipeAgent(cost_min=False)
    plan = fast.decide(view)
    ks = fast.kstar(view, j)
    times = [res[1].iter_time for path in fast.find_paths(view, j, ks.k, ks.stage_compute)
             if (res := fast.path_plan(view, j, path, 16)) is not None]
    assert view.evaluate(plan, j).iter_time == pytest.approx(min(times))
    assert agent.job_cost_usd(view, j, view.evaluate(plan, j)) > best  # and it is not the cheapest


def test_stall_test_uses_transfer_time_not_latency():
    # a very long but wide link: transfer is far below stage compute, so the hop is stall-free (with
    # enough TCP connections to fill the link over the 800 ms round trip: the window bound is
    # tests/test_transport.py's subject)
    j = job(0, model="gpt-6.7b", min_gpus=32, max_gpus=32)
    wide_tcp = SimConfig(perf=PerfParams(wan_streams=4096))
    far = world([region("a", 16, "z0"), region("b", 16, "z0")], [Link(0, 1, 100, 400)], {"z0": 50.0}, [j],
                wide_tcp)
    plan = BACEPipeAgent().decide(far.view())
    assert plan is not None and len(plan.regions) == 2


def test_tensor_degree_is_the_models_best():
    view = make_simulator(load_scenario("bace-6"), 0).view()
    j = JobSpec(0, MODEL_ZOO["gpt-13b"], 256, 100, 0.0, 8, 256)
    best = pp_plan(view, j, [1], [64])
    assert best is not None
    for tp in (1, 2, 4, 8):  # brute force over tensor degrees (recomputation only if needed)
        for recompute in (False, True):
            from sfenv.model.planning import chain_plan

            plan = chain_plan(j, view.topo, [1], [64 // tp], dp=1, tp=tp, recompute=recompute)
            if plan is None:  # more stages than layers
                break
            perf = view.evaluate(plan, j)
            if perf.feasible:
                assert best[1].iter_time <= perf.iter_time + 1e-12
                break


def test_priority_overtakes_on_bace6():
    # some decision on bace-6 starts a later job while an earlier one waits whose own plan was startable
    sc = load_scenario("bace-6")
    overtakes = 0
    for seed in range(6):
        agent = BACEPipeAgent()
        sim = make_simulator(sc, seed)

        def decide(view, agent=agent):
            nonlocal overtakes
            plan = agent.decide(view)
            if plan is not None:
                earliest = view.waiting[0]
                if plan.job_id != earliest.job_id and any(view.can_start(p) for p in agent.propose(view, earliest)):
                    overtakes += 1
            return plan

        sim.run(decide)
        if overtakes:  # one seed with an overtake is enough (the search costs more since plans are completed)
            break
    assert overtakes > 0


def _many_paths_world():
    """A dear hub with six small neighbours (hundreds of paths hold K* = 16 from it) and a cheap pair.

    The hub is the first start region (most free GPUs, lowest index); its depth-first search
    prefers the wide links to the small regions, so its first dozens of paths all use the hub.
    The cheap pair (r7, r8) holds K* alone, behind a narrower link, and is a later start.
    """
    j = job(0, model="gpt-1.3b", min_gpus=16, max_gpus=16, iterations=500)
    regs = ([region("hub", 8, "dear")] + [region(f"small{i}", 2, "mid") for i in range(1, 7)]
            + [region("cheap-a", 8, "cheap"), region("cheap-b", 8, "cheap")])
    links = [Link(a, b, 100, 1) for a in range(7) for b in range(a + 1, 7)]
    links += [Link(7, 8, 100, 1), Link(0, 7, 10, 1)]
    return world(regs, links, {"dear": 300.0, "mid": 150.0, "cheap": 20.0}, [j]), j


def test_every_start_region_gets_its_own_path_budget():
    sim, j = _many_paths_world()
    view = sim.view()
    agent = BACEPipeAgent(paths_per_start=8)
    ks = agent.kstar(view, j)
    assert ks is not None and ks.k == 16
    paths = agent.find_paths(view, j, ks.k, ks.stage_compute)
    starts = {p[0] for p in paths}
    assert {0, 7, 8} <= starts  # not only the first start's depth-first search
    assert all(sum(1 for p in paths if p[0] == s) <= 8 for s in starts)
    assert sum(1 for p in paths if p[0] == 0) == 8  # the hub alone has far more than the budget
    # the cheaper path comes from a later start region, and BACE-Pipe picks it
    plan = agent.decide(view)
    assert plan is not None and set(plan.regions) == {7, 8}
    hub_costs = [agent.job_cost_usd(view, j, res[1]) for p in paths if p[0] == 0
                 if (res := agent.path_plan(view, j, p, 16)) is not None]
    assert hub_costs and agent.job_cost_usd(view, j, view.evaluate(plan, j)) < min(hub_costs)


def test_paths_per_start_must_be_positive():
    with pytest.raises(ValueError, match="paths_per_start"):
        BACEPipeAgent(paths_per_start=0)
