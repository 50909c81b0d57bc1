"""No change moves an episode unless the environment's version moves: every registered id, bit for bit.

``tests/data/episode_identity.json`` was written by ``python tests/episode_identity.py`` at the
commit before the layering move (issue 29), again at the env v3 bump (issue 31), when the records
of the ``-v2`` ids were kept, at the env v4 bump, when the records of the ``-v3`` and ``-v2`` ids
were kept, at the env v5 bump, when the records of the ``-v4`` ids were kept (the labels that
moved to ``-v5`` kept theirs as ``...-v4``), and at the env v6 bump, when the records of the ``-v5``
ids were kept (``shared-links`` and ``zero-bubble-shared`` kept theirs as ``...-v5``; SpanTrain's
agent episodes on cee, played under the scenario's defaults, moved in their last bits): those ids
still play their versions' episodes bit for bit.  On 2026-11-28 the ``info`` digests were recorded
again when the platform's cost and carbon sums stopped taking their last bits from OpenBLAS's CPU-picked dot product
(:func:`sfenv.world.portable.portable_dot`); every report, observation digest, reward sum and agent
record stayed as it was.
Each case is played again here and every recorded figure must match exactly: the episode report
(every float's ``repr``), the rewards' sum, the digests of every observation and ``info``, and, for
reference agents on the simulator, their re-plans, events and job records.  A change that moves any
float by one ulp fails.
"""

from __future__ import annotations

import json

import episode_identity as ei
import pytest

RECORDED = json.loads(ei.FIXTURE.read_text())
ENV_CASES = [(f"{label}/seed={seed}", env_id, kwargs, seed) for label, env_id, kwargs in ei.cases()
             for seed in ei.SEEDS]
AGENT_CASES = [(f"agent:{name}/seed={seed}", name, seed) for name in ei.AGENTS for seed in ei.SEEDS]


def test_the_fixture_covers_every_registered_id():
    from sfenv.registration import DEPRECATED_ENV_IDS, ENV_IDS, PREVIOUS_ENV_IDS

    labels = {key.rsplit("/seed=", 1)[0] for key in RECORDED}
    assert set(ENV_IDS) | set(PREVIOUS_ENV_IDS) | set(DEPRECATED_ENV_IDS) <= labels
    assert len(RECORDED) == len(ENV_CASES) + len(AGENT_CASES)


@pytest.mark.parametrize(("key", "env_id", "kwargs", "seed"), ENV_CASES, ids=[c[0] for c in ENV_CASES])
def test_env_episode_is_bit_identical(key, env_id, kwargs, seed):
    assert ei.play(env_id, kwargs, seed) == RECORDED[key]


@pytest.mark.parametrize(("key", "name", "seed"), AGENT_CASES, ids=[c[0] for c in AGENT_CASES])
def test_agent_episode_is_bit_identical(key, name, seed):
    assert ei.play_agent(name, seed) == RECORDED[key]


def test_the_earlier_ids_play_their_wan_models_and_the_v6_ids_v6s():
    """Jobs whose hops share links: v3's and v2's episodes differ; where a plan's own hops share a link (SpanTrain's
    deep chains on spider-64, seed 1) v4's and v3's do, and v5's and v4's; SpanTrain's zero-bubble candidates on
    CEE (seed 1) play differently under v5, which replays them, and in the last bits under v6, which replays their
    steady state once; geo-8's plans with several replicas of a hop per server play differently under v6, which caps
    them per server (each matches its record above)."""
    for seed in ei.SEEDS:
        v3, v2 = RECORDED[f"shared-links-v3/seed={seed}"], RECORDED[f"shared-links-v2/seed={seed}"]
        assert v3["report"]["mean_jct_s"] != v2["report"]["mean_jct_s"]

    def differ(label: str, other: str) -> bool:
        return any(RECORDED[f"{label}/seed={seed}"]["report"] != RECORDED[f"{other}/seed={seed}"]["report"]
                   for seed in ei.SEEDS)

    assert differ("own-hops-shared-v4", "own-hops-shared-v3")
    assert differ("own-hops-shared", "own-hops-shared-v4")
    assert differ("zero-bubble-shared", "zero-bubble-shared-v4")
    assert differ("shared-links", "shared-links-v4")
    assert differ("zero-bubble-shared", "zero-bubble-shared-v5")
    assert differ("geo8-best", "geo8-best-v5")
    import gymnasium as gym

    for version in ("v2", "v3", "v4", "v5"):
        sim = gym.make(f"sfenv/Spider32-{version}").unwrapped.scenario.cfg.sim
        assert (sim.wan_sharing, sim.vm_pair_cap, sim.skip_zero_bubble_periods) == (version, "member", False)
    sim = gym.make("sfenv/Spider32-v6").unwrapped.scenario.cfg.sim
    assert (sim.wan_sharing, sim.vm_pair_cap, sim.skip_zero_bubble_periods) == ("v5", "server", True)
