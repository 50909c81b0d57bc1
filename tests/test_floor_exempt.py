"""``floor_exempt``: a named heuristic's decision stays on the menu whatever the floors say; nothing else changes."""

from __future__ import annotations

from pathlib import Path

import pytest
from floor_checks import best_single_region_mfu, plan_mfu

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
