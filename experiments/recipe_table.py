r"""The recommended recipe on every test group, as one Markdown table, from ``learned_vs_heuristics`` result files.

Reads result files that :mod:`sfenv.experiments.learned_vs_heuristics` wrote (``--model M --split test``,
with ``--unseen`` scenarios and ``--unseen-generated N``) and prints one row per group it played: the
group, its seeds, the model's mean JCT over the best heuristic's with the paired 95 % interval, that
heuristic, the TB both send between regions per episode, the model's total cost (electricity and
egress) over that heuristic's, its unfinished jobs, and the verdict against issue 34's bound (upper
end of the interval at most 1.02) on the unseen groups, or against the oracle-level target (at most
0.90, interval below 0.92) on the training scenario.  Nothing is played: the table is the files'.

Run::

    python -m sfenv.experiments.recipe_table docs/results/learned/v5/generalise-rollout-test-split.json \
        docs/results/learned/v5/generalise-rollout-heldout-20.json --training spider-8-contended
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sfenv.app.script import ScriptParser
from sfenv.errors import InvalidInput
from sfenv.world.files import parse_json, read_text

__all__ = ["BOUND", "ORACLE_LEVEL", "ORACLE_UPPER", "groups_of", "main", "row", "table", "verdict"]

#: issue 34's bound on an unseen group: the paired 95 % interval's upper end at most this
BOUND = 1.02
#: issue 34's oracle-level target on the training scenario: the ratio at most this ...
ORACLE_LEVEL = 0.90
#: ... and the interval's upper end below this
ORACLE_UPPER = 0.92
#: a result file is read up to this size (they are tens of kilobytes)
MAX_RESULT_BYTES = 16 * 1024 * 1024
#: the table's header
HEADER = ("| group (test split) | seeds | recipe / best heuristic [95 %] | best heuristic "
          "| TB across regions per episode, recipe vs best | total cost (electricity and egress), recipe / best "
          "| unfinished | verdict |\n|---|---|---|---|---|---|---|---|")


def groups_of(path: str | Path) -> list[tuple[str, int, dict[str, Any]]]:
    """``(group, seeds, result)`` for each group of a ``learned_vs_heuristics`` result file, in the order played.

    The played scenario first (named by its file stem), then the ``--unseen`` ones, then the generated
    platforms (``N generated test platforms``) and the cloud-like ones (``N cloud-like test platforms``).

    :raises InvalidInput: (a ``ValueError``) naming the file, if it is not such a result file.
    """
    try:
        res = parse_json(read_text(path, "result file", MAX_RESULT_BYTES), path, "learned_vs_heuristics result file")
        seeds = len(res["seeds"])
        out = [(Path(res["scenario"]).stem, seeds, res)]
        out += [(Path(name).stem, seeds, group) for name, group in res.get("unseen", {}).items()]
        for key, label in (("unseen_generated", "generated test platforms"),
                           ("unseen_cloud", "cloud-like test platforms")):
            group = res.get(key)
            if group:
                out.append((f"{len(group['platforms'])} {label}", seeds, group))
        for name, _, group in out:
            missing = [key for key in ("ratio_to_best", "best_heuristic", "summary") if key not in group]
            if missing:
                raise KeyError(f"{name} has no {missing[0]}")
    except (KeyError, TypeError) as exc:
        raise InvalidInput(f"{path}: not a learned_vs_heuristics result file ({type(exc).__name__}: {exc})") from None
    return out


def verdict(ratio: Sequence[float], training: bool) -> str:
    """Issue 34's reading of one group: the oracle level on the training scenario, else the bound."""
    value, _, high = ratio
    if training:
        return "oracle level met" if value <= ORACLE_LEVEL and high < ORACLE_UPPER else "oracle level **missed**"
    return "met" if high <= BOUND else "**missed**"


def _model_name(summary: dict[str, Any]) -> str:
    (name,) = [name for name in summary if name.startswith("model:")]
    return name


def row(group: str, seeds: int, res: dict[str, Any], training: bool = False) -> str:
    """One Markdown row of :data:`HEADER` for one group's result."""
    ratio = res["ratio_to_best"]
    best = res["best_heuristic"]
    summary = res["summary"]
    model = summary[_model_name(summary)]
    cost = res.get("total_cost_usd_ratio_to_best")
    cost_cell = "-" if cost is None else f"{cost[0]:.3f} ({cost[1]:.3f}-{cost[2]:.3f})"
    name = f"{group} (training)" if training else group
    return (f"| {name} | {seeds} | {ratio[0]:.3f} ({ratio[1]:.3f}-{ratio[2]:.3f}) | `{best}` "
            f"| {model['wan_tb']:.1f} vs {summary[best]['wan_tb']:.1f} | {cost_cell} | {model['unfinished']:g} "
            f"| {verdict(ratio, training)} |")


def table(paths: Sequence[str | Path], training: str | None = None) -> str:
    """The Markdown table of every group in ``paths`` (a group played twice keeps its first file's row).

    :raises InvalidInput: naming the file and the group, if a group's result lacks what a row needs.
    """
    rows, seen = [HEADER], set()
    for path in paths:
        for group, seeds, res in groups_of(path):
            if group in seen:
                continue
            seen.add(group)
            try:
                rows.append(row(group, seeds, res, training=group == training))
            except (KeyError, TypeError, ValueError, IndexError) as exc:
                raise InvalidInput(f"{path}: group {group}: not a learned_vs_heuristics result "
                                   f"({type(exc).__name__}: {exc})") from None
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> str:
    """Print the table of the result files named on the command line; returns it."""
    p = ScriptParser(script=__file__, description=__doc__.split("\n")[0])
    p.add_argument("files", nargs="+", type=Path, help="learned_vs_heuristics result files (JSON)")
    p.add_argument("--training", default=None, metavar="GROUP",
                   help="the recipe's training scenario: its row is read against the oracle-level target")
    args = p.parse_args(argv)
    text = table(args.files, training=args.training)
    print(text)
    return text


if __name__ == "__main__":
    from sfenv.app.script import run_script

    raise SystemExit(run_script(main))
