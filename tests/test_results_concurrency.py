"""Results files under concurrency and at scale (issue 30, section 4).

One process writes an output at a time (a second is refused with one line), temporaries are per process,
the batched writer saves every finished episode on Ctrl-C and keeps the file whole on a full disk, every
output that cannot be written gives one ``sfenv:`` line and exit 2, and Ctrl-C from the command's first
import on gives one line and exit 130.
"""

from __future__ import annotations

import errno
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sfenv.app.cli import main
from sfenv.errors import Interrupted
from sfenv.interrupts import ctrl_c_held
from sfenv.runs import results
from sfenv.runs.results import OutputError, OutputInUse, ResultsWriter, atomic_path, output_lock, read_results

QUICK = ["--scenario", "spider-8", "--num-jobs", "3", "--seed", "0", "--quiet"]
#: the fields of a row that are the episode's (not wall-clock decision times)
EPISODE_FIELDS = ("agent", "seed", "jobs", "finished", "mean_jct_s", "p95_jct_s", "cost_usd", "energy_kwh", "jcts_s")
FORK = multiprocessing.get_context("fork")


def _evaluate(out: Path, seeds: int = 2, *extra: str, agents: str = "fifo") -> int:
    return main(["evaluate", "--agents", agents, "--seeds", str(seeds), *QUICK, "--out", str(out), *extra])


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def _episodes(rows: list[dict]) -> list[tuple]:
    return [tuple(json.dumps(r[k]) for k in EPISODE_FIELDS) for r in rows]


def _hold_lock(path: Path, locked, release) -> None:  # a forked child: holds the lock until told to let go
    with output_lock(path):
        locked.set()
        release.wait(30)


# ---------------------------------------------------------------- one writer at a time


def test_a_second_writer_is_refused_with_one_line_and_the_file_is_left_alone(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert _evaluate(out) == 0
    before = out.read_bytes()
    capsys.readouterr()
    locked, release = FORK.Event(), FORK.Event()
    holder = FORK.Process(target=_hold_lock, args=(out, locked, release))
    holder.start()
    try:
        assert locked.wait(30)
        assert _evaluate(out, 3) == 2
        line = _one_line(capsys)
        assert line == (f"sfenv: {out} is being written by another sfenv process (pid {holder.pid}); "
                        "wait for it to finish, or choose another output")
        assert out.read_bytes() == before
    finally:
        release.set()
        holder.join(30)
    assert _evaluate(out, 3) == 0  # released: the same command continues the file
    assert [r["seed"] for r in read_results(out)[1]] == [0, 1, 2]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]  # no lock file or temporary left


