"""Behaviour-cloning warm start for ``sfenv train``: imitate a heuristic, then let PPO improve on it.

A policy trained from scratch must first discover what a good heuristic already does (serve short
jobs first, place them well) before it can do better; under contention a random start also
leaves jobs waiting to the horizon.  The warm start (our design, in the spirit of DQfD / "BC then
RL" recipes; plain torch on SB3's policy, no extra dependency):

1. **Expert.**  With ``proposers="best"`` (:func:`sfenv.agents.proposer_sets.best_heuristic_proposers`) the
   decision proposers record the decisions of ``fastest+swf`` (candidate 0), ``fifo+swf`` and
   ``spinsearch+swf`` at every step: :func:`expert_action` maps the chosen expert's decision to its
   action (wait when the heuristic would wait).  The expert costs nothing extra.  Default expert:
   ``fastest+swf``, the best of the recorded heuristics on ``spider-8-contended`` and ``spider-16``
   (``experiments/learned_vs_heuristics.py``; ``spantrain+swf``, recorded only with
   ``proposers="best+spantrain"``, was better on the contended scenarios under the 0.1.0 model;
   under the calibrated model ``fastest+swf`` is the best there too).
   Look-ahead experts (:func:`lookahead_action`) improve on a heuristic by what-if rollouts on
   forks of the simulator.  ``"lookahead:fastest+swf:present:proposed"`` (config
   ``contended-rollout``) is the best state-only expert we measured under the calibrated model:
   at every decision it takes whichever heuristic's decision (or waiting) gives the jobs now in
   the system the least job-time when the rest is played by ``fastest+swf``.  It sees only the
   present, so its choices are a function of the state; it reaches 0.932x (95 % CI 0.914-0.950)
   the mean JCT of ``fastest+swf`` on spider-8-contended's validation seeds 10000-10019, chosen
   there among 7 experts (under the 0.1.0 model the best was
   ``"lookahead:spantrain+swf:present:proposed:queue1"``).
2. **Collection** (:func:`collect`): ``steps`` environment steps through the training
   ``VecNormalize``, so its observation and reward statistics warm up as PPO's would; the
   observations are stored raw and normalised with the final statistics.  Rounds after the first
   are DAgger rounds (Ross et al., 2011): the current policy acts, the expert labels.
3. **Fit** (:func:`fit_policy`): cross-entropy of the masked policy on the expert's actions (with
   label smoothing over the valid actions: an exact clone puts probability 1 on the expert's
   action, PPO then samples nothing else and cannot improve on it), plus
   (``vf_coef``) a regression of the value head on the discounted, normalised returns of the
   collected episodes, so PPO starts with a critic that fits the policy it starts from.

Then PPO runs as usual from the cloned policy (:func:`sfenv.agents.learned.train`,
``pretrain=...``); its evaluation callback scores the cloned policy first, so the best model kept
is never worse on the held-out seeds than the clone.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np

from sfenv.env.proposers import DecisionRecorder
from sfenv.runs.progress import progress_bar

__all__ = [
    "PRETRAIN_DEFAULTS",
    "Demonstrations",
    "collect",
    "expert_action",
    "fit_policy",
    "lookahead_action",
    "parse_lookahead",
    "pretrain",
    "soft_targets",
]

#: keys of the ``pretrain`` recipe setting and their defaults
PRETRAIN_DEFAULTS: dict[str, Any] = {"expert": "fastest+swf", "steps": 20_000, "rounds": 2, "epochs": 8,
                                     "batch_size": 256, "learning_rate": 1e-3, "vf_coef": 0.5,
                                     "label_smoothing": 0.1, "score_temperature": None}


def expert_action(env: Any, expert: str | None = None, scores: dict[int, float] | None = None) -> int:
    """The action of the recorded decision of ``expert`` in ``env`` (a GeoSchedEnv, possibly wrapped).

    :param expert: the agent whose decision to take (``"fastest+swf"``, ``"fifo+swf"``, ``"spinsearch+swf"``): the
        proposer of that name; None: the first proposer that records a decision;
        ``"lookahead:AGENT[:FUTURE][:proposed]"``: :func:`lookahead_action` with ``AGENT`` as the
        rollout policy (see :func:`parse_lookahead`).
    :param scores: if given, a look-ahead expert fills it with each action it scored by rollouts and
        that action's objective (lower is better; see :func:`lookahead_action`); other experts leave it empty.
    :raises ValueError: when no proposer of the env records that decision (use ``proposers="best"``).
    """
    base = _scenario_env(env)
    if expert is not None and expert.startswith("lookahead:"):
        return lookahead_action(env, **parse_lookahead(expert), scores=scores)
    proposer = next((p for p in base.proposers if isinstance(p, DecisionRecorder)
                     and (expert is None or p.name == expert)), None)
    if proposer is None:
        raise ValueError(f"no proposer records the decision of {expert or 'an expert'}; "
                         "build the env with proposers=\"best\"")
    return _menu_action(base, proposer.decision)


def _menu_action(e: Any, decision: Any) -> int:
    """The action of ``decision`` in the GeoSchedEnv ``e``'s menu; wait when it is None or not on the menu.

    A recorded decision is on the menu unless the env's ``min_relative_mfu`` left it out (the
    decision proposers come first, so the candidate slots never cut them): the expert then waits,
    as it cannot start what the policy cannot.
    """
    if decision is None:
        return int(e.wait_action)
    try:
        return e.candidates.index(decision)
    except ValueError:
        return int(e.wait_action)


_ROLLOUT_AGENTS: dict[str, Any] = {}


def _scenario_env(env: Any) -> Any:
    """The GeoSchedEnv under ``env``'s wrappers; for a :class:`sfenv.agents.learned.ScenarioMix`, its current one."""
    base = env.unwrapped
    return getattr(base, "current", base)


