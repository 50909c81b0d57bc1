"""A custom scenario from YAML text (or a dict): validated, then played with two agents and in the env.

Run: ``python examples/custom_scenario.py`` or ``--smoke`` (or ``SFENV_EXAMPLES_SMOKE=1``; fewer jobs).
A mistake in the file (try ``bandwidth_gbps: -1``) raises :class:`sfenv.scenario.ScenarioError`
naming the field, the value and what was expected.
"""

from __future__ import annotations

import argparse
import os

import gymnasium as gym
import numpy as np
import yaml

import sfenv  # noqa: F401  (registers the env ids)
from sfenv.app.evaluate import evaluate_agents, format_table, summarise
from sfenv.scenario import ScenarioError, load_scenario

SCENARIO = """
name: three-regions
description: two cloud regions and a small one, a slow transatlantic link
topology:
  regions:
    - {name: us-east, gpu: A100-80GB, gpus: 32, zone: us, utc_offset_h: -5}
    - {name: eu-west, gpu: H100-SXM, gpus: 16, zone: eu, utc_offset_h: 1}
    - {name: eu-small, gpu: A100-80GB, gpus: 8, zone: eu, utc_offset_h: 1}
  links:
    - {a: us-east, b: eu-west, bandwidth_gbps: 10, latency_ms: 40}
    - {a: eu-west, b: eu-small, bandwidth_gbps: 40, latency_ms: 5}
prices:
  kind: time_of_use
  zones: {us: {base: 30, peak: 70, utc_offset_h: -5}, eu: {base: 60, peak: 140, utc_offset_h: 1}}
workload:
  num_jobs: 12
  arrival: {process: poisson, rate_per_hour: 3}
  models: [{name: gpt-1.3b, weight: 3}, {name: gpt-13b, weight: 1}]
  global_batch: [256]
  iterations: [200, 2000]
  min_gpus: 4
  max_gpus: 32
"""


def main() -> None:
    """Load and validate the scenario, show a rejected variant, evaluate two agents, play one env episode."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", default=os.environ.get("SFENV_EXAMPLES_SMOKE") == "1",
                        help="6 jobs, 2 seeds")
    args = parser.parse_args()

    spec = yaml.safe_load(SCENARIO)  # a dict: load_scenario also takes the path of a YAML file
    if args.smoke:
        spec["workload"]["num_jobs"] = 6
    scenario = load_scenario(spec)
    print(f"{scenario.name}: {len(scenario.topology.regions)} regions, {scenario.cfg.workload.num_jobs} jobs")

    broken = yaml.safe_load(SCENARIO)
    broken["topology"]["links"][0]["bandwidth_gbps"] = -1
    try:
        load_scenario(broken)
    except ScenarioError as e:
        print("rejected as expected:", e)

    rows = evaluate_agents(["fifo", "spinsearch"], scenario, seeds=range(2 if args.smoke else 5), progress=True)
    print(format_table(summarise(rows)))

    env = gym.make("sfenv/GeoSched-v6", scenario=scenario)  # any scenario plays through the same env
    obs, info = env.reset(seed=0)
    done = False
    while not done:  # the first valid candidate, else wait
        obs, reward, terminated, truncated, info = env.step(int(np.flatnonzero(info["action_mask"])[0]))
        done = terminated or truncated
    print("env episode:", info["episode_report"]["finished"], "jobs finished")


if __name__ == "__main__":
    main()
