"""Environment benchmark: env steps/s and the share of training time spent in ``env.step``.

Steps/s with random (masked and unmasked) actions, next to CartPole measured in the same run;
and the share of a MaskablePPO training run's wall time spent inside ``env.step``.

Run: ``python -m sfenv.experiments.bench_env [--steps 5000] [--train-steps 16384]``.
Targets: >= 5,000 steps/s on 8 regions, >= 1,000 on 64, <= 20 % of training time in env.step.
"""

from __future__ import annotations

import argparse
import time

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
    vec = make_vec_env("sfenv/GeoSched-v0", n_envs=1, seed=0, wrapper_class=StepTimer)
    model = MaskablePPO("MultiInputPolicy", vec, seed=0, verbose=0, n_steps=1024)
    StepTimer.total = 0.0
    t = time.perf_counter()
    model.learn(train_steps)
    wall = time.perf_counter() - t
    return StepTimer.total / wall, wall


def main() -> None:
    ap = argparse.ArgumentParser(description="sfenv environment benchmark")
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--train-steps", type=int, default=16384)
    args = ap.parse_args()
    cp = cartpole_steps_per_s(args.steps * 4)
    print(f"CartPole-v1 (gym.make, random actions): {cp:10.0f} steps/s (reference)")
    for env_id, target in [("sfenv/Spider8-v0", 5000), ("sfenv/Spider64-v0", 1000)]:
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
