"""Write a scheduler: a reference agent on the agents' interface, scored with the project's evaluator.

An agent subclasses :class:`sfenv.agents.base.SchedulerAgent`: :meth:`order` gives the queue order,
:meth:`propose` plans for one job (best first); the base class starts the first plan that fits
(:meth:`decide`). The agent below serves the smallest jobs first and puts each in the region where
it costs least per hour of training at today's prices, among the regions whose free GPUs can hold
it. It then plays in the environment through SB3's ``predict`` like a learned model.

Run: ``python examples/write_a_scheduler.py`` (5 seeds), or ``--smoke`` (or
``SFENV_EXAMPLES_SMOKE=1``) for 1 seed and fewer jobs.
"""

from __future__ import annotations

import argparse
import os

import gymnasium as gym
from sfenv.agents.base import SchedulerAgent, best_single_region_plan

import sfenv  # noqa: F401  (registers the env ids)
from sfenv.app.evaluate import evaluate_agents, format_table, summarise
from sfenv.model.perf import Plan
from sfenv.sim import SimView
from sfenv.world.workload import JobSpec


class SmallJobsCheapRegion(SchedulerAgent):
    """Smallest job (parameters x iterations) first, in the region with the lowest price now that holds it."""

    name = "small-cheap"

    def order(self, view: SimView) -> list[JobSpec]:
        """Waiting jobs by their size, smallest first (arrival order breaks ties)."""
        return sorted(view.waiting, key=lambda job: (job.model.params * job.iterations, job.arrival))

    def propose(self, view: SimView, job: JobSpec, k: int = 1) -> list[Plan]:
        """The best single-region plans for ``job`` in the cheapest regions that hold it now."""
        prices = view.prices_now()
        regions = sorted(range(len(view.free_gpus)), key=lambda r: float(prices[r]))
        plans = []
        for region in regions:
            found = best_single_region_plan(view, job, region)
            if found is not None:
                plans.append(found[0])
            if len(plans) == k:
                break
        return plans


def main() -> None:
    """Evaluate the new agent next to FIFO and SpinSearch, then play one episode through the env."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", default=os.environ.get("SFENV_EXAMPLES_SMOKE") == "1",
                        help="1 seed, 8 jobs")
    args = parser.parse_args()
    seeds, num_jobs = (range(1), 8) if args.smoke else (range(5), None)

    rows = evaluate_agents(["fifo", "spinsearch", SmallJobsCheapRegion()], "spider-8", seeds=seeds,
                           num_jobs=num_jobs, progress=True)
    print(format_table(summarise(rows)))

    env = gym.make("sfenv/GeoSched-v6", num_jobs=num_jobs or 40)
    agent = SmallJobsCheapRegion().bind(env)  # predict() reads the bound env's simulator
    obs, info = env.reset(seed=0)
    agent.reset(seed=0)
    done = False
    while not done:
        action, _ = agent.predict(obs)
        obs, reward, terminated, truncated, info = env.step(int(action))
        done = terminated or truncated
    print("through the env:", round(info["episode_report"]["mean_jct_s"] / 3600, 2), "h mean JCT")


if __name__ == "__main__":
    main()
