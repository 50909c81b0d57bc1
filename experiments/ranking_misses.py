"""Where the single-server set's per-group ranking misses come from (issue 31, section 4: plan ranking).

Run: ``python -m sfenv.experiments.ranking_misses [--data DIR] [--draws N]``.

The targets per group (:mod:`sfenv.experiments.validate_model`: pair order >= 0.95, top-1 regret
<= 5 %) depend only on the model's errors *within* a group: a factor common to a group's runs
orders nothing differently.  This script prints, for the single-server set (vTrain's 1,440 runs):

- the spread of the within-group log errors (each run's ``log(model / measured)`` minus its
  group's mean) and the pooled pair order that independent errors of that spread would give;
- the within-group errors by tensor-parallel degree and micro-batch (median), and the runs on the
  anti-diagonal of that sweep (``tp x micro-batch = 8``) against the others;
- how many mis-ordered pairs involve a run more than 15 % off within its group;
- the groups missing each target as modelled, and with the anti-diagonal runs set to their group's
  mean ratio (what an exact account of those runs alone would give; a counterfactual, not a fit);
- the groups missing each target when the predictions are the measured times with independent
  log-normal errors of a given spread (``--draws`` seeded draws per spread): what a model must reach;
- **how the set was made** (:func:`layer_linearity`, :func:`falling_micro_batch_steps`): with data
  parallelism 1 every configuration measured at three or more layer counts is linear in the layer
  count to a nanosecond, which wall-clock runs are not: the times are composed from a few costs per
  (hidden, TP, micro-batch) cell, so the groups share about 32 cells and are not independent samples;
  and the cells where the time per pipeline slot falls as the micro-batch doubles (more work, less
  time), with the targets recomputed without the cells at either end of such a step and, as a
  control, without as many cells drawn at random (``--draws`` seeded draws).

Nothing here is fitted; nothing changes the model.
"""

from __future__ import annotations

import math
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from sfenv.experiments.validate_model import (
    PAIR_GAP,
    PAIR_TARGET,
    REGRET_TARGET,
    SINGLE,
    Run,
    default_data_dir,
    load_runs,
    pair_order,
    plan_groups,
    predict,
    top1_regret,
)

from sfenv.app.script import ScriptParser

__all__ = ["falling_micro_batch_steps", "groups_missing_targets", "layer_linearity", "main", "within_group_errors"]

OUTLIER = 0.15  # a run this far off (in log ratio) within its group counts as an outlier
SPREADS = (0.02, 0.03, 0.05, 0.07, 0.10)  # within-group log-error spreads simulated
LINEAR_TOLERANCE_S = 1e-9  # slopes over layer counts that differ by less than this are exactly linear

Cell = tuple[int, int, int]  # (hidden size, tensor parallelism, micro-batch)


def within_group_errors(pred: np.ndarray, meas: np.ndarray, groups: dict[str, list[int]]) -> np.ndarray:
    """Each run's ``log(pred / meas)`` minus its group's mean (0 for runs in no group)."""
    log_ratio = np.log(pred / meas)
    out = np.zeros_like(log_ratio)
    for idx in groups.values():
        out[idx] = log_ratio[idx] - log_ratio[idx].mean()
    return out


def groups_missing_targets(pred: np.ndarray, meas: np.ndarray, groups: dict[str, list[int]]) -> tuple[int, int]:
    """``(groups below the pair-order target, groups above the top-1 regret target)``."""
    pairs_missed = regret_missed = 0
    for idx in groups.values():
        p, t = pred[idx].tolist(), meas[idx].tolist()
        right, counted = pair_order(p, t)
        pairs_missed += int(counted > 0 and right / counted < PAIR_TARGET)
        regret_missed += int(top1_regret(p, t) > REGRET_TARGET)
    return pairs_missed, regret_missed


def _wrong_pairs(pred: np.ndarray, meas: np.ndarray, groups: dict[str, list[int]]) -> list[tuple[int, int]]:
    """Pairs ``(slower, faster)`` more than :data:`PAIR_GAP` apart in measured time that the model does not order so."""
    out = []
    for idx in groups.values():
        for i in idx:
            out += [(i, j) for j in idx if meas[i] > (1 + PAIR_GAP) * meas[j] and not pred[i] > pred[j]]
    return out


def _expected_pair_order(meas: np.ndarray, groups: dict[str, list[int]], sd: float) -> float:
    """Pooled pair order if each run's log error were independent normal with this spread."""
    from scipy.stats import norm  # an experiment dependency

    right = counted = 0.0
    for idx in groups.values():
        t = meas[idx]
        gap = np.log(t[:, None] / t[None, :])
        mask = gap > math.log(1 + PAIR_GAP)
        counted += mask.sum()
        right += norm.cdf(gap[mask] / (sd * math.sqrt(2))).sum()
    return float(right / counted)