def test_two_evaluations_started_together_on_one_out_lose_nothing(tmp_path):
    """The review's reproduction (finding 5): either the second is refused, or both finish; nothing is lost."""
    out = tmp_path / "c.json"
    common = ["evaluate", "--seeds", "6", *QUICK, "--out", str(out)]
    procs = {agent: subprocess.Popen([sys.executable, "-m", "sfenv", *common, "--agents", agent], cwd=tmp_path,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for agent in ("fifo", "random")}
    done = {agent: proc.communicate(timeout=120) for agent, proc in procs.items()}
    settings, rows = read_results(out)
    keys = [(r["agent"], r["seed"]) for r in rows]
    assert len(keys) == len(set(keys))  # no episode twice
    finished = [agent for agent, proc in procs.items() if proc.returncode == 0]
    assert finished, done
    for agent, proc in procs.items():
        stderr = done[agent][1].strip().splitlines()
        if proc.returncode == 0:  # every episode it ran is in the file, with its settings
            assert {s for a, s in keys if a == agent} == set(range(6)) and agent in settings["agents"]
        else:
            assert proc.returncode == 2 and len(stderr) == 1, stderr
            assert stderr[0].startswith(f"sfenv: {out} is being written by another sfenv process")


def test_the_lock_waits_if_asked_and_a_killed_holder_leaves_it_free(tmp_path):
    path = tmp_path / "o.json"
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with output_lock(path):
            held.set()
            release.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    assert held.wait(10)
    assert (tmp_path / ".o.json.lock").read_text().strip() == str(os.getpid())
    with pytest.raises(OutputInUse, match="another sfenv process"), output_lock(path):
        pass
    threading.Timer(0.2, release.set).start()
    start = time.monotonic()
    with output_lock(path, wait_s=10):  # waits for the holder to let go
        assert time.monotonic() - start >= 0.15
    thread.join()
    assert not (tmp_path / ".o.json.lock").exists()

    def killed_holder() -> None:
        with output_lock(path):
            os.kill(os.getpid(), signal.SIGKILL)

    child = FORK.Process(target=killed_holder)
    child.start()
    child.join(30)
    assert child.exitcode == -signal.SIGKILL and (tmp_path / ".o.json.lock").exists()  # its lock file stays ...
    with output_lock(path):  # ... but the kernel dropped its lock
        pass


def _temporary_name(path: Path, queue) -> None:  # a forked child: the temporary it would write
    with atomic_path(path) as tmp:
        queue.put(tmp.name)
        tmp.write_text("{}")


def test_temporaries_are_per_process(tmp_path):
    path = tmp_path / "r.json"
    stale = tmp_path / ".r.json.1.tmp"  # the temporary of a running process (pid 1), mid-write
    stale.write_text("half")
    with atomic_path(path) as tmp:
        assert tmp.name == f".r.json.{os.getpid()}.tmp"
        tmp.write_text("[]")
    queue = FORK.Queue()
    child = FORK.Process(target=_temporary_name, args=(path, queue))
    child.start()
    child.join(30)
    assert queue.get(timeout=10) == f".r.json.{child.pid}.tmp" != tmp.name
    assert stale.read_text() == "half" and path.read_text() == "{}"
    killed = tmp_path / f".r.json.{child.pid}.tmp"  # as if that child had been killed mid-write (it has exited)
    killed.write_text("half")
    with output_lock(path):  # the next writer removes it; the running process's temporary stays
        assert not killed.exists() and stale.exists()


# ---------------------------------------------------------------- batched writes


class _Clock:
    """A clock the test moves; each write of the file takes ``write_s`` of it."""

    def __init__(self) -> None:
        self.now, self.write_s, self.writes = 0.0, 0.0, 0

    def __call__(self) -> float:
        return self.now


def test_the_writer_rewrites_at_most_every_interval_or_four_times_its_last_write(tmp_path, monkeypatch):
    clock = _Clock()
    text = results.results_text

    def timed_text(*args):  # a write that takes clock.write_s
        clock.writes += 1
        clock.now += clock.write_s
        return text(*args)

    monkeypatch.setattr(results, "results_text", timed_text)
    path = tmp_path / "r.json"
    writer = ResultsWriter(path, {"scenario": "s"}, [], clock=clock)
    writer.save()  # the settings first
    assert read_results(path) == ({"scenario": "s"}, []) and clock.writes == 1

    def add_at(t: float, seed: int) -> None:
        clock.now = t
        writer.add({"agent": "a", "scenario": "s", "seed": seed})

    for seed, t in enumerate((0.5, 1.0, 1.9)):
        add_at(t, seed)
    assert clock.writes == 1 and read_results(path)[1] == []  # within 2 s of the last write: not yet
    clock.write_s = 1.0  # from now on a write takes 1 s: the next comes 4 s after it ends
    add_at(2.0, 3)
    assert clock.writes == 2 and writer.saved == 4 and len(read_results(path)[1]) == 4
    assert writer.next_write_due == pytest.approx(3.0 + 4.0)
    add_at(6.9, 4)
    assert clock.writes == 2
    add_at(7.0, 5)
    assert clock.writes == 3 and writer.saved == 6
    add_at(7.5, 6)
    writer.flush()  # the end of a run: everything
    assert clock.writes == 4 and [r["seed"] for r in read_results(path)[1]] == list(range(7))
    writer.flush()  # nothing new: no write
    assert clock.writes == 4


def test_the_writer_keeps_the_serial_order_of_rows_finished_out_of_order(tmp_path):
    path = tmp_path / "r.json"
    rows = [{"agent": "a", "scenario": "s", "seed": s, "x": float("nan")} for s in (2, 0, 1)]
    writer = ResultsWriter(path, {"scenario": "s"}, rows[:1])
    for row in rows[1:]:
        writer.add(row)
    writer.reorder([1, 2, 0])
    writer.flush()
    assert [r["seed"] for r in read_results(path)[1]] == [0, 1, 2] == [r["seed"] for r in writer.rows]
    assert path.read_text().count('\n{"agent": "a"') == 3  # one line per episode


def test_ctrl_c_saves_every_finished_episode_however_long_the_interval(tmp_path, monkeypatch):
    from sfenv.app.evaluate import evaluate_agents

    monkeypatch.setattr(results, "SAVE_INTERVAL_S", 1e9)  # no write between the first and the last
    out = tmp_path / "r.json"
    ran = []

    def interrupt_at_the_fourth(row: dict) -> None:
        ran.append(row)
        if len(ran) == 4:
            raise KeyboardInterrupt

    with pytest.raises(Interrupted, match=f"4 episodes run now, 4 saved in {out}; run the same command again"):
        evaluate_agents(["fifo"], "spider-8", seeds=list(range(6)), num_jobs=3, out=out, progress=False,
                        on_row=interrupt_at_the_fourth)
    assert [r["seed"] for r in read_results(out)[1]] == [0, 1, 2, 3]  # valid JSON, every episode finished
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]
    again = evaluate_agents(["fifo"], "spider-8", seeds=list(range(6)), num_jobs=3, out=out, progress=False)
    clean = evaluate_agents(["fifo"], "spider-8", seeds=list(range(6)), num_jobs=3, progress=False)
    assert _episodes(again) == _episodes(clean) == _episodes(read_results(out)[1])


