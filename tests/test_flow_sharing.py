"""WAN sharing (sfenv.model.sharing) against hand-computed cases and the independent flow-level check.

The check plays jobs transfer by transfer with exact max-min sharing at every instant; the fast
path predicts expected rates from duties.  On random shared-link cases (a few jobs over two or
three links of 1-10 Gbit/s: pipelines under GPipe and 1F1B, data-parallel rings across regions,
hybrids, unequal micro-batches and replica counts) most jobs agree within 5 %; docs/model.md gives
the measured spread and the cases where they do not (time scales the expected rates average away).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from sfenv.experiments.flow_check import random_case, settled_times

from sfenv.model.flowcheck import max_min_rates, simulate_jobs
from sfenv.model.perf import PerfParams, Plan, Stage, evaluate_plan, plan_flow_groups
from sfenv.model.sharing import (
    BULK,
    BURST,
    BURST_BPS,
    BURST_DECAY,
    BURST_VAR,
    BUSY,
    PHASED_BPS,
    PHASED_BUSY,
    PHASED_CYCLE,
    FlowGroup,
    empty_load,
    group_rates,
)
from sfenv.sim.links import LinkState
from sfenv.world.hardware import get_gpu
from sfenv.world.topology import Link, Region, Topology
from sfenv.world.workload import MODEL_ZOO, JobSpec

GPU = get_gpu("A100-80GB")
WIDE_TCP = 1 << 20  # TCP connections per transfer where a test is not about the window bound


def _regions(n: int) -> list[Region]:
    return [Region(f"r{i}", GPU, 64, "z", intra_bw_gbps=100.0, intra_latency_ms=0.01) for i in range(n)]


# ---------------------------------------------------------------------------------------------- max-min
def test_progressive_filling_gives_the_textbook_max_min_rates():
    # Bertsekas & Gallager's example (Data Networks, 2nd ed., §6.5.2): links A (cap 1) and B (cap 1);
    # flow 0 crosses both, flows 1 and 2 only A, flow 3 only B: A is shared by three (1/3 each),
    # flow 3 takes the rest of B.
    rates = max_min_rates([(0, 1), (0,), (0,), (1,)], [1, 1, 1, 1], [math.inf] * 4, [1.0, 1.0])
    assert rates == pytest.approx([1 / 3, 1 / 3, 1 / 3, 2 / 3])
    # a bound frees capacity for the others; weights count transfers
    assert max_min_rates([(0,), (0,)], [1, 1], [0.2, math.inf], [1.0]) == pytest.approx([0.2, 0.8])
    assert max_min_rates([(0,), (0,)], [3, 1], [math.inf, math.inf], [1.0]) == pytest.approx([0.25, 0.25])


# ---------------------------------------------------------------------------------------------- the fast path
def _group(kind: int, links: tuple[int, ...], members: int = 1, key: int = 0) -> FlowGroup:
    return FlowGroup(kind, key, links, members, 8e8, 10, 0.0, 0.0)


def test_directions_do_not_compete():
    """A hop's activations and gradients cross a full-duplex link each way at the link's capacity."""
    topo = Topology(_regions(2), [Link(0, 1, 10.0, 20.0)])
    job = JobSpec(0, MODEL_ZOO["gpt-1.3b"], 64, 1, 0.0, 1, 64)
    plan = Plan(0, (Stage.at(0, 12, dp=2), Stage.at(1, 12, dp=2)), recompute="full")
    perf = evaluate_plan(plan, job, topo, PerfParams(wan_streams=WIDE_TCP))
    groups = plan_flow_groups(plan, topo, job)
    assert [(g.kind, g.key, g.links, g.members) for g in groups] == [(BURST, 0, (0,), 2), (BURST, 1, (1,), 2)]
    assert perf.flow_rates_bps == pytest.approx([5e9, 5e9])  # each way 10 Gbit/s over 2 replica pairs


def test_a_burst_meets_a_ring_as_often_as_the_ring_sends():
    """Processor sharing weighted by duty: a hop transfer finds a ring sending 60 % of the time (one more sharer)."""
    load = empty_load(2)
    load[:2, 0] = 0.6  # a ring step sending 60 % of the time: present, bulk
    rates, _ = group_rates([_group(BURST, (0,))], np.array([1e9, 1e9]), load, None, WIDE_TCP, 3.0 * 2**20)
    assert rates == pytest.approx([1e9 / 1.6])


def test_a_ring_gets_what_the_bursts_leave():
    """A flow needing less than its fair share leaves the rest: a ring takes the link minus the bursts' average rate."""
    load = empty_load(2)
    load[0, 0], load[2, 0] = 0.3, 0.15e9  # bursts sending 30 % of the time at 0.5 Gbit/s: 0.15 Gbit/s on average
    rates, _ = group_rates([_group(BULK, (0,), key=-1)], np.array([1e9, 1e9]), load, None, WIDE_TCP, 3.0 * 2**20)
    assert rates == pytest.approx([0.85e9])
    load[2, 0] = 0.9e9  # heavier bursts: equal sharing while they send bounds it from below
    rates, _ = group_rates([_group(BULK, (0,), key=-1)], np.array([1e9, 1e9]), load, None, WIDE_TCP, 3.0 * 2**20)
    assert rates == pytest.approx([1e9 / 1.3])