def layer_linearity(runs: Sequence[Run]) -> dict[str, tuple[int, int]]:
    """Configurations measured at three or more layer counts, and how many of them are exactly linear in it.

    A configuration is every setting but the layer count; it is exactly linear when its time's slopes
    between successive layer counts differ by less than :data:`LINEAR_TOLERANCE_S`.

    :return: ``{"dp = 1": (configurations, exactly linear), "dp > 1": (...)}``.
    """
    times: dict[tuple, list[tuple[int, float]]] = defaultdict(list)
    for r in runs:
        key = (r.group.split("-l")[0], r.gpus, r.batch, r.micro_batch, r.hidden, r.heads, r.seq_len, r.tp, r.dp, r.pp)
        times[key].append((r.layers, r.seconds))
    out = {"dp = 1": [0, 0], "dp > 1": [0, 0]}
    for key, points in times.items():
        if len({layers for layers, _ in points}) < 3:
            continue
        points.sort()
        layers = np.array([p[0] for p in points], dtype=float)
        seconds = np.array([p[1] for p in points])
        slopes = np.diff(seconds) / np.diff(layers)
        tally = out["dp = 1" if key[8] == 1 else "dp > 1"]
        tally[0] += 1
        tally[1] += int(slopes.max() - slopes.min() < LINEAR_TOLERANCE_S)
    return {k: (v[0], v[1]) for k, v in out.items()}


def falling_micro_batch_steps(runs: Sequence[Run]) -> dict[Cell, float]:
    """Steps from micro-batch ``b`` to ``2b`` over which the time per pipeline slot falls.

    The time per slot is the iteration time over ``m + p - 1`` (``m = B / (b d)`` micro-batches,
    ``p`` stages: 1F1B's slots).  For each cell ``(hidden, TP, b)`` the ratio of ``2b``'s to ``b``'s
    over runs alike in everything else is taken, and its median kept when below 1: twice the work
    in less time, which one code path on one GPU does not do.

    :return: ``{(hidden, tp, b): median ratio}`` for the falling steps.
    """
    per_slot: dict[tuple, dict[int, float]] = defaultdict(dict)
    for r in runs:
        slots = r.batch // (r.micro_batch * r.dp) + r.pp - 1
        per_slot[(r.gpus, r.batch, r.hidden, r.heads, r.layers, r.seq_len, r.tp, r.pp, r.dp)][r.micro_batch] = \
            r.seconds / slots
    ratios: dict[Cell, list[float]] = defaultdict(list)
    for key, by_b in per_slot.items():
        for b, t in by_b.items():
            if 2 * b in by_b:
                ratios[(key[2], key[6], b)].append(by_b[2 * b] / t)
    return {cell: float(np.median(v)) for cell, v in sorted(ratios.items()) if np.median(v) < 1.0}


def _targets_without(runs: Sequence[Run], pred: np.ndarray, cells: set[Cell]) -> tuple[int, int, int, int]:
    """``(runs kept, groups, groups missing pair order, groups missing regret)`` without the runs of ``cells``."""
    keep = [i for i, r in enumerate(runs) if (r.hidden, r.tp, r.micro_batch) not in cells]
    kept = [runs[i] for i in keep]
    groups = plan_groups(kept)
    pairs, regret = groups_missing_targets(pred[keep], np.array([r.seconds for r in kept]), groups)
    return len(kept), len(groups), pairs, regret


def _provenance(runs: Sequence[Run], pred: np.ndarray, draws: int) -> None:
    """Print how the set was made and the targets without the cells whose time falls as the micro-batch doubles."""
    linear = layer_linearity(runs)
    cells = sorted({(r.hidden, r.tp, r.micro_batch) for r in runs})
    print(f"  how the set was made: exactly linear in the layer count (slopes within {LINEAR_TOLERANCE_S:g} s): "
          + "; ".join(f"{k}: {exact} of {n} configurations" for k, (n, exact) in linear.items())
          + f"; {len(cells)} (hidden, TP, micro-batch) cells")
    falling = falling_micro_batch_steps(runs)
    print("  time per pipeline slot falls as the micro-batch doubles: "
          + ", ".join(f"h{h} tp{t} b{b}->b{2 * b} {ratio:.2f}" for (h, t, b), ratio in falling.items()))
    ends = {c for h, t, b in falling for c in ((h, t, b), (h, t, 2 * b))}
    n_runs, n_groups, pairs, regret = _targets_without(runs, pred, ends)
    print(f"  without the {len(ends)} cells at either end of those steps ({n_runs} runs, {n_groups} groups): groups "
          f"missing pair order / regret {pairs} / {regret}")
    rng = np.random.default_rng(0)
    control = np.array([_targets_without(runs, pred, {cells[i] for i in rng.choice(len(cells), len(ends), False)})
                        for _ in range(draws)])
    print(f"  without {len(ends)} cells drawn at random ({draws} draws): groups {control[:, 1].mean():.0f}, missing "
          f"pair order / regret {control[:, 2].mean():.1f} / {control[:, 3].mean():.1f} (mean); "
          f"draws with regret misses <= {regret}: {(control[:, 3] <= regret).sum()} of {draws}")


