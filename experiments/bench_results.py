"""Results-file benchmark: what writing ``--out`` costs an evaluation, as a ratio to the same run without it.

Times ``evaluate_agents(["fifo"], "spider-8", seeds 0..N-1, num_jobs=1)`` (what
``sfenv evaluate --agents fifo --scenario spider-8 --num-jobs 1 --seed 0 --seeds N --quiet`` runs) without
and with ``out=FILE``, one after the other in this process (the same load on a shared machine), and
prints both times and their ratio.  Target: at most 1.5x at 4,000 seeds (issue 30 section 4).  Before
the batched writer, the file was rewritten after every episode: 441 s against 13.9 s at 4,000 seeds,
36.9 s against 6.8 s at 1,000 (``shared/research/review-reliability-3.md``, finding 8).

``--every-episode`` adds a third run that rewrites the file after every episode (the writer's interval
and cost factor set to 0), to show what the interval saves.

Run: ``python -m sfenv.experiments.bench_results [--seeds 1000,4000] [--rounds 1] [--every-episode]``.
"""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from sfenv.app.evaluate import evaluate_agents
from sfenv.app.script import ScriptParser
from sfenv.runs import results

__all__ = ["TARGET_RATIO", "counted_writes", "evaluate_seconds", "every_episode", "main", "measure", "print_rows"]

#: the target: a run with ``--out`` at most this many times as long as without, at 4,000 seeds
TARGET_RATIO = 1.5


def evaluate_seconds(seeds: int, out: Path | None) -> float:
    """Wall time of evaluating fifo on spider-8 (1 job per episode) on seeds ``0..seeds-1``, writing ``out`` if any."""
    start = time.perf_counter()
    rows = evaluate_agents(["fifo"], "spider-8", list(range(seeds)), num_jobs=1, out=out, progress=False)
    elapsed = time.perf_counter() - start
    assert len(rows) == seeds
    return elapsed


@contextmanager
def counted_writes() -> Iterator[dict[str, float]]:
    """Inside the block, every results-file write is counted and timed: ``{"writes": n, "write_s": seconds}``."""
    tally = {"writes": 0.0, "write_s": 0.0}
    save = results.ResultsWriter.save

    def timed_save(self: results.ResultsWriter) -> None:
        start = time.perf_counter()
        save(self)
        tally["writes"] += 1
        tally["write_s"] += time.perf_counter() - start

    results.ResultsWriter.save = timed_save  # type: ignore[method-assign]
    try:
        yield tally
    finally:
        results.ResultsWriter.save = save  # type: ignore[method-assign]


@contextmanager
def every_episode() -> Iterator[None]:
    """Inside the block the results file is rewritten after every episode (interval and cost factor 0)."""
    saved = results.SAVE_INTERVAL_S, results.SAVE_COST_FACTOR
    results.SAVE_INTERVAL_S, results.SAVE_COST_FACTOR = 0.0, 0.0
    try:
        yield
    finally:
        results.SAVE_INTERVAL_S, results.SAVE_COST_FACTOR = saved


def measure(seeds: int, rounds: int = 1, with_every_episode: bool = False) -> dict[str, float]:
    """The best of ``rounds`` timings of ``seeds`` seeds without and with ``--out`` (and after every episode).

    Each timing with a file starts from no file (a fresh temporary folder).

    :return: ``{"seeds", "without_s", "with_s", "ratio", "file_mb", "writes", "write_s"}`` (``writes``: the
        file's writes in the run with ``--out``, ``write_s``: their total time, of the best round), plus
        ``"every_episode_s"`` and ``"every_episode_ratio"`` if asked.
    """
    best: dict[str, float] = {}
    size = 0
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as folder:
            timings = {"without_s": evaluate_seconds(seeds, None)}
            with counted_writes() as tally:
                timings["with_s"] = evaluate_seconds(seeds, Path(folder) / "r.json")
            if timings["with_s"] <= best.get("with_s", math.inf):
                best.update(tally)
            size = (Path(folder) / "r.json").stat().st_size
            if with_every_episode:
                with every_episode():
                    timings["every_episode_s"] = evaluate_seconds(seeds, Path(folder) / "e.json")
        for key, value in timings.items():
            best[key] = min(best.get(key, math.inf), value)
    row = {"seeds": float(seeds), **best, "ratio": best["with_s"] / best["without_s"], "file_mb": size / 1e6}
    if with_every_episode:
        row["every_episode_ratio"] = best["every_episode_s"] / best["without_s"]
    return row


def print_rows(rows: Sequence[dict[str, float]]) -> None:
    """One line per seed count: the times, the ratio (target at 4,000 seeds) and the file's size."""
    for row in rows:
        every = (f"; after every episode {row['every_episode_s']:.2f} s ({row['every_episode_ratio']:.2f}x)"
                 if "every_episode_s" in row else "")
        print(f"{int(row['seeds']):>6} seeds: without --out {row['without_s']:7.2f} s, "
              f"with --out {row['with_s']:7.2f} s = {row['ratio']:.2f}x (target <= {TARGET_RATIO}x at 4,000 seeds), "
              f"file {row['file_mb']:.2f} MB, {int(row['writes'])} writes in {row['write_s']:.2f} s "
              f"({100 * row['write_s'] / row['with_s']:.1f} % of the run){every}")


def main(argv: Sequence[str] | None = None) -> None:
    """Command line: ``--seeds`` (a comma list of seed counts), ``--rounds``, ``--every-episode``."""
    ap = ScriptParser(script=__file__, description="time sfenv evaluate with and without --out (fifo, spider-8, 1 job)")
    ap.add_argument("--seeds", default="1000,4000", help="comma list of seed counts (default: 1000,4000)")
    ap.add_argument("--rounds", type=int, default=1, help="timings per count; the best is kept (default: 1)")
    ap.add_argument("--every-episode", action="store_true",
                    help="also time a run that rewrites the file after every episode (quadratic: slow at 4,000)")
    args = ap.parse_args(argv)
    try:
        counts = [int(c) for c in args.seeds.split(",") if c.strip()]
    except ValueError:
        ap.error(f"argument --seeds: expected a comma list of integers, got {args.seeds!r}")
    if not counts or min(counts) < 1 or args.rounds < 1:
        ap.error("--seeds and --rounds must be at least 1")
    evaluate_seconds(2, None)  # warm up: imports and the scenario's caches, outside every timing
    rows = []
    for count in counts:
        rows.append(measure(count, args.rounds, args.every_episode))
        print_rows(rows[-1:])


if __name__ == "__main__":
    from sfenv.app.script import run_script

    raise SystemExit(run_script(main))
