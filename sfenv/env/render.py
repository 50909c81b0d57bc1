"""Rendering of a simulator state: a text table and a matplotlib map (imported lazily).

:class:`sfenv.env.GeoSchedEnv` renders through these functions; they read only the simulator
(and its topology), so this module does not know the environment.
"""

from __future__ import annotations

from itertools import pairwise
from typing import TYPE_CHECKING, Any

import networkx as nx
import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from sfenv.sim import Simulator
    from sfenv.world.topology import Topology

__all__ = ["MapRenderer", "ansi"]


def ansi(sim: Simulator, candidates: int) -> str:
    """A text table: time, queue, and per region free GPUs, price and running jobs.

    :param sim: the simulator to show.
    :param candidates: the number of candidate plans the agent sees now.
    """
    view = sim.view()
    prices = view.prices_now()
    jobs_in: dict[int, list[int]] = {}
    for jid in sorted(sim.running):
        plan = sim.jobs[jid].plan
        assert plan is not None  # a running job has its plan
        for r in plan.regions:
            jobs_in.setdefault(r, []).append(jid)
    lines = [
        f"t = {sim.time / 3600:8.2f} h   waiting {len(sim.waiting)}   running {len(sim.running)}   "
        f"done {sim.finished_count}/{len(sim.jobs)}   candidates {candidates}",
        f"{'region':<14}{'gpu':<11}{'free/total':>11}{'USD/MWh':>9}  jobs",
    ]
    for i, reg in enumerate(sim.topo.regions):
        down = " DOWN" if sim.down[i] else ""
        lines.append(
            f"{reg.name:<14}{reg.gpu.name:<11}{int(view.free_gpus[i]):>5}/{reg.num_gpus:<5}{prices[i]:>9.1f}  "
            f"{','.join(map(str, jobs_in.get(i, [])))}{down}"
        )
    return "\n".join(lines) + "\n"


