"""The WAN fast path against its event-driven twin on random shared-link cases, bucketed by mechanism and load.

Each case (:func:`random_case`): 3 regions on a line or a triangle of 1-10 Gbit/s links, 2-4 jobs
across them (pipelines under GPipe or 1F1B, data-parallel rings across regions, hybrids of GPT
350M/1.3B, ``dp_overlap`` 0 or 1).  For every job it compares the fast path's settled iteration time
(:meth:`sfenv.sim.links.LinkState.settle`) with the played one (:func:`sfenv.model.flowcheck.simulate_jobs`)
and prints the error distribution, then the errors by job kind, by the case's mix (does a GPipe
pipeline share a link with a ring?) and by the average load of the busiest directed link the job
crosses (bits per played iteration over capacity).

Run: ``python -m sfenv.experiments.flow_check [--seeds 0:110] [--iterations N] [--warmup W] [--offsets K]
[--json out.json]``; seeds ``A:B`` or a comma list; ``--offsets K`` plays each case from K seeded start
offsets and compares with their mean (the played time's own dependence on them is printed).
``--decompose`` instead tells where the error comes from (:func:`decomposed_errors`): each job is
played alone at the WAN transfer times it had when played with the others, at their mean and drawn
from them at random.  ``--reference REF.json`` (rows a longer run wrote with ``--json``) asks what a
fast path that *plays* the jobs together, as the check does, could reach (:func:`reference_agreement`):
each case of the file is played once more, from a start offset the file's run never used, for
``--iterations`` after ``--warmup``, and compared with the file's played times.  The
seeds split: 0-109 are the set docs/model.md first measured (and tuned against: "training"),
1000-1109 a fresh set reported after tuning, 0-9 the default test's.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from sfenv.app.script import ScriptParser
from sfenv.errors import InvalidInput
from sfenv.model.flowcheck import TransferKind, TransferTrace, simulate_jobs, zero_bubble_candidates
from sfenv.model.perf import PerfParams, Plan, Stage, evaluate_plan, plan_flow_groups, stage_layer_split
from sfenv.model.sharing import BURST, WAN_SHARING
from sfenv.sim.links import LinkState
from sfenv.world.hardware import get_gpu
from sfenv.world.topology import Link, Region, Topology
from sfenv.world.workload import MODEL_ZOO, JobSpec

if TYPE_CHECKING:
    from sfenv.scenario import Scenario

__all__ = ["case_errors", "decomposed_errors", "episode_starts", "fastest_alone", "job_kind", "lone_errors", "main",
           "random_case", "read_reference", "reference_agreement", "report_decomposed", "settled_state",
           "settled_times", "together_errors"]

#: the default test's and docs' region hardware
_GPU = "A100-80GB"

Case = tuple[Topology, PerfParams, list[tuple[Plan, JobSpec]]]


def _regions(n: int) -> list[Region]:
    gpu = get_gpu(_GPU)
    return [Region(f"r{i}", gpu, 64, "z", intra_bw_gbps=100.0, intra_latency_ms=0.01) for i in range(n)]


def random_case(seed: int) -> Case:
    """A random shared-link case: 3 regions on a line or a triangle of 1-10 Gbit/s links, 2-4 jobs across them."""
    rng = np.random.default_rng(seed)
    pairs = [(0, 1), (1, 2), (0, 2)] if rng.random() < 0.5 else [(0, 1), (1, 2)]
    topo = Topology(_regions(3), [Link(a, b, float(rng.choice([1.0, 2.0, 5.0, 10.0])), float(rng.uniform(5, 60)))
                                  for a, b in pairs])
    params = PerfParams(dp_overlap=float(rng.integers(0, 2)))
    schedule = str(rng.choice(["gpipe", "1f1b"]))
    jobs: list[tuple[Plan, JobSpec]] = []
    while len(jobs) < int(rng.integers(2, 5)):
        plan, job = _random_job(rng, len(jobs), schedule)
        if len(plan.regions) > 1 and evaluate_plan(plan, job, topo, params).feasible:
            jobs.append((plan, job))
    return topo, params, jobs


def _random_job(rng: np.random.Generator, jid: int, schedule: str) -> tuple[Plan, JobSpec]:
    """A pipeline across regions, a data-parallel ring across regions, or a hybrid of both."""
    model = MODEL_ZOO[str(rng.choice(["gpt-350m", "gpt-1.3b"]))]
    kind = str(rng.choice(["chain", "chain", "ring", "hybrid"]))
    b = int(rng.choice([1, 2]))
    if kind == "chain":
        p, d = int(rng.integers(2, 4)), int(rng.choice([1, 2, 4]))
        regs = [int(rng.integers(3))]
        while len(regs) < p:
            r = int(rng.integers(3))
            if r != regs[-1]:
                regs.append(r)
        stages = tuple(Stage.at(r, n, dp=d) for r, n in zip(regs, stage_layer_split(model.layers, [1.0] * p)))
    elif kind == "ring":
        place = tuple((int(r), int(rng.integers(1, 3))) for r in rng.permutation(3)[: int(rng.integers(2, 4))])
        stages, d = (Stage(model.layers, place),), sum(n for _, n in place)
    else:
        regs = [int(x) for x in rng.permutation(3)]
        first, second = stage_layer_split(model.layers, [1.0, 1.0])
        stages = (Stage(first, ((regs[0], 1), (regs[1], 1))), Stage(second, ((regs[int(rng.integers(1, 3))], 1),
                                                                            (regs[0], 1))))
        d = 2
    batch = max(int(rng.choice([8, 16, 32])) * d * b // 2, d * b)
    return Plan(jid, stages, micro_batch=b, schedule=schedule, recompute="full"), JobSpec(jid, model, batch, 1, 0.0, 1,
                                                                                            512)


def settled_state(topo: Topology, params: PerfParams, jobs: Sequence[tuple[Plan, JobSpec]]) -> LinkState:
    """The links once the jobs (ids 0, 1, ... in order) are started one by one and their load settles."""
    state = LinkState(topo, params)
    for jid, (plan, job) in enumerate(jobs):
        state.start(jid, plan, job, state.evaluate(plan, job))
        state.settle(list(state.jobs))
    state.settle(list(state.jobs))
    return state


def settled_times(topo: Topology, params: PerfParams, jobs: Sequence[tuple[Plan, JobSpec]]) -> list[float]:
    """The fast path's iteration times once the jobs' load settles (as the simulator keeps it)."""
    state = settled_state(topo, params, jobs)
    return [state.jobs[j].perf.iter_time for j in range(len(jobs))]


def _hop_transfer_error(topo: Topology, plan: Plan, job: JobSpec, perf: Any, played: dict[TransferKind, float],
                        index: int) -> float:
    """How much longer the fast path expects a job's hop transfers to take than the check played them.

    The signed mean, over the job's pipeline hop directions across regions, of the fast path's
    transfer time (bits over its rate) against the mean the check played (nan without such hops).
    """
    errors = []
    for g, rate in zip(plan_flow_groups(plan, topo, job), perf.flow_rates_bps, strict=True):
        if g.kind != BURST:
            continue
        for (jid, a, b, bits, tag), seconds in played.items():
            if jid == index and tag == -1 - g.key and bits == g.bits and \
                    topo.directed_route(a, b, topo.route_for(a, b, bits / 8.0)[0]) == g.links:
                errors.append(g.bits / rate / seconds - 1.0)
    return float(np.mean(errors)) if errors else math.nan


def job_kind(plan: Plan) -> str:
    """``ring`` (one stage over regions), ``chain`` (stages each in one region) or ``hybrid``."""
    if len(plan.stages) == 1:
        return "ring"
    return "chain" if all(len(st.placement) == 1 for st in plan.stages) else "hybrid"


#: the step between the start-offset seeds of one case's plays (:func:`case_errors`, ``offsets`` > 1)
OFFSET_SEED_STEP = 1_000_003


def case_errors(seed: int, iterations: int = 5, warmup: int = 2, offsets: int = 1,
                wan_sharing: str | None = None) -> list[dict[str, Any]]:
    """Per job of case ``seed``: signed error of the fast path against the check, and what describes the job.

    :param offsets: plays of the case from different seeded start offsets (seeds ``seed + k x``
        :data:`OFFSET_SEED_STEP`); the check's time is their mean, and ``check_spread`` (max - min over
        the mean) says how much the played time itself depends on where the jobs started.
    :param wan_sharing: the fast path's sharing model (:attr:`sfenv.model.perf.PerfParams.wan_sharing`;
        None: the default); the check does not depend on it.
    """
    if offsets < 1:
        raise ValueError(f"offsets: expected at least 1, got {offsets}")
    topo, params, jobs = random_case(seed)
    if wan_sharing is not None:
        params = dataclasses.replace(params, wan_sharing=wan_sharing)
    plays = np.array([simulate_jobs(topo, jobs, params, iterations=iterations, warmup=warmup,
                                    seed=seed + k * OFFSET_SEED_STEP) for k in range(offsets)])
    played = plays.mean(axis=0).tolist()
    spread = ((plays.max(axis=0) - plays.min(axis=0)) / plays.mean(axis=0)).tolist()
    fast = settled_times(topo, params, jobs)
    alone = [evaluate_plan(p, j, topo, params).iter_time for p, j in jobs]
    # average load per directed link in the played run: every bit of an iteration crosses it once per iteration
    bits = np.zeros(topo.num_directed)
    crossed: list[set[int]] = []
    kinds_on = [set() for _ in range(topo.num_directed)]  # type: list[set[str]]
    for (plan, job), t in zip(jobs, played):
        links: set[int] = set()
        for g in plan_flow_groups(plan, topo, job):
            for e in g.links:
                bits[e] += g.members * g.bits * g.transfers / t
                links.add(e)
                kinds_on[e].add(("gpipe-" if plan.schedule == "gpipe" else "1f1b-") + ("ring" if g.kind else "hop"))
        crossed.append(links)
    load = bits / topo.directed_bw_bps
    rows = []
    for jid, ((plan, _job), t) in enumerate(zip(jobs, played)):
        links = crossed[jid]
        mix = set().union(*(kinds_on[e] for e in links)) if links else set()
        rows.append({
            "seed": seed, "job": jid, "kind": job_kind(plan), "schedule": plan.schedule,
            "overlap": params.dp_overlap, "jobs": len(jobs), "played_s": t, "fast_s": fast[jid],
            "err": fast[jid] / t - 1.0, "alone_err": alone[jid] / t - 1.0, "check_spread": spread[jid],
            "max_load": float(max((load[e] for e in links), default=0.0)),
            "gpipe_ring_mix": ("gpipe-hop" in mix or "gpipe-ring" in mix) and any("ring" in k for k in mix)
            and len(jobs) > 1,
            "mix": sorted(mix),
        })
    return rows


#: the most start offsets a ``--json`` file's run may have used: :func:`reference_agreement` plays from the next
MAX_REFERENCE_OFFSETS = 64
#: the largest ``--reference`` file read (a row is about 400 bytes; 110 cases write about 120 KB)
MAX_REFERENCE_BYTES = 16 << 20


def read_reference(path: str) -> dict[int, dict[int, float]]:
    """A ``--json`` file's played times, ``{case seed: {job: seconds}}``, checked whole before any is used.

    :raises InvalidInput: naming the file and the first bad row (not a list of rows; a row without an
        integer ``seed`` and ``job``, or whose ``played_s`` is not a positive finite number; a job given twice).
    """
    from sfenv.world.files import read_text

    text = read_text(path, "flow-check rows file", MAX_REFERENCE_BYTES)
    try:
        rows = json.loads(text)
    except (ValueError, RecursionError) as e:  # RecursionError: nesting deeper than the parser's stack
        raise InvalidInput(f"{path}: not JSON ({str(e)[:80]})") from None
    if not isinstance(rows, list) or not rows:
        raise InvalidInput(f"{path}: expected a non-empty list of rows written by flow_check --json")
    played: dict[int, dict[int, float]] = {}
    for n, row in enumerate(rows):
        ok = isinstance(row, dict) and all(type(row.get(k)) is int and row[k] >= 0 for k in ("seed", "job"))
        value = row.get("played_s") if isinstance(row, dict) else None
        if not ok or isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
            raise InvalidInput(f"{path}: row {n}: expected integer 'seed' and 'job' (0 or more) and a positive "
                               f"finite 'played_s'")
        if row["job"] in played.setdefault(row["seed"], {}):
            raise InvalidInput(f"{path}: row {n}: seed {row['seed']} job {row['job']} given twice")
        played[row["seed"]][row["job"]] = float(value)
    return played


def reference_agreement(reference: dict[int, dict[int, float]], iterations: int = 6,
                        warmup: int = 2) -> list[dict[str, Any]]:
    """Each reference job played once more, from an unused start offset, against the reference's played time.

    This is what a fast path that simulated the running jobs' flows together (a short co-simulation
    instead of :mod:`sfenv.model.sharing`'s expected rates) could reach at best: the check's own
    dependence on where the jobs started and on how long it plays.  The offset is the one a run
    with :data:`MAX_REFERENCE_OFFSETS` offsets would play next (seed ``case + MAX_REFERENCE_OFFSETS
    x`` :data:`OFFSET_SEED_STEP`), so no reference run of up to that many offsets has used it.

    :raises InvalidInput: if a case's jobs are not the ones :func:`random_case` builds for its seed.
    """
    rows = []
    for seed in sorted(reference):
        topo, params, jobs = random_case(seed)
        if set(reference[seed]) != set(range(len(jobs))):
            raise InvalidInput(f"reference case {seed}: jobs {sorted(reference[seed])[:8]}, but the case has "
                               f"{len(jobs)}: not written by this flow_check")
        played = simulate_jobs(topo, jobs, params, iterations=iterations, warmup=warmup,
                               seed=seed + MAX_REFERENCE_OFFSETS * OFFSET_SEED_STEP)
        rows += [{"seed": seed, "job": j, "played_s": t, "reference_s": reference[seed][j],
                  "err": t / reference[seed][j] - 1.0} for j, t in enumerate(played)]
    return rows


def decomposed_errors(seed: int, iterations: int = 30, warmup: int = 5) -> list[dict[str, Any]]:
    """Per job of case ``seed``: how far the fast path is from the check, and how far two plays of the job alone are.

    The jobs are played together once (start offsets seeded by ``seed``), recording each WAN
    transfer's time (:data:`sfenv.model.flowcheck.TransferTrace`).  Then each job is played alone
    (same offset seed) with every WAN transfer taking, instead of a share of the network, the time
    transfers of its kind (hop direction or ring edge) took together after the first
    ``warmup / (warmup + iterations)`` of the play:

    - ``means_err``: each at their mean.  What is left is the effect of their *variation* (and of
      when, in the job's own pipeline, the slow ones fall); the fast path's own mean transfer times
      are what it can get wrong beyond that.
    - ``draws_err``: each drawn at random from them (independently, seeded): variation kept, its
      correlation with the pipeline and the other jobs lost.

    :return: rows with ``seed``, ``job``, ``kind``, ``schedule``, ``played_s`` (the check together) and
        the errors against it of the fast path (``fast_err``), ``means_err`` and ``draws_err``; and
        ``hop_transfer_err``, the signed mean error of the fast path's hop transfer times (bits over
        the rate it expects) against their played means (nan for a job without pipeline hops across
        regions).
    """
    topo, params, jobs = random_case(seed)
    trace: TransferTrace = {}
    played = simulate_jobs(topo, jobs, params, iterations=iterations, warmup=warmup, seed=seed, trace=trace)
    state = settled_state(topo, params, jobs)
    end = max((start for times in trace.values() for start, _ in times), default=0.0)
    settled = end * warmup / (warmup + iterations)
    kept = {kind: np.array([x for start, x in times if start >= settled] or [x for _, x in times])
            for kind, times in trace.items()}
    played_means = {kind: float(times.mean()) for kind, times in kept.items()}
    rng = np.random.default_rng(seed)
    rows = []
    for jid, (plan, job) in enumerate(jobs):
        def at_mean(kind: TransferKind, jid: int = jid) -> float:  # played alone, the job's index is 0
            return float(kept[(jid, kind[1], kind[2], kind[3], kind[4])].mean())

        def drawn(kind: TransferKind, jid: int = jid) -> float:
            return float(rng.choice(kept[(jid, kind[1], kind[2], kind[3], kind[4])]))

        means, draws = (simulate_jobs(topo, [(plan, job)], params, iterations=iterations, warmup=warmup, seed=seed,
                                      given=given)[0] for given in (at_mean, drawn))
        t, perf = played[jid], state.jobs[jid].perf
        rows.append({"seed": seed, "job": jid, "kind": job_kind(plan), "schedule": plan.schedule, "played_s": t,
                     "fast_err": perf.iter_time / t - 1.0, "means_err": means / t - 1.0, "draws_err": draws / t - 1.0,
                     "hop_transfer_err": _hop_transfer_error(topo, plan, job, perf, played_means, jid)})
    return rows


def report_decomposed(rows: Sequence[dict[str, Any]]) -> None:
    """Print :func:`decomposed_errors`' three error distributions, overall and by schedule."""
    for label, key in (("fast path", "fast_err"), ("alone at the played means", "means_err"),
                       ("alone at played times drawn", "draws_err")):
        print(f"{label:<28} {_summary(np.array([r[key] for r in rows]))}")
        for schedule in sorted({r["schedule"] for r in rows}):
            print(f"  {schedule:<26} {_summary(np.array([r[key] for r in rows if r['schedule'] == schedule]))}")
    for schedule in sorted({r["schedule"] for r in rows}):
        hops = np.array([r["hop_transfer_err"] for r in rows if r["schedule"] == schedule])
        hops = hops[~np.isnan(hops)]
        print(f"the fast path's hop transfer times against their played means, {schedule}: {_summary(hops)}")


