"""Bad input the README promises one line for: the CSV files a scenario names, ``--hp``, empty
``--agents`` and absurd sizes.  Each exits 2 with one ``sfenv:`` line and writes nothing; in Python
the scenario's CSV problems are a ``ValueError`` (:class:`~sfenv.scenario.ScenarioError`) naming
the file and the line, raised when the scenario is loaded (``gym.make``), not mid-episode.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import gymnasium as gym
import pytest
from scenario_text import two_regions

import sfenv  # noqa: F401  (registers the ids)
from sfenv.app.cli import main
from sfenv.scenario import MAX_JOBS, ScenarioError, load_scenario
from sfenv.sim import make_simulator

TWO_REGIONS = two_regions("csv-check")
PRICES_YAML = TWO_REGIONS + "prices: {kind: csv, path: prices.csv}\nworkload: {num_jobs: 4}\n"
TRACE_YAML = (TWO_REGIONS + "prices: {zones: {Z1: {base: 50, peak: 90}, Z2: {base: 60, peak: 80}}}\n"
              "workload: {num_jobs: 4, arrival: {process: trace, path: trace.csv}}\n")
GOOD_PRICES = "datetime_utc,Z1,Z2\n2023-01-01T00,50,60\n2023-01-01T01,55,70\n"
GOOD_TRACE = "submit_offset_s,num_gpus,duration_s\n0,8,3600\n60,16,7200\n120,8,1800\n300,32,3600\n"

# (case id, yaml, csv name, csv content or None for a missing file, words the message must hold)
BAD_FILES = [
    ("prices-missing", PRICES_YAML, "prices.csv", None, ["prices.csv", "cannot read"]),
    ("prices-empty", PRICES_YAML, "prices.csv", "", ["prices.csv", "empty"]),
    ("prices-header-only", PRICES_YAML, "prices.csv", "datetime_utc,Z1,Z2\n", ["prices.csv", "no data rows"]),
    ("prices-no-zone", PRICES_YAML, "prices.csv", "datetime_utc,Z1\nx,50\n", ["prices.csv", "line 1", "'Z2'"]),
    ("prices-not-a-number", PRICES_YAML, "prices.csv", "datetime_utc,Z1,Z2\nx,50,60\ny,55,abc\n",
     ["prices.csv", "line 3", "'Z2'", "'abc'"]),
    ("prices-short-row", PRICES_YAML, "prices.csv", "datetime_utc,Z1,Z2\nx,50\n", ["prices.csv", "line 2", "empty"]),
    ("prices-inf", PRICES_YAML, "prices.csv", "datetime_utc,Z1,Z2\nx,50,inf\n", ["line 2", "finite"]),
    ("trace-missing", TRACE_YAML, "trace.csv", None, ["trace.csv", "cannot read"]),
    ("trace-empty", TRACE_YAML, "trace.csv", "", ["trace.csv", "empty"]),
    ("trace-no-column", TRACE_YAML, "trace.csv", "submit_offset_s,num_gpus\n0,8\n", ["line 1", "'duration_s'"]),
    ("trace-not-a-number", TRACE_YAML, "trace.csv", "submit_offset_s,num_gpus,duration_s\n0,8,60\n5,eight,60\n",
     ["trace.csv", "line 3", "'num_gpus'", "'eight'"]),
    ("trace-zero-gpus", TRACE_YAML, "trace.csv", "submit_offset_s,num_gpus,duration_s\n0,0,60\n",
     ["line 2", "'num_gpus'", "below 1"]),
]


def _write_case(folder: Path, yaml_text: str, csv_name: str, csv_text: str | None) -> Path:
    (folder / "sc.yaml").write_text(yaml_text)
    if csv_text is not None:
        (folder / csv_name).write_text(csv_text)
    return folder / "sc.yaml"


def _one_line_exit_2(argv: list[str], capsys: pytest.CaptureFixture) -> str:
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 2, (argv, captured.err)
    err = captured.err
    lines = err.splitlines()
    assert err.startswith("sfenv:") and "Traceback" not in err, err
    assert len(lines) == 1 or (len(lines) == 2 and lines[1].startswith("see `")), err  # one line (+ argparse's hint)
    return err


COMMANDS = [
    ["run"],
    ["evaluate", "--agents", "fifo", "--seeds", "1", "--out", "r.json", "--quiet"],
    ["benchmark", "--agents", "fifo", "--seeds", "1", "--out-dir", "bench", "--quiet"],
]


@pytest.mark.parametrize("case", BAD_FILES, ids=[c[0] for c in BAD_FILES])
def test_bad_csv_exits_2_with_one_line_naming_file_and_line_and_writes_nothing(case, tmp_path, monkeypatch, capsys):
    _, yaml_text, csv_name, csv_text, words = case
    _write_case(tmp_path, yaml_text, csv_name, csv_text)
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    for command in COMMANDS:
        err = _one_line_exit_2([*command, "--scenario", "sc.yaml"], capsys)
        for word in words:
            assert word in err, (command, err)
        assert sorted(p.name for p in tmp_path.iterdir()) == before, command  # no results, no stub benchmark.json


@pytest.mark.parametrize("case", [BAD_FILES[0], BAD_FILES[4], BAD_FILES[10]], ids=lambda c: c[0])
def test_bad_csv_in_train_exits_2_before_a_run_folder(case, tmp_path, monkeypatch, capsys):
    pytest.importorskip("sb3_contrib")
    _, yaml_text, csv_name, csv_text, words = case
    _write_case(tmp_path, yaml_text, csv_name, csv_text)
    monkeypatch.chdir(tmp_path)
    err = _one_line_exit_2(["train", "--scenario", "sc.yaml", "--steps", "64", "--quiet"], capsys)
    assert all(word in err for word in words), err
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("case", BAD_FILES, ids=[c[0] for c in BAD_FILES])
def test_bad_csv_at_gym_make_is_a_value_error_naming_file_and_field(case, tmp_path):
    _, yaml_text, csv_name, csv_text, words = case
    path = _write_case(tmp_path, yaml_text, csv_name, csv_text)
    with pytest.raises(ScenarioError) as info:
        gym.make("sfenv/GeoSched-v0", scenario=str(path))
    assert isinstance(info.value, ValueError)
    field = "prices.path" if csv_name == "prices.csv" else "workload.arrival.path"
    assert field in str(info.value) and all(word in str(info.value) for word in words)


def test_good_csv_files_are_read_and_used(tmp_path):
    """The checks do not refuse good files: the prices and the trace arrive in the episode."""
    prices = load_scenario(_write_case(tmp_path, PRICES_YAML, "prices.csv", GOOD_PRICES))
    sim = make_simulator(prices, 0)
    assert sim.prices.hourly.tolist() == [[50.0, 55.0], [60.0, 70.0]]
    trace = load_scenario(_write_case(tmp_path, TRACE_YAML, "trace.csv", GOOD_TRACE))
    jobs = trace.make_jobs(None)
    assert [j.arrival for j in jobs] == [0.0, 60.0, 120.0, 300.0]


def test_bad_csv_in_a_real_process_is_one_line(tmp_path):
    _write_case(tmp_path, PRICES_YAML, "prices.csv", "datetime_utc,Z1,Z2\nx,50,abc\n")
    proc = subprocess.run([sys.executable, "-m", "sfenv", "run", "--scenario", "sc.yaml"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "line 2" in proc.stderr and "Traceback" not in proc.stderr


# ------------------------------------------------------------------------------------------- --hp

BAD_HP = [
    (["--hp", "gama=0.9"], ["'gama'", "did you mean 'gamma'"]),
    (["--hp", "gamma=abc"], ["gamma='abc'", "float"]),
    (["--hp", "gamma=1.5"], ["gamma=1.5", "[0, 1]"]),
    (["--hp", "n_steps=1.5"], ["n_steps=1.5", "int"]),
    (["--hp", "batch_size=0"], ["batch_size=0", ">= 1"]),
    (["--hp", "seed=3"], ["'seed'", "--seed"]),
    (["--hp", "policy_kwargs.net_archh=[64]"], ["net_archh"]),
    (["--algo", "dqn", "--hp", "n_epochs=3"], ["'n_epochs'", "DQN"]),
    (["--hp", "gamma=.nan"], ["gamma=nan", "finite"]),
    (["--hp", "learning_rate=.inf"], ["learning_rate=inf", "finite"]),
    (["--hp", "policy_kwargs.net_arch=[-1]"], ["net_arch=[-1]", "from 1 to 4096"]),
    (["--hp", "policy_kwargs.net_arch={pi: [64], vf: [100000]}"], ["net_arch.vf", "from 1 to 4096"]),
    (["--hp", "policy_kwargs.net_arch=[" + ",".join(["8"] * 17) + "]"], ["net_arch=", "at most 16"]),
    (["--n-envs", "100000"], ["--n-envs", "from 1 to 256"]),
    (["--baselines", "nope"], ["unknown agent 'nope'"]),
    (["--baselines", ","], ["--baselines", "no agent named"]),
    (["--baselines", "model:x.zip"], ["model:x.zip", "saved policy"]),
]


@pytest.mark.parametrize("extra,words", BAD_HP, ids=[" ".join(a) for a, _ in BAD_HP])
def test_bad_hp_exits_2_with_one_line_and_no_run_folder(extra, words, tmp_path, monkeypatch, capsys):
    pytest.importorskip("sb3_contrib")
    monkeypatch.chdir(tmp_path)
    err = _one_line_exit_2(["train", "--steps", "64", "--num-jobs", "4", "--quiet", *extra], capsys)
    assert all(word in err for word in words), err
    assert list(tmp_path.iterdir()) == []  # no runs/ folder, no config.yml


BAD_CONFIGS = [
    ("eval_seeds: [10000, 10001, -5]", "config c.yml: eval_seeds[2] = -5; expected an integer >= 0"),
    ("eval_seeds: [10000.9]", "config c.yml: eval_seeds[0] = 10000.9; expected an integer >= 0"),
    ("eval_seeds: [true]", "config c.yml: eval_seeds[0] = True; expected an integer >= 0"),
    ("eval_seeds: [abc]", "config c.yml: eval_seeds[0] = 'abc'; expected an integer >= 0"),
    ("eval_seeds: 5", "config c.yml: eval_seeds = 5; expected a list of seeds"),
    ("eval_seeds: [10000, 10000]", "config c.yml: eval_seeds[1] = 10000 is listed twice"),
    ("env_kwargs: {bogus: 1}", "config c.yml: env_kwargs.bogus: not an argument of GeoSchedEnv"),
    ("env_kwargs: {scenario: spider-8}", "config c.yml: env_kwargs.scenario: set by the run"),
    ("env_kwargs: {render_mode: human}", "config c.yml: env_kwargs.render_mode: set by the run"),
    ("env_kwargs: [1]", "config c.yml: env_kwargs = [1]; expected a mapping"),
    ("hp: [1]", "config c.yml: hp = [1]; expected a mapping"),
    ("scenario: []", "train: scenario is an empty list"),
    ("scenario: {generate: 5}", "train: scenario.generate = 5; expected a mapping"),
    ("scenario: {generate: {seed: 1}}", "train: scenario.generate: missing a required argument: 'count'"),
    ("scenario: {generate: {count: 2, bogus: 1}}", "train: scenario.generate: got an unexpected keyword argument"),
    ("scenario: {generate: {count: 1000000000}}", "train: scenario.generate.count = 1000000000; expected an integer "
                                                  "from 1 to 1,024"),
    ("scenario: {generate: {count: 2, seed: abc}}", "train: scenario.generate.seed = 'abc'; expected an integer >= 0"),
]


@pytest.mark.parametrize("text,words", BAD_CONFIGS, ids=[t for t, _ in BAD_CONFIGS])
def test_a_bad_training_config_exits_2_with_one_line_and_no_run_folder(text, words, tmp_path, monkeypatch, capsys):
    """A config file is data: seeds that are not integers (10000.9 was read as 10000, true as seed 1), env
    arguments GeoSchedEnv does not take, a list where a mapping goes or a scenario generator it cannot call were
    a traceback, some after the run folder was made; each is one line naming the field, before anything is written."""
    pytest.importorskip("sb3_contrib")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.yml").write_text(text + "\n")
    err = _one_line_exit_2(["train", "--config", "c.yml", "--steps", "64", "--quiet", "--no-plot"], capsys)
    assert words in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.yml"]  # no runs/ folder, no config.yml


def test_training_settings_from_python_are_checked_as_a_configs_are(tmp_path):
    pytest.importorskip("sb3_contrib")
    from sfenv.agents.learned import train

    from sfenv.errors import InvalidInput

    for kwargs, words in (({"eval_seeds": [10_000.5]}, "eval_seeds[0] = 10000.5"),
                          ({"env_kwargs": {"num_job": 4}}, "env_kwargs.num_job: not an argument of GeoSchedEnv"),
                          ({"algo_kwargs": [("gamma", 0.9)]}, "hp = [('gamma', 0.9)]; expected a mapping")):
        with pytest.raises(InvalidInput, match=re.escape(words)):
            train(total_timesteps=64, n_envs=1, out_dir=tmp_path / "runs", plot=False, **kwargs)
    assert not (tmp_path / "runs").exists()


def test_n_envs_beyond_the_bound_is_refused_in_python(tmp_path):
    pytest.importorskip("sb3_contrib")
    from sfenv.agents.learned import MAX_N_ENVS, train

    from sfenv.errors import InvalidInput

    with pytest.raises(InvalidInput, match="n_envs = 257; expected an integer from 1 to 256"):
        train(total_timesteps=64, n_envs=MAX_N_ENVS + 1, out_dir=tmp_path / "runs", plot=False)
    assert not (tmp_path / "runs").exists()


BAD_BASELINES = {
    "a constructor that fails": "class C:\n    def __init__(self):\n        raise ValueError('no')\n"
                                "    def decide(self, view):\n        return []\n",
    "decide returns a string": "class C:\n    def decide(self, view):\n        return 'garbage'\n",
}


@pytest.mark.parametrize("case", sorted(BAD_BASELINES))
def test_a_failing_baseline_fails_before_training_and_the_run_folder(case, tmp_path):
    """Baselines are constructed, and (to draw their levels) played, before the run folder is made."""
    pytest.importorskip("sb3_contrib")
    from sfenv.agents.learned import train

    (tmp_path / "ag.py").write_text(BAD_BASELINES[case])
    with pytest.raises(Exception):  # noqa: B017  (the engine's error for a bad decision is its own)
        train(total_timesteps=64, n_envs=1, out_dir=tmp_path / "runs", env_kwargs={"num_jobs": 4},
              algo_kwargs={"n_steps": 32, "batch_size": 32, "n_epochs": 1}, tensorboard=False, eval_every=0,
              eval_seeds=[10_000], baselines=[f"{tmp_path / 'ag.py'}:C"], plot=True)
    assert not (tmp_path / "runs").exists()


def test_good_hp_passes_the_check():
    pytest.importorskip("sb3_contrib")
    from sfenv.agents.learned import DEFAULT_HP, check_hp

    for algo, hp in DEFAULT_HP.items():
        check_hp(algo, hp)
    check_hp("ppo", {"learning_rate": 1, "clip_range": 0.1, "policy_kwargs": {"net_arch": [8]}})


# ------------------------------------------------------------------------------ agents and sizes

BIG_YAML = {
    "jobs": "name: big\ntopology: {generator: spider, num_regions: 8}\nworkload: {num_jobs: 100000000}\n",
    "regions": "name: big\ntopology: {generator: spider, num_regions: 100000}\n",
    "days": "name: big\ntopology: {generator: spider, num_regions: 8}\nprices: {days: 10000000}\n",
}
BAD_ARGS = [
    ["evaluate", "--agents", "", "--out", "r.json"],
    ["evaluate", "--agents", ",", "--out", "r.json"],
    ["evaluate", "--agents", " , ", "--out", "r.json"],
    ["benchmark", "--agents", "", "--out-dir", "b"],
    ["benchmark", "--agents", ",", "--out-dir", "b"],
    ["run", "--num-jobs", "10000000"],
    ["evaluate", "--num-jobs", str(MAX_JOBS + 1), "--out", "r.json"],
    ["benchmark", "--num-jobs", "10000000", "--out-dir", "b"],
    ["train", "--num-jobs", "10000000"],
    ["evaluate", "--seeds", "10000000", "--out", "r.json"],
    ["benchmark", "--seeds", "10000000", "--out-dir", "b"],
    ["train", "--eval-seeds", "10000000"],
    ["run", "--scenario", "jobs.yaml"],
    ["run", "--scenario", "regions.yaml"],
    ["run", "--scenario", "days.yaml"],
    ["benchmark", "--scenario", "jobs.yaml", "--out-dir", "b"],
]


@pytest.mark.parametrize("argv", BAD_ARGS, ids=" ".join)
def test_empty_agents_and_absurd_sizes_exit_2_with_one_line(argv, tmp_path, monkeypatch, capsys):
    for name, text in BIG_YAML.items():
        (tmp_path / f"{name}.yaml").write_text(text)
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    err = _one_line_exit_2(argv, capsys)
    assert "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_size_limits_name_the_field_and_the_limit(tmp_path):
    (tmp_path / "jobs.yaml").write_text(BIG_YAML["jobs"])
    with pytest.raises(ScenarioError, match=r"workload\.num_jobs.*100000"):
        load_scenario(tmp_path / "jobs.yaml")
    with pytest.raises(ScenarioError, match="num_jobs"):
        load_scenario("spider-8").with_overrides(workload={"num_jobs": MAX_JOBS + 1})
    assert load_scenario("spider-8").with_overrides(workload={"num_jobs": MAX_JOBS}).cfg.workload.num_jobs == MAX_JOBS


def test_help_shows_a_single_percent_sign(capsys):
    assert main(["benchmark", "--help"]) == 0
    out = capsys.readouterr().out
    assert "95 % CI" in textwrap.dedent(out).replace("\n", " ") and "%%" not in out


def test_scenarios_lists_gym_ids_in_aligned_columns(capsys):
    from sfenv.registration import ENV_IDS
    from sfenv.scenario import bundled_scenarios

    assert main(["scenarios"]) == 0
    lines = capsys.readouterr().out.splitlines()
    header, rows = lines[0], lines[1:]
    assert [r.split()[0] for r in rows] == bundled_scenarios()
    for env_id, scenario in ENV_IDS.items():
        row = next(r for r in rows if r.split()[0] == scenario)
        assert env_id in row
    for column in ("GYM IDS", "TOPOLOGY", "DESCRIPTION"):  # every row's cell starts under its heading
        start = header.index(column)
        assert all(r[start - 2:start] == "  " and r[start] != " " for r in rows), column
