"""Ordering baselines: every queue order orders as named, and the combined agent serves in that order."""

import pytest
from sfenv.agents.bace_pipe import BACEPipeAgent
from sfenv.agents.ordering import ORDERS, OrderedAgent, gpu_demand, order_jobs, remaining_work
from sfenv.agents.registry import make_agent, resolve_names

from sfenv.errors import UnknownName
from sfenv.scenario import load_scenario
from sfenv.sim import make_simulator


def _burst(name: str, jobs: int = 24):
    """A scenario whose jobs all arrive within minutes, so queues are long."""
    return load_scenario(name).with_overrides(workload={"num_jobs": jobs, "arrival": {"rate_per_hour": 600}})


def _queues(agent, sc, seed=0, limit=60):
    """Play ``agent``; yield (view, its order, its decision) at each of the first decision points with >= 3 waiting."""
    sim = make_simulator(sc, seed)
    agent.reset(seed)
    view = sim.view()
    n = 0
    while not sim.done and n < limit:
        order = agent.order(view)
        plan = agent.decide(view)
        if len(view.waiting) >= 3:
            yield view, order, plan
            n += 1
        if plan is None:
            sim.wait()
        else:
            sim.schedule(plan)
            sim.advance()


def _work(view, j):
    return 6.0 * j.model.params * j.global_batch * j.model.seq_len * (j.iterations - view.waiting_progress(j.job_id))


@pytest.mark.parametrize("scenario", ["spider-8", "cee"])
def test_each_order_sorts_by_its_key(scenario):
    seen = 0
    for view, order, _ in _queues(make_agent("fifo+swf"), _burst(scenario)):
        waiting = view.waiting
        for name in ORDERS:
            got = order_jobs(view, name)
            assert sorted(j.job_id for j in got) == sorted(j.job_id for j in waiting)
            if name == "fifo":
                assert [j.arrival for j in got] == sorted(j.arrival for j in waiting)
            elif name == "swf":
                w = [_work(view, j) for j in got]
                assert w == sorted(w) and w == pytest.approx([remaining_work(view, j) for j in got])
            elif name == "fgf":
                d = [gpu_demand(view, j) for j in got]
                assert d == sorted(d) and all(x >= j.min_gpus for x, j in zip(d, got))
            else:
                assert [j.job_id for j in got] == [j.job_id for j in BACEPipeAgent().order(view)]
        assert [j.job_id for j in order] == [j.job_id for j in order_jobs(view, "swf")]
        seen += 1
    assert seen >= 3


def _mixed(jobs: int = 24):
    """spider-8 with 1.3B and 13B models and min 1 GPU: the 13B model needs several GPUs for its memory."""
    return _burst("spider-8", jobs).with_overrides(workload={
        "min_gpus": 1, "models": [{"name": "gpt-1.3b"}, {"name": "gpt-13b"}]})


def test_orders_differ_where_job_sizes_differ():
    """With 1.3B and 13B jobs, swf and fgf reorder the queue somewhere."""
    differs = {"swf": False, "fgf": False}
    for view, _, _ in _queues(make_agent("fifo+fifo"), _mixed()):
        fifo = [j.job_id for j in order_jobs(view, "fifo")]
        for name in differs:
            differs[name] |= [j.job_id for j in order_jobs(view, name)] != fifo
    assert all(differs.values()), differs


@pytest.mark.parametrize("name", ["fifo+swf", "spinsearch+swf", "spinsearch+bace", "fifo+fgf"])
def test_decision_is_the_first_job_in_order_that_can_start(name):
    agent = make_agent(name)
    seen = 0
    for view, order, plan in _queues(agent, _burst("spider-8")):
        first = None
        for job in order:
            props = [p for p in agent.placement.propose(view, job, 1) if view.can_start(p)]
            if props:
                first = props[0]
                break
        assert plan == first
        seen += plan is not None
    assert seen >= 3


def test_swf_shortens_mean_jct_under_load():
    """The point of a size-based order: on a contended episode, fifo+swf beats blocking fifo on mean JCT."""
    sc = load_scenario("spider-8-contended")
    jct = {}
    for name in ("fifo", "fifo+swf"):
        agent = make_agent(name)
        agent.reset(0)
        jct[name] = make_simulator(sc, 0).run(agent.decide).mean_jct_s
    assert jct["fifo+swf"] < jct["fifo"]


def test_names_and_errors():
    a = make_agent("spinsearch+swf")
    assert isinstance(a, OrderedAgent) and a.name == "spinsearch+swf" and a.placement.name == "spinsearch"
    assert "spinsearch+swf" in resolve_names("ordering")
    assert make_agent("spantrain+fifo").replans == make_agent("spantrain").replans
    with pytest.raises(UnknownName, match="queue order"):
        make_agent("fifo+nope")
    with pytest.raises(UnknownName, match="unknown agent"):
        make_agent("nope+swf")
    with pytest.raises(UnknownName):
        OrderedAgent(make_agent("fifo"), "sjf")


def test_blocking_waits_when_the_first_job_cannot_start():
    """A placement that cannot place the head job: blocking waits, backfilling starts the next job."""
    from sfenv.agents.fifo import FIFOAgent

    class NoHead(FIFOAgent):
        head = -1

        def propose(self, view, job, k=1):
            return [] if job.job_id == self.head else super().propose(view, job, k)

    placement = NoHead()
    free_agent, blocking = OrderedAgent(placement, "swf"), OrderedAgent(placement, "swf", blocking=True)
    checked = 0
    for view, order, _ in _queues(make_agent("fifo+swf"), _burst("spider-8")):
        placement.head = order[0].job_id
        plan = free_agent.decide(view)
        assert blocking.decide(view) is None
        if plan is not None:
            assert plan.job_id == next(j.job_id for j in order[1:] if placement.propose(view, j))
            checked += 1
    assert checked >= 3
