"""Play a learned policy that takes a heuristic's decision unless it is sure of its own (a recipe's ``play_defer``).

A recipe's ``play_defer: {to: NAME, margin: M}`` plays, at each decision, the action the heuristic
``NAME`` would take (its recorded decision on the env's menu, :meth:`sfenv.env.GeoSchedEnv.decision_action`)
unless the policy's own greedy action has a log-probability more than ``M`` nats above that
action's.  Where the heuristic's decision is not on the menu (it would wait, or a floor left it
out), the policy chooses alone.  ``M = 0`` keeps the policy's choice except on exact ties; a large
``M`` follows the heuristic wherever it can.

What follows a source and what is ours: keeping a baseline's action where the evidence for a change
is weak is the idea of safe policy improvement with baseline bootstrapping (Laroche, Trichelair
and Tachet des Combes, "Safe Policy Improvement with Baseline Bootstrapping", ICML 2019), which
measures that evidence by state-action counts in the data.  Measuring it by the policy's own
log-probability margin, and the heuristic chosen as the baseline, are this project's choices
(issue 34, round E in docs/training.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from sfenv.errors import InvalidInput

__all__ = ["MAX_MARGIN", "Deferral", "check_play_defer", "deferred_action"]

#: the largest margin a recipe may give, in nats (a probability ratio of about e^50: "always defer")
MAX_MARGIN = 50.0


@dataclass(frozen=True)
class Deferral:
    """A recipe's ``play_defer``: the heuristic deferred to and the margin the policy must beat it by.

    :param to: the name of a recorded decision among the env's proposers (``"spantrain+swf"``).
    :param margin: nats: the policy's greedy action is played only if its log-probability exceeds
        the heuristic's action's by more than this.
    """

    to: str
    margin: float

    def record(self) -> dict[str, Any]:
        """The setting as plain data (a model's ``meta["play_defer"]``, a recipe's ``play_defer``)."""
        return {"to": self.to, "margin": self.margin}


def check_play_defer(value: Any, where: str) -> Deferral | None:
    """A recipe's or a model's ``play_defer`` (None or ``{to: NAME, margin: M}``) as a :class:`Deferral`.

    :raises InvalidInput: naming ``where`` and the field, for anything else.
    """
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) != {"to", "margin"}:
        raise InvalidInput(f"{where}: play_defer: expected {{to: NAME, margin: NATS}} (e.g. {{to: spantrain+swf, "
                           f"margin: 1.0}}) or null, got {str(value)[:100]}")
    to, margin = value["to"], value["margin"]
    if not isinstance(to, str) or not 0 < len(to) <= 64:
        raise InvalidInput(f"{where}: play_defer.to: expected the name of a recorded decision (e.g. spantrain+swf), "
                           f"got {str(to)[:100]}")
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not math.isfinite(margin) \
            or not 0.0 <= margin <= MAX_MARGIN:
        raise InvalidInput(f"{where}: play_defer.margin: expected a number of nats from 0 to {MAX_MARGIN:g}, "
                           f"got {str(margin)[:100]}")
    return Deferral(to, float(margin))


def _log_probs(policy: Any, observation: Any, action_masks: np.ndarray | None) -> np.ndarray:
    """The policy's log-probability of each action (masked ones about -1e8), as SB3's greedy predict sees them.

    :param policy: an SB3 actor-critic policy (MaskablePPO's with ``action_masks``, or PPO's, A2C's).
    """
    import torch

    policy.set_training_mode(False)
    obs, _ = policy.obs_to_tensor(observation)
    with torch.no_grad():
        if action_masks is not None:
            dist = policy.get_distribution(obs, action_masks=action_masks)
        else:
            dist = policy.get_distribution(obs)
        logits = dist.distribution.logits
    return np.asarray(logits.cpu().numpy(), dtype=np.float64).reshape(-1)


def deferred_action(policy: Any, observation: Any, action_masks: np.ndarray | None, baseline: int | None,
                    margin: float) -> tuple[int, bool]:
    """The action to play under deferral, and whether the heuristic's action replaced the policy's.

    :param policy: the SB3 policy network (``model.policy``) whose greedy action is the policy's choice.
    :param observation: one observation, already normalised as the policy was trained (VecNormalize).
    :param action_masks: the env's action mask (None for an unmasked policy).
    :param baseline: the heuristic's action (:meth:`sfenv.env.GeoSchedEnv.decision_action`); None: the
        policy chooses alone.
    :param margin: nats the policy's greedy action must beat the heuristic's by.
    :raises InvalidInput: for a policy that has no action distribution (DQN's Q-network).
    """
    if not hasattr(policy, "get_distribution"):
        raise InvalidInput(f"play_defer needs a policy with action probabilities (maskable-ppo, ppo, a2c); "
                           f"{type(policy).__name__} has none")
    log_probs = _log_probs(policy, observation, action_masks)
    greedy = int(np.argmax(log_probs))
    if baseline is None or baseline == greedy or not 0 <= baseline < log_probs.size:
        return greedy, False
    if action_masks is not None and not bool(np.asarray(action_masks).reshape(-1)[baseline]):
        return greedy, False
    if log_probs[greedy] - log_probs[baseline] > margin:
        return greedy, False
    return baseline, True
