"""Progress bars: drawn on a terminal (rate, ETA), absent with ``--quiet`` or when stderr is not a terminal.

The CLI case runs ``sfenv evaluate`` with its stderr on a pseudo-terminal (:mod:`pty`); the others hand
the bars a text stream that says it is a terminal (tqdm draws only on one: ``disable=None``).
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import re
import struct
import subprocess
import sys
import termios
import threading

import pytest

from sfenv.app.cli import main
from sfenv.runs.progress import EpisodesBar, progress_bar

#: a tqdm bar with a total: "n/total [elapsed<remaining, rate]"
BAR = re.compile(r"\d+/\d+ \[\d\d:\d\d<\d\d:\d\d, +[\d.?]+ ?(s/)?(episode|step)(/s)?")
EVALUATE = ["evaluate", "--agents", "fifo,cheapest", "--seeds", "2", "--num-jobs", "3"]


class Terminal(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        """Yes: tqdm then draws its bar."""
        return True


def _stderr_on_a_pty(argv: list[str]) -> tuple[str, str]:
    """Run ``python -m sfenv ARGV`` with stderr on a pseudo-terminal; returns (stdout, what the terminal got)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))  # a terminal 160 columns wide
    got: list[bytes] = []

    def read() -> None:
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the child's side closed
                return
            if not chunk:
                return
            got.append(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    proc = subprocess.run([sys.executable, "-m", "sfenv", *argv], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=slave, text=True, timeout=300, check=True)
    os.close(slave)
    reader.join(timeout=10)
    os.close(master)
    return proc.stdout, b"".join(got).decode(errors="replace")


def test_evaluate_draws_a_bar_with_rate_and_eta_on_a_terminal_and_none_with_quiet(tmp_path) -> None:
    """On a pseudo-terminal ``sfenv evaluate`` shows episodes done of 4, rate and time left; ``--quiet`` nothing."""
    out, terminal = _stderr_on_a_pty([*EVALUATE, "--out", str(tmp_path / "r.json")])
    assert "evaluate spider-8" in terminal and "4/4" in terminal
    assert BAR.search(terminal), terminal[-500:]
    assert "fifo" in out and not BAR.search(out)  # the table on stdout, the bar on stderr only
    saved = (tmp_path / "r.json").read_text()
    assert "episode/s" not in saved and "it/s" not in saved and "00:" not in saved  # nothing of it in results
    out, terminal = _stderr_on_a_pty([*EVALUATE, "--quiet"])
    assert not BAR.search(terminal) and "evaluate spider-8" not in terminal
    assert "fifo" in out


def test_evaluate_draws_no_bar_when_stderr_is_not_a_terminal(capsys) -> None:
    """Under pytest's capture stderr is no terminal: no bar (as in a log file or a pipe)."""
    assert main(EVALUATE) == 0
    captured = capsys.readouterr()
    assert not BAR.search(captured.err) and "evaluate spider-8" not in captured.err


def test_one_bar_counts_every_episode_of_several_scenarios_and_drops_those_already_saved() -> None:
    """:class:`EpisodesBar`: the total shrinks by the episodes a part did not play now, so the ETA counts the rest."""
    terminal = Terminal()
    bar = EpisodesBar(10, "leaderboard", file=terminal)
    on_row = bar.part("spider-8", 6)
    for seed in range(2):  # 4 of its 6 episodes were already in its results file
        on_row({"agent": "fifo", "seed": seed})
    bar.end_part()
    assert (bar.bar.n, bar.bar.total) == (2, 6)
    on_row = bar.part("bace-6", 4)
    on_row({"agent": "fifo", "seed": 0})
    bar.close()
    text = terminal.getvalue()
    assert "leaderboard bace-6" in text and "3/6" in text and "fifo seed 0" in text
    assert BAR.search(text)
    quiet = io.StringIO()  # not a terminal
    EpisodesBar(3, "claims", file=quiet).close()
    off = Terminal()
    EpisodesBar(3, "claims", enabled=False, file=off).close()
    assert quiet.getvalue() == off.getvalue() == ""


def test_training_bar_shows_steps_eta_and_the_last_evaluation() -> None:
    """:class:`StepsProgress` (``sfenv train``'s bar): steps of the run, ETA, and each new evaluation as it is made."""
    from sfenv.agents.callbacks import StepsProgress, eval_postfix

    history: list[dict] = []
    terminal = Terminal()
    progress = StepsProgress(1000, start=0, history=history, file=terminal)
    progress.update(256)
    history.append({"timesteps": 256, "mean_jct_h": 2.4912, "unfinished": 0.0, "mean_return": -31.25, "best": True})
    progress.update(512)
    progress.close()
    text = terminal.getvalue()
    assert "train" in text and "512/1000" in text and BAR.search(text)
    assert eval_postfix(history[-1]) == "eval @256: JCT 2.49 h, unfinished 0.0, return -31.2, best"
    assert "eval @256: JCT 2.49 h" in text
    resumed = Terminal()  # a resumed run counts from its saved steps; the bar shows the steps still to go
    progress = StepsProgress(500, start=1000, history=list(history), file=resumed)
    progress.update(1200)
    progress.close()
    assert "200/500" in resumed.getvalue() and "eval @256" in resumed.getvalue()
    for stream, enabled in ((io.StringIO(), True), (Terminal(), False)):
        StepsProgress(10, file=stream, enabled=enabled).close()
        assert stream.getvalue() == ""


def test_progress_bar_is_off_with_enabled_false_or_off_a_terminal() -> None:
    """:func:`progress_bar` draws on a terminal only, and never when not enabled."""
    for stream, enabled, drawn in ((Terminal(), True, True), (Terminal(), False, False), (io.StringIO(), True, False)):
        bar = progress_bar(2, "work", "episode", enabled, stream)
        bar.update(2)
        bar.close()
        assert bool(BAR.search(stream.getvalue())) == drawn


@pytest.mark.parametrize("quiet", [False, True])
def test_leaderboard_bar_on_a_terminal_and_none_with_quiet(tmp_path, monkeypatch, capsys, quiet: bool) -> None:
    """``sfenv leaderboard`` on a terminal: one bar over its episodes; ``--quiet``: none (stdout keeps the table)."""
    terminal = Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    argv = ["leaderboard", "--agents", "fifo", "--scenarios", "spider-8", "--seeds", "2", "--num-jobs", "3",
            "--out-dir", str(tmp_path / "lb")]
    assert main([*argv, "--quiet"] if quiet else argv) == 0
    assert bool(BAR.search(terminal.getvalue())) != quiet
    assert not BAR.search(capsys.readouterr().out)
    data = json.loads((tmp_path / "lb" / "leaderboard.json").read_text())
    assert "episode/s" not in json.dumps(data)
