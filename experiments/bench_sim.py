"""Simulator benchmark: Poisson workloads with FIFO, and a job-trace replay at scale.

**Poisson.**  1,000-job Poisson workloads on spider-8 and spider-64 with the FIFO agent.  Prints
wall time, simulated events per second, decisions and peak resident memory of the process
(ru_maxrss), plus a reference measured in the same run (raw heapq push/pop of the same number of
events, and raw ``evaluate_plan`` calls per second) so ratios stay comparable across machines.
Target: 1,000 jobs on 64 regions < 10 s.

**Trace replay.**  A job trace (``--trace PATH`` or the environment variable ``SFENV_TRACE``; the
Philly week of the project's measured data has 11,386 jobs) replayed
through the scenario machinery: spider-64 with ``workload.arrival = {process: trace, path: ...}``,
so every row becomes a job by :func:`sfenv.world.workload.jobs_from_trace` (model size by GPU count,
iterations by duration, capped at the scenario's largest iteration count; ``min_gpus`` 1,
``max_gpus`` 8 x the row's GPUs).  Each agent (FIFO and SpinSearch by default) runs the whole
episode in a fresh process, so its peak RSS is its own (the interpreter and imports included) and
no process-wide cache carries over from another run.  Prints wall time (scenario build + run),
events/s, jobs started, agent calls, peak RSS, the ratios to the targets (30 s and 500 MB per
agent) and a digest of the episode's job records (equal digests = identical episodes).
``--time-scale 0.1`` compresses the arrivals ten times (a stress test: long queues).

Run: ``python -m sfenv.experiments.bench_sim [--jobs 1000] [--trace PATH] [--trace-only]``.
Without a trace (no ``--trace`` and no ``SFENV_TRACE``) the replay is skipped with a message.
"""

from __future__ import annotations

import hashlib
import heapq
import os
import resource
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from sfenv.agents.fifo import FIFOAgent
from sfenv.agents.registry import make_agent, resolve_names

from sfenv.app.script import ScriptParser
from sfenv.model.perf import evaluate_plan
from sfenv.model.planning import fit_plan
from sfenv.scenario import load_scenario
from sfenv.sim import make_simulator
from sfenv.world.files import capped_lines, open_text

#: the trace replayed when --trace is not given: the file named by SFENV_TRACE, if set
DEFAULT_TRACE: Path | None = Path(os.environ["SFENV_TRACE"]) if os.environ.get("SFENV_TRACE") else None
#: targets per agent for the trace replay (issue 8, Benchmark)
TARGET_WALL_S = 30.0
TARGET_RSS_MB = 500.0
TRACE_SCENARIO = "spider-64"
TRACE_AGENTS = "fifo,spinsearch"


