"""Ray benchmark: the claims run serial vs on Ray, and RLlib vs SB3 training speed, in one run.

1. ``experiments.claims`` (``--quick`` settings by default: at most 10 jobs, small ILP/genetic
   budgets) over ``--seeds`` seeds, once serially and once with ``--backend ray`` on ``--workers``
   local workers, each into its own temporary folder; prints both wall times, their ratio and the
   mean cost of one episode (serial time / episodes), the figure behind an estimate for N machines
   (episodes x per-episode cost / workers, plus Ray's start-up).  The script lists the agents whose
   rows differ between the two runs (decision times aside): only agents bounded by a wall-clock
   solver limit (the ILP's ``time_limit``) may, since their incumbent depends on the machine's speed
   and load at that moment, serial or not.
2. PPO training steps/s on ``--scenario`` with the same settings in both libraries (SB3's PPO
   defaults: rollout 2,048, minibatch 64, 10 epochs, two 64-unit tanh layers; action masks):
   sb3-contrib's MaskablePPO (one env, ``DummyVecEnv``) and RLlib PPO (:mod:`sfenv.agents.rllib`)
   with 0 (sampling in the driver) and ``--workers`` remote env runners.  Set-up (Ray start,
   algorithm build) is timed apart from training.

Run (the ray extra, loopback-only namespace, as the ray tests)::

    unshare -rn sh -c 'ip link set lo up; .venv-ray/bin/python -m sfenv.experiments.bench_ray'

Options: ``--seeds 5 --workers 2 --train-steps 8192 --torch-threads 1 --skip-claims --skip-train``.
The load average is printed before and after: other work on the machine skews the figures.  Absolute
figures move with the machine and its load; compare the ratios.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sfenv.experiments.claims import CLAIMS, QUICK_BUDGETS, run_claims

from sfenv.app.evaluate import quiet_solver_banner
from sfenv.app.script import ScriptParser
from sfenv.runs.distributed import ray_session

TIMING = ("decision_time_mean_s", "decision_time_max_s")


def _differing(a: dict[str, list[dict]], b: dict[str, list[dict]]) -> list[str]:
    """``agent@scenario`` of every row that differs between two runs (decision times aside; NaN equals NaN)."""
    def text(r: dict) -> str:
        return json.dumps({f: v for f, v in r.items() if f not in TIMING}, sort_keys=True)

    out = set()
    for scenario in sorted(set(a) | set(b)):
        ra, rb = a.get(scenario, []), b.get(scenario, [])
        if len(ra) != len(rb):
            out.add(f"*@{scenario}")
        out.update(f"{x['agent']}@{scenario}" for x, y in zip(ra, rb) if text(x) != text(y))
    return sorted(out)


def bench_claims(seeds: int, workers: int, num_jobs: int | None = 10, quick: bool = True,
                 only: Sequence[str] = ()) -> dict[str, Any]:
    """Time the claims run serially and on Ray (``workers`` local CPUs); returns the figures.

    :param only: claim groups or keys (default: every claim).
    """
    budgets = QUICK_BUDGETS if quick else None
    claims = [c for c in CLAIMS if not only or c.group in only or c.key in only]
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        serial = run_claims(claims, range(seeds), Path(tmp) / "serial", num_jobs, budgets, progress=False)
        t_serial = time.perf_counter() - t
        t = time.perf_counter()
        with ray_session(None, workers):
            t_start = time.perf_counter() - t
            on_ray = run_claims(claims, range(seeds), Path(tmp) / "ray", num_jobs, budgets, progress=False,
                                backend="ray", workers=workers)
        t_ray = time.perf_counter() - t
    episodes = sum(len(rows) for rows in serial.values())
    return {"episodes": episodes, "serial_s": t_serial, "ray_s": t_ray, "ray_start_s": t_start,
            "speedup": t_serial / t_ray, "episode_s": t_serial / episodes, "differing": _differing(serial, on_ray)}


def bench_sb3(scenario: str, steps: int, seed: int = 0) -> dict[str, float]:
    """MaskablePPO (sb3-contrib) with SB3's defaults on one env: set-up and training steps/s."""
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.env_util import make_vec_env

    from sfenv.env import GeoSchedEnv

    t = time.perf_counter()
    vec = make_vec_env(lambda: GeoSchedEnv(scenario), n_envs=1, seed=seed)
    model = MaskablePPO("MultiInputPolicy", vec, seed=seed, verbose=0, n_steps=2048, batch_size=64, n_epochs=10,
                        policy_kwargs={"net_arch": [64, 64]})
    setup = time.perf_counter() - t
    t = time.perf_counter()
    model.learn(total_timesteps=steps)
    train = time.perf_counter() - t
    vec.close()
    n = model.num_timesteps
    return {"setup_s": setup, "train_s": train, "steps": n, "steps_per_s": n / train}


