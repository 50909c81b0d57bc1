"""The one-pass evaluation of chain plans equals the general evaluation, bit for bit."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sfenv.model.perf import (
    SCHEDULES,
    PerfParams,
    Plan,
    Stage,
    _evaluate_chain,
    _evaluate_general,
    _Wan,
    evaluate_plan,
)
from sfenv.model.sharing import LOAD_ROWS
from sfenv.scenario import load_scenario
from sfenv.sim import make_simulator

SIM = make_simulator(load_scenario("spider-8"), 0)
TOPO = SIM.topo
JOBS = [js.spec for js in SIM.jobs[:12]]
PARAMS = PerfParams()


@st.composite
def chain_plans(draw):
    job = draw(st.sampled_from(JOBS))
    p = draw(st.integers(1, min(12, job.model.layers)))
    chain = draw(st.lists(st.integers(0, TOPO.num_regions - 1), min_size=p, max_size=p))
    cuts = sorted(draw(st.lists(st.integers(1, job.model.layers - 1), min_size=p - 1, max_size=p - 1,
                                unique=True))) if p > 1 else []
    bounds = [0, *cuts, job.model.layers]
    layers = [bounds[i + 1] - bounds[i] for i in range(p)]
    dp = draw(st.sampled_from([1, 2, 3, 4, 16]))  # 3 and 16: data-parallel rings across servers, a last one part-full
    tp = draw(st.sampled_from([1, 2, 4, 8, 3]))  # 3 divides no head count here: infeasible plans too
    stages = tuple(Stage.at(r, n, dp, tp) for r, n in zip(chain, layers))
    plan = Plan(job.job_id, stages, micro_batch=draw(st.sampled_from([1, 2, 4])),
                schedule=draw(st.sampled_from(SCHEDULES)), recompute=draw(st.booleans()),
                extra_inflight=draw(st.integers(0, 3)))
    n = TOPO.num_directed  # other jobs' load per directed link (the rows of sfenv.model.sharing.LOAD_ROWS)
    busy = np.array(draw(st.lists(st.sampled_from([0.0, 0.3, 1.0, 2.5]), min_size=n, max_size=n)))
    phased = draw(st.sampled_from([0.0, 0.5]))  # the part of the bursts sending in one pass (GPipe)
    burst_bps = busy * 2e8
    var = burst_bps * burst_bps * draw(st.sampled_from([0.0, 1.0]))
    decay = var * draw(st.sampled_from([0.0, 0.5, 50.0]))  # how fast the bursts' on-off state decorrelates (v3)
    load = np.stack([busy, busy * draw(st.sampled_from([0.0, 0.5])), burst_bps, phased * busy, phased * burst_bps,
                     phased * busy * draw(st.sampled_from([0.5, 20.0])), var, phased * var, decay])
    assert load.shape == (LOAD_ROWS, n)
    cap = TOPO.link_bw_bps * np.array(draw(st.lists(st.sampled_from([0.25, 0.5, 1.0]),
                                                    min_size=TOPO.num_links, max_size=TOPO.num_links)))
    params = dataclasses.replace(PARAMS, wan_sharing=draw(st.sampled_from(["v2", "v3"])))
    return plan, job, cap, load, params


def _wan(plan, job, cap=None, load=None, params=PARAMS):
    """The WAN side :func:`evaluate_plan` hands both paths (None inside one region)."""
    return _Wan(plan, job, TOPO, params, cap, load, None) if len(plan.regions) > 1 else None


@settings(max_examples=300, deadline=None, derandomize=True)
@given(case=chain_plans())
def test_chain_fast_path_equals_general_path(case):
    plan, job, cap, load, params = case
    fast = _evaluate_chain(plan, job, TOPO, params, _wan(plan, job, cap, load, params))
    general = _evaluate_general(plan, job, TOPO, params, _wan(plan, job, cap, load, params))
    assert fast is not None
    assert dataclasses.asdict(fast) == dataclasses.asdict(general)
    assert [type(x) for x in fast.transfer_times] == [type(x) for x in general.transfer_times]


def test_split_replicas_take_the_general_path():
    job = JOBS[0]
    half = job.model.layers // 2
    split = Stage(layers=half, placement=((0, 1), (1, 1)))
    plan = Plan(job.job_id, (split, Stage(layers=job.model.layers - half, placement=((2, 2),))))
    assert _evaluate_chain(plan, job, TOPO, PARAMS, _wan(plan, job)) is None
    perf = evaluate_plan(plan, job, TOPO, PARAMS)
    assert perf == _evaluate_general(plan, job, TOPO, PARAMS, _wan(plan, job))


@pytest.mark.parametrize("stages, reason", [
    (lambda L: (Stage.at(0, L - 1, 2), Stage.at(1, 1, 1)), "replicas"),
    (lambda L: (Stage.at(0, L - 1), Stage.at(99, 1)), "unknown region"),
    (lambda L: (Stage.at(0, L - 1, tp=3), Stage.at(1, 1)), "must divide"),
])
def test_fast_path_rejects_malformed_chains_like_the_general_path(stages, reason):
    job = JOBS[0]
    plan = Plan(job.job_id, stages(job.model.layers))
    fast = _evaluate_chain(plan, job, TOPO, PARAMS, _wan(plan, job))
    assert fast is not None and not fast.feasible and reason in fast.reason
    assert fast == _evaluate_general(plan, job, TOPO, PARAMS, _wan(plan, job))