def heap_reference(n: int) -> float:
    """Seconds for n heappush + heappop of event tuples (a floor for any event loop)."""
    t = time.perf_counter()
    h: list = []
    for i in range(n):
        heapq.heappush(h, (float(i % 97), 0, i, None))
    while h:
        heapq.heappop(h)
    return time.perf_counter() - t


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, MB (ru_maxrss: KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e6


def records_digest(sim) -> str:
    """A short SHA-256 of the episode's job records and end time: equal digests = identical episodes."""
    return hashlib.sha256(repr((sim.records(), sim.time)).encode()).hexdigest()[:12]


def run(name: str, jobs: int, rate_scale: float) -> dict:
    """The Poisson benchmark on scenario ``name``: ``jobs`` jobs at ``rate_scale`` x its rate, FIFO."""
    sc = load_scenario(name)
    base_rate = sc.arrival_rate_per_hour
    sc = sc.with_overrides(
        workload={"num_jobs": jobs, "arrival": {"process": "poisson", "rate_per_hour": base_rate * rate_scale}}
    )
    t0 = time.perf_counter()
    sim = make_simulator(sc, 0)
    report = sim.run(FIFOAgent().decide)
    wall = time.perf_counter() - t0
    job = sim.jobs[0].spec
    res = fit_plan(job, sim.topo, [0], [min(64, int(sim.topo.gpu_counts[0]))], sim.evaluate)
    assert res is not None
    n_eval = 2000
    t1 = time.perf_counter()
    for _ in range(n_eval):
        evaluate_plan(res[0], job, sim.topo, sim.params)
    eval_rate = n_eval / (time.perf_counter() - t1)
    return {
        "scenario": name, "regions": sim.topo.num_regions, "jobs": jobs, "wall_s": wall,
        "events": sim.events_processed, "events_per_s": sim.events_processed / wall,
        "decisions": sim.decisions, "peak_mb": peak_rss_mb(), "finished": report.finished,
        "heap_ref_s": heap_reference(sim.events_processed), "evals_per_s": eval_rate,
    }


def trace_rows(path: str | Path) -> int:
    """Data rows (lines after the header) of a trace CSV."""
    with open_text(path, "trace CSV") as fh:  # a regular file of bounded size, bounded lines
        return max(0, sum(1 for line in capped_lines(fh, path, "trace CSV") if line.strip()) - 1)


def trace_scenario(path: str | Path, jobs: int | None = None, time_scale: float = 1.0, scenario: str = TRACE_SCENARIO):
    """``scenario`` with its workload replaced by the first ``jobs`` rows (all if None) of the trace at ``path``."""
    n = trace_rows(path) if jobs is None else jobs
    return load_scenario(scenario).with_overrides(
        workload={"num_jobs": n, "arrival": {"process": "trace", "path": str(Path(path).resolve()),
                                             "time_scale": time_scale}}
    )


def run_trace(
    path: str | Path, agent: str, jobs: int | None = None, time_scale: float = 1.0, scenario: str = TRACE_SCENARIO
) -> dict:
    """Replay the trace at ``path`` on ``scenario`` with ``agent`` in this process; one result row.

    ``wall_s`` covers building the episode (reading the CSV) and running it to the end;
    ``events_per_s`` is over the run alone.  ``peak_mb`` is this process's peak RSS so far (run
    each replay in a fresh process, as :func:`run_trace_isolated` does, for a per-run figure).
    """
    rss0 = peak_rss_mb()
    t0 = time.perf_counter()
    sc = trace_scenario(path, jobs, time_scale, scenario)
    sim = make_simulator(sc, 0)
    t1 = time.perf_counter()
    ag = make_agent(agent)
    ag.reset(0)
    calls = 0

    def decide(view):
        nonlocal calls
        calls += 1
        return ag.decide(view)

    report = sim.run(decide)
    t2 = time.perf_counter()
    return {
        "scenario": scenario, "agent": agent, "jobs": len(sim.jobs), "time_scale": time_scale,
        "build_s": t1 - t0, "run_s": t2 - t1, "wall_s": t2 - t0,
        "events": sim.events_processed, "events_per_s": sim.events_processed / max(t2 - t1, 1e-9),
        "decisions": sim.decisions, "agent_calls": calls, "finished": report.finished,
        "unfinished": report.unfinished, "sim_end_h": sim.time / 3600.0, "mean_jct_h": report.mean_jct_s / 3600.0,
        "rss_before_mb": rss0, "peak_mb": peak_rss_mb(), "digest": records_digest(sim),
    }


def run_trace_isolated(
    path: str | Path, agent: str, jobs: int | None = None, time_scale: float = 1.0, scenario: str = TRACE_SCENARIO
) -> dict:
    """:func:`run_trace` in a freshly spawned process (its own peak RSS, no caches shared with other runs)."""
    with ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn")) as pool:
        return pool.submit(run_trace, str(path), agent, jobs, time_scale, scenario).result()


def format_trace_rows(rows: list[dict]) -> str:
    """The trace replay table, with each run's ratio to the wall-time and memory targets."""
    lines = [
        f"{'agent':<12}{'jobs':>7}{'wall s':>8}{'x 30 s':>8}{'events':>8}{'events/s':>10}{'started':>9}"
        f"{'calls':>8}{'done':>7}{'peak MB':>9}{'x 500 MB':>9}{'sim h':>7}{'JCT h':>7}  digest"
    ]
    for r in rows:
        lines.append(
            f"{r['agent']:<12}{r['jobs']:>7}{r['wall_s']:>8.2f}{r['wall_s'] / TARGET_WALL_S:>8.2f}{r['events']:>8}"
            f"{r['events_per_s']:>10.0f}{r['decisions']:>9}{r['agent_calls']:>8}{r['finished']:>7}"
            f"{r['peak_mb']:>9.1f}{r['peak_mb'] / TARGET_RSS_MB:>9.2f}{r['sim_end_h']:>7.1f}{r['mean_jct_h']:>7.2f}"
            f"  {r['digest']}"
        )
    return "\n".join(lines)


def format_poisson_rows(rows: list[dict]) -> str:
    """The Poisson benchmark table."""
    lines = [f"{'scenario':<10}{'regions':>8}{'jobs':>6}{'wall s':>9}{'events':>8}{'events/s':>10}"
             f"{'decisions':>10}{'RSS MB':>9}{'x heap ref':>11}{'evals/s':>9}{'done':>6}"]
    for r in rows:
        lines.append(f"{r['scenario']:<10}{r['regions']:>8}{r['jobs']:>6}{r['wall_s']:>9.2f}{r['events']:>8}"
                     f"{r['events_per_s']:>10.0f}{r['decisions']:>10}{r['peak_mb']:>9.1f}"
                     f"{r['wall_s'] / r['heap_ref_s']:>11.0f}{r['evals_per_s']:>9.0f}{r['finished']:>6}")
    lines.append("x heap ref = wall time / time of a bare heapq loop over the same number of events")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point."""
    ap = ScriptParser(script=__file__, description="sfenv simulator benchmark (Poisson workloads and a trace replay)")
    ap.add_argument("--jobs", type=int, default=1000, help="jobs per Poisson workload (default: %(default)s)")
    ap.add_argument("--trace", type=Path, default=None,
                    help="job trace CSV to replay, columns submit_offset_s,num_gpus,duration_s "
                         "(default: $SFENV_TRACE if set, else no replay)")
    ap.add_argument("--trace-jobs", type=int, default=None, help="replay only the first N rows (default: all)")
    ap.add_argument("--time-scale", type=float, default=1.0,
                    help="multiply the trace's submit times (0.1 = ten times denser; default: %(default)s)")
    ap.add_argument("--agents", default=TRACE_AGENTS, help="agents for the replay (default: %(default)s)")
    ap.add_argument("--scenario", default=TRACE_SCENARIO, help="platform of the replay (default: %(default)s)")
    part = ap.add_mutually_exclusive_group()
    part.add_argument("--trace-only", action="store_true", help="skip the Poisson benchmark")
    part.add_argument("--no-trace", action="store_true", help="skip the trace replay")
    ap.add_argument("--in-process", action="store_true",
                    help="replay in this process (peak RSS then accumulates over the runs)")
    args = ap.parse_args(argv)
    if args.jobs < 1 or (args.trace_jobs is not None and args.trace_jobs < 1):
        ap.error("--jobs and --trace-jobs must be at least 1")
    if not args.time_scale > 0:
        ap.error("--time-scale must be positive")
    if args.trace is not None and not args.trace.is_file():
        ap.error(f"--trace {args.trace}: no such file")
    try:
        agents = resolve_names(args.agents)
    except Exception as e:  # an unknown name: the registry's message lists the known ones
        ap.error(f"--agents: {e}")
    if any(n.startswith("model:") for n in agents):
        ap.error("--agents: saved models are not supported here, only registered agents")
    if not args.trace_only:
        print(format_poisson_rows([run("spider-8", args.jobs, 1.0), run("spider-64", args.jobs, 1.0)]), flush=True)
    if args.no_trace:
        return
    path = args.trace if args.trace is not None else DEFAULT_TRACE
    if path is None or not path.is_file():
        where = "no trace given" if path is None else f"no trace at {path}"
        print(f"trace replay skipped: {where}; pass --trace PATH (a CSV of submit_offset_s,num_gpus,duration_s, "
              f"e.g. the Philly week of the project's measured data) or set SFENV_TRACE", file=sys.stderr)
        return
    in_trace = trace_rows(path)
    if in_trace == 0:
        ap.error(f"--trace {path}: the trace holds no job (no data row after its header)")
    one = run_trace if args.in_process else run_trace_isolated
    replayed = in_trace if args.trace_jobs is None else min(args.trace_jobs, in_trace)
    print(f"\ntrace replay: {path} ({replayed} jobs, time scale {args.time_scale}) "
          f"on {args.scenario}; targets per agent: {TARGET_WALL_S:.0f} s, {TARGET_RSS_MB:.0f} MB peak RSS", flush=True)
    rows = []
    for name in agents:
        rows.append(one(path, name, args.trace_jobs, args.time_scale, args.scenario))
        print(format_trace_rows(rows).splitlines()[-1] if len(rows) > 1 else format_trace_rows(rows), flush=True)
    print("wall s = build (read the trace) + run; peak MB = ru_maxrss of the process that ran the replay"
          + ("" if args.in_process else " (a fresh one per agent, interpreter and imports included)"))


if __name__ == "__main__":
    from sfenv.app.script import run_script

    raise SystemExit(run_script(main))
