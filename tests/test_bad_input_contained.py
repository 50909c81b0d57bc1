"""Bad input from the audit: scenario files naming files outside their folder, proposers that are not
proposers, reset options the env does not read, and an agent whose ``decide`` returns the wrong type.

Each is one error naming the field (``ValueError`` in Python; exit 2 and one ``sfenv:`` line on the
command line), raised before anything runs.
"""

from __future__ import annotations

import os

import pytest
import yaml
from scenario_text import two_regions

import sfenv  # noqa: F401  (registers the ids)
from sfenv.app.cli import main
from sfenv.env import GeoSchedEnv
from sfenv.scenario import Scenario, ScenarioError, load_scenario
from sfenv.sim import make_simulator
from sfenv.sim.engine import check_decision

TWO_REGIONS = two_regions("contained")
TOU = "prices: {zones: {Z1: {base: 50, peak: 90}, Z2: {base: 60, peak: 80}}}\n"
PRICES = "datetime_utc,Z1,Z2\n2023-01-01T00,50,60\n2023-01-01T01,55,70\n"
TRACE = "submit_offset_s,num_gpus,duration_s\n0,8,3600\n60,16,7200\n120,8,1800\n300,32,3600\n"
EGRESS = "src_cloud,src_region,dst_cloud,dst_region,usd_per_gb\nacme,r1,acme,r2,0.5\n"
CARBON = "datetime_utc,Z1_lca,Z2_lca\n2023-01-01T00,100,200\n2023-01-01T01,110,210\n"

# (field, the YAML that names the file, the file's content)
JOBS = "workload: {num_jobs: 4}\n"
FIELDS = [
    ("prices.path", JOBS + "prices: {kind: csv, path: PATH}\n", PRICES),
    ("workload.arrival.path", TOU + "workload: {num_jobs: 4, arrival: {process: trace, path: PATH}}\n", TRACE),
    ("egress.table", JOBS + TOU + "egress: {table: PATH}\n", EGRESS),
    ("carbon.path", JOBS + TOU + "carbon: {path: PATH, zones: {Z1: {kind: csv}, Z2: {kind: csv}}}\n", CARBON),
]


def _case(tmp_path, field_yaml: str, content: str, where: str) -> tuple[str, str]:
    """``sub/sc.yaml`` naming a file at ``where`` (relative to ``sub``, or absolute) that holds ``content``."""
    sub = tmp_path / "sub"
    (sub / "data").mkdir(parents=True, exist_ok=True)
    (tmp_path / "secret.csv").write_text(content)
    (sub / "data" / "in.csv").write_text(content)
    os.symlink(tmp_path / "secret.csv", sub / "link.csv")
    (sub / "sc.yaml").write_text(TWO_REGIONS + field_yaml.replace("PATH", where))
    return str(sub / "sc.yaml"), str(sub)


@pytest.mark.parametrize(("field", "field_yaml", "content"), FIELDS, ids=[f[0] for f in FIELDS])
@pytest.mark.parametrize("where", ["ABS", "../secret.csv", "data/../../secret.csv", "link.csv"])
def test_a_scenario_file_cannot_name_a_file_outside_its_folder(tmp_path, field, field_yaml, content, where):
    where = str(tmp_path / "secret.csv") if where == "ABS" else where
    path, sub = _case(tmp_path, field_yaml, content, where)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    assert str(info.value).startswith(f"{path}: {field}: {where} leads out of the scenario's folder {sub}/")
    assert "datetime_utc" not in str(info.value) and "src_cloud" not in str(info.value)
    # a file loaded as trusted, the user's own code and a file inside the folder may be read
    assert load_scenario(path, trust_paths=True).name == "contained"
    data = yaml.safe_load(TWO_REGIONS + field_yaml.replace("PATH", str(tmp_path / "secret.csv")))
    assert Scenario.from_dict(data).name == "contained"
    (tmp_path / "sub" / "sc.yaml").write_text(TWO_REGIONS + field_yaml.replace("PATH", "data/in.csv"))
    assert load_scenario(path).name == "contained"


