"""The main job: benchmark the default agents on the default scenario, save every episode and plot them.

``sfenv benchmark`` (and ``./run.sh`` without arguments) runs :func:`run_benchmark`: every agent of
the ``default`` group on seeds ``0..9`` of ``spider-8`` through the one evaluator
(:func:`sfenv.app.evaluate.evaluate_agents`: identical seeded episodes for every agent), then

- prints a table of mean ± 95 % CI over seeds (Student t) of mean JCT, p95 JCT, cost (electricity,
  egress and their total), throughput and unfinished jobs (JCTs count unfinished jobs censored at the episode's end, see
  :mod:`sfenv.sim.metrics`);
- writes into ``results/<scenario>/`` under the *caller's* working directory (``out_dir`` to
  change): ``episodes.json`` and ``episodes.csv`` (one row per episode), ``benchmark.json``
  (settings, summary, episodes and one episode's timeline and prices: everything the plots need),
  and the PNGs ``jct.png``, ``cost.png``, ``tradeoff.png`` (Pareto front marked; both cost figures show
  the whole bill, electricity plus egress, :func:`sfenv.app.plots.cost_column`),
  ``timeline.png`` (one episode's schedule, prices beneath) and ``prices.png``;
- every file is written atomically with the settings that define it (:mod:`sfenv.runs.results`), by one
  process at a time (a second run on the folder is refused while the first holds its lock); a
  folder of the same settings is continued (its episodes are not run again, so an interrupted run
  continues and a second ``./run.sh`` only reprints), a folder of other settings is never mixed
  into or replaced: ``resume=True`` refuses it, otherwise the results go beside it under a new name;
  ``overwrite=True`` replaces them.  PNGs not drawn in a run are removed, so no figure outlives its data.

:func:`write_plots` redraws the PNGs from a saved ``benchmark.json`` (``sfenv plot FILE``); given an
evaluator results list (``sfenv evaluate --out``) it draws the per-agent and trade-off figures.

This is a top-level job like :mod:`sfenv.app.cli`: it imports :mod:`sfenv.agents`, and matplotlib only
when it draws.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sfenv.agents.registry import make_agent, resolve_names
from sfenv.app.evaluate import (
    MODEL_PREFIX,
    check_metrics,
    evaluate_agents,
    quiet_solver_banner,
    run_settings,
    summarise,
    write_csv,
)
from sfenv.errors import InvalidInput
from sfenv.runs import log_stderr, protocol, results
from sfenv.runs.results import atomic_write_json, check_regular
from sfenv.scenario import DEFAULT_SCENARIO, Scenario, load_scenario
from sfenv.sim import make_simulator
from sfenv.sim.engine import check_decision
from sfenv.world.files import read_json

__all__ = [
    "DEFAULT_AGENTS",
    "DEFAULT_SEEDS",
    "FILES",
    "TIMELINE_AGENTS",
    "check_timeline",
    "episode_timeline",
    "load_results",
    "results_dir",
    "run_benchmark",
    "write_plots",
]

#: the agent group the main job compares (see ``sfenv agents``)
DEFAULT_AGENTS = "default"
#: seeds per agent: 11 agents x 10 seeds of spider-8 take about 30 s on one core of a shared 2-core machine
DEFAULT_SEEDS = 10
#: agents whose episode the timeline shows, first match wins (else the first agent run)
TIMELINE_AGENTS = ("spiderflow", "spinsearch")
#: the files of a results folder
FILES = {"episodes_json": "episodes.json", "episodes_csv": "episodes.csv", "benchmark": "benchmark.json",
         "jct": "jct.png", "cost": "cost.png", "tradeoff": "tradeoff.png", "timeline": "timeline.png",
         "prices": "prices.png"}


def results_dir(scenario_name: str, out_dir: str | Path | None = None) -> Path:
    """``out_dir``, or ``results/<scenario>`` under the current working directory."""
    return Path(out_dir) if out_dir is not None else Path.cwd() / "results" / scenario_name


def episode_timeline(agent: str, scenario: Scenario, seed: int) -> dict[str, Any]:
    """Replay one seeded episode of a registered agent and return what a timeline figure needs.

    The episode is the evaluator's (same seed, fresh agent reset with it).  Returns the regions
    (names, GPUs, price zones), each job's runs ``[start s, end s, [[region, gpus], ...]]`` from
    :attr:`sfenv.sim.metrics.JobRecord.segments`, the end time, and the hourly price of every region
    over ``[0, end]`` (USD/MWh).
    """
    import numpy as np

    ag = make_agent(agent)
    ag.reset(seed)
    sim = make_simulator(scenario, seed)
    who = f"agent {ag.name!r}: decide(view)"
    report = sim.run(lambda view: check_decision(ag.decide(view), who))
    topo = sim.topo
    hours = max(1, math.ceil(report.makespan_s / 3600))
    hourly = sim.prices.hourly[:, np.arange(hours) % sim.prices.hours][sim.region_zone]
    jobs = [{"job_id": r.job_id, "model": r.model, "arrival": r.arrival,
             "finish": r.finish if r.finished else None,
             "segments": [[float(s), float(e), [[int(g), int(n)] for g, n in pl]] for s, e, pl in r.segments]}
            for r in sim.records()]
    return {"agent": ag.name, "scenario": scenario.name, "seed": seed, "end_s": report.makespan_s,
            "finished": report.finished, "regions": [r.name for r in topo.regions],
            "gpus": [int(g) for g in topo.gpu_counts], "zones": [r.zone for r in topo.regions],
            "prices_usd_mwh": hourly.tolist(), "jobs": jobs}


def _timeline_agent(names: Sequence[str], wanted: str | None) -> str | None:
    if wanted is not None:
        if wanted not in names or wanted.startswith(MODEL_PREFIX):
            raise InvalidInput(f"timeline agent {wanted!r} must be one of the registered agents run: "
                               f"{', '.join(names)}")
        return wanted
    plain = [n for n in names if not n.startswith(MODEL_PREFIX)]
    return next((n for n in TIMELINE_AGENTS if n in plain), plain[0] if plain else None)


def run_benchmark(
    agents: str | Sequence[str] = DEFAULT_AGENTS,
    scenario: str | Path | dict | Scenario = DEFAULT_SCENARIO,
    seeds: int = DEFAULT_SEEDS,
    first_seed: int = 0,
    num_jobs: int | None = None,
    out_dir: str | Path | None = None,
    resume: bool = False,
    progress: bool = True,
    plots: bool = True,
    timeline_agent: str | None = None,
    log: Callable[[str], None] = log_stderr,
    backend: str = "serial",
    address: str | None = None,
    workers: int | None = None,
    overwrite: bool = False,
    split: str | None = None,
    trust_model_code: bool = False,
) -> dict[str, Any]:
    """Run the benchmark, write its results folder and return the saved ``benchmark.json`` content.

    :param agents: agent names, a group or ``all`` (as ``sfenv evaluate --agents``).
    :param scenario: a bundled scenario name, a YAML path, a dict or a Scenario.
    :param seeds: number of seeds, ``first_seed .. first_seed + seeds - 1``.
    :param num_jobs: override the scenario's workload size.
    :param out_dir: results folder (default ``./results/<scenario>``).
    :param resume: the folder must be this run's (same settings: :mod:`sfenv.runs.results`); without it a
        folder of other settings is left alone and the results go beside it (``<out>-2``, ...; logged).
        Either way a folder of the same settings is continued: its episodes are kept and only the
        missing ones run.
    :param overwrite: replace the folder's results files instead (other files in it are left).
    :param progress: a progress bar on stderr (episodes, rate, ETA), drawn only when stderr is a terminal.
    :param plots: draw the PNGs.
    :param timeline_agent: whose first-seed episode the timeline shows (default: the first of
        :data:`TIMELINE_AGENTS` run, else the first agent).
    :param log: where progress messages go (stderr by default; never stdout).
    :param backend: ``"serial"`` or ``"ray"`` (one Ray task per episode; ``address`` and ``workers``
        as in :func:`sfenv.app.evaluate.evaluate_agents`).
    :param split: the protocol split (:mod:`sfenv.runs.protocol`) whose first ``seeds`` seeds these are
        (checked; recorded in ``meta``), or None: explicit seeds ``first_seed ..``, labelled so.
    :param trust_model_code: allow saved policies whose files run code when loaded
        (:func:`sfenv.app.evaluate.evaluate_agents`).
    :return: the results dict, plus ``"ran"`` (episodes run now) and ``"files"`` (paths written).
    :raises InvalidInput: (a ``ValueError``) for no seeds or agents, ``seeds`` or ``first_seed`` that is not
        an integer (>= 1, >= 0), or unreadable results in the folder.
    :raises SettingsMismatch: on ``resume`` into a folder of other settings, naming each difference.
    :raises OutputInUse: if another process is writing the folder (its lock, ``.benchmark.json.lock``, is held
        for the whole run: :func:`sfenv.runs.results.output_lock`).
    :raises OutputError: if a file cannot be written (a full disk, a folder that is a file).
    """
    if not _is_int(seeds) or seeds < 1:
        raise InvalidInput(f"seeds must be an integer >= 1 (how many), got {seeds!r}")
    if not _is_int(first_seed) or first_seed < 0:
        raise InvalidInput(f"first_seed must be an integer >= 0, got {first_seed!r}")
    from sfenv.runs.distributed import check_backend

    check_backend(backend, address, workers)
    names = resolve_names(agents)
    if not names:
        raise InvalidInput(f"no agents to run for {agents!r}")
    sc = load_scenario(scenario)
    if num_jobs is not None:
        sc = sc.with_overrides(workload={"num_jobs": num_jobs})
    seed_list = list(range(first_seed, first_seed + seeds))
    settings = run_settings(names, sc, seeds=seed_list, split=split)  # a split must hold its first seeds
    out = _choose_folder(results_dir(sc.name, out_dir), settings, resume, overwrite, log)
    paths = {k: out / v for k, v in FILES.items()}
    with results.output_lock(paths["benchmark"]):  # one process writes the folder, from the reads on
        if overwrite:
            for path in paths.values():
                path.unlink(missing_ok=True)
        meta = {"scenario": sc.name, "scenario_sha": settings["scenario_sha"], "num_jobs": sc.cfg.workload.num_jobs,
                "agents": names, "split": settings["split"], "protocol": protocol.PROTOCOL_VERSION, "seeds": seed_list,
                "settings": settings,
                "interval": "mean ± 95 % CI over seeds, Student t (t_{0.975, n-1} s / sqrt(n))",
                "jct_censoring": "unfinished jobs count with JCT = episode end - arrival"}
        old_bench = _read_json(paths["benchmark"]) if paths["benchmark"].exists() else None
        old_bench = old_bench if isinstance(old_bench, dict) else None
        # the settings first, so an interrupted run can be resumed safely
        atomic_write_json(paths["benchmark"], {"meta": meta, "summary": [], "episodes": [], "timeline": None})
        log(f"benchmark: {len(names)} agents x {seeds} seeds of {sc.name} ({meta['num_jobs']} jobs each) -> {out}")
        quiet_solver_banner()
        ran: list[dict] = []
        every = evaluate_agents(names, sc, seed_list, out=paths["episodes_json"], progress=progress,
                                on_row=ran.append, backend=backend, address=address, workers=workers, split=split,
                                trust_model_code=trust_model_code)
        write_csv(every, paths["episodes_csv"])  # every episode of the folder, as episodes.json
        wanted = {(a, s) for a in names for s in seed_list}
        rows = sorted((r for r in every if (r["agent"], r["seed"]) in wanted),
                      key=lambda r: (names.index(r["agent"]), r["seed"]))
        bench: dict[str, Any] = {"meta": meta, "summary": summarise(rows), "episodes": rows, "timeline": None}
        tl_agent = _timeline_agent(names, timeline_agent)
        if tl_agent is not None:
            old_tl = old_bench.get("timeline") if old_bench else None
            if isinstance(old_tl, dict) and old_tl.get("agent") == tl_agent and old_tl.get("seed") == first_seed \
                    and _valid_timeline(old_tl):
                bench["timeline"] = old_tl
            else:
                log(f"benchmark: replaying {tl_agent} seed {first_seed} for the timeline")
                bench["timeline"] = episode_timeline(tl_agent, sc, first_seed)
        atomic_write_json(paths["benchmark"], bench)
        files = [paths["episodes_json"], paths["episodes_csv"], paths["benchmark"]]
        drawn = []
        if plots:
            log("benchmark: drawing plots")
            drawn = write_plots(bench, out)
        for key in ("jct", "cost", "tradeoff", "timeline", "prices"):  # a figure not drawn now would show other data
            if paths[key] not in drawn and paths[key].exists():
                paths[key].unlink()
        return {**bench, "ran": len(ran), "files": [str(f) for f in files + drawn]}


def _valid_timeline(timeline: Any) -> bool:
    """Whether a saved timeline passes :func:`check_timeline` (a resumed run replays one that does not)."""
    try:
        check_timeline(timeline, "timeline")
    except InvalidInput:
        return False
    return True


def _read_json(path: Path) -> Any:
    return read_json(path, "benchmark JSON file", results.MAX_RESULTS_BYTES,
                     hint="; pass --overwrite to replace the folder's results, or choose another --out-dir")


def _folder_settings(folder: Path) -> tuple[bool, dict[str, Any] | None]:
    """(whether ``folder`` holds benchmark results, their settings or None when they record none)."""
    episodes, bench = folder / FILES["episodes_json"], folder / FILES["benchmark"]
    if episodes.exists():
        return True, results.read_results(episodes)[0]
    if bench.exists():  # interrupted before its first episode
        data = _read_json(bench)
        return True, (data.get("meta") or {}).get("settings") if isinstance(data, dict) else None
    return False, None


def _choose_folder(out: Path, settings: dict[str, Any], resume: bool, overwrite: bool,
                   log: Callable[[str], None]) -> Path:
    """The folder to write: ``out`` if free, of the same settings, or ``overwrite``; else refuse or go beside it."""
    if overwrite:  # its files are removed once its lock is held
        return out

    def diffs_of(folder: Path) -> list[str]:
        used, saved = _folder_settings(folder)
        return results.differences(saved, settings) if used else []

    diffs = diffs_of(out)
    if not diffs:
        return out
    if resume:
        raise results.SettingsMismatch(out, diffs)
    chosen = results.pick_output(out, lambda d: not diffs_of(d))
    log(f"benchmark: {out} holds results of other settings ({'; '.join(diffs)}); writing to {chosen} "
        "(--overwrite replaces them instead)")
    return chosen


def _capital(text: str) -> str:
    """``text`` with its first letter in upper case (the rest as it is: ``JCT`` stays ``JCT``)."""
    return text[:1].upper() + text[1:]


def load_results(path: str | Path) -> dict[str, Any]:
    """Read saved results: a ``benchmark.json``, or an evaluator results list (``sfenv evaluate --out``).

    A list comes back as ``{"meta": {...}, "summary": ..., "episodes": rows, "timeline": None}``.  The
    summary is always computed from the episodes (:func:`summarise`), never read from the file.

    :raises InvalidInput: (a ``ValueError``) if the file is not JSON or holds neither.
    """
    data = read_json(path, "results file", results.MAX_RESULTS_BYTES)
    if isinstance(data, dict) and data.get("format") == results.FORMAT:  # an evaluator results file
        settings, rows = results.read_results(path)
        _check_episodes(rows, path)
        return {"meta": {"scenario": (settings or {}).get("scenario", "?"), "settings": settings},
                "summary": summarise(rows), "episodes": rows, "timeline": None}
    if isinstance(data, dict) and "episodes" in data:
        _check_episodes(data["episodes"], path)
        if data.get("meta") is not None and not isinstance(data["meta"], dict):
            raise InvalidInput(f"{path}: meta is {type(data['meta']).__name__}, not an object")
        if data.get("timeline") is not None:
            check_timeline(data["timeline"], f"{path}: timeline")
        # the summary is always the rows': a stored one (benchmark.json's is summarise(rows)) is never
        # trusted, as a file could claim figures its episodes do not hold
        data["summary"] = summarise(data["episodes"])
        data.setdefault("timeline", None)
        return data
    if isinstance(data, list) and all(isinstance(r, dict) and "agent" in r and "seed" in r for r in data):
        _check_episodes(data, path)
        scen = sorted({r.get("scenario", "?") for r in data})
        return {"meta": {"scenario": ",".join(scen)}, "summary": summarise(data), "episodes": data, "timeline": None}
    raise InvalidInput(f"{path}: neither a benchmark.json nor a list of evaluated episodes")


def _check_episodes(rows: Any, path: str | Path) -> None:
    """Refuse episode rows :func:`summarise` cannot read, or none (one line naming the file and the row)."""
    if not isinstance(rows, list):
        raise InvalidInput(f"{path}: its episodes are {type(rows).__name__}, not a list of rows")
    if not rows:
        raise InvalidInput(f"{path}: holds no episodes; there is nothing to plot")
    check_metrics(rows, path, hint="fix or remove the row")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _list_of(value: Any, test: Callable[[Any], bool], length: int | None = None) -> bool:
    """Whether ``value`` is a list whose items all pass ``test`` (of ``length`` items when given)."""
    return isinstance(value, list) and all(test(v) for v in value) and (length is None or len(value) == length)


#: a timeline's fields (:func:`episode_timeline`) and the test each value passes (``n``: the number of regions)
_TIMELINE_FIELDS: dict[str, Callable[[Any, int], bool]] = {
    "agent": lambda v, n: isinstance(v, str), "scenario": lambda v, n: isinstance(v, str),
    "seed": lambda v, n: _is_int(v), "end_s": lambda v, n: _is_number(v) and v >= 0,
    "finished": lambda v, n: _is_int(v) and v >= 0,
    "regions": lambda v, n: n > 0 and _list_of(v, lambda x: isinstance(x, str), n),
    "gpus": lambda v, n: _list_of(v, _is_int, n), "zones": lambda v, n: _list_of(v, lambda x: isinstance(x, str), n),
    "prices_usd_mwh": lambda v, n: _list_of(v, lambda z: bool(z) and _list_of(z, _is_number, len(v[0])), n),
    "jobs": lambda v, n: isinstance(v, list),
}


def _check_job_runs(job: Any, regions: int, where: str) -> None:
    """Refuse a timeline job that is not ``{"job_id", "model", "segments": [[start, end, [[region, gpus]...]]...]}``."""
    fields = isinstance(job, dict) and _is_int(job.get("job_id")) and isinstance(job.get("model"), str)
    segments = job.get("segments") if isinstance(job, dict) else None
    if not fields or not isinstance(segments, list):
        raise InvalidInput(f"{where}: expected an object with job_id (integer), model (text) and segments (a list)")
    def placed(part: Any) -> bool:  # [region index, GPUs]
        return _list_of(part, _is_int, 2) and 0 <= part[0] < regions

    for k, seg in enumerate(segments):
        if not (isinstance(seg, list) and len(seg) == 3 and _is_number(seg[0]) and _is_number(seg[1])
                and _list_of(seg[2], placed)):
            raise InvalidInput(f"{where}.segments[{k}]: expected [start s, end s, [[region index, GPUs], ...]] "
                               f"with region indices below {regions}")


def check_timeline(timeline: Any, where: str) -> None:
    """Refuse a timeline (as :func:`episode_timeline` returns it) the figures cannot draw, in one line.

    Checked: every field there with its JSON type, one GPU count, zone and price series per region,
    price series of one length, and each job's runs naming regions of the timeline.

    :param timeline: the value read from a file.
    :param where: the file and field, for the message (e.g. ``benchmark.json: timeline``).
    :raises InvalidInput: naming the first field that is wrong.
    """
    if not isinstance(timeline, dict):
        raise InvalidInput(f"{where}: expected an object, got {type(timeline).__name__}")
    regions = timeline.get("regions")
    n = len(regions) if isinstance(regions, list) else 0
    for field, test in _TIMELINE_FIELDS.items():
        if field not in timeline or not test(timeline[field], n):
            shown = "missing" if field not in timeline else f"{str(timeline[field])[:80]!r}"
            raise InvalidInput(f"{where}.{field} is {shown}; not what sfenv benchmark writes there")
    if _timeline_size(timeline) is None:  # one too large to draw is left out whole (write_plots)
        for i, job in enumerate(timeline["jobs"]):
            _check_job_runs(job, n, f"{where}.jobs[{i}]")


#: the most agents the figures draw: bars and labels beyond it are unreadable, and a file handed in could name millions
MAX_PLOT_AGENTS = 256
#: the largest timeline drawn (job runs, regions, hours of prices); a larger one, which only a file made elsewhere
#: holds (a benchmark's timeline is one episode of a scenario), is left undrawn with a note
MAX_TIMELINE_JOBS, MAX_TIMELINE_REGIONS, MAX_TIMELINE_HOURS = 5_000, 128, 24 * 400


def _timeline_size(timeline: dict[str, Any]) -> str | None:
    """Why a timeline is too large to draw (what, how many, the most drawn), or None."""
    prices = timeline.get("prices_usd_mwh") or []
    sizes = (("job runs", len(timeline.get("jobs") or []), MAX_TIMELINE_JOBS),
             ("regions", len(timeline.get("regions") or []), MAX_TIMELINE_REGIONS),
             ("hours of prices", max((len(z) for z in prices if isinstance(z, list)), default=0), MAX_TIMELINE_HOURS))
    for what, n, most in sizes:
        if n > most:
            return f"{n:,} {what}, more than the {most:,} drawn"
    return None


def write_plots(results: dict[str, Any] | str | Path, out_dir: str | Path | None = None) -> list[Path]:
    """Draw the benchmark's PNGs from results (a dict as saved, or a path to a results file).

    The per-agent JCT and cost bars and the trade-off need only episodes (at most :data:`MAX_PLOT_AGENTS`
    agents); the timeline and price figures are drawn when the results hold a timeline no larger than
    :data:`MAX_TIMELINE_JOBS` job runs, :data:`MAX_TIMELINE_REGIONS` regions and
    :data:`MAX_TIMELINE_HOURS` hours of prices (a larger one is left out, with a line on stderr).

    :param out_dir: where the PNGs go (default: the results file's folder; required for a dict).
    :return: the PNG paths written.
    """
    from sfenv.app import plots

    if not isinstance(results, dict):
        out_dir = Path(out_dir) if out_dir is not None else Path(results).parent
        results = load_results(results)
    if out_dir is None:
        raise InvalidInput("out_dir is needed when the results are given as a dict")
    out = Path(out_dir)
    for key in ("jct", "cost", "tradeoff", "timeline", "prices"):  # a FIFO or device there: refused, not replaced
        check_regular(out / FILES[key], "plot")
    summary = results["summary"]
    if len(summary) > MAX_PLOT_AGENTS:
        raise InvalidInput(f"plot: the results hold {len(summary):,} agents; the figures draw at most "
                           f"{MAX_PLOT_AGENTS} (plot a selection of them)")
    scenario = (results.get("meta") or {}).get("scenario")  # in every title
    cost = plots.cost_column(summary)  # the whole bill (electricity + egress) where the results have it
    written = [
        plots.save_png(plots.plot_metric(summary, "mean_jct_h", "mean JCT, h", "Job completion time",
                                         scenario=scenario), out / FILES["jct"]),
        plots.save_png(plots.plot_metric(summary, cost, plots.axis_label(cost), _capital(plots.metric_name(cost)),
                                         scenario=scenario), out / FILES["cost"]),
        plots.save_png(plots.plot_tradeoff(summary, scenario=scenario), out / FILES["tradeoff"]),
    ]
    too_large = _timeline_size(results["timeline"]) if results.get("timeline") else None
    if too_large:
        log_stderr(f"sfenv: plot: the timeline holds {too_large}: the timeline and price figures are not drawn")
    elif results.get("timeline"):
        written.append(plots.save_png(plots.plot_timeline(results["timeline"]), out / FILES["timeline"]))
        written.append(plots.save_png(plots.plot_prices(results["timeline"]), out / FILES["prices"]))
    return written
