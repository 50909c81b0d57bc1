"""Candidate proposers: where the environment's N candidate (job, plan) actions come from.

A proposer is any object with ``candidates(view, k) -> list[Plan]`` (plans that can start now,
the :class:`CandidateProposer` protocol).  Proposers that derive from :class:`Proposer` are also
told of every new episode (:meth:`Proposer.reset`); those that derive from :class:`DecisionRecorder`
put one agent's decision first and keep it in ``decision`` (the expert action of behaviour cloning).
Reference agents are proposers through :meth:`sfenv.agents.base.SchedulerAgent.candidates`.
The generic proposers here need no agent:

- :class:`SingleRegionProposer`: for each of the first waiting jobs, the best plan inside each of
  the few regions with the most free compute;
- :class:`PathProposer`: for jobs that no single region can hold, pipelines along the k shortest
  (by latency) WAN paths of at most ``max_regions`` regions between regions with free GPUs
  (:func:`short_paths`).

Both build plans with :func:`sfenv.model.planning.fit_plan` through a :class:`PlanCache`, because
candidate building runs at every environment step: a single-region plan depends only on the job,
region and GPU budget (never on WAN shares), so it is cached for the episode; a multi-region plan
is cached per state of the links among its regions (:meth:`sfenv.sim.SimView.link_state_among`:
the only link state its modelled performance reads).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from bisect import bisect_right
from collections.abc import Callable, Sequence
from typing import Literal, Protocol, runtime_checkable

import networkx as nx
import numpy as np

from sfenv.hashing import HashedKey
from sfenv.interrupts import import_module
from sfenv.model.perf import Plan, PlanPerf, Stage
from sfenv.model.planning import fit_plan
from sfenv.sim import SimView
from sfenv.world.workload import JobSpec

__all__ = [
    "BUDGETS",
    "PROPOSER_SETS",
    "PROPOSER_SET_FACTORIES",
    "CandidateProposer",
    "DecisionRecorder",
    "PathProposer",
    "PlanCache",
    "Proposer",
    "SingleRegionProposer",
    "default_proposers",
    "default_set",
    "named_proposers",
    "round_budget",
]


@runtime_checkable
class CandidateProposer(Protocol):
    """Anything that proposes up to ``k`` startable plans for the current state."""

    def candidates(self, view: SimView, k: int) -> list[Plan]:
        """Up to ``k`` plans that can start now, best first."""
        ...


class Proposer(ABC):
    """Base class of candidate proposers: :meth:`candidates`, and :meth:`reset` at every episode's start.

    The environment calls :meth:`reset` on every proposer of this class when an episode starts
    (objects that only satisfy :class:`CandidateProposer` are not reset).
    """

    #: the registry name of the agent whose decision the proposer records (None: it records none)
    name: str | None = None

    @abstractmethod
    def candidates(self, view: SimView, k: int) -> list[Plan]:
        """Up to ``k`` plans that can start now, best first."""

    def reset(self) -> None:  # noqa: B027  (a hook, empty by default: most proposers keep nothing per episode)
        """Forget what belongs to the last episode (called by the env at every reset); nothing by default."""


class DecisionRecorder(Proposer):
    """A proposer whose first candidate is one agent's decision, kept in :attr:`decision` after each call.

    :attr:`decision` is the expert action of the behaviour-cloning warm start
    (:mod:`sfenv.agents.imitation`); :attr:`name` names the agent (``"fastest+swf"``, ...).
    """

    name: str
    #: the agent's decision at the last :meth:`candidates` call (None: it would wait)
    decision: Plan | None = None


#: GPU budgets a proposer asks for: free GPUs are rounded down to one of these (realistic
#: allocation sizes, and far fewer distinct plans to build).
BUDGETS = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024)


def round_budget(n: int) -> int:
    """The largest entry of :data:`BUDGETS` not above ``n`` (``n`` itself beyond the table)."""
    if n >= BUDGETS[-1]:
        return n
    i = bisect_right(BUDGETS, n)
    return BUDGETS[i - 1] if i else 0


_BOUND_ENTRIES = 20_000  # per-job bindings kept (cleared each episode by the environment)


class PlanCache:
    """Memoised :func:`fit_plan`, shared across episodes.

    Plans are keyed by the job's *shape* (model, global batch, GPU bounds), not its id, so they
    carry over between jobs and episodes; a single-region plan never depends on WAN shares, a
    multi-region one is keyed by the current state of the links among its regions too
    (:meth:`sfenv.sim.SimView.link_state_among`; a change elsewhere in the network leaves its plan
    as it was).  ``max_entries`` bounds memory.
    """

    def __init__(self, max_entries: int = 200_000) -> None:
        self._store: dict[tuple, tuple[Plan, PlanPerf] | None] = {}
        # the same results rebound to the asking job (rebinding is not free on a hot path)
        self._bound: dict[tuple, tuple[JobSpec, tuple[Plan, PlanPerf] | None]] = {}
        #: perf of the plans returned since the last :meth:`new_step` (plans carry job ids)
        self.recent: dict[Plan, PlanPerf] = {}
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0

    def clear(self) -> None:
        """Forget everything."""
        self._store.clear()
        self._bound.clear()
        self.recent.clear()

    def fit_keys(self) -> list[tuple]:
        """The keys of the stored results: ``(job shape, regions, GPUs per region, link state or None)``.

        A multi-region key is one :func:`fit_plan` search; a single-region result moved from an
        equal region adds a key without a search (:attr:`misses` counts the searches).  For
        diagnostics (``bench_env --fit-reuse``).
        """
        return list(self._store)

    def new_episode(self) -> None:
        """Forget the per-job bindings of the last episode (shape-keyed results are kept)."""
        self._bound.clear()

    def new_step(self) -> None:
        """Start collecting :attr:`recent` afresh (called before proposers run)."""
        self.recent.clear()

    def fit(
        self, view: SimView, job: JobSpec, chain: Sequence[int], budget: Sequence[int]
    ) -> tuple[Plan, PlanPerf] | None:
        """``fit_plan`` on ``chain``/``budget``, cached; the plan carries ``job``'s id."""
        chain, budget = tuple(chain), tuple(budget)
        # a multi-region plan reads the state of the links among its regions only (see Topology.links_among)
        link_key = view.link_state_among(chain) if len(chain) > 1 else None
        # first by job id (ints only: cheap to hash), checked against the very job object
        bound_key = (job.job_id, chain, budget, link_key)
        hit = self._bound.get(bound_key)
        res: tuple[Plan, PlanPerf] | Literal[False] | None  # False: not in the store
        if hit is not None and hit[0] is job:
            self.hits += 1
            res = hit[1]
        else:
            key = (job.shape_key, chain, budget, link_key)
            res = self._store.get(key, False)
            if res is False:
                if len(self._store) >= self.max_entries:
                    self._store.clear()
                res = self._fit_new(view, job, chain, budget)
                self._store[key] = res
            else:
                self.hits += 1
            if res is not None and res[0].job_id != job.job_id:
                res = (res[0].for_job(job.job_id), res[1])
            if len(self._bound) >= _BOUND_ENTRIES:
                self._bound.clear()
            self._bound[bound_key] = (job, res)
        if res is None:
            return None
        self.recent[res[0]] = res[1]
        return res


    def _fit_new(
        self, view: SimView, job: JobSpec, chain: tuple[int, ...], budget: tuple[int, ...]
    ) -> tuple[Plan, PlanPerf] | None:
        """A result not in the store: ``fit_plan``, or a single-region plan moved from an equal region.

        Regions with equal GPU, server and intra-region figures (:attr:`Topology.plan_class`) get
        the same plan on the same budget (fit_plan reads nothing else); the plan found for the
        class's first region is moved to ``chain[0]`` and evaluated there (its power and price zone
        are the region's own; :meth:`sfenv.sim.SimView.evaluate_moved` recomputes only the power
        when the two regions' figures are the same).
        """
        topo = view.topo
        if len(chain) == 1:
            rep = topo.plan_class[chain[0]]
            if rep != chain[0]:
                key = (job.shape_key, (rep,), budget, None)
                res: tuple[Plan, PlanPerf] | Literal[False] | None = self._store.get(key, False)
                if res is False:
                    self.misses += 1
                    res = self._store[key] = fit_plan(job, topo, (rep,), budget, view.evaluate)
                else:
                    self.hits += 1
                if res is None:
                    return None
                plan = res[0]
                # = replace(plan, stages=...), without replace's per-call field inspection
                moved = Plan(plan.job_id, HashedKey([Stage.at(chain[0], s.layers, s.dp, s.tp) for s in plan.stages]),
                             plan.micro_batch, plan.schedule, plan.recompute, plan.extra_inflight,
                             plan.sequence_parallel)
                return moved, view.evaluate_moved(moved, job, plan, res[1])
        self.misses += 1
        return fit_plan(job, topo, chain, budget, view.evaluate)


