"""``floor_exempt``: a named heuristic's decision stays on the menu whatever the floors say; nothing else changes."""

from __future__ import annotations

from pathlib import Path

import pytest
from floor_checks import best_single_region_mfu, plan_mfu, single_region_finish

from sfenv.env import GeoSchedEnv
from sfenv.env.proposers import DecisionRecorder
from sfenv.errors import InvalidInput
from sfenv.model.perf import Plan

ROOT = Path(__file__).resolve().parents[1]
GEO6 = ROOT / "docs" / "results" / "learned" / "v2" / "geo-6-contended-validation.yaml"


def _decision(env: GeoSchedEnv, name: str) -> Plan | None:
    return next(p.decision for p in env.proposers if isinstance(p, DecisionRecorder) and p.name == name)


def test_the_exempt_decision_is_added_and_the_rest_of_the_menu_is_the_floored_one() -> None:
    """Two envs walk the same states; the exempt one's menu is the floored menu plus the dropped decision only."""
    if not GEO6.exists():
        pytest.skip("the validation scenario is not in this checkout")
    kw = {"proposers": "best+spantrain", "num_jobs": 30, "max_candidates": 64, "min_relative_mfu": 0.7}
    floored, exempt = GeoSchedEnv(GEO6, **kw), GeoSchedEnv(GEO6, floor_exempt=["spantrain+swf"], **kw)
    floored.reset(seed=10_000)
    exempt.reset(seed=10_000)
    brought_back = compared = 0
    for _ in range(30):
        decision = _decision(exempt, "spantrain+swf")
        assert decision == _decision(floored, "spantrain+swf")  # the same state, the same decision
        assert decision is None or decision in exempt.candidates  # never dropped
        if decision is not None and decision not in floored.candidates:
            assert len(decision.regions) > 1
            # the floor did drop it
            assert plan_mfu(exempt, decision) < 0.7 * best_single_region_mfu(exempt, decision.job_id)
            brought_back += 1
        expected = [c for c in exempt.candidates if c in floored.candidates or c != decision]
        assert expected == floored.candidates  # nothing else enters, nothing leaves, the order is kept
        compared += 1
        if not floored.candidates or floored.candidates[0] != exempt.candidates[0]:
            break
        for env in (floored, exempt):  # both start candidate 0, the same plan: the states stay the same
            *_, term, trunc, _ = env.step(0)
        if term or trunc:
            break
    assert brought_back > 0, "the check needs a state where the floor drops spantrain's decision"
    assert compared > brought_back, (compared, brought_back)


def test_off_by_default_and_an_empty_list_changes_nothing() -> None:
    kw = {"proposers": "best", "num_jobs": 12, "min_relative_mfu": 1.0}
    a, b = GeoSchedEnv("spider-8", **kw), GeoSchedEnv("spider-8", floor_exempt=[], **kw)
    assert a.floor_exempt == b.floor_exempt == ()
    a.reset(seed=5)
    b.reset(seed=5)
    assert a.candidates == b.candidates


@pytest.mark.parametrize(("proposers", "bad"), [
    ("best", ["spantrain+swf"]),  # not among the recorded decisions of "best"
    ("default", ["fastest+swf"]),  # the default proposers record no decision
    ("best+spantrain", "spantrain+swf"),  # a string, not a list of names
    ("best+spantrain", [3]),
    ("best+spantrain", None),
])
def test_a_name_that_is_not_a_recorded_decision_is_refused_naming_the_argument(proposers: str, bad: object) -> None:
    with pytest.raises(InvalidInput, match="floor_exempt"):
        GeoSchedEnv("spider-8", num_jobs=4, proposers=proposers, floor_exempt=bad)  # type: ignore[arg-type]


def test_play_env_takes_it_as_data() -> None:
    from sfenv.agents.learned import check_play_env

    assert check_play_env({"floor_exempt": ["spantrain+swf"]}, "m") == {"floor_exempt": ["spantrain+swf"]}
    for bad in ("spantrain+swf", [1], ["x" * 65], ["a"] * 17, [""]):
        with pytest.raises(InvalidInput, match="play_env.floor_exempt"):
            check_play_env({"floor_exempt": bad}, "m")


