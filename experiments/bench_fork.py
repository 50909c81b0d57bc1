"""Look-ahead benchmark: what a simulator's fork costs, against a plain ``copy.deepcopy``, in the same run.

The rollout teachers and oracles (``lookahead:...``, :func:`sfenv.agents.imitation.lookahead_action`)
fork the simulator once per scored action and play the fork on; the recipes' labelling time is
mostly theirs.  This script plays ``--steps`` decisions of a scenario with the state-only teacher
(``lookahead:spantrain+swf:present:proposed`` on the recipes' candidates) and, at each state the
teacher forks, times :meth:`sfenv.sim.Simulator.fork` and the reference: ``copy.deepcopy`` of the
whole simulator with only the immutable parts shared (what ``fork`` did before its job states and
event queue were copied field by field).  It prints both means, their ratio, the teacher's time
per label, and checks on the first states that both copies play the same future (equal reports).

Run: ``python -m sfenv.experiments.bench_fork [--scenario spider-8-contended] [--steps 200] [--seed 10000]``.
Measured 2026-11-28 on the 2-core machine, 200 steps: 0.59 ms per fork against 2.64-3.00 ms for the
reference; with the rollouts' reports left out (``Simulator.play``) too, the teacher's label takes
4.0 ms (docs/benchmarks.md, "Look-ahead rollouts").
"""

from __future__ import annotations

import copy
import time
from typing import Any

from sfenv.app.script import ScriptParser

__all__ = ["deepcopy_fork", "main", "measure"]

#: the recipes' teacher and candidate set (sfenv/hyperparams/train-generalise-rollout.yml)
TEACHER = "lookahead:spantrain+swf:present:proposed"
PROPOSERS = "best+spantrain"


def deepcopy_fork(sim: Any) -> Any:
    """The reference: ``copy.deepcopy`` of ``sim`` with only its immutable parts shared (as ``fork`` shares them)."""
    links = sim.links
    memo: dict[int, object] = {id(sim.topo): sim.topo, id(sim.prices): sim.prices, id(sim.config): sim.config,
                               id(sim.params): sim.params, id(links.memo_local): links.memo_local,
                               id(links.memo_wan): {}, id(links.memo_routes): {}, id(sim.replanner): sim.replanner,
                               id(sim.billing.egress_memo): sim.billing.egress_memo}
    for shared in (sim.billing.egress_usd_per_byte, sim.carbon, sim.carbon_forecaster):
        if shared is not None:
            memo[id(shared)] = shared
    for js in sim.jobs:
        memo[id(js.spec)] = js.spec
        for obj in (js.plan, js.perf, js.resume_perf):
            if obj is not None:
                memo[id(obj)] = obj
    twin = copy.deepcopy(sim, memo)
    twin.links.memo_wan_state = b""
    twin.gpus.forget()
    return twin


def measure(scenario: str = "spider-8-contended", steps: int = 200, seed: int = 10000,
            checked_states: int = 3) -> dict[str, float]:
    """Play ``steps`` teacher decisions, timing both forks at each state; see the module's docstring.

    :return: ``fork_ms`` and ``deepcopy_ms`` (means per fork), ``ratio`` (deepcopy over fork),
        ``label_ms`` (the teacher's mean time per label with ``fork``), ``states`` and ``checked``
        (states on which both copies played the same future).
    :raises AssertionError: if the two copies of a checked state play different futures.
    """
    from sfenv.agents.imitation import expert_action
    from sfenv.agents.registry import make_agent

    from sfenv.env import GeoSchedEnv
    from sfenv.scenario import load_scenario

    env = GeoSchedEnv(load_scenario(scenario), obs_mode="compact", proposers=PROPOSERS)
    env.reset(seed=seed)
    agent = make_agent("spantrain+swf")
    fork_s = deep_s = label_s = 0.0
    checked = states = 0
    for step in range(steps):
        sim = env.sim
        assert sim is not None  # after reset
        start = time.perf_counter()
        sim.fork()
        fork_s += time.perf_counter() - start
        start = time.perf_counter()
        reference = deepcopy_fork(sim)
        deep_s += time.perf_counter() - start
        states += 1
        if checked < checked_states and sim.running:
            ahead = sim.fork().run(agent.decide).to_dict()
            assert reference.run(agent.decide).to_dict() == ahead, f"step {step}: the copies played different futures"
            checked += 1
        start = time.perf_counter()
        action = expert_action(env, TEACHER)
        label_s += time.perf_counter() - start
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            env.reset(seed=seed + step + 1)
    return {"fork_ms": 1000 * fork_s / states, "deepcopy_ms": 1000 * deep_s / states,
            "ratio": deep_s / fork_s, "label_ms": 1000 * label_s / steps, "states": states, "checked": checked}


def main(argv: list[str] | None = None) -> dict[str, float]:
    """Print the fork's cost against the deepcopy reference; returns :func:`measure`'s figures."""
    from sfenv.app.cli import non_negative_int

    p = ScriptParser(script=__file__, description=__doc__.split("\n")[0])
    p.add_argument("--scenario", default="spider-8-contended", help="scenario (default: %(default)s)")
    p.add_argument("--steps", type=int, default=200, help="teacher decisions to play (default: %(default)s)")
    p.add_argument("--seed", type=non_negative_int, default=10000, help="episode seed (default: %(default)s)")
    args = p.parse_args(argv)
    if args.steps < 1:
        p.error(f"argument --steps: expected an integer >= 1, got {args.steps}")
    row = measure(args.scenario, args.steps, args.seed)
    print(f"{args.scenario}, {row['states']} states: fork {row['fork_ms']:.3f} ms, deepcopy reference "
          f"{row['deepcopy_ms']:.3f} ms ({row['ratio']:.1f}x); the teacher {row['label_ms']:.1f} ms per label; "
          f"the same future from both copies on {row['checked']} states")
    return row


if __name__ == "__main__":
    from sfenv.app.script import run_script

    raise SystemExit(run_script(main))
