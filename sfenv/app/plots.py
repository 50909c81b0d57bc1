"""Figures of benchmark results: JCT and cost per agent, the JCT-cost trade-off, a schedule timeline, prices.

Cost axes show the whole bill, electricity plus egress (``total_cost_usd``, :func:`cost_column`); axis
labels and titles name a summary column through :data:`METRIC_NAMES`.

Every function takes plain data (the summary rows of :func:`sfenv.app.evaluate.summarise`, or
the ``timeline`` dict the benchmark saves, see :func:`sfenv.app.benchmark.episode_timeline`), returns
the :class:`matplotlib.figure.Figure` it drew, and writes it as a PNG if given a path (atomically:
temporary file, then rename).  Figures are built with the object-oriented API (no pyplot, no GUI
backend, no global state), and matplotlib is imported inside the functions, so ``import sfenv``
never imports it.  A figure's PNG is ``figsize x DPI`` pixels exactly (no tight bounding box).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sfenv.runs.results import atomic_path

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "BAR_SIZE",
    "COST_COLUMNS",
    "DPI",
    "METRIC_NAMES",
    "NAMED_LABELS_UP_TO",
    "axis_label",
    "cost_column",
    "metric_name",
    "pareto_front",
    "pareto_front_nd",
    "plot_metric",
    "plot_prices",
    "plot_timeline",
    "plot_tradeoff",
    "plot_tradeoff_pairs",
    "save_png",
]

#: resolution of every PNG, dots per inch
DPI = 100
#: size of the per-agent figures and of the trade-off plot, inches (800 x 450 px)
BAR_SIZE = (8.0, 4.5)
#: width of the timeline and price figures, inches (their height grows with the number of regions)
WIDE = 11.0
#: summary column -> (what it measures, its unit) for axis labels and titles; a column not listed is
#: named by itself (:func:`axis_label`)
METRIC_NAMES: dict[str, tuple[str, str]] = {
    "mean_jct_h": ("mean JCT", "h (unfinished jobs censored at episode end)"),
    "p95_jct_h": ("p95 JCT", "h (unfinished jobs censored at episode end)"),
    "cost_usd": ("electricity cost", "USD per episode"),
    "egress_usd": ("egress cost", "USD per episode"),
    "total_cost_usd": ("total cost (electricity + egress)", "USD per episode"),
    "throughput_tok_s": ("throughput", "tokens/s"),
    "unfinished": ("unfinished jobs", "per episode"),
}
#: the cost columns a cost axis shows, first choice first: the whole bill, else electricity alone (results
#: written before egress was billed have no total)
COST_COLUMNS = ("total_cost_usd", "cost_usd")


def metric_name(column: str) -> str:
    """What summary column ``column`` measures (:data:`METRIC_NAMES`; the column itself if not listed)."""
    return METRIC_NAMES.get(column, (column, ""))[0]


def axis_label(column: str) -> str:
    """An axis label for summary column ``column``: what it measures and its unit (:data:`METRIC_NAMES`)."""
    name, unit = METRIC_NAMES.get(column, (column, ""))
    return f"{name}, {unit}" if unit else name


def cost_column(summary: Sequence[dict[str, Any]]) -> str:
    """The cost column to plot for ``summary``: the first of :data:`COST_COLUMNS` with a finite mean in some row."""
    for col in COST_COLUMNS:
        if any(math.isfinite(float(r.get(col, math.nan))) for r in summary):
            return col
    return COST_COLUMNS[-1]


def _figure(size: tuple[float, float]) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=size, dpi=DPI, layout="constrained")


def _colours(n: int) -> list[Any]:
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(n)]


def save_png(fig: Figure, path: str | Path) -> Path:
    """Write ``fig`` to ``path`` as a PNG at :data:`DPI`, through a temporary file and a rename."""
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=DPI)
    return path


def _ci(row: dict[str, Any], col: str) -> float:
    ci = row.get(col + "_ci", math.nan)
    return ci if math.isfinite(ci) else 0.0


def plot_metric(summary: Sequence[dict[str, Any]], column: str, ylabel: str, title: str,
                path: str | Path | None = None, scenario: str | None = None) -> Figure:
    """One bar per agent: the mean over seeds of ``column`` with its 95 % CI as an error bar.

    Agents with unfinished jobs get the mean number above their bar (their JCT is censored).

    :param summary: rows of :func:`sfenv.app.evaluate.summarise`.
    :param column: a summary column with a ``_ci`` partner (``mean_jct_h``, ``cost_usd``, ...).
    :param path: PNG to write, if given.
    :param scenario: named in the title, so a copied PNG still says what it shows.
    """
    fig = _figure(BAR_SIZE)
    ax = fig.subplots()
    colours = _colours(len(summary))
    for i, row in enumerate(summary):
        ax.bar(i, row[column], yerr=_ci(row, column), color=colours[i], capsize=4, label=row["agent"])
        if row.get("unfinished", 0) > 0:
            ax.annotate(f"{row['unfinished']:.1f} unfinished", (i, row[column] + _ci(row, column)),
                        ha="center", va="bottom", fontsize=7, color="firebrick")
    ax.set_xticks(range(len(summary)), [r["agent"] for r in summary], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    seeds = sorted({r["seeds"] for r in summary})
    where = f" on {scenario}" if scenario else ""
    ax.set_title(f"{title}{where} (mean ± 95 % CI over {'/'.join(map(str, seeds))} seeds)", fontsize=10)
    ax.legend(fontsize=7, ncols=2, loc="upper left", bbox_to_anchor=(1.0, 1.0), title="agent")
    ax.set_ylim(bottom=0)  # the quantities are positive; a t-interval may reach below 0
    ax.grid(axis="y", alpha=0.3)
    if path is not None:
        save_png(fig, path)
    return fig


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of the points no other point dominates (lower or equal in both, lower in one), by x.

    NaN points are never on the front.
    """
    ok = [i for i, (x, y) in enumerate(points) if math.isfinite(x) and math.isfinite(y)]
    front = [i for i in ok if not any(
        points[j][0] <= points[i][0] and points[j][1] <= points[i][1] and points[j] != points[i] for j in ok)]
    return sorted(front, key=lambda i: points[i])


