"""Issue 34's targets for the recommended recipe, computed from a run on env v6 (slow: 30-60 minutes on 2 cores).

The recipe (``sfenv/hyperparams/train-generalise-rollout.yml``, chosen on validation seeds only,
docs/training.md) is trained from scratch as a user runs it, then played once in the play mode it names
on the protocol's test split (the first 10 test seeds) of its model-selection scenario and of the scenarios
it never saw: ``geo-8-contended`` (held out by the protocol), ``spider-16``, a contended scenario on six of
the measured regions with another job mix (``docs/results/learned/v2/geo-6-contended-heldout.yaml``)
and the protocol's first 4 generated test platforms (pooled); and on the larger held-out set's three
scenarios on other region subsets, loads and job mixes (``geo-5-contended-heldout-b``,
``geo-7-contended-heldout-c``, ``geo-4-contended-heldout-d`` in ``docs/results/learned/v2/``), on three
of them with 2022's and 2024's prices, and on two scenarios on other cloud regions with 2024 prices
(``geo-8-other-contended-heldout``, ``geo-6-other-contended-heldout-b``) on the first 20 test seeds, as
docs/training.md reports them.  Targets:

- training within 15 minutes of CPU (the budget of 2 cores; training runs in one thread);
- no unfinished job anywhere;
- on its training scenario, the privileged oracle's level: mean JCT at most 0.90x the best heuristic's,
  paired 95 % interval below 0.92;
- on every unseen scenario, no worse than the best heuristic: the interval's upper end at most 1.02.

A target the measured run missed is marked ``xfail(strict=True)`` with the measured figure, so that
reaching it fails the mark and the mark must go.  The default run's smoke version of the recipe is
``tests/test_bundled_configs_train.py``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("stable_baselines3")
pytest.importorskip("sb3_contrib")

import torch

pytestmark = pytest.mark.slow

RECIPE = "generalise-rollout"
V2 = Path(__file__).resolve().parents[1] / "docs" / "results" / "learned" / "v2"
HELD_OUT = V2 / "geo-6-contended-heldout.yaml"
#: the larger held-out set's new scenarios, played on 20 test seeds: other region subsets, loads and job mixes;
#: other price years (2022, 2024); other cloud regions with 2024 prices (docs/training.md)
HELD_OUT_20 = ("geo-5-contended-heldout-b", "geo-7-contended-heldout-c", "geo-4-contended-heldout-d",
               *(f"{base}-prices-{year}" for base in ("geo-8-contended", "geo-6-contended-heldout",
                                                      "geo-5-contended-heldout-b") for year in (2022, 2024)),
               "geo-8-other-contended-heldout", "geo-6-other-contended-heldout-b")
UNSEEN = ("geo-8-contended", "spider-16", "geo-6-contended-heldout", "generated", *HELD_OUT_20)
#: targets the measured run missed: the figure measured.  Env v6, 2026-11-28 (the recipe retrained as shipped, 228
#: CPU s beside a claims run; docs/training.md, "The recipe on every test group, env v6"): met on geo-8-contended
#: 1.002x (0.990-1.016), spider-16 0.931x (0.887-0.980), the generated test platforms 0.926x (0.891-0.949),
#: geo-7-contended-heldout-c 0.865x (0.854-0.878), geo-4-contended-heldout-d 0.912x (0.885-0.964); with 2022's prices
#: geo-8-contended 1.002x (0.997-1.010), geo-6-contended-heldout 0.997x (0.984-1.005) and geo-5-contended-heldout-b
#: 1.005x (1.000-1.015); with 2024's geo-8-contended 0.996x (0.988-1.005) and geo-6-contended-heldout 1.000x
#: (0.990-1.009); on other cloud regions geo-8-other-contended-heldout 0.828x (0.799-0.853),
#: geo-6-other-contended-heldout-b 0.659x (0.614-0.710).  Env v5's run (378 CPU s) and v4's (316 CPU s) met 12 of
#: the 15 as well, geo-6-contended-heldout among them and geo-5-contended-heldout-b with 2022's prices not.
MISSED: dict[str, str] = {
    "oracle-level": "env v6, 2026-11-28: 0.931x (0.889-0.960) the best heuristic on spider-8-contended's test split "
                    "(env v5: 0.932x; env v4: 0.931x; the privileged oracle on env v5: 0.906x, 0.886-0.922)",
    "geo-5-contended-heldout-b": "env v6, 2026-11-28, 20 seeds: 1.021x (1.008-1.056), spantrain+swf keeping every "
                                 "job in one region (env v5: 1.010x; env v4: 1.016x)",
    "geo-5-contended-heldout-b-prices-2024": "env v6, 2026-11-28, 20 seeds: 1.016x (1.007-1.032) (env v5: 1.009x)",
    "geo-6-contended-heldout": "env v6, 2026-11-28, 10 seeds: 1.014x (1.004-1.025), spantrain+swf keeping every job "
                               "in one region (env v5: 0.996x, met)",
}


def _mark(target: str) -> Any:
    """``target`` as a test parameter, expected to fail (strictly) when the measured run missed it."""
    if target in MISSED:
        return pytest.param(target, marks=pytest.mark.xfail(strict=True, reason=MISSED[target]))
    return target


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Train the recipe (timed in CPU seconds of this process) and play it once on the test groups."""
    from sfenv.experiments.learned_vs_heuristics import main as compare_main

    from sfenv.app.cli import main as sfenv_main

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("recommended")
    cpu = time.process_time()
    assert sfenv_main(["train", "--config", RECIPE, "--out", str(root / "runs"), "--quiet", "--no-plot",
                       "--no-tensorboard"]) == 0
    cpu = time.process_time() - cpu
    (model,) = sorted((root / "runs").glob("*/best_model.zip"))
    res = compare_main(["--model", str(model), "--scenario", "spider-8-contended", "--split", "test", "--seeds", "10",
                        "--unseen", f"geo-8-contended,spider-16,{HELD_OUT}", "--unseen-generated", "4",
                        "--out", str(root / "out")])
    more = compare_main(["--model", str(model), "--scenario", str(V2 / f"{HELD_OUT_20[0]}.yaml"), "--split", "test",
                         "--seeds", "20", "--unseen", ",".join(str(V2 / f"{n}.yaml") for n in HELD_OUT_20[1:]),
                         "--out", str(root / "out-20")])
    unseen = {Path(name).stem: group for name, group in {**res["unseen"], **more["unseen"]}.items()}
    groups = {"spider-8-contended": res, "generated": res["unseen_generated"], HELD_OUT_20[0]: more, **unseen}
    return {"train_cpu_s": cpu, "play": res["play"], "play_env": res["play_env"], "play_defer": res["play_defer"],
            "groups": groups}