class SingleRegionProposer(Proposer):
    """Best single-region plans for the first ``jobs`` waiting jobs, ``per_job`` regions each.

    Regions are ranked by free compute (free GPUs x peak FLOP/s); each gets a budget of its free
    GPUs capped at the job's maximum.
    """

    def __init__(self, cache: PlanCache, jobs: int = 8, per_job: int = 2):
        self.cache = cache
        self.jobs = jobs
        self.per_job = per_job
        # the last free-GPU array seen, its values as ints and the regions ranked (the simulator hands
        # out the same read-only array while the free GPUs stay the same; kept, so its id is not reused)
        self._ranked_for: tuple[np.ndarray | None, np.ndarray | None, list[int], list[int]] = (None, None, [], [])
        self._flops_positive = False  # every region's FLOP/s finite and positive (for the last FLOP/s array seen)

    def _ranking(self, view: SimView) -> tuple[list[int], list[int]]:
        """The free GPUs per region as ints and the regions with free GPUs by free compute (stable order)."""
        free_arr, flops = view.free_gpus, view.topo.gpu_flops
        src, src_flops, free, ranked = self._ranked_for
        if free_arr is not src or flops is not src_flops:
            order = np.argsort(-(free_arr * flops), kind="stable").tolist()  # = scalars.flops, as an array
            free = free_arr.tolist()
            if flops is not src_flops:
                self._flops_positive = bool(np.all(np.isfinite(flops) & (flops > 0)))
            if self._flops_positive and free and min(free) >= 0:
                # a region with free GPUs has a key below 0, one without has -0.0: the former come first
                ranked = order[: len(free) - free.count(0)]
            else:
                ranked = [r for r in order if free[r] > 0]
            self._ranked_for = (free_arr, flops, free, ranked)
        return free, ranked

    def candidates(self, view: SimView, k: int) -> list[Plan]:
        """See class docstring."""
        free, ranked = self._ranking(view)
        fit = self.cache.fit
        out: list[Plan] = []
        for job in view.waiting_head(self.jobs):
            n = 0
            lo, hi = job.min_gpus, job.max_gpus
            for r in ranked:
                f = free[r]
                if f < lo:
                    continue
                budget = round_budget(f if f < hi else hi)
                if budget < lo:
                    continue
                res = fit(view, job, (r,), (budget,))
                if res is not None:
                    out.append(res[0])
                    n += 1
                    if n >= self.per_job or len(out) >= k:
                        break
            if len(out) >= k:
                break
        return out


