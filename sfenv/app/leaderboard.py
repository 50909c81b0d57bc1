"""``sfenv leaderboard``: every reference agent on the test split of every bundled scenario, ranked.

:func:`run_leaderboard` plays each agent (default: the registry's ``default`` group; a learned
policy joins as ``model:PATH`` or ``rllib:PATH``) on the first ``seeds`` test seeds of the
protocol (:mod:`sfenv.runs.protocol`) of each scenario, through the one evaluator
(:func:`sfenv.app.evaluate.evaluate_agents`; ``backend="ray"`` plays the episodes as Ray
tasks), saving each scenario's episodes with their action logs to ``<out>/episodes/<scenario>.json``
as they finish (:class:`sfenv.runs.results.ResultsWriter`; one process writes a file at a time), so an
interrupted run resumes (``resume=True``) where it stopped.

Nothing is ranked unchecked: every episode the table uses, those read back from an earlier run's files
included, is replayed from its action log to the episode's end and must give the metrics its row holds
(:func:`replay_checked`).  An edited episodes file is refused with one line naming the file and the row
(``--overwrite`` plays the episodes again); episodes files written before the leaderboard recorded
action logs differ in their settings (``record_actions``) and are refused likewise.

Per scenario the agents are ranked by mean JCT over seeds (JCT counts unfinished jobs censored
at the episode's end, :mod:`sfenv.sim.metrics`), and the table gives mean JCT ± the half-width of its
95 % Student-t interval, the ratio of mean JCT to the best agent's with a paired bootstrap 95 %
interval over seeds (:func:`sfenv.runs.stats.paired_ratio`), p95 JCT, electricity, egress and total
cost, throughput and unfinished jobs.  Written: ``leaderboard.md``, ``leaderboard.csv`` (one row per
scenario and agent), ``leaderboard.html`` (one self-contained page, no scripts or external files) and
``leaderboard.json`` (the same data with the settings).

Caps: ``spider-64`` is played with 12 jobs per episode (:data:`JOB_CAPS`), as the claims cap it
(``experiments/claims.py``: the search baselines take tens of seconds per decision on 64 regions);
every output says so.  ``num_jobs`` caps every scenario further.
"""

from __future__ import annotations

import csv
import html
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sfenv import __version__
from sfenv.errors import InvalidInput, did_you_mean
from sfenv.runs import log_stderr, protocol
from sfenv.runs.progress import EpisodesBar
from sfenv.runs.results import atomic_paths, output_lock

if TYPE_CHECKING:  # pragma: no cover
    from sfenv.scenario import Scenario

__all__ = ["COLUMNS", "DEFAULT_SEEDS", "JOB_CAPS", "PRINTED_COLUMNS", "format_ranking", "rank", "replay_checked",
           "run_leaderboard", "write_outputs"]

#: jobs per episode of scenarios played capped, and why (said in every output)
JOB_CAPS: dict[str, int] = {"spider-64": 12}
#: test seeds per scenario by default
DEFAULT_SEEDS = 10
#: how long :func:`write_outputs` waits for another process writing the same outputs (seconds)
OUTPUTS_LOCK_WAIT_S = 30.0
#: (key, header, format) of the table's columns after rank, scenario and agent
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("mean_jct_h", "mean JCT h", ".3f"),
    ("ratio_to_best", "JCT / best", ".3f"),
    ("p95_jct_h", "p95 JCT h", ".2f"),
    ("cost_usd", "electricity USD", ".1f"),
    ("egress_usd", "egress USD", ".1f"),
    ("total_cost_usd", "total cost USD", ".1f"),
    ("carbon_kg", "kg CO2e", ".1f"),
    ("carbon_signal", "carbon signal", ""),
    ("throughput_tok_s", "throughput tok/s", ".0f"),
    ("unfinished", "unfinished jobs", ".2f"),
)


