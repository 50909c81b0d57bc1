"""Ray backend and RLlib training (issue 10).

Tests marked ``ray`` need the ``ray`` extra and run inside a loopback-only network namespace, in
the second virtual environment that ``.ci/run`` builds::

    unshare -rn sh -c 'ip link set lo up; .venv-ray/bin/python -m pytest -m ray tests/test_ray.py'

The unmarked tests run in the default suite (no Ray): option checks, the masked env wrapper, and
that nothing imports Ray unless asked.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from sfenv.agents.fifo import FIFOAgent
from sfenv.agents.rllib import InvalidActionSampled, MaskedGeoSchedEnv

from sfenv.app.cli import main as cli_main
from sfenv.app.evaluate import evaluate_agents
from sfenv.errors import InvalidInput, UntrustedCode
from sfenv.runs.distributed import check_backend
from sfenv.runs.results import read_results

HAS_RAY = subprocess.run([sys.executable, "-c", "import ray"], capture_output=True).returncode == 0
AGENTS = ["fifo", "random", "spinsearch", "bace-pipe"]
TIMING = ("decision_time_mean_s", "decision_time_max_s")


def _strip(rows: list[dict]) -> str:
    """Rows without the wall-clock decision times (the only fields allowed to differ between backends), as
    JSON text: a NaN (e.g. the mean JCT of finished jobs when none finished) then equals a NaN."""
    return json.dumps([{k: v for k, v in r.items() if k not in TIMING} for r in rows], sort_keys=True)


# ---------------------------------------------------------------- default suite (no Ray needed)


def test_nothing_imports_ray_unless_asked(tmp_path):
    code = ("import sys, sfenv, sfenv.app.cli, sfenv.runs.distributed, sfenv.app.evaluate, sfenv.agents.rllib, "
            "sfenv.app.benchmark, sfenv.experiments.claims\n"
            "from sfenv.app.evaluate import evaluate_agents\n"
            "evaluate_agents(['fifo'], 'spider-8', [0], num_jobs=3, progress=False)\n"
            "bad = sorted(m for m in sys.modules if m == 'ray' or m.startswith(('ray.', 'torch')))\n"
            "print(bad)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


@pytest.mark.parametrize(("backend", "address", "workers"), [
    ("dask", None, None), ("serial", None, 2), ("serial", "auto", None), ("ray", None, 0), ("ray", None, True)])
def test_bad_backend_options_are_refused(backend, address, workers):
    with pytest.raises(InvalidInput):
        check_backend(backend, address, workers)
    with pytest.raises(InvalidInput):
        evaluate_agents(["fifo"], "spider-8", [0], num_jobs=2, progress=False, backend=backend, address=address,
                        workers=workers)


def test_backend_options_given_alone_exit_2_and_write_nothing(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert cli_main(["evaluate", "--agents", "fifo", "--seeds", "1", "--workers", "2", "--out", str(out)]) == 2
    assert "ray backend only" in capsys.readouterr().err
    assert cli_main(["benchmark", "--agents", "fifo", "--seeds", "1", "--address", "auto",
                     "--out-dir", str(tmp_path / "b")]) == 2
    assert cli_main(["evaluate", "--backend", "ray", "--workers", "0"]) == 2  # argparse: workers > 0
    assert not out.exists() and not (tmp_path / "b").exists()


@pytest.mark.skipif(HAS_RAY, reason="checks the message shown when the ray extra is missing")
def test_ray_backend_without_the_extra_names_the_install_command(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert cli_main(["evaluate", "--agents", "fifo", "--seeds", "1", "--backend", "ray", "--out", str(out)]) == 2
    assert 'pip install "sfenv[ray]"' in capsys.readouterr().err
    assert not out.exists()


def test_train_refuses_ray_options_for_sb3_algorithms(tmp_path, capsys):
    assert cli_main(["train", "--algo", "maskable-ppo", "--workers", "2", "--out", str(tmp_path / "runs")]) == 2
    assert "rllib-ppo only" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


@pytest.mark.skipif(HAS_RAY, reason="checks the message shown when the ray extra is missing")
def test_rllib_training_without_the_extra_names_the_install_command(tmp_path, capsys):
    assert cli_main(["train", "--algo", "rllib-ppo", "--steps", "100", "--out", str(tmp_path / "runs")]) == 2
    assert 'pip install "sfenv[ray]"' in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_masked_env_wraps_observation_and_mask():
    env = MaskedGeoSchedEnv({"scenario": "spider-8", "env_kwargs": {"num_jobs": 4}})
    obs, _ = env.reset(seed=3)
    assert env.observation_space.contains(obs)
    inner = env.unwrapped
    np.testing.assert_array_equal(obs["action_mask"], inner.action_masks().astype(np.float32))
    # the flattened observation is the plain env's observation of the same episode, flattened
    from gymnasium import spaces

    from sfenv.env import GeoSchedEnv

    plain = GeoSchedEnv("spider-8", num_jobs=4)
    pobs, _ = plain.reset(seed=3)
    np.testing.assert_array_equal(obs["observations"], spaces.flatten(plain.observation_space, pobs))


def test_masked_env_strict_mode_refuses_a_masked_action_and_lax_mode_counts_it():
    strict = MaskedGeoSchedEnv({"scenario": "spider-8", "env_kwargs": {"num_jobs": 4}, "strict_masks": True})
    obs, _ = strict.reset(seed=0)
    masked = np.flatnonzero(obs["action_mask"] == 0)
    assert masked.size, "the first decision point of spider-8 should have empty candidate slots"
    with pytest.raises(InvalidActionSampled):
        strict.step(int(masked[0]))
    lax = MaskedGeoSchedEnv({"scenario": "spider-8", "env_kwargs": {"num_jobs": 4}})
    lax.reset(seed=0)
    lax.step(int(masked[0]))
    assert lax.invalid_actions == 1
    valid = int(np.flatnonzero(obs["action_mask"])[0])
    strict.reset(seed=0)
    strict.step(valid)  # a valid action passes
    assert strict.invalid_actions == 0


# ---------------------------------------------------------------- Ray (marker `ray`, loopback-only namespace)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.ray
def test_cli_joins_an_existing_cluster_by_address(tmp_path):
    """``ray start --head`` (a one-node cluster on loopback), then ``sfenv evaluate --address`` in another process."""
    pytest.importorskip("ray")
    port = _free_port()
    # token authentication with a token of this test's own, given to the head and to sfenv alike (a fresh
    # machine has no ~/.ray/auth_token for the client to find)
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token",
           "RAY_AUTH_TOKEN": secrets.token_hex(32)}
    env.pop("RAY_AUTH_TOKEN_PATH", None)
    log = (tmp_path / "head.log").open("w")
    head = subprocess.Popen([str(Path(sys.executable).parent / "ray"), "start", "--head", f"--port={port}",
                             "--num-cpus=2", "--include-dashboard=false", "--block"],
                            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 120
        while "Ray runtime started" not in (tmp_path / "head.log").read_text():
            assert head.poll() is None and time.monotonic() < deadline, (tmp_path / "head.log").read_text()
            time.sleep(0.2)
        out = tmp_path / "cluster.json"
        args = ["evaluate", "--agents", "fifo,random", "--seed", "0", "--seeds", "2", "--num-jobs", "4", "--quiet",
                "--out", str(out)]
        proc = subprocess.run([sys.executable, "-m", "sfenv", *args, "--backend", "ray", "--address",
                               f"127.0.0.1:{port}"], env=env, cwd=tmp_path,
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert f"Connecting to existing Ray cluster at address: 127.0.0.1:{port}" in proc.stderr
    finally:
        head.send_signal(signal.SIGTERM)  # the head and its processes only (not `ray stop`)
        head.wait(timeout=120)
        log.close()
    serial = evaluate_agents(["fifo", "random"], "spider-8", [0, 1], num_jobs=4, progress=False)
    assert _strip(read_results(out)[1]) == _strip(serial)


@pytest.fixture(scope="module")
def ray_local():
    """One local Ray (2 CPUs) for the module; the evaluator reuses an initialised Ray and leaves it running."""
    ray = pytest.importorskip("ray")
    ray.init(address="local", num_cpus=2, include_dashboard=False)
    yield ray
    ray.shutdown()


@pytest.mark.ray
def test_ray_evaluation_equals_serial(ray_local, tmp_path):
    seeds = [0, 1, 2]
    serial = evaluate_agents(AGENTS, "spider-8", seeds, num_jobs=6, progress=False)
    out = tmp_path / "ray.json"
    seen: list[tuple[str, int]] = []
    rows = evaluate_agents(AGENTS, "spider-8", seeds, num_jobs=6, progress=True, backend="ray", workers=2, out=out,
                           on_row=lambda r: seen.append((r["agent"], r["seed"])))
    assert _strip(rows) == _strip(serial)  # same rows, same (serial) order
    assert _strip(read_results(out)[1]) == _strip(serial)  # the file too
    assert sorted(seen) == sorted((a, s) for a in AGENTS for s in seeds)
    assert all(r["decisions"] > 0 for r in rows)


@pytest.mark.ray
def test_resume_on_ray_skips_finished_episodes(ray_local, tmp_path):
    out = tmp_path / "runs.json"
    evaluate_agents(["fifo", "random"], "spider-8", [0, 1], num_jobs=5, progress=False, backend="ray", out=out)
    document = json.loads(out.read_text())  # the results file: its settings and episodes
    for r in document["episodes"]:  # mark the finished rows: a re-run would overwrite the marks
        r["decisions"] = -1
    out.write_text(json.dumps(document))
    ran: list[tuple[str, int]] = []
    rows = evaluate_agents(["fifo", "random"], "spider-8", [0, 1, 2], num_jobs=5, progress=False, backend="ray",
                           out=out, resume=True, on_row=lambda r: ran.append((r["agent"], r["seed"])))
    assert sorted(ran) == [("fifo", 2), ("random", 2)]
    assert [r["decisions"] for r in rows[:4]] == [-1] * 4
    assert all(r["decisions"] > 0 for r in rows[4:])
    serial = evaluate_agents(["fifo", "random"], "spider-8", [2], num_jobs=5, progress=False)
    assert _strip(rows[4:]) == _strip(serial)
    assert read_results(out)[1] == rows


class _DiesOnceFIFO(FIFOAgent):
    """FIFO whose first decision, in the first process that plays ``victim_seed``, hangs until it is killed."""

    def __init__(self, marker: str, victim_seed: int):
        super().__init__()
        self.name = "fifo"  # the same rows as FIFO's
        self.marker, self.victim_seed, self._seed = marker, victim_seed, None

    def reset(self, seed: int | None = None) -> None:
        super().reset(seed)
        self._seed = seed

    def decide(self, view):
        if self._seed == self.victim_seed:
            try:
                fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)  # only the first attempt
            except FileExistsError:
                pass
            else:
                os.write(fd, str(os.getpid()).encode())
                os.close(fd)
                time.sleep(300)  # the test kills this worker long before
        return super().decide(view)


@pytest.mark.ray
def test_a_killed_worker_is_retried_and_the_results_file_stays_valid(ray_local, tmp_path):
    # workers cannot import this test module: Ray's cloudpickle sends its classes by value
    ray_local.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    marker = tmp_path / "victim.pid"
    out = tmp_path / "runs.json"
    killed: list[int] = []
    snapshots: list[list] = []

    def killer() -> None:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            if marker.exists() and marker.read_text():
                time.sleep(0.5)
                if out.exists():
                    snapshots.append(read_results(out)[1])  # valid JSON while a worker hangs
                pid = int(marker.read_text())
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return
            time.sleep(0.05)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    seeds = [0, 1, 2, 3]
    rows = evaluate_agents([_DiesOnceFIFO(str(marker), victim_seed=1)], "spider-8", seeds, num_jobs=5,
                           progress=False, backend="ray", workers=2, out=out)
    thread.join(timeout=10)
    assert killed, "the victim episode never started"
    with pytest.raises(ProcessLookupError):
        os.kill(killed[0], 0)  # that worker process is gone
    serial = evaluate_agents(["fifo"], "spider-8", seeds, num_jobs=5, progress=False)
    assert _strip(rows) == _strip(serial)  # the killed episode was played again, nothing lost or doubled
    assert _strip(read_results(out)[1]) == _strip(serial)
    assert all(r["seed"] != 1 for snap in snapshots for r in snap)  # the file never held the hung episode


@pytest.mark.ray
def test_masking_module_gives_masked_actions_zero_probability():
    torch = pytest.importorskip("torch")
    from gymnasium import spaces
    from sfenv.agents.rllib import masked_ppo_module_class

    columns = pytest.importorskip("ray.rllib.core.columns").Columns
    env = MaskedGeoSchedEnv({"scenario": "spider-8", "env_kwargs": {"num_jobs": 4}})
    module = masked_ppo_module_class()(observation_space=env.observation_space, action_space=env.action_space,
                                       model_config={"fcnet_hiddens": [16], "fcnet_activation": "tanh"})
    n = env.action_space.n
    rng = np.random.default_rng(0)
    obs = torch.from_numpy(rng.random((64, env.observation_space["observations"].shape[0]), dtype=np.float32))
    mask = (rng.random((64, n)) < 0.3).astype(np.float32)
    mask[:, -1] = 1.0  # waiting is always valid
    batch = {columns.OBS: {"observations": obs, "action_mask": torch.from_numpy(mask)}}
    with torch.no_grad():
        for out in (module.forward_exploration(dict(batch)), module.forward_inference(dict(batch)),
                    module.forward_train({columns.OBS: dict(batch[columns.OBS])})):
            probs = torch.softmax(out[columns.ACTION_DIST_INPUTS].double(), -1).numpy()
            assert np.all(probs[mask == 0] == 0.0)
            assert np.allclose(probs.sum(-1), 1.0) and np.all(probs[mask == 1] > 0)
        sampled = torch.distributions.Categorical(logits=module.forward_exploration(dict(batch))[
            columns.ACTION_DIST_INPUTS]).sample((50,)).numpy()
    assert np.all(np.take_along_axis(mask, sampled.T, axis=1) == 1.0)
    assert isinstance(module.observation_space, spaces.Dict)


@pytest.mark.ray
def test_rllib_ppo_trains_with_masks_resumes_and_its_checkpoint_is_evaluated(tmp_path):
    from sfenv.agents.rllib import META_FILE, train_rllib

    small = {"train_batch_size_per_learner": 1000, "minibatch_size": 250, "num_epochs": 2}
    lines: list[str] = []
    # strict masks: one masked action sampled anywhere stops training with InvalidActionSampled
    path = train_rllib("spider-8", total_timesteps=2000, seed=0, workers=1, out_dir=tmp_path, algo_kwargs=small,
                       strict_masks=True, progress=True, log=lines.append)
    meta = json.loads((path / META_FILE).read_text())
    assert meta["steps"] >= 2000 and meta["algo"] == "rllib-ppo"
    assert len(lines) == 2 and all("steps/s" in line for line in lines)
    # resume to 3,000 steps in all: one more iteration, from the saved state
    path2 = train_rllib("spider-8", total_timesteps=3000, seed=0, workers=1, out_dir=tmp_path, algo_kwargs=small,
                        strict_masks=True, resume=True, progress=True, log=lines.append, trust_code=True)
    assert path2 == path
    assert json.loads((path / META_FILE).read_text())["steps"] == meta["steps"] + 1000
    assert any("resumed" in line for line in lines) and len(lines) == 4
    # the checkpoint joins the evaluator next to a heuristic, serially and on Ray, with the same rows
    spec = f"rllib:{path}"
    with pytest.raises(UntrustedCode, match="RLlib checkpoint is code"):  # a checkpoint is a pickle
        evaluate_agents([spec], "spider-8", [100], num_jobs=6, progress=False)
    rows = evaluate_agents([spec, "fifo"], "spider-8", [100, 101], num_jobs=6, progress=False, trust_model_code=True)
    assert [r["agent"] for r in rows] == [spec, spec, "fifo", "fifo"]
    learned = rows[:2]
    assert all(r["decisions"] > 0 and not r["stopped_early"] for r in learned)
    ray_rows = evaluate_agents([spec], "spider-8", [100, 101], num_jobs=6, progress=False, backend="ray", workers=2,
                               trust_model_code=True)
    assert _strip(ray_rows) == _strip(learned)


@pytest.mark.ray
def test_cli_evaluate_on_ray_writes_the_serial_results(ray_local, tmp_path, capsys):
    ray_out, serial_out = tmp_path / "ray.json", tmp_path / "serial.json"
    base = ["evaluate", "--agents", "fifo,cheapest", "--seeds", "2", "--num-jobs", "4", "--quiet"]
    assert cli_main([*base, "--out", str(serial_out)]) == 0
    assert cli_main([*base, "--out", str(ray_out), "--backend", "ray", "--workers", "2"]) == 0
    assert "cheapest" in capsys.readouterr().out
    assert _strip(read_results(ray_out)[1]) == _strip(read_results(serial_out)[1])


@pytest.mark.ray
def test_cli_trains_rllib_ppo_and_resumes_its_run_folder(tmp_path, capsys):
    from sfenv.agents.rllib import META_FILE

    assert cli_main(["train", "--algo", "rllib-ppo", "--steps", "1000", "--num-jobs", "4", "--out", str(tmp_path),
                     "--quiet"]) == 0
    run = tmp_path / "rllib-ppo-spider-8-s0"
    assert f"rllib:{run}" in capsys.readouterr().out
    meta = json.loads((run / META_FILE).read_text())
    assert meta["steps"] == 2048 and meta["env_kwargs"] == {"num_jobs": 4}  # one rollout of SB3's default size
    assert cli_main(["train", "--resume", str(run), "--steps", "4000", "--quiet"]) == 2  # a checkpoint is a pickle
    assert "--trust-model-code" in capsys.readouterr().err
    assert cli_main(["train", "--resume", str(run), "--steps", "4000", "--quiet", "--trust-model-code"]) == 0
    assert json.loads((run / META_FILE).read_text())["steps"] == 4096


@pytest.mark.ray
def test_bench_ray_claims_smoke(ray_local):
    from sfenv.experiments.bench_ray import bench_claims

    res = bench_claims(seeds=1, workers=2, num_jobs=4, only=["spantrain"])
    # fifo, ddp, spantrain and its two ablation variants: no wall-clock limit, so ray and serial agree exactly
    assert res["episodes"] == 5 and res["differing"] == []
    assert res["serial_s"] > 0 and res["ray_s"] > 0 and res["speedup"] == res["serial_s"] / res["ray_s"]
