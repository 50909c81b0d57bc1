"""Carbon saved by spatial, temporal, spatio-temporal and elastic shifting, and at what JCT and cost (issue 33 §4).

Every arm plays the same seeded episodes as a carbon-agnostic baseline (``fastest``: each job in
the region it runs fastest in now, arrival order with backfilling; the temporal agents place jobs
the same way, so their savings come from time alone):

- spatial: ``lowest-carbon`` (intensity now), ``forecast-carbon`` (forecast over the job's run);
- temporal: ``carbon-defer`` (Wait-AWhile style) at each slack;
- spatio-temporal: ``carbon-st`` at each slack;
- elastic: ``carbon-elastic`` (CarbonScaler-style hourly width, in the job's fastest region) at each
  slack (a job may finish that much later than at its widest from arrival);

each forecast-reading arm under each forecast kind (``noisy``: published day-ahead error;
``persistence``: the same hour yesterday, causal; ``oracle``: the true future, a bound).  For each
arm the table gives the ratio of its mean carbon, JCT and electricity cost to the baseline's over the same seeds, with
paired bootstrap 95 % intervals (:func:`sfenv.runs.stats.paired_ratio`).  Seeds come from the
benchmark protocol's split (default: the first 10 of the test split).

Run: ``python -m sfenv.experiments.carbon [--scenario geo-8] [--num-jobs 20] [--split test --seeds 10]
[--slacks 6,24] [--forecasts noisy,persistence,oracle] [--out carbon.json] [--markdown carbon.md]``;
``--rows carbon.json`` re-summarises the episodes of an earlier run without playing them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sfenv.agents.registry import make_agent
from sfenv.experiments.rows import INT, NUMBER, TEXT, read_rows

from sfenv.app.script import ScriptParser
from sfenv.errors import InvalidInput
from sfenv.runs import protocol
from sfenv.runs.results import atomic_write_json
from sfenv.runs.stats import paired_ratio
from sfenv.scenario import Scenario, load_scenario
from sfenv.sim import make_simulator

__all__ = ["BASELINE", "ROW_FIELDS", "arms", "compare", "format_markdown", "main", "play", "read_carbon_rows",
           "run_carbon", "summarise"]

#: the carbon-agnostic scheduler every arm is compared with
BASELINE = "fastest"
#: the carbon-aware agents whose decisions read the forecast (the others read the intensity now)
FORECAST_AGENTS = ("forecast-carbon", "carbon-defer", "carbon-st", "carbon-elastic")
#: the forecast kinds an arm may read (:class:`sfenv.world.carbon.CarbonForecaster`)
FORECASTS = ("noisy", "persistence", "oracle")


def arms(slacks: Sequence[float], forecasts: Sequence[str]) -> list[dict[str, Any]]:
    """The arms: ``{"label", "agent", "kwargs", "forecast", "kind"}``, the baseline first.

    :raises ValueError: for a forecast kind not in :data:`FORECASTS` or a negative slack.
    """
    for fc in forecasts:
        if fc not in FORECASTS:
            raise InvalidInput(f"forecasts: {fc!r} is not a forecast kind; expected one of {', '.join(FORECASTS)}")
    for slack in slacks:
        if not slack >= 0:
            raise InvalidInput(f"slacks: {slack!r}: expected hours >= 0")
    out: list[dict[str, Any]] = [
        {"label": BASELINE, "agent": BASELINE, "kwargs": {}, "forecast": "noisy", "kind": "baseline"},
        {"label": "lowest-carbon", "agent": "lowest-carbon", "kwargs": {}, "forecast": "noisy", "kind": "spatial"},
    ]
    for fc in forecasts:
        out.append({"label": f"forecast-carbon/{fc}", "agent": "forecast-carbon", "kwargs": {}, "forecast": fc,
                    "kind": "spatial"})
    for name, kind in (("carbon-defer", "temporal"), ("carbon-st", "spatio-temporal"), ("carbon-elastic", "elastic")):
        for slack in slacks:
            for fc in forecasts:
                out.append({"label": f"{name}/slack={slack:g}h/{fc}", "agent": name, "kwargs": {"slack_h": slack},
                            "forecast": fc, "kind": kind})
    return out


def play(arm: dict[str, Any], scenario: Scenario, seed: int) -> dict[str, Any]:
    """One seeded episode of ``arm`` on ``scenario`` (its forecast kind applied): the report as a dict."""
    sc = scenario.with_overrides(carbon={"forecast": {"kind": arm["forecast"]}})
    agent = make_agent(arm["agent"], **arm["kwargs"])
    agent.reset(seed)
    sim = make_simulator(sc, seed)
    report = sim.run(agent.decide, replan=agent.replan if agent.replans else None, replan_hourly=agent.replan_hourly)
    assert sim.carbon is not None
    return {"arm": arm["label"], "kind": arm["kind"], "forecast": arm["forecast"], "seed": seed,
            "carbon_signal": sim.carbon.signal, **report.to_dict()}


def run_carbon(scenario: str | Scenario, seeds: Sequence[int], slacks: Sequence[float] = (6.0, 24.0),
               forecasts: Sequence[str] = ("noisy", "persistence", "oracle"), num_jobs: int | None = None,
               out: str | Path | None = None) -> list[dict[str, Any]]:
    """Play every arm on every seed; one row per episode (written to ``out`` atomically after each arm).

    :raises ScenarioError: for a scenario without a ``carbon`` section (nothing to shift against).
    """
    sc = load_scenario(scenario)
    if sc.cfg.carbon is None:
        from sfenv.scenario import ScenarioError

        raise ScenarioError(f"{sc.source}: carbon: the scenario has no carbon section; expected one "
                            "(every zone would be the constant fallback, and shifting could save nothing)")
    if num_jobs is not None:
        sc = sc.with_overrides(workload={"num_jobs": num_jobs})
    rows: list[dict[str, Any]] = []
    for arm in arms(slacks, forecasts):
        rows.extend(play(arm, sc, seed) for seed in seeds)
        if out is not None:
            atomic_write_json(Path(out), rows)
    return rows


def summarise(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per arm: mean carbon (kg), JCT (h) and cost (USD), and their paired ratios to the baseline (95 % intervals)."""
    base = {r["seed"]: r for r in rows if r["arm"] == BASELINE}
    labels: list[str] = []
    for r in rows:
        if r["arm"] not in labels:
            labels.append(r["arm"])
    out = []
    for label in labels:
        mine = {r["seed"]: r for r in rows if r["arm"] == label}
        seeds = sorted(set(mine) & set(base))
        entry: dict[str, Any] = {"arm": label, "kind": mine[seeds[0]]["kind"], "seeds": len(seeds),
                                 "signal": mine[seeds[0]]["carbon_signal"]}
        for col, field, scale in (("carbon", "carbon_kg", 1.0), ("jct", "mean_jct_s", 1 / 3600),
                                  ("cost", "cost_usd", 1.0)):
            a = [mine[s][field] * scale for s in seeds]
            b = [base[s][field] * scale for s in seeds]
            entry[col] = sum(a) / len(a)
            entry[col + "_ratio"], entry[col + "_low"], entry[col + "_high"] = paired_ratio(a, b)
        entry["unfinished"] = sum(mine[s]["unfinished"] for s in seeds) / len(seeds)
        out.append(entry)
    return out