def parse_lookahead(spec: str) -> dict[str, Any]:
    """The :func:`lookahead_action` arguments of an expert spec ``"lookahead:AGENT[:FUTURE][:proposed][:queueN]"``.

    ``AGENT`` may name several heuristics separated by ``|`` (``spantrain+swf|fastest+swf``): each
    action is scored by the best of their rollouts.

    ``FUTURE``: absent or ``0``, the episode's own future (privileged); ``K`` > 0, ``K`` sampled
    futures; ``present``, no future (the jobs in the system only).  ``proposed``: score only the
    decisions the env's proposers record (and waiting) instead of every valid action.
    ``queueN``: look ahead only when at most ``N`` jobs wait, else take ``AGENT``'s own decision
    (``max_waiting=N``).

    :raises ValueError: on a malformed spec, naming the part and what was expected.
    """
    parts = spec.split(":")
    if len(parts) < 2 or parts[0] != "lookahead" or not parts[1] or "" in parts[1].split("|"):
        raise ValueError(f"expert {spec!r}: expected 'lookahead:AGENT[|AGENT...][:FUTURE][:proposed][:queueN]'")
    args: dict[str, Any] = {"base": parts[1], "futures": 0, "among": "valid", "max_waiting": None}
    for part in parts[2:]:
        if part == "present":
            args["futures"] = "present"
        elif part == "proposed":
            args["among"] = "proposed"
        elif part.isdigit():
            args["futures"] = int(part)
        elif part.startswith("queue") and part[5:].isdigit():
            args["max_waiting"] = int(part[5:])
        else:
            raise ValueError(f"expert {spec!r}: part {part!r} is not a number of futures, 'present', 'proposed' "
                             "or 'queueN' (N a whole number)")
    return args


def sample_future(scenario: Any, sim: Any, rng: np.random.Generator) -> list[Any]:
    """One possible future of ``sim``'s episode: replacements for its jobs that have not arrived.

    Draws a fresh workload from ``scenario`` and keeps its last ``m`` jobs (``m`` = jobs still to
    arrive), shifted so that the gaps between arrivals are the draw's and the first comes one
    drawn gap after now (exact for Poisson arrivals, which forget the past).
    """
    m = sum(1 for js in sim.jobs if js.status == "pending")
    if m == 0:
        return []
    fresh = scenario.make_jobs(rng)
    tail = fresh[-m:]
    before = fresh[-m - 1].arrival if m < len(fresh) else 0.0
    return [replace(j, arrival=sim.time + (j.arrival - before)) for j in tail]


