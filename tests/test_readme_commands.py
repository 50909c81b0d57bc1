"""Every command the README shows runs, in a smoke version, in the default suite.

The ``bash`` blocks of README.md are read line by line; each ``./run.sh ...`` or ``sfenv ...`` command
is run in order (a later command may use an earlier one's output, as a reader's would) through the CLI
in a scratch folder, with options appended that only cut its size (seeds, jobs, steps): the command's
own options and sub-command stay as written.  ``./run.sh test`` is the suite itself and is not run
again; ``./run.sh`` alone is the main job (``sfenv benchmark``).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from sfenv.app.cli import main

ROOT = Path(__file__).resolve().parents[1]

#: options appended per sub-command: only sizes (argparse keeps the last value of an option)
SMOKE = {
    "benchmark": ["--seeds", "1", "--num-jobs", "3", "--quiet", "--no-plots"],
    "evaluate": ["--seeds", "1", "--num-jobs", "3", "--quiet"],
    "run": ["--num-jobs", "3"],
    "train": ["--steps", "256", "--n-envs", "2", "--num-jobs", "5", "--eval-seeds", "1", "--eval-every", "0",
              "--hp", "n_steps=64", "--hp", "batch_size=64", "--hp", "n_epochs=1", "--quiet", "--no-plot",
              "--no-tensorboard"],
    "leaderboard": ["--seeds", "2", "--num-jobs", "3"],
}
#: sub-commands that only print
LISTING = {"scenarios", "agents"}


def readme_commands(text: str) -> list[list[str]]:
    """The sfenv commands of the README's bash blocks, as argument lists for :func:`sfenv.app.cli.main`."""
    out = []
    for block in re.findall(r"```(?:bash|sh|console)\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if not words:
                continue
            if words[0] == "./run.sh":
                if words[1:2] == ["test"]:
                    continue  # the suite itself
                args = words[1:] if words[1:] and not words[1].startswith("-") else ["benchmark", *words[1:]]
            elif words[0] == "sfenv":
                args = words[1:]
            else:
                continue
            out.append(args)
    return out


def _smoke(args: list[str]) -> list[str]:
    command = args[0]
    extra = list(SMOKE.get(command, []))
    if command == "train":
        from sfenv.agents.learned import load_config

        config = args[args.index("--config") + 1] if "--config" in args else "quick"
        if config != "none" and "--algo" not in args and (load_config(config).get("pretrain") or {}):
            extra += ["--pretrain-steps", "40"]
    return [*args, *extra]


def test_the_readme_shows_commands_and_each_is_recognised():
    commands = readme_commands((ROOT / "README.md").read_text())
    assert commands, "the README shows no sfenv command"
    for args in commands:
        assert args[0] in SMOKE or args[0] in LISTING, f"no smoke version for {args}"


def test_every_readme_command_runs_in_a_smoke_version(tmp_path, monkeypatch, capsys):
    pytest.importorskip("stable_baselines3")
    monkeypatch.chdir(tmp_path)
    for args in readme_commands((ROOT / "README.md").read_text()):
        code = main(_smoke(args))
        err = capsys.readouterr().err
        assert code == 0, f"{' '.join(args)}: exit {code}: {err[-2000:]}"
