"""The default env's speed work changes no observation, reward or ``info`` (docs/notes-speed64.md).

The memos added for the default env's speed on spider-64 (the candidate features per evaluation in
the observation, the observation's base array per hour and link state, the replayed 1F1B /
zero-bubble head and the steady period memoised without the iteration's micro-batch count, the
time-of-use price shape per offset, chain_plan's stage tuples, the free GPUs per state) and the
job-mix draw from cumulative weights must only remember or compute faster.  These tests play
seeded masked random actions through the default env and through a reference that empties those
memos before every reset and step and draws the job mix with ``rng.choice``, and require every
observation, reward, termination and ``info`` to be equal; and they check the job-mix draw
against ``rng.choice`` draw by draw.  The rewritten position sweep is compared with the previous
one bit for bit in ``tests/test_pipeline_replay.py``.

The second round (docs/notes-speed64.md): a single-region plan moved to a region of equal figures
gets its evaluation from its source's (only the power recomputed; the reference evaluates it with
``evaluate_plan``, and a test compares the two field by field), the price integral keeps its terms
per hour, the proposers keep their region ranking per free-GPU array (both emptied in the
reference), and rewritten code paths are checked against what they replace: the time-of-use prices
against the zone-by-zone loop (values and generator state), the queue table against the float64
table, the candidate rows with a gap against the rows without it.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from envs import play_masked, same_values

from sfenv import scenario
from sfenv.env import GeoSchedEnv
from sfenv.env.proposers import PathProposer, SingleRegionProposer
from sfenv.model import pipeline, planning
from sfenv.model.perf import compute_lower_bound
from sfenv.model.planning import chain_plan
from sfenv.scenario import load_scenario
from sfenv.sim import Simulator, make_simulator
from sfenv.world import prices

#: spider-64 with few jobs: several episodes (so several resets and job draws) in a few hundred steps
NUM_JOBS = 30
STEPS = 300


def _forget(env: GeoSchedEnv) -> None:
    """Empty every memo the speed work added (the reference computes each figure afresh)."""
    env.observation_encoder._perf_features.clear()
    env.observation_encoder._base_forecast = None  # the observation's base array (prices, links) rebuilt
    pipeline._replayed_head.cache_clear()
    pipeline._steady_period_cached.cache_clear()
    pipeline._pipeline_time_cached.cache_clear()  # else the head would never be asked for again
    prices._tou_shape.cache_clear()
    planning._chain_stages.cache_clear()
    env._evaluations.local.clear()  # the scenario's single-region evaluations (moved plans' among them)
    for p in env.proposers:  # the proposers' free-GPU figures and region ranking per free-GPU array
        if isinstance(p, SingleRegionProposer):
            p._ranked_for = (None, None, [], [])
        elif isinstance(p, PathProposer):
            p._free_for = (None, [], 0, 0)
    if env.sim is not None:
        env.sim.gpus.forget()  # the free GPUs recomputed on the next call
        env.sim.links.memo_local.clear()
        env.sim.prices._hour_terms.clear()  # the price integral's terms per hour


def test_default_env_plays_as_without_the_speed_memos(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every observation, reward and ``info`` equal over several spider-64 episodes, memos on and emptied."""
    sc = load_scenario("spider-64").with_overrides(workload={"num_jobs": NUM_JOBS})
    got, actions = play_masked(GeoSchedEnv(sc), seed=5, steps=STEPS)
    assert sum(len(s) == 5 and s[2] for s in got) >= 2  # several episodes: memos carried from one to the next
    assert sum(int(np.sum(s[-1]["action_mask"])) > 2 for s in got) >= 50  # real choices among candidates
    # the reference: the job mix drawn by rng.choice, the memos emptied before every reset and step
    monkeypatch.setattr(scenario, "_choice_cdf", lambda weights: None)
    # and a moved single-region plan evaluated by evaluate_plan, not derived from its source's evaluation
    monkeypatch.setattr(Simulator, "evaluate_moved",
                        lambda self, plan, job, source, source_perf: self.evaluate(plan, job))
    want, _ = play_masked(GeoSchedEnv(sc), seed=5, steps=STEPS, actions=actions, before_step=_forget)
    assert len(got) == len(want)
    for i, (a, b) in enumerate(zip(got, want)):
        assert same_values(a, b), f"entry {i} differs"


