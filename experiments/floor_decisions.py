"""Which of a heuristic's spread decisions the menu's floors leave out, floor by floor.

Walks a recorded heuristic's own choices (a decision proposer of ``best+spantrain``, e.g.
``spantrain+swf``) through :class:`sfenv.env.GeoSchedEnv` played work-conserving with
``min_relative_mfu`` and ``min_spread_speedup``, with that decision exempt from both floors so it is
always on the menu and the episode is the heuristic's own.  At each decision across regions it asks
the env's floors, as the menu does, whether the decision would pass (``GeoSchedEnv._efficient``):
both floors, and the test against waiting alone (the decision exempt from the MFU floor only,
``floor_exempt_from=["min_relative_mfu"]``).

Run: ``python -m sfenv.experiments.floor_decisions [--scenario spider-8-contended] [--seeds 3]
[--heuristic spantrain+swf] [--min-relative-mfu 0.8] [--min-spread-speedup 1.0]``.  docs/training.md
(issue 34, "The exemption from one floor only") gives the figures it printed.
"""

from __future__ import annotations

from collections.abc import Sequence

from sfenv.app.script import ScriptParser
from sfenv.env import GeoSchedEnv
from sfenv.env.proposers import DecisionRecorder
from sfenv.runs import protocol
from sfenv.scenario import load_scenario

__all__ = ["count_left_out", "main"]


def count_left_out(scenario: str, seed: int, heuristic: str = "spantrain+swf", min_relative_mfu: float = 0.8,
                   min_spread_speedup: float = 1.0, num_jobs: int | None = None) -> dict[str, int]:
    """One episode of ``heuristic``'s choices: its decisions across regions, and those each floor leaves out.

    :returns: ``spread`` (decisions across regions), ``left_out`` (by the two floors together) and
        ``left_out_by_wait`` (by the test against waiting alone).
    """
    env = GeoSchedEnv(scenario, proposers="best+spantrain", max_candidates=16, queue_window=8,
                      min_relative_mfu=min_relative_mfu, min_spread_speedup=min_spread_speedup,
                      floor_exempt=[heuristic], work_conserving=True, num_jobs=num_jobs)
    recorder = next(p for p in env.proposers if isinstance(p, DecisionRecorder) and p.name == heuristic)
    env.reset(seed=seed)
    counts = {"spread": 0, "left_out": 0, "left_out_by_wait": 0}
    done = False
    while not done:
        decision = recorder.decision
        if decision is not None and decision in env.candidates:
            action = env.candidates.index(decision)
            if len(decision.regions) > 1:
                counts["spread"] += 1
                counts["left_out"] += not env._efficient(decision)
                counts["left_out_by_wait"] += not env._efficient(decision, skip=frozenset({"min_relative_mfu"}))
        else:
            action = 0 if env.candidates else env.max_candidates  # its decision waits: the first plan, or wait
        *_, terminated, truncated, _ = env.step(action)
        done = terminated or truncated
    return counts


def main(argv: Sequence[str] | None = None) -> None:
    """Print the counts per validation seed and in all."""
    ap = ScriptParser(script=__file__, description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="spider-8-contended", help="a bundled scenario or a scenario file")
    ap.add_argument("--seeds", type=int, default=3, help="the first N validation seeds")
    ap.add_argument("--heuristic", default="spantrain+swf", help="a recorded decision of best+spantrain")
    ap.add_argument("--min-relative-mfu", type=float, default=0.8)
    ap.add_argument("--min-spread-speedup", type=float, default=1.0)
    ap.add_argument("--num-jobs", type=int, default=None, help="jobs per episode (default: the scenario's)")
    args = ap.parse_args(argv)
    total = {"spread": 0, "left_out": 0, "left_out_by_wait": 0}
    seeds = protocol.seeds("validation", args.seeds)
    load_scenario(args.scenario)  # a bad scenario is refused before anything is printed
    print(f"{args.heuristic} on {args.scenario}, validation seeds {seeds}, min_relative_mfu {args.min_relative_mfu}, "
          f"min_spread_speedup {args.min_spread_speedup}")
    for seed in seeds:
        counts = count_left_out(args.scenario, seed, args.heuristic, args.min_relative_mfu, args.min_spread_speedup,
                                args.num_jobs)
        print(f"  seed {seed}: {counts}")
        for key, value in counts.items():
            total[key] += value
    print(f"decisions across regions {total['spread']}: left out by both floors {total['left_out']}, "
          f"by the test against waiting alone {total['left_out_by_wait']}")


if __name__ == "__main__":
    from sfenv.app.script import run_script

    raise SystemExit(run_script(main))