def episode_starts(scenario: str | Scenario, agent: str, seeds: Sequence[int]) -> dict[str, Any]:
    """What an agent really starts across regions in a scenario's episodes, and how often it shares the WAN.

    ``scenario``: a bundled name, a file, or a :class:`~sfenv.scenario.Scenario` (e.g. one played under
    ``sim.wan_sharing: v2``, as env v2 played it).

    Plays each seeded episode and, at every start of a plan across regions, records whether the job
    shares a directed link with another running job, and the plan (one per distinct plan and job shape).

    :return: ``starts``, ``shared`` (starts that shared a directed link), ``plans`` (distinct
        ``(plan, job)`` pairs, job ids 0), ``together`` (at each shared start with every link at its
        nominal capacity, the running jobs across regions as ``(plan, job)`` pairs, job ids 0, 1, ...)
        and ``topo`` and ``params`` of the scenario.
    """
    import dataclasses

    from sfenv.agents.registry import make_agent

    from sfenv.scenario import load_scenario
    from sfenv.sim.episode import make_simulator

    sc = load_scenario(scenario)
    found: dict[str, Any] = {"starts": 0, "shared": 0, "plans": {}, "together": []}
    sim = None
    for seed in seeds:
        sim = make_simulator(sc, seed)
        player = make_agent(agent)
        player.reset(seed)
        links = sim.links
        start = links.start

        def recording_start(job_id: int, plan: Plan, job: JobSpec, perf: Any, fixed: bool = False,
                            _links: LinkState = links, _start: Any = start) -> set[int]:
            touched = _start(job_id, plan, job, perf, fixed)
            mine = _links.jobs.get(job_id)
            if mine is not None and len(mine.links):
                found["starts"] += 1
                others = [set(map(int, o.links)) for k, o in _links.jobs.items() if k != job_id]
                shared = any(set(map(int, mine.links)) & o for o in others)
                found["shared"] += shared
                if shared and bool(np.all(_links.factor == 1.0)):
                    found["together"].append([(dataclasses.replace(o.plan, job_id=i),
                                               dataclasses.replace(o.job, job_id=i))
                                              for i, o in enumerate(_links.jobs.values())])
                key = (plan.stages, plan.micro_batch, plan.schedule, plan.recompute, job.model.name, job.global_batch)
                found["plans"].setdefault(key, (dataclasses.replace(plan, job_id=0),
                                                dataclasses.replace(job, job_id=0)))
            return touched

        links.start = recording_start  # type: ignore[method-assign]
        sim.run(player.decide, replan=player.replan if player.replans else None, replan_hourly=player.replan_hourly)
    assert sim is not None
    found["plans"] = list(found["plans"].values())
    found["topo"], found["params"] = sim.links.topo, sim.links.params
    return found


