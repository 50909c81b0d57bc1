"""Results files read to continue, plot or validate: bad JSON and rows get one line; --csv replaces nothing unasked."""

from __future__ import annotations

import json
import os

import pytest

from sfenv.app.cli import main
from sfenv.errors import InvalidInput
from sfenv.world.files import parse_json

BASE = ["--seeds", "2", "--num-jobs", "3", "--quiet", "--seed", "0"]
DEEP = "[" * 100_000 + "]" * 100_000
HUGE = "1" * 5000


def _evaluate(out, agents="fifo", *extra):
    return main(["evaluate", "--agents", agents, *BASE, *(["--out", str(out)] if out else []), *extra])


def _one_line(capsys, start="sfenv: "):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(start) and "Traceback" not in err[0], err
    return err[0]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """The text of a fifo results file of seeds 0 and 1."""
    out = tmp_path_factory.mktemp("saved") / "r.json"
    assert _evaluate(out) == 0
    return out.read_text()


def test_csv_naming_the_out_file_is_refused_and_the_results_stay_json(tmp_path, capsys, saved):
    out = tmp_path / "r.json"
    out.write_text(saved)
    for csv in (out, tmp_path / "." / "r.json"):
        assert _evaluate(out, "fifo", "--csv", str(csv), "--overwrite") == 2
        assert "is the --out results file" in _one_line(capsys)
        assert out.read_text() == saved


def test_an_existing_csv_is_kept_unless_overwrite(tmp_path, capsys):
    csv = tmp_path / "e.csv"
    csv.write_text("mine\n")
    assert _evaluate(None, "fifo", "--csv", str(csv)) == 2
    assert "exists" in _one_line(capsys) and csv.read_text() == "mine\n"
    assert _evaluate(None, "fifo", "--csv", str(csv), "--overwrite") == 0
    assert csv.read_text().startswith("agent,") or "mean_jct_s" in csv.read_text()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_a_csv_path_that_is_a_fifo_is_refused_not_replaced(tmp_path, capsys):
    fifo = tmp_path / "f.csv"
    os.mkfifo(fifo)
    assert _evaluate(None, "fifo", "--csv", str(fifo), "--overwrite") == 2
    assert "not a regular file" in _one_line(capsys)
    assert fifo.is_fifo()


def _tampered(saved: str, how: str) -> str:
    data = json.loads(saved)
    rows, settings = data["episodes"], data["settings"]
    if how == "foreign-agent":
        rows.append({**rows[0], "agent": "spinsearch", "mean_jct_s": 1})
    elif how == "duplicate":
        rows.append(dict(rows[0]))
    elif how == "foreign-seed":
        rows.append({**rows[0], "seed": 7})
    elif how == "foreign-scenario":
        rows[1]["scenario"] = "spider-8-contended"
    elif how.startswith("jct-"):
        value = {"jct-text": "abc", "jct-null": None}.get(how)
        rows[1]["mean_jct_s"] = value
        if how == "jct-missing":
            del rows[1]["mean_jct_s"]
    elif how == "agent-list":
        rows[1]["agent"] = ["fifo"]
    elif how == "agents-list":
        settings["agents"] = ["fifo"]
    elif how in ("seeds-text", "seeds-nested"):
        settings["seeds"] = "abc" if how == "seeds-text" else [[1]]
    return json.dumps(data)


@pytest.mark.parametrize("how", ["foreign-agent", "duplicate", "foreign-seed", "foreign-scenario", "jct-text",
                                 "jct-null", "jct-missing", "agent-list", "agents-list", "seeds-text",
                                 "seeds-nested"])
def test_a_file_with_rows_its_settings_do_not_cover_is_refused_and_left_alone(tmp_path, capsys, saved, how):
    out = tmp_path / "r.json"
    out.write_text(_tampered(saved, how))
    before = out.read_text()
    assert _evaluate(out, "fifo,spinsearch") == 2
    line = _one_line(capsys, f"sfenv: {out}")
    if how not in ("agents-list", "seeds-text", "seeds-nested"):
        assert "episode row" in line
    assert out.read_text() == before