def test_a_ring_step_meets_a_gpipe_pass_frozen_when_shorter_than_that_jobs_iteration():
    """Phased bursts (a GPipe hop's pass) count as frozen sharers with weight 1 - S/T, as fluid beyond one cycle."""
    load = empty_load(2)
    load[BUSY, 0] = load[PHASED_BUSY, 0] = 0.5  # a GPipe hop present half the time ...
    load[BURST_BPS, 0] = load[PHASED_BPS, 0] = 0.25e9  # ... at 0.5 Gbit/s while it sends
    ring = _group(BULK, (0,), key=-1)  # 800 Mbit steps: 1.07 s at the fluid share of 0.75 Gbit/s
    step = 8e8 / 0.75e9
    load[PHASED_CYCLE, 0] = 0.5 * 4.0 * step  # that job's iteration: 4 steps long, so w = 3/4
    rates, _ = group_rates([ring], np.array([1e9, 1e9]), load, None, WIDE_TCP, 3.0 * 2**20)
    w = 0.75
    assert rates == pytest.approx([(1e9 - (1 - w) * 0.25e9) / (1 + w * 0.5)])
    load[PHASED_CYCLE, 0] = 0.5 * 0.9 * step  # an iteration shorter than the step: the ring averages the pass
    rates, _ = group_rates([ring], np.array([1e9, 1e9]), load, None, WIDE_TCP, 3.0 * 2**20)
    assert rates == pytest.approx([0.75e9])


def test_the_sharing_model_is_v5_unless_asked_and_named_when_wrong():
    """``wan_sharing``: env v5's model by default (env v6 keeps it); ``v4`` and ``v3`` on request with hashes of their
    own; ``v2`` with env v2's scenario hash and kept through every dump but the hash's; anything else names the field.
    Each earlier env version's settings (:data:`sfenv.registration.VERSION_SIM`) give the hash its bundled leaderboard
    entry recorded."""
    from sfenv.registration import VERSION_SIM
    from sfenv.runs.results import scenario_hash
    from sfenv.scenario import ScenarioError, load_scenario

    assert PerfParams().wan_sharing == "v5" and PerfParams(wan_sharing="v2").wan_sharing == "v2"
    with pytest.raises(ValueError, match="wan_sharing"):
        PerfParams(wan_sharing="v6")
    base = load_scenario("spider-8")
    v2 = base.with_overrides(sim={"wan_sharing": "v2"})
    assert base.cfg.sim.perf_params().wan_sharing == "v5" and v2.cfg.sim.perf_params().wan_sharing == "v2"
    assert scenario_hash(base.with_overrides(sim={"wan_sharing": "v5"})) == scenario_hash(base) != scenario_hash(v2)
    # a v2 scenario stays v2 through overrides and plain dumps (only the hash leaves the field out)
    assert v2.with_overrides(workload={"num_jobs": 3}).cfg.sim.wan_sharing == "v2"
    assert v2.cfg.model_dump()["sim"]["wan_sharing"] == "v2" and '"wan_sharing"' not in v2.cfg.identity_json()
    bace = load_scenario("bace-6").with_overrides(workload={"num_jobs": 5})
    # env v2's hash, as its bundled leaderboard entry (docs/results/leaderboard/entries/bace-6.json) recorded it
    assert scenario_hash(bace.with_overrides(sim=VERSION_SIM["v2"])) == "c8feacee734bace3"
    # env v3's hash, as its bundled entry recorded it before the v4 bump (at 54834ae)
    assert scenario_hash(bace.with_overrides(sim=VERSION_SIM["v3"])) == "a51f8878ba3cae0c"
    # env v4's hash, as its bundled entry recorded it before the v5 bump (at 6835150)
    assert scenario_hash(bace.with_overrides(sim=VERSION_SIM["v4"])) == "27cf0a06af7cfc9c"
    # env v5's hash, as its bundled entry recorded it before the v6 bump (at af1533e)
    assert scenario_hash(bace.with_overrides(sim=VERSION_SIM["v5"])) == "8fe4561c3f69662d" != scenario_hash(bace)
    v4 = base.with_overrides(sim={"wan_sharing": "v4"})
    assert v4.cfg.sim.perf_params().wan_sharing == "v4" and scenario_hash(v4) != scenario_hash(base)
    v3 = base.with_overrides(sim={"wan_sharing": "v3"})
    assert v3.cfg.sim.perf_params().wan_sharing == "v3" and scenario_hash(v3) not in (scenario_hash(base),
                                                                                     scenario_hash(v2))
    with pytest.raises(ScenarioError, match=r"sim\.wan_sharing"):
        base.with_overrides(sim={"wan_sharing": "v6"})


def test_skipping_zero_bubble_periods_is_the_default_and_off_keeps_env_v5s_hash():
    """``sim.skip_zero_bubble_periods``: on by default since env v6 (in the dump and the hash); off (env v5's) it
    reaches the model, round-trips through plain dumps and is left out of the hash, so env v5's scenarios keep theirs
    (the bundled bace-6 entry's, pinned above); only a boolean is taken."""
    from sfenv.runs.results import scenario_hash
    from sfenv.scenario import Scenario, ScenarioError, load_scenario

    base = load_scenario("bace-6").with_overrides(workload={"num_jobs": 5})
    off, on = (base.with_overrides(sim={"skip_zero_bubble_periods": v}) for v in (False, True))
    assert base.cfg.sim.perf_params().skip_zero_bubble_periods
    assert not off.cfg.sim.perf_params().skip_zero_bubble_periods
    assert scenario_hash(on) == scenario_hash(base) != scenario_hash(off)
    assert '"skip_zero_bubble_periods"' not in off.cfg.identity_json()
    assert off.cfg.model_dump()["sim"]["skip_zero_bubble_periods"] is False
    assert not Scenario.from_dict(off.cfg.model_dump()).cfg.sim.skip_zero_bubble_periods
    assert on.cfg.model_dump()["sim"]["skip_zero_bubble_periods"] is True
    with pytest.raises(ScenarioError, match=r"sim\.skip_zero_bubble_periods"):
        base.with_overrides(sim={"skip_zero_bubble_periods": "yes"})


