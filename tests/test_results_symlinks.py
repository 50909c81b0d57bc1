"""A lock file or temporary name planted beside an output (a symbolic or hard link) never writes its target."""

from __future__ import annotations

import json
import os

import pytest

from sfenv.app.cli import main
from sfenv.errors import InvalidInput
from sfenv.runs import results
from sfenv.runs.results import ResultsWriter, atomic_write_json, atomic_write_text, output_lock, read_results

QUIET = ["--quiet", "--seed", "0"]


@pytest.fixture
def victim(tmp_path):
    """A file outside the output's folder that a planted link points to."""
    path = tmp_path / "victim.txt"
    path.write_text("IMPORTANT\n")
    return path


def _evaluate(out):
    return main(["evaluate", "--agents", "fifo", "--seeds", "2", "--num-jobs", "3", "--out", str(out), *QUIET])


@pytest.mark.parametrize("link", ["symbolic", "hard"])
def test_a_planted_lock_file_is_refused_and_left_alone(tmp_path, victim, link):
    out = tmp_path / "sub" / "entry.json"
    out.parent.mkdir()
    lock = out.with_name(".entry.json.lock")
    (os.symlink if link == "symbolic" else os.link)(victim, lock)
    with pytest.raises(InvalidInput, match=f"{lock}: the lock file is a {link} link"):
        with output_lock(out):
            pytest.fail("the block must not run")
    assert victim.read_text() == "IMPORTANT\n"
    assert os.path.lexists(lock) and lock.is_symlink() == (link == "symbolic")  # not removed either
    assert not out.exists()


def test_the_command_refuses_a_symlinked_lock_in_one_line(tmp_path, victim, capsys):
    out = tmp_path / "sub" / "entry.json"
    assert _evaluate(tmp_path / "base.json") == 0
    out.parent.mkdir()
    out.write_text((tmp_path / "base.json").read_text())
    lock = out.with_name(".entry.json.lock")
    lock.symlink_to(victim)
    capsys.readouterr()
    assert _evaluate(out) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"sfenv: {lock}: the lock file is a symbolic link"), err
    assert victim.read_text() == "IMPORTANT\n" and lock.is_symlink()
    assert out.read_text() == (tmp_path / "base.json").read_text()


def test_a_lock_file_that_is_not_a_regular_file_is_refused(tmp_path):
    out = tmp_path / "entry.json"
    lock = out.with_name(".entry.json.lock")
    os.mkfifo(lock)
    with pytest.raises(InvalidInput, match="not a regular file"):
        with output_lock(out):
            pytest.fail("the block must not run")
    assert lock.exists()


@pytest.mark.parametrize("write", ["atomic_write_json", "atomic_write_text", "ResultsWriter"])
def test_a_symlink_planted_at_the_temporary_name_is_not_followed(tmp_path, victim, write):
    out = tmp_path / "sub" / "entry.json"
    out.parent.mkdir()
    planted = out.with_name(f".entry.json.{os.getpid()}.tmp")  # the name this process would use first
    planted.symlink_to(victim)
    if write == "atomic_write_json":
        atomic_write_json(out, {"a": 1})
        assert json.loads(out.read_text()) == {"a": 1}
    elif write == "atomic_write_text":
        atomic_write_text(out, "text\n")
        assert out.read_text() == "text\n"
    else:
        ResultsWriter(out, {"scenario": "x"}, [{"agent": "fifo", "scenario": "x", "seed": 0}]).save()
        assert read_results(out) == ({"scenario": "x"}, [{"agent": "fifo", "scenario": "x", "seed": 0}])
    assert victim.read_text() == "IMPORTANT\n"
    assert planted.is_symlink() and not out.is_symlink()  # left as it was; the output a file of its own
    assert sorted(p.name for p in out.parent.iterdir()) == [planted.name, "entry.json"]  # no temporary left


def test_the_command_does_not_follow_a_symlink_at_its_temporary_name(tmp_path, victim):
    out = tmp_path / "sub" / "entry.json"
    out.parent.mkdir()
    planted = [out.with_name(f".entry.json.{os.getpid()}{suffix}.tmp") for suffix in ("", "-1", "-2")]
    for p in planted:
        p.symlink_to(victim)
    assert _evaluate(out) == 0
    assert victim.read_text() == "IMPORTANT\n" and all(p.is_symlink() for p in planted)
    assert [r["seed"] for r in read_results(out)[1]] == [0, 1]


def test_every_temporary_name_taken_fails_naming_the_output(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "_TEMPORARY_NAMES", 2)
    out = tmp_path / "entry.json"
    for suffix in ("", "-1"):
        out.with_name(f".entry.json.{os.getpid()}{suffix}.tmp").write_text("someone else's")
    with pytest.raises(results.OutputError, match=f"cannot write {out}"):
        atomic_write_text(out, "text")
    assert not out.exists()
    assert all(p.read_text() == "someone else's" for p in tmp_path.glob(".*.tmp"))


def test_a_stale_looking_symlink_is_not_removed_as_a_temporary(tmp_path, victim):
    out = tmp_path / "entry.json"
    planted = out.with_name(".entry.json.999999999.tmp")  # no such process: a regular file would be removed
    planted.symlink_to(victim)
    stale = out.with_name(".entry.json.999999998-1.tmp")
    stale.write_text("left by a killed run")
    with output_lock(out):
        pass
    assert planted.is_symlink() and victim.read_text() == "IMPORTANT\n"
    assert not stale.exists()


def test_the_leaderboards_files_do_not_follow_a_planted_temporary(tmp_path, victim):
    from sfenv.app.leaderboard import write_outputs

    settings = {"sfenv": "x", "protocol": 1, "env_version": "v1", "seeds_per_scenario": 2, "scenarios": {},
                "caps": {}}
    planted = tmp_path / f".leaderboard.html.{os.getpid()}.tmp"
    planted.symlink_to(victim)
    files = write_outputs([], settings, tmp_path)
    assert victim.read_text() == "IMPORTANT\n" and planted.is_symlink()
    assert all(f.is_file() and not f.is_symlink() for f in files)
