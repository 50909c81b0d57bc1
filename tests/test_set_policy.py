"""The candidate-set policy (sfenv.agents.set_policy): shared scoring, masking, training and loading."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sb3_contrib")
import torch as th
from sb3_contrib import MaskablePPO
from sfenv.agents.learned import LearnedPolicy, check_hp, policy_class, train
from sfenv.agents.set_policy import CandidateSetExtractor, CandidateSetPolicy

from sfenv.env import COMPACT_CAND_FEATURES, GeoSchedEnv
from sfenv.errors import InvalidInput


def _env(**kw) -> GeoSchedEnv:
    return GeoSchedEnv(scenario="spider-8-contended", obs_mode="compact", num_jobs=8, **kw)


def _observations(env: GeoSchedEnv, steps: int = 40, seed: int = 3) -> list[dict[str, np.ndarray]]:
    """Observations of a seeded masked random walk with at least two valid candidates."""
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    out = []
    for _ in range(steps):
        mask = env.action_masks()
        if mask[:-1].sum() >= 2:
            out.append(obs)
        obs, _, term, trunc, _ = env.step(int(rng.choice(np.flatnonzero(mask))))
        if term or trunc:
            obs, _ = env.reset(seed=seed + 1)
    assert len(out) >= 3
    return out


def _batch(obs: dict[str, np.ndarray]) -> dict[str, th.Tensor]:
    return {k: th.as_tensor(np.asarray(v, dtype=np.float32))[None] for k, v in obs.items()}


def test_permuting_candidate_slots_permutes_their_scores():
    env = _env()
    th.manual_seed(0)
    extractor = CandidateSetExtractor(env.observation_space, env.N).eval()
    for obs in _observations(env):
        cands = obs["candidates"].reshape(env.N, COMPACT_CAND_FEATURES)
        valid = np.flatnonzero(cands[:, 0] > 0.5)
        perm = np.arange(env.N)
        perm[valid] = valid[::-1]  # reverse the valid slots among themselves
        moved = dict(obs, candidates=cands[perm].reshape(-1))
        with th.no_grad():
            before, after = extractor(_batch(obs))[0], extractor(_batch(moved))[0]
        np.testing.assert_allclose(after[: env.N][valid].numpy(), before[: env.N][perm[valid]].numpy(),
                                   rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(after[env.N:].numpy(), before[env.N:].numpy(), rtol=1e-5, atol=1e-5)  # wait, value


def test_invalid_slots_do_not_change_the_valid_slots_scores():
    env = _env()
    th.manual_seed(1)
    extractor = CandidateSetExtractor(env.observation_space, env.N).eval()
    checked = 0
    for obs in _observations(env):
        cands = obs["candidates"].reshape(env.N, COMPACT_CAND_FEATURES).copy()
        invalid = cands[:, 0] <= 0.5
        if not invalid.any():
            continue
        noisy = cands.copy()
        shape = (int(invalid.sum()), COMPACT_CAND_FEATURES - 1)
        noisy[invalid, 1:] = np.random.default_rng(checked).uniform(0, 1, size=shape)
        with th.no_grad():
            a = extractor(_batch(obs))[0].numpy()
            b = extractor(_batch(dict(obs, candidates=noisy.reshape(-1))))[0].numpy()
        np.testing.assert_allclose(b[: env.N][~invalid], a[: env.N][~invalid], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(b[env.N:], a[env.N:], rtol=1e-5, atol=1e-5)
        checked += 1
    assert checked >= 1


def test_the_logits_are_the_scores_and_masking_applies():
    env = _env()
    model = MaskablePPO(CandidateSetPolicy, env, n_steps=32, batch_size=16, seed=0, device="cpu")
    obs = _observations(env)[0]
    mask = env.action_masks()
    batch = _batch(obs)
    with th.no_grad():
        features = model.policy.extract_features(batch)
        dist = model.policy.get_distribution(batch, action_masks=mask[None])
    logits = features[0, : env.N + 1]
    expected = th.softmax(logits.masked_fill(~th.as_tensor(mask), float("-inf")), dim=0)
    np.testing.assert_allclose(dist.distribution.probs[0].numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)


def test_trains_saves_and_loads_with_the_same_actions(tmp_path):
    env = _env()
    model = MaskablePPO(CandidateSetPolicy, env, n_steps=64, batch_size=32, seed=0, device="cpu",
                        policy_kwargs={"embed_dim": 32, "heads": 2, "value_arch": [32]})
    model.learn(128)
    model.save(tmp_path / "m.zip")
    loaded = MaskablePPO.load(tmp_path / "m.zip", device="cpu")
    assert isinstance(loaded.policy, CandidateSetPolicy)
    for obs in _observations(env, steps=30):
        mask = np.ones(env.N + 1, dtype=bool)
        assert loaded.predict(obs, action_masks=mask, deterministic=True)[0] == model.predict(
            obs, action_masks=mask, deterministic=True)[0]


def test_sfenv_train_with_the_candidate_set_policy(tmp_path):
    path = train("maskable-ppo", "spider-8-contended", 128, n_envs=2, out_dir=tmp_path, tensorboard=False, plot=False,
                 normalize="reward", env_kwargs={"obs_mode": "compact", "num_jobs": 5},
                 algo_kwargs={"n_steps": 32, "batch_size": 64, "policy_kwargs": {"embed_dim": 16, "heads": 2}},
                 eval_every=0, eval_seeds=[10000], policy="candidate-set")
    policy = LearnedPolicy(path)
    assert isinstance(policy.model.policy, CandidateSetPolicy)
    assert policy.meta["policy"] == "candidate-set"
    assert "policy: candidate-set" in (path.parent / "config.yml").read_text()


def test_bad_settings_are_clear_errors():
    with pytest.raises(ValueError, match="obs_mode='compact'"):
        CandidateSetExtractor(GeoSchedEnv(scenario="spider-8", num_jobs=4).observation_space, 16)
    with pytest.raises(InvalidInput, match="needs algo maskable-ppo"):
        policy_class("ppo", "candidate-set")
    with pytest.raises(InvalidInput, match="policy 'sets'"):
        policy_class("maskable-ppo", "sets")
    with pytest.raises(InvalidInput, match="policy_kwargs.net_arch"):
        check_hp("maskable-ppo", {"policy_kwargs": {"net_arch": [64]}}, "candidate-set")
    check_hp("maskable-ppo", {"policy_kwargs": {"embed_dim": 32, "ortho_init": False}}, "candidate-set")


def test_train_refuses_the_candidate_set_policy_without_the_compact_observation(tmp_path):
    with pytest.raises(InvalidInput, match="obs_mode 'compact'"):
        train("maskable-ppo", "spider-8", 64, out_dir=tmp_path, policy="candidate-set", plot=False, tensorboard=False)
    assert not any(tmp_path.iterdir())  # nothing written