def fastest_alone(topo: Topology, params: PerfParams, plan: Plan, job: JobSpec, iterations: int = 3,
                  warmup: int = 1) -> tuple[Plan, str, float]:
    """The way the check plays ``plan`` fastest alone, and its time.

    Among :func:`~sfenv.model.flowcheck.zero_bubble_candidates` that fit in memory: a zero-bubble
    plan's orders and fallbacks, of which the model takes the fastest; any other plan is itself.
    """
    best: tuple[Plan, str, float] | None = None
    for variant, order in zero_bubble_candidates(plan):
        if variant is not plan and not evaluate_plan(variant, job, topo, params).feasible:
            continue
        t = simulate_jobs(topo, [(variant, job)], params, iterations=iterations, warmup=warmup, orders=[order])[0]
        if best is None or t < best[2]:
            best = (variant, order, t)
    assert best is not None  # the plan itself is always a candidate
    return best


#: :func:`fastest_alone`'s results, shared by :func:`lone_errors` and :func:`together_errors` within one scenario
Ways = dict[tuple[Plan, JobSpec, float], tuple[Plan, str, float]]


def _fastest_cached(ways: Ways | None, topo: Topology, params: PerfParams, plan: Plan,
                    job: JobSpec) -> tuple[Plan, str, float]:
    """:func:`fastest_alone` (default iterations), looked up in ``ways`` first (job ids set to 0 for the key)."""
    import dataclasses

    key = (dataclasses.replace(plan, job_id=0), dataclasses.replace(job, job_id=0), params.dp_overlap)
    if ways is not None and key in ways:
        return ways[key]
    found = fastest_alone(topo, params, plan, job)
    if ways is not None:
        ways[key] = found
    return found


