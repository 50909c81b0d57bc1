"""Environment benchmark: env steps/s and the share of training time spent in ``env.step``.

Steps/s with random (masked and unmasked) actions, next to CartPole measured in the same run;
and the share of a MaskablePPO training run's wall time spent inside ``env.step``.

Run: ``python -m sfenv.experiments.bench_env [--steps 5000] [--train-steps 16384] [--against DIR]``
(``--against``: the same masked-steps measurement for another checkout, alternately with this code).
Targets: >= 5,000 steps/s on 8 regions, >= 1,000 on 64, <= 20 % of training time in env.step.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

import sfenv  # noqa: F401


def steps_per_s(env_id: str, steps: int, masked: bool = True, **kw) -> float:
    env = gym.make(env_id, **kw)
    rng = np.random.default_rng(0)
    obs, info = env.reset(seed=0)
    for _ in range(200):  # warm caches
        a = int(rng.choice(np.flatnonzero(info["action_mask"])))
        obs, r, term, trunc, info = env.step(a)
        if term or trunc:
            obs, info = env.reset()
    t = time.perf_counter()
    for _ in range(steps):
        if masked:
            a = int(rng.choice(np.flatnonzero(info["action_mask"])))
        else:
            a = int(rng.integers(env.action_space.n))
        obs, r, term, trunc, info = env.step(a)
        if term or trunc:
            obs, info = env.reset()
    return steps / (time.perf_counter() - t)


def cartpole_steps_per_s(steps: int) -> float:
    env = gym.make("CartPole-v1")
    env.reset(seed=0)
    t = time.perf_counter()
    for _ in range(steps):
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            env.reset()
    return steps / (time.perf_counter() - t)


class StepTimer(gym.Wrapper):
    """Accumulates the wall time spent inside the wrapped env's ``step`` (benchmark only)."""

    total = 0.0

    def step(self, action):  # noqa: D102
        t = time.perf_counter()
        out = self.env.step(action)
        StepTimer.total += time.perf_counter() - t
        return out

    def action_masks(self) -> np.ndarray:  # noqa: D102
        return self.env.unwrapped.action_masks()


def training_share(train_steps: int) -> tuple[float, float]:
    import torch
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.env_util import make_vec_env

    torch.set_num_threads(1)
    vec = make_vec_env("sfenv/GeoSched-v1", n_envs=1, seed=0, wrapper_class=StepTimer)
    model = MaskablePPO("MultiInputPolicy", vec, seed=0, verbose=0, n_steps=1024)
    StepTimer.total = 0.0
    t = time.perf_counter()
    model.learn(train_steps)
    wall = time.perf_counter() - t
    return StepTimer.total / wall, wall


#: run in a fresh interpreter by :func:`compare_with_checkout`: masked steps/s of two envs and CartPole
_PROBE = """
import json, sys
try:
    from sfenv.experiments.bench_env import cartpole_steps_per_s, steps_per_s
except ImportError:  # a checkout from before the packages were renamed
    from experiments.bench_env import cartpole_steps_per_s, steps_per_s
import sfenv
steps, ids = int(sys.argv[1]), sys.argv[2].split(",")
cp = cartpole_steps_per_s(4 * steps)
print(json.dumps({"sfenv": sfenv.__file__, "cartpole": cp, **{i: steps_per_s(i, steps, True) for i in ids}}))
"""


def compare_with_checkout(
    checkout: str | Path, steps: int = 3000, rounds: int = 3,
    env_ids: tuple[str, ...] = ("sfenv/Spider8-v0", "sfenv/Spider64-v0"),
) -> list[dict[str, dict]]:
    """Masked steps/s of this code and of another checkout, alternately, each in a fresh interpreter.

    The same-conditions comparison of two revisions (e.g. ``git worktree add /tmp/old REV``):
    each round runs the checkout, then this code, each measuring CartPole too, so a ratio to
    CartPole and a ratio between the two come from the same minutes of the same machine.

    The default ids are the ``-v0`` ones, which both old and new checkouts register (with the same
    observation: v0 keeps the privileged entry).

    :param checkout: the other revision's source folder (it goes first on ``PYTHONPATH``).
    :return: per round ``{"other": {...}, "this": {...}}``: steps/s per env id, ``cartpole`` and
        the ``sfenv`` module file each used.
    """
    here = Path(__file__).resolve().parents[1]
    out = []
    for _ in range(rounds):
        row = {}
        for name, path in (("other", Path(checkout).resolve()), ("this", here)):
            env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(path), os.environ.get("PYTHONPATH", "")])}
            res = subprocess.run([sys.executable, "-c", _PROBE, str(steps), ",".join(env_ids)], env=env,
                                 capture_output=True, text=True, check=True, cwd=tempfile.gettempdir())
            row[name] = json.loads(res.stdout.strip().splitlines()[-1])
        out.append(row)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description="sfenv environment benchmark")
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--train-steps", type=int, default=16384)
    ap.add_argument("--against", metavar="DIR", default=None,
                    help="also compare masked steps/s with another checkout (e.g. `git worktree add /tmp/old REV`), "
                         "alternately, 3 rounds")
    args = ap.parse_args()
    if args.against:
        for i, row in enumerate(compare_with_checkout(args.against, args.steps)):
            for name in ("other", "this"):
                m = row[name]
                figures = "  ".join(f"{k[6:]} {m[k]:7.0f} ({m[k] / m['cartpole']:.4f}x CartPole)"
                                    for k in m if k.startswith("sfenv/"))
                print(f"round {i + 1} {name:<5}: {figures}   [{Path(m['sfenv']).parent}]")
    cp = cartpole_steps_per_s(args.steps * 4)
    print(f"CartPole-v1 (gym.make, random actions): {cp:10.0f} steps/s (reference)")
    for env_id, target in [("sfenv/Spider8-v1", 5000), ("sfenv/Spider64-v1", 1000)]:
        for masked in (True, False):
            sps = steps_per_s(env_id, args.steps, masked)
            print(f"{env_id:<18} {'masked' if masked else 'unmasked':<9}: {sps:10.0f} steps/s "
                  f"= {sps / cp:6.3f} x CartPole   (target {target})")
    share, wall = training_share(args.train_steps)
    per_step = 1e6 * wall / max(1, args.train_steps)
    print(f"MaskablePPO {args.train_steps} steps on spider-8: {wall:.1f} s ({per_step:.0f} us/step), "
          f"{100 * share:.1f} % inside env.step ({share * per_step:.0f} us/step; target <= 20 %)")


if __name__ == "__main__":
    main()