def lookahead_action(env: Any, base: str = "fastest+swf", futures: int | Literal["present"] = 0, seed: int = 0,
                     among: str = "valid", max_waiting: int | None = None,
                     scores: dict[int, float] | None = None) -> int:
    """The valid action whose what-if rollouts score best: an expert for distillation.

    For each valid action, a fork of the simulator (:meth:`sfenv.sim.Simulator.fork`) takes it and
    then plays the rest of the episode with the heuristic ``base``; the action with the best
    episode objective (the env's reward weights: job-time, cost, tokens, carbon) wins, ties going to the
    heuristic's own action (Bertsekas' rollout algorithm).

    - ``futures=0``: the forks play the episode's own future (arrivals, link changes).  Never
      worse than ``base`` on that episode, but *privileged*: no online scheduler knows the future,
      and a student that sees only the observation cannot tell why the expert deviated.
    - ``futures=K``: each action is scored by the mean over ``K`` sampled futures
      (:func:`sample_future`, :meth:`sfenv.sim.Simulator.resample_future`), the same ``K`` for
      every action (common random numbers).  The choice then depends on the present state only:
      a fair online scheduler, and a function a student can learn.  The draws come from a
      generator seeded by ``seed``, the decision count and the clock, so the expert is
      deterministic.
    - ``futures="present"``: the forks play the jobs now in the system only (no more arrivals;
      link changes from a generator seeded as above) and the score is their job-time, as in
      Bertsekas' rollout for scheduling.  Deterministic and state-only like ``K`` futures, at the
      cost of one rollout per action and without their sampling noise.

    ``among="proposed"`` scores only the heuristics' recorded decisions (the env's decision
    proposers, e.g. ``proposers="best+spantrain"``), the base's own action and waiting: the
    expert then picks, state by state, which heuristic to follow.

    ``max_waiting=N``: when more than ``N`` jobs wait, no rollout: the answer is ``base``'s own
    decision (``base`` must then be one of the env's decision proposers).  The forks know no future
    arrivals, which misleads them most when the queue is long: under the 0.1.0 model, on
    spider-8-contended's tuning seeds 200-239, the present, proposed expert on ``spantrain+swf``
    reached 0.985x ``spantrain+swf``'s mean JCT looking ahead at every step and 0.958x with
    ``N=1``.  Under the calibrated model, on the validation split (seeds 10000-10019, against
    ``fastest+swf``), the present, proposed expert on ``fastest+swf`` reaches 0.932x looking ahead
    at every step, 0.938x with ``N=2`` and 0.949x with ``N=1`` (docs/training.md, "Choosing the
    teacher").

    ``base="A|B|..."``: several rollout heuristics; an action's score is the best of its rollouts under
    each (the rollout algorithm with several base heuristics, Bertsekas, Tsitsiklis and Wu, "Rollout
    algorithms for combinatorial optimization", *Journal of Heuristics* 3, 1997: the improved policy
    is then no worse than any of them on the rollouts' own objective).  Ties and ``max_waiting`` go to
    the first one's decision.  Costs one set of rollouts per heuristic.

    ``scores``: if given, filled with each scored action's objective (lower is better), for a student that
    learns how much worse each action is (:func:`soft_targets`); left empty when no rollout is played.

    Costs ``max(K, 1)`` rollouts per scored action (about 40 ms each on a 40-job spider-8 episode).
    """
    e = _scenario_env(env)
    bases = base.split("|")
    agents = [_rollout_agent(name) for name in bases]
    first = bases[0]
    recorded = {p.name for p in e.proposers if isinstance(p, DecisionRecorder)}
    own = expert_action(env, first) if first in recorded else None
    if max_waiting is not None:
        if own is None:
            raise ValueError(f"max_waiting needs the decision of {first!r} recorded: build the env with proposers "
                             "that include it (e.g. proposers=\"best+spantrain\" for spantrain+swf)")
        if len(e.sim.waiting) > max_waiting:
            return int(own)
    valid = _actions_to_score(e, among, own)
    resample = futures == "present" or futures > 0
    draws = _rollout_draws(e, futures, seed) if resample else [([], None)]
    best, best_v = e.wait_action, None
    for a in valid:
        v = min(_rollout_objective(e, agent, a, draws, resample) for agent in agents)
        if scores is not None:
            scores[a] = v
        if best_v is None or v < best_v - 1e-9 or (a == own and v <= best_v + 1e-9):
            best, best_v = a, v
    return int(best)