def _by_tp_and_micro_batch(runs: Sequence[Run], err: np.ndarray) -> str:
    cells: dict[tuple[int, int], list[float]] = defaultdict(list)
    for run, e in zip(runs, err):
        cells[(run.tp, run.micro_batch)].append(float(e))
    return "  ".join(f"tp{tp}/b{b} {100 * np.median(v):+.0f}%" for (tp, b), v in sorted(cells.items()))


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    ap = ScriptParser(script=__file__, description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--data", type=Path, default=default_data_dir(), help="folder with the measured CSV files")
    ap.add_argument("--draws", type=int, default=20, help="seeded draws per simulated error spread (default 20)")
    args = ap.parse_args(argv)
    if args.draws < 1:
        print("sfenv: --draws must be at least 1", file=sys.stderr)
        return 2
    try:
        runs = load_runs(args.data / SINGLE, False)
    except (OSError, ValueError) as e:
        print(f"sfenv: cannot read the measured runs: {e}", file=sys.stderr)
        return 2
    modelled = [(run, t) for run, (t, _) in ((r, predict(r)) for r in runs) if t is not None]
    runs = [run for run, _ in modelled]
    pred = np.array([t for _, t in modelled])
    meas = np.array([r.seconds for r in runs])
    groups = plan_groups(runs)
    err = within_group_errors(pred, meas, groups)
    sd = float(err.std())
    wrong = _wrong_pairs(pred, meas, groups)
    counted = sum(pair_order(pred[idx].tolist(), meas[idx].tolist())[1] for idx in groups.values())
    print(f"single server: {len(runs)} runs in {len(groups)} groups; within-group log-error spread {100 * sd:.1f} %")
    print(f"  pooled pair order {1 - len(wrong) / counted:.3f} over {counted} pairs; with independent errors of "
          f"that spread: {_expected_pair_order(meas, groups, sd):.3f}")
    print(f"  within-group error by TP / micro-batch (median): {_by_tp_and_micro_batch(runs, err)}")
    diagonal = np.array([r.tp * r.micro_batch == 8 for r in runs])
    print(f"  tp x micro-batch = 8: {diagonal.sum()} runs, median |error| "
          f"{100 * np.median(np.abs(err[diagonal])):.1f} % (spread {100 * err[diagonal].std():.1f} %); "
          f"the other {(~diagonal).sum()}: "
          f"{100 * np.median(np.abs(err[~diagonal])):.1f} % (spread {100 * err[~diagonal].std():.1f} %)")
    outliers = np.abs(err) > OUTLIER
    print(f"  runs more than {100 * OUTLIER:.0f} % off within their group: {outliers.sum()}, of them "
          f"{(outliers & diagonal).sum()} with tp x micro-batch = 8; mis-ordered pairs involving one: "
          f"{sum(1 for i, j in wrong if outliers[i] or outliers[j])} of {len(wrong)}")
    pairs_missed, regret_missed = groups_missing_targets(pred, meas, groups)
    exact = pred.copy()
    for idx_list in groups.values():
        idx = np.array(idx_list)
        rest = ~diagonal[idx]
        offset = float(np.log(pred[idx][rest] / meas[idx][rest]).mean()) if rest.any() else 0.0
        exact[idx[diagonal[idx]]] = meas[idx[diagonal[idx]]] * math.exp(offset)
    pairs_exact, regret_exact = groups_missing_targets(exact, meas, groups)
    print(f"  groups missing pair order >= {PAIR_TARGET} / top-1 regret <= {100 * REGRET_TARGET:.0f} %: modelled "
          f"{pairs_missed} / {regret_missed}; with the tp x micro-batch = 8 runs at their group's mean ratio "
          f"{pairs_exact} / {regret_exact}")
    rng = np.random.default_rng(0)
    for spread in SPREADS:
        missed = np.array([groups_missing_targets(meas * np.exp(spread * rng.standard_normal(len(meas))), meas, groups)
                           for _ in range(args.draws)])
        print(f"  measured times with independent errors of spread {100 * spread:.0f} %: groups missing "
              f"{missed[:, 0].mean():.1f} / {missed[:, 1].mean():.1f} (mean of {args.draws} draws)")
    _provenance(runs, pred, args.draws)
    return 0


if __name__ == "__main__":
    from sfenv.app.script import run_script

    raise SystemExit(run_script(main))