@pytest.mark.parametrize("weights", [[1.0], [0.5, 0.3, 0.2], [0.1, 0.2, 0.3, 0.4], [1e-9, 1.0, 3.0, 1e-3, 7.0]])
def test_job_mix_draw_is_rng_choice(weights: list[float]) -> None:
    """``bisect_right(_choice_cdf(p), rng.random())`` gives ``rng.choice(n, p=p)``'s index and leaves the same state."""
    p = np.array(weights, dtype=float)
    p /= p.sum()  # as make_jobs normalises the mix
    cdf = scenario._choice_cdf(p)
    assert cdf is not None
    from bisect import bisect_right

    for seed in range(5):
        ours, theirs = np.random.default_rng(seed), np.random.default_rng(seed)
        drawn = [bisect_right(cdf, ours.random()) for _ in range(4000)]
        assert drawn == [int(theirs.choice(len(p), p=p)) for _ in range(4000)]
        assert ours.bit_generator.state == theirs.bit_generator.state
        if len(p) > 1:
            assert len(set(drawn)) > 1  # the draws do vary


@pytest.mark.parametrize("weights", [[0.5, np.nan], [1.2, -0.2], [0.5, 0.4], []])
def test_job_mix_draw_leaves_bad_weights_to_rng_choice(weights: list[float]) -> None:
    """Weights ``rng.choice`` refuses get no cumulative list (make_jobs then calls rng.choice, which raises)."""
    p = np.array(weights, dtype=float)
    assert scenario._choice_cdf(p) is None
    if len(p):
        with pytest.raises(ValueError):
            np.random.default_rng(0).choice(len(p), p=p)


@pytest.mark.parametrize(("offset", "days"), [(0.0, 1), (5.5, 3), (-8.0, 7), (9, 2)])
def test_time_of_use_shape_is_the_curve(offset: float, days: int) -> None:
    """The memoised shape equals the time-of-use curve of the zone's local hours, and cannot be written."""
    hours = np.arange(24 * days, dtype=float)
    shape = prices._tou_shape(offset, days)
    assert np.array_equal(shape, prices._tou_curve((hours + offset) % 24.0))
    with pytest.raises(ValueError):
        shape[0] = 1.0


def test_replayed_head_is_shared_across_micro_batch_counts() -> None:
    """Two iterations that differ only in ``m`` (both past ``m0``) replay the head once, with the same result."""
    pipeline._replayed_head.cache_clear()
    c, lat, x, w = (0.3, 0.2, 0.25), (0.01, 0.02), (0.05, 0.04), (3, 2, 1)
    first = pipeline._pipeline_time_cached(c, lat, x, 64, "1f1b", w)
    second = pipeline._pipeline_time_cached(c, lat, x, 96, "1f1b", w)
    info = pipeline._replayed_head.cache_info()
    assert (info.misses, info.hits) == (1, 1)
    m0 = 2 * w[0] + 2
    head = pipeline._sweep_fixed_order(c, lat, x, m0, w, gpipe=False)
    period = pipeline.steady_period(c, lat, x, "1f1b", w)
    assert first == head + (64 - m0) * period
    assert second == head + (96 - m0) * period


