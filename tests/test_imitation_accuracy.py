"""The offline imitation experiment (sfenv.experiments.imitation_accuracy), in a smoke version."""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("sb3_contrib")
from sfenv.agents.imitation import expert_action
from sfenv.experiments import imitation_accuracy as ia

from sfenv.env import GeoSchedEnv
from sfenv.scenario import load_scenario


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("imitation")
    assert ia.main(["collect", "--split", "train", "--states", "6", "--num-jobs", "3", "--out",
                    str(folder / "train.npz")]) == 0
    assert ia.main(["collect", "--split", "validation", "--states", "6", "--num-jobs", "3", "--out",
                    str(folder / "val.npz")]) == 0
    return folder


def test_collected_labels_are_the_teachers(files):
    data = np.load(files / "val.npz")
    assert data["scenario"][0] == "spider-16" and int(data["seed"][0]) == 10000
    env = GeoSchedEnv(scenario=load_scenario("spider-16"), num_jobs=3, **ia.ENV_KWARGS)
    obs, _ = env.reset(seed=10000)
    np.testing.assert_array_equal(obs["candidates"], data["obs_candidates"][0])
    assert int(data["act"][0]) == expert_action(env, ia.TEACHER)
    assert set(ia.group_of(str(s)) for s in data["scenario"]) <= set(ia.GROUPS)


@pytest.mark.parametrize("policy", ["default", "candidate-set"])
def test_fit_reports_accuracy_per_group(files, tmp_path, policy):
    # labels made trivially learnable (always wait, which is always valid), validated on the training
    # states themselves: the fit must reach every label, and the accuracy per group must say so
    data = dict(np.load(files / "train.npz"))
    data["act"] = np.full_like(data["act"], data["mask"].shape[1] - 1)
    np.savez(tmp_path / "train.npz", **data)
    out = ia.fit(tmp_path / "train.npz", tmp_path / "train.npz", policy, epochs=200, width=16, embed_dim=16,
                 learning_rate=3e-3)
    assert out["train_accuracy"] == 1.0
    groups = [g for g in ia.GROUPS if f"{g}_accuracy" in out]
    assert groups and all(out[f"{g}_accuracy"] == 1.0 for g in groups)
    assert sum(out[f"{g}_states"] for g in groups) == len(data["act"])
    assert set(groups) == {ia.group_of(str(s)) for s in data["scenario"]}


def test_cli_fit_prints_one_json_line_and_refuses_to_overwrite(files, capsys):
    assert ia.main(["fit", "--train", str(files / "train.npz"), "--validation", str(files / "val.npz"),
                    "--epochs", "1", "--width", "8"]) == 0
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["policy"] == "default" and 0.0 <= line["train_accuracy"] <= 1.0
    with pytest.raises(SystemExit) as exc:
        ia.main(["collect", "--split", "train", "--states", "1", "--out", str(files / "train.npz")])
    assert exc.value.code == 2
    assert "exists" in capsys.readouterr().err