def _rollout_agent(name: str) -> Any:
    """The heuristic a rollout plays, made once per process (its state is reset by each rollout's episode)."""
    from sfenv.agents.registry import make_agent

    agent = _ROLLOUT_AGENTS.get(name)
    if agent is None:
        agent = _ROLLOUT_AGENTS[name] = make_agent(name)
    return agent


def _actions_to_score(e: Any, among: str, own: int | None) -> list[int]:
    """The actions :func:`lookahead_action` scores in the GeoSchedEnv ``e``, in increasing order.

    :param among: ``"valid"``: every valid action; ``"proposed"``: the valid ones among the
        recorded decisions of ``e``'s proposers, waiting and ``own``.
    :param own: the base heuristic's own action (None: not recorded).
    :raises ValueError: for another ``among``.
    """
    mask = e.action_masks()
    if among == "proposed":
        actions = {_menu_action(e, p.decision) for p in e.proposers if isinstance(p, DecisionRecorder)}
        actions.add(e.wait_action)
        if own is not None:
            actions.add(own)
        return sorted(a for a in actions if mask[a])
    if among == "valid":
        return np.flatnonzero(mask).tolist()
    raise ValueError(f"among={among!r}: expected 'valid' or 'proposed'")


#: what a rollout of :func:`lookahead_action` plays: the jobs that replace those still to arrive,
#: and the generator of the link changes (None: the episode's own future)
_RolloutDraw = tuple[list[Any], np.random.Generator | None]


def _rollout_draws(e: Any, futures: int | Literal["present"], seed: int) -> list[_RolloutDraw]:
    """The futures the rollouts of :func:`lookahead_action` play in the GeoSchedEnv ``e`` (``futures`` not 0).

    Their generators are seeded by ``seed``, the decision count and the clock.

    :param futures: ``"present"``: one future without arrivals; ``K``: ``K`` sampled futures.
    """
    root = np.random.default_rng([seed, e.sim.decisions, int(e.sim.time * 1000.0)])
    if futures == "present":
        never = 2.0 * e.sim.config.horizon_s  # after the horizon: these jobs never arrive
        pending = [js.spec for js in e.sim.jobs if js.status == "pending"]
        return [([replace(j, arrival=never) for j in pending], root)]
    draws: list[_RolloutDraw] = []
    for g in root.spawn(futures):
        jobs_rng, link_rng = g.spawn(2)
        draws.append((sample_future(e.scenario, e.sim, jobs_rng), link_rng))
    return draws


def _rollout_objective(e: Any, agent: Any, action: int, draws: list[_RolloutDraw], resample: bool) -> float:
    """The mean episode objective of ``action`` in the GeoSchedEnv ``e``, the rest played by ``agent``.

    One fork of the simulator per draw takes ``action`` and plays on; the objective weighs job-time,
    electricity, egress, tokens and carbon by the env's reward weights.

    :param resample: the forks play the draws' futures (else the episode's own).
    """
    total = 0.0
    for jobs, link_rng in draws:
        sim = e.sim.fork()
        if resample:
            sim.resample_future(jobs, copy.deepcopy(link_rng))
        if action == e.wait_action:
            sim.wait()
        else:
            sim.schedule(e.candidates[action])
            sim.advance()
        sim.play(agent.decide)  # the objective reads the totals: no report
        cost, _, tokens = sim.totals()
        total += (e.jct_weight * sim.job_seconds / (3600.0 * e.K) + e.cost_weight * cost
                  + e.egress_weight * sim.egress_usd() - e.throughput_weight * tokens / 1e9)
        if e.carbon_weight:
            total += e.carbon_weight * sim.carbon_kg()
    return total / len(draws)


