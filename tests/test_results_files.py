"""Results are never mixed with other settings, never replaced unasked, and survive bad input and Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from sfenv.app.benchmark import FILES, run_benchmark
from sfenv.app.cli import main
from sfenv.runs.results import FORMAT, SettingsMismatch, differences, read_results

QUIET = ["--quiet", "--seed", "0"]  # explicit seeds 0.. (the default is the protocol's test split)


def _evaluate(out, *extra):
    return main(["evaluate", "--agents", "fifo", "--seeds", "2", "--num-jobs", "3", "--out", str(out), *QUIET,
                 *extra])


def test_a_results_file_records_the_settings_that_define_it(tmp_path):
    out = tmp_path / "r.json"
    assert _evaluate(out) == 0
    data = json.loads(out.read_text())
    assert data["format"] == FORMAT
    settings = data["settings"]
    assert settings["scenario"] == "spider-8" and settings["num_jobs"] == 3 and len(settings["scenario_sha"]) == 16
    assert settings["agents"] == {"fifo": {"kwargs": {}}} and settings["sfenv_version"]
    assert [(r["agent"], r["seed"], r["jobs"]) for r in data["episodes"]] == [("fifo", 0, 3), ("fifo", 1, 3)]
    assert settings["split"] == "explicit seeds" and settings["seeds"] == [0, 1] and settings["protocol"] == 1


@pytest.mark.parametrize(("other", "named"), [(["--scenario", "spider-8-contended"], "scenario"),
                                              (["--num-jobs", "4"], "num_jobs: 3 in the file, 4 now")],
                         ids=["scenario", "num_jobs"])
def test_resume_with_other_settings_is_refused_naming_the_difference(tmp_path, capsys, other, named):
    out = tmp_path / "r.json"
    assert _evaluate(out) == 0
    before = out.read_bytes()
    capsys.readouterr()
    assert _evaluate(out, *other, "--resume") == 2  # argparse: the last --num-jobs wins
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"sfenv: {out} holds results of other settings") and named in err[0]
    assert out.read_bytes() == before  # unchanged
    assert not list(tmp_path.glob("r-*.json"))


def test_without_resume_other_settings_go_beside_the_file_and_are_found_again(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert _evaluate(out) == 0
    before = out.read_bytes()
    capsys.readouterr()
    assert _evaluate(out, "--num-jobs", "4") == 0  # argparse: the last --num-jobs wins
    err, printed = capsys.readouterr()[::-1]
    beside = tmp_path / "r-2.json"
    assert str(beside) in printed and "num_jobs: 3 in the file, 4 now" in err
    assert out.read_bytes() == before
    assert {r["jobs"] for r in read_results(beside)[1]} == {4}
    # the same command again continues its own file, runs nothing and says so
    assert _evaluate(out, "--num-jobs", "4") == 0
    assert "complete" in capsys.readouterr().out and not (tmp_path / "r-3.json").exists()


def test_an_existing_file_is_continued_not_overwritten_and_overwrite_replaces_it(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["evaluate", "--agents", "fifo", "--seeds", "3", "--num-jobs", "3", "--out", str(out), *QUIET]) == 0
    three = read_results(out)[1]
    assert _evaluate(out, "--seeds", "1") == 0  # 1 seed, same settings: the 3 saved episodes stay
    assert read_results(out)[1] == three
    assert _evaluate(out, "--seeds", "1", "--overwrite") == 0
    assert [r["seed"] for r in read_results(out)[1]] == [0]


def test_a_new_agent_joins_a_file_but_one_with_other_settings_does_not():
    settings = {"sfenv_version": "1", "scenario": "s", "scenario_sha": "a", "num_jobs": 3,
                "agents": {"fifo": {"kwargs": {}}}}
    assert differences(settings, {**settings, "agents": {"random": {"kwargs": {}}}}) == []
    diffs = differences(settings, {**settings, "agents": {"fifo": {"kwargs": {"x": 1}}}})
    assert len(diffs) == 1 and diffs[0].startswith("agent fifo")
    assert differences(None, settings) == ["the file records no settings (an earlier sfenv wrote it)"]


@pytest.mark.parametrize("content", ['[{"agent": "fifo"', "", "not json", '{"foo": 1}', '[{"seed": 0}]',
                                     '[{"agent": "fifo", "scenario": "spider-8", "seed": 0}]'],
                         ids=["truncated", "empty", "text", "other-object", "rows-without-keys", "no-settings"])
@pytest.mark.parametrize("resume", [True, False], ids=["resume", "plain"])
def test_a_corrupt_or_foreign_file_gets_one_line_and_is_left_alone(tmp_path, capsys, content, resume):
    out = tmp_path / "r.json"
    out.write_text(content)
    code = _evaluate(out, *(["--resume"] if resume else []))
    err = capsys.readouterr().err.strip().splitlines()
    if resume:
        assert code == 2 and len(err) == 1 and err[0].startswith(f"sfenv: {out}"), err
    elif content.startswith('[{"agent": "fifo", "scenario"'):  # a readable file of an earlier version: beside it
        assert code == 0 and (tmp_path / "r-2.json").exists()
    else:
        assert code == 2 and len(err) == 1 and err[0].startswith(f"sfenv: {out}"), err
    assert out.read_text() == content


def test_benchmark_into_a_folder_of_other_settings_writes_beside_it_and_removes_stale_plots(tmp_path):
    folder = tmp_path / "res"
    run_benchmark("fifo", seeds=2, num_jobs=3, out_dir=folder, progress=False, log=lambda m: None)
    before = {name: (folder / name).read_bytes() for name in FILES.values()}
    logged = []
    other = run_benchmark("fifo", seeds=2, num_jobs=4, out_dir=folder, progress=False, plots=False, log=logged.append)
    beside = tmp_path / "res-2"
    assert all(str(beside) in f for f in other["files"]) and any("num_jobs" in m and str(beside) in m for m in logged)
    assert {name: (folder / name).read_bytes() for name in FILES.values()} == before  # left alone
    with pytest.raises(SettingsMismatch, match="num_jobs"):
        run_benchmark("fifo", seeds=2, num_jobs=4, out_dir=folder, resume=True, progress=False, log=lambda m: None)
    # the same settings again: continued in place, nothing run; without plots the old PNGs go with their data
    again = run_benchmark("fifo", seeds=3, num_jobs=3, out_dir=folder, progress=False, plots=False,
                          log=lambda m: None)
    assert again["ran"] == 1 and len(read_results(folder / "episodes.json")[1]) == 3
    assert not list(folder.glob("*.png"))
    replaced = run_benchmark("fifo", seeds=1, num_jobs=4, out_dir=folder, overwrite=True, progress=False,
                             plots=False, log=lambda m: None)
    assert replaced["ran"] == 1 and [r["jobs"] for r in read_results(folder / "episodes.json")[1]] == [4]


def test_the_main_job_twice_in_one_folder_just_works(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv = ["benchmark", "--agents", "fifo", "--seeds", "2", "--num-jobs", "3", "--quiet", "--no-plots"]
    assert main(argv) == 0 and main(argv) == 0
    out = capsys.readouterr().out
    assert "(2 episodes run now)" in out and "(0 episodes run now)" in out
    assert not (tmp_path / "results" / "spider-8-2").exists()


def _signal_at_default(sig: signal.Signals) -> Callable[[], None]:
    """For the child before exec: ``sig`` unblocked and at its default, as a shell gives a command.

    A child inherits its parent's signal mask and ignored signals; in the full parallel suite the
    test worker sometimes has SIGINT ignored or blocked (the child then ran to the end and exited 0).
    """
    def reset() -> None:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
        signal.signal(sig, signal.SIG_DFL)

    return reset


def _signalled_run(tmp_path: Path, sig: signal.Signals) -> tuple[int, list[str], list[dict]]:
    """``sfenv evaluate`` of 800 episodes sent ``sig`` once its first episode is saved: exit code, stderr lines, rows.

    800 episodes: long enough (tens of seconds) that the run cannot end before the signal on a loaded machine.
    """
    out = tmp_path / "r.json"
    cmd = [sys.executable, "-m", "sfenv", "evaluate", "--agents", "fifo,random", "--seeds", "400", "--num-jobs", "30",
           "--out", str(out), "--quiet"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_signal_at_default(sig))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # wait for the first saved episode
        if out.exists() and read_results(out)[1]:
            break
        time.sleep(0.05)
    proc.send_signal(sig)
    _, stderr = proc.communicate(timeout=60)
    assert os.path.getsize(out) > 0
    return proc.returncode, stderr.strip().splitlines(), read_results(out)[1]


def test_ctrl_c_saves_what_ran_and_says_how_to_continue(tmp_path):
    code, lines, saved = _signalled_run(tmp_path, signal.SIGINT)
    assert code == 130, lines
    assert len(lines) == 1 and lines[0].startswith("sfenv: interrupted") and f"{len(saved)} saved" in lines[0]
    assert "again" in lines[0] and 0 < len(saved) < 800
    assert not list(tmp_path.glob(".*.tmp"))


def test_sigterm_saves_what_ran_like_ctrl_c_and_exits_143(tmp_path):
    code, lines, saved = _signalled_run(tmp_path, signal.SIGTERM)  # `kill PID`, as a batch system or a container stop
    assert code == 143, lines
    assert len(lines) == 1 and lines[0].startswith("sfenv: terminated (SIGTERM): "), lines
    assert f"{len(saved)} saved" in lines[0] and "again" in lines[0] and 0 < len(saved) < 800
    played = int(lines[0].split(": ")[2].split(" episodes run now")[0])
    assert played == len(saved)  # every episode played is in the file
    assert len({(r["agent"], r["seed"]) for r in saved}) == len(saved)  # each a distinct episode
    assert not list(tmp_path.glob(".*.tmp")) and not list(tmp_path.glob(".*.lock"))


def test_ctrl_c_during_a_write_loses_no_episode_and_leaves_no_temporary(tmp_path, monkeypatch):
    """Ctrl-C inside the last save (after its temporary is written): the file then holds every episode."""
    import sfenv.app.evaluate as ev
    from sfenv.errors import Interrupted

    real_replace, interrupted = os.replace, []

    def replace_then_interrupt(src, dst):
        if not interrupted and len(json.loads(open(src).read())["episodes"]) == 3:  # the save of all three
            interrupted.append(dst)
            raise KeyboardInterrupt
        real_replace(src, dst)

    monkeypatch.setattr(ev.os, "replace", replace_then_interrupt)
    out = tmp_path / "r.json"
    with pytest.raises(Interrupted, match="3 episodes run now, 3 saved"):
        ev.evaluate_agents(["fifo"], "spider-8", seeds=[0, 1, 2], num_jobs=3, out=out, progress=False)
    assert interrupted and [r["seed"] for r in read_results(out)[1]] == [0, 1, 2]
    assert not list(tmp_path.glob(".*.tmp"))
