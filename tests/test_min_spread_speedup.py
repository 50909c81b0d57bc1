"""``min_spread_speedup``: a plan across regions stays on the menu only if it beats waiting for one region."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from floor_checks import single_region_finish

from sfenv.env import GeoSchedEnv
from sfenv.env.proposers import round_budget
from sfenv.errors import InvalidInput
from sfenv.model.perf import Plan

ROOT = Path(__file__).resolve().parents[1]
GEO6 = ROOT / "docs" / "results" / "learned" / "v2" / "geo-6-contended-validation.yaml"


def _spread_rows(env: GeoSchedEnv, seed: int, steps: int) -> list[tuple[Plan, float, float]]:
    """Start the first valid candidate each step; per multi-region candidate seen: (plan, its time, waiting's)."""
    env.reset(seed=seed)
    rows = []
    for _ in range(steps):
        for plan in env.candidates:
            if len(plan.regions) > 1:
                left = env.view.job(plan.job_id).iterations - env.view.waiting_progress(plan.job_id)
                rows.append((plan, left * env.view.evaluate(plan).iter_time, single_region_finish(env, plan.job_id)))
        _, _, term, trunc, _ = env.step(int(np.flatnonzero(env.action_masks())[0]))
        if term or trunc:
            break
    return rows


@pytest.mark.parametrize("bad", [0.0, -1.0, 11.0, float("nan"), float("inf"), True, "1"])
def test_a_bad_value_is_refused_naming_the_argument(bad: object) -> None:
    with pytest.raises(InvalidInput, match="min_spread_speedup"):
        GeoSchedEnv("spider-8", num_jobs=4, min_spread_speedup=bad)  # type: ignore[arg-type]


def test_every_kept_spread_plan_beats_waiting_for_one_region() -> None:
    """Off, the menu offers spread plans that waiting for one region beats; on, every one offered is faster."""
    if not GEO6.exists():
        pytest.skip("the validation scenario is not in this checkout")
    kw = {"proposers": "best", "num_jobs": 40, "obs_mode": "compact"}
    off = _spread_rows(GeoSchedEnv(GEO6, **kw), seed=3, steps=60)
    assert any(single < spread for _, spread, single in off), "the check needs a spread plan waiting would beat"
    on = _spread_rows(GeoSchedEnv(GEO6, min_spread_speedup=1.0, **kw), seed=3, steps=60)
    assert len(on) < len(off)
    for plan, spread, single in on:
        assert single >= spread * (1 - 1e-9), plan
    # a stricter speedup keeps a subset of the plans a looser one keeps, on the same first state
    loose, strict = GeoSchedEnv(GEO6, min_spread_speedup=0.5, **kw), GeoSchedEnv(GEO6, min_spread_speedup=2.0, **kw)
    loose.reset(seed=3)
    strict.reset(seed=3)
    assert set(strict.candidates) <= set(loose.candidates)


def test_with_work_conserving_every_job_finishes_and_an_episode_repeats() -> None:
    """Both floors together, work-conserving: nothing invalid, every job finishes, same seed same episode."""
    if not GEO6.exists():
        pytest.skip("the validation scenario is not in this checkout")

    def play() -> tuple[list[int], dict]:
        env = GeoSchedEnv(GEO6, proposers="best", num_jobs=16, work_conserving=True, min_relative_mfu=0.7,
                          min_spread_speedup=1.0)
        env.reset(seed=4)
        actions = []
        for _ in range(400):
            mask = env.action_masks()
            assert mask[-1] == (not mask[:-1].any())
            actions.append(int(np.flatnonzero(mask)[-2 if mask[:-1].any() and mask[:-1].sum() > 1 else 0]))
            _, _, term, trunc, info = env.step(actions[-1])
            assert not info["invalid_action"]
            if term or trunc:
                break
        assert term and info["episode_report"]["unfinished"] == 0
        return actions, info["episode_report"]

    assert play() == play()


def test_gym_make_takes_it_the_checker_passes_and_play_env_accepts_it() -> None:
    import gymnasium as gym
    from gymnasium.utils.env_checker import check_env
    from sfenv.agents.learned import check_play_env

    import sfenv  # noqa: F401  (registers the ids)

    env = gym.make("sfenv/GeoSched-v6", num_jobs=6, min_spread_speedup=1.0)
    assert env.unwrapped.min_spread_speedup == 1.0
    check_env(env.unwrapped, skip_render_check=True)
    assert check_play_env({"min_relative_mfu": 0.7, "min_spread_speedup": 1.0}, "m") == {
        "min_relative_mfu": 0.7, "min_spread_speedup": 1.0}
    with pytest.raises(InvalidInput, match="play_env.min_spread_speedup"):
        check_play_env({"min_spread_speedup": "x"}, "m")
    assert check_play_env({"spread_wait": "queue"}, "m") == {"spread_wait": "queue"}
    for bad in ("fifo", 1, None):
        with pytest.raises(InvalidInput, match="play_env.spread_wait"):
            check_play_env({"spread_wait": bad}, "m")


def test_earliest_start_waits_for_enough_holders_to_leave() -> None:
    from sfenv.env.geosched import _earliest_start

    held = [(30.0, 4), (10.0, 2), (20.0, 2)]  # (until, GPUs) on a region of 8 usable GPUs: none free now
    assert _earliest_start(held, 8, 2, 0.0) == 10.0
    assert _earliest_start(held, 8, 4, 0.0) == 20.0
    assert _earliest_start(held, 8, 8, 0.0) == 30.0
    assert _earliest_start(held, 8, 2, 25.0) == 25.0  # from 25 s only the 4-GPU holder is left
    assert _earliest_start(held, 8, 9, 0.0) == float("inf")


def test_queued_waits_are_no_shorter_and_the_first_in_line_waits_only_for_running_jobs() -> None:
    """spread_wait 'queue': every job waits at least as long as with 'running'; the shortest job exactly as long."""
    if not GEO6.exists():
        pytest.skip("the validation scenario is not in this checkout")
    kw = {"proposers": "best", "num_jobs": 60, "min_spread_speedup": 1.0}
    running, queued = GeoSchedEnv(GEO6, **kw), GeoSchedEnv(GEO6, spread_wait="queue", **kw)
    checked = 0
    for env in (running, queued):
        env.reset(seed=3)
    for _ in range(40):
        waiting = [job.job_id for job in queued.view.waiting if queued._single_region_options(job.job_id)]
        if len(waiting) > 1:
            alone = {j: running._single_region_finish(j) for j in waiting}
            in_line = {j: queued._single_region_finish(j) for j in waiting}
            assert all(in_line[j] >= alone[j] * (1 - 1e-12) for j in waiting)
            shortest = min(waiting, key=lambda j: min(queued._iterations_left(j) * t
                                                      for _, _, t in queued._single_region_options(j)))
            assert in_line[shortest] == pytest.approx(alone[shortest])
            checked += int(any(in_line[j] > alone[j] * 1.01 for j in waiting))
        # the same actions in both: the menus differ only in spread plans, so start the first single-region one
        actions = []
        for env in (running, queued):
            singles = [i for i, p in enumerate(env.candidates) if len(p.regions) == 1]
            actions.append(singles[0] if singles else env.wait_action)
        assert running.candidates[actions[0]] == queued.candidates[actions[1]] if actions[0] < running.wait_action \
            else actions[1] == queued.wait_action
        for env, a in zip((running, queued), actions):
            env.step(a)
    assert checked, "the check needs states where the queue lengthens some job's wait"
    with pytest.raises(InvalidInput, match="spread_wait"):
        GeoSchedEnv("spider-8", num_jobs=4, spread_wait="fifo")


def _work(env: GeoSchedEnv, job_id: int) -> float:
    """GPU-seconds of the job on its cheapest single-region option (capacity up to max_gpus, halves, quarters)."""
    view, job = env.view, env.view.job(job_id)
    best = math.inf
    for region, capacity in enumerate(env.scenario.topology.gpu_counts.tolist()):
        cap = min(capacity, job.max_gpus)
        for budget in {round_budget(cap), round_budget(cap // 2), round_budget(cap // 4)}:
            if budget >= max(1, job.min_gpus):
                res = env.cache.fit(view, job, (region,), (budget,))
                if res is not None and res[1].feasible:
                    best = min(best, res[0].gpus * res[1].iter_time * job.iterations)
    return best


def test_arrival_stretch_is_the_busy_period_of_the_shorter_jobs_arrived_so_far() -> None:
    """spread_wait 'arrivals': 1 / (1 - rho), rho recomputed here from the arrived jobs; never a shorter wait."""
    if not GEO6.exists():
        pytest.skip("the validation scenario is not in this checkout")
    kw = {"proposers": "best", "num_jobs": 40, "min_spread_speedup": 1.0}
    running, stretched = GeoSchedEnv(GEO6, **kw), GeoSchedEnv(GEO6, spread_wait="arrivals", **kw)
    gpus = sum(stretched.scenario.topology.gpu_counts.tolist())
    for env in (running, stretched):
        env.reset(seed=5)
    above_one = 0
    for _ in range(30):
        view = stretched.view
        arrived = [j for j in range(view.num_jobs) if view.job(j).arrival <= view.time]
        works = {j: _work(stretched, j) for j in arrived}
        for job in view.waiting:
            ahead = sum(w for j, w in works.items() if j != job.job_id and w < works[job.job_id])
            rho = ahead / ((view.time - view.job(0).arrival) * gpus) if view.time > view.job(0).arrival else 0.0
            expected = 1.0 / (1.0 - rho) if rho < 1 else math.inf
            assert stretched._arrival_stretch(job.job_id) == pytest.approx(expected, rel=1e-9)
            above_one += expected > 1.05
            if stretched._single_region_options(job.job_id):
                alone, longer = running._single_region_finish(job.job_id), stretched._single_region_finish(job.job_id)
                assert longer >= alone * (1 - 1e-12)
        actions = []
        for env in (running, stretched):
            singles = [i for i, p in enumerate(env.candidates) if len(p.regions) == 1]
            actions.append(singles[0] if singles else env.wait_action)
        chosen = [env.candidates[a] if a < env.wait_action else None for env, a in zip((running, stretched), actions)]
        assert chosen[0] == chosen[1]  # the same state in both: the menus differ only in spread plans
        for env, a in zip((running, stretched), actions):
            env.step(a)
    assert above_one, "the check needs states where earlier, shorter arrivals stretch a wait"


def test_stretched_waits_keep_no_wait_at_zero() -> None:
    """A job that can start now waits 0 s however much the arrivals stretch waits (0 * inf is not nan)."""
    from sfenv.env.geosched import _stretched

    assert _stretched(0.0, math.inf) == 0.0
    assert _stretched(10.0, 2.5) == 25.0
    assert _stretched(10.0, math.inf) == math.inf