def lone_errors(topo: Topology, params: PerfParams, plans: Sequence[tuple[Plan, JobSpec]],
                ways: Ways | None = None) -> list[dict[str, Any]]:
    """Each plan alone, ``dp_overlap`` 0 and 1: the fast path against the check played the fastest way.

    :param ways: a cache of :func:`fastest_alone` for this topology and these parameters (filled here).
    """
    import dataclasses

    rows = []
    for plan, job in plans:
        for overlap in (0.0, 1.0):
            at = dataclasses.replace(params, dp_overlap=overlap)
            fast = settled_times(topo, at, [(plan, job)])[0]
            variant, order, played = _fastest_cached(ways, topo, at, plan, job)
            rows.append({"stages": len(plan.stages), "schedule": plan.schedule, "overlap": overlap,
                         "played_as": f"{variant.schedule}/{order}", "fast_s": fast, "played_s": played,
                         "err": fast / played - 1.0})
    return rows


def together_errors(topo: Topology, params: PerfParams, sets: Sequence[Sequence[tuple[Plan, JobSpec]]],
                    iterations: int = 30, warmup: int = 5, offsets: int = 4,
                    ways: Ways | None = None) -> list[dict[str, Any]]:
    """Each set of jobs played together, ``dp_overlap`` 0 and 1: per job, the fast path against the check.

    Each job is played the way it runs fastest alone (:func:`fastest_alone`, looked up in ``ways``
    when :func:`lone_errors` found it already); the check's time is its mean over ``offsets`` start offsets.
    """
    import dataclasses

    rows = []
    for n, jobs in enumerate(sets):
        for overlap in (0.0, 1.0):
            at = dataclasses.replace(params, dp_overlap=overlap)
            fast = settled_times(topo, at, jobs)
            fastest = [_fastest_cached(ways, topo, at, plan, job) for plan, job in jobs]
            played_jobs = [(dataclasses.replace(variant, job_id=plan.job_id), job)
                           for (variant, _, _), (plan, job) in zip(fastest, jobs, strict=True)]
            played = np.mean([simulate_jobs(topo, played_jobs, at, iterations=iterations, warmup=warmup,
                                            seed=k * OFFSET_SEED_STEP, orders=[order for _, order, _ in fastest])
                              for k in range(offsets)], axis=0)
            rows += [{"set": n, "job": j, "overlap": overlap, "fast_s": f, "played_s": float(t), "err": f / t - 1.0}
                     for j, (f, t) in enumerate(zip(fast, played, strict=True))]
    return rows