def _switching_load(decay_per_s: float) -> np.ndarray:
    """Another job's burst on link 0 half the time at 0.5 Gbit/s, its on-off state decorrelating at ``decay_per_s``."""
    load = empty_load(2)
    load[BUSY, 0] = 0.5
    load[BURST_BPS, 0] = 0.5 * 0.5e9
    load[BURST_VAR, 0] = (0.5e9) ** 2 * 0.25
    load[BURST_DECAY, 0] = load[BURST_VAR, 0] * decay_per_s
    return load


@pytest.mark.parametrize("decay_per_s", [0.0, 1.0 / 1.2, 1e7])
def test_under_v3_a_burst_sees_other_bursts_come_and_go(decay_per_s):
    """v3: an 800 Mbit transfer (1.2 s at the frozen share) beside a burst on half the time: frozen (v2's
    1/1.5 Gbit/s) when that burst never switches during it, fluid (the link less its 0.25 Gbit/s average) when it
    switches fast, and at one correlation time (u = 1) the two-state Markov chain's exact mean time between
    (Kulkarni, Nicola & Trivedi 1987): ``1/r = 1/fluid + (1/frozen - 1/fluid)(1 - e^-1)``."""
    load = _switching_load(decay_per_s)
    frozen, fluid = 1e9 / 1.5, 0.75e9
    v2, _ = group_rates([_group(BURST, (0,))], np.array([1e9, 1e9]), load, None, WIDE_TCP, 3.0 * 2**20)
    v3, _ = group_rates([_group(BURST, (0,))], np.array([1e9, 1e9]), load, None, WIDE_TCP, 3.0 * 2**20,
                        switching=True)
    assert v2 == pytest.approx([frozen])
    u = 8e8 / frozen * decay_per_s
    expected = frozen if u == 0 else 1.0 / (1.0 / fluid + (1.0 / frozen - 1.0 / fluid) * (1.0 - math.exp(-u)) / u)
    assert v3 == pytest.approx([expected], rel=1e-6)
    assert frozen <= v3[0] <= fluid


def test_only_v3_counts_a_jobs_bursts_that_send_together_as_one_variance():
    """Two groups of one hop direction (replica pairs on different routes) on a common link send at the same
    moments: under v3 their rate variance adds their covariance, ``2 n1 n2 r1 r2 (min(d) - d1 d2)``; under v2 each
    group counts alone, as before the option."""
    from sfenv.model.sharing import load_of

    groups = [FlowGroup(BURST, 0, (0,), 2, 8e8, 10, 0.0, 0.0), FlowGroup(BURST, 0, (0, 1), 1, 8e8, 10, 0.0, 0.0)]
    rates, duty = [0.3e9, 0.5e9], [0.5, 0.4]
    levels = [[1e9], [1e9, 1e9]]
    alone = sum(g.members ** 2 * r * r * d * (1 - d) for g, r, d in zip(groups, rates, duty))
    _, v2 = load_of(groups, rates, levels, duty, 10.0)
    _, v3 = load_of(groups, rates, levels, duty, 10.0, None, switching=True)
    assert v2[BURST_VAR, 0] == pytest.approx(alone)
    assert v3[BURST_VAR, 0] == pytest.approx(alone + 2 * 2 * 1 * 0.3e9 * 0.5e9 * (0.4 - 0.5 * 0.4))
    assert v3[BURST_VAR, 1] == v2[BURST_VAR, 1]  # the second link carries one of them only


def test_a_pipelines_own_hops_send_together_as_its_schedule_has_them():
    """``hop_overlap`` replays the schedule: GPipe's forward and backward transfers never send at once; 1F1B's do
    most of the time when the WAN is the bottleneck and never when short transfers fall between long compute;
    ``own_load`` takes those shares instead of independent duties."""
    from sfenv.model.pipeline import default_windows, hop_overlap
    from sfenv.model.sharing import own_load

    gpipe = hop_overlap([1.0, 1.0], [0.01], [0.2], [0.2], 8, "gpipe", default_windows(2, 8, "gpipe"))
    assert gpipe == {(0, 1): 0.0, (1, 0): 0.0}
    windows = default_windows(2, 8, "1f1b")
    assert min(hop_overlap([1e-3, 1e-3], [0.01], [1.0], [1.0], 8, "1f1b", windows).values()) > 0.8
    assert max(hop_overlap([1.0, 1.0], [0.01], [0.01], [0.01], 8, "1f1b", windows).values()) == 0.0
    with pytest.raises(ValueError, match="zb-h1"):
        hop_overlap([1.0, 1.0], [0.01], [0.2], [0.2], 8, "zb-h1", windows)
    groups = [_group(BURST, (0,), key=0), _group(BURST, (0,), key=3)]
    independent = own_load(groups, [0.4, 0.4], 10.0, (0.5, 0.5, 1.0), 0.0)
    scheduled = own_load(groups, [0.4, 0.4], 10.0, (0.5, 0.5, 1.0), 0.0, {(0, 3): 0.25, (3, 0): 0.25})
    assert independent[0][1][0] == pytest.approx(0.4) and scheduled[0][1][0] == pytest.approx(0.25)


def test_a_bounded_ring_cannot_take_what_the_bursts_leave_beyond_its_bound():
    """A ring capped at 0.7 Gbit/s beside one burst group on 40 % of the time at 0.5 Gbit/s: the time average.

    Off, the ring runs at its cap; on, at the 0.5 Gbit/s the burst leaves: 0.6 x 0.7 + 0.4 x 0.5 Gbit/s,
    where the residual view (1 - 0.2 Gbit/s, then capped) gave the cap, 13 % more.
    """
    load = empty_load(2)
    load[BUSY, 0] = 0.4
    load[BURST_BPS, 0] = 0.4 * 0.5e9
    load[BURST_VAR, 0] = (0.5e9) ** 2 * 0.4 * 0.6  # all members on with probability 0.4
    capped = np.array([0.7e9, 0.7e9])
    rates, _ = group_rates([_group(BULK, (0,), key=-1)], np.array([1e9, 1e9]), load, None, WIDE_TCP, 3.0 * 2**20,
                           capped)
    assert rates == pytest.approx([0.6 * 0.7e9 + 0.4 * 0.5e9])
    rates, _ = group_rates([_group(BULK, (0,), key=-1)], np.array([1e9, 1e9]), load, None, WIDE_TCP, 3.0 * 2**20)
    assert rates == pytest.approx([0.8e9])  # unbounded: the link less the bursts' average rate