def test_a_second_ctrl_c_during_the_last_save_waits_for_it(monkeypatch):
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal
    try:
        with ctrl_c_held():
            signal.raise_signal(signal.SIGINT)  # ignored: no KeyboardInterrupt here
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, previous)


# ---------------------------------------------------------------- outputs that cannot be written


def _full_disk_after(limit: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Writes of the results file holding more than ``limit`` episodes fail as on a full disk (half written)."""
    real_open = open

    class FullDisk:
        def __init__(self, f) -> None:
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc) -> None:
            self.f.close()

        def write(self, text: str) -> int:
            if text.count('\n{"agent"') > limit:
                self.f.write(text[:len(text) // 2])
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            return self.f.write(text)

    monkeypatch.setattr(results, "open", lambda *a, **kw: FullDisk(real_open(*a, **kw)), raising=False)


def test_a_full_disk_mid_run_gives_one_line_keeps_the_file_and_resume_completes_it(tmp_path, capsys, monkeypatch):
    out = tmp_path / "r.json"
    assert _evaluate(out) == 0
    before = read_results(out)[1]
    capsys.readouterr()
    with monkeypatch.context() as m:
        _full_disk_after(2, m)
        assert _evaluate(out, 4) == 2
        line = _one_line(capsys)
    assert line.startswith(f"sfenv: cannot write {out}: No space left on device; it holds the 2 episodes of its "
                           "last write (")
    assert line.endswith("run since are not saved); once it can be written, run the same command again to continue")
    # valid JSON with the episodes of before (its settings, written first, name the 2 seeds added)
    assert read_results(out)[1] == before and sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]
    assert _evaluate(out, 4) == 0  # space again: the same command completes it
    assert _episodes(read_results(out)[1]) == _episodes(read_results(_clean(tmp_path, capsys))[1])


def _clean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    clean = tmp_path / "clean" / "r.json"
    assert _evaluate(clean, 4) == 0
    capsys.readouterr()
    return clean


def test_a_full_disk_at_the_first_write_gives_one_line(tmp_path, capsys, monkeypatch):
    out = tmp_path / "r.json"
    _full_disk_after(-1, monkeypatch)  # not even the settings fit
    assert _evaluate(out) == 2
    assert _one_line(capsys) == f"sfenv: cannot write {out}: No space left on device"
    assert list(tmp_path.iterdir()) == []


def test_leaderboard_outputs_are_replaced_together_or_not_at_all(tmp_path, monkeypatch):
    from sfenv.app.leaderboard import write_outputs

    settings = {"sfenv": "x", "protocol": 1, "env_version": "v1", "seeds_per_scenario": 2, "scenarios": {},
                "caps": {}}
    files = write_outputs([], settings, tmp_path)
    before = {f.name: f.read_bytes() for f in files}
    real_write_text = Path.write_text

    def full_at_html(self: Path, text: str, *a, **kw) -> int:
        if ".leaderboard.html." in self.name:
            real_write_text(self, text[:10])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write_text(self, text, *a, **kw)

    monkeypatch.setattr(Path, "write_text", full_at_html)
    with pytest.raises(OutputError, match="^cannot write .*: No space left on device$") as e:
        write_outputs([], {**settings, "seeds_per_scenario": 3}, tmp_path)  # other notes in every file
    assert e.value.errno == errno.ENOSPC and isinstance(e.value, OSError)
    assert {f.name: f.read_bytes() for f in files} == before  # none replaced (not md and csv alone)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(before)  # no temporary, no lock file


@pytest.mark.parametrize("command", [
    ["evaluate", "--agents", "fifo", "--seeds", "1", *QUICK, "--out", "{file}/r.json"],
    ["evaluate", "--agents", "fifo", "--seeds", "1", *QUICK, "--csv", "{file}/r.csv"],
    ["benchmark", "--agents", "fifo", "--seeds", "1", "--num-jobs", "3", "--quiet", "--out-dir", "{file}/res"],
    ["leaderboard", "--agents", "fifo", "--scenarios", "spider-8", "--seeds", "1", "--num-jobs", "3", "--quiet",
     "--out-dir", "{file}"],
    ["plot", "{results}", "--out-dir", "{file}/figs"],
], ids=["evaluate-out", "evaluate-csv", "benchmark", "leaderboard", "plot"])
def test_an_output_under_a_file_gives_one_line(tmp_path, capsys, command):
    file = tmp_path / "a-file"
    file.write_text("not a folder")
    saved = tmp_path / "saved.json"
    if "{results}" in command:
        assert _evaluate(saved, 1) == 0
        capsys.readouterr()
    argv = [a.format(file=file, results=saved) for a in command]
    assert main(argv) == 2
    line = _one_line(capsys)
    assert line.startswith(f"sfenv: cannot write {file}") and line.endswith(f"{file} is a file, not a folder"), line
    assert file.read_text() == "not a folder"


# ---------------------------------------------------------------- Ctrl-C from the first import on


def _ctrl_c_as_in_a_terminal() -> None:
    """In the child before exec: SIGINT unblocked and at its default, as a shell gives a command."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _has_imported_numpy(pid: int) -> bool:
    """Whether process ``pid`` has loaded numpy's core (so it is inside ``import sfenv``, past its first line)."""
    try:
        return "_multiarray_umath" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/PID/maps (Linux)")
@pytest.mark.parametrize("after_s", [0.0, 0.8], ids=["in-the-imports", "a-moment-later"])
@pytest.mark.parametrize("how", ["python -m sfenv", "console script"])
def test_ctrl_c_right_after_start_gives_one_line_and_130(tmp_path, how, after_s):
    script = Path(sys.executable).with_name("sfenv")
    if how == "console script" and not script.exists():
        pytest.skip("no sfenv console script beside this interpreter")
    command = [sys.executable, "-m", "sfenv"] if how == "python -m sfenv" else [str(script)]
    # a long run (hundreds of episodes): it cannot end before the signal, whatever the machine's load
    proc = subprocess.Popen([*command, "evaluate", "--agents", "fifo", "--seeds", "300", "--num-jobs", "20", "--quiet"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_ctrl_c_as_in_a_terminal)
    deadline = time.monotonic() + 60
    while not _has_imported_numpy(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(after_s)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    lines = stderr.strip().splitlines()
    assert proc.returncode == 130 and len(lines) == 1 and lines[0].startswith("sfenv: interrupted"), stderr


def test_ctrl_c_while_parsing_the_command_gives_one_line(capsys, monkeypatch):
    import sfenv.app.cli as cli

    def interrupted() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert main(["scenarios"]) == 130
    assert _one_line(capsys) == "sfenv: interrupted"


# ---------------------------------------------------------------- the benchmark script


def test_bench_results_smoke(capsys):
    from sfenv.experiments import bench_results

    bench_results.main(["--seeds", "3", "--every-episode"])
    out = capsys.readouterr().out
    assert "3 seeds: without --out" in out and "x (target <= 1.5x at 4,000 seeds)" in out and "after every" in out
    row = bench_results.measure(2)
    assert row["seeds"] == 2 and row["ratio"] == pytest.approx(row["with_s"] / row["without_s"]) and row["file_mb"] > 0
    assert row["writes"] >= 2 and 0 < row["write_s"] < row["with_s"]  # the settings first, then the episodes
    assert results.SAVE_INTERVAL_S == 2.0  # --every-episode put the interval back
