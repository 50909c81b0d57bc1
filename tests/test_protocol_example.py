"""The protocol page's submission example runs as written: an entry of your own scheduler, then validated.

The ``bash`` blocks of docs/protocol.md are read line by line and each ``sfenv ...`` command runs, in order
and unchanged, through the CLI in a scratch folder that holds a copy of ``examples/`` (the page says to run
them from a clone's root).  The page's example is already small (5-job episodes of spider-8, the 10 test
seeds an entry needs), so no option is appended.
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

from sfenv.app.cli import main

ROOT = Path(__file__).resolve().parents[1]


def page_commands(text: str) -> list[list[str]]:
    """The sfenv commands of a page's bash blocks, as argument lists for :func:`sfenv.app.cli.main`."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words[:1] == ["sfenv"]:
                out.append(words[1:])
    return out


def test_the_submission_example_makes_a_valid_entry_of_a_users_scheduler(tmp_path, monkeypatch, capsys):
    commands = page_commands((ROOT / "docs" / "protocol.md").read_text())
    assert [c[0] for c in commands] == ["evaluate", "validate"]
    assert any(a.endswith(".py:SmallJobsCheapRegion") for a in commands[0][commands[0].index("--agents") + 1]
               .split(","))  # a user's scheduler from a file, not a built-in name
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    for args in commands:
        code = main(args)
        captured = capsys.readouterr()
        assert code == 0, f"sfenv {' '.join(args)}: exit {code}: {captured.err[-2000:]}"
    assert captured.out.startswith("valid entry entry.json: agents fifo, examples/write_a_scheduler.py:"
                                   "SmallJobsCheapRegion, each on the first 10 test seeds")