def test_jobs_slow_each_other_and_recover_when_one_stops():
    topo = Topology(_regions(2), [Link(0, 1, 2.0, 20.0)])
    params = PerfParams(wan_streams=WIDE_TCP)
    job = JobSpec(0, MODEL_ZOO["gpt-1.3b"], 64, 1, 0.0, 1, 64)
    plan = Plan(0, (Stage.at(0, 12, dp=2), Stage.at(1, 12, dp=2)), recompute="full")
    state = LinkState(topo, params)
    alone = state.evaluate(plan, job)
    state.start(0, plan, job, alone)
    second = state.evaluate(plan.for_job(1), job)
    assert second.iter_time > alone.iter_time
    state.start(1, plan.for_job(1), job, second)
    settled = state.settle([0, 1])
    assert settled[0].iter_time == pytest.approx(settled[1].iter_time) and settled[0].iter_time > alone.iter_time
    state.stop(1)
    assert state.settle([0])[0].iter_time == pytest.approx(alone.iter_time)
    only = np.zeros_like(state.load)
    only[:, state.jobs[0].links] = state.jobs[0].load
    assert np.array_equal(state.load, only)  # the stopped job's load is gone, exactly


# ---------------------------------------------------------------------------------------------- the check
def test_a_relayed_transfer_is_bounded_by_its_longest_hop():
    """Relays terminate TCP connections: a ring from r0 to r2 through r1 runs at the window bound of its 44 ms hop.

    Both paths agree exactly on one job alone; over the whole route's round trip (84 ms) the check played
    this ring 1.9x slower before.
    """
    topo = Topology(_regions(3), [Link(0, 1, 10.0, 40.0), Link(1, 2, 10.0, 44.0)])
    model = MODEL_ZOO["gpt-350m"]
    plan = Plan(0, (Stage(model.layers, ((0, 1), (2, 1))),), micro_batch=1, schedule="1f1b", recompute="full")
    job = JobSpec(0, model, 16, 1, 0.0, 1, 512)
    params = PerfParams(dp_overlap=0.0)
    fast = evaluate_plan(plan, job, topo, params)
    assert fast.flow_rates_bps == pytest.approx([params.wan_streams * params.tcp_window_bytes * 8 / 0.088] * 2)
    assert simulate_jobs(topo, [(plan, job)], params, iterations=2, warmup=1) == pytest.approx([fast.iter_time])


MECHANISM_SEEDS = (76, 103, 1099)


def test_the_cases_of_each_ring_mechanism_agree():
    """Cases where a ring meets GPipe passes (76: frozen, -41 % before; 103: averaged, +71 % if frozen
    regardless of time scale) and a transport-bounded ring meets bursts (1099: -32 % before): every job within 10 %.
    """
    for seed in MECHANISM_SEEDS:
        topo, params, jobs = random_case(seed)
        played = simulate_jobs(topo, jobs, params, iterations=5, warmup=2, seed=seed)
        for fast, t in zip(settled_times(topo, params, jobs), played):
            assert abs(fast / t - 1.0) <= 0.10, (seed, fast, t)


CHECK_SEEDS = range(10)


@pytest.fixture(scope="module")
def check_rows() -> list[dict]:
    """Per job of the cases :data:`CHECK_SEEDS`, played precisely: 30 iterations after 5 of warm-up, from 4 offsets."""
    from sfenv.experiments.flow_check import case_errors

    return [row for seed in CHECK_SEEDS for row in case_errors(seed, iterations=30, warmup=5, offsets=4)]


@pytest.fixture(scope="module")
def check_errors(check_rows) -> tuple[np.ndarray, np.ndarray]:
    """The fast path's relative error against the check per job, and the error of each job's time alone."""
    return np.abs([r["err"] for r in check_rows]), np.abs([r["alone_err"] for r in check_rows])


def test_fast_path_agrees_with_the_flow_level_check(check_errors):
    """Most jobs within 5 % of the check, the median within 1.5 %, none beyond 11 % (docs/model.md).

    Measured on these 30 jobs (2026-11-27, the check's rings corrected, its precise reference): median 1.4 %,
    87 % within 5 %, largest 8.0 %.  The bounds are those the test held before, with five played iterations.
    """
    err = check_errors[0]
    assert len(err) >= 25
    assert np.median(err) <= 0.015
    assert (err <= 0.05).mean() >= 0.85
    assert err.max() <= 0.11


def test_the_v3_sharing_model_agrees_with_the_check_at_least_as_well(check_rows):
    """The same 30 jobs with ``wan_sharing: v3`` (measured 2026-11-27: median 1.2 %, 87 % within 5 %, largest 7.9 %;
    v2 1.4 %, 87 %, 8.0 %): the bounds of v2's test hold, and it is no worse than v2 in the mean."""
    import dataclasses

    v2, v3 = [], []
    for seed in CHECK_SEEDS:
        topo, params, jobs = random_case(seed)
        rows = [r for r in check_rows if r["seed"] == seed]
        fast = settled_times(topo, dataclasses.replace(params, wan_sharing="v3"), jobs)
        v3 += [abs(fast[r["job"]] / r["played_s"] - 1.0) for r in rows]
        v2 += [abs(r["err"]) for r in rows]
    err = np.array(v3)
    assert len(err) >= 25 and np.median(err) <= 0.015 and (err <= 0.05).mean() >= 0.85 and err.max() <= 0.11
    assert err.mean() <= np.mean(v2) + 1e-3