def _seeds(spec: str) -> list[int]:
    """``"A:B"`` (A to B - 1) or ``"0,3,7"`` as a list of case seeds.

    :raises InvalidInput: naming ``--seeds``, for anything else or an empty list.
    """
    try:
        if ":" in spec:
            a, b = spec.split(":")
            seeds = list(range(int(a), int(b)))
        else:
            seeds = [int(s) for s in spec.split(",") if s.strip()]
    except ValueError:
        seeds = []
    if not seeds or min(seeds) < 0:
        raise InvalidInput(f"--seeds: expected A:B (A < B) or a comma list of seeds >= 0, got {spec[:60]!r}")
    return seeds


def _summary(err: np.ndarray) -> str:
    a = np.abs(err)
    if not len(a):
        return "n=0"
    return (f"n={len(a):3d} median {100 * np.median(a):5.1f} %  within 5 % {100 * (a <= 0.05).mean():5.1f} %  "
            f"p90 {100 * np.quantile(a, 0.9):5.1f} %  max {100 * a.max():5.1f} %  "
            f"(signed mean {100 * err.mean():+5.1f} %)")


def report(rows: Sequence[dict[str, Any]]) -> None:
    """Print the distribution, overall and by bucket."""
    err = np.array([r["err"] for r in rows])
    print(f"all jobs      {_summary(err)}")
    print(f"alone         {_summary(np.array([r['alone_err'] for r in rows]))}")
    if any(r["check_spread"] for r in rows):  # several start offsets: how much the played time depends on them
        print(f"check spread  {_summary(np.array([r['check_spread'] for r in rows]))}  (over the start offsets)")
    for key in ("kind", "schedule", "overlap", "gpipe_ring_mix"):
        for val in sorted({r[key] for r in rows}, key=str):
            sub = np.array([r["err"] for r in rows if r[key] == val])
            print(f"{key}={val!s:<8} {_summary(sub)}")
    edges = (0.0, 0.5, 0.8, 0.9, 1.01)
    for lo, hi in itertools.pairwise(edges):
        sub = np.array([r["err"] for r in rows if lo <= r["max_load"] < hi])
        print(f"load {lo:.1f}-{hi:.1f}  {_summary(sub)}")
    print("worst 12:")
    for r in sorted(rows, key=lambda r: -abs(r["err"]))[:12]:
        print(f"  seed {r['seed']:4d} job {r['job']} {r['kind']:6s} {r['schedule']:5s} ov {r['overlap']:.0f} "
              f"load {r['max_load']:.2f} err {100 * r['err']:+6.1f} %  mix {','.join(r['mix'])}")