def run_leaderboard(
    out_dir: str | Path = "leaderboard",
    scenarios: Sequence[str] | None = None,
    agents: str | Sequence[str] = "default",
    seeds: int = DEFAULT_SEEDS,
    num_jobs: int | None = None,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    backend: str = "serial",
    address: str | None = None,
    workers: int | None = None,
    log: Callable[[str], None] = log_stderr,
    trust_model_code: bool = False,
) -> dict[str, Any]:
    """Play the leaderboard, write its files into ``out_dir`` and return its data.

    :param scenarios: bundled scenario names (None: all bundled).
    :param agents: agent names, groups, ``model:PATH`` / ``rllib:PATH`` (as ``sfenv evaluate --agents``).
    :param seeds: test seeds per scenario (the protocol's first ``seeds``).
    :param num_jobs: cap on every scenario's jobs per episode (on top of :data:`JOB_CAPS`).
    :param resume: continue the episodes already in ``out_dir/episodes`` (a file of the same
        settings is continued anyway, :mod:`sfenv.runs.results`; one of other settings is refused).
    :param overwrite: replace them instead.
    :param trust_model_code: allow saved policies whose files run code when loaded (an SB3 ``.zip``
        without its weights-only form, an RLlib checkpoint; :func:`sfenv.app.evaluate.evaluate_agents`).
    :return: ``{"settings": ..., "rows": [...], "files": [...]}``.
    :raises InvalidInput: for an unknown scenario, ``scenarios`` that is not a non-empty list, no agents,
        or ``seeds``/``num_jobs`` that is not an integer >= 1.
    :raises Rejected: if an episode it would rank does not replay to the metrics its row holds
        (:func:`replay_checked`: an edited episodes file; nothing is written then).
    """
    from sfenv.agents.registry import resolve_names
    from sfenv.app.evaluate import quiet_solver_banner
    from sfenv.runs.replay import scenario_sha
    from sfenv.scenario import bundled_scenarios

    chosen = _chosen_scenarios(scenarios, bundled_scenarios())
    names = resolve_names(agents)
    if not names:
        raise InvalidInput(f"leaderboard: no agents in {agents!r}")
    for field, value in (("seeds", seeds), ("num_jobs", 1 if num_jobs is None else num_jobs)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidInput(f"leaderboard: {field} = {value!r}; expected an integer >= 1")
    out = Path(out_dir)
    if not overwrite:
        _same_tables(out / "leaderboard.json", chosen, names, seeds)
    quiet_solver_banner()
    rows: list[dict[str, Any]] = []
    caps: dict[str, int] = {}
    plays: dict[str, dict[str, Any]] = {}
    bar = EpisodesBar(len(chosen) * len(names) * seeds, "leaderboard", enabled=progress)
    try:
        for name in chosen:
            sc, choice, path, in_file = _play_scenario(name, names, seeds, num_jobs, out, bar, caps, log, resume=resume,
                                                       overwrite=overwrite, backend=backend, address=address,
                                                       workers=workers, trust_model_code=trust_model_code)
            rows.extend(rank(name, names, replay_checked(path, in_file, names, choice.seeds, sc)))
            plays[name] = {"jobs": sc.cfg.workload.num_jobs, "scenario_sha": scenario_sha(sc), **choice.record()}
    finally:
        bar.close()
    settings = {"protocol": protocol.PROTOCOL_VERSION, "env_version": protocol.ENV_VERSION, "sfenv": __version__,
                "split": "test", "seeds_per_scenario": seeds, "agents": names, "scenarios": plays, "caps": caps}
    files = write_outputs(rows, settings, out)
    return {"settings": settings, "rows": rows, "files": [str(f) for f in files]}


def _chosen_scenarios(scenarios: Sequence[str] | None, bundled: list[str]) -> list[str]:
    """The bundled scenario names ``scenarios`` lists (None: all of ``bundled``), checked.

    :raises InvalidInput: for a text instead of a list, an empty list (naming none is not asking for
        all of them), an entry that is not a text, or a name that is not bundled.
    """
    if scenarios is None:
        return bundled
    if isinstance(scenarios, str) or not isinstance(scenarios, Sequence) or not scenarios:
        raise InvalidInput(f"leaderboard: scenarios = {scenarios!r:.60}; expected a non-empty list of bundled "
                           "scenario names, e.g. ['spider-8'], or None for every bundled scenario")
    chosen = list(scenarios)
    unknown = [s for s in chosen if s not in bundled]
    if unknown:
        named = ", ".join(map(str, unknown))
        raise InvalidInput(f"leaderboard: unknown scenario(s) {named}{did_you_mean(unknown[0], bundled)}; "
                           f"bundled: {', '.join(bundled)}")
    return chosen


def _same_tables(path: Path, scenarios: Sequence[str], names: Sequence[str], seeds: int) -> None:
    """Refuse, before any episode, a folder whose leaderboard tables rank other scenarios, agents or seeds.

    Its tables would be replaced by this run's (its episodes are kept per scenario, but the tables are results
    too, never replaced unasked).  A folder without ``leaderboard.json`` is new.

    :raises InvalidInput: naming the folder and what differs; ``--overwrite`` replaces them.
    """
    from sfenv.world.files import read_json

    if not path.exists():
        return
    data = read_json(path, "leaderboard file", 64 * 2**20)
    old = data.get("settings") if isinstance(data, dict) else None
    if not isinstance(old, dict):
        raise InvalidInput(f"{path}: not a leaderboard file of sfenv (no settings); choose another --out-dir")
    diffs = [f"{what} {had!r} now {want!r}" for what, had, want in (
        ("scenarios", sorted(old.get("scenarios") or {}), sorted(scenarios)),
        ("agents", old.get("agents"), list(names)),
        ("seeds per scenario", old.get("seeds_per_scenario"), seeds)) if had != want]
    if diffs:
        raise InvalidInput(f"{path.parent}: its leaderboard ranks other settings ({'; '.join(diffs)}); choose another "
                           "--out-dir, or --overwrite to replace it")


def _play_scenario(name: str, names: Sequence[str], seeds: int, num_jobs: int | None, out: Path, bar: EpisodesBar,
                   caps: dict[str, int], log: Callable[[str], None], **evaluate_kwargs: Any
                   ) -> tuple[Scenario, protocol.SeedChoice, Path, list[dict[str, Any]]]:
    """Play (or continue) one scenario's episodes of :func:`run_leaderboard`; its cap goes into ``caps``.

    :return: the scenario as played (capped), its seeds, its episodes file and the file's rows.
    """
    from sfenv.app.evaluate import evaluate_agents
    from sfenv.scenario import load_scenario

    sc = load_scenario(name)
    cap = min(c for c in (JOB_CAPS.get(name), num_jobs, sc.cfg.workload.num_jobs) if c is not None)
    if cap < sc.cfg.workload.num_jobs:
        caps[name] = cap
        sc = sc.with_overrides(workload={"num_jobs": cap})
    choice = protocol.resolve_seeds("test", seeds, scenario=name)
    log(f"leaderboard: {name}: {len(names)} agents x {choice.describe()}, {sc.cfg.workload.num_jobs} jobs")
    path = out / "episodes" / f"{name}.json"
    on_row = bar.part(name, len(names) * len(choice.seeds))
    in_file = evaluate_agents(list(names), sc, list(choice.seeds), out=path, progress=False, on_row=on_row,
                              split="test", record_actions=True, **evaluate_kwargs)
    bar.end_part()
    return sc, choice, path, in_file


def replay_checked(path: Path, in_file: Sequence[dict[str, Any]], names: Sequence[str], seeds: Sequence[int],
                   sc: Scenario) -> list[dict[str, Any]]:
    """The rows of ``in_file`` (the episodes file ``path``) of ``names`` and ``seeds``, each replayed and checked.

    A row read back from the file is data that may have been edited since it was played; each one ranked is
    replayed from its action log on ``sc`` to the episode's end (:func:`sfenv.runs.replay.validate_rows`), and
    the file must hold one row per agent and seed (:func:`sfenv.runs.entry.check_one_row_each`).

    :raises Rejected: naming ``path`` and the first row that does not hold, and how to play it again.
    """
    from sfenv.runs.entry import check_one_row_each
    from sfenv.runs.replay import Rejected, validate_rows

    agents, wanted = set(names), set(seeds)
    numbers = [i for i, r in enumerate(in_file) if r.get("agent") in agents and r.get("seed") in wanted]
    ranked = [in_file[i] for i in numbers]
    try:
        check_one_row_each(ranked, [n for n in names if any(r["agent"] == n for r in ranked)], list(seeds), numbers)
        validate_rows(ranked, sc, numbers=numbers, own_workload=False)
    except Rejected as exc:
        raise Rejected(f"{path}: {exc}; --overwrite plays the scenario's episodes again") from None
    return ranked


def rank(scenario: str, names: Sequence[str], episodes: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One scenario's leaderboard rows, best mean JCT first, with the figures of :data:`COLUMNS`.

    Only seeds every agent played count (paired comparisons).
    """
    import numpy as np

    from sfenv.runs.stats import mean_ci, paired_ratio

    by: dict[str, dict[int, dict]] = {}
    for r in episodes:
        by.setdefault(r["agent"], {})[r["seed"]] = r
    played = [n for n in names if n in by]
    if not played:
        return []
    common = sorted(set.intersection(*(set(by[n]) for n in played)))
    jct = {n: np.array([by[n][s]["mean_jct_s"] / 3600 for s in common]) for n in played}
    order = sorted(played, key=lambda n: float(jct[n].mean()))
    best = order[0]
    out = []
    for i, n in enumerate(order):
        eps = [by[n][s] for s in common]
        mean, half = mean_ci(list(jct[n]))
        ratio, lo, hi = paired_ratio(jct[n], jct[best])
        out.append({
            "scenario": scenario, "rank": i + 1, "agent": n, "seeds": len(common),
            "mean_jct_h": mean, "mean_jct_h_ci": half, "ratio_to_best": ratio, "ratio_low": lo, "ratio_high": hi,
            "p95_jct_h": float(np.mean([e["p95_jct_s"] for e in eps])) / 3600,
            "cost_usd": float(np.mean([e["cost_usd"] for e in eps])),
            "egress_usd": float(np.mean([e.get("egress_usd", math.nan) for e in eps])),
            "total_cost_usd": float(np.mean([e.get("total_cost_usd", math.nan) for e in eps])),
            "carbon_kg": float(np.mean([e.get("carbon_kg", math.nan) for e in eps])),
            "carbon_signal": "/".join(sorted({str(e.get("carbon_signal", "")) for e in eps} - {""})) or "-",
            "throughput_tok_s": float(np.mean([e["mean_throughput_tokens_s"] for e in eps])),
            "unfinished": float(np.mean([e["unfinished"] for e in eps])),
        })
    return out


#: the keys of :data:`COLUMNS` that :func:`format_ranking` prints (the files hold them all)
PRINTED_COLUMNS: tuple[str, ...] = ("mean_jct_h", "ratio_to_best", "p95_jct_h", "total_cost_usd", "unfinished")


def format_ranking(rows: Sequence[dict[str, Any]]) -> str:
    """The ranked rows of :func:`rank` (every scenario's, in order) as a fixed-width text table for the terminal.

    Columns: rank, scenario, agent and :data:`PRINTED_COLUMNS`, formatted as in ``leaderboard.md``; a
    blank line separates scenarios.  An empty ``rows`` gives a line saying nothing was ranked.
    """
    if not rows:
        return "(no episodes ranked)"
    cols = [c for c in COLUMNS if c[0] in PRINTED_COLUMNS]
    header = ["rank", "scenario", "agent", *[h for _, h, _ in cols]]
    body = [[str(r["rank"]), r["scenario"], r["agent"], *[_cell(r, k, f) for k, _, f in cols]] for r in rows]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if 0 < i < 3 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    out = [line(header)]
    for i, cells in enumerate(body):
        if i > 0 and rows[i]["scenario"] != rows[i - 1]["scenario"]:
            out.append("")
        out.append(line(cells))
    return "\n".join(out)


def _cell(row: dict[str, Any], key: str, fmt: str) -> str:
    value = row.get(key, math.nan)
    if isinstance(value, str):
        return value
    text = f"{value:{fmt}}" if isinstance(value, float) and math.isfinite(value) else "-"
    if key == "mean_jct_h":
        half = row["mean_jct_h_ci"]
        text += f" ± {half:{fmt}}" if math.isfinite(half) else " ± -"
    elif key == "ratio_to_best" and row["rank"] > 1 and math.isfinite(row["ratio_low"]):
        text += f" ({row['ratio_low']:{fmt}}-{row['ratio_high']:{fmt}})"
    return text


def _notes(settings: dict[str, Any]) -> list[str]:
    notes = [
        f"sfenv {settings['sfenv']}, benchmark protocol {settings['protocol']} (env ids -{settings['env_version']}): "
        f"the first {settings['seeds_per_scenario']} seeds of the test split of each scenario.",
        "mean JCT ± half-width of the 95 % Student-t interval over seeds; JCT counts unfinished jobs "
        "(censored at the episode's end).",
        "JCT / best: ratio of mean JCT to the scenario's best agent, with its paired bootstrap 95 % interval "
        "over seeds (scipy BCa).",
    ]
    for name, cap in sorted(settings["caps"].items()):
        why = "as the claims cap it" if name in JOB_CAPS else "capped by --num-jobs"
        notes.append(f"{name} is played with {cap} jobs per episode, not its full workload ({why}).")
    return notes


def write_outputs(rows: Sequence[dict[str, Any]], settings: dict[str, Any], out_dir: str | Path) -> list[Path]:
    """Write ``leaderboard.md``, ``.csv``, ``.html`` and ``.json`` into ``out_dir``; returns their paths.

    The four are written as a set (:func:`sfenv.runs.results.atomic_paths`): all replaced, or, when one cannot
    be written (a full disk), none and no temporary left; one process at a time (the lock of
    ``leaderboard.json``, waited for a few seconds).

    :raises OutputError: if they cannot be written, naming the file or folder.
    :raises OutputInUse: if another process holds their lock for longer than :data:`OUTPUTS_LOCK_WAIT_S`.
    """
    import json

    out = Path(out_dir)
    header = ["rank", "scenario", "agent", *[h for _, h, _ in COLUMNS]]
    body = [[str(r["rank"]), r["scenario"], r["agent"], *[_cell(r, k, f) for k, _, f in COLUMNS]] for r in rows]
    notes = _notes(settings)
    md = ["# sfenv leaderboard", "", *[f"- {n}" for n in notes], "",
          "| " + " | ".join(header) + " |", "|" + "---|" * len(header),
          *["| " + " | ".join(b) + " |" for b in body]]
    paths = {k: out / f"leaderboard.{k}" for k in ("md", "csv", "html", "json")}
    fields = ["scenario", "rank", "agent", "seeds", "mean_jct_h", "mean_jct_h_ci", "ratio_to_best", "ratio_low",
              "ratio_high", "p95_jct_h", "cost_usd", "egress_usd", "total_cost_usd", "carbon_kg", "carbon_signal",
              "throughput_tok_s", "unfinished", "jobs"]
    with output_lock(paths["json"], wait_s=OUTPUTS_LOCK_WAIT_S), atomic_paths(list(paths.values())) as tmps:
        tmp = dict(zip(paths, tmps))
        tmp["md"].write_text("\n".join(md) + "\n")
        with tmp["csv"].open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore")
            w.writeheader()
            for r in rows:
                w.writerow({**r, "jobs": settings["scenarios"].get(r["scenario"], {}).get("jobs", "")})
        tmp["html"].write_text(_html(header, body, notes))
        tmp["json"].write_text(json.dumps({"settings": settings, "rows": list(rows)}, indent=1, allow_nan=True))
    return list(paths.values())


def _html(header: list[str], body: list[list[str]], notes: list[str]) -> str:
    esc = html.escape
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    trs = []
    for b in body:
        cls = ' class="first"' if b[0] == "1" else ""
        trs.append(f"<tr{cls}>" + "".join(f"<td>{esc(c)}</td>" for c in b) + "</tr>")
    items = "".join(f"<li>{esc(n)}</li>" for n in notes)
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>sfenv leaderboard</title>"
            "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
            "th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}td:nth-child(2),td:nth-child(3)"
            "{text-align:left}tr.first td{font-weight:bold;border-top:2px solid #444}</style></head><body>"
            f"<h1>sfenv leaderboard</h1><ul>{items}</ul><table><thead><tr>{head}</tr></thead><tbody>"
            + "".join(trs) + "</tbody></table></body></html>\n")
