"""A policy that reads the candidate plans as a set: one scorer shared by every candidate slot.

The default learned policy (``MultiInputPolicy``) flattens the observation into one vector, so each
candidate slot has weights of its own and the network must learn the same judgement sixteen times;
what it learns about slot 3 on one platform says nothing about slot 9 on another.  Here, as in
Decima (Mao et al., SIGCOMM 2019), which scores each schedulable stage with one network shared
over stages, every candidate is scored by the same network from its own features and a summary of
the situation, and the candidates see each other through one self-attention layer (Transformer
encoder block, Vaswani et al. 2017), so a candidate's score can depend on what else is on offer.
Waiting gets its own score from the situation and the pooled candidates.  The scores are the
action logits directly: permuting the candidate slots permutes the action distribution, and the
number of regions does not change any input (use ``obs_mode="compact"``).

What we chose (not from a source): the sizes (``embed_dim`` 64, 4 heads, one attention block),
mean-pooling of the queue, mean- and max-pooling of the candidates for the wait score and the
value, and that invalid slots are kept out of the attention and the pools by their ``valid``
feature.  The observation must not be normalised per element (``normalize: reward`` in a recipe):
per-slot statistics would break the sharing, and the compact features are already scaled to about
``[0, 1]``.

Use it with ``sfenv train`` by ``policy: candidate-set`` in a recipe (MaskablePPO only), or in SB3
directly: ``MaskablePPO(CandidateSetPolicy, env)`` on a compact-observation :class:`~sfenv.env.GeoSchedEnv`.
Importing this module imports torch and SB3.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch as th
from gymnasium import spaces
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from torch import nn

from sfenv.env import COMPACT_CAND_FEATURES, JOB_FEATURES

__all__ = ["CandidateSetExtractor", "CandidateSetPolicy"]


def _mlp(sizes: list[int]) -> nn.Sequential:
    """Linear layers with ReLU between them (none after the last)."""
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def _masked_mean(x: th.Tensor, valid: th.Tensor) -> th.Tensor:
    """Mean of ``x`` (B, S, D) over the slots where ``valid`` (B, S) holds; zeros where none does."""
    w = valid.to(x.dtype).unsqueeze(-1)
    return (x * w).sum(dim=1) / w.sum(dim=1).clamp(min=1.0)


def _masked_max(x: th.Tensor, valid: th.Tensor) -> th.Tensor:
    """Max of ``x`` (B, S, D) over valid slots; zeros where no slot is valid."""
    filled = x.masked_fill(~valid.unsqueeze(-1), float("-inf")).amax(dim=1)
    return th.where(valid.any(dim=1, keepdim=True), filled, th.zeros_like(filled))


def _field_size(observation_space: spaces.Dict, key: str) -> int:
    """The length of the field ``key`` of ``observation_space``, a Box (its first dimension).

    :raises ValueError: naming the field, when it is not a Box.
    """
    field = observation_space[key]
    if not isinstance(field, spaces.Box):
        raise ValueError(f"observation_space[{key!r}]: {field}; expected a Box (obs_mode='compact')")
    return int(field.shape[0])


class CandidateSetExtractor(BaseFeaturesExtractor):
    """Features: one score per candidate slot, the wait score, then a value embedding.

    ``features[:, :N]`` are the candidates' logits, ``features[:, N]`` the wait logit and
    ``features[:, N + 1:]`` (``2 * embed_dim`` wide) the situation and the pooled candidates, for
    the value head.

    :param observation_space: the env's compact Dict space (keys ``candidates``, ``queue``,
        ``platform``, ``time``).
    :param num_candidates: ``N``, the env's candidate slots (the action space has ``N + 1`` actions).
    :param embed_dim: width of every embedding.
    :param heads: attention heads (must divide ``embed_dim``).
    :raises ValueError: naming the field, for an observation space this extractor cannot read.
    """

    def __init__(self, observation_space: spaces.Dict, num_candidates: int, embed_dim: int = 64, heads: int = 4):
        missing = {"candidates", "queue", "platform", "time"} - set(observation_space.spaces)
        if missing:
            raise ValueError(f"observation_space: no {sorted(missing)}; the candidate-set policy needs "
                             "obs_mode='compact'")
        cand_size = _field_size(observation_space, "candidates")
        if cand_size != num_candidates * COMPACT_CAND_FEATURES:
            raise ValueError(f"observation_space['candidates']: {cand_size} values for {num_candidates} slots; "
                             f"expected {COMPACT_CAND_FEATURES} per slot (obs_mode='compact')")
        if embed_dim < 1 or heads < 1 or embed_dim % heads:
            raise ValueError(f"embed_dim = {embed_dim}, heads = {heads}: expected heads dividing embed_dim")
        super().__init__(observation_space, features_dim=num_candidates + 1 + 2 * embed_dim)
        self.num_candidates = num_candidates
        self.queue_slots = _field_size(observation_space, "queue") // JOB_FEATURES
        context_in = _field_size(observation_space, "platform") + _field_size(observation_space, "time") + embed_dim
        self.queue_encoder = _mlp([JOB_FEATURES, embed_dim, embed_dim])
        self.context_encoder = _mlp([context_in, embed_dim, embed_dim])
        self.candidate_encoder = _mlp([COMPACT_CAND_FEATURES + embed_dim, embed_dim, embed_dim])
        self.attention = nn.MultiheadAttention(embed_dim, heads, batch_first=True)
        self.norm_attention = nn.LayerNorm(embed_dim)
        self.feed_forward = _mlp([embed_dim, 2 * embed_dim, embed_dim])
        self.norm_feed_forward = nn.LayerNorm(embed_dim)
        self.candidate_score = nn.Linear(embed_dim, 1)
        self.wait_score = _mlp([3 * embed_dim, embed_dim, 1])

    def forward(self, observations: dict[str, th.Tensor]) -> th.Tensor:
        """Scores of the ``N`` candidates and of waiting, then the value embedding (see the class)."""
        batch = observations["candidates"].shape[0]
        cands = observations["candidates"].reshape(batch, self.num_candidates, COMPACT_CAND_FEATURES)
        valid = cands[..., 0] > 0.5
        queue = observations["queue"].reshape(batch, self.queue_slots, JOB_FEATURES)
        queue_summary = _masked_mean(self.queue_encoder(queue), queue[..., 0] > 0.5)
        context = self.context_encoder(th.cat([observations["platform"], observations["time"], queue_summary], dim=1))
        h = th.relu(self.candidate_encoder(
            th.cat([cands, context.unsqueeze(1).expand(-1, self.num_candidates, -1)], dim=2)))
        # invalid slots are keys of no one; a row without any valid slot attends to slot 0 (its scores are masked)
        keys_out = ~valid
        keys_out[:, 0] &= valid.any(dim=1)
        attended, _ = self.attention(h, h, h, key_padding_mask=keys_out, need_weights=False)
        h = self.norm_attention(h + attended)
        h = self.norm_feed_forward(h + self.feed_forward(h))
        scores = self.candidate_score(h).squeeze(-1)
        pooled_mean, pooled_max = _masked_mean(h, valid), _masked_max(h, valid)
        wait = self.wait_score(th.cat([context, pooled_mean, pooled_max], dim=1))
        return th.cat([scores, wait, context, pooled_mean], dim=1)


class _FirstColumns(nn.Module):
    """The first ``n`` features: the extractor's logits, used as the action logits unchanged."""

    def __init__(self, n: int):
        super().__init__()
        self.n = n

    def forward(self, latent: th.Tensor) -> th.Tensor:
        """``latent[:, :n]``."""
        return latent[:, : self.n]