def test_lower_bound_is_the_per_stage_minimum() -> None:
    """compute_lower_bound (layer time asked once per region and tp) equals the bound written stage by stage."""
    from sfenv.model.compute import layer_costs, lm_head_time

    sc = load_scenario("spider-64")
    topo = sc.topology
    job = sc.make_jobs(np.random.default_rng(0))[0]
    gpu_of = topo.scalars.gpu
    model = job.model
    rng = np.random.default_rng(1)
    checked = 0
    for _ in range(200):
        chain = [int(r) for r in rng.choice(topo.num_regions, size=int(rng.integers(1, 4)), replace=False)]
        counts = [int(n) for n in rng.integers(1, 5, size=len(chain))]
        b = int(rng.choice([1, 2, 4]))
        mode = str(rng.choice(["none", "selective", "full"]))
        plan = chain_plan(job, topo, chain, counts, dp=int(rng.choice([1, 2])), tp=int(rng.choice([1, 2, 4])),
                          micro_batch=b, recompute=mode)
        if plan is None:
            continue
        last = len(plan.stages) - 1
        worst = 0.0
        for k, st in enumerate(plan.stages):
            c = min(layer_costs(gpu_of[r], b, model.seq_len, model.hidden, model.heads, st.tp, mode, False, 1.0)[0]
                    * st.layers
                    + (lm_head_time(gpu_of[r], b, model.seq_len, model.hidden, model.vocab, st.tp, 1.0)
                       if k == last else 0.0)
                    for r in st.regions)
            worst = max(worst, c)
        assert compute_lower_bound(plan, job, topo) == plan.num_microbatches(job) * worst
        checked += 1
    assert checked >= 100


def test_free_gpus_memo_stays_read_only_and_current_in_copies() -> None:
    """The memoised free GPUs follow the state, are read-only, and so are a fork's and an unpickled copy's."""
    import pickle


    sc = load_scenario("spider-8").with_overrides(workload={"num_jobs": 8})
    sim = make_simulator(sc, 0)
    view = sim.view()
    first = view.free_gpus
    assert view.free_gpus is first  # the same state: the same array
    with pytest.raises(ValueError):
        first[0] = 1
    sim.free[0] -= 1  # an in-place edit is seen (the state is compared, not tracked)
    assert view.free_gpus[0] == first[0] - 1
    sim.down[1] = True
    assert view.free_gpus[1] == 0 and sim.free_gpus_now()[1] == int(np.where(sim.down, 0, sim.free).sum())
    for copy in (sim.fork(), pickle.loads(pickle.dumps(sim))):
        free = copy.view().free_gpus
        assert np.array_equal(free, view.free_gpus)
        with pytest.raises(ValueError):
            free[0] = 1


def test_moved_plan_evaluation_is_evaluate_plan() -> None:
    """A single-region plan moved to a region of equal figures: moved_perf equals evaluate_plan field by field."""
    from sfenv.model.perf import Stage, evaluate_plan, moved_perf, same_region_figures
    from sfenv.model.planning import fit_plan

    sc = load_scenario("spider-64")
    topo = sc.topology
    sim = make_simulator(sc, 0)
    pairs = [(topo.plan_class[r], r) for r in range(topo.num_regions) if topo.plan_class[r] != r]
    pairs = [(a, b) for a, b in pairs if same_region_figures(topo, a, b)]
    assert len(pairs) >= 10
    assert any(topo.scalars.pue[a] != topo.scalars.pue[b] for a, b in pairs)  # the power does differ
    jobs = sc.make_jobs(np.random.default_rng(3))[:12]
    checked = 0
    for i, job in enumerate(jobs):
        src, dst = pairs[i % len(pairs)]
        for budget in (4, 8, 16, 32):
            res = fit_plan(job, topo, (src,), (budget,), sim.evaluate)
            if res is None:
                continue
            # the fitted plan and the other knobs of the menu (other micro-batches, recomputation, schedules)
            variants = [res[0]] + [replace(res[0], micro_batch=b, recompute=m, schedule=s)
                                   for s in ("1f1b", "zb-h1", "gpipe") for b in (1, 2) for m in ("none", "full")]
            for plan in variants:
                perf = evaluate_plan(plan, job, topo, sim.params)
                moved = replace(plan, stages=tuple([Stage.at(dst, s.layers, s.dp, s.tp) for s in plan.stages]))
                want = evaluate_plan(moved, job, topo, sim.params)
                if not perf.feasible:
                    assert not want.feasible
                    continue
                got = moved_perf(perf, moved, topo)
                assert got == want, (plan, dst)
                assert list(got.power_by_region) == [dst]
                checked += 1
    assert checked >= 40