class MapRenderer:
    """Draws the WAN map with running pipelines, a price panel and a utilisation panel.

    :param topo: the topology to lay out (once; region positions stay fixed across frames).
    :param width_px: image width in pixels.
    :param height_px: image height in pixels.
    """

    def __init__(self, topo: Topology, width_px: int = 960, height_px: int = 480):
        import matplotlib

        matplotlib.use("Agg", force=False)
        from matplotlib.figure import Figure

        self.fig = Figure(figsize=(width_px / 80, height_px / 80), dpi=80)
        self.pos = nx.spring_layout(topo.graph, seed=0, weight=None)
        self.cmap = matplotlib.colormaps["tab10"]

    def draw(self, sim: Simulator, forecast_hours: int) -> np.ndarray:
        """Render the current state to an (H, W, 3) uint8 array.

        :param sim: the simulator to show.
        :param forecast_hours: hours of price forecast in the price panel.
        """
        from matplotlib.backends.backend_agg import FigureCanvasAgg

        topo = sim.topo
        view = sim.view()
        fig = self.fig
        fig.clear()
        ax = fig.add_axes((0.01, 0.02, 0.58, 0.9))
        ax.set_axis_off()
        title = f"t = {sim.time / 3600:.1f} h   waiting {len(sim.waiting)}   running {len(sim.running)}"
        ax.set_title(title, fontsize=9)
        flows = view.link_flows
        cap = topo.link_bw_bps
        for k, ln in enumerate(topo.links):
            (x0, y0), (x1, y1) = self.pos[ln.a], self.pos[ln.b]
            load = min(1.0, flows[k] / 4.0)
            ax.plot([x0, x1], [y0, y1], color=(0.6 + 0.4 * load, 0.6 - 0.4 * load, 0.6 - 0.4 * load),
                    lw=0.5 + 1.5 * np.log10(1 + cap[k] / 1e9), zorder=1)
        util = 1.0 - view.free_gpus / np.maximum(1, topo.gpu_counts)
        for i, reg in enumerate(topo.regions):
            x, y = self.pos[i]
            colour = "black" if sim.down[i] else (0.2 + 0.8 * util[i], 0.5, 1.0 - 0.8 * util[i])
            ax.scatter([x], [y], s=40 + 2 * reg.num_gpus ** 0.9, color=colour, zorder=3, edgecolors="white")
            if topo.num_regions <= 16:
                ax.annotate(f"{reg.name}\n{reg.gpu.name}", (x, y), fontsize=7, ha="center", va="bottom",
                            xytext=(0, 7), textcoords="offset points", zorder=4)
        for n, jid in enumerate(sorted(sim.running)):
            plan = sim.jobs[jid].plan
            assert plan is not None
            chain = [s.regions[0] for s in plan.stages]
            pts = [chain[0]] + [c for a, c in pairwise(chain) if c != a]
            if len(pts) > 1:
                path: list[int] = [pts[0]]
                for a, b in pairwise(pts):
                    path.extend(topo.path(a, b)[1:])
                xs = [self.pos[r][0] for r in path]
                ys = [self.pos[r][1] for r in path]
                off = 0.012 * (n % 5 - 2)
                ax.plot(np.array(xs) + off, np.array(ys) + off, color=self.cmap(n % 10), lw=2.5, alpha=0.8, zorder=2)
        self._map_legend(ax)
        # price panel: a heatmap (regions x hours ahead) with a colour bar, readable at any region count
        axp = fig.add_axes((0.66, 0.56, 0.27, 0.36))
        fc = view.price_forecast(forecast_hours)
        image = axp.imshow(fc, aspect="auto", cmap="viridis", interpolation="nearest",
                           extent=(-0.5, forecast_hours - 0.5, topo.num_regions - 0.5, -0.5))
        axp.set_title("price forecast per region (USD/MWh)", fontsize=8)
        axp.tick_params(labelsize=6)
        axp.set_xlabel("hours ahead", fontsize=7)
        if topo.num_regions <= 16:
            axp.set_yticks(range(topo.num_regions), [r.name for r in topo.regions], fontsize=5)
        else:
            axp.set_ylabel("region index", fontsize=7)
        colour_bar = fig.colorbar(image, cax=fig.add_axes((0.94, 0.56, 0.012, 0.36)))
        colour_bar.ax.tick_params(labelsize=6)
        # utilisation panel
        axu = fig.add_axes((0.66, 0.08, 0.32, 0.36))
        axu.bar(range(topo.num_regions), util, color="tab:blue")
        axu.set_ylim(0, 1)
        axu.set_title("GPU utilisation per region", fontsize=8)
        if topo.num_regions <= 16:
            axu.set_xticks(range(topo.num_regions), [r.name for r in topo.regions], rotation=45, ha="right")
        axu.tick_params(labelsize=6)
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        return np.asarray(canvas.buffer_rgba())[:, :, :3].copy()

    @staticmethod
    def _map_legend(ax: Any) -> None:
        """Add the map's legend: what node and link colours and widths mean.

        Node colour: GPUs in use (blue idle to red-orange full, black down); link colour: traffic
        (grey to red), width: bandwidth; coloured paths: running jobs' pipelines.
        """
        from matplotlib.lines import Line2D

        def node(util: float) -> tuple[float, float, float]:
            return (0.2 + 0.8 * util, 0.5, 1.0 - 0.8 * util)  # the colour draw() gives a region

        handles = [Line2D([], [], marker="o", ls="", color=node(u), markeredgecolor="white", markersize=6,
                          label=text) for u, text in ((0.0, "region idle"), (0.5, "half its GPUs busy"),
                                                      (1.0, "all GPUs busy"))]
        handles += [Line2D([], [], marker="o", ls="", color="black", markersize=6, label="region down"),
                    Line2D([], [], color=(0.6, 0.6, 0.6), lw=1.5, label="WAN link, idle (width: bandwidth)"),
                    Line2D([], [], color=(1.0, 0.2, 0.2), lw=1.5, label="WAN link, busy"),
                    Line2D([], [], color="tab:blue", lw=2.5, alpha=0.8, label="a running job's pipeline")]
        ax.legend(handles=handles, fontsize=6, loc="lower left", framealpha=0.8, borderpad=0.4, labelspacing=0.3)

    def close(self) -> None:
        """Free the figure."""
        self.fig.clear()
