"""A bad command line of an experiment script is one ``sfenv: <script>: ...`` line on stderr and exit code 2.

As ``sfenv``'s own: argparse's two lines (a usage block, then ``claims.py: error: ...``) are one line
from :class:`sfenv.app.script.ScriptParser`, for argparse's errors and the scripts' own ``parser.error``.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from sfenv.app.script import ScriptParser, with_choice_hint

ROOT = Path(__file__).resolve().parents[1]


def _scripts_with_a_parser() -> list[str]:
    """The ``experiments/*.py`` modules whose source builds an argument parser (ArgumentParser or ScriptParser)."""
    names = []
    for path in sorted((ROOT / "experiments").glob("*.py")):
        calls = {ast.unparse(node.func).rpartition(".")[2] for node in ast.walk(ast.parse(path.read_text()))
                 if isinstance(node, ast.Call)}
        if calls & {"ArgumentParser", "ScriptParser"}:
            names.append(path.stem)
    return names


SCRIPTS = _scripts_with_a_parser()


def _main(name: str, argv: list[str], monkeypatch: pytest.MonkeyPatch) -> Callable[[], object]:
    """``sfenv.experiments.<name>.main`` called with ``argv``: as its argument, or in ``sys.argv`` if it takes none."""
    module = importlib.import_module(f"sfenv.experiments.{name}")
    main = module.main
    if inspect.signature(main).parameters:
        return lambda: main(argv)
    monkeypatch.setattr(sys, "argv", [f"{name}.py", *argv])
    return main


def _one_line(run: Callable[[], object], capsys: pytest.CaptureFixture[str]) -> str:
    """The one stderr line ``run`` exits 2 with (no newline), nothing on stdout."""
    with pytest.raises(SystemExit) as exc:
        run()
    out, err = capsys.readouterr()
    assert exc.value.code == 2, err
    assert out == "" and err.endswith("\n") and err.count("\n") == 1, err
    assert err.startswith("sfenv: "), err
    return err.removesuffix("\n")


def test_every_script_with_a_parser_is_found():
    assert len(SCRIPTS) >= 25 and "claims" in SCRIPTS and "rows" not in SCRIPTS


@pytest.mark.parametrize("name", SCRIPTS)
def test_an_unknown_option_is_one_line_naming_the_script(name, monkeypatch, capsys):
    line = _one_line(_main(name, ["--no-such-option"], monkeypatch), capsys)
    # argparse's message: the unknown option, or first the arguments the script requires
    assert line == f"sfenv: {name}: unrecognized arguments: --no-such-option" \
        or line.startswith(f"sfenv: {name}: the following arguments are required: "), line


@pytest.mark.parametrize("name, argv, line", [
    ("claims", ["--split", "tset"],
     "sfenv: claims: argument --split: invalid choice: 'tset' (did you mean 'test'?) (choose from "),
    ("imitation_accuracy", ["collect", "--split", "trian", "--out", "x.npz"],
     "sfenv: imitation_accuracy collect: argument --split: invalid choice: 'trian' (did you mean 'train'?) "
     "(choose from "),
    ("imitation_accuracy", ["colect"],
     "sfenv: imitation_accuracy: argument command: invalid choice: 'colect' (did you mean 'collect'?) (choose from "),
])
def test_an_invalid_choice_gets_the_closest_one(name, argv, line, monkeypatch, capsys):
    assert _one_line(_main(name, argv, monkeypatch), capsys).startswith(line)


@pytest.mark.parametrize("name, argv, line", [
    ("bench_fork", ["--steps", "0"], "sfenv: bench_fork: argument --steps: expected an integer >= 1, got 0"),
    ("bench_sim", ["--time-scale", "0"], "sfenv: bench_sim: --time-scale must be positive"),
    ("bench_env", ["--proposers", "--sets", "default,bestest"], "sfenv: bench_env: argument --sets: "),
    ("claims", ["--seeds", "1"], "sfenv: claims: --seeds must be at least 2"),  # its own parser.error(...)
    ("claims", ["--env-version", "v9"], "sfenv: claims: --env-version must be one of v6, v5, v4, v3, v2, not 'v9'"),
    ("carbon", ["--slacks", "x"], "sfenv: carbon: --slacks 'x': expected comma-separated hours"),
    ("bench_fork", ["--steps", "x"], "sfenv: bench_fork: argument --steps: invalid int value: 'x'"),
])
def test_a_scripts_own_refusal_is_one_line(name, argv, line, monkeypatch, capsys):
    assert _one_line(_main(name, argv, monkeypatch), capsys).startswith(line)


@pytest.mark.parametrize("argv, line", [
    (["-m", "sfenv.experiments.claims", "--no-such-option"],
     "sfenv: claims: unrecognized arguments: --no-such-option\n"),
    (["-m", "sfenv.experiments.bench_agents", "--jobs"],
     "sfenv: bench_agents: argument --jobs: expected one argument\n"),
])
def test_a_script_run_as_a_module_prints_one_line(argv, line, tmp_path):
    run = subprocess.run([sys.executable, *argv], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert (run.returncode, run.stdout, run.stderr) == (2, "", line)


def test_the_script_name_comes_from_its_file_or_prog():
    assert ScriptParser(script="/somewhere/experiments/claims.py").script == "claims"
    assert ScriptParser(script="claims").script == "claims"
    assert ScriptParser(prog="claims.py").script == "claims"
    assert ScriptParser(prog="python -m sfenv.experiments.claims").script == "claims"  # Python 3.14's prog
    parser = ScriptParser(prog="pytest", script="imitation_accuracy")
    assert parser.add_subparsers().add_parser("fit").script == "imitation_accuracy fit"


def test_the_choice_hint_leaves_other_messages_alone():
    assert with_choice_hint("unrecognized arguments: --x") == "unrecognized arguments: --x"
    message = "argument --split: invalid choice: 'zzz' (choose from 'train', 'test')"
    assert with_choice_hint(message) == message  # nothing close
    assert with_choice_hint("argument --split: invalid choice: 'TEST' (choose from train, test)") \
        == "argument --split: invalid choice: 'TEST' (did you mean 'test'?) (choose from train, test)"


def test_a_trace_of_only_a_header_is_refused_naming_the_trace(tmp_path, monkeypatch, capsys):
    """``bench_sim --trace`` of a CSV with no data row: one line about the trace, not about ``num_jobs``."""
    trace = tmp_path / "header-only.csv"
    trace.write_text("submit_offset_s,num_gpus,duration_s\n")
    line = _one_line(_main("bench_sim", ["--trace", str(trace), "--trace-only", "--in-process"], monkeypatch), capsys)
    assert line == f"sfenv: bench_sim: --trace {trace}: the trace holds no job (no data row after its header)"