class CandidateSetPolicy(MaskableActorCriticPolicy):
    """MaskablePPO policy whose action logits are :class:`CandidateSetExtractor`'s per-candidate scores.

    The value head is an MLP (``value_arch``) over all the extractor's features (the scores and the
    value embedding).  Keyword
    arguments of :class:`sb3_contrib.common.maskable.policies.MaskableActorCriticPolicy` pass
    through, but ``features_extractor_class``, ``net_arch`` and ``share_features_extractor`` are set
    here.

    :param embed_dim: the extractor's embedding width.
    :param heads: the extractor's attention heads.
    :param value_arch: hidden layers of the value head.
    """

    #: keyword arguments of the base policy that this class sets itself
    FIXED_KWARGS = ("features_extractor_class", "features_extractor_kwargs", "net_arch", "share_features_extractor")

    def __init__(self, observation_space: spaces.Dict, action_space: spaces.Discrete, lr_schedule: Any,
                 embed_dim: int = 64, heads: int = 4, value_arch: list[int] | None = None, **kwargs: Any):
        for fixed in self.FIXED_KWARGS:
            if fixed in kwargs:
                raise ValueError(f"policy_kwargs.{fixed}: set by CandidateSetPolicy; use embed_dim, heads, value_arch")
        self._num_logits = int(action_space.n)
        super().__init__(
            observation_space, action_space, lr_schedule,
            net_arch={"pi": [], "vf": list(value_arch) if value_arch is not None else [64]},
            features_extractor_class=CandidateSetExtractor,
            features_extractor_kwargs={"num_candidates": self._num_logits - 1, "embed_dim": embed_dim, "heads": heads},
            share_features_extractor=True, **kwargs)

    def _build(self, lr_schedule: Any) -> None:
        super()._build(lr_schedule)
        self.action_net = _FirstColumns(self._num_logits)
        # the optimiser class (Adam by default) takes ``lr``; the base class Optimizer's signature has no such keyword
        make_optimizer: Callable[..., th.optim.Optimizer] = self.optimizer_class
        self.optimizer = make_optimizer(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)
