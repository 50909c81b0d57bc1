"""Data parallelism across regions: the "widely used training systems" baseline of SpanTrain.

SpanTrain (DeepCEE, arXiv 2505.15536) reports 1.3-2.8x the throughput of "widely used and SOTA
training systems"; its co-author's test plan names PyTorch DDP, FSDP and DeepSpeed ZeRO-2 first
[plan].  Those systems train every replica of the whole model on its own devices and all-reduce
(or reduce-scatter) the gradients every iteration over whatever network joins the devices: across
regions, over the WAN.  This agent models that family as one pipeline stage holding all layers,
with data-parallel replicas in one or more regions (``Stage.placement`` with several regions):

What it models
    - Every GPU group holds a whole replica; the global batch is split over the replicas and
      accumulated over micro-batches of ``micro_batch`` sequences (gradient accumulation).
    - Gradient sync: the performance model's ring all-reduce of the bf16 gradients
      (``2 P`` bytes) over all replicas, on the slowest of the per-GPU intra-region links and
      the WAN shares of the ring's region boundaries, overlapped with compute by ``dp_overlap``
      (PyTorch DDP's bucketed overlap).  No pipeline: nothing but the all-reduce crosses the WAN.
    - Memory: a full replica per GPU (``16 P`` bytes of weights, gradients and Adam state, plus
      activations).  ZeRO-2/FSDP shard gradients and optimizer state, which the performance model
      does not express, so memory is charged as for DDP; when a replica does not fit one GPU the
      agent uses the smallest tensor-parallel degree inside a server that fits (as Megatron-DDP
      users do), with activation recomputation when only that fits.
    - Models too large for a full replica per server (on ``bace-6``: 32B and larger on 48 GB
      A6000s) cannot be trained by DDP at all; with ``fallback=True`` (default) such a job gets
      FIFO's plain 1F1B pipeline plan instead (the DeepSpeed-pipeline choice a DDP user would
      make; counted in ``fallbacks``), so the queue does not block forever on it.  A job whose
      replica fits but not on the free GPUs waits.

Our design
    - Micro-batch and recomputation: like every agent's plan, the DDP plan goes through the shared
      completion step (:func:`sfenv.model.planning.complete_plan`; one stage, so no pipeline window): a
      DDP user tunes the per-GPU micro-batch too.  ``micro_batch=N`` fixes it instead.
    - Queue: strict arrival order with head-of-line blocking, as :class:`~sfenv.agents.fifo.FIFOAgent`
      (the pipeline baseline), so the two differ only in the plan's shape.
    - Placement: regions with free GPUs, most free GPUs first (index breaks ties), taken as a
      prefix of 1, 2, ... regions with all their free GPUs (up to the job's ``max_gpus``); of the
      prefixes that reach ``min_gpus`` it keeps the plan with the shortest modelled iteration time
      (fewer GPUs on ties), stopping once adding a region makes it slower.  A fair data-parallel
      baseline therefore stays in one region when one region is enough and fast, and spans regions
      (gradient all-reduce over the WAN) when the job needs it or the model says it pays.
"""

from __future__ import annotations

from sfenv.agents.base import SchedulerAgent
from sfenv.agents.fifo import FIFOAgent

from sfenv.model.perf import Plan, PlanPerf, Stage
from sfenv.model.planning import DEFAULT_MENU, RECOMPUTE_MODES, PlanMenu, complete_plan
from sfenv.sim import SimView
from sfenv.world.workload import JobSpec

__all__ = ["DataParallelAgent", "data_parallel_plan"]

TP_DEGREES = (1, 2, 4, 8)