def _report_episodes(spec: str, seeds: list[int], max_sets: int, num_jobs: int | None = None) -> None:
    """Print :func:`episode_starts` and :func:`lone_errors` for each ``SCENARIO:AGENT`` of ``spec``.

    :param num_jobs: jobs per episode instead of each scenario's own (as ``claims`` caps spider-16/32/64).
    """
    from sfenv.scenario import load_scenario

    for pair in [p.strip() for p in spec.split(",") if p.strip()]:
        scenario, sep, agent = pair.rpartition(":")
        if not sep or not scenario or not agent:
            raise InvalidInput(f"--episodes: expected SCENARIO:AGENT pairs, got {pair[:80]!r}")
        played = load_scenario(scenario)
        if num_jobs is not None:
            played = played.with_overrides(workload={"num_jobs": num_jobs})
        found = episode_starts(played, agent, seeds)
        ways: Ways = {}
        rows = lone_errors(found["topo"], found["params"], found["plans"], ways)
        worst = f"largest error {100 * max(abs(r['err']) for r in rows):.2f} %" if rows else "none"
        jobs = "" if num_jobs is None else f" (num_jobs {num_jobs})"
        print(f"{scenario}{jobs} {agent} seeds {seeds}: {found['starts']} starts across regions, "
              f"{found['shared']} sharing a directed link with another job; {len(found['plans'])} distinct plans, "
              f"{len(rows) // 2} played alone (dp_overlap 0 and 1): {worst}")
        together = together_errors(found["topo"], found["params"], found["together"][:max_sets],
                                   iterations=12, warmup=3, offsets=2, ways=ways)
        if together:
            err = np.array([r["err"] for r in together])
            print(f"  played together as they ran at the first {len({r['set'] for r in together})} shared starts "
                  f"(of {len(found['together'])}; 12 iterations from 2 offsets, "
                  f"{len(err) // 2} jobs, dp_overlap 0 and 1): {_summary(err)}")