def test_the_v4_sharing_model_agrees_with_the_check_at_least_as_well_as_v3(check_rows):
    """The same 30 jobs with ``wan_sharing: v4`` (a plan's own hops share links as its schedule plays them,
    :mod:`sfenv.model.hopshare`): v3's bounds hold, and it is no worse than v3 in the mean by more than 0.2 points
    (its declared judging on 318 fresh jobs, 2026-11-27: mean error 3.03 % against v3's 3.10 %)."""
    import dataclasses

    v3, v4 = [], []
    for seed in CHECK_SEEDS:
        topo, params, jobs = random_case(seed)
        rows = [r for r in check_rows if r["seed"] == seed]
        for model, out in (("v3", v3), ("v4", v4)):
            fast = settled_times(topo, dataclasses.replace(params, wan_sharing=model), jobs)
            out += [abs(fast[r["job"]] / r["played_s"] - 1.0) for r in rows]
    err = np.array(v4)
    assert len(err) >= 25 and np.median(err) <= 0.015 and (err <= 0.05).mean() >= 0.85 and err.max() <= 0.11
    assert err.mean() <= np.mean(v3) + 2e-3


def test_sharing_matters_in_the_check_cases(check_errors):
    """The check has teeth: the jobs' times alone (no sharing) miss the played times by far more."""
    settled, alone = check_errors
    assert np.median(alone) > 5 * np.median(settled) and alone.max() > 0.5


def test_the_check_averages_its_plays_from_several_start_offsets():
    """``offsets=K``: the check's time is the mean of K plays from seeded start offsets, and their spread is kept."""
    from sfenv.experiments.flow_check import OFFSET_SEED_STEP, case_errors

    rows = case_errors(3, iterations=3, warmup=1, offsets=2)
    topo, params, jobs = random_case(3)
    first, second = (simulate_jobs(topo, jobs, params, iterations=3, warmup=1, seed=3 + k * OFFSET_SEED_STEP)
                     for k in (0, 1))
    assert first != second  # the start offsets matter at three iterations
    for row, a, b in zip(rows, first, second, strict=True):
        assert row["played_s"] == pytest.approx((a + b) / 2, rel=1e-12)
        assert row["check_spread"] == pytest.approx(abs(a - b) / ((a + b) / 2), rel=1e-12)
    assert all(row["check_spread"] == 0.0 for row in case_errors(3, iterations=3, warmup=1))
    with pytest.raises(ValueError, match="offsets"):
        case_errors(3, offsets=0)


def test_the_check_cases_time_the_fast_path_under_the_sharing_model_asked():
    """``case_errors(wan_sharing=...)`` (``flow_check --wan-sharing``): the check's play does not move, the fast
    path's time is the model's (case 11 holds a chain whose own hops share a link, so v2, v3, v4 and v5 differ)."""
    from sfenv.experiments.flow_check import case_errors

    rows = {ws: case_errors(11, iterations=2, warmup=0, wan_sharing=ws) for ws in ("v2", "v3", "v4", "v5")}
    assert [r["played_s"] for r in rows["v2"]] == [r["played_s"] for r in rows["v5"]]
    assert rows["v5"] == case_errors(11, iterations=2, warmup=0)
    errs = {ws: tuple(round(r["err"], 9) for r in rs) for ws, rs in rows.items()}
    assert len(set(errs.values())) == 4


def test_a_reference_file_is_played_again_from_an_offset_it_never_used(tmp_path):
    """``flow_check --reference``: each case of a ``--json`` file is played once more, from the offset a run of
    ``MAX_REFERENCE_OFFSETS`` offsets would play next, and compared with the file's played times."""
    import json

    from sfenv.experiments.flow_check import (
        MAX_REFERENCE_OFFSETS,
        OFFSET_SEED_STEP,
        case_errors,
        read_reference,
        reference_agreement,
    )

    rows = case_errors(3, iterations=3, warmup=1, offsets=2) + case_errors(11, iterations=3, warmup=1)
    path = tmp_path / "ref.json"
    path.write_text(json.dumps(rows))
    reference = read_reference(str(path))
    assert reference == {r["seed"]: {q["job"]: q["played_s"] for q in rows if q["seed"] == r["seed"]} for r in rows}
    again = reference_agreement(reference, iterations=3, warmup=1)
    for seed in (3, 11):
        topo, params, jobs = random_case(seed)
        fresh = simulate_jobs(topo, jobs, params, iterations=3, warmup=1,
                              seed=seed + MAX_REFERENCE_OFFSETS * OFFSET_SEED_STEP)
        mine = [r for r in again if r["seed"] == seed]
        assert [r["played_s"] for r in mine] == fresh
        assert [r["err"] for r in mine] == pytest.approx([t / reference[seed][j] - 1 for j, t in enumerate(fresh)])
    assert any(abs(r["err"]) > 1e-9 for r in again)  # not a play the reference already holds
    assert all(abs(r["err"]) < 0.3 for r in again)


def test_the_json_rows_are_what_a_reference_reads(tmp_path, capsys):
    """``flow_check --json F`` writes every job's row (atomically, in the caller's folder); ``--reference F`` reads
    back the played times of that run."""
    from sfenv.experiments.flow_check import case_errors, main, read_reference

    out = tmp_path / "rows.json"
    main(["--seeds", "3", "--iterations", "2", "--warmup", "0", "--json", str(out)])
    rows = case_errors(3, iterations=2, warmup=0)
    assert read_reference(str(out)) == {3: {r["job"]: r["played_s"] for r in rows}}
    assert [p.name for p in tmp_path.iterdir()] == ["rows.json"]  # no temporary file left


