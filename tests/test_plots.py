"""The benchmark's figures: valid PNGs of the expected size, agents in the legends, the Pareto front."""

from __future__ import annotations

import itertools
import math
import subprocess
import sys

import numpy as np
import pytest

from sfenv.app import plots
from sfenv.app.benchmark import episode_timeline
from sfenv.app.evaluate import evaluate_agents, summarise
from sfenv.scenario import load_scenario

AGENTS = ["fifo", "cheapest", "random"]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def summary():
    return summarise(evaluate_agents(AGENTS, "spider-8", seeds=[0, 1], num_jobs=4, progress=False))


@pytest.fixture(scope="module")
def timeline():
    sc = load_scenario("spider-8").with_overrides(workload={"num_jobs": 6})
    return episode_timeline("fifo", sc, 0)


def _check_png(path, fig) -> None:
    import matplotlib.image

    assert path.read_bytes()[:8] == PNG_MAGIC
    w, h = (fig.get_size_inches() * plots.DPI).round().astype(int)
    img = matplotlib.image.imread(path)
    assert img.shape[:2] == (h, w)
    assert img.std() > 0.01  # something was drawn


def _legend_texts(ax) -> list[str]:
    leg = ax.get_legend()
    assert leg is not None
    return [t.get_text() for t in leg.get_texts()]


@pytest.mark.parametrize("column", ["mean_jct_h", "cost_usd"])
def test_metric_bars(summary, tmp_path, column):
    path = tmp_path / f"{column}.png"
    fig = plots.plot_metric(summary, column, "y", "title", path)
    _check_png(path, fig)
    assert tuple(fig.get_size_inches()) == plots.BAR_SIZE
    ax = fig.axes[0]
    assert _legend_texts(ax) == AGENTS
    heights = [p.get_height() for p in ax.patches]
    assert heights == pytest.approx([s[column] for s in summary])
    # error bars span mean ± CI half-width
    segs = [c for c in ax.collections if c.get_segments()]
    spans = sorted((s[1][1] - s[0][1]) / 2 for c in segs for s in c.get_segments())
    assert spans == pytest.approx(sorted(s[column + "_ci"] for s in summary))


def test_tradeoff_marks_the_pareto_front(tmp_path):
    pts = {"a": (1.0, 10.0), "b": (2.0, 5.0), "c": (3.0, 3.0), "d": (4.0, 4.0), "e": (2.5, 6.0)}  # d, e dominated
    summary = [{"agent": k, "seeds": 3, "mean_jct_h": x, "mean_jct_h_ci": 0.2, "cost_usd": y, "cost_usd_ci": 0.5}
               for k, (x, y) in pts.items()]
    path = tmp_path / "tradeoff.png"
    fig = plots.plot_tradeoff(summary, path)
    _check_png(path, fig)
    texts = _legend_texts(fig.axes[0])
    assert sorted(texts) == sorted([*pts, "Pareto front"])
    front_line = next(ln for ln in fig.axes[0].get_lines() if ln.get_label() == "Pareto front")
    got = [(float(x), float(y)) for x, y in zip(front_line.get_xdata(), front_line.get_ydata())]
    assert got == [pts["a"], pts["b"], pts["c"]]


def test_pareto_front_equals_brute_force():
    rng = np.random.default_rng(3)
    for n in (1, 2, 5, 12):
        for _ in range(20):
            pts = [tuple(p) for p in rng.integers(0, 6, size=(n, 2)).astype(float)]  # ties on purpose
            front = set(plots.pareto_front(pts))
            for i, p in enumerate(pts):
                dominated = any(q[0] <= p[0] and q[1] <= p[1] and q != p for q in pts)
                assert (i in front) == (not dominated)
    assert plots.pareto_front([(1.0, float("nan")), (2.0, 2.0)]) == [1]


def test_timeline_shows_every_run_in_every_region(timeline, tmp_path):
    path = tmp_path / "timeline.png"
    fig = plots.plot_timeline(timeline, path)
    _check_png(path, fig)
    ax, pax = fig.axes[:2]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == [f"{r} ({g})" for r, g in zip(timeline["regions"], timeline["gpus"])]
    bars = [c for c in ax.collections]  # one broken_barh per (run, region)
    runs = sum(len(pl) for j in timeline["jobs"] for _, _, pl in j["segments"])
    assert runs >= len(timeline["jobs"]) and len(bars) == runs
    assert set(_legend_texts(ax)) == {j["model"] for j in timeline["jobs"]}
    assert "fifo" in ax.get_title()
    # prices beneath: one stairs artist per price zone in use, on the shared time axis
    assert len(pax.patches) == len(set(timeline["zones"]))
    assert pax.get_shared_x_axes().joined(ax, pax)


def test_price_curves(timeline, tmp_path):
    path = tmp_path / "prices.png"
    fig = plots.plot_prices(timeline, path)
    _check_png(path, fig)
    texts = _legend_texts(fig.axes[0])
    assert len(texts) == len(set(timeline["zones"]))
    for z in set(timeline["zones"]):
        assert any(t.startswith(z) for t in texts)
    hourly = [p for p in fig.axes[0].patches]
    for k, series in enumerate(plots._price_groups(timeline)):
        assert hourly[k].get_data().values == pytest.approx(series[1])


