"""Whose decisions a deferring learned policy starts: each start against the heuristics' recorded decisions.

A recipe with ``play_defer`` (:mod:`sfenv.agents.deferral`) picks, on each step, an action of the env's
menu; the heuristics it may defer to each recorded a decision on that menu
(:meth:`sfenv.env.GeoSchedEnv.decision_action`).  This script plays the model as
:func:`sfenv.app.evaluate.run_policy_episode` does (its recipe's play mode, play settings and
deferral) and counts, per start, which of those heuristics' decisions it coincides with: the
``reference`` heuristic's, only others' (named), none of them, or one where the reference offered no
decision on the menu.  It describes a policy; it chooses nothing and changes nothing.

Run: ``python -m sfenv.experiments.decision_agreement --model M --scenario S [--split validation]
[--seeds 3] [--reference spantrain+swf]``.  docs/training.md (issue 34, "A larger held-out set") gives
the figures it printed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
from sfenv.agents.learned import LearnedPolicy

from sfenv.app.evaluate import run_policy_episode
from sfenv.app.script import ScriptParser
from sfenv.errors import InvalidInput
from sfenv.runs import protocol
from sfenv.scenario import load_scenario

__all__ = ["AgreementCounter", "count_agreement", "main"]


class AgreementCounter(LearnedPolicy):
    """A deferring :class:`LearnedPolicy` that counts, per start, whose recorded decisions it played.

    :param reference: the heuristic each start is first compared with; it must be one the recipe's
        ``play_defer.to`` names (their decisions are what the env gives the policy).
    """

    def __init__(self, path: Any, reference: str = "spantrain+swf", **kwargs: Any) -> None:
        super().__init__(path, **kwargs)
        if self.play_defer is None:
            raise InvalidInput(f"{self.name}: its recipe has no play_defer, so no heuristic decision is asked for")
        if reference not in self.play_defer.to:
            raise InvalidInput(f"reference: {reference!r} is not one of the recipe's play_defer.to "
                               f"{list(self.play_defer.to)}")
        self.reference = reference
        self.counts: Counter[str] = Counter()

    def choose(self, observation: Any, action_masks: np.ndarray | None,
               baseline: int | Sequence[int | None] | None) -> tuple[int, bool]:
        """:meth:`LearnedPolicy.choose`, counting what the chosen action coincides with."""
        index, took_heuristic = super().choose(observation, action_masks, baseline)
        assert self.play_defer is not None and isinstance(baseline, Sequence)  # as run_policy_episode passes them
        self.counts["deferred"] += took_heuristic
        offered = {name: action for name, action in zip(self.play_defer.to, baseline, strict=True)
                   if action is not None and (action_masks is None or bool(np.asarray(action_masks)[action]))}
        if action_masks is not None and index == len(action_masks) - 1:
            self.counts["waits"] += 1
            return index, took_heuristic
        self.counts["starts"] += 1
        if self.reference not in offered:
            self.counts[f"{self.reference} offered none"] += 1
        elif offered[self.reference] == index:
            self.counts[f"= {self.reference}"] += 1
        else:
            same = sorted(name for name, action in offered.items() if action == index)
            self.counts["= " + ("|".join(same) if same else "no heuristic's")] += 1
        return index, took_heuristic


def count_agreement(model: str, scenario: str, seeds: Sequence[int], reference: str = "spantrain+swf",
                    num_jobs: int | None = None) -> dict[str, int]:
    """The counts of :class:`AgreementCounter` over the episodes of ``seeds``, played as the recipe says."""
    policy = AgreementCounter(model, reference=reference)
    sc = load_scenario(scenario)
    if num_jobs is not None:
        sc = sc.with_overrides(workload={"num_jobs": num_jobs})
    for seed in seeds:
        run_policy_episode(policy, sc, seed)
    return dict(sorted(policy.counts.items()))


def main(argv: Sequence[str] | None = None) -> None:
    """Print the counts over the split's first seeds."""
    ap = ScriptParser(script=__file__, description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="a saved model whose recipe has play_defer")
    ap.add_argument("--scenario", required=True, help="a bundled name or a scenario file")
    ap.add_argument("--reference", default="spantrain+swf", help="the heuristic each start is first compared with")
    protocol.add_seed_arguments(ap, default_n=3, default_split="validation")
    args = ap.parse_args(argv)
    choice = protocol.seed_choice_from_args(args, default_split="validation", parser=ap)
    counts = count_agreement(args.model, args.scenario, choice.seeds, reference=args.reference)
    print(f"{args.scenario}, {choice.describe()}: " + ", ".join(f"{key} {value}" for key, value in counts.items()))


if __name__ == "__main__":
    from sfenv.app.script import run_script

    raise SystemExit(run_script(main))