def soft_targets(scores: dict[int, float], label: int, num_actions: int, temperature: float | None) -> np.ndarray:
    """The imitation target over ``num_actions`` actions: the expert's ``label``, or its scores made soft.

    With a ``temperature`` and at least two scored actions, each scored action ``a`` gets weight
    ``exp(-(v_a - v_best) / (temperature * |v_best|))``, normalised: its rollout objective's relative
    regret against the best, in units of ``temperature`` (0.01: an action whose rollout is 1 % worse
    weighs ``1/e`` of the best).  Near-ties then share the target and a clearly worse action gets
    almost none: a cost-sensitive imitation loss.  Learning from the expert's cost-to-go of each action
    rather than its argmax follows AggreVaTe (Ross and Bagnell, 2014); the softmax over relative
    regrets and its temperature are our choice.  The teacher's argmax is the limit
    ``temperature -> 0``.  Otherwise a one-hot of ``label``.
    """
    target = np.zeros(num_actions, dtype=np.float32)
    if temperature is None or len(scores) < 2:
        target[label] = 1.0
        return target
    actions = np.fromiter(scores, dtype=np.int64)
    values = np.fromiter(scores.values(), dtype=np.float64)
    best = float(values.min())
    scale = max(abs(best), 1e-12) * float(temperature)
    weights = np.exp(-(values - best) / scale)
    target[actions] = weights / weights.sum()
    return target


@dataclass
class Demonstrations:
    """Collected steps: raw observations (dict of arrays), masks, expert actions, value targets.

    ``returns`` holds the discounted sum of normalised rewards to the end of the episode, NaN for
    steps whose episode did not end within the collection (they get no value target).  ``targets``:
    the soft imitation targets per step (:func:`soft_targets`), None for hard labels.
    """

    obs: dict[str, np.ndarray]
    masks: np.ndarray
    actions: np.ndarray
    returns: np.ndarray
    rewards: np.ndarray  # normalised rewards (what PPO sees)
    dones: np.ndarray
    agreement: float  # share of steps on which the acting policy took the expert's action
    targets: np.ndarray | None = None  # (steps, actions) soft targets, None: the expert's actions

    def __len__(self) -> int:
        return len(self.actions)

    def extended(self, new: Demonstrations) -> Demonstrations:
        """These steps, then those of ``new``; the agreement is ``new``'s (that of the latest collection)."""
        return Demonstrations(obs={k: np.concatenate([self.obs[k], new.obs[k]]) for k in self.obs},
                              masks=np.concatenate([self.masks, new.masks]),
                              actions=np.concatenate([self.actions, new.actions]),
                              returns=np.concatenate([self.returns, new.returns]),
                              rewards=np.concatenate([self.rewards, new.rewards]),
                              dones=np.concatenate([self.dones, new.dones]),
                              agreement=new.agreement,
                              targets=None if self.targets is None or new.targets is None
                              else np.concatenate([self.targets, new.targets]))


def _base_envs(vec: Any) -> list[Any]:
    inner = vec
    while hasattr(inner, "venv"):
        inner = inner.venv
    return [e.unwrapped for e in inner.envs]