def test_the_cli_refuses_etc_passwd_as_a_price_csv_in_one_line(tmp_path, monkeypatch, capsys):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "p.yaml").write_text(TWO_REGIONS + JOBS + "prices: {kind: csv, path: /etc/passwd}\n")
    monkeypatch.chdir(tmp_path)
    assert main(["run", "--scenario", "sub/p.yaml"]) == 2
    err = capsys.readouterr().err
    assert err == ("sfenv: sub/p.yaml: prices.path: /etc/passwd leads out of the scenario's folder sub/; a scenario "
                   "file reads files only inside its folder (in Python, load_scenario(..., trust_paths=True) reads a "
                   "file you trust as it is)\n")
    assert "root" not in err


# ------------------------------------------------------------------------------ proposers, options

@pytest.mark.parametrize(("proposers", "field"), [
    ([1, 2], "proposers[0]=1"), ([None], "proposers[0]=None"), ([], "proposers=[]"), (5, "proposers=5"),
    ([object()], "proposers[0]=<object"),
])
def test_proposers_that_are_not_proposers_are_refused_at_construction(proposers, field):
    with pytest.raises(ValueError, match=r"proposers.*candidates\(view, k\)") as info:
        GeoSchedEnv(proposers=proposers)
    assert field in str(info.value)


@pytest.mark.parametrize(("options", "words"), [
    ({"num_jobs": 2}, "options: unknown key 'num_jobs'"), ("x", "options='x'"), ([1], "options=[1]"),
])
def test_reset_options_the_env_does_not_read_are_refused(options, words):
    env = GeoSchedEnv()
    env.reset(seed=1, options={})  # what gymnasium's checker passes
    env.reset(seed=1, options=None)
    with pytest.raises(ValueError, match="options") as info:
        env.reset(seed=1, options=options)
    assert words in str(info.value)


# ------------------------------------------------------------------------------ decide's return type

def test_a_decide_returning_the_wrong_type_is_one_line_naming_the_agent(tmp_path, monkeypatch, capsys):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "ag2.py").write_text("class C:\n    def decide(self, view):\n        return 'garbage'\n")
    monkeypatch.chdir(tmp_path)
    assert main(["evaluate", "--agents", "d/ag2.py:C", "--seeds", "1", "--num-jobs", "2"]) == 2
    err = capsys.readouterr().err
    assert err == ("sfenv: agent 'd/ag2.py:C': decide(view) returned 'garbage' (a str); expected a Plan "
                   "(sfenv.model.perf.Plan) to start, or None to wait\n")


def test_a_plan_the_simulator_refuses_from_a_users_agent_is_one_line_naming_it(tmp_path, monkeypatch, capsys):
    """A plug-in agent's plan for a job that does not exist: exit 2 naming the agent (a built-in agent's would be
    sfenv's bug, and keeps its traceback)."""
    (tmp_path / "bad.py").write_text("from sfenv.model.perf import Plan, Stage\n\n\nclass C:\n"
                                     "    def decide(self, view):\n        return Plan(99999, (Stage.at(0, 4),))\n")
    monkeypatch.chdir(tmp_path)
    assert main(["evaluate", "--agents", "bad.py:C", "--seeds", "1", "--num-jobs", "2"]) == 2
    assert capsys.readouterr().err == ("sfenv: agent 'bad.py:C' made a decision the simulator cannot carry out "
                                       "(seed 1000000): unknown job 99999\n")


def test_the_simulator_refuses_a_decision_that_is_not_a_plan():
    sim = make_simulator(load_scenario("spider-8").with_overrides(workload={"num_jobs": 2}), 0)
    with pytest.raises(ValueError, match=r"decide\(view\) returned \[1, 2\] \(a list\); expected a Plan"):
        sim.run(lambda view: [1, 2])
    assert check_decision(None) is None
    with pytest.raises(ValueError, match=r"returned 'xxx.*\.\.\. \(a str\)"):
        check_decision("x" * 200)
