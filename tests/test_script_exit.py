"""The experiment scripts exit as the ``sfenv`` command does: one ``sfenv: ...`` line and code 2 for bad input."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from sfenv.app.script import run_script
from sfenv.errors import Interrupted, InvalidInput, MissingFile

ROOT = Path(__file__).resolve().parents[1]


def test_bad_input_is_one_line_and_code_2(capsys):
    def bad() -> None:
        raise InvalidInput("claims: --scenarios: no selected claim runs on ['nope']")

    assert run_script(bad) == 2
    assert capsys.readouterr().err == "sfenv: claims: --scenarios: no selected claim runs on ['nope']\n"
    assert run_script(lambda: (_ for _ in ()).throw(MissingFile("x.csv: no such file"))) == 2
    assert capsys.readouterr().err.startswith("sfenv: x.csv")


def test_ctrl_c_is_one_line_and_code_130(capsys):
    def interrupted() -> None:
        raise Interrupted("interrupted: 3 of 10 episodes saved in out.json; run again to continue")

    assert run_script(interrupted) == 130
    assert capsys.readouterr().err == "sfenv: interrupted: 3 of 10 episodes saved in out.json; run again to continue\n"

    def ctrl_c() -> None:
        raise KeyboardInterrupt

    assert run_script(ctrl_c) == 130 and capsys.readouterr().err == "sfenv: interrupted\n"


def test_other_errors_are_bugs_and_keep_their_traceback():
    def bug() -> None:
        raise ZeroDivisionError("a bug")

    with pytest.raises(ZeroDivisionError):
        run_script(bug)


def test_the_scripts_exit_code_is_mains_int_else_0():
    assert run_script(lambda: 3) == 3
    assert run_script(lambda: None) == 0
    assert run_script(lambda: {"a": 1}) == 0  # mains that return their results
    assert run_script(lambda: True) == 0


def test_every_experiment_script_exits_through_run_script():
    """Each ``experiments/*.py`` with a ``__main__`` block calls ``run_script(main)`` there and nothing else."""
    scripts = 0
    for path in sorted((ROOT / "experiments").glob("*.py")):
        tree = ast.parse(path.read_text())
        blocks = [node for node in tree.body if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test)]
        if not blocks:
            continue
        scripts += 1
        body = ast.unparse(blocks[0])
        assert "raise SystemExit(run_script(main))" in body, path.name
    assert scripts >= 15


def test_a_file_that_cannot_be_opened_is_one_line_naming_it(tmp_path, capsys):
    def opens() -> None:
        (tmp_path / "nope.csv").open()

    assert run_script(opens) == 2
    assert capsys.readouterr().err == f"sfenv: {tmp_path / 'nope.csv'}: No such file or directory\n"

    def unnamed() -> None:
        raise FileNotFoundError("no file named")

    with pytest.raises(FileNotFoundError):  # not about a named file: a bug
        run_script(unnamed)


def test_a_script_run_with_bad_input_prints_one_line_and_exits_2(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("src_region,dst_region,src_tier,dst_tier,avg_rtt\n")
    for files in ([tmp_path / "missing.csv", bad], [bad, bad]):
        proc = subprocess.run([sys.executable, "-m", "sfenv.experiments.derive_cloud_wan", "--throughput",
                               str(files[0]), "--latency", str(files[1])], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, proc.stderr
        # one line naming the file (and, for a file it could read, the line: "FILE, line 1: ...")
        assert proc.stderr.startswith((f"sfenv: {files[0]}: ", f"sfenv: {files[0]}, line ")), proc.stderr
        assert proc.stderr.count("\n") == 1, proc.stderr


@pytest.mark.parametrize("command", [["-m", "sfenv.experiments.recipe_table", "RESULTS"], ["-m", "sfenv", "agents"]])
def test_output_piped_into_a_reader_that_stopped_ends_quietly_with_code_1(command: list[str]) -> None:
    """``... | head``: the reader goes away before the output is written; no traceback, exit code 1 (as ``sfenv``)."""
    results = ROOT / "docs" / "results" / "learned" / "v5"
    args = [str(results / "generalise-rollout-test-split.json") if a == "RESULTS" else a for a in command]
    proc = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # before the child has imported anything: its first write meets a closed pipe
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 1 and "Traceback" not in err and "BrokenPipe" not in err, err


def test_sigterm_in_a_script_is_one_line_and_exit_143(tmp_path):
    """``kill PID`` (SIGTERM) during a script run through ``run_script``: handled as Ctrl-C (the script's own saving
    runs), one ``sfenv: terminated`` line, exit 143; the handler is put back when ``run_script`` returns."""
    import signal
    import subprocess
    import sys
    import time

    code = ("import signal, sys, time\n"
            "from sfenv.app.script import run_script\n"
            "def main():\n"
            "    print('ready', flush=True)\n"
            "    try:\n"
            "        time.sleep(60)\n"
            "    except KeyboardInterrupt:\n"
            "        open('saved', 'w').write('yes')\n"
            "        raise\n"
            "rc = run_script(main)\n"
            "assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL\n"
            "raise SystemExit(rc)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL))
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143 and err == "sfenv: terminated (SIGTERM)\n", err
    assert (tmp_path / "saved").read_text() == "yes"
