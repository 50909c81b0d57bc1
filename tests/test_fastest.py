"""The fastest-region baseline: it places each job where its plan runs fastest, and that pays under load."""

import numpy as np
from sfenv.agents.registry import make_agent

from sfenv.model.planning import fit_plan
from sfenv.scenario import load_scenario
from sfenv.sim import make_simulator


def test_fastest_takes_the_region_with_the_shortest_iteration_time():
    sc = load_scenario("spider-8").with_overrides(workload={"num_jobs": 6})
    sim = make_simulator(sc, 1)
    view = sim.view()
    job = view.waiting[0]
    free = view.free_gpus
    times = {}
    for r in range(view.topo.num_regions):
        if free[r] >= job.min_gpus:
            res = fit_plan(job, view.topo, [r], [min(int(free[r]), job.max_gpus)], view.evaluate)
            if res is not None:
                times[r] = res[1].iter_time
    plans = make_agent("fastest").propose(view, job, k=3)
    assert [p.regions[0] for p in plans] == sorted(times, key=lambda r: (times[r], r))[:3]
    assert all(len(p.regions) == 1 for p in plans)
    fifo = make_agent("fifo").propose(view, job, k=1)[0]
    assert fifo.regions != plans[0].regions  # first fit takes region 0, which is not the fastest here
    assert times[plans[0].regions[0]] < times[fifo.regions[0]]


def test_fastest_swf_beats_fifo_swf_under_load():
    """Choosing the region by speed, not index, shortens mean JCT on the contended scenario (paired seeds)."""
    sc = load_scenario("spider-8-contended").with_overrides(workload={"num_jobs": 60})
    ratios = []
    for seed in range(3):
        jct = {}
        for name in ("fifo+swf", "fastest+swf"):
            agent = make_agent(name)
            agent.reset(seed)
            jct[name] = make_simulator(sc, seed).run(agent.decide).mean_jct_s
        ratios.append(jct["fastest+swf"] / jct["fifo+swf"])
    assert float(np.mean(ratios)) < 0.98, ratios
