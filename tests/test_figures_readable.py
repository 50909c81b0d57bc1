"""Figures a reader can use once copied out: the scenario in every title, trade-off labels that do
not overlap, a legend for the map's colours, and a price forecast readable at 16 regions."""

from __future__ import annotations

import itertools

import gymnasium as gym
import numpy as np
import pytest

import sfenv  # noqa: F401  (registers the ids)
from sfenv.app import benchmark, plots

# eleven agents, six of them within a few percent of each other (as on spider-8 today)
CLUSTER = {"fifo": (2.64, 180), "spiderflow": (2.01, 171), "bace-pipe": (2.03, 170), "spantrain": (2.02, 172),
           "ilp": (2.05, 169.5), "genetic": (2.0, 170.5), "spinsearch": (2.04, 171.5), "cheapest": (3.5, 150),
           "fastest": (2.3, 175), "random": (2.9, 185), "tpa": (2.02, 170)}


def _summary(points: dict[str, tuple[float, float]]) -> list[dict]:
    return [{"agent": k, "seeds": 10, "mean_jct_h": x, "mean_jct_h_ci": 0.1, "cost_usd": y, "cost_usd_ci": 3.0,
             "unfinished": 0.0} for k, (x, y) in points.items()]


def _label_boxes(fig) -> list[list[tuple[str, object]]]:
    """Per panel: (text, display box) of each point label (the text, not a leader line)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.text import Text

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    return [[(t.get_text(), Text.get_window_extent(t, renderer)) for t in ax.texts] for ax in fig.axes]


def _named_agents(fig, panels) -> list[str]:
    """The agents the labels name: a label is names, or numbers the legend's ``number  name`` entries resolve."""
    legend = fig.legends[0] if fig.legends else fig.axes[0].get_legend()
    by_number = {}
    for text in (t.get_text() for t in legend.get_texts()):
        number, _, name = text.partition("  ")
        if number.isdigit():
            by_number[number] = name
    return [by_number.get(tag, tag) for boxes in panels for text, _ in boxes for tag in text.split(", ")]


def _spread(n: int, crowded: int) -> dict[str, tuple[float, float]]:
    """``n`` agents with long and short names, ``crowded`` of them within 3 % of each other, the rest spread."""
    names = [f"agent-{i}" if i % 3 else f"examples/my_scheduler_{i}.py:MyScheduler:patience={i}" for i in range(n)]
    rng = np.random.default_rng(n)
    return {name: ((2.0 + 0.05 * rng.random(), 170 + 4 * rng.random()) if i < crowded
                   else (1.0 + 3 * rng.random(), 90 + 110 * rng.random())) for i, name in enumerate(names)}


@pytest.mark.parametrize("points", [CLUSTER, dict(itertools.islice(CLUSTER.items(), 7)),
                                    {f"agent-{i}": (2.0 + 0.001 * i, 170.0 + 0.01 * i) for i in range(12)},
                                    _spread(12, 6), _spread(24, 12), _spread(24, 24)],
                         ids=["eleven", "seven", "twelve-on-one-spot", "twelve", "twenty-four", "twenty-four-crowded"])
def test_tradeoff_labels_do_not_overlap(points, tmp_path):
    fig = plots.plot_tradeoff(_summary(points), tmp_path / "tradeoff.png", scenario="spider-8")
    panels = _label_boxes(fig)
    assert sorted(_named_agents(fig, panels)) == sorted(points)  # every agent named once, in one panel
    for ax, boxes in zip(fig.axes, panels):
        for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2):
            assert not plots._overlaps(box_a, box_b), (a, b)
        frame = ax.get_window_extent()
        inside = sum(frame.contains(b.x0, b.y0) and frame.contains(b.x1, b.y1) for _, b in boxes)
        assert inside == len(boxes)
    legend = fig.legends[0] if fig.legends else fig.axes[0].get_legend()
    legend_box = legend.get_window_extent()
    assert fig.bbox.contains(legend_box.x0, legend_box.y0) and fig.bbox.contains(legend_box.x1, legend_box.y1)
    for ax in fig.axes:  # the legend covers no panel
        assert not plots._overlaps(legend_box, ax.get_window_extent())


def test_overlap_check_itself():
    from matplotlib.transforms import Bbox

    a = Bbox.from_extents(0, 0, 10, 10)
    assert plots._overlaps(a, Bbox.from_extents(5, 5, 15, 15))
    assert not plots._overlaps(a, Bbox.from_extents(10, 0, 20, 10))  # touching
    assert not plots._overlaps(a, Bbox.from_extents(0, 11, 10, 20))


def test_every_results_figure_names_the_scenario(tmp_path, monkeypatch):
    figures = {}

    def keep(fig, path):
        figures[path.name] = fig
        return path

    monkeypatch.setattr(plots, "save_png", keep)
    results = {"meta": {"scenario": "spider-8-contended"}, "summary": _summary(CLUSTER), "timeline": None}
    benchmark.write_plots(results, tmp_path)
    assert set(figures) == {benchmark.FILES[k] for k in ("jct", "cost", "tradeoff")}
    for name, fig in figures.items():
        assert "spider-8-contended" in fig.axes[0].get_title(), name


def _frame_figure(env_id: str):
    env = gym.make(env_id, render_mode="rgb_array", num_jobs=10)
    _, info = env.reset(seed=1)
    for _ in range(8):
        _, _, done, truncated, info = env.step(int(np.flatnonzero(info["action_mask"])[0]))
        if done or truncated:
            break
    frame = env.render()
    return env, frame, env.unwrapped._renderer.fig


@pytest.mark.parametrize("env_id", ["sfenv/GeoSched-v0", "sfenv/Spider16-v0"])
def test_render_has_a_colour_legend_and_a_readable_forecast(env_id):
    env, frame, fig = _frame_figure(env_id)
    assert frame.shape == (480, 960, 3)
    topo = env.unwrapped.scenario.topology
    map_ax = fig.axes[0]
    legend = [t.get_text() for t in map_ax.get_legend().get_texts()]
    assert {"region idle", "all GPUs busy", "region down", "WAN link, busy"} <= set(legend)
    price_ax = next(ax for ax in fig.axes if "price forecast" in ax.get_title())
    (image,) = price_ax.get_images()
    forecast_hours = env.unwrapped.H
    assert image.get_array().shape == (topo.num_regions, forecast_hours)  # every region, not the first 10
    assert [t.get_text() for t in price_ax.get_yticklabels()] == [r.name for r in topo.regions]
    assert image.colorbar is not None and image.colorbar.ax in fig.axes  # a colour bar gives the scale
    env.close()
