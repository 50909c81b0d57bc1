"""Render the result files in ``docs/results/data/`` into the Markdown tables of the docs.

Every table of results in the documentation is made here from a result file, never typed by hand:
``python docs/make_results.py`` reads each ``data/<name>.json`` (a ``benchmark.json`` written by
``sfenv benchmark`` or a file written by ``sfenv evaluate --out``), summarises it with
:func:`sfenv.app.evaluate.summarise` (mean and 95 % Student-t interval over seeds) and writes
``docs/results/<name>.md`` and all of them, in ``SOURCES.yml``'s order, into
``docs/results/all.md``, which the benchmarks page includes. For a ``benchmark.json`` it also redraws the
JCT, cost and trade-off figures into ``docs/results/figures/<name>/`` (``--no-figures`` skips
them). Cost shows as electricity, and, for files whose episodes carry them (written since egress is
billed), egress and the total bill beside it. ``data/SOURCES.yml`` records, per file, the command that made
it, when, and optionally the commit and env version; a file without an entry is refused.
``--check`` writes nothing and exits 1 if a table is out of date.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
DATA = RESULTS / "data"
FIGURES = ("jct", "cost", "tradeoff")

#: (summary column, heading, format); columns with a ``_ci`` twin print as ``mean ± half-width``;
#: those in :data:`OPTIONAL_COLUMNS` only when the file's episode rows carry them
COLUMNS = [
    ("agent", "agent", ""),
    ("seeds", "seeds", "d"),
    ("mean_jct_h", "mean JCT, h", ".2f"),
    ("p95_jct_h", "p95 JCT, h", ".2f"),
    ("cost_usd", "electricity, USD", ".1f"),
    ("egress_usd", "egress, USD", ".1f"),
    ("total_cost_usd", "total cost, USD", ".1f"),
    ("throughput_tok_s", "throughput, k tokens/s", ".0f"),
    ("unfinished", "unfinished jobs", ".1f"),
    ("utilisation", "GPU utilisation", ".2f"),
]

#: columns shown only for files whose episode rows hold the field (files written before egress was
#: billed have neither, and :func:`sfenv.app.evaluate.summarise` gives NaN for them)
OPTIONAL_COLUMNS = ("egress_usd", "total_cost_usd")


def columns_for(rows: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """The table's columns for these episode rows: :data:`COLUMNS` without the optional ones no row holds.

    :param rows: the episode rows of one result file.
    :return: the ``(summary column, heading, format)`` triples to print, in :data:`COLUMNS`' order.
    """
    return [c for c in COLUMNS if c[0] not in OPTIONAL_COLUMNS or any(c[0] in r for r in rows)]


def load_rows(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The episode rows of a result file and its settings (empty for an ``evaluate --out`` list).

    :param path: a ``benchmark.json`` (a dict with ``episodes`` and ``meta``) or an ``evaluate --out``
        file (a list of rows, or a dict with ``rows`` or ``episodes``).
    :return: (rows, settings).
    :raises ValueError: if the file holds no episode rows.
    """
    data = json.loads(path.read_text())
    if isinstance(data, list):
        rows, meta = data, {}
    else:
        rows = data.get("episodes") or data.get("rows") or []
        meta = data.get("meta") or data.get("settings") or {}
    if not rows or not all(isinstance(r, dict) and "agent" in r for r in rows):
        raise ValueError(f"{path}: no episode rows (expected a benchmark.json or an evaluate --out file)")
    return rows, meta


def _cell(row: dict[str, Any], column: str, fmt: str) -> str:
    """One table cell: the value, with ``± half-width`` when the summary has an interval; ``-`` for no value."""
    value = row[column]
    if column != "agent" and not math.isfinite(value):
        return "-"  # an optional column an agent's rows do not hold (summarise gives NaN)
    if column == "throughput_tok_s":
        value, ci = value / 1000, row.get(column + "_ci", math.nan) / 1000
    else:
        ci = row.get(column + "_ci")
    text = f"`{value}`" if column == "agent" else f"{value:{fmt}}"
    if ci is not None and column != "agent":
        text += f" ± {ci:{fmt}}" if math.isfinite(ci) else " ± -"
    return text


