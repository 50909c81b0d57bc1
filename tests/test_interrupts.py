"""Ctrl-C held through third-party loads that would lose it (sfenv.interrupts.ctrl_c_deferred).

The command-line end of this (one line, exit 130, from the first import on) is tested in
tests/test_results_concurrency.py; here each piece is tested without timing: a signal raised by the
process itself at a known point.
"""

import signal
import threading

import pytest

from sfenv.app import evaluate
from sfenv.interrupts import ctrl_c_deferred
from sfenv.model import _pipeline_jit, pipeline


@pytest.fixture
def ctrl_c_as_in_a_terminal():
    """Python's default SIGINT handler, as a program started from a shell has it."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _press_ctrl_c_and_swallow_it() -> None:
    """What the measured losses look like: a Ctrl-C inside a library that catches every exception."""
    try:
        signal.raise_signal(signal.SIGINT)
    except BaseException:  # as llvmlite's ctypes callbacks, pydantic-core's validators do this)
        pass


def test_a_ctrl_c_inside_is_raised_when_the_block_ends(ctrl_c_as_in_a_terminal):
    reached = []
    with pytest.raises(KeyboardInterrupt):
        with ctrl_c_deferred():
            signal.raise_signal(signal.SIGINT)  # held: nothing raised here
            reached.append("after the signal")
    assert reached == ["after the signal"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_swallowing_library_cannot_lose_it(ctrl_c_as_in_a_terminal):
    with pytest.raises(KeyboardInterrupt):
        with ctrl_c_deferred():
            _press_ctrl_c_and_swallow_it()
    _press_ctrl_c_and_swallow_it()  # the control: without the block it is lost
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_no_ctrl_c_no_exception_and_the_blocks_own_exception_passes(ctrl_c_as_in_a_terminal):
    with ctrl_c_deferred():
        pass
    with pytest.raises(ZeroDivisionError):
        with ctrl_c_deferred():
            signal.raise_signal(signal.SIGINT)
            _ = 1 / 0
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with ctrl_c_deferred():  # the dropped Ctrl-C does not come back later
        pass


def test_a_program_with_its_own_handler_keeps_it():
    calls = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: calls.append(signum))
    try:
        with ctrl_c_deferred():
            signal.raise_signal(signal.SIGINT)
            assert calls == [signal.SIGINT]  # its handler ran at once
        assert calls == [signal.SIGINT]
    finally:
        signal.signal(signal.SIGINT, previous)


def test_outside_the_main_thread_it_does_nothing(ctrl_c_as_in_a_terminal):
    done = []

    def body():
        with ctrl_c_deferred():  # signal.signal would raise ValueError in a thread
            done.append(True)

    worker = threading.Thread(target=body)
    worker.start()
    worker.join()
    assert done == [True]


def test_loading_the_compiled_replays_keeps_a_ctrl_c(ctrl_c_as_in_a_terminal, monkeypatch):
    if not _pipeline_jit.AVAILABLE:
        pytest.skip("numba is not installed or SFENV_NO_JIT is set")
    monkeypatch.setattr(pipeline, "_jit", False)
    monkeypatch.setattr(_pipeline_jit, "warm_up", _press_ctrl_c_and_swallow_it)
    with pytest.raises(KeyboardInterrupt):
        pipeline.prepare_compiled()
    assert pipeline._jit is _pipeline_jit  # loaded all the same


def test_the_first_solver_instance_keeps_a_ctrl_c(ctrl_c_as_in_a_terminal, monkeypatch):
    highspy = pytest.importorskip("highspy")
    monkeypatch.setattr(evaluate, "_BANNER_DONE", False)
    monkeypatch.setattr(highspy, "Highs", _press_ctrl_c_and_swallow_it)
    with pytest.raises(KeyboardInterrupt):
        evaluate.quiet_solver_banner()


def test_an_agents_one_off_imports_keep_a_ctrl_c(ctrl_c_as_in_a_terminal, monkeypatch):
    from sfenv.agents.registry import make_agent

    agent = make_agent("fifo")
    monkeypatch.setattr(agent, "prepare", _press_ctrl_c_and_swallow_it)
    with pytest.raises(KeyboardInterrupt):
        evaluate.prepare_decisions(agent)


def _importing_swallows_a_ctrl_c(monkeypatch):
    """``sfenv.interrupts.import_module``'s import, made to meet a Ctrl-C that PuLP's bare ``except:`` swallows."""
    import importlib
    import types

    from sfenv import interrupts

    def import_module(name):
        _press_ctrl_c_and_swallow_it()
        return importlib.import_module(name)

    monkeypatch.setattr(interrupts, "importlib", types.SimpleNamespace(import_module=import_module))


def test_importing_a_registered_agent_keeps_a_ctrl_c(ctrl_c_as_in_a_terminal, monkeypatch):
    from sfenv.agents.registry import make_agent

    _importing_swallows_a_ctrl_c(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        make_agent("tpa")  # its module imports PuLP


def test_importing_a_proposer_set_keeps_a_ctrl_c(ctrl_c_as_in_a_terminal, monkeypatch):
    from sfenv.env.proposers import named_proposers

    _importing_swallows_a_ctrl_c(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        named_proposers("best")


SWALLOWING_PLUGIN = '''
import signal

try:  # a library that swallows every exception while it imports, as PuLP does around highspy
    signal.raise_signal(signal.SIGINT)
except BaseException:
    pass
'''


def test_a_plugin_file_keeps_a_ctrl_c(ctrl_c_as_in_a_terminal, tmp_path):
    import sys

    from sfenv.agents.registry import make_agent

    plugin = tmp_path / "swallows.py"
    plugin.write_text(SWALLOWING_PLUGIN)
    before = set(sys.modules)
    with pytest.raises(KeyboardInterrupt):
        make_agent(f"{plugin}:Anything")
    assert not any(name.startswith("sfenv_plugin_swallows") for name in set(sys.modules) - before)


def test_a_plugin_module_keeps_a_ctrl_c(ctrl_c_as_in_a_terminal, tmp_path, monkeypatch):
    import sys

    from sfenv.agents.registry import make_agent

    (tmp_path / "sfenv_test_swallows.py").write_text(SWALLOWING_PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "sfenv_test_swallows", raising=False)
    try:
        with pytest.raises(KeyboardInterrupt):
            make_agent("sfenv_test_swallows:Anything")
    finally:
        sys.modules.pop("sfenv_test_swallows", None)


@pytest.fixture
def sigterm_as_in_the_command(ctrl_c_as_in_a_terminal, monkeypatch):
    """SIGTERM raising :class:`Terminated`, as the ``sfenv`` command sets it when it starts."""
    from sfenv import interrupts

    monkeypatch.setattr(interrupts, "_received", [])
    previous = signal.getsignal(signal.SIGTERM)
    interrupts.sigterm_raises()
    yield interrupts
    signal.signal(signal.SIGTERM, previous)


def test_the_commands_sigterm_is_held_and_deferred_as_ctrl_c_is(sigterm_as_in_the_command):
    from sfenv.interrupts import Terminated, ctrl_c_held

    interrupts = sigterm_as_in_the_command
    handler = signal.getsignal(signal.SIGTERM)
    with ctrl_c_held():
        signal.raise_signal(signal.SIGTERM)  # ignored inside the save
    assert signal.getsignal(signal.SIGTERM) is handler and not interrupts.terminated()
    with pytest.raises(Terminated):
        with ctrl_c_deferred():
            signal.raise_signal(signal.SIGTERM)  # held: nothing raised here
    assert signal.getsignal(signal.SIGTERM) is handler and interrupts.terminated()
    with pytest.raises(Terminated) as raised:
        signal.raise_signal(signal.SIGTERM)
    assert isinstance(raised.value, KeyboardInterrupt)  # a run saves what it finished, as on Ctrl-C
