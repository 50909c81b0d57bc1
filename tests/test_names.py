"""Names: what a scenario argument means, one line for each bad input, and "did you mean".

The rule (docs/scenarios.md, "Names and files"): an argument with a path separator or a
``.yaml``/``.yml`` suffix is a file; any other is a bundled name, whatever the current folder
holds; a folder is never a scenario.  The command line is called in-process (``main``), from a
folder holding a folder and files named like bundled scenarios; Ctrl-C needs a real process.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import pytest
from sfenv.agents.registry import resolve_names

import sfenv  # noqa: F401  (registers the env ids)
from sfenv.app.cli import main
from sfenv.errors import InvalidInput, MissingFile, UnknownName, did_you_mean
from sfenv.scenario import Scenario, ScenarioError, known_fields, load_scenario
from sfenv.world.files import names_a_file

REPO = Path(__file__).resolve().parents[1]
ENV_ID = "sfenv/GeoSched-v6"
RUN = ["run", "--agent", "fifo", "--num-jobs", "1"]


def _user_scenario(name: str = "my-world") -> str:
    """The text of a valid scenario of the user's own (spider-8's, renamed)."""
    text = (REPO / "scenarios" / "spider-8.yaml").read_text()
    return "\n".join(f"name: {name}" if ln.startswith("name:") else ln for ln in text.splitlines()) + "\n"


@pytest.fixture
def shadowed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder holding names of bundled scenarios: as after ``./run.sh`` (``spider-8/``) and a user's files.

    ``spider-8/`` a folder; ``spider-16`` a valid scenario named my-world; ``cee`` an empty file;
    ``geo-8.yaml`` a valid scenario named my-yaml-world.
    """
    (tmp_path / "spider-8").mkdir()
    (tmp_path / "spider-8" / "benchmark.json").write_text("{}")
    (tmp_path / "spider-16").write_text(_user_scenario())
    (tmp_path / "cee").write_text("")
    (tmp_path / "geo-8.yaml").write_text(_user_scenario("my-yaml-world"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _scenario_played(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """The scenario name ``sfenv run`` reports (it must succeed)."""
    assert main(argv) == 0, capsys.readouterr().err
    first = capsys.readouterr().out.splitlines()[0]
    return first.split()[1]  # "scenario NAME  agent fifo  seed 0"


def _one_error_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """The one ``sfenv: ...`` line a command with bad input prints (exit 2, nothing on stdout)."""
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sfenv: "), captured.err
    return lines[0]


# ---------------------------------------------------------------- the rule


@pytest.mark.parametrize(("argument", "is_file"), [
    ("spider-8", False), ("spider-8-contended", False), ("my.scenario", False), ("", False),
    ("./spider-8", True), ("results/spider-8", True), ("spider-8/", True), ("/abs/x", True),
    ("my.yaml", True), ("my.yml", True), ("MY.YAML", True), ("spider-8.yaml", True),
])
def test_an_argument_names_a_file_only_with_a_separator_or_a_yaml_suffix(argument, is_file):
    assert names_a_file(argument) is is_file


def test_a_folder_named_like_a_bundled_scenario_is_not_read(shadowed, capsys):
    assert _scenario_played(capsys, [*RUN, "--scenario", "spider-8"]) == "spider-8"
    assert _scenario_played(capsys, RUN) == "spider-8"  # the default scenario, by name
    assert gym.make(ENV_ID).unwrapped.scenario.source == "scenarios/spider-8.yaml"
    assert gym.make(ENV_ID, scenario="spider-8").unwrapped.scenario.source == "scenarios/spider-8.yaml"


def test_a_file_named_like_a_bundled_scenario_does_not_shadow_it(shadowed, capsys):
    assert _scenario_played(capsys, [*RUN, "--scenario", "spider-16"]) == "spider-16"
    assert _scenario_played(capsys, [*RUN, "--scenario", "./spider-16"]) == "my-world"
    assert gym.make(ENV_ID, scenario="spider-16").unwrapped.scenario.name == "spider-16"
    assert gym.make(ENV_ID, scenario="./spider-16").unwrapped.scenario.name == "my-world"
    assert load_scenario(Path("spider-16")).name == "my-world"  # a Path is always a file
    # an empty file named cee: the bundled cee by name, the empty file (an error) by path
    assert load_scenario("cee").name == "cee"
    line = _one_error_line(capsys, [*RUN, "--scenario", "./cee"])
    assert line == "sfenv: cee: expected a mapping at the top level, got NoneType"


def test_a_yaml_suffix_means_a_file(shadowed, capsys):
    assert _scenario_played(capsys, [*RUN, "--scenario", "geo-8.yaml"]) == "my-yaml-world"
    assert _scenario_played(capsys, [*RUN, "--scenario", "geo-8"]) == "geo-8"
    assert gym.make(ENV_ID, scenario="geo-8.yaml").unwrapped.scenario.name == "my-yaml-world"
    line = _one_error_line(capsys, [*RUN, "--scenario", "spider-64.yaml"])
    assert line == "sfenv: spider-64.yaml: file not found; the bundled scenario spider-64 is named without a suffix"


@pytest.mark.parametrize("argument", ["./spider-8", "spider-8/", Path("spider-8")], ids=str)
def test_a_folder_is_never_a_scenario(shadowed, capsys, argument):
    with pytest.raises(ScenarioError, match=r"^spider-8: a folder, not a scenario file; a folder is never a scenario"):
        load_scenario(argument)
    with pytest.raises(ScenarioError, match="a folder, not a scenario file"):
        gym.make(ENV_ID, scenario=argument)
    if isinstance(argument, str):
        assert "a folder, not a scenario file" in _one_error_line(capsys, [*RUN, "--scenario", argument])


def test_an_unknown_name_lists_the_bundled_ones_and_says_how_to_read_a_file(shadowed, capsys):
    (shadowed / "mine").write_text(_user_scenario())
    line = _one_error_line(capsys, [*RUN, "--scenario", "mine"])
    assert line.startswith("sfenv: no bundled scenario named 'mine'; bundled: bace-6, cee, ")
    assert "a path separator or a .yaml/.yml suffix is a file" in line
    assert line.endswith("; to read the file mine in this folder, write ./mine")
    assert _scenario_played(capsys, [*RUN, "--scenario", "./mine"]) == "my-world"


def test_scenario_help_states_the_rule(capsys):
    assert main(["run", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert "an argument with a path separator or a .yaml/.yml suffix is a file" in help_text
    assert "a folder is never a scenario" in help_text


def test_a_bare_train_config_name_is_the_bundled_one(tmp_path, monkeypatch):
    from sfenv.agents.learned import load_config

    monkeypatch.chdir(tmp_path)
    (tmp_path / "quick").mkdir()  # a folder named like a bundled config
    (tmp_path / "contended").write_text("steps: 7\n")
    assert load_config("quick")["algo"] == "maskable-ppo"
    assert load_config("contended")["algo"] == "maskable-ppo"  # the bundled one, not the file
    assert load_config("./contended") == {"steps": 7}
    with pytest.raises(MissingFile, match=r"^no bundled config named 'quik' \(did you mean 'quick'\?\)"):
        load_config("quik")


# ---------------------------------------------------------------- one line for every bad input


def test_train_out_under_a_file_gives_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("not a folder")
    line = _one_error_line(capsys, ["train", "--out", "a-file/runs", "--steps", "64", "--quiet"])
    assert line == "sfenv: cannot write a-file/runs: a-file is a file, not a folder"
    assert (tmp_path / "a-file").read_text() == "not a folder"


def test_an_output_whose_folders_are_missing_is_written(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["evaluate", "--agents", "fifo", "--seeds", "1", "--num-jobs", "2", "--quiet",
                 "--out", "new/deeper/r.json"]) == 0, capsys.readouterr().err
    assert (tmp_path / "new" / "deeper" / "r.json").stat().st_size > 0


@pytest.mark.parametrize("argument", ["./blob", "blob.yaml"])
def test_a_binary_file_as_a_scenario_gives_one_line(tmp_path, capsys, monkeypatch, argument):
    monkeypatch.chdir(tmp_path)
    Path(argument).write_bytes(b"name: x\n\x7fELF\x02\x01\x01\x00\xff\xfe\x00\x00")
    line = _one_error_line(capsys, [*RUN, "--scenario", argument])
    assert line.startswith(f"sfenv: {Path(argument)}, line 2: not UTF-8 text (byte 0xff at offset 16)"), line
    with pytest.raises(ScenarioError, match="not UTF-8 text") as e:
        gym.make(ENV_ID, scenario=argument)
    assert "\n" not in str(e.value)


def _ctrl_c_as_in_a_terminal() -> None:
    """In the child before exec: SIGINT unblocked and at its default, as a shell gives a command."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _maps(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return ""


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/PID/maps (Linux)")
def test_ctrl_c_while_the_command_imports_torch_gives_one_line_and_130(tmp_path):
    """Ctrl-C inside the heaviest import of a command (torch, for ``train``), not at a time guessed in advance.

    The signal goes as soon as torch's library is mapped in the child, so it lands inside that import
    whatever the machine's load (tests/test_results_concurrency.py covers ``import sfenv`` itself).
    """
    script = Path(sys.executable).with_name("sfenv")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "sfenv"]
    proc = subprocess.Popen([*command, "train", "--config", "none", "--steps", "200000", "--out", "runs", "--quiet"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_ctrl_c_as_in_a_terminal)
    deadline = time.monotonic() + 120
    while "libtorch" not in _maps(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    assert proc.poll() is None, "the run ended before torch was loaded"
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=120)
    lines = stderr.strip().splitlines()
    assert proc.returncode == 130 and len(lines) == 1 and lines[0].startswith("sfenv: interrupted"), stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").rglob("*.zip"))


# ---------------------------------------------------------------- did you mean


@pytest.mark.parametrize(("given", "known", "hint"), [
    ("spidr-8", ["spider-8", "spider-16"], " (did you mean 'spider-8'?)"),
    ("FIFO", ["fifo", "random"], " (did you mean 'fifo'?)"),  # without case
    ("zzzzzz", ["fifo", "random"], ""),  # nothing close: no guess
    ("x", [], ""),
])
def test_did_you_mean(given, known, hint):
    assert did_you_mean(given, known) == hint


def test_an_unknown_bundled_scenario_gets_the_closest_name(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ScenarioError, match=r"^no bundled scenario named 'spidr-8' \(did you mean 'spider-8'\?\); "):
        load_scenario("spidr-8")
    line = _one_error_line(capsys, [*RUN, "--scenario", "Spider-8-Contended"])
    assert "(did you mean 'spider-8-contended'?)" in line
    line = _one_error_line(capsys, ["leaderboard", "--scenarios", "geo8", "--out-dir", "lb-never-written"])
    assert line.startswith("sfenv: leaderboard: unknown scenario(s) geo8 (did you mean 'geo-8'?); bundled: ")
    assert not Path("lb-never-written").exists()


def _spider8() -> dict:
    return load_scenario("spider-8").cfg.model_dump()


@pytest.mark.parametrize(("where", "typo", "expected"), [
    ((), "workloda", "workload"),
    (("workload",), "num_job", "num_jobs"),
    (("workload", "arrival"), "proces", "process"),
    (("topology", "regions", 0), "gpus_per_servr", "gpus_per_server"),  # in a list
    (("prices", "zones", "us-east"), "peek", "peak"),  # under a mapping key (a zone name)
], ids=lambda v: ".".join(map(str, v)) if isinstance(v, tuple) else str(v))
def test_an_unknown_scenario_field_gets_the_closest_known_one(where, typo, expected):
    data = _spider8()
    node = data
    for part in where:
        node = node[part]
    node[typo] = node.get(expected, 1)  # the typo beside the field (a value the field would take)
    path = ".".join(str(p) for p in where)
    shown = (path.replace(".0", "[0]") + "." if path else "") + typo
    with pytest.raises(ScenarioError) as e:
        Scenario.from_dict(data, source="my.yaml")
    message = str(e.value)
    assert message.startswith(f"invalid scenario: my.yaml: {shown}: unknown field (did you mean {expected!r}?); "
                              "known here: "), message
    assert "\n" not in message and expected in message.split("known here: ")[1].split(", ")


def test_known_fields_come_from_the_schema(monkeypatch):
    """A new section (say ``carbon:``) added to the schema is known without further change."""
    from typing import Any

    import sfenv.scenario as sc

    assert known_fields() == sorted(sc.ScenarioCfg.model_fields)
    assert "rate_per_hour" in known_fields(("workload", "arrival"))
    assert known_fields(("workload", "num_jobs")) == []  # a number: nothing below it

    class WithCarbon(sc.ScenarioCfg):
        carbon: dict[str, Any] | None = None

    monkeypatch.setattr(sc, "ScenarioCfg", WithCarbon)
    assert "carbon" in known_fields()
    data = _spider8()
    data["carbn"] = {}
    with pytest.raises(ScenarioError, match=r"carbn: unknown field \(did you mean 'carbon'\?\)"):
        Scenario.from_dict(data)


@pytest.mark.parametrize(("names", "hint"), [
    ("fifoo", "unknown agent 'fifoo' (did you mean 'fifo'?)"),
    ("fifo,SpiderFlow", "unknown agent 'SpiderFlow' (did you mean 'spiderflow'?)"),
    ("defualt", "unknown agent 'defualt' (did you mean 'default'?)"),  # a group
    ("spinserch+swf", "unknown agent 'spinserch' (did you mean 'spinsearch'?)"),
    ("fifo+swff", "unknown queue order 'swff' (did you mean 'swf'?)"),
])
def test_an_unknown_agent_gets_the_closest_name(names, hint):
    with pytest.raises(UnknownName) as e:
        resolve_names(names)
    assert str(e.value).startswith(hint) and "\n" not in str(e.value)


def test_an_invalid_choice_on_the_command_line_gets_the_closest_one(capsys):
    assert main(["run", "--agent", "fifoo"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sfenv: run: argument --agent: invalid choice: 'fifoo' (did you mean 'fifo'?) (choose from ")
    assert main(["evaluate", "--split", "tset"]) == 2
    assert "invalid choice: 'tset' (did you mean 'test'?)" in capsys.readouterr().err


def test_a_train_config_key_typo_gets_the_closest_key(tmp_path):
    from sfenv.agents.learned import load_config

    (tmp_path / "c.yml").write_text("stesp: 64\n")
    with pytest.raises(InvalidInput, match=r"unknown keys \['stesp'\] \(did you mean 'steps'\?\)"):
        load_config(tmp_path / "c.yml")