def test_floor_exempt_from_keeps_the_decision_only_past_the_floors_not_named() -> None:
    """``floor_exempt_from=["min_relative_mfu"]``: the decision skips the MFU floor, not the test against waiting.

    Four envs walk the same states (each step starts a plan on every menu, the decision when it can, or
    waits): no exemption (``floored``), the wait test alone (``wait_only``), the decision exempt from both
    floors (``both``) and from the MFU floor only (``mfu_only``).  The last one's menu is the floored menu
    plus the decision exactly when the wait test alone keeps it.
    """
    kw = {"proposers": "best+spantrain", "num_jobs": 60, "max_candidates": 64}
    floors = {"min_relative_mfu": 0.8, "min_spread_speedup": 1.0}
    exempt = {"floor_exempt": ["spantrain+swf"]}
    envs = {"floored": GeoSchedEnv("spider-8-contended", **floors, **kw),
            "wait_only": GeoSchedEnv("spider-8-contended", min_spread_speedup=1.0, **kw),
            "both": GeoSchedEnv("spider-8-contended", **floors, **exempt, **kw),
            "mfu_only": GeoSchedEnv("spider-8-contended", **floors, **exempt, floor_exempt_from=["min_relative_mfu"],
                                    **kw)}
    assert envs["both"].floor_exempt_from == frozenset({"min_relative_mfu", "min_spread_speedup"})
    for env in envs.values():
        env.reset(seed=10_002)  # a seed with states of both kinds
    kept = dropped = 0
    for _ in range(400):
        decision = _decision(envs["mfu_only"], "spantrain+swf")
        menus = {name: env.candidates for name, env in envs.items()}
        if decision is not None and decision not in menus["floored"]:
            assert decision in menus["both"]
            passes_wait = decision in menus["wait_only"]
            assert (decision in menus["mfu_only"]) == passes_wait
            kept += passes_wait
            dropped += not passes_wait
        assert [c for c in menus["mfu_only"] if c != decision or c in menus["floored"]] == menus["floored"]
        common = [c for c in menus["floored"] if all(c in m for m in menus.values())]
        plan = decision if decision is not None and all(decision in m for m in menus.values()) else (
            common[0] if common else None)
        for name, env in envs.items():
            *_, term, trunc, _ = env.step(menus[name].index(plan) if plan is not None else env.max_candidates)
        if term or trunc:
            break
    assert kept > 0 and dropped > 0, (kept, dropped)


@pytest.mark.parametrize("bad", [[], "min_relative_mfu", ["min_relative_mfu", "x"], None])
def test_floor_exempt_from_refuses_anything_but_floor_names(bad: object) -> None:
    with pytest.raises(InvalidInput, match="floor_exempt_from"):
        GeoSchedEnv("spider-8", num_jobs=4, proposers="best+spantrain", floor_exempt=["spantrain+swf"],
                    floor_exempt_from=bad)  # type: ignore[arg-type]
    from sfenv.agents.learned import check_play_env

    with pytest.raises(InvalidInput, match="play_env.floor_exempt_from"):
        check_play_env({"floor_exempt_from": bad}, "m")


def test_floor_decisions_counts_what_the_floors_leave_out(capsys: pytest.CaptureFixture[str]) -> None:
    """``experiments.floor_decisions`` agrees with the floors recomputed here (``floor_checks``) on the same walk."""
    from sfenv.experiments.floor_decisions import count_left_out, main

    counts = count_left_out("spider-8-contended", 10_002, num_jobs=60)
    env = GeoSchedEnv("spider-8-contended", proposers="best+spantrain", max_candidates=16, queue_window=8,
                      work_conserving=True, num_jobs=60, min_relative_mfu=0.8, min_spread_speedup=1.0,
                      floor_exempt=["spantrain+swf"])
    env.reset(seed=10_002)
    seen = {"spread": 0, "left_out": 0, "left_out_by_wait": 0}
    done = False
    while not done:
        decision = _decision(env, "spantrain+swf")
        if decision is not None and len(decision.regions) > 1:
            left = env.view.job(decision.job_id).iterations - env.view.waiting_progress(decision.job_id)
            loses_to_waiting = single_region_finish(env, decision.job_id) < left * env.view.evaluate(decision).iter_time
            wan_bound = plan_mfu(env, decision) < 0.8 * best_single_region_mfu(env, decision.job_id)
            seen["spread"] += 1
            seen["left_out"] += loses_to_waiting or wan_bound
            seen["left_out_by_wait"] += loses_to_waiting
        action = (env.candidates.index(decision) if decision is not None
                  else 0 if env.candidates else env.max_candidates)
        *_, term, trunc, _ = env.step(action)
        done = term or trunc
    assert counts == seen
    assert 0 < seen["left_out_by_wait"] < seen["spread"], seen  # the walk has decisions of both kinds
    main(["--seeds", "1", "--num-jobs", "10"])
    assert "left out by both floors" in capsys.readouterr().out