#: label offsets tried around a point, in points (typographic), nearest first
_OFFSETS: list[tuple[float, float]] = [
    (dx * r, dy * r) for r in (1, 2, 3, 4, 5, 6, 8, 10)
    for dx, dy in ((8, -3), (8, 6), (-8, -3), (8, -12), (-8, 6), (0, 10), (0, -16), (-8, -12))
]


def _overlaps(a: Any, b: Any) -> bool:
    """Whether two display-space bounding boxes overlap (touching edges do not count)."""
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def _label_points(fig: Figure, ax: Axes, pts: Sequence[tuple[float, float]], names: Sequence[str],
                  colours: Sequence[Any] | None = None) -> list[Any]:
    """Name the points without overlapping labels (agents on the same point share one label).

    Each label takes the nearest of :data:`_OFFSETS` whose box overlaps no placed label, no point
    marker and stays inside the axes (a thin line joins a label moved away to its point).

    Text sizes come from the figure's renderer (the figure is drawn once first, so the layout is
    final); labels are left out of the layout so they do not move it.  With ``colours`` (one per
    point) a label is written in its point's colour, darkened for contrast, so a label that had to
    move away is still matched to its point.

    :param fig: the figure ``ax`` is drawn in.
    :return: the annotation artists, one per labelled point.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text
    from matplotlib.transforms import Bbox

    groups: dict[tuple[float, float], list[str]] = {}
    colour_of: dict[tuple[float, float], Any] = {}
    for k, (p, name) in enumerate(zip(pts, names)):
        if math.isfinite(p[0]) and math.isfinite(p[1]):
            groups.setdefault(p, []).append(name)
            if colours is not None:
                colour_of.setdefault(p, tuple(0.6 * c for c in colours[k][:3]))
    if not groups:
        return []
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    canvas.draw()  # final layout and limits: display coordinates are now valid
    renderer = canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    to_px = fig.dpi / 72.0
    markers = []
    for p in groups:
        x, y = ax.transData.transform(p)
        markers.append(Bbox.from_extents(x - 9, y - 9, x + 9, y + 9))  # the marker and its Pareto circle
    placed: list[Any] = []
    artists = []
    for p in sorted(groups, key=lambda q: (q[1], q[0])):
        ann = ax.annotate(", ".join(groups[p]), p, textcoords="offset points", xytext=_OFFSETS[0], fontsize=7,
                          va="center", ha="left")
        ann.set_in_layout(False)
        best, best_cost = _OFFSETS[0], math.inf
        for dx, dy in _OFFSETS:
            ann.set_position((dx, dy))
            ann.set_horizontalalignment("left" if dx >= 0 else "right")
            ann.update_positions(renderer)  # the offset is applied at draw time otherwise
            box = Text.get_window_extent(ann, renderer)
            cost = sum(_overlaps(box, b) for b in placed) * 10 + sum(_overlaps(box, m) for m in markers) \
                + (0 if frame.contains(box.x0, box.y0) and frame.contains(box.x1, box.y1) else 5)
            if cost < best_cost:
                best, best_cost = (dx, dy), cost
            if cost == 0:
                break
        ann.remove()  # the probe; the label is drawn at the chosen offset, with a leader line if moved away
        far = math.hypot(*best) * to_px > 24
        ann = ax.annotate(", ".join(groups[p]), p, textcoords="offset points", xytext=best, fontsize=7,
                          va="center", ha="left" if best[0] >= 0 else "right", color=colour_of.get(p, "black"),
                          arrowprops={"arrowstyle": "-", "lw": 0.5, "color": "0.4", "shrinkA": 0, "shrinkB": 4}
                          if far else None)
        ann.set_in_layout(False)
        ann.update_positions(renderer)
        placed.append(Text.get_window_extent(ann, renderer))  # the text alone, not its leader line
        artists.append(ann)
    return artists


#: up to this many agents the trade-off labels its points by name; past it by number, the legend giving names
NAMED_LABELS_UP_TO = 8
#: a zoom panel is added when the agents nearest the median point fill less than this share of both axes
ZOOM_BELOW_SHARE = 0.15


def _core_box(pts: Sequence[tuple[float, float]]) -> tuple[float, float, float, float] | None:
    """(x0, x1, y0, y1) around the half of the finite points nearest their median (at least two), or None."""
    ok = [p for p in pts if math.isfinite(p[0]) and math.isfinite(p[1])]
    if len(set(ok)) < 2:
        return None
    xs, ys = sorted(p[0] for p in ok), sorted(p[1] for p in ok)
    mx, my = xs[len(xs) // 2], ys[len(ys) // 2]
    sx, sy = (xs[-1] - xs[0]) or 1.0, (ys[-1] - ys[0]) or 1.0
    near = sorted(ok, key=lambda p: math.hypot((p[0] - mx) / sx, (p[1] - my) / sy))[:max(2, (len(ok) + 1) // 2)]
    return (min(p[0] for p in near), max(p[0] for p in near), min(p[1] for p in near), max(p[1] for p in near))


def _zoom_limits(pts: Sequence[tuple[float, float]], full_x: float, full_y: float
                 ) -> tuple[tuple[float, float], tuple[float, float]] | None:
    """Axis limits of a zoom on the dense core of ``pts`` (:func:`_core_box`), or None if it is not dense.

    :param full_x: the full panel's upper x limit (its lower one is 0); ``full_y`` likewise.
    """
    box = _core_box(pts)
    if box is None or not full_x or not full_y:
        return None
    x0, x1, y0, y1 = box
    if (x1 - x0) >= ZOOM_BELOW_SHARE * full_x or (y1 - y0) >= ZOOM_BELOW_SHARE * full_y:
        return None
    # a margin of a quarter of the core's span (at least 1 % of the full range) on every side
    mx, my = max(0.25 * (x1 - x0), 0.01 * full_x), max(0.25 * (y1 - y0), 0.01 * full_y)
    return (x0 - mx, x1 + mx), (y0 - my, y1 + my)


def _draw_tradeoff(ax: Axes, summary: Sequence[dict[str, Any]], pts: Sequence[tuple[float, float]],
                   front: Sequence[int], colours: Sequence[Any], x: str, y: str) -> None:
    """The points with their CI bars, and the Pareto front, on ``ax``."""
    for i, row in enumerate(summary):
        ax.errorbar(pts[i][0], pts[i][1], xerr=_ci(row, x), yerr=_ci(row, y), fmt="o", color=colours[i],
                    capsize=3, markersize=7, label=row["agent"])
    if front:
        ax.plot([pts[i][0] for i in front], [pts[i][1] for i in front], "--", color="black", lw=1, zorder=0,
                label="Pareto front")
        ax.scatter([pts[i][0] for i in front], [pts[i][1] for i in front], s=180, facecolors="none",
                   edgecolors="black", zorder=3)
    ax.set_xlabel(axis_label(x))
    ax.set_ylabel(axis_label(y))
    ax.grid(alpha=0.3)


def plot_tradeoff(summary: Sequence[dict[str, Any]], path: str | Path | None = None,
                  x: str = "mean_jct_h", y: str | None = None, scenario: str | None = None) -> Figure:
    """Mean of ``x`` against mean of ``y`` per agent (95 % CI bars on both axes), the Pareto front marked.

    The front joins the agents no other agent beats on both (lower is better on both axes).  Points
    are named beside them without overlaps (:func:`_label_points`): by name up to
    :data:`NAMED_LABELS_UP_TO` agents, by number past it (the legend then reads ``number  name``).
    The full panel starts both axes at 0; when the agents crowd (half of them, those nearest the
    median point, fill less than :data:`ZOOM_BELOW_SHARE` of both axes) a second panel zooms on them
    (its area dotted in the full panel), and each point is labelled in one panel only: the zoom if it
    lies there.
    The legend sits beside a lone panel of a few agents, else below the panels in as many columns as
    the names allow; the figure grows with its rows, so any number of agents stays readable.

    :param x: a summary column with a ``_ci`` partner (:data:`METRIC_NAMES` names the known ones).
    :param y: likewise; None: the whole bill, ``total_cost_usd`` (electricity plus egress), or
        ``cost_usd`` for results without it (:func:`cost_column`).
    :param path: PNG to write, if given.
    :param scenario: named in the title.
    """
    y = cost_column(summary) if y is None else y
    pts = [(float(r[x]), float(r[y])) for r in summary]
    names = [str(r["agent"]) for r in summary]
    numbered = len(summary) > NAMED_LABELS_UP_TO
    entries = [f"{k + 1}  {name}" if numbered else name for k, name in enumerate(names)]
    # from 0, with a tenth more room beyond the largest bar end for the labels of the top and right points
    ends_x = [p[0] + _ci(r, x) for p, r in zip(pts, summary) if math.isfinite(p[0])]
    ends_y = [p[1] + _ci(r, y) for p, r in zip(pts, summary) if math.isfinite(p[1])]
    full_x, full_y = 1.12 * max(ends_x, default=0.0), 1.12 * max(ends_y, default=0.0)
    zoom = _zoom_limits(pts, full_x, full_y)
    below = numbered or zoom is not None
    width = BAR_SIZE[0] * (1.5 if zoom is not None else 1.0)
    longest = max((len(e) for e in entries), default=10)
    # legend columns that fit the width: about 17 characters of 7-point text per inch, plus the marker
    columns = max(1, min(4, int(17 * width / (longest + 8)))) if below else 2
    rows = math.ceil((len(summary) + 1) / columns) if below else 0
    fig = _figure((width, BAR_SIZE[1] + 0.17 * rows))
    axes = fig.subplots(1, 2) if zoom is not None else [fig.subplots()]
    colours = _colours(len(summary))
    front = pareto_front(pts)
    for ax in axes:
        _draw_tradeoff(ax, summary, pts, front, colours, x, y)
    axes[0].set_xlim(0, full_x or None)
    axes[0].set_ylim(0, full_y or None)
    where = f" on {scenario}" if scenario else ""
    title = f"{metric_name(x)} vs {metric_name(y)}{where}"
    if zoom is not None:
        axes[1].set_xlim(*zoom[0])
        axes[1].set_ylim(*zoom[1])
        from matplotlib.patches import Rectangle

        axes[0].add_patch(Rectangle((zoom[0][0], zoom[1][0]), zoom[0][1] - zoom[0][0], zoom[1][1] - zoom[1][0],
                                    fill=False, ls=":", lw=1, color="0.3", zorder=4))
        axes[0].set_title(f"all agents{where}, axes from 0", fontsize=9)  # the scenario in each panel's title
        axes[1].set_title("zoom on the crowded agents", fontsize=9)
        fig.suptitle(f"{title} (lower left is better; circled: Pareto front)", fontsize=10)
    else:
        axes[0].set_title(f"{title} (lower left is better; circled: Pareto front)", fontsize=10)
    handles, labels = axes[0].get_legend_handles_labels()
    labels = [entries[names.index(lb)] if lb in names and names.count(lb) == 1 else lb for lb in labels]
    if below:
        fig.legend(handles, labels, loc="outside lower center", ncols=columns, fontsize=7, title="agent",
                   title_fontsize=8)
    else:
        axes[0].legend(handles, labels, fontsize=7, ncols=2, loc="upper left", bbox_to_anchor=(1.0, 1.0),
                       title="agent")
    tags = [str(k + 1) for k in range(len(names))] if numbered else names
    if zoom is None:
        _label_points(fig, axes[0], pts, tags, colours)  # last: the layout is final
    else:  # each point labelled once: in the zoom if it lies there, else in the full panel
        inside = [zoom[0][0] <= p[0] <= zoom[0][1] and zoom[1][0] <= p[1] <= zoom[1][1] for p in pts]
        nan = (math.nan, math.nan)
        _label_points(fig, axes[0], [nan if k else p for p, k in zip(pts, inside)], tags, colours)
        _label_points(fig, axes[1], [p if k else nan for p, k in zip(pts, inside)], tags, colours)
    if path is not None:
        save_png(fig, path)
    return fig


def _lanes(intervals: Sequence[tuple[float, float]]) -> tuple[list[int], int]:
    """Greedy lane assignment so that overlapping intervals get different lanes; (lane per interval, lanes)."""
    order = sorted(range(len(intervals)), key=lambda i: intervals[i])
    ends: list[float] = []
    lane = [0] * len(intervals)
    for i in order:
        s, e = intervals[i]
        for k, end in enumerate(ends):
            if end <= s:
                lane[i], ends[k] = k, e
                break
        else:
            lane[i] = len(ends)
            ends.append(e)
    return lane, max(1, len(ends))


def _price_groups(timeline: dict[str, Any]) -> list[tuple[str, list[float]]]:
    """One (label, hourly prices) per price zone in use, labelled by zone and its regions."""
    regions, zones = timeline["regions"], timeline["zones"]
    prices = timeline["prices_usd_mwh"]
    out = []
    for z in dict.fromkeys(zones):
        members = [i for i, zz in enumerate(zones) if zz == z]
        names = ", ".join(regions[i] for i in members) if len(members) <= 3 else f"{len(members)} regions"
        out.append((f"{z} ({names})" if names != z else z, prices[members[0]]))
    return out


def _draw_prices(ax: Axes, timeline: dict[str, Any], colours: list[Any]) -> None:
    hours = list(range(len(timeline["prices_usd_mwh"][0]) + 1))
    for k, (label, series) in enumerate(_price_groups(timeline)):
        ax.stairs(series, hours, color=colours[k % len(colours)], label=label, lw=1.2)
    ax.set_ylabel("USD/MWh")


def plot_timeline(timeline: dict[str, Any], path: str | Path | None = None) -> Figure:
    """One episode's schedule: a row per region, a bar per job run, and the prices beneath.

    Bars are coloured by model and labelled by job id; the hourly prices of the regions' zones
    share the time axis below.  A job spread over several regions has a bar in each (labelled
    ``job id:GPUs there``); overlapping jobs in a region stack in lanes.

    :param timeline: the dict :func:`sfenv.app.benchmark.episode_timeline` returns.
    :param path: PNG to write, if given.
    """
    regions = timeline["regions"]
    n = len(regions)
    fig = _figure((WIDE, min(3.0 + 0.55 * n, 16.0)))
    ax, pax = fig.subplots(2, 1, sharex=True, height_ratios=[3, 1])
    models = list(dict.fromkeys(j["model"] for j in timeline["jobs"]))
    mcol = dict(zip(models, _colours(len(models))))
    per_region: list[list[tuple[float, float, str, str]]] = [[] for _ in range(n)]
    for job in timeline["jobs"]:
        for start, end, placement in job["segments"]:
            for r, gpus in placement:
                per_region[r].append((start / 3600, end / 3600, f"{job['job_id']}:{gpus}", job["model"]))
    for r, bars in enumerate(per_region):
        lane, lanes = _lanes([(b[0], b[1]) for b in bars])
        h = 0.8 / lanes
        for (s, e, text, model), k in zip(bars, lane):
            y = r - 0.4 + k * h
            ax.broken_barh([(s, e - s)], (y, h * 0.9), facecolors=mcol[model], edgecolors="black", linewidth=0.3)
            if lanes <= 4:
                ax.text(s + (e - s) / 2, y + h * 0.45, text, ha="center", va="center", fontsize=6, clip_on=True)
    ax.set_yticks(range(n), [f"{name} ({g})" for name, g in zip(regions, timeline["gpus"])], fontsize=7)
    ax.set_ylim(n - 0.5, -0.5)
    from matplotlib.patches import Patch

    ax.legend(handles=[Patch(color=mcol[m], label=m) for m in models], fontsize=7, title="model",
              loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title(f"schedule of {timeline['agent']} on {timeline['scenario']}, seed {timeline['seed']} "
                 f"({timeline['finished']}/{len(timeline['jobs'])} jobs finished; bars: job runs, labels: job id:GPUs)",
                 fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    _draw_prices(pax, timeline, _colours(len(set(timeline["zones"]))))
    pax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0), title="price zone")
    pax.set_xlabel("simulated time, h")
    pax.set_xlim(0, max(timeline["end_s"] / 3600, 1.0))
    pax.grid(alpha=0.3)
    if path is not None:
        save_png(fig, path)
    return fig


def plot_prices(timeline: dict[str, Any], path: str | Path | None = None) -> Figure:
    """Hourly electricity price of every region's zone over the timeline episode (one line per zone).

    :param timeline: the dict :func:`sfenv.app.benchmark.episode_timeline` returns.
    :param path: PNG to write, if given.
    """
    groups = _price_groups(timeline)
    fig = _figure((WIDE, 4.5))
    ax = fig.subplots()
    _draw_prices(ax, timeline, _colours(len(groups)))
    ax.set_xlabel("simulated time, h")
    ax.set_title(f"electricity prices on {timeline['scenario']}, seed {timeline['seed']} (hourly, per zone)",
                 fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), title="zone (regions)")
    ax.set_xlim(0, len(timeline["prices_usd_mwh"][0]))
    ax.grid(alpha=0.3)
    if path is not None:
        save_png(fig, path)
    return fig


def pareto_front_nd(points: Sequence[Sequence[float]]) -> list[int]:
    """Indices of the points no other point dominates in any number of objectives (lower is better).

    A point dominates another when it is lower or equal in every objective and lower in one; a point
    with a NaN is never on the front.  Sorted by the first objective.
    """
    ok = [i for i, p in enumerate(points) if all(math.isfinite(v) for v in p)]

    def dominates(a: Sequence[float], b: Sequence[float]) -> bool:
        return all(u <= v for u, v in zip(a, b)) and any(u < v for u, v in zip(a, b))

    front = [i for i in ok if not any(dominates(points[j], points[i]) for j in ok if j != i)]
    return sorted(front, key=lambda i: tuple(points[i]))


#: the default objectives of :func:`plot_tradeoff_pairs`: (summary column, axis label)
TRADEOFF_OBJECTIVES: tuple[tuple[str, str], ...] = (
    ("mean_jct_h", "mean JCT, h"),
    ("cost_usd", "electricity cost, USD"),
    ("carbon_kg", "carbon, kgCO2e"),
)


def plot_tradeoff_pairs(summary: Sequence[dict[str, Any]], path: str | Path | None = None,
                        objectives: Sequence[tuple[str, str]] = TRADEOFF_OBJECTIVES,
                        scenario: str | None = None) -> Figure:
    """The trade-off of several objectives (default JCT, cost and carbon): one panel per pair, the joint front circled.

    Each panel plots two objectives' means per agent with their 95 % CI bars; the agents on the Pareto
    front of *all* the objectives (:func:`pareto_front_nd`, lower is better) are circled in every panel.
    The carbon axis names the rows' ``carbon_signal`` (``lca`` or ``direct``) when they give one.

    :param objectives: ``(summary column, axis label)`` per objective, at least two.
    :param path: PNG to write, if given.
    :param scenario: named in the title.
    :raises ValueError: with fewer than two objectives.
    """
    if len(objectives) < 2:
        raise ValueError(f"objectives: expected at least two (column, label) pairs, got {len(objectives)}")
    pairs = [(a, b) for i, a in enumerate(objectives) for b in objectives[i + 1:]]
    fig = _figure((4.0 * len(pairs), 4.0))
    axes = fig.subplots(1, len(pairs), squeeze=False)[0]
    colours = _colours(len(summary))
    values = [[float(r.get(col, math.nan)) for col, _ in objectives] for r in summary]
    front = set(pareto_front_nd(values))
    signals = sorted({str(r.get("carbon_signal", "")) for r in summary} - {"", "-"})
    for ax, ((cx, lx), (cy, ly)) in zip(axes, pairs):
        for i, row in enumerate(summary):
            px, py = float(row.get(cx, math.nan)), float(row.get(cy, math.nan))
            ax.errorbar(px, py, xerr=_ci(row, cx), yerr=_ci(row, cy), fmt="o", color=colours[i], capsize=3,
                        markersize=6, label=row["agent"])
            if i in front:
                ax.scatter([px], [py], s=160, facecolors="none", edgecolors="black", zorder=3)
        for col, label, setter in ((cx, lx, ax.set_xlabel), (cy, ly, ax.set_ylabel)):
            setter(f"{label} ({'/'.join(signals)})" if col == "carbon_kg" and signals else label, fontsize=8)
        ax.grid(alpha=0.3)
    where = f" on {scenario}" if scenario else ""
    fig.suptitle(f"Trade-offs{where}: lower is better; circled: Pareto front of all {len(objectives)} objectives",
                 fontsize=10)
    axes[-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), title="agent")
    if path is not None:
        save_png(fig, path)
    return fig
