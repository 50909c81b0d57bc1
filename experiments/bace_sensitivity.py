"""BACE-Pipe vs its four baselines over permutations of bace-6's prices and capacities.

bace-6 assigns one price and one GPU count to each region; which region gets which is our choice
(the summaries of the paper give only the ranges), and a ratio measured on one assignment can be
an artefact of it (an earlier bace-6 had its cheapest region as the only one holding any job's
``K*``).  This run draws ``--perms`` seeded permutations of the prices over the regions and,
independently, of the GPU counts (the first one is the scenario as shipped), plays each with
BACE-Pipe, LCF, LDF, CR-LCF and CR-LDF on ``--seeds`` seeded episodes, and reports, per baseline,
the paired ratios BACE-Pipe / baseline of mean JCT and of electricity cost: median, min and max
over all (permutation, seed) pairs, and the share of pairs where BACE-Pipe is lower.

Outputs in ``--out`` (default ``results/bace_sensitivity``): ``runs.json`` (one row per
permutation, agent and seed, written atomically after every episode, so an interrupted run
resumes where it stopped; ``config.json`` holds the settings and a resumed run must use the same),
``summary.json`` and ``summary.md`` (the table).

Run: ``python -m sfenv.experiments.bace_sensitivity [--perms 20] [--seeds 3] [--quick]``;
``--quick`` (2 permutations, 1 seed, 4 jobs) is a smoke run of a few seconds.  The episode seeds are the
first ``--seeds`` of the protocol split ``--split`` (default test, :mod:`sfenv.runs.protocol`), or explicit
seeds ``--first-seed S`` .. ``S+N-1``, labelled "explicit seeds".
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sfenv.agents.registry import make_agent
from sfenv.experiments.rows import INT, NUMBER, TEXT, read_rows

from sfenv.app.cli import job_count, non_negative_int, positive_int
from sfenv.app.evaluate import run_episode
from sfenv.app.script import ScriptParser
from sfenv.errors import InvalidInput
from sfenv.runs import protocol
from sfenv.runs.results import atomic_write_json
from sfenv.scenario import Scenario, load_scenario
from sfenv.world.files import MAX_YAML_BYTES, read_json

__all__ = [
    "BASELINES",
    "SYSTEM",
    "format_markdown",
    "main",
    "permutations",
    "permuted",
    "run_sensitivity",
    "summarise",
]

SYSTEM = "bace-pipe"
BASELINES = ("lcf", "ldf", "cr-lcf", "cr-ldf")
METRICS = {"mean_jct_s": "JCT", "cost_usd": "cost"}
#: the fields of a saved row :func:`run_sensitivity` and :func:`summarise` read, and their kinds
ROW_FIELDS = {"perm": INT, "agent": TEXT, "seed": INT, **dict.fromkeys(METRICS, NUMBER), "unfinished": NUMBER}


def permuted(base: Scenario, price_perm: Sequence[int], gpu_perm: Sequence[int]) -> Scenario:
    """``base`` with region i given the price of region ``price_perm[i]`` and the GPUs of ``gpu_perm[i]``.

    Prices are per zone; every region of bace-6 has its own zone.

    :raises ValueError: if two regions share a price zone or the scenario has no explicit regions.
    """
    cfg = base.cfg
    regions = list(cfg.topology.regions)
    zones = [r.zone for r in regions]
    if not regions or len(set(zones)) != len(zones):
        raise ValueError(f"{base.name}: permutations need explicit regions, one price zone each")
    prices = cfg.prices.model_dump()["zones"]
    new_regions = [{**r.model_dump(), "gpus": regions[g].gpus} for r, g in zip(regions, gpu_perm)]
    new_zones = {z: {**prices[z], "base": prices[zones[p]]["base"], "peak": prices[zones[p]]["peak"]}
                 for z, p in zip(zones, price_perm)}
    return base.with_overrides(topology={"regions": new_regions}, prices={"zones": new_zones})


def permutations(n_regions: int, n: int, seed: int = 0) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """``n`` (price permutation, GPU permutation) pairs: the identity first, then seeded random draws."""
    rng = np.random.default_rng(seed)
    ident = tuple(range(n_regions))
    out = [(ident, ident)]
    while len(out) < n:
        pp, gp = rng.permutation(n_regions), rng.permutation(n_regions)
        out.append((tuple(int(x) for x in pp), tuple(int(x) for x in gp)))
    return out[:n]


def run_sensitivity(
    out: Path,
    perms: int = 20,
    seeds: Sequence[int] = (0, 1, 2),
    scenario: str = "bace-6",
    num_jobs: int | None = None,
    perm_seed: int = 0,
    resume: bool = True,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Play every (permutation, agent, seed); rows are saved to ``out/runs.json`` after each episode.

    :raises ValueError: if ``out`` holds runs made with other settings.
    """
    base = load_scenario(scenario)
    if num_jobs is not None:
        base = base.with_overrides(workload={"num_jobs": num_jobs})
    config = {"scenario": scenario, "perms": perms, "seeds": list(seeds), "num_jobs": num_jobs, "perm_seed": perm_seed}
    runs_path, cfg_path = out / "runs.json", out / "config.json"
    rows: list[dict[str, Any]] = []
    if resume and runs_path.exists():
        old = read_json(cfg_path, "bace_sensitivity settings file", MAX_YAML_BYTES) if cfg_path.exists() else None
        if old != config:
            raise InvalidInput(f"{out} holds runs made with {old!s:.300}; this run uses {config}: use another --out")
        rows = read_rows(runs_path, "bace_sensitivity runs file", ROW_FIELDS)
    atomic_write_json(cfg_path, config)
    done = {(r["perm"], r["agent"], r["seed"]) for r in rows}
    agents = [SYSTEM, *BASELINES]
    plist = permutations(len(base.cfg.topology.regions), perms, perm_seed)
    for i, (pp, gp) in enumerate(plist):
        sc = permuted(base, pp, gp)
        for name in agents:
            for seed in seeds:
                if (i, name, seed) in done:
                    continue
                row = run_episode(make_agent(name), sc, seed)
                rows.append({"perm": i, "price_perm": list(pp), "gpu_perm": list(gp), "agent": name, "seed": seed,
                             **{m: row[m] for m in METRICS}, "unfinished": row["unfinished"]})
                atomic_write_json(runs_path, rows)
        if progress:
            print(f"permutation {i + 1}/{len(plist)} done", flush=True)
    return rows


