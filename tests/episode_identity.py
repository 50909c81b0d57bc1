"""Episodes recorded before the layering move (issue 29), replayed after it: the reports must be bit-identical.

``python tests/episode_identity.py`` (from the repository, with sfenv installed) writes
``tests/data/episode_identity.json``: for every registered id (current, previous and deprecated) and a few
settings (compact observations, a named proposer set, work-conserving play), a few seeds played by a
fixed policy that reads only the action mask.  Each record holds the episode report (``repr`` of every
float, so equality is bit for bit), the rewards' sum, the step count and SHA-256 digests of every
observation and of every ``info`` (action masks included).  ``tests/test_episode_identity.py`` plays
the same episodes with the current code and compares.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from sfenv.sim import make_simulator

#: the fixture, next to this file
FIXTURE = Path(__file__).resolve().parent / "data" / "episode_identity.json"
#: steps per episode (the report is read at this cap if the episode has not ended)
MAX_STEPS = 120
SEEDS = (0, 1)
#: (label, gym id, keyword arguments): every registered id with its defaults, plus the env's other modes
EXTRA_CASES: list[tuple[str, str, dict[str, Any]]] = [
    ("compact", "sfenv/Spider16-v6", {"obs_mode": "compact"}),
    ("best+spantrain", "sfenv/Spider8Contended-v6", {"proposers": "best+spantrain", "num_jobs": 12}),
    ("first-fit", "sfenv/Geo8Contended-v6", {"proposers": "first-fit", "num_jobs": 12}),
    # geo-8's links carry measured VM-pair rates: env v6 caps a hop's replica pairs per server, v5 per member
    ("geo8-best", "sfenv/Geo8Contended-v6", {"proposers": "best", "num_jobs": 12}),
    ("geo8-best-v5", "sfenv/Geo8Contended-v5", {"proposers": "best", "num_jobs": 12}),
    ("work-conserving", "sfenv/Spider8-v6", {"work_conserving": True}),
    # jobs whose hops share WAN links: env v3's sharing model and v2's play them differently
    ("shared-links", "sfenv/Spider32-v6", {"proposers": "best+spantrain", "num_jobs": 16}),
    ("shared-links-v5", "sfenv/Spider32-v5", {"proposers": "best+spantrain", "num_jobs": 16}),
    ("shared-links-v4", "sfenv/Spider32-v4", {"proposers": "best+spantrain", "num_jobs": 16}),
    ("shared-links-v3", "sfenv/Spider32-v3", {"proposers": "best+spantrain", "num_jobs": 16}),
    ("shared-links-v2", "sfenv/Spider32-v2", {"proposers": "best+spantrain", "num_jobs": 16}),
    # a plan whose own hops share a link (SpanTrain's deep chains): env v5's, v4's and v3's models differ
    ("own-hops-shared", "sfenv/Spider64-v6", {"proposers": "best+spantrain", "num_jobs": 12}),
    ("own-hops-shared-v4", "sfenv/Spider64-v4", {"proposers": "best+spantrain", "num_jobs": 12}),
    ("own-hops-shared-v3", "sfenv/Spider64-v3", {"proposers": "best+spantrain", "num_jobs": 12}),
    # zero-bubble plans across flapping links (SpanTrain's candidates on cee): env v5's model replays them,
    # env v6's replays their steady state once
    ("zero-bubble-shared", "sfenv/CEE-v6", {"proposers": "best+spantrain", "num_jobs": 10}),
    ("zero-bubble-shared-v5", "sfenv/CEE-v5", {"proposers": "best+spantrain", "num_jobs": 10}),
    ("zero-bubble-shared-v4", "sfenv/CEE-v4", {"proposers": "best+spantrain", "num_jobs": 10}),
]


def cases() -> list[tuple[str, str, dict[str, Any]]]:
    """Every case the fixture holds: each registered id (smaller episodes), then :data:`EXTRA_CASES`."""
    from sfenv.registration import DEPRECATED_ENV_IDS, ENV_IDS, PREVIOUS_ENV_IDS

    ids = sorted(ENV_IDS) + sorted(PREVIOUS_ENV_IDS) + sorted(DEPRECATED_ENV_IDS)
    return [(env_id, env_id, {"num_jobs": 10}) for env_id in ids] + EXTRA_CASES


def _digest(h: Any, value: Any) -> None:
    if isinstance(value, dict):
        for key in sorted(value):
            h.update(str(key).encode())
            _digest(h, value[key])
    elif isinstance(value, np.ndarray):
        h.update(str(value.dtype).encode() + str(value.shape).encode())
        h.update(np.ascontiguousarray(value).tobytes())
    else:
        h.update(repr(value).encode())


def _pick(mask: np.ndarray, step: int, seed: int) -> int:
    """The fixed policy: the ((7 * step + seed) mod n)-th valid action."""
    valid = np.flatnonzero(mask)
    return int(valid[(7 * step + seed) % len(valid)])


def play(env_id: str, kwargs: dict[str, Any], seed: int) -> dict[str, Any]:
    """One episode of the fixed policy; what the fixture records of it."""
    import warnings

    import gymnasium as gym

    import sfenv  # noqa: F401  (registers the ids)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = gym.make(env_id, **kwargs)
    obs_h, info_h = hashlib.sha256(), hashlib.sha256()
    obs, info = env.reset(seed=seed)
    _digest(obs_h, obs)
    _digest(info_h, info)
    total, steps, done = 0.0, 0, False
    while not done and steps < MAX_STEPS:
        obs, reward, term, trunc, info = env.step(_pick(info["action_mask"], steps, seed))
        _digest(obs_h, obs)
        _digest(info_h, {k: v for k, v in info.items() if k != "episode_report"})
        total += float(reward)
        steps += 1
        done = term or trunc
    report = env.unwrapped.sim.report().to_dict()
    env.close()
    return {"steps": steps, "done": bool(done), "reward_sum": repr(total),
            "report": {k: repr(v) for k, v in sorted(report.items())},
            "obs_sha256": obs_h.hexdigest(), "info_sha256": info_h.hexdigest()}


#: reference agents played on the simulator directly (re-plans on link changes, outages, look-ahead)
AGENTS = ("spantrain", "spinsearch", "fifo", "bace-pipe", "tpa")
#: the world they play: CEE (flapping links) with region outages, 10 jobs
AGENT_SCENARIO = ("cee", {"workload": {"num_jobs": 10},
                          "outages": {"rate_per_region_per_day": 2.0, "mean_duration_h": 1.0}})


def play_agent(name: str, seed: int) -> dict[str, Any]:
    """One episode of a reference agent, as the evaluator plays it; its report and re-plan count."""
    from sfenv.agents.registry import make_agent

    from sfenv.scenario import load_scenario

    scenario = load_scenario(AGENT_SCENARIO[0]).with_overrides(**AGENT_SCENARIO[1])
    agent = make_agent(name)
    agent.reset(seed)
    sim = make_simulator(scenario, seed)
    report = sim.run(agent.decide, replan=agent.replan if agent.replans else None)
    return {"report": {k: repr(v) for k, v in sorted(report.to_dict().items())}, "replans": sim.replans,
            "events": sim.events_processed, "decisions": sim.decisions,
            "records": hashlib.sha256(repr(sim.records()).encode()).hexdigest()}


def record() -> dict[str, Any]:
    """Play every case and seed."""
    out: dict[str, Any] = {}
    for label, env_id, kwargs in cases():
        for seed in SEEDS:
            out[f"{label}/seed={seed}"] = play(env_id, kwargs, seed)
    for name in AGENTS:
        for seed in SEEDS:
            out[f"agent:{name}/seed={seed}"] = play_agent(name, seed)
    return out


if __name__ == "__main__":
    data = record()
    FIXTURE.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(data)} episodes to {FIXTURE}", file=sys.stderr)