@pytest.mark.parametrize("text", [DEEP, HUGE], ids=["deep", "huge-integer"])
def test_malformed_json_gives_one_line_in_every_command(tmp_path, capsys, text):
    bad = tmp_path / "bad.json"
    bad.write_text(text)
    assert _evaluate(bad) == 2
    _one_line(capsys, f"sfenv: {bad}: not a JSON results file")
    assert bad.read_text() == text
    assert main(["plot", str(bad), "--out-dir", str(tmp_path / "p")]) == 2
    _one_line(capsys, f"sfenv: {bad}: not a JSON")
    assert main(["validate", str(bad)]) == 2
    _one_line(capsys, f"sfenv: {bad}: not a JSON")
    for name in ("episodes.json", "benchmark.json"):
        folder = tmp_path / name.split(".")[0]
        folder.mkdir()
        (folder / name).write_text(text)
        assert main(["benchmark", "--agents", "fifo", "--num-jobs", "3", "--seeds", "1", "--quiet",
                     "--out-dir", str(folder), "--no-plots"]) == 2
        _one_line(capsys, f"sfenv: {folder / name}: not a JSON")
    lb = tmp_path / "lb" / "episodes"
    lb.mkdir(parents=True)
    (lb / "spider-8.json").write_text(text)
    assert main(["leaderboard", "--scenarios", "spider-8", "--agents", "fifo", "--seeds", "1", "--num-jobs", "3",
                 "--quiet", "--out-dir", str(lb.parent)]) == 2
    err = capsys.readouterr().err.strip().splitlines()  # a progress line per scenario first
    assert err[-1].startswith(f"sfenv: {lb / 'spider-8.json'}: not a JSON") and "Traceback" not in "".join(err)


def test_plot_refuses_a_malformed_metric_in_one_line(tmp_path, capsys, saved):
    bad = tmp_path / "r.json"
    bad.write_text(_tampered(saved, "jct-text"))
    assert main(["plot", str(bad), "--out-dir", str(tmp_path)]) == 2
    assert "mean_jct_s is 'abc'" in _one_line(capsys)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_plot_refuses_a_fifo_where_a_png_goes(tmp_path, capsys, saved):
    res = tmp_path / "r.json"
    res.write_text(saved)
    os.mkfifo(tmp_path / "jct.png")
    assert main(["plot", str(res)]) == 2
    assert "not a regular file" in _one_line(capsys)
    assert (tmp_path / "jct.png").is_fifo()


def test_validate_refuses_a_seed_that_is_not_an_integer(tmp_path, capsys):
    entry = tmp_path / "e.json"
    entry.write_text(json.dumps([{"agent": "fifo", "scenario": "spider-8", "seed": "abc", "actions": [],
                                  "scenario_sha": "x"}]))
    for extra in ([], ["--replay-only"]):
        assert main(["validate", str(entry), *extra]) == 2
        assert "not an integer" in _one_line(capsys)


def test_parse_json_names_the_source_and_refuses_nan_when_asked():
    assert parse_json("[NaN]", "f", "thing") != [0]
    with pytest.raises(InvalidInput, match=r"^f: not a JSON thing \(NaN is not a JSON number\)"):
        parse_json("[NaN]", "f", "thing", allow_nan=False)
    with pytest.raises(InvalidInput, match=r"^f: not a JSON thing \(nested too deeply\)"):
        parse_json(DEEP, "f", "thing")
    with pytest.raises(InvalidInput, match="an integer longer than"):
        parse_json(HUGE, "f", "thing")


@pytest.mark.parametrize("argv", [
    ["evaluate", "--agents", "fifo", "--seeds", "1", "--num-jobs", "2", "--out", "r.json"],
    ["benchmark", "--seeds", "1", "--num-jobs", "2", "--out-dir", "bd"],
    ["leaderboard", "--seeds", "1", "--out-dir", "lb"],
])
def test_resume_with_overwrite_is_refused_before_any_work(tmp_path, capsys, monkeypatch, argv):
    monkeypatch.chdir(tmp_path)
    assert main([*argv, "--resume", "--overwrite"]) == 2
    assert capsys.readouterr().err == ("sfenv: --resume continues the results there, --overwrite replaces them: "
                                       "give one of them\n")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("option", ["--out", "--csv"])
def test_an_output_that_is_the_scenario_file_is_refused_even_with_overwrite(tmp_path, capsys, monkeypatch, option):
    from importlib import resources

    monkeypatch.chdir(tmp_path)
    scenario = tmp_path / "s8.yaml"
    scenario.write_text(resources.files("sfenv.scenarios").joinpath("spider-8.yaml").read_text())
    before = scenario.read_text()
    argv = ["evaluate", "--agents", "fifo", "--seeds", "1", "--num-jobs", "2", "--scenario", "s8.yaml",
            option, "./s8.yaml", "--overwrite"]
    assert main(argv) == 2
    assert capsys.readouterr().err == (f"sfenv: {option} s8.yaml is the --scenario file; the run never writes over "
                                       "its input\n")
    assert scenario.read_text() == before


@pytest.mark.parametrize("given", [",", ""])
def test_leaderboard_naming_no_scenario_is_refused_not_run_on_all(tmp_path, capsys, monkeypatch, given):
    monkeypatch.chdir(tmp_path)
    assert main(["leaderboard", "--scenarios", given, "--seeds", "1", "--out-dir", "lb"]) == 2
    assert capsys.readouterr().err.startswith(f"sfenv: --scenarios {given!r}: no scenario named;")
    assert not (tmp_path / "lb").exists()
