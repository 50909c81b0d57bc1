"""Every number is checked where it enters: the command line (exit 2, a message, nothing written)
and the environment's constructor (a ValueError naming the argument, the value and the expectation).
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
import textwrap

import gymnasium as gym
import pytest

from sfenv.app.cli import build_parser, main
from sfenv.env import GeoSchedEnv
from sfenv.errors import InvalidInput, SfenvError
from sfenv.scenario import ScenarioError, load_scenario

# ---------------------------------------------------------------------------------- command line

BAD_CLI = [
    ["evaluate", "--seeds", "0", "--out", "r.json", "--csv", "r.csv"],
    ["evaluate", "--seeds", "-1", "--out", "r.json"],
    ["evaluate", "--seeds", "two", "--out", "r.json"],
    ["evaluate", "--seed", "-1", "--out", "r.json"],
    ["evaluate", "--num-jobs", "0", "--out", "r.json"],
    ["run", "--num-jobs", "0"],
    ["run", "--num-jobs", "-3"],
    ["run", "--seed", "-1"],
    ["run", "--agent", "nope"],
    ["run", "--scenario", "missing.yaml"],
    ["evaluate", "--agents", "nope", "--out", "r.json"],
    ["evaluate", "--agents", "model:missing.zip", "--seeds", "1", "--out", "r.json"],
    ["train", "--steps", "0"],
    ["train", "--steps", "-5"],
    ["train", "--n-envs", "0"],
    ["train", "--num-jobs", "0"],
    ["train", "--seed", "-2"],
    ["train", "--algo", "sac"],
    ["benchmark", "--seeds", "0"],
    ["benchmark", "--num-jobs", "0"],
    ["benchmark", "--seed", "-1"],
    ["plot", "nothing.json"],
]


@pytest.mark.parametrize("argv", BAD_CLI, ids=" ".join)
def test_bad_cli_input_exits_2_with_a_message_and_writes_nothing(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("sfenv:") and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []  # no results, no model folder, no runs/


def test_bad_number_message_names_the_option_and_the_expectation(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--n-envs", "0"]) == 2
    err = capsys.readouterr().err
    assert "--n-envs" in err and "from 1 to 256" in err and "got 0" in err


def test_bad_input_in_a_real_process_has_no_traceback(tmp_path):
    for argv in (["train", "--n-envs", "0"], ["evaluate", "--seeds", "0"], ["run", "--num-jobs", "0"]):
        proc = subprocess.run([sys.executable, "-m", "sfenv", *argv], cwd=tmp_path, capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 2 and proc.stdout == "", argv
        assert proc.stderr.startswith("sfenv:") and "Traceback" not in proc.stderr, argv
    assert list(tmp_path.iterdir()) == []


def test_num_jobs_is_used_not_replaced(capsys):
    """``run --num-jobs N`` runs N jobs (a falsy check once turned 0 into the scenario's 40)."""
    assert main(["run", "--num-jobs", "3", "--agent", "fifo"]) == 0
    assert "3/3" in capsys.readouterr().out


def test_internal_errors_are_not_reported_as_bad_input(monkeypatch):
    """Only sfenv's own errors become exit code 2; a bug keeps its exception (and traceback)."""
    import sfenv.app.cli as cli

    def broken(args):
        raise ValueError("an internal bug")

    monkeypatch.setattr(cli, "_cmd_scenarios", broken)
    with pytest.raises(ValueError, match="internal bug"):
        main(["scenarios"])

    def bad_input(args):
        raise InvalidInput("a bad value")

    monkeypatch.setattr(cli, "_cmd_scenarios", bad_input)
    assert main(["scenarios"]) == 2


def test_train_without_the_rl_extra_names_the_install_command(tmp_path):
    code = textwrap.dedent("""
        import sys
        for m in ("torch", "stable_baselines3", "sb3_contrib"):
            sys.modules[m] = None  # as if not installed: importing raises ImportError
        from sfenv.app.cli import main
        sys.exit(main(["train", "--steps", "10", "--out", "runs"]))
    """)
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert 'pip install "sfenv[rl]"' in proc.stderr and "Traceback" not in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_train_checks_its_arguments_before_writing(tmp_path):
    from sfenv.agents.learned import train

    out = tmp_path / "runs"
    for kw in ({"n_envs": 0}, {"total_timesteps": 0}, {"total_timesteps": -5}, {"seed": -1},
               {"checkpoint_every": -1}, {"n_envs": 1.5}, {"total_timesteps": True}):
        with pytest.raises(InvalidInput, match=next(iter(kw))):
            train("a2c", "spider-8", out_dir=out, tensorboard=False, **{"total_timesteps": 8, **kw})
    with pytest.raises(InvalidInput, match="unknown algorithm"):
        train("sac", "spider-8", out_dir=out)
    assert not out.exists()


def test_train_with_bad_env_arguments_leaves_no_folder(tmp_path):
    pytest.importorskip("stable_baselines3")
    from sfenv.agents.learned import train

    out = tmp_path / "runs"
    with pytest.raises(ScenarioError, match="num_jobs=0"):
        train("a2c", "spider-8", total_timesteps=8, out_dir=out, env_kwargs={"num_jobs": 0}, tensorboard=False)
    assert not out.exists()


# ------------------------------------------------------------------------------------ help texts

def _subparsers() -> dict:
    parser = build_parser()
    action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return action.choices


@pytest.mark.parametrize("command", sorted(_subparsers()))
def test_help_says_what_each_option_does_its_default_and_choices(command, monkeypatch):
    monkeypatch.setenv("COLUMNS", "10000")  # no line wrapping (argparse wraps at hyphens too)
    sub = _subparsers()[command]
    text = " ".join(sub.format_help().split())
    for action in sub._actions:
        if action.dest == "help":
            continue
        assert action.help and len(action.help) > 8, f"{command} {action.option_strings}: no help text"
        if action.option_strings and action.default is not None and action.default is not False:
            assert f"(default: {action.default})" in text, f"{command} {action.option_strings}: default not shown"
        for choice in action.choices or ():
            assert str(choice) in text, f"{command} {action.option_strings}: choice {choice} not shown"


def test_agents_lists_every_agent_with_one_line(capsys):
    from sfenv.agents.registry import AGENTS

    assert main(["agents"]) == 0
    lines = capsys.readouterr().out.splitlines()
    for name in AGENTS:
        line = next((ln for ln in lines if ln.split(" ", 1)[0] == name), None)
        assert line is not None, name
        assert len(line.split(None, 1)[1]) > 15, f"{name}: no description"


# ------------------------------------------------------------------------------ env constructor

BAD_ENV = [
    ("max_candidates", 0), ("max_candidates", -3), ("max_candidates", 2.5), ("max_candidates", True),
    ("queue_window", 0), ("queue_window", -1), ("forecast_hours", 0), ("forecast_hours", -6),
    ("jct_weight", -1.0), ("cost_weight", -0.5), ("throughput_weight", math.nan), ("jct_weight", math.inf),
    ("invalid_action_penalty", -0.1), ("num_jobs", 0), ("num_jobs", -4),
]


@pytest.mark.parametrize(("arg", "value"), BAD_ENV, ids=lambda x: repr(x))
def test_bad_env_argument_raises_a_value_error_naming_it(arg, value):
    with pytest.raises(ValueError) as e:
        GeoSchedEnv("spider-8", **{arg: value})
    msg = str(e.value)
    assert isinstance(e.value, SfenvError)
    assert f"{arg}={value!r}" in msg  # the argument and the value
    assert re.search(r"greater than|finite|valid integer|expected a number", msg)  # what was expected


def test_bad_env_argument_through_gym_make():
    with pytest.raises(ValueError, match="max_candidates=0"):
        gym.make("sfenv/GeoSched-v6", max_candidates=0)


def test_env_arguments_are_used():
    env = GeoSchedEnv("spider-8", max_candidates=3, queue_window=2, forecast_hours=1, jct_weight=0.0,
                      cost_weight=2.0, num_jobs=5)
    assert env.action_space.n == 4
    assert env.observation_space["queue"].shape == (2 * 8,)
    assert env.observation_space["regions"].shape == (env.C * (7 + 1),)
    assert (env.jct_weight, env.cost_weight) == (0.0, 2.0)
    assert env.scenario.cfg.workload.num_jobs == 5 and env.scenario.cfg.env.max_candidates == 3
    default = GeoSchedEnv("spider-8")
    assert default.action_space.n == default.scenario.cfg.env.max_candidates + 1


def test_with_overrides_deep_merges_nested_sections():
    sc = load_scenario("spider-8").with_overrides(workload={"arrival": {"process": "mmpp", "burst_rate_per_hour": 9}})
    sc2 = sc.with_overrides(workload={"arrival": {"rate_per_hour": 5}})
    arrival = sc2.cfg.workload.arrival
    assert (arrival.process, arrival.rate_per_hour, arrival.burst_rate_per_hour) == ("mmpp", 5, 9)
    assert sc2.cfg.workload.num_jobs == sc.cfg.workload.num_jobs
    with pytest.raises(ScenarioError, match=r"workload\.arrival\.rate_per_hour"):
        sc.with_overrides(workload={"arrival": {"rate_per_hour": -1}})
    with pytest.raises(ScenarioError, match=r"env\.nope"):
        sc.with_overrides(env={"nope": 1})


def test_the_wan_sharing_argument_is_used_and_a_bad_one_named():
    """``wan_sharing`` (new at env v3): None keeps the scenario's own model, ``"v2"`` plays env v2's (the ``-v2`` ids
    pass it), anything else is refused naming the argument and the choices."""
    assert GeoSchedEnv("spider-8", num_jobs=3).scenario.cfg.sim.wan_sharing == "v5"
    assert GeoSchedEnv("spider-8", num_jobs=3, wan_sharing="v3").scenario.cfg.sim.wan_sharing == "v3"
    assert GeoSchedEnv("spider-8", num_jobs=3, wan_sharing="v2").scenario.cfg.sim.wan_sharing == "v2"
    v2_file = load_scenario("spider-8").with_overrides(sim={"wan_sharing": "v2"})
    assert GeoSchedEnv(v2_file, num_jobs=3).scenario.cfg.sim.wan_sharing == "v2"
    assert GeoSchedEnv("spider-8", num_jobs=3, wan_sharing="v4").scenario.cfg.sim.wan_sharing == "v4"
    with pytest.raises(ValueError) as e:
        GeoSchedEnv("spider-8", wan_sharing="v6")
    assert isinstance(e.value, SfenvError)
    assert "wan_sharing='v6'" in str(e.value) and "['v2', 'v3', 'v4', 'v5']" in str(e.value)