def short_paths(graph: nx.Graph, s: int, d: int, max_nodes: int, k: int) -> list[list[int]]:
    """The ``k`` lowest-latency simple paths from ``s`` to ``d`` with at most ``max_nodes`` regions.

    A depth-limited enumeration (paths are short: 2-3 regions), ordered by total ``latency_ms``,
    then length, then the regions.  It replaces a k-shortest-paths search over all lengths whose
    long paths were then discarded (about 20 ms per region pair on 64 regions).
    """
    found: list[tuple[float, int, list[int]]] = []
    stack: list[tuple[int, list[int], float]] = [(s, [s], 0.0)]
    while stack:
        node, path, lat = stack.pop()
        if node == d:
            found.append((lat, len(path), path))
            continue
        if len(path) >= max_nodes:
            continue
        for nb, data in graph[node].items():
            if nb not in path:
                stack.append((nb, [*path, nb], lat + float(data["latency_ms"])))
    found.sort(key=lambda t: (t[0], t[1], t[2]))
    return [p for _, _, p in found[:k]]


class PathProposer(Proposer):
    """Cross-region pipelines along the ``paths`` shortest-latency WAN paths, for jobs that need them.

    Only jobs that fit in no single region (by free GPUs) get path candidates; sources and
    destinations are the ``ends`` regions with the most free GPUs; paths have at most
    ``max_regions`` regions.
    """

    def __init__(self, cache: PlanCache, jobs: int = 4, paths: int = 2, ends: int = 4, max_regions: int = 3):
        self.cache = cache
        self.jobs = jobs
        self.paths = paths
        self.ends = ends
        self.max_regions = max_regions
        self._paths: dict[tuple[int, int], list[list[int]]] = {}
        # the last free-GPU array seen (kept, so its id is not reused), its values as ints, their max and sum
        self._free_for: tuple[np.ndarray | None, list[int], int, int] = (None, [], 0, 0)

    def _k_paths(self, view: SimView, s: int, d: int) -> list[list[int]]:
        key = (s, d)
        if key not in self._paths:
            self._paths[key] = short_paths(view.topo.graph, s, d, self.max_regions, self.paths)
        return self._paths[key]

    def candidates(self, view: SimView, k: int) -> list[Plan]:
        """See class docstring."""
        free_arr = view.free_gpus
        src, free, biggest, total_free = self._free_for
        if free_arr is not src:  # the simulator hands out the same read-only array while nothing changed
            free = free_arr.tolist()  # ints: Python's max and sum are quicker than NumPy's on a few dozen
            biggest = max(free) if free else 0
            total_free = sum(free)
            self._free_for = (free_arr, free, biggest, total_free)
        jobs = [j for j in view.waiting_head(self.jobs) if biggest < j.min_gpus <= total_free]
        if not jobs:  # every waiting job fits in one region, or none fits anywhere
            return []
        order = np.argsort(-free_arr, kind="stable")
        ends = order[free_arr[order] > 0][: self.ends].tolist()
        out: list[Plan] = []
        for job in jobs:
            for i, s in enumerate(ends):
                for d in ends[i + 1:]:
                    for path in self._k_paths(view, s, d):
                        chain = [r for r in path if free[r] > 0]
                        budget, total = [], 0
                        for r in chain:
                            take = round_budget(min(free[r], job.max_gpus - total))
                            budget.append(take)
                            total += take
                        if total < job.min_gpus or min(budget) < 1:
                            continue
                        res = self.cache.fit(view, job, chain, budget)
                        if res is not None and res[0] not in out:
                            out.append(res[0])
                            if len(out) >= k:
                                return out
        return out


