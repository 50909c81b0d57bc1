"""Play a learned policy that takes a heuristic's decision unless it is sure of its own (a recipe's ``play_defer``).

A recipe's ``play_defer: {to: NAME, margin: M}`` plays, at each decision, the action the heuristic
``NAME`` would take (its recorded decision on the env's menu, :meth:`sfenv.env.GeoSchedEnv.decision_action`)
unless the policy's own greedy action has a log-probability more than ``M`` nats above that
action's.  Where the heuristic's decision is not on the menu (it would wait, or a floor left it
out), the policy chooses alone.  ``M = 0`` keeps the policy's choice except on exact ties; a large
``M`` follows the heuristic wherever it can.  ``to`` may also list several heuristics
(``[fastest+swf, spantrain+swf]``): the action deferred to is then the one of their decisions on the
menu that the policy ranks highest.  ``margin`` may then be a mapping from each of those names to
its own margin (``{spantrain+swf: 4, fastest+swf: 2}``): the action played is the one with the
largest log-probability plus the margin of the heuristic that recorded it (the largest, if several
did; none for an action no heuristic recorded), which with one margin for all is the rule above.

What follows a source and what is ours: keeping a baseline's action where the evidence for a change
is weak is the idea of safe policy improvement with baseline bootstrapping (Laroche, Trichelair
and Tachet des Combes, "Safe Policy Improvement with Baseline Bootstrapping", ICML 2019), which
measures that evidence by state-action counts in the data.  Measuring it by the policy's own
log-probability margin, and the heuristic chosen as the baseline, are this project's choices
(issue 34, round E in docs/training.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sfenv.errors import InvalidInput

__all__ = ["MAX_MARGIN", "Deferral", "check_play_defer", "deferred_action", "deferred_choice", "heuristic_actions",
           "policy_log_probs"]

#: the largest margin a recipe may give, in nats (a probability ratio of about e^50: "always defer")
MAX_MARGIN = 50.0


@dataclass(frozen=True)
class Deferral:
    """A recipe's ``play_defer``: the heuristic deferred to and the margin the policy must beat it by.

    :param to: the names of recorded decisions among the env's proposers (``("spantrain+swf",)``).
    :param margin: nats: the policy's greedy action is played only if its log-probability exceeds
        the heuristic's action's by more than this; or one margin per name of ``to``, in its order.
    """

    to: tuple[str, ...]
    margin: float | tuple[float, ...]

    def margins(self) -> tuple[float, ...]:
        """The margin of each heuristic of :attr:`to`, in its order."""
        return self.margin if isinstance(self.margin, tuple) else (self.margin,) * len(self.to)

    def record(self) -> dict[str, Any]:
        """The setting as plain data (``meta["play_defer"]``, a recipe's ``play_defer``); one name as a string."""
        margin = dict(zip(self.to, self.margin, strict=True)) if isinstance(self.margin, tuple) else self.margin
        return {"to": self.to[0] if len(self.to) == 1 else list(self.to), "margin": margin}

    def row_margin(self) -> float | str:
        """The margin as a result row holds it (``defer_margin``): one number, or each name's as ``NAME:M,...``."""
        if isinstance(self.margin, tuple):
            return ",".join(f"{name}:{m:g}" for name, m in zip(self.to, self.margin, strict=True))
        return self.margin

    def describe(self) -> str:
        """How a progress or summary line says it: ``deferring to spantrain+swf unless 1 nats surer``."""
        names = self.to[0] if len(self.to) == 1 else "the highest-ranked of " + ", ".join(self.to)
        if isinstance(self.margin, tuple):
            each = ", ".join(f"{name} {m:g}" for name, m in zip(self.to, self.margin, strict=True))
            return f"deferring to {names} unless surer by each one's margin in nats ({each})"
        return f"deferring to {names} unless {self.margin:g} nats surer"


def _check_margin(margin: Any, where: str) -> float:
    """One margin in nats, checked."""
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not math.isfinite(margin) \
            or not 0.0 <= margin <= MAX_MARGIN:
        raise InvalidInput(f"{where}: expected a number of nats from 0 to {MAX_MARGIN:g}, got {str(margin)[:100]}")
    return float(margin)


def check_play_defer(value: Any, where: str) -> Deferral | None:
    """A recipe's or a model's ``play_defer`` (None or ``{to: NAME or [NAME, ...], margin: M}``) as a :class:`Deferral`.

    ``margin`` may be a mapping from every name of ``to`` to its margin.

    :raises InvalidInput: naming ``where`` and the field, for anything else.
    """
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) != {"to", "margin"}:
        raise InvalidInput(f"{where}: play_defer: expected {{to: NAME, margin: NATS}} (e.g. {{to: spantrain+swf, "
                           f"margin: 1.0}}) or null, got {str(value)[:100]}")
    to, margin = value["to"], value["margin"]
    names = [to] if isinstance(to, str) else to
    if not isinstance(names, list) or not 0 < len(names) <= 16 or len(set(map(str, names))) < len(names) \
            or not all(isinstance(name, str) and 0 < len(name) <= 64 for name in names):
        raise InvalidInput(f"{where}: play_defer.to: expected the name of a recorded decision (e.g. spantrain+swf) "
                           f"or a list of up to 16 different ones, got {str(to)[:100]}")
    if not isinstance(margin, dict):
        return Deferral(tuple(names), _check_margin(margin, f"{where}: play_defer.margin"))
    if set(margin) != set(names):
        raise InvalidInput(f"{where}: play_defer.margin: a mapping must give a margin to each name of play_defer.to "
                           f"{names} and no other, got {str(margin)[:100]}")
    return Deferral(tuple(names), tuple(_check_margin(margin[name], f"{where}: play_defer.margin.{name}")
                                        for name in names))