def data_parallel_plan(
    job: JobSpec,
    view: SimView,
    regions: list[int],
    budget: list[int],
    micro_batch: int = 1,
) -> tuple[Plan, PlanPerf] | None:
    """The data-parallel plan for ``job`` with at most ``budget[i]`` GPUs in ``regions[i]``.

    One stage with every layer; replicas of the smallest tensor degree that fits memory (without,
    then with recomputation), as many as the budget allows up to ``max_gpus``.

    :param job: the job.
    :param view: the simulator view (topology and evaluation under the current link state).
    :param regions: regions in ring order.
    :param budget: GPUs usable in each region.
    :param micro_batch: sequences per micro-batch.
    :return: ``(plan, perf)``, or None if no tensor degree fits or the GPUs are too few.
    """
    topo = view.topo
    heads = job.model.heads
    max_tp = min(topo.regions[r].gpus_per_server for r in regions)
    for tp in TP_DEGREES:
        if tp > max_tp or heads % tp:
            continue
        placement, total = [], 0
        for r, g in zip(regions, budget):
            n = min(g // tp, (job.max_gpus - total) // tp)
            if n > 0:
                placement.append((r, n))
                total += n * tp
        if total < job.min_gpus or not placement:
            continue
        stage = Stage(job.model.layers, tuple(placement), tp)
        for recompute in RECOMPUTE_MODES:
            plan = Plan(job.job_id, (stage,), micro_batch=micro_batch, schedule="1f1b", recompute=recompute)
            perf = view.evaluate(plan, job)
            if perf.feasible:
                return plan, perf
    return None


class DataParallelAgent(SchedulerAgent):
    """DDP-style data parallelism across regions, FIFO queue (see the module docstring).

    :param micro_batch: sequences per micro-batch (gradient accumulation step); None (default):
        chosen by the shared completion step among :data:`sfenv.model.planning.MICRO_BATCHES`.
    :param max_regions: at most this many regions per job (None: no limit).
    :param fallback: give jobs whose replica fits no server FIFO's pipeline plan (else they wait).
    """

    name = "ddp"
    blocking = True

    def __init__(self, micro_batch: int | None = None, max_regions: int | None = None, fallback: bool = True):
        if micro_batch is not None and micro_batch < 1:
            raise ValueError(f"micro_batch must be >= 1, got {micro_batch}")
        if max_regions is not None and max_regions < 1:
            raise ValueError(f"max_regions must be >= 1 or None, got {max_regions}")
        self.micro_batch = micro_batch
        self.menu: PlanMenu = DEFAULT_MENU if micro_batch is None else PlanMenu(micro_batches=(micro_batch,))
        self.max_regions = max_regions
        self.fallback = fallback
        self.fallbacks = 0
        self._pipeline = FIFOAgent()

    def reset(self, seed: int | None = None) -> None:
        """Reset the fallback counter."""
        self.fallbacks = 0

    @staticmethod
    def replica_fits(view: SimView, job: JobSpec) -> bool:
        """True if some region could hold a whole replica of ``job``.

        That is, ``16 P / t`` bytes per GPU of weights, gradients and Adam state fit the usable
        memory of the region's GPUs at the largest tensor degree inside its servers.
        """
        topo = view.topo
        usable = view.params.memory_headroom
        for reg in topo.regions:
            tp = max((t for t in TP_DEGREES if t <= reg.gpus_per_server and job.model.heads % t == 0), default=1)
            if 16.0 * job.model.params / tp <= reg.gpu.memory_bytes * usable:
                return True
        return False

    def propose(self, view: SimView, job: JobSpec, k: int = 1) -> list[Plan]:
        """The best data-parallel plan for ``job`` over prefixes of the regions with most free GPUs."""
        if self.fallback and not self.replica_fits(view, job):
            plans = self._pipeline.propose(view, job, k)
            self.fallbacks += bool(plans)
            return plans
        free = view.free_gpus
        order = sorted((r for r in range(view.topo.num_regions) if free[r] > 0), key=lambda r: (-int(free[r]), r))
        if self.max_regions is not None:
            order = order[: self.max_regions]
        best: tuple[Plan, PlanPerf] | None = None
        total = 0
        for i, r in enumerate(order):
            if total >= job.max_gpus:
                break
            total += int(free[r])
            if total < job.min_gpus:
                continue
            chain = order[: i + 1]
            res = data_parallel_plan(job, view, chain, [int(free[x]) for x in chain], self.micro_batch or 1)
            if res is None:
                continue
            res = complete_plan(res[0], job, view.evaluate, self.menu, res[1])
            assert res is not None  # the plan given is feasible, so completion keeps at least it
            if best is not None and res[1].iter_time > best[1].iter_time:
                break  # one more region over the WAN made it slower: stop
            if best is None or (res[1].iter_time, res[0].gpus) < (best[1].iter_time, best[0].gpus):
                best = res
        return [] if best is None else [best[0]]
