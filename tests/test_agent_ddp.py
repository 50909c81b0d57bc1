"""The data-parallel (DDP-style) baseline: plan shape, the model's ordering against pipelining over a
slow WAN, and episodes through the env on every bundled scenario."""

from __future__ import annotations

import gymnasium as gym
import pytest
from agent_worlds import job, region, world
from envs import SWEPT_SCENARIOS
from sfenv.agents.ddp import DataParallelAgent
from sfenv.agents.fifo import FIFOAgent

import sfenv  # noqa: F401
from sfenv.model.perf import Plan, Stage
from sfenv.registration import ENV_IDS
from sfenv.world.topology import Link


def _two_regions(gbps: float, min_gpus: int = 16, model: str = "gpt-1.3b"):
    return world([region("a", 8, "z"), region("b", 8, "z")], [Link(0, 1, gbps, 30)], {"z": 50.0},
                 [job(0, model=model, min_gpus=min_gpus, max_gpus=16, batch=64)])


def test_ddp_plan_is_one_stage_with_replicas_in_both_regions():
    sim = _two_regions(1.0)
    plan = DataParallelAgent().decide(sim.view())
    assert plan is not None and plan.num_stages == 1
    st = plan.stages[0]
    assert st.layers == sim.jobs[0].spec.model.layers and st.tp == 1
    assert dict(st.placement) == {0: 8, 1: 8}
    perf = sim.view().evaluate(plan)
    assert perf.feasible and not perf.hop_times and perf.allreduce_times[0] > 0 and perf.wan_bytes_per_iter > 0


def test_ddp_is_worse_than_pipelining_across_a_slow_wan():
    sim = _two_regions(1.0)
    view = sim.view()
    ddp = DataParallelAgent().decide(view)
    pipe = FIFOAgent().decide(view)  # plain 1F1B pipeline: stages follow the chain, DP inside regions
    assert pipe is not None and pipe.num_stages >= 2 and all(len(s.regions) == 1 for s in pipe.stages)
    t_ddp, t_pipe = view.evaluate(ddp).iter_time, view.evaluate(pipe).iter_time
    assert t_pipe < t_ddp
    # the gap comes from the WAN: it narrows when the link gets 100x faster
    fast = _two_regions(100.0).view()
    assert fast.evaluate(ddp).iter_time / fast.evaluate(pipe).iter_time < t_ddp / t_pipe


def test_ddp_stays_in_one_region_when_one_region_holds_the_job():
    sim = world([region("a", 8, "z"), region("b", 16, "z")], [Link(0, 1, 1.0, 30)], {"z": 50.0},
                [job(0, min_gpus=8, max_gpus=16, batch=64)])
    plan = DataParallelAgent().decide(sim.view())
    assert plan is not None and plan.regions == (1,) and plan.gpus == 16


def test_ddp_uses_the_smallest_tensor_degree_that_fits():
    sim = world([region("a", 16, "z")], [], {"z": 50.0}, [job(0, model="gpt-13b", min_gpus=8, max_gpus=16, batch=64)])
    view = sim.view()
    plan = DataParallelAgent().decide(view)
    assert plan is not None and plan.stages[0].tp > 1 and view.evaluate(plan).feasible
    smaller = plan.stages[0].tp // 2
    for recompute in (False, True):  # half the degree does not fit, with or without recomputation
        st = Stage(plan.stages[0].layers, ((0, 16 // smaller),), smaller)
        assert not view.evaluate(Plan(0, (st,), recompute=recompute)).feasible


def test_ddp_waits_in_arrival_order():
    sim = world([region("a", 8, "z")], [], {"z": 50.0},
                [job(0, min_gpus=16, max_gpus=16), job(1, min_gpus=4, max_gpus=4)])
    view = sim.view()
    assert view.can_start(Plan(1, (Stage.at(0, 24, dp=4),)))  # job 1 could start, but job 0 is first
    assert DataParallelAgent().decide(view) is None


def test_a_model_no_server_can_replicate_falls_back_to_a_pipeline():
    sim = world([region("a", 8, "z", gpu="A6000"), region("b", 8, "z", gpu="A6000")], [Link(0, 1, 10.0, 30)],
                {"z": 50.0}, [job(0, model="llama-30b", min_gpus=16, max_gpus=16, batch=64)])
    view = sim.view()
    assert not DataParallelAgent.replica_fits(view, view.job(0))  # 16 x 30B / 8 GPUs > 48 GB
    agent = DataParallelAgent()
    plan = agent.decide(view)
    assert plan is not None and plan.num_stages > 1 and agent.fallbacks == 1
    assert plan == FIFOAgent().decide(view)
    assert DataParallelAgent(fallback=False).decide(view) is None


ENV_FOR = {v: k for k, v in reversed(list(ENV_IDS.items()))}


@pytest.mark.parametrize("scenario", SWEPT_SCENARIOS)  # variants (envs.VARIANT_OF) aside
def test_ddp_plays_every_bundled_scenario_through_the_env(scenario):
    env = gym.make(ENV_FOR[scenario], num_jobs=6)
    agent = DataParallelAgent().bind(env)
    for seed in (0, 1):
        obs, info = env.reset(seed=seed)
        done = False
        while not done:
            action, _ = agent.predict(obs, deterministic=True)
            obs, _, term, trunc, info = env.step(int(action))
            assert not info["invalid_action"], (scenario, seed)
            done = term or trunc
        report = info["episode_report"]
        assert report["jobs"] == 6 and report["unfinished"] == 0, (scenario, seed)
    env.close()