@pytest.mark.parametrize("text, words", [
    ("{}", "non-empty list"), ("[]", "non-empty list"), ("[[[", "not JSON"),
    ("[" * 100_000 + "]" * 100_000, "not JSON"),
    ('[{"seed": 3, "job": 0}]', "row 0"), ('[{"seed": 3, "job": 0, "played_s": -1}]', "row 0"),
    ('[{"seed": 3, "job": 0, "played_s": NaN}]', "row 0"), ('[{"seed": 3, "job": 0, "played_s": true}]', "row 0"),
    ('[{"seed": "3", "job": 0, "played_s": 1}]', "row 0"), ('[{"seed": 3, "job": 1.0, "played_s": 1}]', "row 0"),
    ('[{"seed": 3, "job": 0, "played_s": 1}, {"seed": 3, "job": 0, "played_s": 2}]', "row 1: seed 3 job 0 given twice"),
])
def test_a_bad_reference_file_is_refused_whole_with_its_row_named(tmp_path, text, words):
    from sfenv.experiments.flow_check import read_reference

    from sfenv.errors import InvalidInput

    path = tmp_path / "ref.json"
    path.write_text(text)
    with pytest.raises(InvalidInput, match=words):
        read_reference(str(path))


def test_a_reference_whose_jobs_are_not_the_case_s_is_refused():
    from sfenv.experiments.flow_check import reference_agreement

    from sfenv.errors import InvalidInput

    with pytest.raises(InvalidInput, match="reference case 3"):
        reference_agreement({3: {0: 1.0, 7: 1.0}}, iterations=1, warmup=0)


@pytest.mark.parametrize("argv", [["--seeds", "x"], ["--seeds", "5:2"], ["--seeds", "0:2", "--offsets", "0"],
                                  ["--seeds", "0:2", "--iterations", "0"], ["--seeds", "0:2", "--warmup", "-1"],
                                  ["--seeds", "0:2", "--wan-sharing", "v9"], ["--reference", "/nonexistent.json"],
                                  ["--reference", "/"],
                                  ["--episodes", "bace-6:cr-lcf", "--num-jobs", "0"]])
def test_the_flow_check_script_refuses_bad_input_in_one_line(argv):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "sfenv.experiments.flow_check", *argv], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and done.stderr.startswith("sfenv: --") and done.stderr.count("\n") == 1, done.stderr


def _chain_alone() -> tuple[Topology, PerfParams, Plan, JobSpec]:
    """A 3-stage 1F1B chain over two 1 Gbit/s links, data-parallel 2 (rings across regions too), TCP not binding."""
    topo = Topology(_regions(3), [Link(0, 1, 1.0, 20.0), Link(1, 2, 1.0, 30.0)])
    job = JobSpec(0, MODEL_ZOO["gpt-350m"], 32, 1, 0.0, 1, 64)
    plan = Plan(0, (Stage.at(0, 8, dp=2), Stage.at(1, 8, dp=2), Stage.at(2, 8, dp=2)), recompute="full")
    return topo, PerfParams(wan_streams=WIDE_TCP, dp_overlap=0.0), plan, job


def test_the_check_records_every_wan_transfer_it_plays():
    """``trace``: each hop direction sends m transfers per iteration (warm-up included), each taking its bits over
    half the link's capacity when the job is alone (its two replicas send at once); nothing inside a region is
    recorded."""
    from sfenv.model.flowcheck import TransferTrace

    topo, params, plan, job = _chain_alone()
    trace: TransferTrace = {}
    simulate_jobs(topo, [(plan, job)], params, iterations=3, warmup=1, trace=trace)
    m = evaluate_plan(plan, job, topo, params).microbatches
    hops = {kind: times for kind, times in trace.items() if kind[4] < 0}
    assert sorted((a, b) for _, a, b, _, _ in hops) == [(0, 1), (1, 0), (1, 2), (2, 1)]
    for (index, _, _, bits, _), times in hops.items():
        assert index == 0 and len(times) >= 4 * m
        assert all(x == pytest.approx(2 * bits / 1e9, rel=1e-9) for _, x in times)
    assert {kind[4] for kind in trace} == {-1, -2, -3, -4}  # the rings of a stage inside one region stay there


def test_a_job_played_at_given_transfer_times_plays_as_the_network_made_them():
    """``given``: a job alone played at the times its transfers took plays as before; twice those times, as on
    links of half the capacity."""
    from sfenv.model.flowcheck import TransferKind, TransferTrace

    topo, params, plan, job = _chain_alone()
    trace: TransferTrace = {}
    alone = simulate_jobs(topo, [(plan, job)], params, iterations=3, warmup=1, trace=trace)[0]
    mean = {kind: float(np.mean([x for _, x in times])) for kind, times in trace.items()}

    def twice(kind: TransferKind) -> float:
        return 2.0 * mean[kind]

    assert simulate_jobs(topo, [(plan, job)], params, iterations=3, warmup=1, given=mean.__getitem__)[0] == \
        pytest.approx(alone, rel=1e-9)
    half = simulate_jobs(topo, [(plan, job)], params, iterations=3, warmup=1,
                         capacity_bps=[c / 2 for c in topo.directed_bw_bps])[0]
    assert half > 1.2 * alone
    assert simulate_jobs(topo, [(plan, job)], params, iterations=3, warmup=1, given=twice)[0] == \
        pytest.approx(half, rel=1e-9)