def bench_rllib(scenario: str, steps: int, workers: int, seed: int = 0) -> dict[str, float]:
    """RLlib PPO with masks (:func:`sfenv.agents.rllib.train_rllib`, SB3's defaults): set-up and steps/s."""
    from sfenv.agents.rllib import train_rllib

    stamps: list[tuple[float, int]] = []

    def log(line: str) -> None:
        stamps.append((time.perf_counter(), int(line.split()[1].split("/")[0])))

    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        train_rllib(scenario, steps, seed, workers=workers, out_dir=tmp, progress=True, log=log)
        total = time.perf_counter() - t
    # the first iteration holds the set-up (Ray start, algorithm build) and warm-up: time the others
    (t1, s1), (t2, s2) = stamps[0], stamps[-1]
    rate = (s2 - s1) / (t2 - t1) if len(stamps) > 1 else math.nan
    return {"total_s": total, "first_iteration_s": t1 - t, "steps": s2, "steps_per_s": rate}


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point (see the module docstring)."""
    ap = ScriptParser(script=__file__, description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=5, help="claims seeds (0..N-1; the claims script's default)")
    ap.add_argument("--workers", type=int, default=2, help="Ray workers (tasks in flight, env runners)")
    ap.add_argument("--full", action="store_true", help="the full claims settings instead of --quick")
    ap.add_argument("--scenario", default="spider-8", help="training scenario")
    ap.add_argument("--train-steps", type=int, default=8192, help="training steps per library (4 PPO rollouts)")
    ap.add_argument("--torch-threads", type=int, default=1,
                    help="torch threads of this process (SB3, RLlib's learner and local sampling); Ray's "
                         "workers use one each")
    ap.add_argument("--skip-claims", action="store_true")
    ap.add_argument("--skip-train", action="store_true")
    args = ap.parse_args(argv)
    quiet_solver_banner()
    print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
    if not args.skip_claims:
        c = bench_claims(args.seeds, args.workers, None if args.full else 10, quick=not args.full)
        print(f"claims {'full' if args.full else '--quick'}, {args.seeds} seeds, {c['episodes']} episodes: "
              f"serial {c['serial_s']:.0f} s, ray ({args.workers} workers) {c['ray_s']:.0f} s "
              f"(Ray start {c['ray_start_s']:.1f} s) -> speed-up {c['speedup']:.2f}x; "
              f"{c['episode_s']:.2f} s per episode serially; rows differing: {', '.join(c['differing']) or 'none'}")
    if not args.skip_train:
        import torch

        torch.set_num_threads(args.torch_threads)
        sb3 = bench_sb3(args.scenario, args.train_steps)
        print(f"train {args.scenario}: MaskablePPO (SB3) {sb3['steps_per_s']:.0f} steps/s "
              f"({sb3['steps']} steps in {sb3['train_s']:.1f} s, set-up {sb3['setup_s']:.1f} s)")
        for w in sorted({0, args.workers}):
            r = bench_rllib(args.scenario, args.train_steps, w)
            print(f"train {args.scenario}: RLlib PPO, {w} env runners: {r['steps_per_s']:.0f} steps/s after the first "
                  f"iteration ({r['steps']} steps, {r['total_s']:.1f} s in all, first iteration with set-up "
                  f"{r['first_iteration_s']:.1f} s) = {r['steps_per_s'] / sb3['steps_per_s']:.2f}x SB3")
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    from sfenv.app.script import run_script

    raise SystemExit(run_script(main))
