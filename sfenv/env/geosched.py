"""GeoSchedEnv: the Gymnasium face of the simulator."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from sfenv.env.proposers import (
    PROPOSER_SETS,
    CandidateProposer,
    PlanCache,
    Proposer,
    default_proposers,
    named_proposers,
)
from sfenv.errors import InvalidInput
from sfenv.model.perf import Plan, PlanPerf
from sfenv.model.pipeline import prepare_compiled
from sfenv.scenario import DEFAULT_SCENARIO, Scenario, ScenarioError, load_scenario
from sfenv.sim import Simulator, SimView, evaluation_cache_for, make_simulator

__all__ = ["GeoSchedEnv"]


REGION_FEATURES = 7  # + forecast window
LINK_FEATURES = 3
JOB_FEATURES = 8
CAND_FEATURES = 10
GLOBAL_FEATURES = 5
#: with ``privileged_obs=True`` the ``time`` block holds one more entry, the share of the episode's jobs
#: still to arrive (information a real scheduler does not have; the v0 ids' observation)
PRIVILEGED_GLOBAL_FEATURES = 6
#: compact observation (``obs_mode="compact"``): per-candidate features, and the platform summary size is
#: ``PLATFORM_FEATURES + H``; neither depends on the number of regions or links
COMPACT_CAND_FEATURES = 15
PLATFORM_FEATURES = 18
OBS_MODES = ("full", "compact")
_REGIONS_SCALE = 8.0  # regions a compact candidate uses, mapped to 1.0 at 8 (clipped)
_PRICE_SCALE = 300.0  # USD/MWh mapped to 1.0
_TFLOPS_SCALE = 1000.0
_MEM_SCALE = 141e9
_BW_SCALE = 100e9
_LAT_SCALE = 0.3
_WAIT_SCALE = 86400.0
_ITER_SCALE = 10_000.0


def _log_scale(x: float, lo: float, hi: float) -> float:
    """Map x in [lo, hi] to [0, 1] on a log scale (clipped)."""
    if x <= lo:
        return 0.0
    if x >= hi:
        return 1.0
    return math.log(x / lo) / math.log(hi / lo)


#: bound on :attr:`GeoSchedEnv._perf_features` (cleared when reached)
_PERF_FEATURE_ENTRIES = 4096


def _perf_features(perf: PlanPerf) -> tuple[float, float, float, float, float]:
    """A candidate's observation features that depend on its evaluation only.

    :param perf: the candidate's (feasible) evaluation.
    :return: scaled iteration time, throughput and bottleneck bandwidth, the memory headroom and the
        stall-free flag, as the candidate rows of the observation hold them (before clipping).
    """
    return (
        _log_scale(perf.iter_time, 0.01, _ITER_SCALE),
        _log_scale(perf.throughput, 1e2, 1e8),
        _log_scale(perf.bottleneck_bw_bps, 1e7, 1e12),
        perf.memory_headroom,
        1.0 if perf.stall_free else 0.0,
    )


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


class GeoSchedEnv(gym.Env[dict[str, np.ndarray], int]):
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
    ``H = forecast_hours``:

    | key | size | per item |
    |---|---|---|
    | ``regions`` | C x (7 + H) | free GPU fraction, GPUs (/1024), peak TFLOP/s (/1000), GPU memory (/141 GB), PUE - 1, outage flag, price now, price forecast for the next H hours (USD/MWh / 300) |
    | ``links`` | E x 3 | capacity (/100 Gbit/s), flows / (flows + 1), latency (/300 ms) |
    | ``queue`` | K x 8 | valid, log params, min GPUs, max GPUs (/1024), log iterations, global batch (/1024), waited (/24 h), progress done |
    | ``candidates`` | N x 10 | valid, queue slot (/K), log iteration time, log throughput, cost rate (USD/h /100), regions used (/C), GPUs (/1024), log bottleneck bandwidth, memory headroom, stall-free |
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
    ``r = -jct_weight * job_seconds / (3600 * K) - cost_weight * cost_usd
    + throughput_weight * tokens / 1e9``, where ``job_seconds`` is the time every job spent in the
    system (waiting or running) since the previous step, ``cost_usd`` the electricity cost and
    ``tokens`` the tokens trained since then. With ``cost_weight = 0`` and ``throughput_weight = 0``
    the undiscounted return is ``-sum(JCT) / (3600 K)``. Weights default to the scenario's
    ``reward`` section. ``info`` carries the raw, unweighted metrics.

    ## Starting State
    ``reset(seed=s)`` draws an episode (jobs, price noise, outages, link dynamics) from
    ``self.np_random``: exactly the episode of ``make_simulator(scenario, s)``. The state is the
    first decision point (the first job waits).

    ## Episode End
    Terminated when every job finished, the scenario horizon is reached, or nothing can happen any
    more. Truncated by ``TimeLimit`` at the registered ``max_episode_steps``. The final ``info``
    holds ``episode_report`` (:class:`sfenv.sim.metrics.EpisodeReport` as a dict).

    ## Arguments
    ``None`` takes the scenario's value. Numbers go through the scenario's validation
    (:meth:`~sfenv.scenario.Scenario.with_overrides`): a bad one raises
    :class:`~sfenv.scenario.ScenarioError` (a ``ValueError``) naming the argument, the value and
    what was expected; ``self.scenario`` is the scenario with the overrides applied.

    | Parameter | Type | Default | Description |
    |---|---|---|---|
    | ``scenario`` | str, Path, dict or Scenario | ``"spider-8"`` | bundled name, YAML path, dict or :class:`~sfenv.scenario.Scenario` |
    | ``render_mode`` | str or None | None | ``"ansi"`` (text) or ``"rgb_array"`` (image) |
    | ``proposers`` | list of CandidateProposer, a name of :data:`sfenv.env.proposers.PROPOSER_SETS` or None | None | candidate sources (:func:`sfenv.env.proposers.named_proposers`); None or ``"default"``: :func:`sfenv.env.proposers.default_proposers`; ``"first-fit"``: also the decisions of ``fastest+swf`` (candidate 0) and ``fifo+swf``; ``"best"``: also ``spinsearch+swf``'s and SpinSearch's plans (:func:`sfenv.agents.proposer_sets.best_heuristic_proposers`); ``"best+spantrain"``: also ``spantrain+swf``'s.  Each richer set costs steps/s: docs/env.md gives measured rates |
    | ``max_candidates`` | int > 0 | ``env.max_candidates`` (16) | ``N``, candidate slots; actions are ``0..N`` |
    | ``queue_window`` | int > 0 | ``env.queue_window`` (8) | ``K``, waiting jobs shown in ``queue`` |
    | ``forecast_hours`` | int > 0 | ``env.forecast_hours`` (6) | ``H``, hours of price forecast per region |
    | ``jct_weight`` | float >= 0 | ``reward.jct_weight`` (1) | weight of the job-time term |
    | ``cost_weight`` | float >= 0 | ``reward.cost_weight`` (0) | weight per USD of electricity |
    | ``throughput_weight`` | float >= 0 | ``reward.throughput_weight`` (0) | weight per 1e9 tokens trained |
    | ``invalid_action_penalty`` | float >= 0 | ``reward.invalid_action_penalty`` (0.1) | penalty of a masked action |
    | ``num_jobs`` | int > 0 | ``workload.num_jobs`` (40) | jobs per episode |
    | ``obs_mode`` | str | ``"full"`` | ``"full"`` (per-region and per-link features) or ``"compact"`` (topology-independent size, see Observation Space) |
    | ``invalid_action_limit`` | int > 0 or None | None | masked actions in a row after which a masked action acts as wait (None: never) |
    | ``privileged_obs`` | bool | False | add the share of jobs still to arrive to ``time`` (privileged, see Observation Space; True for the ``-v0`` ids) |
    | ``work_conserving`` | bool | False | wait is masked while a candidate can start (a work-conserving scheduler: it never waits while it could start a job); waiting then is an invalid action |

    >>> import gymnasium as gym, sfenv
    >>> env = gym.make("sfenv/GeoSched-v1", num_jobs=8, max_candidates=4)
    >>> env.action_space
    Discrete(5)

    ## Version History
    * v1 (benchmark protocol 1, :mod:`sfenv.runs.protocol`): the default observation holds nothing a real
      scheduler could not know: the ``time`` block lost the share of jobs still to arrive (5
      entries, was 6), which is now the opt-in ``privileged_obs=True``.  Dynamics, actions and
      rewards are those of the ``-v0`` ids of the same release (both follow the calibrated
      performance model of :mod:`sfenv.model.compute`, so 0.1.0's v0 episodes differ).  Models trained on v0 do not load on v1 (the observation space
      differs); play them on the ``-v0`` ids or with ``privileged_obs=True``.
    * v0: initial version (``time`` held the share of jobs still to arrive).  Deprecated; the
      ``-v0`` ids stay registered (as ``privileged_obs=True``) so that old results can be
      reproduced, as Gymnasium keeps old environment versions.
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    def __init__(
        self,
        scenario: str | dict | Scenario = DEFAULT_SCENARIO,
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
    ):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode {render_mode!r}; expected one of {self.metadata['render_modes']}")
        if obs_mode not in OBS_MODES:
            raise InvalidInput(f"GeoSchedEnv: invalid argument obs_mode={obs_mode!r}: expected one of {list(OBS_MODES)}")
        if invalid_action_limit is not None and (
            isinstance(invalid_action_limit, bool) or not isinstance(invalid_action_limit, (int, np.integer))
            or invalid_action_limit < 1
        ):
            raise InvalidInput(f"GeoSchedEnv: invalid argument invalid_action_limit={invalid_action_limit!r}: "
                             "expected an integer >= 1 or None")
        if not isinstance(privileged_obs, (bool, np.bool_)):
            raise InvalidInput(f"GeoSchedEnv: invalid argument privileged_obs={privileged_obs!r}: expected True or False")
        self.obs_mode = obs_mode
        self.privileged_obs = bool(privileged_obs)
        if not isinstance(work_conserving, (bool, np.bool_)):
            raise InvalidInput(f"GeoSchedEnv: invalid argument work_conserving={work_conserving!r}: expected True or False")
        #: wait is valid only when no candidate can start (see the parameter table)
        self.work_conserving = bool(work_conserving)
        n_time = PRIVILEGED_GLOBAL_FEATURES if self.privileged_obs else GLOBAL_FEATURES
        self.invalid_action_limit = None if invalid_action_limit is None else int(invalid_action_limit)
        self._invalid_run = 0
        sc = _with_arguments(
            load_scenario(scenario),
            workload={"num_jobs": num_jobs},
            env={"max_candidates": max_candidates, "queue_window": queue_window, "forecast_hours": forecast_hours},
            reward={"jct_weight": jct_weight, "cost_weight": cost_weight, "throughput_weight": throughput_weight,
                    "invalid_action_penalty": invalid_action_penalty},
        )
        self.scenario = sc
        prepare_compiled()  # the compiled pipeline replays load here (once per process), not in a step
        ecfg, rcfg = sc.cfg.env, sc.cfg.reward
        self.N = ecfg.max_candidates
        self.K = ecfg.queue_window
        self.H = ecfg.forecast_hours
        self.jct_weight = rcfg.jct_weight
        self.cost_weight = rcfg.cost_weight
        self.throughput_weight = rcfg.throughput_weight
        self.invalid_action_penalty = rcfg.invalid_action_penalty
        self.render_mode = render_mode
        topo = sc.topology
        self.C, self.E = topo.num_regions, topo.num_links
        self.cache = PlanCache()
        self._evaluations = evaluation_cache_for(sc)  # single-region plan evaluations, across episodes
        if isinstance(proposers, str):
            if proposers not in PROPOSER_SETS:
                raise InvalidInput(f"GeoSchedEnv: invalid argument proposers={proposers!r}: expected one of "
                                   f"{list(PROPOSER_SETS)} or a list of proposers")
            self.proposers: list[CandidateProposer] = named_proposers(proposers, self.K, self.cache)
        else:
            self.proposers = list(proposers) if proposers is not None else default_proposers(self.cache, self.K)
        self.action_space = spaces.Discrete(self.N + 1)

        def box(n: int) -> spaces.Box:
            return spaces.Box(0.0, 1.0, shape=(n,), dtype=np.float32)

        self.observation_space = spaces.Dict(
            {
                "regions": box(self.C * (REGION_FEATURES + self.H)),
                "links": box(max(1, self.E) * LINK_FEATURES),
                "queue": box(self.K * JOB_FEATURES),
                "candidates": box(self.N * CAND_FEATURES),
                "time": box(n_time),
            }
        )
        self._obs_slices: dict[str, slice] = {}
        start = 0
        for key, space in self.observation_space.spaces.items():
            size = int(space.shape[0])  # type: ignore[index]
            self._obs_slices[key] = slice(start, start + size)
            start += size
        self._obs_size = start
        if obs_mode == "compact":  # the policy sees these keys; the full buffer above is still built inside
            self.observation_space = spaces.Dict(
                {
                    "candidates": box(self.N * COMPACT_CAND_FEATURES),
                    "queue": box(self.K * JOB_FEATURES),
                    "platform": box(PLATFORM_FEATURES + self.H),
                    "time": box(n_time),
                }
            )
        self._gpu_div = np.maximum(1, topo.gpu_counts)
        self._static_regions = np.array(
            [
                [min(1.0, r.num_gpus / 1024), r.gpu.tflops / _TFLOPS_SCALE, r.gpu.memory_bytes / _MEM_SCALE,
                 min(1.0, r.pue - 1.0)]
                for r in topo.regions
            ],
            dtype=np.float32,
        )
        self._link_static = np.array(
            [[min(1.0, lat / _LAT_SCALE)] for lat in topo.link_latency_s], dtype=np.float32
        ).reshape(-1, 1)
        self._template = np.zeros(self._obs_size, dtype=np.float32)
        self._template[self._obs_slices["regions"]].reshape(self.C, REGION_FEATURES + self.H)[:, 1:5] = (
            self._static_regions
        )
        if self.E:
            self._template[self._obs_slices["links"]].reshape(self.E, LINK_FEATURES)[:, 2:3] = self._link_static
        self.sim: Simulator | None = None
        self._view: SimView | None = None
        self._candidates: list[Plan] = []
        self._cand_perf: list[PlanPerf | None] = []
        #: the observation's array before per-step features: the template with this hour's prices and the
        #: current link figures (rebuilt when the forecast object or the link state changes)
        self._base = self._template
        self._base_forecast: tuple[list[float], np.ndarray] | None = None
        #: ``id(perf) -> [perf, _perf_features(perf), prices, scaled cost per hour at those prices]``: the
        #: candidate rows' figures per (shared, read-only) evaluation, kept while the plan caches hand it out
        self._perf_features: dict[int, list] = {}
        self._mask = np.zeros(self.N + 1, dtype=bool)
        #: the mask with the first n candidate slots and wait valid, per n (copied into ``_mask`` each step)
        #: (work_conserving: wait valid only when no candidate is)
        self._mask_rows = [np.concatenate([np.arange(self.N) < n, [n == 0 or not self.work_conserving]])
                           for n in range(self.N + 1)]
        self._last_invalid = False
        self._forced_wait = False
        self._renderer: Any = None

    # ------------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict[str, np.ndarray], dict]:
        """Start a new episode (see the class docstring, Starting State)."""
        super().reset(seed=seed)
        self.sim = make_simulator(self.scenario, self.np_random, self._evaluations)
        self._view = self.sim.view()
        self.cache.new_episode()
        self._episode_tables()
        for p in self.proposers:
            if isinstance(p, Proposer):
                p.reset()
        self._last_in_system = self._job_seconds()
        self._last_totals = self.sim.totals()
        self._last_invalid = False
        self._invalid_run = 0
        self._forced_wait = False
        self._build_candidates()
        return self._obs(), self._info(0.0, 0.0, 0.0)

    def step(self, action: int) -> tuple[dict[str, np.ndarray], float, bool, bool, dict]:
        """Start candidate ``action`` or wait (``action == N``); see the class docstring."""
        sim = self.sim
        if sim is None:
            raise RuntimeError("call reset() before step()")
        a = self._action_index(action)
        invalid = forced = False
        if sim.done:
            invalid = True
        elif a == self.N and self._mask[a]:
            sim.wait()
        elif 0 <= a < self.N and self._mask[a]:
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
        in_sys = self._job_seconds()
        totals = sim.totals()
        d_job_s = in_sys - self._last_in_system
        d_cost = totals[0] - self._last_totals[0]
        d_tokens = totals[2] - self._last_totals[2]
        self._last_in_system, self._last_totals = in_sys, totals
        reward = (
            -self.jct_weight * d_job_s / (3600.0 * self.K)
            - self.cost_weight * d_cost
            + self.throughput_weight * d_tokens / 1e9
            - (self.invalid_action_penalty if invalid else 0.0)
        )
        terminated = sim.done
        if not invalid or forced:
            self._build_candidates()
        info = self._info(d_job_s, d_cost, d_tokens)
        if terminated:
            info["episode_report"] = sim.report().to_dict()
        return self._obs(), float(reward), bool(terminated), False, info

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
        return self.N

    def action_for(self, plan: Plan | None) -> int:
        """The action that starts ``plan`` now (``N`` = wait for None).

        If ``plan`` is not among the candidates it is injected into the last slot (the observation
        already returned does not show it); an unstartable plan maps to its slot, masked invalid.
        """
        if plan is None:
            return self.N
        try:
            return self._candidates.index(plan)
        except ValueError:
            pass
        idx = len(self._candidates) if len(self._candidates) < self.N else self.N - 1
        perf = self.view.evaluate(plan)
        if idx == len(self._candidates):
            self._candidates.append(plan)
            self._cand_perf.append(perf)
        else:
            self._candidates[idx] = plan
            self._cand_perf[idx] = perf
        self._mask[idx] = self.view.can_start(plan)
        return idx

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
        return self._renderer.draw(self.sim, self.H)

    def close(self) -> None:
        """Release the renderer (safe to call twice)."""
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None

    # ------------------------------------------------------------------ internals
    def _action_index(self, action: Any) -> int:
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
                f"expected an integer in [0, {self.N}] (a Python int, a NumPy integer or a 0-d integer array)"
            )
        if not 0 <= a <= self.N:
            raise ValueError(
                f"action {a} is not in the action space {self.action_space}: expected 0..{self.N - 1} "
                f"(start a candidate) or {self.N} (wait)"
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
        self.cache.new_step()
        if not sim.done and sim.waiting:
            seen: set[Plan] = set()
            for p in self.proposers:
                for plan in p.candidates(view, self.N - len(cands)):
                    if plan not in seen:
                        seen.add(plan)
                        cands.append(plan)
                if len(cands) >= self.N:
                    break
        self._candidates = cands[: self.N]
        recent = self.cache.recent
        self._cand_perf = [recent.get(p) for p in self._candidates]
        self._mask[:] = self._mask_rows[len(self._candidates)]  # proposers return plans startable now; wait

    def _perf(self, i: int) -> PlanPerf:
        perf = self._cand_perf[i]
        if perf is None:
            perf = self.view.evaluate(self._candidates[i])
            self._cand_perf[i] = perf
        return perf

    def _episode_tables(self) -> None:
        """Per-job static queue features, computed once per episode."""
        sim = self.sim
        assert sim is not None
        specs = [js.spec for js in sim.jobs]
        # per job: present, log-scaled parameters (once per model size), GPU bounds, log-scaled
        # iterations, global batch: Python floats, as the float64 table they were first read from held them
        scaled_params: dict[float, float] = {}
        rows: list[tuple[float, ...]] = []
        for j in specs:
            params = float(j.model.params)
            scaled = scaled_params.get(params)
            if scaled is None:
                scaled = scaled_params[params] = _log_scale(params, 1e8, 1e12)
            rows.append((1.0, scaled, j.min_gpus / 1024, j.max_gpus / 1024, _log_scale(float(j.iterations), 1, 1e6),
                         j.global_batch / 1024))
        self._job_rows = rows
        self._job_arrival = [j.arrival for j in specs]
        self._job_iters = [float(j.iterations) for j in specs]
        self._forecast: dict[int, tuple[list[float], np.ndarray]] = {}
        self._link_key = b""
        self._base_forecast = None  # the forecast self._base holds: rebuilt on the episode's first step

    def _obs(self) -> dict[str, np.ndarray]:
        sim, view = self.sim, self._view
        assert sim is not None and view is not None
        C, N, K, H = self.C, self.N, self.K, self.H
        sl = self._obs_slices
        # price now and forecast (cached per hour); links: capacity and flow share (recomputed only
        # when the link state changed): both written into a base array rebuilt when either changes
        hour_key = int(sim.time // 3600.0)
        fc = self._forecast.get(hour_key)
        if fc is None:
            raw = view.price_forecast(H)
            fc = self._forecast[hour_key] = (raw[:, 0].tolist(), np.hstack([raw[:, :1], raw]) / _PRICE_SCALE)
        key = sim.link_flows.tobytes() + sim.link_factor.tobytes() if self.E else b""
        if fc is not self._base_forecast or key != self._link_key:
            self._rebuild_base(fc, key)
        # one fresh array per step (static, price and link features already in place), views per key, one clip
        buf = self._base.copy()
        # regions: free fraction, (static), outage, (prices)
        reg = buf[sl["regions"]].reshape(C, REGION_FEATURES + H)
        reg[:, 0] = view.free_gpus / self._gpu_div  # free GPUs, 0 where the region is down
        reg[:, 5] = sim.down
        # queue: static rows plus time waited and progress
        ids = sim.waiting[:K]
        if ids:
            queue = self._queue_rows(ids)
            buf[sl["queue"]][: len(queue)] = queue
        # candidates
        if self._candidates:
            slot = {j: i for i, j in enumerate(ids)}
            prices = fc[0]
            mask = self._mask
            cand_rows: list[float] = []  # row after row, flat
            idx: list[int] = []
            features = self._perf_features
            if len(features) >= _PERF_FEATURE_ENTRIES:
                features.clear()
            for i, plan in enumerate(self._candidates):
                perf = self._perf(i)
                if not perf.feasible:
                    continue
                # the features read from ``perf`` (and this hour's prices), per evaluation object: the
                # plan caches hand the same shared, read-only PlanPerf to a candidate step after step
                known = features.get(id(perf))
                if known is None or known[0] is not perf:
                    known = features[id(perf)] = [perf, _perf_features(perf), None, 0.0]
                if known[2] is not prices:  # the cost per hour: for this hour's prices
                    cost_h = sum(w * prices[r] for r, w in perf.power_by_region.items()) / 3.6e9 * 3600.0
                    known[2], known[3] = prices, cost_h / 100.0
                f = known[1]
                idx.append(i)
                cand_rows += (
                    1.0 if mask[i] else 0.0,
                    slot.get(plan.job_id, K) / K,
                    f[0],
                    f[1],
                    known[3],
                    len(plan.regions) / C,
                    plan.gpus / 1024,
                    f[2],
                    f[3],
                    f[4],
                )
            if cand_rows:
                if len(idx) == idx[-1] + 1:  # the usual case: rows 0..n-1
                    buf[sl["candidates"]][: len(cand_rows)] = cand_rows
                else:
                    buf[sl["candidates"]].reshape(N, CAND_FEATURES)[idx] = np.reshape(cand_rows, (len(idx), CAND_FEATURES))
        hour = (sim.time / 3600.0) % 24.0
        clock = ((math.sin(2 * math.pi * hour / 24) + 1) / 2, (math.cos(2 * math.pi * hour / 24) + 1) / 2,
                 len(sim.running) / K, len(sim.waiting) / K)
        invalid_flag = 1.0 if self._last_invalid else 0.0
        if self.privileged_obs:  # v0's layout: the share of jobs still to arrive before the flag
            buf[sl["time"]] = (*clock, view.pending_arrivals / max(1, len(sim.jobs)), invalid_flag)
        else:
            buf[sl["time"]] = (*clock, invalid_flag)
        np.minimum(buf, 1.0, out=buf)
        np.maximum(buf, 0.0, out=buf)
        if self.obs_mode == "compact":
            return self._compact_obs(buf, reg, fc[1])
        return {k: buf[v] for k, v in sl.items()}

    def _queue_rows(self, ids: list[int]) -> list[float]:
        """The queue features of waiting jobs ``ids``, row after row in one flat list.

        Each row: the job's static features (:meth:`_episode_tables`), the time it has waited and
        its progress.  (NumPy converts a flat list faster than rows of tuples.)
        """
        sim = self.sim
        assert sim is not None
        jobs, now, arrival, iters, rows = sim.jobs, sim.time, self._job_arrival, self._job_iters, self._job_rows
        queue: list[float] = []
        for j in ids:
            queue += rows[j]
            queue.append((now - arrival[j]) / _WAIT_SCALE)
            queue.append(jobs[j].progress / iters[j])
        return queue

    def _rebuild_base(self, forecast: tuple[list[float], np.ndarray], link_key: bytes) -> None:
        """Rebuild :attr:`_base`: the template with this hour's prices and the current link figures.

        :param forecast: this hour's ``(prices now, scaled price forecast)`` (:attr:`_forecast` entry).
        :param link_key: the link flows' and capacity factors' bytes (the link figures are recomputed
            when they differ from the last ones seen).
        """
        sim = self.sim
        assert sim is not None
        sl = self._obs_slices
        base = self._template.copy()
        base[sl["regions"]].reshape(self.C, REGION_FEATURES + self.H)[:, 6:] = forecast[1]
        if self.E:
            if link_key != self._link_key:
                flows = sim.link_flows
                self._link_dyn = np.stack([sim.link_capacity_bps / _BW_SCALE, flows / (flows + 1.0)], axis=1)
                self._link_key = link_key
            base[sl["links"]].reshape(self.E, LINK_FEATURES)[:, :2] = self._link_dyn
        self._base, self._base_forecast = base, forecast

    def _compact_obs(self, buf: np.ndarray, reg: np.ndarray, forecast: np.ndarray) -> dict[str, np.ndarray]:
        """The topology-independent observation (``obs_mode="compact"``) from the full buffer.

        :param buf: the full observation buffer (clipped to [0, 1]).
        :param reg: the regions block of ``buf`` as a ``C x (7 + H)`` view.
        :param forecast: price now and the next ``H`` hours per region (USD/MWh / 300, unclipped), ``C x (1 + H)``.
        """
        sim = self.sim
        assert sim is not None
        sl, N, H = self._obs_slices, self.N, self.H
        free = np.where(sim.down, 0, sim.free).astype(np.float64)
        gpus = self.scenario.topology.gpu_counts.astype(np.float64)
        total_free = float(free.sum())
        cands = np.zeros((N, COMPACT_CAND_FEATURES), dtype=np.float32)
        full_c = buf[sl["candidates"]].reshape(N, CAND_FEATURES)
        cands[:, :CAND_FEATURES] = full_c
        runtimes: dict[int, float] = {}
        rows: list[tuple[int, int, float]] = []
        for i, plan in enumerate(self._candidates):
            perf = self._perf(i)
            if not perf.feasible:
                continue
            js = sim.jobs[plan.job_id]
            remaining = max(0.0, float(js.spec.iterations) - js.progress)
            rt = remaining * perf.iter_time
            rows.append((i, plan.job_id, rt))
            runtimes[plan.job_id] = min(rt, runtimes.get(plan.job_id, math.inf))
            cands[i, 5] = len(plan.regions) / _REGIONS_SCALE
            cands[i, 10] = _log_scale(rt, 60.0, 30 * 86400.0)
            cands[i, 11] = plan.gpus / total_free if total_free > 0 else 1.0
            cands[i, 12] = (sim.time - self._job_arrival[plan.job_id]) / _WAIT_SCALE
        if rows:
            shortest = min(runtimes.values())
            for i, job, rt in rows:
                best = runtimes[job]
                cands[i, 13] = best / rt if rt > 0 else 1.0
                cands[i, 14] = shortest / best if best > 0 else 1.0
        ranked = np.sort(reg[:, 0])  # quartiles by linear interpolation, as np.quantile (which is slower)
        qs = np.interp((0.0, 0.25, 0.5, 0.75, 1.0), np.linspace(0.0, 1.0, self.C), ranked)
        prices = forecast[:, 0]
        weights = gpus / max(1.0, float(gpus.sum()))
        links = buf[sl["links"]].reshape(-1, LINK_FEATURES)[: max(1, self.E)]
        platform = np.empty(PLATFORM_FEATURES + H, dtype=np.float32)
        platform[:PLATFORM_FEATURES] = (
            total_free / max(1.0, float(gpus.sum())),
            _log_scale(float(gpus.sum()), 1.0, 65536.0),
            _log_scale(float(self.C), 1.0, 256.0),
            float(np.mean(sim.down)) if self.C else 0.0,
            *qs,
            float(prices.min()), float(prices.mean()), float(prices.max()),
            float(links[:, 0].mean()), float(links[:, 0].min()), float(links[:, 1].mean()), float(links[:, 2].mean()),
            _log_scale(float(self.E), 1.0, 4096.0),
            float(weights @ (self._static_regions[:, 1])),
        )
        platform[PLATFORM_FEATURES:] = weights @ forecast[:, 1:]
        np.clip(cands, 0.0, 1.0, out=cands)
        np.clip(platform, 0.0, 1.0, out=platform)
        return {"candidates": cands.reshape(-1), "queue": buf[sl["queue"]], "platform": platform, "time": buf[sl["time"]]}

    def _info(self, d_job_s: float, d_cost: float, d_tokens: float) -> dict[str, Any]:
        sim = self.sim
        assert sim is not None
        cost, energy, tokens = self._last_totals
        return {
            "time_s": sim.time,
            "job_seconds": self._last_in_system,
            "step_job_seconds": d_job_s,
            "cost_usd": cost,
            "step_cost_usd": d_cost,
            "energy_kwh": energy / 3.6e6,
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