def summarise(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per baseline and metric: paired ratios BACE-Pipe / baseline over (permutation, seed) pairs."""
    by = {(r["perm"], r["agent"], r["seed"]): r for r in rows}
    out = []
    for base in BASELINES:
        for metric, label in METRICS.items():
            ratios = [by[(p, SYSTEM, s)][metric] / r[metric] for (p, a, s), r in by.items()
                      if a == base and (p, SYSTEM, s) in by and r[metric] > 0]
            if not ratios:
                continue
            q = np.asarray(ratios)
            out.append({"baseline": base, "metric": label, "pairs": len(q), "median": float(np.median(q)),
                        "min": float(q.min()), "max": float(q.max()), "bace_lower_share": float((q < 1).mean())})
    return out


def format_markdown(summary: Sequence[dict[str, Any]]) -> str:
    """The summary as a Markdown table."""
    lines = ["| baseline | metric | pairs | BACE-Pipe / baseline, median | range | BACE-Pipe lower in |",
             "|---|---|---:|---:|---:|---:|"]
    for s in summary:
        lines.append(f"| {s['baseline']} | {s['metric']} | {s['pairs']} | {s['median']:.2f} | "
                     f"{s['min']:.2f}-{s['max']:.2f} | {100 * s['bace_lower_share']:.0f} % |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point."""
    ap = ScriptParser(script=__file__, description=__doc__.splitlines()[0])
    ap.add_argument("--perms", type=positive_int, default=20,
                    help="price/capacity permutations (the first is the scenario)")
    protocol.add_seed_arguments(ap, default_n=3, default_split="test")
    ap.add_argument("--scenario", default="bace-6")
    ap.add_argument("--num-jobs", type=job_count, default=None, help="override the workload size")
    ap.add_argument("--perm-seed", type=non_negative_int, default=0, help="seed of the permutation draws")
    ap.add_argument("--out", type=Path, default=Path("results/bace_sensitivity"))
    ap.add_argument("--quick", action="store_true", help="2 permutations, 1 seed, 4 jobs (smoke run)")
    ap.add_argument("--no-resume", action="store_true", help="start over instead of resuming")
    args = ap.parse_args(argv)
    if args.quick:
        args.seeds = 1
    choice = protocol.seed_choice_from_args(args, args.scenario, parser=ap)
    perms, seeds, num_jobs = args.perms, list(choice.seeds), args.num_jobs
    if args.quick:
        perms, num_jobs = 2, 4
    print(choice.describe())
    if args.no_resume:
        for f in ("runs.json", "config.json"):
            (args.out / f).unlink(missing_ok=True)
    rows = run_sensitivity(args.out, perms, seeds, args.scenario, num_jobs, args.perm_seed)
    summary = summarise(rows)
    table = format_markdown(summary)
    atomic_write_json(args.out / "summary.json", summary)
    (args.out / "summary.md").write_text(table + "\n")
    print(table)
    return 0


if __name__ == "__main__":
    from sfenv.app.script import run_script

    raise SystemExit(run_script(main))