def heuristic_actions(env: Any, deferral: Deferral) -> list[int | None]:
    """The actions of the deferral's heuristics on ``env``'s menu now (:meth:`sfenv.env.GeoSchedEnv.decision_action`).

    :param env: a GeoSchedEnv, possibly wrapped.
    :raises InvalidInput: for a name that is not a recorded decision of the env.
    """
    base = env.unwrapped
    return [base.decision_action(name) for name in deferral.to]


def policy_log_probs(policy: Any, observation: Any, action_masks: np.ndarray | None) -> np.ndarray:
    """The policy's log-probability of each action (masked ones about -1e8), as SB3's greedy predict sees them.

    :param policy: an SB3 actor-critic policy (MaskablePPO's with ``action_masks``, or PPO's, A2C's).
    :param observation: one observation, already normalised as the policy was trained (VecNormalize).
    :raises InvalidInput: for a policy that has no action distribution (DQN's Q-network).
    """
    import torch

    if not hasattr(policy, "get_distribution"):
        raise InvalidInput(f"play_defer needs a policy with action probabilities (maskable-ppo, ppo, a2c); "
                           f"{type(policy).__name__} has none")
    policy.set_training_mode(False)
    obs, _ = policy.obs_to_tensor(observation)
    with torch.no_grad():
        if action_masks is not None:
            dist = policy.get_distribution(obs, action_masks=action_masks)
        else:
            dist = policy.get_distribution(obs)
        logits = dist.distribution.logits
    return np.asarray(logits.cpu().numpy(), dtype=np.float64).reshape(-1)


def deferred_action(policy: Any, observation: Any, action_masks: np.ndarray | None,
                    baseline: int | Sequence[int | None] | None,
                    margin: float | Sequence[float]) -> tuple[int, bool]:
    """The action to play under deferral, and whether a heuristic's action replaced the policy's.

    :param policy: the SB3 policy network (``model.policy``) whose greedy action is the policy's choice.
    :param observation: one observation, already normalised as the policy was trained (VecNormalize).
    :param action_masks: the env's action mask (None for an unmasked policy).
    :param baseline: the heuristic's action (:meth:`sfenv.env.GeoSchedEnv.decision_action`), or several
        heuristics' (the one the policy ranks highest, margin added, is deferred to); None: the policy
        chooses alone.
    :param margin: nats the policy's greedy action must beat the heuristic's by; or one margin per
        action of ``baseline``, in its order.
    :raises InvalidInput: for a policy that has no action distribution (DQN's Q-network), or margins
        that do not match the heuristics' actions one to one.
    """
    return deferred_choice(policy_log_probs(policy, observation, action_masks), action_masks, baseline, margin)


def deferred_choice(log_probs: np.ndarray, action_masks: np.ndarray | None,
                    baseline: int | Sequence[int | None] | None,
                    margin: float | Sequence[float]) -> tuple[int, bool]:
    """:func:`deferred_action` on given log-probabilities.

    E.g. an ensemble's (:meth:`sfenv.agents.learned.LearnedPolicy.log_probs`).

    :param log_probs: the policy's log-probability of each action (masked ones very low).
    :raises InvalidInput: for margins that do not match the heuristics' actions one to one.
    """
    baselines = [baseline] if baseline is None or isinstance(baseline, (int, np.integer)) else list(baseline)
    margins = [float(margin)] * len(baselines) if isinstance(margin, (int, float)) else [float(m) for m in margin]
    if len(margins) != len(baselines):
        raise InvalidInput(f"play_defer: {len(margins)} margins for {len(baselines)} heuristic actions")
    greedy = int(np.argmax(log_probs))
    mask = None if action_masks is None else np.asarray(action_masks).reshape(-1)
    bonus: dict[int, float] = {}  # each offered action: the largest margin of a heuristic that recorded it
    for b, m in zip(baselines, margins, strict=True):
        if b is not None and 0 <= b < log_probs.size and (mask is None or bool(mask[b])):
            bonus[int(b)] = max(bonus.get(int(b), -math.inf), m)
    if not bonus:
        return greedy, False
    chosen = max(bonus, key=lambda b: (log_probs[b] + bonus[b], -b))  # the highest-ranked; the first slot on a tie
    if chosen == greedy or log_probs[greedy] - log_probs[chosen] > bonus[chosen]:
        return greedy, False
    return chosen, True