def _model_row(group: dict[str, Any]) -> dict[str, Any]:
    """The learned policy's summary row of one comparison."""
    return next(v for a, v in group["summary"].items() if a.startswith("model:"))


@pytest.mark.parametrize("target", [_mark("budget")])
def test_trains_within_15_cpu_minutes(report: dict[str, Any], target: str) -> None:
    assert report["train_cpu_s"] <= 15 * 60, report["train_cpu_s"]


def test_played_in_the_play_mode_the_recipe_names(report: dict[str, Any]) -> None:
    from sfenv.agents.learned import load_config

    assert report["play"] == load_config(RECIPE)["play"]
    assert report["play_env"] == load_config(RECIPE).get("play_env", {})
    assert report["play_defer"] == load_config(RECIPE).get("play_defer")


@pytest.mark.parametrize("name", ["spider-8-contended", *UNSEEN])
def test_no_unfinished_job(report: dict[str, Any], name: str) -> None:
    assert _model_row(report["groups"][name])["unfinished"] == 0


@pytest.mark.parametrize("target", [_mark("oracle-level")])
def test_reaches_the_oracle_level_on_its_training_scenario(report: dict[str, Any], target: str) -> None:
    ratio, _, high = report["groups"]["spider-8-contended"]["ratio_to_best"]
    assert ratio <= 0.90 and high < 0.92, (ratio, high)


@pytest.mark.parametrize("name", [_mark(name) for name in UNSEEN])
def test_no_worse_than_the_best_heuristic_where_it_never_trained(report: dict[str, Any], name: str) -> None:
    high = report["groups"][name]["ratio_to_best"][2]
    assert high <= 1.02, report["groups"][name]["ratio_to_best"]