def collect(vec: Any, steps: int, gamma: float, policy: Any = None, expert: str | None = None,
            log: Callable[[str], None] | None = None, progress: bool = False,
            score_temperature: float | None = None) -> Demonstrations:
    """Step ``vec`` (a DummyVecEnv, possibly in VecNormalize) ``steps`` times in all, labelling with the expert.

    :param policy: if given, the acting policy (an SB3 policy with ``predict(obs, action_masks=...)``,
        fed the normalised observation); None: the expert acts.
    :param gamma: discount of the value targets.
    :param expert: the agent whose decisions label the steps (see :func:`expert_action`).
    :param log: called with a progress line about every quarter of the steps, with the time left at
        the rate so far (None: silent); not while a progress bar is drawn.
    :param progress: a progress bar of the steps on stderr (rate, ETA), drawn only on a terminal
        (:mod:`sfenv.runs.progress`).
    :param score_temperature: also keep soft targets from a look-ahead expert's scores (:func:`soft_targets`);
        None: the expert's actions only.
    """
    started = time.perf_counter()
    bases = _base_envs(vec)
    n = len(bases)
    vn = vec if hasattr(vec, "get_original_obs") else None
    obs = vec.reset()
    raw = vn.get_original_obs() if vn is not None else obs
    keys = list(raw)
    store_obs: dict[str, list[np.ndarray]] = {k: [] for k in keys}
    masks, actions, rewards, dones, targets, agree = [], [], [], [], [], 0
    total = max(1, steps // n)
    report_every = max(1, total // 4)
    bar = progress_bar(total * n, "pretrain: collecting", "step", enabled=progress)
    for t in range(total):
        if log is not None and bar.disable and t > 0 and t % report_every == 0:
            spent = time.perf_counter() - started
            log(f"  collected {t * n:,}/{total * n:,} steps ({spent:.0f} s, about {spent * (total - t) / t:.0f} s "
                "left for this collection)")
        bar.update(n)
        m = np.stack([b.action_masks() for b in bases])
        scored: list[dict[int, float]] = [{} for _ in bases]
        labels = np.array([expert_action(b, expert, scores=sc) for b, sc in zip(bases, scored)])
        if score_temperature is not None:
            targets.append(np.stack([soft_targets(sc, int(lab), m.shape[1], score_temperature)
                                     for sc, lab in zip(scored, labels)]))
        if policy is None:
            act = labels
        else:
            act, _ = policy.predict(obs, deterministic=True, action_masks=m)
            act = np.asarray(act)
        agree += int((act == labels).sum())
        for k in keys:
            store_obs[k].append(np.asarray(raw[k]).copy())
        masks.append(m)
        actions.append(labels)
        obs, reward, done, _ = vec.step(act)
        raw = vn.get_original_obs() if vn is not None else obs
        if vn is not None:  # the reward PPO would see, scaled by the statistics so far
            reward = vn.normalize_reward(vn.get_original_reward())
        rewards.append(np.asarray(reward, dtype=np.float64))
        dones.append(np.asarray(done, dtype=bool))
    bar.close()
    T = len(actions)
    rew, dn = np.array(rewards), np.array(dones)
    ret = np.full((T, n), np.nan)
    for j in range(n):  # discounted returns to each episode's end; open episodes get none
        acc, open_ = 0.0, True
        for t in range(T - 1, -1, -1):
            if dn[t, j]:
                acc, open_ = 0.0, False
            acc = rew[t, j] + gamma * acc
            if not open_:
                ret[t, j] = acc
    flat = {k: np.concatenate(v) for k, v in ((k, store_obs[k]) for k in keys)}
    return Demonstrations(flat, np.concatenate(masks), np.concatenate(actions), ret.reshape(-1),
                          rew.reshape(-1), dn.reshape(-1), agree / (T * n),
                          np.concatenate(targets) if score_temperature is not None else None)


def fit_policy(model: Any, demos: Demonstrations, normalize: Any = None, epochs: int = 8, batch_size: int = 256,
               learning_rate: float = 1e-3, vf_coef: float = 0.5, seed: int = 0, label_smoothing: float = 0.0,
               ) -> dict[str, float]:
    """Fit ``model.policy`` (MaskablePPO) to the demonstrations; returns loss, accuracy, expert probability.

    Accuracy: the argmax is the expert's action; ``expert_prob``: mean probability of that action.

    :param normalize: applied to the raw observations first (VecNormalize's ``normalize_obs``).
    :param label_smoothing: share of the target spread evenly over the valid actions (0: plain
        cross-entropy, which drives the expert's probability to 1 and leaves PPO nothing to sample).

    With ``demos.targets`` the cross-entropy is on those soft targets instead of the expert's actions.
    """
    import torch

    policy = model.policy
    device = policy.device
    obs = normalize(demos.obs) if normalize is not None else demos.obs
    obs_t = {k: torch.as_tensor(np.asarray(v, dtype=np.float32), device=device) for k, v in obs.items()}
    act_t = torch.as_tensor(demos.actions, device=device)
    target_t = (None if demos.targets is None
                else torch.as_tensor(np.asarray(demos.targets, dtype=np.float32), device=device))
    mask_np = demos.masks
    ret_t = torch.as_tensor(np.nan_to_num(demos.returns), dtype=torch.float32, device=device)
    has_ret = torch.as_tensor(~np.isnan(demos.returns), device=device)
    opt = torch.optim.Adam(policy.parameters(), lr=learning_rate)
    rng = np.random.default_rng(seed)
    n = len(demos)
    policy.set_training_mode(True)
    loss_v = 0.0
    for _ in range(epochs):
        for idx in np.array_split(rng.permutation(n), max(1, n // batch_size)):
            ix = torch.as_tensor(idx, device=device)
            batch = {k: v[ix] for k, v in obs_t.items()}
            values, log_prob, _ = policy.evaluate_actions(batch, act_t[ix], action_masks=mask_np[idx])
            logp = None
            if target_t is not None:  # cross-entropy on the soft targets (masked actions have none)
                logp = torch.log_softmax(policy.get_distribution(batch, action_masks=mask_np[idx]).distribution.logits,
                                         dim=1)
                loss = -(target_t[ix] * logp).sum(dim=1).mean()
            else:
                loss = -log_prob.mean()
            if label_smoothing > 0:  # keep some mass on the other valid actions, so PPO still explores
                if logp is None:
                    logp = torch.log_softmax(
                        policy.get_distribution(batch, action_masks=mask_np[idx]).distribution.logits, dim=1)
                valid = torch.as_tensor(mask_np[idx], device=device)
                spread = (logp * valid).sum(dim=1) / valid.sum(dim=1)
                loss = (1.0 - label_smoothing) * loss - label_smoothing * spread.mean()
            sel = has_ret[ix]
            if vf_coef > 0 and bool(sel.any()):
                loss = loss + vf_coef * ((values.flatten()[sel] - ret_t[ix][sel]) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(policy.parameters(), 0.5)
            opt.step()
            loss_v = float(loss.detach())
    policy.set_training_mode(False)
    with torch.no_grad():
        correct, prob = 0, 0.0
        for idx in np.array_split(np.arange(n), max(1, n // 4096)):
            ix = torch.as_tensor(idx, device=device)
            dist = policy.get_distribution({k: v[ix] for k, v in obs_t.items()}, action_masks=mask_np[idx])
            probs = dist.distribution.probs
            correct += int((probs.argmax(dim=1) == act_t[ix]).sum())
            prob += float(probs.gather(1, act_t[ix].long().unsqueeze(1)).sum())
    return {"loss": loss_v, "accuracy": correct / max(1, n), "expert_prob": prob / max(1, n)}


def pretrain(model: Any, vec: Any, steps: int = 20_000, rounds: int = 2, epochs: int = 8, batch_size: int = 256,
             learning_rate: float = 1e-3, vf_coef: float = 0.5, seed: int = 0, expert: str | None = "fastest+swf",
             label_smoothing: float = 0.1, log: Callable[[str], None] | None = None,
             progress: bool = False, score_temperature: float | None = None) -> list[dict[str, float]]:
    """Behaviour cloning with DAgger rounds (see the module docstring); returns one record per round.

    Round 1 collects ``steps`` steps with the expert acting; every later round collects ``steps``
    more with the current policy acting, adds them to the data and refits.  Records hold the
    steps so far, the agreement of the acting policy with the expert, the loss and the accuracy.

    :param log: called with progress lines (collection, and each round's agreement, loss and
        accuracy); None: silent.
    :param progress: a progress bar of each collection on stderr, drawn only on a terminal (:func:`collect`).
    :param score_temperature: fit soft targets made from a look-ahead expert's rollout scores
        (:func:`soft_targets`: cost-sensitive imitation); None: the expert's actions.
    """
    gamma = float(getattr(model, "gamma", 0.99))
    vn = vec if hasattr(vec, "normalize_obs") else None
    data: Demonstrations | None = None
    out: list[dict[str, float]] = []
    rounds = max(1, rounds)
    for r in range(rounds):
        started = time.perf_counter()
        if log is not None:
            acting = "the expert acting" if r == 0 else "the policy acting (DAgger)"
            log(f"pretrain round {r + 1}/{rounds}: collecting {steps:,} steps labelled by {expert}, {acting}")
        new = collect(vec, steps, gamma, policy=None if r == 0 else model.policy, expert=expert, log=log,
                      progress=progress, score_temperature=score_temperature)
        data = new if data is None else data.extended(new)
        norm = None
        if vn is not None and vn.norm_obs:
            norm = vn.normalize_obs
        stats = fit_policy(model, data, norm, epochs, batch_size, learning_rate, vf_coef, seed + r, label_smoothing)
        out.append({"round": r + 1, "steps": len(data), "agreement": new.agreement, **stats})
        if log is not None:
            log(f"pretrain round {r + 1}/{rounds}: fitted on {len(data):,} steps ({epochs} epochs): acting policy "
                f"agreed with the expert on {new.agreement:.0%} of new steps; loss {stats['loss']:.3f}, "
                f"accuracy {stats['accuracy']:.1%}, expert's probability {stats['expert_prob']:.2f} "
                f"({time.perf_counter() - started:.0f} s)")
    return out
