"""SpinSearch: avoids slow links it can avoid, and its work grows at most quadratically."""

from __future__ import annotations

import numpy as np
from agent_worlds import job, region, world
from sfenv.agents.spinsearch import SpinSearchAgent

from sfenv.scenario import Scenario
from sfenv.sim import SimConfig, Simulator
from sfenv.world.generators import spider_topology
from sfenv.world.prices import PriceSeries
from sfenv.world.topology import Link


def test_avoids_a_10x_slower_link_at_equal_gpu_count():
    # seed A (16 GPUs) has two neighbours with 16 free GPUs each: B over 10 Gbit/s, C over 1 Gbit/s
    for fast, slow in ((1, 2), (2, 1)):
        links = [Link(0, fast, 10.0, 20.0), Link(0, slow, 1.0, 20.0)]
        sim = world([region("A", 24, "z"), region("B", 16, "z"), region("C", 16, "z")], links, {"z": 50.0},
                    [job(0, model="gpt-6.7b", min_gpus=32, max_gpus=40)])
        plan = SpinSearchAgent().decide(sim.view())
        assert plan is not None and len(plan.regions) == 2
        assert slow not in plan.regions and fast in plan.regions


def test_prefers_one_cluster_when_it_suffices():
    sim = world([region("A", 64, "z"), region("B", 64, "z")], [Link(0, 1, 1.0, 40.0)], {"z": 50.0},
                [job(0, min_gpus=16, max_gpus=64)])
    plan = SpinSearchAgent().decide(sim.view())
    assert len(plan.regions) == 1


def _evaluations(n: int) -> int:
    gen = spider_topology(n, seed=n)
    sc = Scenario.from_dict({"name": f"s{n}", "topology": {"regions": gen.regions, "links": gen.links},
                             "prices": {"zones": gen.zones}})
    topo = sc.topology
    # a job bigger than any cluster, so chains must grow; every cluster has free GPUs
    jobs = [job(0, model="gpt-13b", min_gpus=int(topo.gpu_counts.max()) + 8, max_gpus=1024)]
    prices = PriceSeries(sorted({r.zone for r in topo.regions}), np.full((len(topo.regions), 24), 50.0))
    sim = Simulator(topo, prices, jobs, SimConfig())
    agent = SpinSearchAgent()
    agent.decide(sim.view())
    return agent.evaluations + agent.fits


def test_work_grows_at_most_quadratically():
    sizes = [8, 16, 32, 64]
    work = [_evaluations(n) for n in sizes]
    assert all(w > 0 for w in work)
    slope = np.polyfit(np.log(sizes), np.log(work), 1)[0]
    assert slope <= 2.0, (work, slope)
    assert max(w / n**2 for w, n in zip(work, sizes)) < 50


def _two_fast_vs_one_slow():
    # A: 32 slow V100 hold the job alone; B + C: 16 H100 each over a fast link, together faster
    regions = [region("A", 32, "z", "V100"), region("B", 16, "z", "H100-SXM"), region("C", 16, "z", "H100-SXM")]
    links = [Link(0, 1, 1.0, 80.0), Link(1, 2, 100.0, 2.0)]
    return world(regions, links, {"z": 50.0}, [job(0, model="gpt-6.7b", min_gpus=24, max_gpus=32)])


def test_ranked_chains_are_sorted_by_modelled_time():
    sim = _two_fast_vs_one_slow()
    view = sim.view()
    j = view.waiting[0]
    ranked = SpinSearchAgent().ranked_chains(view, j)
    assert len(ranked) >= 2
    times = [perf.iter_time for _, _, perf in ranked]
    assert times == sorted(times)
    for chain, plan, perf in ranked:
        assert set(plan.regions) == set(chain) and view.evaluate(plan, j).iter_time == perf.iter_time
    # a longer chain ranks first when it models faster: the old (length, free compute) order put [A] first
    assert ranked[0][0] == [1, 2] and [0] in [c for c, _, _ in ranked]


def test_spiderflow_hands_tpa_the_chains_with_the_lowest_modelled_time(monkeypatch):
    import sfenv.agents.spiderflow as sf

    sim = _two_fast_vs_one_slow()
    view = sim.view()
    j = view.waiting[0]
    seen: list[list[int]] = []
    real = sf.tpa_plan

    def spy(view, job, chain, *args, **kwargs):
        seen.append(list(chain))
        return real(view, job, chain, *args, **kwargs)

    monkeypatch.setattr(sf, "tpa_plan", spy)
    agent = sf.SpiderFlowAgent(n_chains=1)
    plan = agent.decide(view)
    ranked = SpinSearchAgent().ranked_chains(view, j)
    assert seen == [ranked[0][0]] == [[1, 2]]
    assert plan is not None and set(plan.regions) == {1, 2}
    slow = SpinSearchAgent().ranked_chains(view, j)[-1]
    assert slow[0] == [0] and view.evaluate(plan, j).iter_time < slow[2].iter_time
