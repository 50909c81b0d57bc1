"""``sfenv train`` says what it is doing (cloning and DAgger rounds, evaluations) and ends with one
line: the best model's held-out mean JCT against FIFO's and the best reference agent's."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from sfenv.app.cli import main

TINY = ["--steps", "256", "--num-jobs", "6", "--eval-seeds", "2", "--eval-every", "128", "--n-envs", "2",
        "--hp", "n_steps=64", "--hp", "batch_size=64", "--no-tensorboard", "--baselines", "fifo,spantrain+swf"]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    pytest.importorskip("sb3_contrib")
    folder = tmp_path_factory.mktemp("train")
    capture = pytest.MonkeyPatch()
    capture.chdir(folder)
    try:
        import contextlib
        import io

        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["train", *TINY, "--pretrain-steps", "64"])
    finally:
        capture.undo()
    assert code == 0, err.getvalue()[-2000:]
    (run,) = (folder / "runs").iterdir()
    return run, out.getvalue(), err.getvalue()


def test_default_train_is_the_quick_recipe(tiny_run):
    """A bare ``sfenv train`` runs the ``quick`` config (cloning, then PPO), tiny here by the options."""
    from sfenv.agents.learned import load_config

    run, _, _ = tiny_run
    quick = load_config("quick")
    config = yaml.safe_load((run / "config.yml").read_text())
    assert run.name == f"maskable-ppo-{quick['scenario']}-s0"
    assert config["pretrain"]["expert"] == quick["pretrain"]["expert"] and config["pretrain"]["steps"] == 64
    assert config["env_kwargs"]["proposers"] == quick["env_kwargs"]["proposers"]


def test_progress_lines_for_cloning_dagger_and_evaluations(tiny_run):
    run, _, err = tiny_run
    expert = yaml.safe_load((run / "config.yml").read_text())["pretrain"]["expert"]
    assert f"pretrain round 1/2: collecting 64 steps labelled by {expert}, the expert acting" in err
    assert re.search(r"collected \d+/64 steps \(\d+ s, about \d+ s left for this collection\)", err)
    assert "step/s" not in err and "s/step" not in err  # stderr is no terminal here: no bars, lines only
    assert "pretrain round 2/2: collecting 64 steps" in err and "(DAgger)" in err
    records = json.loads((run / "pretrain.json").read_text())
    for record in records:  # each round's line carries the recorded agreement, loss and accuracy
        line = next(x for x in err.splitlines() if x.startswith(f"pretrain round {record['round']}/2: fitted"))
        assert f"on {record['steps']:,} steps" in line
        assert f"{record['agreement']:.0%}" in line and f"loss {record['loss']:.3f}" in line
        assert f"accuracy {record['accuracy']:.1%}" in line
    history = json.loads((run / "eval.json").read_text())
    eval_lines = [x for x in err.splitlines() if x.startswith("eval at step")]
    assert len(eval_lines) == len(history) >= 2
    for point, line in zip(history, eval_lines):
        assert f"step {point['timesteps']:,}:" in line and f"mean JCT {point['mean_jct_h']:.2f} h" in line
        assert ("best so far" in line) == point["best"]


def test_summary_line_compares_the_best_model_with_fifo_and_the_best_heuristic(tiny_run):
    run, out, _ = tiny_run
    history = json.loads((run / "eval.json").read_text())
    levels = json.loads((run / "levels.json").read_text())
    seeds = yaml.safe_load((run / "config.yml").read_text())["eval_seeds"]
    best = [h for h in history if h["best"]][-1]
    summary = out.strip().splitlines()[-1]
    jct = best["mean_jct_h"]
    assert summary.startswith(f"best model (step {best['timesteps']:,}): mean JCT {jct:.2f} h "
                              f"on seeds {seeds[0]}..{seeds[-1]}")
    fifo = levels["fifo"]["mean_jct_h"]
    assert f"fifo {fifo:.2f} h ({jct / fifo:.2f}x)" in summary
    name = min(levels, key=lambda n: levels[n]["mean_jct_h"])
    if name != "fifo":
        level = levels[name]["mean_jct_h"]
        assert f"best heuristic {name} {level:.2f} h ({jct / level:.2f}x)" in summary
    assert re.search(r"\(\d+\.\d\dx\)", summary)


def test_quiet_training_prints_no_progress(tmp_path, monkeypatch, capsys):
    pytest.importorskip("sb3_contrib")
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--steps", "64", "--num-jobs", "4", "--eval-seeds", "1", "--n-envs", "1",
                 "--hp", "n_steps=64", "--hp", "batch_size=64", "--no-tensorboard", "--no-plot", "--quiet",
                 "--config", "none"]) == 0
    captured = capsys.readouterr()
    assert "eval at step" not in captured.err and "pretrain round" not in captured.err
    assert captured.out.strip().splitlines()[-1].startswith("best model (step 64): mean JCT")  # no levels: no ratio


def test_contended_configs_train_on_a_contended_scenario():
    from sfenv.agents.learned import bundled_configs, load_config

    from sfenv.scenario import load_scenario

    names = [n for n in bundled_configs() if n.startswith("contended")]
    assert "contended" in names
    for name in names:
        scenario = load_scenario(load_config(name)["scenario"])
        assert "contended" in scenario.name and scenario.cfg.workload.load >= 0.9, name