def test_moved_plan_memo_hands_back_evaluate() -> None:
    """Simulator.evaluate_moved gives evaluate's result, and evaluates afresh when the regions differ."""
    from sfenv.model.perf import Stage, same_region_figures
    from sfenv.model.planning import fit_plan

    sc = load_scenario("spider-64")
    topo = sc.topology
    job = sc.make_jobs(np.random.default_rng(4))[0]
    a = next(r for r in range(topo.num_regions) if topo.plan_class[r] != r)
    rep = topo.plan_class[a]
    other = next(r for r in range(topo.num_regions) if not same_region_figures(topo, rep, r))
    for dst in (a, other):
        fresh, memo = make_simulator(sc, 0), make_simulator(sc, 0)
        fresh.links.memo_local = {}
        memo.links.memo_local = {}
        plan, perf = fit_plan(job, topo, (rep,), (8,), memo.evaluate)
        moved = replace(plan, stages=tuple([Stage.at(dst, s.layers, s.dp, s.tp) for s in plan.stages]))
        got = memo.evaluate_moved(moved, job, plan, perf)
        assert got == fresh.evaluate(moved, job)
        assert memo.evaluate(moved, job) is got  # kept in evaluate's memo


def test_price_integral_per_hour_terms_are_the_formula() -> None:
    """PriceSeries.cumulative (the hour's first terms remembered) equals the running integral written out."""
    from sfenv.world.prices import PriceSeries

    rng = np.random.default_rng(7)
    hourly = rng.uniform(-20.0, 300.0, size=(5, 30))  # negative prices too
    series = PriceSeries([f"z{i}" for i in range(5)], hourly)
    cum = np.concatenate([np.zeros((5, 1)), np.cumsum(hourly * 3600.0, axis=1)], axis=1)
    times = np.concatenate([rng.uniform(0.0, 3600.0 * 95, size=400), np.arange(0.0, 3600.0 * 95, 1800.0)])
    for t in np.concatenate([times, times[::-1]]):  # each hour asked first and again
        hour = int(t // 3600.0)
        periods, h = divmod(hour, 30)
        want = periods * cum[:, -1] + cum[:, h] + (t - hour * 3600.0) * hourly[:, h]
        assert np.array_equal(series.cumulative(float(t)), want)
    assert len(series._hour_terms) == 95


def test_candidate_rows_with_a_gap_are_the_rows_without_it() -> None:
    """An infeasible candidate leaves its row empty; the other rows are as when every candidate is feasible."""
    from sfenv.env import CAND_FEATURES
    from sfenv.model.perf import PlanPerf

    sc = load_scenario("spider-64").with_overrides(workload={"num_jobs": NUM_JOBS})
    env = GeoSchedEnv(sc)
    env.reset(seed=2)
    for _ in range(200):  # wait until several candidates are offered
        if len(env._candidates) >= 3:
            break
        env.step(env.N)
    n = len(env._candidates)
    assert n >= 3
    full = env._obs()["candidates"].reshape(env.N, CAND_FEATURES).copy()
    assert np.all(full[:n, 0] == 1.0) and np.all(full[n:] == 0.0)
    for gap in (0, 1, n - 1):
        env._cand_perf[gap] = PlanPerf(feasible=False, reason="test")
        holed = env._obs()["candidates"].reshape(env.N, CAND_FEATURES)
        assert np.all(holed[gap] == 0.0)
        keep = [i for i in range(env.N) if i != gap]
        assert np.array_equal(holed[keep], full[keep])
        env._cand_perf[gap] = None  # evaluated afresh
        assert np.array_equal(env._obs()["candidates"].reshape(env.N, CAND_FEATURES), full)


def _time_of_use_zone_by_zone(rng, zones, base, peak, utc_offset_h, days, noise):
    """The time-of-use prices as first written: one zone after another, one noise draw per zone."""
    from sfenv.world.prices import PriceSeries

    rows = []
    for z in zones:
        curve = base[z] + (peak[z] - base[z]) * prices._tou_curve((np.arange(24 * days, dtype=float)
                                                                  + utc_offset_h.get(z, 0.0)) % 24.0)
        if noise > 0 and rng is not None:
            curve = curve * rng.lognormal(0.0, noise, size=curve.shape)
        rows.append(curve)
    return PriceSeries(zones, np.array(rows))


@pytest.mark.parametrize(("noise", "days"), [(0.08, 14), (0.0, 3), (0.3, 1)])
def test_time_of_use_all_zones_at_once_is_zone_by_zone(noise: float, days: int) -> None:
    """The vectorised time_of_use gives the zone-by-zone prices bit for bit and leaves the generator alike."""
    zones = [f"z{i}" for i in range(9)]
    rng0 = np.random.default_rng(0)
    base = {z: float(rng0.uniform(20, 80)) for z in zones}
    peak = {z: base[z] + float(rng0.uniform(0, 150)) for z in zones}
    peak["z3"] = 100  # an int, as a scenario file may give
    offsets = {z: float(rng0.choice([-8.0, 0.0, 5.5, 9.0])) for z in zones[:-1]}  # the last zone: no offset
    for seed in range(4):
        ours, theirs = np.random.default_rng(seed), np.random.default_rng(seed)
        got = prices.time_of_use(ours, zones, base, peak, offsets, days, noise)
        want = _time_of_use_zone_by_zone(theirs, zones, base, peak, offsets, days, noise)
        assert got.hourly.tobytes() == want.hourly.tobytes()
        assert ours.bit_generator.state == theirs.bit_generator.state
        assert np.array_equal(got.cumulative(3600.0 * days * 1.5), want.cumulative(3600.0 * days * 1.5))
    with pytest.raises(ValueError):
        prices.time_of_use(None, [], {}, {}, {}, days, noise)


@pytest.mark.parametrize("name", ["spider-64", "spider-8-contended"])
def test_queue_rows_are_the_float64_table(name: str) -> None:
    """The per-job queue features built row by row equal the float64 table they were first read from."""
    from sfenv.env.observation import _log_scale

    env = GeoSchedEnv(load_scenario(name))
    env.reset(seed=3)
    specs = [js.spec for js in env.sim.jobs]
    table = np.array([[1.0, j.model.params, j.min_gpus / 1024, j.max_gpus / 1024, float(j.iterations),
                       j.global_batch / 1024] for j in specs], dtype=np.float64)
    table[:, 1] = [_log_scale(float(v), 1e8, 1e12) for v in table[:, 1]]
    table[:, 4] = [_log_scale(float(v), 1, 1e6) for v in table[:, 4]]
    assert len({j.model.params for j in specs}) > 1 and len({j.iterations for j in specs}) > 10
    assert env.observation_encoder._job_rows == [tuple(row) for row in table.tolist()]


def test_region_ranking_is_the_filtered_argsort() -> None:
    """SingleRegionProposer's ranking equals argsort(-(free * flops), stable) filtered to regions with free GPUs."""
    from types import SimpleNamespace

    from sfenv.env.proposers import PlanCache

    rng = np.random.default_rng(9)
    prop = SingleRegionProposer(PlanCache())
    for trial in range(400):
        c = int(rng.integers(1, 40))
        flops = rng.choice([1e14, 3.12e14, 9.89e14, 2.0e15], size=c)
        if trial % 5 == 0:
            flops[rng.integers(c)] = rng.choice([0.0, np.inf, np.nan])  # the general path
        free = rng.choice([0, 0, 1, 4, 8, 16], size=c) if trial % 7 else rng.integers(-2, 5, size=c)
        free_arr = free.astype(np.int64)
        free_arr.setflags(write=False)
        view = SimpleNamespace(free_gpus=free_arr, topo=SimpleNamespace(gpu_flops=flops))
        with np.errstate(invalid="ignore"):  # 0 x inf
            got_free, got = prop._ranking(view)
            order = np.argsort(-(free_arr * flops), kind="stable").tolist()
        assert got == [r for r in order if free_arr[r] > 0]
        assert got_free == free_arr.tolist()
        assert prop._ranking(view)[1] is got  # the same array: remembered