def _report_reference(path: str, iterations: int, warmup: int) -> None:
    """Print :func:`reference_agreement` for the ``--reference`` file ``path``."""
    try:
        reference = read_reference(path)
        t0 = time.process_time()
        rows = reference_agreement(reference, iterations, warmup)
    except InvalidInput as e:
        raise InvalidInput(f"--reference: {e}") from None
    err = np.abs([r["err"] for r in rows])
    print(f"{len(rows)} jobs in {len(reference)} cases of {path}, each played once more from an unused start "
          f"offset ({iterations} iterations after {warmup}; {time.process_time() - t0:.1f} CPU s)")
    print(f"against the reference's played times: within 5 % {100 * np.mean(err < 0.05):.1f} %, within 2 % "
          f"{100 * np.mean(err < 0.02):.1f} %, mean absolute {100 * err.mean():.2f} %, largest {100 * err.max():.1f} %")


def main(argv: Sequence[str] | None = None) -> None:
    """Run the cases and print the report (``--json``: also write every job's row)."""
    ap = ScriptParser(script=__file__, description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0:110", help="case seeds: A:B (range) or a comma list")
    ap.add_argument("--iterations", type=int, default=5, help="played iterations averaged per job")
    ap.add_argument("--warmup", type=int, default=2, help="played iterations dropped per job")
    ap.add_argument("--offsets", type=int, default=1,
                    help="plays per case from different start offsets, averaged (its spread is printed)")
    ap.add_argument("--json", default=None, help="write every job's row to this file")
    ap.add_argument("--episodes", default=None, metavar="SCENARIO:AGENT,...",
                    help="instead of random cases: what these agents start across regions in these scenarios' "
                         "episodes (seeds --episode-seeds), how often it shares a link, and each plan alone")
    ap.add_argument("--episode-seeds", default="10000,10001", help="episode seeds for --episodes")
    ap.add_argument("--decompose", action="store_true",
                    help="instead: each job alone at the WAN transfer times it played together (their means, "
                         "and drawn from them), to tell the error of mean times from that of their variation")
    ap.add_argument("--wan-sharing", default=None, metavar="{" + ",".join(WAN_SHARING) + "}",
                    help="random cases: the fast path's WAN sharing model (default: PerfParams', v5)")
    ap.add_argument("--reference", default=None, metavar="REF.json",
                    help="instead: play the cases of this --json file once more from an unused start offset "
                         "(--iterations after --warmup) and compare with its played times")
    ap.add_argument("--num-jobs", type=int, default=None,
                    help="--episodes: jobs per episode instead of each scenario's own (claims caps spider-16/32/64 "
                         "at 12)")
    ap.add_argument("--max-sets", type=int, default=3,
                    help="--episodes: the shared starts whose jobs are played together, at most (the first ones)")
    args = ap.parse_args(argv)
    if args.episodes:
        if args.max_sets < 0:
            raise InvalidInput(f"--max-sets: expected 0 or more, got {args.max_sets}")
        if args.num_jobs is not None and args.num_jobs < 1:
            raise InvalidInput(f"--num-jobs: expected at least 1, got {args.num_jobs}")
        _report_episodes(args.episodes, _seeds(args.episode_seeds), args.max_sets, args.num_jobs)
        return
    for name in ("iterations", "offsets"):
        if getattr(args, name) < 1:
            raise InvalidInput(f"--{name}: expected at least 1, got {getattr(args, name)}")
    if args.warmup < 0:
        raise InvalidInput(f"--warmup: expected 0 or more, got {args.warmup}")
    if args.wan_sharing is not None and args.wan_sharing not in WAN_SHARING:
        raise InvalidInput(f"--wan-sharing: expected one of {', '.join(WAN_SHARING)}, got {args.wan_sharing[:20]!r}")
    if args.reference:
        _report_reference(args.reference, args.iterations, args.warmup)
        return
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    for seed in _seeds(args.seeds):
        rows += (decomposed_errors(seed, args.iterations, args.warmup) if args.decompose
                 else case_errors(seed, args.iterations, args.warmup, args.offsets, args.wan_sharing))
    print(f"{len(rows)} jobs in {len(_seeds(args.seeds))} cases, {time.perf_counter() - t0:.0f} s")
    (report_decomposed if args.decompose else report)(rows)
    if args.json:
        from pathlib import Path

        from sfenv.runs.results import atomic_write_json

        atomic_write_json(Path(args.json), rows)  # whole or not at all: a --reference file is read whole


if __name__ == "__main__":
    from sfenv.app.script import run_script

    raise SystemExit(run_script(main))