def compare(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Paired carbon ratios between arms: each forecast against the oracle, and elastic against deferral.

    For every arm ``NAME/slack=S/F`` (and ``forecast-carbon/F``) with ``F`` not the oracle and a
    ``.../oracle`` twin: its carbon over the twin's (what the forecast's error costs); for every
    ``carbon-elastic/slack=S/F``: its carbon over ``carbon-defer/slack=S/F``'s (elastic scaling against
    non-interruptible deferral, our stand-in for CarbonScaler's suspend-resume baseline).  Each is
    ``{"arm", "reference", "what", "ratio", "low", "high", "seeds"}`` with a paired bootstrap 95 % interval.
    """
    by_arm: dict[str, dict[int, float]] = {}
    for r in rows:
        by_arm.setdefault(r["arm"], {})[r["seed"]] = r["carbon_kg"]
    pairs = []
    for label in by_arm:
        head, _, fc = label.rpartition("/")
        if head and fc != "oracle" and f"{head}/oracle" in by_arm:
            pairs.append((label, f"{head}/oracle", f"{fc} forecast vs oracle"))
    for label in by_arm:
        if label.startswith("carbon-elastic/"):
            twin = "carbon-defer/" + label.split("/", 1)[1]
            if twin in by_arm:
                pairs.append((label, twin, "elastic vs deferral"))
    out = []
    for arm, ref, what in pairs:
        seeds = sorted(set(by_arm[arm]) & set(by_arm[ref]))
        ratio, low, high = paired_ratio([by_arm[arm][s] for s in seeds], [by_arm[ref][s] for s in seeds])
        out.append({"arm": arm, "reference": ref, "what": what, "ratio": ratio, "low": low, "high": high,
                    "seeds": len(seeds)})
    return out


def _ratio(entry: dict[str, Any], col: str) -> str:
    lo, hi = entry[col + "_low"], entry[col + "_high"]
    band = f" ({lo:.3f}-{hi:.3f})" if math.isfinite(lo) else ""
    return f"{entry[col + '_ratio']:.3f}{band}"


def format_markdown(summary: Sequence[dict[str, Any]], scenario: str, seeds: Sequence[int], num_jobs: int,
                    comparisons: Sequence[dict[str, Any]] = ()) -> str:
    """The summary as a Markdown table, with the settings (and the :func:`compare` table if given)."""
    signal = "/".join(sorted({e["signal"] for e in summary}))
    lines = [f"Carbon shifting on {scenario} ({num_jobs} jobs per episode), seeds {seeds[0]}..{seeds[-1]} "
             f"({len(seeds)}), carbon signal {signal}; ratios to `{BASELINE}` (carbon-agnostic) on the same seeds, "
             "paired bootstrap 95 % intervals.", "",
             "| arm | kind | kg CO2e | carbon / base | JCT h | JCT / base | cost USD | cost / base | unfinished |",
             "|---|---|---|---|---|---|---|---|---|"]
    for e in summary:
        lines.append(f"| {e['arm']} | {e['kind']} | {e['carbon']:.1f} | {_ratio(e, 'carbon')} | {e['jct']:.2f} | "
                     f"{_ratio(e, 'jct')} | {e['cost']:.1f} | {_ratio(e, 'cost')} | {e['unfinished']:.1f} |")
    if comparisons:
        lines += ["", "Paired carbon ratios between arms (same seeds, bootstrap 95 % intervals):", "",
                  "| arm | against | comparison | carbon ratio |", "|---|---|---|---|"]
        for c in comparisons:
            band = f" ({c['low']:.3f}-{c['high']:.3f})" if math.isfinite(c["low"]) else ""
            lines.append(f"| {c['arm']} | {c['reference']} | {c['what']} | {c['ratio']:.3f}{band} |")
    return "\n".join(lines) + "\n"


#: the fields of an episode row :func:`summarise` and :func:`compare` read, and their kinds
ROW_FIELDS = {"arm": TEXT, "kind": TEXT, "seed": INT, "carbon_signal": TEXT, "carbon_kg": NUMBER,
              "mean_jct_s": NUMBER, "cost_usd": NUMBER, "unfinished": NUMBER}


def read_carbon_rows(path: str | Path) -> list[dict[str, Any]]:
    """The episode rows of an earlier ``--out`` file, checked before they are summarised.

    :raises InvalidInput: one line naming the file, if it is not a non-empty JSON list of episode rows
        with :data:`ROW_FIELDS`, has an (arm, seed) twice, has no :data:`BASELINE` row, or has an arm
        sharing no seed with the baseline (nothing to pair it with).
    """
    rows = read_rows(path, "carbon episode rows file", ROW_FIELDS, allow_empty=False)
    seeds: dict[str, set[int]] = {}
    for i, r in enumerate(rows):
        mine = seeds.setdefault(r["arm"], set())
        if r["seed"] in mine:
            raise InvalidInput(f"{path}: row {i + 1}: arm {r['arm']!r:.60} seed {r['seed']} is given twice")
        mine.add(r["seed"])
    base = seeds.get(BASELINE)
    if not base:
        raise InvalidInput(f"{path}: no row of the baseline arm {BASELINE!r}; the ratios are to it")
    for arm, mine in seeds.items():
        if not mine & base:
            raise InvalidInput(f"{path}: arm {arm!r:.60} shares no seed with the baseline {BASELINE!r}")
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: see the module docstring."""
    parser = ScriptParser(script=__file__, description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="geo-8")
    parser.add_argument("--num-jobs", type=int, default=20)
    parser.add_argument("--split", default="test", choices=["train", "validation", "test"])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--slacks", default="6,24", help="comma-separated slack hours")
    parser.add_argument("--forecasts", default="noisy,persistence,oracle",
                        help="comma-separated: noisy, persistence, oracle")
    parser.add_argument("--out", default=None, help="JSON file of the episode rows")
    parser.add_argument("--markdown", default=None, help="Markdown file of the table")
    parser.add_argument("--rows", default=None,
                        help="summarise the episode rows of an earlier --out file instead of playing")
    args = parser.parse_args(argv)
    seeds = protocol.seeds(args.split, args.seeds, args.scenario)
    try:
        slacks = [float(x) for x in args.slacks.split(",") if x]
    except ValueError:
        parser.error(f"--slacks {args.slacks!r}: expected comma-separated hours such as 6,24")
    forecasts = [x for x in args.forecasts.split(",") if x]
    try:
        arms(slacks, forecasts)  # check the settings before any episode runs
    except ValueError as exc:
        parser.error(str(exc))
    if args.rows:
        rows = read_carbon_rows(args.rows)
        seeds = sorted({r["seed"] for r in rows})
    else:
        rows = run_carbon(args.scenario, seeds, slacks, forecasts, args.num_jobs, args.out)
    text = format_markdown(summarise(rows), args.scenario, seeds, args.num_jobs, compare(rows))
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text)
    if args.out:
        Path(args.out).with_suffix(".summary.json").write_text(
            json.dumps({"arms": summarise(rows), "comparisons": compare(rows)}, indent=1))
    return 0


if __name__ == "__main__":
    from sfenv.app.script import run_script

    raise SystemExit(run_script(main))