def test_lanes_never_overlap():
    rng = np.random.default_rng(5)
    starts = rng.uniform(0, 10, 30)
    iv = [(s, s + d) for s, d in zip(starts, rng.uniform(0.1, 4, 30))]
    lane, lanes = plots._lanes(iv)
    for i, j in itertools.combinations(range(len(iv)), 2):
        if lane[i] == lane[j]:
            assert iv[i][1] <= iv[j][0] or iv[j][1] <= iv[i][0]
    assert lanes == max(lane) + 1


def test_import_sfenv_does_not_import_matplotlib():
    code = "import sys, sfenv, sfenv.app.plots, sfenv.app.benchmark, sfenv.app.cli; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# ---------------------------------------------------------------- cost axes show the whole bill
def _billed_summary() -> list[dict]:
    """Agents whose egress reorders them: electricity alone would put ``b`` on the front, the bill puts ``a``."""
    rows = {"a": (1.0, 10.0, 1.0), "b": (2.0, 5.0, 50.0), "c": (3.0, 3.0, 0.0)}  # JCT h, electricity, egress
    return [{"agent": k, "seeds": 3, "mean_jct_h": x, "mean_jct_h_ci": 0.1, "cost_usd": e, "cost_usd_ci": 0.5,
             "egress_usd": g, "egress_usd_ci": 0.5, "total_cost_usd": e + g, "total_cost_usd_ci": 0.7,
             "unfinished": 0.0} for k, (x, e, g) in rows.items()]


def _points(ax) -> dict[str, tuple[float, float]]:
    """Each agent's plotted point in a trade-off figure (its errorbar container's marker, by the agent)."""
    return {c.get_label(): (float(c.lines[0].get_xdata()[0]), float(c.lines[0].get_ydata()[0]))
            for c in ax.containers}


def test_tradeoff_plots_the_whole_bill_and_says_so(tmp_path):
    summary = _billed_summary()
    ax = plots.plot_tradeoff(summary, tmp_path / "t.png").axes[0]
    assert _points(ax) == {r["agent"]: (r["mean_jct_h"], r["total_cost_usd"]) for r in summary}
    assert "electricity + egress" in ax.get_ylabel() and "USD" in ax.get_ylabel()
    front = next(ln for ln in ax.get_lines() if ln.get_label() == "Pareto front")
    assert list(front.get_xdata()) == [1.0, 3.0]  # b (5 + 50 USD) is off the front once egress counts
    # results written before egress was billed have no total: electricity, labelled as such
    old = [{k: v for k, v in r.items() if "egress" not in k and "total" not in k} for r in summary]
    ax = plots.plot_tradeoff(old).axes[0]
    assert _points(ax) == {r["agent"]: (r["mean_jct_h"], r["cost_usd"]) for r in summary}
    assert ax.get_ylabel().startswith("electricity cost")
    # any column by its name: labels follow the table, an unlisted column is named by itself
    assert plots.axis_label("egress_usd") == "egress cost, USD per episode"
    assert plots.plot_tradeoff(summary, y="egress_usd").axes[0].get_ylabel() == "egress cost, USD per episode"
    assert plots.axis_label("carbon_kg") == "carbon_kg"


def test_benchmark_cost_bars_are_the_whole_bill(tmp_path, monkeypatch):
    from sfenv.app import benchmark

    figures = {}

    def keep(fig, path):
        figures[path.name] = fig
        return path

    monkeypatch.setattr(plots, "save_png", keep)
    summary = _billed_summary()
    benchmark.write_plots({"meta": {"scenario": "s"}, "summary": summary, "timeline": None}, tmp_path)
    ax = figures[benchmark.FILES["cost"]].axes[0]
    assert [p.get_height() for p in ax.patches] == [r["total_cost_usd"] for r in summary]
    assert "electricity + egress" in ax.get_ylabel() and "electricity + egress" in ax.get_title()


def test_an_old_benchmark_file_gets_the_new_cost_columns(tmp_path):
    """A benchmark.json whose summary predates egress is summarised again: its tables print every column."""
    import json

    from sfenv.app.benchmark import load_results
    from sfenv.app.evaluate import format_table

    rows = evaluate_agents(["fifo"], "spider-8", seeds=[0], num_jobs=3, progress=False)
    old_rows = [{k: v for k, v in r.items() if k not in ("egress_usd", "total_cost_usd")} for r in rows]
    old_summary = [{k: v for k, v in s.items() if "egress" not in k and "total" not in k} for s in summarise(old_rows)]
    path = tmp_path / "benchmark.json"
    path.write_text(json.dumps({"meta": {"scenario": "spider-8"}, "summary": old_summary, "episodes": old_rows}))
    res = load_results(path)
    assert math.isnan(res["summary"][0]["egress_usd"]) and res["summary"][0]["cost_usd"] == old_summary[0]["cost_usd"]
    assert "total_cost_usd" in format_table(res["summary"]).splitlines()[0]
    assert plots.cost_column(res["summary"]) == "cost_usd"
    # today's rows carry the whole bill
    assert plots.cost_column(summarise(rows)) == "total_cost_usd"