def default_proposers(cache: PlanCache, queue_window: int) -> list[CandidateProposer]:
    """The generic proposers the environment uses when none are given."""
    return [SingleRegionProposer(cache, jobs=queue_window), PathProposer(cache)]


def default_set(queue_window: int, cache: PlanCache) -> list[CandidateProposer]:
    """The set ``"default"`` (:func:`default_proposers`, in the argument order of :data:`PROPOSER_SET_FACTORIES`)."""
    return default_proposers(cache, queue_window)


#: the proposer sets ``GeoSchedEnv(proposers=NAME)`` builds by name (:func:`named_proposers`)
PROPOSER_SETS = ("default", "first-fit", "first-fit+spantrain", "best", "best+spantrain", "carbon")
#: set name -> ``"module:function"`` that builds it as ``function(queue_window, cache)``, imported when
#: asked (as Gymnasium's entry points and the agent registry do): sets built on reference heuristics
#: live beside them in :mod:`sfenv.agents.proposer_sets`, above this layer
PROPOSER_SET_FACTORIES: dict[str, str] = {
    "default": "sfenv.env.proposers:default_set",
    "first-fit": "sfenv.agents.proposer_sets:first_fit",
    "first-fit+spantrain": "sfenv.agents.proposer_sets:first_fit_spantrain",
    "best": "sfenv.agents.proposer_sets:best",
    "best+spantrain": "sfenv.agents.proposer_sets:best_spantrain",
    "carbon": "sfenv.agents.proposer_sets:carbon",
}


def named_proposers(name: str, queue_window: int = 8, cache: PlanCache | None = None) -> list[CandidateProposer]:
    """The proposer set ``name`` of :data:`PROPOSER_SETS`, built by its entry of :data:`PROPOSER_SET_FACTORIES`.

    ``"default"``: :func:`default_proposers`; ``"first-fit"``: the decisions of ``fastest+swf``
    (candidate 0) and ``fifo+swf``, then the default proposers' plans; ``"best"``: also
    ``spinsearch+swf``'s decision and SpinSearch's plans; a ``"+spantrain"`` suffix adds
    ``spantrain+swf``'s decision (:func:`sfenv.agents.proposer_sets.best_heuristic_proposers`).

    :raises ValueError: for another name.
    """
    if name not in PROPOSER_SETS:
        raise ValueError(f"proposers={name!r}: expected one of {list(PROPOSER_SETS)}")
    module, function = PROPOSER_SET_FACTORIES[name].split(":")
    factory: Callable[[int, PlanCache], list[CandidateProposer]] = getattr(import_module(module), function)
    return factory(queue_window, PlanCache() if cache is None else cache)
