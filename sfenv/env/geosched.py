"""GeoSchedEnv: the Gymnasium face of the simulator."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from sfenv.env.observation import OBS_MODES, ObservationEncoder, observation_encoder
from sfenv.env.proposers import (
    PROPOSER_SETS,
    CandidateProposer,
    DecisionRecorder,
    PlanCache,
    Proposer,
    default_proposers,
    named_proposers,
    round_budget,
)
from sfenv.errors import InvalidInput
from sfenv.model.perf import Plan, PlanPerf
from sfenv.model.pipeline import prepare_compiled
from sfenv.scenario import DEFAULT_SCENARIO, Scenario, ScenarioError, load_scenario
from sfenv.sim import Simulator, SimView, evaluation_cache_for, make_simulator

__all__ = ["SPREAD_WAITS", "GeoSchedEnv"]

#: how ``min_spread_speedup`` estimates a job's wait for one region: only for the running jobs, also
#: behind the waiting jobs with less work, or stretched by the shorter jobs arriving meanwhile (see
#: :class:`GeoSchedEnv`'s parameter table)
SPREAD_WAITS = ("running", "queue", "arrivals")


def _with_arguments(sc: Scenario, **sections: dict[str, Any]) -> Scenario:
    """``sc`` with the constructor's non-None arguments as overrides, validated like a scenario file.

    :raises ScenarioError: naming the arguments given, then each bad field, its value and the expectation.
    """
    overrides = {sec: {k: v for k, v in kv.items() if v is not None} for sec, kv in sections.items()}
    overrides = {sec: kv for sec, kv in overrides.items() if kv}
    if not overrides:
        return sc
    try:
        return sc.with_overrides(**overrides)
    except ScenarioError as e:
        if not e.errors:  # pragma: no cover - with_overrides reports per field
            raise
        lines = [f"{path.rpartition('.')[2]}={value!r}: {msg} (scenario field {path})" for path, value, msg in e.errors]
        raise ScenarioError("GeoSchedEnv: invalid argument " + "; ".join(lines), e.errors) from None


def _check_arguments(render_mode: str | None, render_modes: list[str], obs_mode: str,
                     invalid_action_limit: int | None, privileged_obs: bool, work_conserving: bool) -> None:
    """Refuse a bad constructor argument among those the scenario does not hold (it validates the others).

    :raises ValueError: for a ``render_mode`` not in ``render_modes``.
    :raises InvalidInput: naming the argument, its value and what was expected, for the others.
    """
    if render_mode is not None and render_mode not in render_modes:
        raise ValueError(f"render_mode {render_mode!r}; expected one of {render_modes}")
    if obs_mode not in OBS_MODES:
        raise InvalidInput(f"GeoSchedEnv: invalid argument obs_mode={obs_mode!r}: expected one of {list(OBS_MODES)}")
    if invalid_action_limit is not None and (
        isinstance(invalid_action_limit, bool) or not isinstance(invalid_action_limit, (int, np.integer))
        or invalid_action_limit < 1
    ):
        raise InvalidInput(f"GeoSchedEnv: invalid argument invalid_action_limit={invalid_action_limit!r}: "
                           "expected an integer >= 1 or None")
    for name, flag in (("privileged_obs", privileged_obs), ("work_conserving", work_conserving)):
        if not isinstance(flag, (bool, np.bool_)):
            raise InvalidInput(f"GeoSchedEnv: invalid argument {name}={flag!r}: expected True or False")


def _proposers_from(proposers: Sequence[CandidateProposer] | str | None, queue_window: int,
                    cache: PlanCache) -> list[CandidateProposer]:
    """The candidate proposers the constructor's ``proposers`` argument names (see the parameter table).

    :raises InvalidInput: for a name not in :data:`~sfenv.env.proposers.PROPOSER_SETS`, or a value that
        is not a non-empty list of proposers (objects with a callable ``candidates(view, k)``).
    """
    if isinstance(proposers, str):
        if proposers not in PROPOSER_SETS:
            raise InvalidInput(f"GeoSchedEnv: invalid argument proposers={_short(proposers)}: expected one of "
                               f"{list(PROPOSER_SETS)} or a list of proposers")
        return named_proposers(proposers, queue_window, cache)
    if proposers is None:
        return default_proposers(cache, queue_window)
    if not isinstance(proposers, (list, tuple)) or not proposers:
        raise InvalidInput(f"GeoSchedEnv: invalid argument proposers={_short(proposers)}: expected a non-empty "
                           f"list of proposers (objects with a candidates(view, k) method), one of "
                           f"{list(PROPOSER_SETS)} or None")
    for i, p in enumerate(proposers):
        if not callable(getattr(p, "candidates", None)):
            raise InvalidInput(f"GeoSchedEnv: invalid argument proposers[{i}]={_short(p)}: expected a proposer "
                               "(an object with a candidates(view, k) method, e.g. a sfenv.env.proposers.Proposer)")
    return list(proposers)


def _short(value: Any, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters for a message."""
    shown = repr(value)
    return shown if len(shown) <= limit else shown[:limit - 3] + "..."


def _floor_exempt_flags(floor_exempt: Sequence[str], proposers: Sequence[CandidateProposer]) -> list[bool]:
    """Per proposer, whether its recorded decision is exempt from the menu's floors (``floor_exempt``).

    :raises InvalidInput: naming ``floor_exempt`` when it is not a list of names of the proposers'
        recorded decisions (:class:`~sfenv.env.proposers.DecisionRecorder`).
    """
    recorded = [p.name for p in proposers if isinstance(p, DecisionRecorder)]
    if isinstance(floor_exempt, str) or not isinstance(floor_exempt, (list, tuple)) or any(
            not isinstance(name, str) or name not in recorded for name in floor_exempt):
        raise InvalidInput(f"GeoSchedEnv: invalid argument floor_exempt={str(floor_exempt)[:100]!r}: expected a list of "
                           f"the proposers' recorded decisions, some of {recorded}")
    return [isinstance(p, DecisionRecorder) and p.name in floor_exempt for p in proposers]


#: the menu's floors an exempt decision can skip (``floor_exempt_from``)
FLOOR_TESTS = ("min_relative_mfu", "min_spread_speedup")


def _floor_exempt_tests(floor_exempt_from: Sequence[str]) -> frozenset[str]:
    """The floors ``floor_exempt`` decisions skip, checked.

    :raises InvalidInput: naming ``floor_exempt_from`` unless it is a non-empty list of :data:`FLOOR_TESTS`.
    """
    if isinstance(floor_exempt_from, str) or not isinstance(floor_exempt_from, (list, tuple)) or not floor_exempt_from \
            or any(name not in FLOOR_TESTS for name in floor_exempt_from):
        raise InvalidInput(f"GeoSchedEnv: invalid argument floor_exempt_from={str(floor_exempt_from)[:100]!r}: "
                           f"expected a non-empty list of some of {list(FLOOR_TESTS)}")
    return frozenset(floor_exempt_from)


