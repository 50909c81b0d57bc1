"""Simulator benchmark: 1,000-job Poisson workloads on spider-8 and spider-64 with the FIFO agent.

Prints wall time, simulated events per second, decisions per second and peak resident memory of
the process (ru_maxrss), plus a reference measured in the same run (raw heapq push/pop of the
same number of events, and raw ``evaluate_plan`` calls per second) so ratios stay comparable
across machines.
Run: ``python -m sfenv.experiments.bench_sim [--jobs 1000]``.  Target: 1,000 jobs on 64 regions < 10 s.
"""

from __future__ import annotations

import argparse
import heapq
import resource
import time

from sfenv.agents.fifo import FIFOAgent

from sfenv.perf import evaluate_plan
from sfenv.planning import fit_plan
from sfenv.scenario import load_scenario


def heap_reference(n: int) -> float:
    """Seconds for n heappush + heappop of event tuples (a floor for any event loop)."""
    t = time.perf_counter()
    h: list = []
    for i in range(n):
        heapq.heappush(h, (float(i % 97), 0, i, None))
    while h:
        heapq.heappop(h)
    return time.perf_counter() - t


def run(name: str, jobs: int, rate_scale: float) -> dict:
    sc = load_scenario(name)
    rate = sc.cfg.workload.arrival.rate_per_hour * rate_scale
    sc = sc.with_overrides(workload={"num_jobs": jobs, "arrival": {"process": "poisson", "rate_per_hour": rate}})
    t0 = time.perf_counter()
    sim = sc.make_simulator(0)
    report = sim.run(FIFOAgent().decide)
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB; process-wide peak
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
        "decisions": sim.decisions, "peak_mb": peak / 1e6, "finished": report.finished,
        "heap_ref_s": heap_reference(sim.events_processed), "evals_per_s": eval_rate,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description="sfenv simulator benchmark")
    ap.add_argument("--jobs", type=int, default=1000)
    args = ap.parse_args()
    rows = [run("spider-8", args.jobs, 1.0), run("spider-64", args.jobs, 1.0)]
    print(f"{'scenario':<10}{'regions':>8}{'jobs':>6}{'wall s':>9}{'events':>8}{'events/s':>10}"
          f"{'decisions':>10}{'RSS MB':>9}{'x heap ref':>11}{'evals/s':>9}{'done':>6}")
    for r in rows:
        print(f"{r['scenario']:<10}{r['regions']:>8}{r['jobs']:>6}{r['wall_s']:>9.2f}{r['events']:>8}"
              f"{r['events_per_s']:>10.0f}{r['decisions']:>10}{r['peak_mb']:>9.1f}"
              f"{r['wall_s'] / r['heap_ref_s']:>11.0f}{r['evals_per_s']:>9.0f}{r['finished']:>6}")
    print("x heap ref = wall time / time of a bare heapq loop over the same number of events")


if __name__ == "__main__":
    main()