def test_the_decomposition_tells_mean_transfer_times_from_their_variation():
    """Case 1051 (docs/model.md): the 8-micro-batch 1F1B chain that shares both links with a 4-replica chain plays
    4.16 s; alone at its transfers' played mean times it would play 13 % faster, and at times drawn from them
    within 1 %: its transfers' variation is what the fast path misses.  Env v2's model (-9 %) expected their mean
    8 % too long, which hid part of it; env v3's (the default, -17 %) expects it 6 % too short (measured
    2026-11-27)."""
    from sfenv.experiments.flow_check import decomposed_errors

    rows = decomposed_errors(1051, iterations=30, warmup=5)
    topo, params, jobs = random_case(1051)
    fast = settled_times(topo, params, jobs)
    played = simulate_jobs(topo, jobs, params, iterations=30, warmup=5, seed=1051)
    for row, f, t in zip(rows, fast, played, strict=True):
        assert row["played_s"] == t and row["fast_err"] == pytest.approx(f / t - 1.0, rel=1e-12)
    short = rows[1]
    assert short["played_s"] == pytest.approx(4.16, abs=0.01)
    assert short["means_err"] < -0.10 and abs(short["draws_err"]) < 0.02 and short["fast_err"] < -0.15
    assert -0.08 < short["hop_transfer_err"] < -0.04


def test_the_decomposition_runs_from_the_command_line(capsys):
    from sfenv.experiments.flow_check import main

    main(["--seeds", "1051", "--iterations", "3", "--warmup", "1", "--decompose"])
    out = capsys.readouterr().out
    assert "2 jobs in 1 cases" in out
    assert all(label in out for label in ("fast path", "alone at the played means", "alone at played times drawn"))


def test_played_longer_the_check_hardly_depends_on_where_the_jobs_started(check_rows):
    """30 iterations after 5 of warm-up, from 4 start offsets: each job's played time spreads by under 2 %
    (measured 2026-11-27 on these cases: at most 1.6 %; docs/model.md), so the check can judge a 5 % bound; the one
    bistable case known, seed 86 (two GPipe pipelines that either alternate or collide), spreads by far more."""
    from sfenv.experiments.flow_check import case_errors

    assert len(check_rows) >= 25 and max(row["check_spread"] for row in check_rows) <= 0.02
    bistable = case_errors(86, iterations=30, warmup=5, offsets=4)
    assert all(row["check_spread"] > 0.3 for row in bistable)


def test_the_check_plays_zero_bubble_plans_as_the_model_times_them_alone():
    """SpanTrain's zero-bubble plans (ZB-H1, ZB-H2) on spider-8-contended, one validation seed, played alone by the
    check the fastest way the model may run them (hand-crafted or greedy order, or a fallback within the same
    memory; ZB-H2's iteration its longest stage span): the fast path's times (measured 2026-11-27: exact, to 1e-13)."""
    from sfenv.experiments.flow_check import episode_starts, lone_errors

    found = episode_starts("spider-8-contended", "spantrain+swf", [10_000])
    assert {plan.schedule for plan, _ in found["plans"]} <= {"zb-h1", "zb-h2"} and found["plans"]
    rows = lone_errors(found["topo"], found["params"], found["plans"][:4])
    assert {r["schedule"] for r in rows} == {"zb-h2"} and {r["played_as"] for r in rows} >= {"zb-h2/hand"}
    assert max(abs(r["err"]) for r in rows) <= 0.01


def test_zero_bubble_orders_are_the_models_candidates_and_checked():
    import dataclasses

    from sfenv.model.flowcheck import zero_bubble_candidates

    topo, params, jobs = random_case(0)
    plan, job = next((p, j) for p, j in jobs if len(p.stages) > 1)
    h2 = dataclasses.replace(plan, schedule="zb-h2")
    ways = [(p.schedule, order) for p, order in zero_bubble_candidates(h2)]
    assert ways == [("zb-h2", "hand"), ("zb-h2", "greedy"), ("zb-h1", "hand"), ("zb-h1", "greedy"), ("1f1b", "hand")]
    assert [(p.schedule, o) for p, o in zero_bubble_candidates(plan)] == [(plan.schedule, "hand")]
    with pytest.raises(ValueError, match="orders: expected one of"):
        simulate_jobs(topo, [(h2, job)], params, orders=["fastest"])


def test_the_plans_an_agent_really_starts_agree_with_the_check_alone():
    """geo-8-contended, spinsearch+swf, one validation seed: its plans across regions, each played alone by the check
    at dp_overlap 0 and 1, agree with the fast path within 5 % (measured 2026-11-27 on two seeds: at most 1.4 %)."""
    from sfenv.experiments.flow_check import episode_starts, lone_errors

    found = episode_starts("geo-8-contended", "spinsearch+swf", [10_000])
    assert found["starts"] >= 10 and 0 <= found["shared"] <= found["starts"] and found["plans"]
    rows = lone_errors(found["topo"], found["params"], found["plans"][:6])
    assert len(rows) == 2 * min(6, len(found["plans"])) and {r["overlap"] for r in rows} == {0.0, 1.0}
    assert max(abs(r["err"]) for r in rows) <= 0.05


def test_the_episodes_report_plays_the_job_count_asked(capsys):
    """``flow_check --episodes ... --num-jobs N`` plays N jobs per episode (as ``claims`` caps its larger
    scenarios): its counts are those of the capped scenario's episodes, not of the scenario's own."""
    from sfenv.experiments.flow_check import episode_starts, main

    from sfenv.scenario import load_scenario

    main(["--episodes", "bace-6:cr-lcf", "--episode-seeds", "1000000", "--num-jobs", "1", "--max-sets", "0"])
    line = capsys.readouterr().out.splitlines()[0]
    capped = episode_starts(load_scenario("bace-6").with_overrides(workload={"num_jobs": 1}), "cr-lcf", [1_000_000])
    full = episode_starts("bace-6", "cr-lcf", [1_000_000])
    assert capped["starts"] != full["starts"]
    expected = f"bace-6 (num_jobs 1) cr-lcf seeds [1000000]: {capped['starts']} starts across regions"
    assert line.startswith(expected), line