def test_plots_refuse_too_many_agents_and_leave_out_a_timeline_too_large_to_draw(timeline, tmp_path, capsys):
    """A results file handed in bounds the figures' work: more than MAX_PLOT_AGENTS agents is one line (exit 2 in
    ``sfenv plot``); a timeline beyond its bounds is not drawn, with a line saying so, and the bars still are."""
    import json

    from sfenv.app.benchmark import MAX_PLOT_AGENTS, MAX_TIMELINE_JOBS, write_plots
    from sfenv.app.cli import main

    rows = evaluate_agents(["fifo"], "spider-8", seeds=[0], num_jobs=3, progress=False)
    many = [dict(rows[0], agent=f"a{i}") for i in range(MAX_PLOT_AGENTS + 1)]
    (tmp_path / "many.json").write_text(json.dumps(many))
    assert main(["plot", str(tmp_path / "many.json"), "--out-dir", str(tmp_path / "m")]) == 2
    assert capsys.readouterr().err == (f"sfenv: plot: the results hold {MAX_PLOT_AGENTS + 1} agents; the figures draw "
                                       f"at most {MAX_PLOT_AGENTS} (plot a selection of them)\n")
    big = dict(timeline, jobs=[timeline["jobs"][0]] * (MAX_TIMELINE_JOBS + 1))
    written = write_plots({"meta": {"scenario": "spider-8"}, "summary": summarise(rows), "episodes": rows,
                           "timeline": big}, tmp_path)
    assert sorted(p.name for p in written) == sorted(["jct.png", "cost.png", "tradeoff.png"])
    assert "5,001 job runs, more than the 5,000 drawn" in capsys.readouterr().err
    assert len(write_plots({"meta": {}, "summary": summarise(rows), "episodes": rows, "timeline": timeline},
                           tmp_path / "ok")) == 5


@pytest.mark.parametrize(("change", "words"), [
    ({"timeline": "abc"}, "timeline: expected an object, got str"),
    ({"meta": "x"}, "meta is str, not an object"),
    ({"episodes": []}, "holds no episodes; there is nothing to plot"),
    ({"timeline.jobs": [{"x": 1}]}, "timeline.jobs[0]: expected an object with job_id"),
    ({"timeline.jobs": "abc"}, "timeline.jobs is 'abc'"),
    ({"timeline.regions": [1, 2]}, "timeline.regions is '[1, 2]'"),
    ({"timeline.prices_usd_mwh": [["a"]]}, "timeline.prices_usd_mwh is"),
    ({"timeline.gpus": [8]}, "timeline.gpus is '[8]'"),
    ({"timeline.end_s": float("nan")}, "timeline.end_s is 'nan'"),
    ({"timeline.jobs": [{"job_id": 0, "model": "m", "segments": [[0.0, 1.0, [[99, 8]]]]}]},
     "timeline.jobs[0].segments[0]: expected [start s, end s, [[region index, GPUs], ...]]"),
])
def test_plot_refuses_a_malformed_benchmark_file_in_one_line_before_any_png(change, words, timeline, tmp_path,
                                                                             capsys):
    """A benchmark.json handed in is data: a timeline, meta or episodes ``sfenv plot`` cannot draw is one line
    (exit 2) naming the file and the field, and no PNG is written (they were a traceback, or empty figures)."""
    import json

    from sfenv.app.cli import main

    rows = evaluate_agents(["fifo"], "spider-8", seeds=[0], num_jobs=3, progress=False)
    doc = {"meta": {"scenario": "spider-8"}, "summary": [], "episodes": rows,
           "timeline": json.loads(json.dumps(timeline))}
    for key, value in change.items():
        if key.startswith("timeline."):
            doc["timeline"][key.partition(".")[2]] = value
        else:
            doc[key] = value
    (tmp_path / "benchmark.json").write_text(json.dumps(doc))
    assert main(["plot", str(tmp_path / "benchmark.json"), "--out-dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"sfenv: {tmp_path / 'benchmark.json'}: ") and err.count("\n") == 1 and words in err, err
    assert not list(tmp_path.glob("**/*.png"))


def test_a_resumed_benchmark_replays_a_malformed_saved_timeline(tmp_path):
    """A benchmark folder continued with an edited timeline gets its timeline replayed, not drawn as it is."""
    import json

    from sfenv.app.benchmark import run_benchmark

    kw = {"agents": "fifo", "scenario": "spider-8", "seeds": 1, "num_jobs": 3, "out_dir": tmp_path, "progress": False,
          "log": lambda line: None}
    first = run_benchmark(**kw)
    doc = json.loads((tmp_path / "benchmark.json").read_text())
    doc["timeline"]["jobs"] = "abc"
    (tmp_path / "benchmark.json").write_text(json.dumps(doc))
    again = run_benchmark(**kw)
    assert again["ran"] == 0 and again["timeline"] == first["timeline"]