def render_table(name: str, rows: list[dict[str, Any]], meta: dict[str, Any], source: dict[str, Any]) -> str:
    """The Markdown page fragment of one result file.

    :param name: the file's stem (used in the heading's anchor and the figure folder).
    :param rows: the episode rows.
    :param meta: the settings recorded in the file (may be empty).
    :param source: its ``SOURCES.yml`` entry: ``command``, ``date``, ``machine`` (and optional ``title``,
        ``commit``: the sfenv commit that ran it, ``env``: the env version it played).
    :return: Markdown: a heading, the command, the table and a note on the interval.
    """
    from sfenv.app.evaluate import summarise

    summary = summarise(rows)
    scenarios = sorted({r["scenario"] for r in rows})
    seeds = sorted({r["seed"] for r in rows})
    jobs = sorted({r["jobs"] for r in rows})
    title = source.get("title") or f"{', '.join(scenarios)}"
    made = [str(source["date"])]
    made += [f"commit {source['commit']}"] if source.get("commit") else []
    made += [f"env {source['env']}"] if source.get("env") else []
    columns = columns_for(rows)
    lines = [
        f"### {title}",
        "",
        f"`{source['command']}` ({', '.join(made)}; {source['machine']}): scenario {', '.join(scenarios)}, "
        f"{'/'.join(map(str, jobs))} jobs per episode, seeds {seeds[0]}..{seeds[-1]} ({len(seeds)}).",
        "",
        "| " + " | ".join(head for _, head, _ in columns) + " |",
        "|" + "---|" * len(columns),
    ]
    lines += ["| " + " | ".join(_cell(row, col, fmt) for col, _, fmt in columns) + " |" for row in summary]
    billed = "; electricity is the energy bill, egress the bytes sent between regions, total cost both" if any(
        col == "egress_usd" for col, _, _ in columns) else ""
    lines += ["", "Mean ± 95 % confidence half-width over seeds (Student t); JCT counts unfinished jobs at "
              f"episode end - arrival{billed}. Generated by `docs/make_results.py` from "
              f"`docs/results/data/{name}.json`; do not edit."]
    if meta.get("scenario_sha"):
        lines[-1] += f" Scenario hash `{meta['scenario_sha']}`."
    figures = RESULTS / "figures" / name
    if figures.is_dir():
        shown = [f for f in FIGURES if (figures / f"{f}.png").exists()]
        if shown:
            for f in shown:
                lines += ["", f"![{f} of {name}](figures/{name}/{f}.png)"]
    return "\n".join(lines) + "\n"


def draw_figures(name: str, rows: list[dict[str, Any]], meta: dict[str, Any]) -> list[Path]:
    """Redraw the JCT, cost and trade-off figures of one result file into ``results/figures/<name>/``.

    :return: the PNG paths written.
    """
    from sfenv.app.benchmark import write_plots
    from sfenv.app.evaluate import summarise

    out = RESULTS / "figures" / name
    out.mkdir(parents=True, exist_ok=True)
    written = write_plots({"summary": summarise(rows), "meta": meta, "timeline": None}, out)
    keep = {f"{f}.png" for f in FIGURES}
    for path in written:
        if path.name not in keep:
            path.unlink()
    return [p for p in written if p.name in keep]


def sources() -> dict[str, dict[str, Any]]:
    """The ``SOURCES.yml`` entries: file stem -> command, date, machine (and title, commit, env)."""
    return yaml.safe_load((DATA / "SOURCES.yml").read_text()) or {}


def build(figures: bool = True, check: bool = False) -> list[str]:
    """Render every result file; return the names of the tables that changed (or would, with ``check``).

    :param figures: also redraw the figures of each file.
    :param check: write nothing; only report the tables that are out of date.
    :raises ValueError: for a data file without a ``SOURCES.yml`` entry.
    """
    known = sources()
    changed = []
    texts = []
    for path in sorted(DATA.glob("*.json"), key=lambda p: (list(known).index(p.stem) if p.stem in known else -1)):
        name = path.stem
        if name not in known:
            raise ValueError(f"{path}: no entry in {DATA / 'SOURCES.yml'} (the command that made it)")
        rows, meta = load_rows(path)
        if figures and not check:
            draw_figures(name, rows, meta)
        text = render_table(name, rows, meta, known[name])
        texts.append(text)
        changed += _update(RESULTS / f"{name}.md", text, check)
    changed += _update(RESULTS / "all.md", "\n".join(texts), check)
    return changed


def _update(target: Path, text: str, check: bool) -> list[str]:
    """Write ``text`` to ``target`` unless it is already there (or ``check``); return [stem] if it differed."""
    if target.exists() and target.read_text() == text:
        return []
    if not check:
        target.write_text(text)
    return [target.stem]


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python docs/make_results.py [--check] [--no-figures]``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a table is out of date")
    parser.add_argument("--no-figures", action="store_true", help="do not redraw the figures")
    args = parser.parse_args(argv)
    try:
        changed = build(figures=not args.no_figures, check=args.check)
    except ValueError as e:
        print(f"make_results: {e}", file=sys.stderr)
        return 2
    if args.check and changed:
        print(f"make_results: out of date: {', '.join(changed)}; run python docs/make_results.py", file=sys.stderr)
        return 1
    print(f"make_results: {len(changed)} table(s) {'to update' if args.check else 'written'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