@pytest.mark.parametrize(("version", "seed", "shared"), [("v6", 10_002, 2), ("v5", 10_001, 3)])
def test_jobs_that_really_shared_a_link_agree_with_the_check_played_together(version, seed, shared):
    """geo-8-contended, spinsearch+swf: under env v6, validation seed 10002 has two starts that shared a link with
    other running jobs (measured 2026-11-28; error at most 0.3 %); under env v5's settings, seed 10001 has three
    (measured 2026-11-27; at most 0.2 %).  Those jobs, played together as they ran, agree within 5 %."""
    from sfenv.experiments.flow_check import episode_starts, together_errors

    from sfenv.registration import VERSION_SIM
    from sfenv.scenario import load_scenario

    scenario = load_scenario("geo-8-contended").with_overrides(sim=VERSION_SIM.get(version, {}))
    found = episode_starts(scenario, "spinsearch+swf", [seed])
    assert found["shared"] == len(found["together"]) == shared
    assert all(len(jobs) >= 2 and [p.job_id for p, _ in jobs] == list(range(len(jobs))) for jobs in found["together"])
    rows = together_errors(found["topo"], found["params"], found["together"][:1], iterations=6, warmup=2, offsets=2)
    assert len(rows) == 2 * len(found["together"][0]) and max(abs(r["err"]) for r in rows) <= 0.05


@pytest.fixture(scope="module")
def spider32_shared() -> dict:
    """spider-32, spantrain, validation seed 10000, as env v2 played it (the episode docs/model.md measured): what
    it starts, and the jobs of its shared starts."""
    from sfenv.experiments.flow_check import episode_starts

    from sfenv.scenario import load_scenario

    return episode_starts(load_scenario("spider-32").with_overrides(sim={"wan_sharing": "v2"}), "spantrain", [10_000])


def _first_shared_set_errors(found: dict, wan_sharing: str) -> list[float]:
    """Each job's error at the first shared start, played together at dp_overlap 0 as it ran (6 iterations)."""
    import dataclasses

    from sfenv.experiments.flow_check import together_errors

    assert found["shared"] >= 20 and {p.schedule for p, _ in found["together"][0]} == {"zb-h2"}
    params = dataclasses.replace(found["params"], dp_overlap=0.0, wan_sharing=wan_sharing)
    rows = [r for r in together_errors(found["topo"], params, found["together"][:1], iterations=6, warmup=2,
                                       offsets=1) if r["overlap"] == 0.0]
    assert len(rows) == 2
    return [r["err"] for r in rows]


@pytest.mark.xfail(strict=True, reason="the v2 sharing model's burst view is pessimistic for a job whose one flow "
                                       "sends all the time (docs/model.md, 'What the agents really run'): 26 % here")
def test_spantrain_jobs_that_share_a_link_on_spider_32_agree_with_the_check(spider32_shared):
    """spider-32, spantrain, validation seed 10000, its first shared start: two zero-bubble jobs played together as
    they ran, each the way it runs fastest alone.  Measured 2026-11-27 at dp_overlap 0: the 4-replica job agrees
    (0.0 %), the 8-stage one relaying its hop over five links is 26 % slower in the fast path (186 s against 147 s)."""
    assert max(abs(e) for e in _first_shared_set_errors(spider32_shared, "v2")) <= 0.05


def test_under_v3_those_spantrain_jobs_agree_with_the_check(spider32_shared):
    """The same set under ``wan_sharing: v3``: the relayed hop sees the other job's bursts come and go, 144.5 s
    against the check's 147.3 s (measured 2026-11-27: -1.9 % and 0.0 %).  The next two shared sets are not
    within 5 % under v3 either (-17 %, from +37 % under v2; docs/model.md)."""
    errors = _first_shared_set_errors(spider32_shared, "v3")
    assert max(abs(e) for e in errors) <= 0.05 and errors[0] < -0.01


def test_under_v3_a_zero_bubble_plan_is_timed_as_its_fastest_fallback_as_the_check_plays_it():
    """A 4-stage chain bouncing over one 70 Mbit/s link, 2 micro-batches: the flow-level check plays 1F1B, ZB-H1 and
    ZB-H2 alike (1.744-1.749 s).  Under v3 1F1B's hops meet as its schedule has them (0.0 %), and a zero-bubble plan
    takes its 1F1B fallback's own evaluation; timed at its own hop rates instead (independent flows) it was 46 %
    slower than 1F1B (measured 2026-11-27).  v2 is 52 % pessimistic on all three."""
    import dataclasses

    from conftest import make_job, two_region_topo
    from sfenv.experiments.flow_check import fastest_alone

    from sfenv.world.workload import ModelSpec

    topo = two_region_topo(bw_gbps=0.0702, lat_ms=10.0, gpus=16)
    stages = ((1, 1), (0, 1), (1, 2), (0, 3))
    job = make_job(model=ModelSpec("m", layers=7, hidden=1024, heads=8, seq_len=1024), batch=2)
    params = PerfParams(dp_overlap=0.0, wan_sharing="v3")
    times = {}
    for schedule in ("1f1b", "zb-h1", "zb-h2"):
        plan = Plan(0, tuple(Stage.at(r, n) for r, n in stages), schedule=schedule)
        played = fastest_alone(topo, params, plan, job, iterations=4, warmup=1)[2]
        times[schedule] = evaluate_plan(plan, job, topo, params).iter_time
        assert times[schedule] == pytest.approx(played, rel=0.01)
        v2 = evaluate_plan(plan, job, topo, dataclasses.replace(params, wan_sharing="v2")).iter_time
        assert v2 > 1.4 * played
    assert times["zb-h2"] <= times["zb-h1"] <= times["1f1b"]
