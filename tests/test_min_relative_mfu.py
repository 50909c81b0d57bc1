"""``min_relative_mfu``: candidates across regions that the WAN makes inefficient leave the env's menu."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from sfenv.env import GeoSchedEnv
from sfenv.env.proposers import round_budget
from sfenv.errors import InvalidInput
from sfenv.model.perf import Plan

ROOT = Path(__file__).resolve().parents[1]
GEO6 = ROOT / "docs" / "results" / "learned" / "v2" / "geo-6-contended-validation.yaml"


def _mfu(env: GeoSchedEnv, plan: Plan) -> float:
    """Tokens/s per peak FLOP/s of the plan's GPUs, computed here from the plan and a fresh evaluation."""
    perf = env.view.evaluate(plan)
    flops = env.scenario.topology.gpu_flops
    peak = sum(n * s.tp * flops[r] for s in plan.stages for r, n in s.placement)
    return perf.throughput / peak if perf.feasible else 0.0


def _best_single(env: GeoSchedEnv, job_id: int) -> float:
    """The job's best single-region MFU over every region's whole capacity (up to its max_gpus)."""
    job = env.view.job(job_id)
    best = 0.0
    for r, n in enumerate(env.scenario.topology.gpu_counts.tolist()):
        budget = round_budget(min(n, job.max_gpus))
        if budget >= job.min_gpus:
            res = env.cache.fit(env.view, job, (r,), (budget,))
            if res is not None:
                best = max(best, _mfu(env, res[0]))
    return best


def _play(env: GeoSchedEnv, seed: int, steps: int) -> tuple[int, int, list[tuple[Plan, float, float]]]:
    """Start the first valid candidate each step; (steps, multi-region candidates seen, (plan, mfu, best) per one)."""
    env.reset(seed=seed)
    seen, rows = 0, []
    for n in range(steps):
        for plan in env.candidates:
            if len(plan.regions) > 1:
                seen += 1
                rows.append((plan, _mfu(env, plan), _best_single(env, plan.job_id)))
        mask = env.action_masks()
        _, _, term, trunc, _ = env.step(int(np.flatnonzero(mask)[0]))
        if term or trunc:
            return n + 1, seen, rows
    return steps, seen, rows


@pytest.mark.parametrize("bad", [0.0, -0.5, 1.5, float("nan"), True, "0.7"])
def test_a_bad_value_is_refused_naming_the_argument(bad: object) -> None:
    with pytest.raises(InvalidInput, match="min_relative_mfu"):
        GeoSchedEnv("spider-8", num_jobs=4, min_relative_mfu=bad)  # type: ignore[arg-type]


def test_off_by_default_and_every_kept_multi_region_candidate_meets_the_floor() -> None:
    """Without the floor the menu offers WAN-bound plans; with it, none below the floor is offered."""
    if not GEO6.exists():
        pytest.skip("the validation scenario is not in this checkout")
    kw = {"proposers": "best", "num_jobs": 40, "obs_mode": "compact"}
    _, seen_off, rows_off = _play(GeoSchedEnv(GEO6, **kw), seed=3, steps=60)
    below = [(m, b) for _, m, b in rows_off if b > 0 and m < 0.7 * b]
    assert below, "the check needs a state whose menu holds a WAN-bound plan"
    env = GeoSchedEnv(GEO6, min_relative_mfu=0.7, **kw)
    _, seen_on, rows_on = _play(env, seed=3, steps=60)
    assert seen_on < seen_off
    for plan, mfu, best in rows_on:
        assert best == 0.0 or mfu >= 0.7 * best * (1 - 1e-9), plan


def test_single_region_candidates_are_never_dropped() -> None:
    """The floor reads plans across regions only: on one episode's first state the single-region menu is unchanged."""
    kw = {"proposers": "best", "num_jobs": 12}
    a, b = GeoSchedEnv("spider-8-contended", **kw), GeoSchedEnv("spider-8-contended", min_relative_mfu=1.0, **kw)
    a.reset(seed=5)
    b.reset(seed=5)
    single_a = [p for p in a.candidates if len(p.regions) == 1]
    assert single_a
    assert single_a == [p for p in b.candidates if len(p.regions) == 1]


def test_with_work_conserving_the_floored_menu_still_finishes_every_job() -> None:
    """Work-conserving play on the floored menu: masks agree with the menu, nothing invalid, every job finishes."""
    if not GEO6.exists():
        pytest.skip("the validation scenario is not in this checkout")
    env = GeoSchedEnv(GEO6, proposers="best", num_jobs=20, work_conserving=True, min_relative_mfu=1.0)
    env.reset(seed=3)
    for _ in range(400):
        mask = env.action_masks()
        assert mask[-1] == (not mask[:-1].any())
        assert all(len(p.regions) == 1 or _mfu(env, p) >= _best_single(env, p.job_id) * (1 - 1e-9)
                   for p in env.candidates)
        _, _, term, trunc, info = env.step(int(np.flatnonzero(mask)[0]))
        assert not info["invalid_action"]
        if term or trunc:
            break
    assert term
    assert info["episode_report"]["unfinished"] == 0


def test_teachers_never_offer_a_decision_the_floor_dropped() -> None:
    """A heuristic's decision the floor left out is not injected: the expert waits, the teacher scores the menu."""
    if not GEO6.exists():
        pytest.skip("the validation scenario is not in this checkout")
    from sfenv.agents.imitation import _actions_to_score, expert_action

    from sfenv.env.proposers import DecisionRecorder

    env = GeoSchedEnv(GEO6, proposers="best", num_jobs=40, min_relative_mfu=1.0)
    env.reset(seed=3)
    dropped = 0
    for _ in range(60):
        menu = env.candidates
        decisions = [p.decision for p in env.proposers if isinstance(p, DecisionRecorder) and p.decision is not None]
        dropped += sum(d not in menu for d in decisions)
        for name in ("fastest+swf", "fifo+swf", "spinsearch+swf"):
            a = expert_action(env, name)
            assert a == env.wait_action or 0 <= a < len(menu)
        assert all(a == env.wait_action or a < len(menu) for a in _actions_to_score(env, "proposed", None))
        assert env.candidates == menu  # nothing was injected
        mask = env.action_masks()
        _, _, term, trunc, _ = env.step(int(np.flatnonzero(mask)[0]))
        if term or trunc:
            break
    assert dropped > 0, "the check needs a state where the floor drops a heuristic's decision"