class GeoSchedEnv(gym.Env[dict[str, np.ndarray], int | np.integer | np.ndarray]):
    """Schedule LLM training jobs over geo-distributed GPU clusters.

    ## Description
    Jobs (LLM training runs) arrive over time at a platform of GPU clusters in several regions,
    linked by a WAN with per-link bandwidth and latency, under hourly electricity prices per
    region. At each step the agent either starts a waiting job with one of ``N`` candidate
    parallel plans (which regions hold which pipeline stages, with how much data/tensor
    parallelism) or waits for the next event. The dynamics are those of
    :class:`sfenv.sim.Simulator`; plan performance follows :mod:`sfenv.model.perf`.

    ## Action Space
    ``Discrete(N + 1)`` with ``N = max_candidates``: action ``i < N`` starts candidate ``i``;
    action ``N`` waits (runs simulated time to the next event: an arrival, a completion, a price
    change, a bandwidth change or an outage). Candidates come from proposers (default:
    :func:`sfenv.env.proposers.default_proposers`; reference agents can be proposers too).
    ``action_masks()`` (and ``info["action_mask"]``) is True for valid actions; waiting is always
    valid (with ``work_conserving=True`` only while no candidate can start: a work-conserving
    scheduler); before the first ``reset()`` it raises. An action is a Python ``int`` in ``[0, N]``, a
    NumPy integer scalar or a 0-d integer array (what SB3 and vector envs pass). An action outside
    the space (a float, a string, a bool, an out-of-range integer) raises ``ValueError``, as
    Gymnasium's own environments refuse it. An action in the space that is masked (an empty or
    unstartable slot, or any action after the episode ended) is a no-op with reward
    ``-invalid_action_penalty`` and ``info["invalid_action"]`` set. For learners without masks
    (SB3's PPO/A2C/DQN, RL Zoo), ``invalid_action_limit=k`` makes the k-th masked action in a row,
    and every one after it, act as wait (still penalised, ``info["forced_wait"]`` set), so an
    unmasked policy cannot stall an episode: simulated time always moves on.

    ## Observation Space
    A ``Dict`` of 1-D ``Box(0, 1, float32)`` entries (SB3 ``MultiInputPolicy``; wrap with
    ``FlattenObservation`` for ``MlpPolicy``); ``C`` regions, ``E`` links, ``K = queue_window``,
    ``H = forecast_hours``.  :attr:`observation_encoder` (:mod:`sfenv.env.observation`, one encoder
    per ``obs_mode``) gives the space and builds each observation:

    | key | size | per item |
    |---|---|---|
    | ``regions`` | C x (7 + H) | free GPU fraction, GPUs (/1024), peak TFLOP/s (/1000), GPU memory (/141 GB), PUE - 1, outage flag, price now, price forecast for the next H hours (USD/MWh / 300) |
    | ``links`` | E x 3 | capacity (/100 Gbit/s), flows / (flows + 1) (flows: transfers sending at once, expected, busier way), latency (/300 ms) |
    | ``queue`` | K x 8 | valid, log params, min GPUs, max GPUs (/1024), log iterations, global batch (/1024), waited (/24 h), progress done |
    | ``candidates`` | N x 10 | valid, queue slot (/K), log iteration time, log throughput, log cost rate (electricity at this hour's prices plus the egress its cross-region bytes are billed, log(1 + USD/h) / log(1 + 10^5)), regions used (/C), GPUs (/1024), log bottleneck bandwidth, memory headroom, stall-free |
    | ``time`` | 5 | hour of day (sin, cos mapped to [0,1]), running jobs (/K), waiting jobs (/K), invalid-action flag |

    Everything above is known to a real scheduler at decision time: the platform's state, the jobs
    that have arrived, and the prices.  **Forecasts**: the only inputs about the future are the
    ``H`` hourly prices per region in ``regions`` (the current hour and the next ``H - 1``; in
    compact mode their GPU-weighted mean).  They are *exact*: the episode's own hourly prices
    (:meth:`sfenv.world.prices.PriceSeries.forecast`, noise included), as a day-ahead market publishes
    the next day's hourly prices in advance; with ``H <= 24`` (default 6) that is what a scheduler
    can know, a forecast further ahead would not be exact.  Plan features (iteration time,
    throughput, memory headroom) are the performance model's prediction under the *current* link
    state (:mod:`sfenv.model.perf`), what a profiler or cost model gives a real scheduler; they are
    exact only until the WAN state changes (bandwidth dynamics and outages are not forecast).

    **Carbon** (with ``carbon_obs=True``, off by default so that spaces stay as they were; docs/carbon.md): a ``carbon`` key,
    per region the intensity of the current hour and the forecast issued now for each of the next
    ``H_c = carbon.forecast.hours`` hours (gCO2e/kWh / 1000; ``C x (1 + H_c)``; compact: the current
    intensity's min, GPU-weighted mean and max, then the GPU-weighted forecast, ``3 + H_c``).  The
    forecast is ``carbon.forecast.kind``: ``noisy`` (the truth with a seeded error of published
    day-ahead size), ``persistence`` (causal) or ``oracle``, the true future: **privileged**
    (``env.privileged_carbon``), as below.

    **Privileged** (``privileged_obs=True``, off by default; on for the deprecated ``-v0`` ids):
    ``time`` gets a sixth entry before the invalid-action flag, the share of the episode's jobs
    still to arrive (``pending arrivals / jobs``).  A real scheduler knows neither how many jobs
    will still arrive nor that the workload ends, so results with it are not comparable with the
    default observation; it exists to reproduce v0 results and models.

    With ``obs_mode="compact"`` the observation's size does not depend on the topology (a policy
    trained on 8 regions runs on 16): ``queue`` and ``time`` as above, and

    | key | size | per item |
    |---|---|---|
    | ``candidates`` | N x 15 | the 10 features above, with regions used mapped to 1 at 8 regions (not /C), then: log remaining run time of the job under the plan (60 s .. 30 days), GPUs / free GPUs of the platform, the job's wait (/24 h), fastest run time of the same job among the candidates / this one's, shortest run time among all candidates' jobs / this job's fastest (1 = the shortest job, as shortest-work-first would pick) |
    | ``platform`` | 18 + H | free GPU fraction of the platform, log total GPUs (1 .. 65,536), log regions (1 .. 256), share of regions down, per-region free fraction (min, quartiles, max), price now (min, mean, max; USD/MWh / 300), link capacity (mean, min; /100 Gbit/s), mean flow share, mean latency (/300 ms), log links (1 .. 4096), GPU-weighted mean peak TFLOP/s (/1000), then the GPU-weighted mean price forecast for each of the next H hours |

    ## Rewards
    ``r = -jct_weight * job_seconds / (3600 * K) - cost_weight * cost_usd - egress_weight * egress_usd
    + throughput_weight * tokens / 1e9``, where ``job_seconds`` is the time every job spent in the
    system (waiting or running) since the previous step, ``cost_usd`` the electricity cost,
    ``egress_usd`` what the clouds billed for bytes sent between regions (pipeline activations and
    gradients, data-parallel syncs across regions, state moved by re-plans; the scenario's
    ``egress`` section prices them) and ``tokens`` the tokens trained since then. With
    ``cost_weight = egress_weight = 0`` and ``throughput_weight = 0`` the undiscounted return is
    ``-sum(JCT) / (3600 K)``. Weights default to the scenario's ``reward`` section;
    ``egress_weight`` left out there is ``cost_weight`` (a dollar is a dollar). ``info`` carries the
    raw, unweighted metrics: ``cost_usd`` (electricity), ``egress_usd`` and ``total_cost_usd`` so
    far, and their ``step_`` increments; ``carbon_kg`` (operational kgCO2e so far), ``step_carbon_kg``
    and ``carbon_signal`` (``lca`` or ``direct``); with ``carbon_weight > 0`` the reward also has
    ``- carbon_weight * step_carbon_kg``.  The final ``info`` names the zones whose carbon is the
    scenario's fallback (``carbon_fallback_zones``: no series of their own).

    ## Starting State
    ``reset(seed=s)`` draws an episode (jobs, price noise, outages, link dynamics) from
    ``self.np_random``: exactly the episode of ``make_simulator(scenario, s)``. The state is the
    first decision point (the first job waits).

    ## Episode End
    Terminated when every job finished. Truncated when the simulator stops with jobs still in the
    system: at the scenario's horizon (``sim.horizon_h``), or when nothing can happen any more (the
    clock then moves to the horizon), both time limits outside the observation; and by ``TimeLimit``
    at the registered ``max_episode_steps``. When the simulator stops (either flag), the final
    ``info`` holds ``episode_report`` (:class:`sfenv.sim.metrics.EpisodeReport` as a dict); a
    ``TimeLimit`` truncation happens before that, and its ``info`` has no report: play the rest with
    ``for _ in env.unwrapped.wait_to_end(): pass`` (:meth:`wait_to_end`, as the evaluator does) and
    read ``env.unwrapped.sim.report()``.

    ## Arguments
    ``None`` takes the scenario's value. Numbers go through the scenario's validation
    (:meth:`~sfenv.scenario.Scenario.with_overrides`): a bad one raises
    :class:`~sfenv.scenario.ScenarioError` (a ``ValueError``) naming the argument, the value and
    what was expected (the bounds and their reasons: docs/scenarios.md, Bounds); ``self.scenario`` is
    the scenario with the overrides applied, and the sizes
    in use are the attributes ``max_candidates``, ``queue_window``, ``forecast_hours``, ``num_regions``
    and ``num_links`` (``N``, ``K``, ``H``, ``C`` and ``E`` are read-only aliases of them).

    | Parameter | Type | Default | Description |
    |---|---|---|---|
    | ``scenario`` | str, Path, dict or Scenario | ``"spider-8"`` | bundled name; a YAML file if it has a path separator or a ``.yaml`` suffix (see :func:`~sfenv.scenario.load_scenario`); dict or :class:`~sfenv.scenario.Scenario` |
    | ``render_mode`` | str or None | None | ``"ansi"`` (text) or ``"rgb_array"`` (image) |
    | ``proposers`` | non-empty list of CandidateProposer (objects with ``candidates(view, k)``), a name of :data:`sfenv.env.proposers.PROPOSER_SETS` or None | None | candidate sources (:func:`sfenv.env.proposers.named_proposers`); None or ``"default"``: :func:`sfenv.env.proposers.default_proposers`; ``"first-fit"``: also the decisions of ``fastest+swf`` (candidate 0) and ``fifo+swf``; ``"best"``: also ``spinsearch+swf``'s and SpinSearch's plans (:func:`sfenv.agents.proposer_sets.best_heuristic_proposers`); ``"best+spantrain"``: also ``spantrain+swf``'s; ``"carbon"``: ``"first-fit"`` with the decisions of ``spantrain+swf``, ``forecast-carbon+swf`` and ``lowest-carbon+swf`` (:func:`sfenv.agents.proposer_sets.carbon`).  Each richer set costs steps/s: docs/env.md gives measured rates |
    | ``max_candidates`` | int, 1..256 | ``env.max_candidates`` (16) | ``N``, candidate slots; actions are ``0..N`` |
    | ``queue_window`` | int, 1..256 | ``env.queue_window`` (8) | ``K``, waiting jobs shown in ``queue`` |
    | ``forecast_hours`` | int, 1..168 | ``env.forecast_hours`` (6) | ``H``, hours of price forecast per region |
    | ``jct_weight`` | float, 0..1e6 | ``reward.jct_weight`` (1) | weight of the job-time term |
    | ``cost_weight`` | float, 0..1e6 | ``reward.cost_weight`` (0) | weight per USD of electricity |
    | ``egress_weight`` | float, 0..1e6 | ``reward.egress_weight`` (None: ``cost_weight``) | weight per USD of egress (bytes sent between regions) |
    | ``carbon_weight`` | float, 0..1e6 | ``reward.carbon_weight`` (0) | weight per kgCO2e emitted (operational, the scenario's ``carbon.signal``) |
    | ``carbon_obs`` | bool | False | add the ``carbon`` key: intensity now and its forecast per region (see Observation Space; a scenario without a ``carbon`` section shows its fallback) |
    | ``throughput_weight`` | float, 0..1e6 | ``reward.throughput_weight`` (0) | weight per 1e9 tokens trained |
    | ``invalid_action_penalty`` | float, 0..1e6 | ``reward.invalid_action_penalty`` (0.1) | penalty of a masked action |
    | ``num_jobs`` | int, 1..100,000 | ``workload.num_jobs`` (40) | jobs per episode |
    | ``obs_mode`` | str | ``"full"`` | ``"full"`` (per-region and per-link features) or ``"compact"`` (topology-independent size, see Observation Space) |
    | ``invalid_action_limit`` | int > 0 or None | None | masked actions in a row after which a masked action acts as wait (None: never) |
    | ``privileged_obs`` | bool | False | add the share of jobs still to arrive to ``time`` (privileged, see Observation Space; True for the ``-v0`` ids) |
    | ``work_conserving`` | bool | False | wait is masked while a candidate can start (a work-conserving scheduler: it never waits while it could start a job); waiting then is an invalid action |
    | ``min_relative_mfu`` | float in (0, 1] or None | None | a candidate across regions is left out of the menu when its predicted MFU (tokens/s per peak FLOP/s of its GPUs) is below this share of the best single-region plan's of the same job (each region's whole capacity, up to the job's ``max_gpus``): WAN-bound plans leave the menu, and with ``work_conserving`` they no longer force a start.  None: every proposed plan is a candidate |
    | ``min_spread_speedup`` | float in (0, 10] or None | None | a candidate across regions is left out of the menu unless the job would finish this many times sooner on it, from now, than on its best single-region plan (each region's capacity up to ``max_gpus`` and its halves), waiting until running jobs free that region's GPUs at their predicted ends (an optimistic wait: other waiting jobs and arrivals are not counted).  1: a spread plan must not finish later than waiting for one region.  Combines with ``min_relative_mfu`` (both must pass).  None: no such test |
    | ``spread_wait`` | str | ``"running"`` | the wait ``min_spread_speedup`` counts: ``"running"``, until running jobs free the region (optimistic); ``"queue"``, also behind the waiting jobs with less work, each placed in turn on its earliest-finishing single-region plan (shortest work first, no backfilling; arrivals still not counted); ``"arrivals"``, the running jobs' wait stretched by the jobs with less work that arrive meanwhile and go first: divided by ``1 - rho``, ``rho`` the GPU-seconds per platform GPU-second of the jobs with less work arrived so far (the mean M/G/1 busy period started by a wait ``W`` is ``W / (1 - rho)``); ``rho >= 1`` keeps every spread plan |
    | ``floor_exempt`` | list of str | ``()`` | recorded decisions that ``min_relative_mfu`` and ``min_spread_speedup`` never leave out: the names of decision proposers among ``proposers`` (e.g. ``["spantrain+swf"]`` with ``"best+spantrain"``); a heuristic that weighs the WAN in its own choice keeps its plans across regions on the menu.  Any other name raises |
    | ``floor_exempt_from`` | list of str | both | the floors ``floor_exempt`` decisions skip: some of ``"min_relative_mfu"`` and ``"min_spread_speedup"``; e.g. ``["min_relative_mfu"]`` keeps the named decision only where it does not finish later than waiting for one region |
    | ``wan_sharing`` | str or None | ``sim.wan_sharing`` (``"v5"``) | how transfers share the WAN: ``"v5"`` (env v5's and v6's model: a plan's own hops share links as its schedule plays them, zero-bubble schedules included, and the replay's pipeline time is the plan's, :mod:`sfenv.model.hopshare`), ``"v4"`` (env v4's, what the ``-v4`` ids play), ``"v3"`` (env v3's, what the ``-v3`` ids play) or ``"v2"`` (env v2's, what the ``-v2`` ids play); :attr:`sfenv.model.perf.PerfParams.wan_sharing` |
    | ``vm_pair_cap`` | str or None | ``sim.vm_pair_cap`` (``"server"``) | what a link's measured per-VM-pair rate binds: ``"server"`` (env v6's), the replica pairs of a pipeline hop one server sends share one VM pair's rate, as NCCL between two GCP regions measured; ``"member"`` (env v5's, what the ``-v5`` ids play), each replica pair as if on a VM pair of its own; :attr:`sfenv.model.perf.PerfParams.vm_pair_cap` |
    | ``skip_zero_bubble_periods`` | bool or None | ``sim.skip_zero_bubble_periods`` (True) | replay a zero-bubble plan's repeated steady state once (env v6's; within about 1e-9 of the full replay) or every period (False, env v5's, what the ``-v5`` ids play); :attr:`sfenv.model.perf.PerfParams.skip_zero_bubble_periods` |

    >>> import gymnasium as gym, sfenv
    >>> env = gym.make("sfenv/GeoSched-v6", num_jobs=8, max_candidates=4)
    >>> env.action_space
    Discrete(5)

    ## Version History
    * v6: two WAN settings change default (docs/model.md): a link's measured per-VM-pair rate binds
      the replica pairs of a hop that one server sends together (``sim.vm_pair_cap: server``; v5 gave
      each replica pair a VM pair's rate, and NCCL between two GCP regions measured several GPU pairs
      of one VM 2-3x below it: mean error 101 % -> 20 % on 48 measured transfers), and a zero-bubble
      plan's steady state is replayed once (``sim.skip_zero_bubble_periods``; times within about 1e-9
      of v5's, the replays half the time).  Observation and action spaces are v5's (models trained on
      v5 load); episodes with several replicas of a hop per server on links with measured pair rates
      (geo-8 and its variants, measured-grid generated platforms) differ.  The ``-v5`` ... ``-v2``
      ids stay registered and play their models.
    * v5: the WAN sharing model ``v5`` (``sim.wan_sharing``, :mod:`sfenv.model.hopshare`, docs/model.md):
      as v4, but where a plan's own hops share a link its pipeline time is its replay's own (v4
      assembled a pipeline again from each hop's mean played transfer time: CR-LCF's 7-stage chain on
      CEE 9.6 % slower than the flow-level check plays it alone), and ZB-H1/ZB-H2 plans are replayed
      too, in the hand-crafted and the greedy order, the faster taken (v4 timed them at rates from a
      sweep: SpanTrain's plans on CEE up to 21 % fast).  Observation and action spaces are v4's
      (models trained on v4 load); episodes whose plans' own hops share links differ.  The ``-v4``,
      ``-v3`` and ``-v2`` ids stay registered and play their models.
    * v4: the WAN sharing model ``v4`` (``sim.wan_sharing``, :mod:`sfenv.model.hopshare`, docs/model.md):
      as v3, but where a 1F1B or GPipe plan's own hops share a link, one iteration of its schedule is
      replayed with those hops sharing the link max-min as they send (v3 swept the schedule once at
      the rates each hop gets alone, and deep chains were 10-14 % optimistic against the flow-level
      check).  Observation and action spaces are v3's (models trained on v3 load); episodes whose
      plans' own hops share links differ.  The ``-v3`` and ``-v2`` ids stay registered and play
      their models (``wan_sharing="v3"``, ``"v2"``).
    * v3: the WAN sharing model ``v3`` (``sim.wan_sharing``, :mod:`sfenv.model.sharing`, docs/model.md):
      a hop's transfer sees other jobs' bursts come and go (a two-state Markov-modulated rate,
      Kulkarni, Nicola & Trivedi 1987) and a job's own hops send as a sweep of its schedule has them,
      closer to the flow-level check on fresh cases.  Observation and action spaces are v2's (models
      trained on v2 load), but episodes with transfers between regions differ.  The ``-v2`` ids stay
      registered and play v2's model (``wan_sharing="v2"``), so v2's results can be reproduced.
    * v2 (sfenv 0.2, benchmark protocol 1): the WAN model of issue 31: links are full duplex and
      flows share them by their demand (duty-weighted max-min, :mod:`sfenv.model.sharing`), a
      transfer is bounded by TCP's window over its round trip (``sim.wan_streams``,
      ``sim.tcp_window_mib``), bytes between regions are billed as egress (``info["egress_usd"]``,
      ``reward.egress_weight``), geo-8's flows are capped at the measured VM-pair rates, a
      data-parallel ring across servers uses its members' NICs, and the zero-bubble schedules follow
      Qi et al.'s orders.  Observation and action spaces are v1's (models trained on v1 load), but
      episodes differ.  The ``-v1`` ids are no longer registered (the v1 model is gone): Gymnasium
      names ``-v2`` when they are asked for.
    * v1 (benchmark protocol 1, :mod:`sfenv.runs.protocol`): the default observation holds nothing a real
      scheduler could not know: the ``time`` block lost the share of jobs still to arrive (5
      entries, was 6), which is now the opt-in ``privileged_obs=True``.  Dynamics, actions and
      rewards are those of the ``-v0`` ids of the same release (both follow the calibrated
      performance model of :mod:`sfenv.model.compute`, so 0.1.0's v0 episodes differ).  Models trained on v0 do not load on v1 (the observation space
      differs); play them on the ``-v0`` ids or with ``privileged_obs=True``.
    * v0: initial version (``time`` held the share of jobs still to arrive).  Deprecated; the
      ``-v0`` ids stay registered (as ``privileged_obs=True``, on the current model) so that models
      trained on v0's observation can still be played; their episodes follow the current model (v3's).
    """

    # gym.Env declares it an instance variable: mypy refuses a ClassVar override
    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}  # noqa: RUF012
    #: ``Discrete(N + 1)`` (see Action Space)
    action_space: spaces.Discrete[np.int64]
    #: gives the observation space and builds each observation: the encoder of ``obs_mode``
    #: (:func:`sfenv.env.observation.observation_encoder`)
    observation_encoder: ObservationEncoder

    def __init__(
        self,
        scenario: str | Path | dict | Scenario = DEFAULT_SCENARIO,
        render_mode: str | None = None,
        proposers: Sequence[CandidateProposer] | str | None = None,
        max_candidates: int | None = None,
        queue_window: int | None = None,
        forecast_hours: int | None = None,
        jct_weight: float | None = None,
        cost_weight: float | None = None,
        throughput_weight: float | None = None,
        invalid_action_penalty: float | None = None,
        num_jobs: int | None = None,
        obs_mode: str = "full",
        invalid_action_limit: int | None = None,
        privileged_obs: bool = False,
        work_conserving: bool = False,
        egress_weight: float | None = None,
        carbon_weight: float | None = None,
        carbon_obs: bool = False,
        min_relative_mfu: float | None = None,
        min_spread_speedup: float | None = None,
        spread_wait: str = "running",
        floor_exempt: Sequence[str] = (),
        floor_exempt_from: Sequence[str] = FLOOR_TESTS,
        wan_sharing: str | None = None,
        vm_pair_cap: str | None = None,
        skip_zero_bubble_periods: bool | None = None,
    ) -> None:
        _check_arguments(render_mode, self.metadata["render_modes"], obs_mode, invalid_action_limit, privileged_obs,
                         work_conserving)
        if min_relative_mfu is not None and (
            isinstance(min_relative_mfu, bool) or not isinstance(min_relative_mfu, (int, float, np.floating))
            or not 0.0 < float(min_relative_mfu) <= 1.0
        ):
            raise InvalidInput(f"GeoSchedEnv: invalid argument min_relative_mfu={min_relative_mfu!r}: "
                               "expected a number in (0, 1] or None")
        #: multi-region candidates whose predicted MFU is below this share of the job's best single-region
        #: plan's are left out of the menu (None: none are; see the parameter table)
        self.min_relative_mfu = None if min_relative_mfu is None else float(min_relative_mfu)
        if min_spread_speedup is not None and (
            isinstance(min_spread_speedup, bool)
            or not isinstance(min_spread_speedup, (int, float, np.floating))
            or not 0.0 < float(min_spread_speedup) <= 10.0
        ):
            raise InvalidInput(f"GeoSchedEnv: invalid argument min_spread_speedup={min_spread_speedup!r}: "
                               "expected a number in (0, 10] or None")
        #: multi-region candidates must finish this many times sooner than the job would on one region,
        #: counting the wait for that region's GPUs (None: no such test; see the parameter table)
        self.min_spread_speedup = None if min_spread_speedup is None else float(min_spread_speedup)
        if spread_wait not in SPREAD_WAITS:
            raise InvalidInput(f"GeoSchedEnv: invalid argument spread_wait={spread_wait!r}: expected one of "
                               f"{list(SPREAD_WAITS)}")
        #: the wait ``min_spread_speedup`` compares with: ``running``, ``queue`` or ``arrivals`` (see the parameter table)
        self.spread_wait = spread_wait
        if not isinstance(carbon_obs, (bool, np.bool_)):
            raise InvalidInput(f"GeoSchedEnv: invalid argument carbon_obs={carbon_obs!r}: expected True or False")
        #: the observation has the ``carbon`` key (see Observation Space)
        self.carbon_obs = bool(carbon_obs)
        self.render_mode = render_mode
        #: ``"full"`` or ``"compact"`` (see Observation Space)
        self.obs_mode = obs_mode
        #: the ``time`` block holds the share of jobs still to arrive (see Observation Space)
        self.privileged_obs = bool(privileged_obs)
        #: wait is valid only when no candidate can start (see the parameter table)
        self.work_conserving = bool(work_conserving)
        #: masked actions in a row after which a masked action acts as wait (None: never)
        self.invalid_action_limit = None if invalid_action_limit is None else int(invalid_action_limit)
        sc = _with_arguments(
            load_scenario(scenario),
            workload={"num_jobs": num_jobs},
            sim={"wan_sharing": wan_sharing, "vm_pair_cap": vm_pair_cap,
                 "skip_zero_bubble_periods": skip_zero_bubble_periods},
            env={"max_candidates": max_candidates, "queue_window": queue_window, "forecast_hours": forecast_hours},
            reward={"jct_weight": jct_weight, "cost_weight": cost_weight, "throughput_weight": throughput_weight,
                    "invalid_action_penalty": invalid_action_penalty, "egress_weight": egress_weight,
                    "carbon_weight": carbon_weight},
        )
        #: the scenario played, with the constructor's arguments applied
        self.scenario = sc
        prepare_compiled()  # the compiled pipeline replays load here (once per process), not in a step
        ecfg, rcfg = sc.cfg.env, sc.cfg.reward
        #: candidate slots, ``N``: actions ``0..N-1`` start a candidate, action ``N`` waits
        self.max_candidates: int = ecfg.max_candidates
        #: waiting jobs shown in the ``queue`` block, ``K``
        self.queue_window: int = ecfg.queue_window
        #: hours of price forecast per region, ``H``
        self.forecast_hours: int = ecfg.forecast_hours
        #: regions of the scenario's topology, ``C``
        self.num_regions: int = sc.topology.num_regions
        #: WAN links of the scenario's topology, ``E``
        self.num_links: int = sc.topology.num_links
        self.jct_weight = rcfg.jct_weight
        self.cost_weight = rcfg.cost_weight
        #: weight per USD of egress (the scenario's ``reward.egress_weight``, or ``cost_weight`` when it has none)
        self.egress_weight = rcfg.cost_weight if rcfg.egress_weight is None else rcfg.egress_weight
        self.throughput_weight = rcfg.throughput_weight
        self.invalid_action_penalty = rcfg.invalid_action_penalty
        #: weight per kgCO2e (the scenario's ``reward.carbon_weight``; 0: carbon does not enter the reward)
        self.carbon_weight = rcfg.carbon_weight
        #: True when the ``carbon`` key holds the true future (``carbon.forecast.kind: oracle``): a
        #: privileged input, as ``privileged_obs``; results with it are bounds, not comparable
        self.privileged_carbon = self.carbon_obs and sc.carbon_cfg.forecast.kind == "oracle"
        #: the proposers' plan memo, shared across episodes
        self.cache = PlanCache()
        self._evaluations = evaluation_cache_for(sc)  # single-region plan evaluations, across episodes
        self.proposers = _proposers_from(proposers, self.queue_window, self.cache)
        #: per proposer, whether its recorded decision skips ``min_relative_mfu`` and ``min_spread_speedup``
        self._floor_exempt = _floor_exempt_flags(floor_exempt, self.proposers)
        #: the names ``floor_exempt`` gave (see the parameter table)
        self.floor_exempt = tuple(floor_exempt)
        #: the floors those decisions skip (see the parameter table)
        self.floor_exempt_from = _floor_exempt_tests(floor_exempt_from)
        self.sim: Simulator | None = None
        self._view: SimView | None = None
        self._candidates: list[Plan] = []
        self._cand_perf: list[PlanPerf | None] = []
        #: the recorded decisions on this step's menu, by proposer name (:meth:`decision_action`)
        self._decisions: dict[str, Plan | None] = {}
        #: job id -> its best single-region tokens/s per peak FLOP/s (``min_relative_mfu``), this episode
        self._best_single_mfu: dict[int, float] = {}
        #: job id -> its single-region options (region, GPUs, iteration time) (``min_spread_speedup``), this episode
        self._single_options: dict[int, list[tuple[int, int, float]]] = {}
        #: job id -> its earliest predicted finish on one region, from now (``min_spread_speedup``), this step
        self._single_finish: dict[int, float] = {}
        #: per region, the running jobs' (seconds to end, GPUs) and usable GPUs (``min_spread_speedup``), this step
        self._holds: tuple[list[list[tuple[float, int]]], list[int]] | None = None
        self._queue_finish: dict[int, float] | None = None  # spread_wait "queue": job id -> finish, this step
        #: spread_wait "arrivals": the arrived jobs' work (GPU-seconds on their cheapest single-region option),
        #: by job id (ids are in arrival order), this episode
        self._arrived_work: list[float] = []
        self._mask = np.zeros(self.max_candidates + 1, dtype=bool)
        #: the mask with the first n candidate slots and wait valid, per n (copied into ``_mask`` each step)
        #: (work_conserving: wait valid only when no candidate is)
        self._mask_rows = [np.concatenate([np.arange(self.max_candidates) < n, [n == 0 or not self.work_conserving]])
                           for n in range(self.max_candidates + 1)]
        self._last_invalid = False
        self._forced_wait = False
        self._invalid_run = 0
        self._renderer: Any = None
        self._define_spaces()

    def _define_spaces(self) -> None:
        """Set :attr:`observation_encoder`, the action space and the observation space (the encoder's)."""
        self.observation_encoder = observation_encoder(self, self.obs_mode)
        # the observation of the current state, bound once (the step's hot path)
        self._obs: Callable[[], dict[str, np.ndarray]] = self.observation_encoder.observe
        self.action_space = spaces.Discrete(self.max_candidates + 1)
        # gymnasium types a Dict space's elements as dict[str, Space]; this one's are dict[str, ndarray] (Boxes')
        self.observation_space = cast("spaces.Space[dict[str, np.ndarray]]", self.observation_encoder.space())

    @property
    def N(self) -> int:
        """Read-only alias of :attr:`max_candidates` (``N`` in the class docstring)."""
        return self.max_candidates

    @property
    def K(self) -> int:
        """Read-only alias of :attr:`queue_window` (``K`` in the class docstring)."""
        return self.queue_window

    @property
    def H(self) -> int:
        """Read-only alias of :attr:`forecast_hours` (``H`` in the class docstring)."""
        return self.forecast_hours

    @property
    def C(self) -> int:
        """Read-only alias of :attr:`num_regions` (``C`` in the class docstring)."""
        return self.num_regions

    @property
    def E(self) -> int:
        """Read-only alias of :attr:`num_links` (``E`` in the class docstring)."""
        return self.num_links

    # ------------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict[str, np.ndarray], dict]:
        """Start a new episode (see the class docstring, Starting State).

        :param seed: the episode's seed (see :meth:`gymnasium.Env.reset`).
        :param options: None or an empty dict: the environment reads no reset option (the scenario and
            the constructor's arguments set everything).
        :raises InvalidInput: naming ``options`` for anything else (a key, or a value that is not a dict).
        """
        if options is not None:
            if not isinstance(options, dict):
                raise InvalidInput(f"GeoSchedEnv.reset: invalid argument options={_short(options)}: expected "
                                   "None or a dict (the environment reads no reset option)")
            if options:
                raise InvalidInput(f"GeoSchedEnv.reset: options: unknown key {_short(next(iter(options)))}; the "
                                   "environment reads no reset option (set the scenario, e.g. workload.num_jobs, "
                                   "with Scenario.with_overrides, and the rest with the constructor's arguments)")
        super().reset(seed=seed)
        self.sim = make_simulator(self.scenario, self.np_random, self._evaluations)
        self._view = self.sim.view()
        self.cache.new_episode()
        self._best_single_mfu.clear()
        self._single_options.clear()
        self._arrived_work.clear()
        self.observation_encoder.new_episode(self.sim)
        for p in self.proposers:
            if isinstance(p, Proposer):
                p.reset()
        self._last_in_system = self._job_seconds()
        self._last_totals = self.sim.totals()
        self._last_egress = self.sim.egress_usd()
        self._last_carbon = self.sim.carbon_kg()
        self._last_invalid = False
        self._invalid_run = 0
        self._forced_wait = False
        self._build_candidates()
        return self._obs(), self._info(0.0, 0.0, 0.0, 0.0, 0.0)

    def step(self, action: int | np.integer | np.ndarray) -> tuple[dict[str, np.ndarray], float, bool, bool, dict]:
        """Start candidate ``action`` or wait (``action == N``); see the class docstring (Action Space).

        :param action: a Python ``int``, a NumPy integer or a 0-d integer array, in ``[0, N]``.
        :raises ValueError: for an action outside the action space.
        """
        sim = self.sim
        if sim is None:
            raise RuntimeError("call reset() before step()")
        a = self._action_index(action)
        invalid = forced = False
        if sim.done:
            invalid = True
        elif a == self.max_candidates and self._mask[a]:
            sim.wait()
        elif 0 <= a < self.max_candidates and self._mask[a]:
            sim.schedule(self._candidates[a])
            sim.advance()
        else:
            invalid = True
            limit = self.invalid_action_limit
            if limit is not None and self._invalid_run + 1 >= limit:
                sim.wait()  # the limit reached: time moves on as if the policy had waited
                forced = True
        self._invalid_run = self._invalid_run + 1 if invalid else 0
        self._last_invalid = invalid
        self._forced_wait = forced
        reward, (d_job_s, d_cost, d_tokens, d_egress, d_carbon) = self._reward_since_last_step(sim)
        reward -= self.invalid_action_penalty if invalid else 0.0
        ended = sim.done
        # every job finished: the MDP's end; the horizon (or a dead end, cut to it) with jobs left: a time limit
        terminated = ended and sim.finished_count == len(sim.jobs)
        if not invalid or forced:
            self._build_candidates()
        info = self._info(d_job_s, d_cost, d_tokens, d_egress, d_carbon)
        if ended:
            info["episode_report"] = sim.report().to_dict()
            info["carbon_fallback_zones"] = list(sim.carbon.fallback_zones) if sim.carbon is not None else []
        return self._obs(), float(reward), bool(terminated), bool(ended and not terminated), info

    def _reward_since_last_step(self, sim: Simulator) -> tuple[float, tuple[float, float, float, float, float]]:
        """The reward of what happened since the last step, penalties aside, and its parts; moves the marks on.

        :return: the reward and (job-seconds, electricity USD, tokens, egress USD, carbon kg) since the last step.
        """
        in_sys = self._job_seconds()
        totals = sim.totals()
        d_job_s = in_sys - self._last_in_system
        d_cost = totals[0] - self._last_totals[0]
        d_tokens = totals[2] - self._last_totals[2]
        egress = sim.egress_usd()
        d_egress = egress - self._last_egress
        carbon = sim.carbon_kg()
        d_carbon = carbon - self._last_carbon
        self._last_in_system, self._last_totals, self._last_egress = in_sys, totals, egress
        self._last_carbon = carbon
        reward = (
            -self.jct_weight * d_job_s / (3600.0 * self.queue_window)
            - self.cost_weight * d_cost
            - self.egress_weight * d_egress
            + self.throughput_weight * d_tokens / 1e9
        )
        if self.carbon_weight:  # (0: the reward's float operations exactly as before carbon existed)
            reward -= self.carbon_weight * d_carbon
        return reward, (d_job_s, d_cost, d_tokens, d_egress, d_carbon)

    def wait_to_end(self) -> Iterator[float]:
        """Play the episode on to its end with waits, whatever the mask says; yield each wait's reward.

        What an evaluator does with a policy it stopped (at its step limit, e.g. one that keeps
        choosing masked actions): time moves on as if the policy had waited at every decision, so
        running jobs finish, jobs never started stay in the system to the end (and count, censored),
        and the episode's report is the finished episode's.  Each wait is what
        ``Simulator.run`` does for a ``None`` decision (a replay of a log that records one wait per
        yield plays the same episode) and yields the reward :meth:`step` would give a valid wait, so
        a return summed over the steps and these yields is the finished episode's return.
        Nothing is yielded if the episode has ended.

        :raises RuntimeError: before the first :meth:`reset`.
        """
        sim = self.sim
        if sim is None:
            raise RuntimeError("call reset() before wait_to_end()")
        while not sim.done:
            sim.wait()
            reward = self._reward_since_last_step(sim)[0]
            if sim.done:  # as step leaves an ended episode: no candidates, only wait valid
                self._build_candidates()
            yield reward

    def action_masks(self) -> np.ndarray:
        """Valid actions (True = valid): candidate slots that can start now, and wait.

        Wait is always valid, or with ``work_conserving`` only when no candidate can start.

        :raises RuntimeError: before the first :meth:`reset` (there is no state to mask yet).
        """
        if self.sim is None:
            raise RuntimeError("call reset() before action_masks(): there is no episode yet")
        return self._mask.copy()

    @property
    def view(self) -> SimView:
        """Read-only view of the current simulator state (for agents and proposers)."""
        if self._view is None:
            raise RuntimeError("call reset() first")
        return self._view

    @property
    def candidates(self) -> list[Plan]:
        """The current candidate plans; index i is action i."""
        return list(self._candidates)

    @property
    def wait_action(self) -> int:
        """The index of the wait action, ``N``."""
        return self.max_candidates

    def action_for(self, plan: Plan | None) -> int:
        """The action that starts ``plan`` now (``N`` = wait for None).

        If ``plan`` is not among the candidates it is injected into the last slot (the observation
        already returned does not show it); an unstartable plan maps to its slot, masked invalid.
        """
        if plan is None:
            return self.max_candidates
        try:
            return self._candidates.index(plan)
        except ValueError:
            pass
        idx = len(self._candidates) if len(self._candidates) < self.max_candidates else self.max_candidates - 1
        perf = self.view.evaluate(plan)
        if idx == len(self._candidates):
            self._candidates.append(plan)
            self._cand_perf.append(perf)
        else:
            self._candidates[idx] = plan
            self._cand_perf[idx] = perf
        self._mask[idx] = self.view.can_start(plan)
        return idx

    def decision_action(self, name: str) -> int | None:
        """The action that starts the decision heuristic ``name`` made for this step's menu, if the menu offers it.

        ``name`` is a recorded decision among the env's proposers (a
        :class:`~sfenv.env.proposers.DecisionRecorder`, e.g. ``"spantrain+swf"`` with
        ``proposers="best+spantrain"``).  None when that heuristic would wait, when a floor
        (``min_relative_mfu``, ``min_spread_speedup``) or a full menu left its decision out, or when
        no job is waiting.  A policy that defers to a heuristic (``play_defer`` in a recipe,
        :mod:`sfenv.agents.deferral`) reads it before each action.

        :raises InvalidInput: naming ``name`` when no proposer of the env records that decision.
        """
        recorded = [p.name for p in self.proposers if isinstance(p, DecisionRecorder)]
        if name not in recorded:
            raise InvalidInput(f"GeoSchedEnv.decision_action: invalid argument name={str(name)[:100]!r}: no proposer "
                               f"of this env records that decision; recorded: {recorded} (e.g. proposers=\"best\")")
        plan = self._decisions.get(name)
        if plan is None or plan not in self._candidates:
            return None
        index = self._candidates.index(plan)
        return index if self._mask[index] else None

    def render(self) -> Any:
        """``"ansi"``: a text table; ``"rgb_array"``: an image of the map, prices and utilisation."""
        if self.render_mode is None:
            gym.logger.warn("render() called without a render_mode; pass render_mode= to the constructor")
            return None
        if self.sim is None:
            raise RuntimeError("call reset() before render()")
        import sfenv.env.render as _render  # matplotlib and networkx only when rendering

        if self.render_mode == "ansi":
            return _render.ansi(self.sim, len(self._candidates))
        if self._renderer is None:
            self._renderer = _render.MapRenderer(self.scenario.topology)
        return self._renderer.draw(self.sim, self.forecast_hours)

    def close(self) -> None:
        """Release the renderer (safe to call twice)."""
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None

    # ------------------------------------------------------------------ internals
    def _action_index(self, action: object) -> int:
        """``action`` as an index in ``[0, N]``; anything outside the action space raises.

        Accepted: a Python ``int`` (not a ``bool``), a NumPy integer scalar, or a 0-d integer
        array, as :meth:`gymnasium.spaces.Discrete.contains` accepts them, booleans excepted.
        """
        if isinstance(action, (int, np.integer)) and not isinstance(action, bool):
            a = int(action)
        elif isinstance(action, np.ndarray) and action.shape == () and np.issubdtype(action.dtype, np.integer):
            a = int(action)
        else:
            raise ValueError(
                f"action {action!r} ({type(action).__name__}) is not in the action space {self.action_space}: "
                f"expected an integer in [0, {self.max_candidates}] (a Python int, a NumPy integer or a 0-d integer "
                "array)"
            )
        if not 0 <= a <= self.max_candidates:
            raise ValueError(
                f"action {a} is not in the action space {self.action_space}: expected 0..{self.max_candidates - 1} "
                f"(start a candidate) or {self.max_candidates} (wait)"
            )
        return a

    def _job_seconds(self) -> float:
        """Total time jobs have spent in the system up to now."""
        assert self.sim is not None
        return self.sim.job_seconds

    def _build_candidates(self) -> None:
        sim, view = self.sim, self._view
        assert sim is not None and view is not None
        cands: list[Plan] = []
        asked: set[int] = set()  # ids of the proposers asked this step (the loop stops on a full menu)
        self.cache.new_step()
        if not sim.done and sim.waiting:
            seen: set[Plan] = set()
            self._single_finish.clear()
            self._holds = None
            self._queue_finish = None
            efficient = (self._efficient if self.min_relative_mfu is not None or self.min_spread_speedup is not None
                         else None)
            rejected: set[Plan] = set()  # left out by a floor (an exempt decision may still bring it back)
            for p, exempt in zip(self.proposers, self._floor_exempt, strict=True):
                asked.add(id(p))
                for plan in p.candidates(view, self.max_candidates - len(cands)):
                    if plan in seen and plan not in rejected:
                        continue
                    seen.add(plan)
                    if efficient is None or (exempt and plan == cast(DecisionRecorder, p).decision
                                             and self._efficient(plan, skip=self.floor_exempt_from)):
                        cands.append(plan)
                        rejected.discard(plan)
                    elif plan not in rejected:
                        if efficient(plan):
                            cands.append(plan)
                        else:
                            rejected.add(plan)
                if len(cands) >= self.max_candidates:
                    break
        self._candidates = cands[: self.max_candidates]
        self._decisions = {p.name: p.decision for p in self.proposers  # asked this step: read now, not stale
                           if isinstance(p, DecisionRecorder) and id(p) in asked}
        recent = self.cache.recent
        self._cand_perf = [recent.get(p) for p in self._candidates]
        self._mask[:] = self._mask_rows[len(self._candidates)]  # proposers return plans startable now; wait

    def _mfu(self, plan: Plan, perf: PlanPerf) -> float:
        """``plan``'s tokens/s per peak FLOP/s of its GPUs: its MFU up to the job's FLOPs per token."""
        flops = self.scenario.topology.gpu_flops
        peak = sum(replicas * stage.tp * float(flops[region]) for stage in plan.stages
                   for region, replicas in stage.placement)
        return perf.throughput / peak if perf.feasible and peak > 0 else 0.0

    def _best_single_region_mfu(self, job_id: int) -> float:
        """The job's best single-region MFU (:meth:`_mfu`): each region's whole capacity, up to ``max_gpus``.

        Single-region plans never read the WAN, so this is fixed for the episode (cached per job).
        """
        best = self._best_single_mfu.get(job_id)
        if best is None:
            view = self.view
            job = view.job(job_id)
            best = 0.0
            for region, gpus in enumerate(self.scenario.topology.gpu_counts.tolist()):
                budget = round_budget(min(int(gpus), job.max_gpus))
                if budget < job.min_gpus:
                    continue
                res = self.cache.fit(view, job, (region,), (budget,))
                if res is not None:
                    best = max(best, self._mfu(*res))
            self._best_single_mfu[job_id] = best
        return best

    def _efficient(self, plan: Plan, skip: frozenset[str] = frozenset()) -> bool:
        """False for a plan across regions that fails ``min_relative_mfu`` or ``min_spread_speedup``.

        A job no single region can hold keeps every plan.

        :param skip: names of the floors (:data:`FLOOR_TESTS`) not applied (an exempt decision's)
        """
        if len(plan.regions) < 2 or skip.issuperset(FLOOR_TESTS):
            return True
        perf = self.cache.recent.get(plan)
        if perf is None:
            perf = self.view.evaluate(plan)
        if self.min_relative_mfu is not None and "min_relative_mfu" not in skip:
            best = self._best_single_region_mfu(plan.job_id)
            if best > 0.0 and self._mfu(plan, perf) < self.min_relative_mfu * best:
                return False
        if self.min_spread_speedup is not None and perf.feasible and "min_spread_speedup" not in skip:
            single = self._single_region_finish(plan.job_id)
            left = self._iterations_left(plan.job_id)
            if math.isfinite(single) and single < self.min_spread_speedup * left * perf.iter_time:
                return False
        return True

    def _iterations_left(self, job_id: int) -> float:
        """Iterations a waiting job still has to run."""
        return max(0.0, self.view.job(job_id).iterations - self.view.waiting_progress(job_id))

    def _single_region_options(self, job_id: int) -> list[tuple[int, int, float]]:
        """The job's single-region plans: (region, GPUs, iteration time).

        Each region's capacity up to ``max_gpus`` and its halves (rounded to the proposers' budgets);
        fixed for the episode (cached per job).
        """
        options = self._single_options.get(job_id)
        if options is None:
            view = self.view
            job = view.job(job_id)
            options = []
            for region, gpus in enumerate(self.scenario.topology.gpu_counts.tolist()):
                cap = min(int(gpus), job.max_gpus)
                for budget in sorted({round_budget(cap), round_budget(cap // 2), round_budget(cap // 4)}):
                    if budget < max(1, job.min_gpus):
                        continue
                    res = self.cache.fit(view, job, (region,), (budget,))
                    if res is not None and res[1].feasible:
                        options.append((region, res[0].gpus, res[1].iter_time))
            self._single_options[job_id] = options
        return options

    def _region_holds(self) -> tuple[list[list[tuple[float, int]]], list[int]]:
        """Per region, the running jobs' holds and the region's usable GPUs.

        A hold is (predicted seconds from now to the job's end, GPUs); usable is free now plus held, none
        in an outage.  Computed once a step.
        """
        if self._holds is None:
            view = self.view
            held: list[list[tuple[float, int]]] = [[] for _ in range(self.num_regions)]
            for info in view.running:
                for region, gpus in info.plan.gpus_by_region().items():
                    held[region].append((info.remaining_s, gpus))
            down = view.down
            usable = [0 if down[r] else int(view.free_gpus[r]) + sum(g for _, g in held[r])
                      for r in range(self.num_regions)]
            self._holds = (held, usable)
        return self._holds

    def _single_region_finish(self, job_id: int) -> float:
        """The job's earliest predicted finish on one region, in seconds from now (``inf``: none can start).

        ``spread_wait="running"``: each single-region option waits until running jobs, at their predicted
        ends, free its GPUs (other waiting jobs and future arrivals are not counted: an optimistic wait);
        ``"queue"``: :meth:`_queue_schedule`; ``"arrivals"``: the optimistic wait stretched by
        :meth:`_arrival_stretch`.
        """
        if self.spread_wait == "queue":
            return self._queue_schedule().get(job_id, math.inf)
        finish = self._single_finish.get(job_id)
        if finish is None:
            held, usable = self._region_holds()
            left = self._iterations_left(job_id)
            stretch = self._arrival_stretch(job_id) if self.spread_wait == "arrivals" else 1.0
            finish = min((_stretched(_earliest_start(held[region], usable[region], gpus, 0.0), stretch)
                          + left * iter_time
                          for region, gpus, iter_time in self._single_region_options(job_id)), default=math.inf)
            self._single_finish[job_id] = finish
        return finish

    def _arrival_stretch(self, job_id: int) -> float:
        """``1 / (1 - rho)``: how much the jobs with less work that arrive meanwhile stretch ``job_id``'s wait.

        ``rho`` is the work (GPU-seconds on each job's cheapest single-region option) of the jobs that have
        arrived so far with less work than this one, per GPU-second of the platform since the first arrival:
        the load that goes ahead of it under shortest work first.  A wait ``W`` ahead of a job then lasts
        ``W / (1 - rho)`` on average (the busy period of an M/G/1 queue started by work ``W``; Kleinrock,
        *Queueing Systems* Vol. 1, 1975, section 5.8).  Only arrivals up to now are read; ``inf`` when
        ``rho >= 1``.
        """
        view = self.view
        arrived = view.num_jobs - view.pending_arrivals
        works = self._arrived_work
        while len(works) < arrived:
            jid = len(works)
            iterations = view.job(jid).iterations
            works.append(min((gpus * iter_time * iterations for _, gpus, iter_time in self._single_region_options(jid)),
                             default=math.inf))
        elapsed = view.time - view.job(0).arrival if arrived else 0.0
        gpus = float(sum(int(g) for g in self.scenario.topology.gpu_counts.tolist()))
        if elapsed <= 0.0 or gpus <= 0.0:
            return 1.0
        own = works[job_id]
        ahead = sum(w for jid, w in enumerate(works[:arrived]) if jid != job_id and w < own)
        rho = ahead / (elapsed * gpus)
        return math.inf if rho >= 1.0 else 1.0 / (1.0 - rho)

    def _queue_schedule(self) -> dict[int, float]:
        """Each waiting job's predicted finish on one region, from now, in line behind the jobs with less work.

        The waiting jobs are taken shortest work first (their fastest single-region time); each is placed
        on its single-region option that finishes first, starting when that region's running jobs and the
        jobs placed before it leave it enough GPUs and not before the region's last placed start (no
        backfilling), and holds them to its finish.  Arrivals are not counted.  Computed once a step.
        """
        if self._queue_finish is None:
            running, usable = self._region_holds()
            held = [list(h) for h in running]
            last_start = [0.0] * self.num_regions
            line = []
            for job in self.view.waiting:
                options = self._single_region_options(job.job_id)
                left = self._iterations_left(job.job_id)
                if options:
                    line.append((min(left * t for _, _, t in options), job.job_id, left, options))
            line.sort()
            finish: dict[int, float] = {}
            for _, job_id, left, options in line:
                best, place = math.inf, None
                for region, gpus, iter_time in options:
                    start = _earliest_start(held[region], usable[region], gpus, last_start[region])
                    if start + left * iter_time < best:
                        best, place = start + left * iter_time, (region, gpus, start)
                finish[job_id] = best
                if place is not None:
                    region, gpus, start = place
                    held[region].append((best, gpus))
                    last_start[region] = start
            self._queue_finish = finish
        return self._queue_finish

    def _perf(self, i: int) -> PlanPerf:
        perf = self._cand_perf[i]
        if perf is None:
            perf = self.view.evaluate(self._candidates[i])
            self._cand_perf[i] = perf
        return perf

    def _info(self, d_job_s: float, d_cost: float, d_tokens: float, d_egress: float,
              d_carbon: float) -> dict[str, Any]:
        sim = self.sim
        assert sim is not None
        cost, energy, tokens = self._last_totals
        return {
            "time_s": sim.time,
            "job_seconds": self._last_in_system,
            "step_job_seconds": d_job_s,
            "cost_usd": cost,
            "step_cost_usd": d_cost,
            "egress_usd": self._last_egress,
            "step_egress_usd": d_egress,
            "total_cost_usd": cost + self._last_egress,
            "energy_kwh": energy / 3.6e6,
            "carbon_kg": self._last_carbon,
            "step_carbon_kg": d_carbon,
            "carbon_signal": sim.carbon.signal if sim.carbon is not None else "",
            "tokens": tokens,
            "step_tokens": d_tokens,
            "throughput_tokens_s": sim.throughput_tokens_s,
            "waiting": len(sim.waiting),
            "running": len(sim.running),
            "finished": sim.finished_count,
            "candidates": len(self._candidates),
            "invalid_action": self._last_invalid,
            "forced_wait": self._forced_wait,
            "action_mask": self._mask.copy(),
        }


def _stretched(wait: float, stretch: float) -> float:
    """``wait * stretch``, with no wait staying none (``0 * inf`` is 0 here)."""
    return 0.0 if wait <= 0.0 else wait * stretch


def _earliest_start(held: list[tuple[float, int]], usable: int, gpus: int, not_before: float) -> float:
    """The earliest time from ``not_before`` at which ``gpus`` of a region's ``usable`` GPUs are free.

    ``held`` lists (until, GPUs) of the jobs on the region, all started by ``not_before``, so its free
    GPUs only grow from then on.
    """
    if gpus > usable:
        return math.inf
    busy = sum(g for until, g in held if until > not_before)
    if usable - busy >= gpus:
        return not_before
    for until, g in sorted(held):
        if until > not_before:
            busy -= g
            if usable - busy >= gpus:
                return until
    return math.inf
