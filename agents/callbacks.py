"""Training-time evaluation for ``sfenv train``: held-out seeds, TensorBoard scalars, the best model, a curve.

:class:`EvalJCTCallback` (an SB3 callback) plays the current policy on fixed held-out seeds every
``eval_every`` environment steps, deterministically and with action masks for masked algorithms,
through the same VecNormalize statistics as training.  It logs to TensorBoard (``eval/mean_jct_h``:
the censored mean JCT, unfinished jobs counted; ``eval/cost_usd``; ``eval/unfinished``;
``eval/mean_return``: the raw, unnormalised episode return, i.e. the training objective), appends
every point to ``eval.json`` and keeps the policy with the highest mean return as
``best_model.zip`` (with its VecNormalize statistics and sidecar).  :func:`heuristic_levels`
scores reference agents on the same seeds, and :func:`plot_learning_curve` draws the curve with
their levels as horizontal lines.

SB3 is only imported when the callback is built (this module is imported by
:mod:`sfenv.agents.learned` lazily, inside ``train``).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np
from sfenv.agents.deferral import Deferral, check_play_defer, deferred_action, heuristic_actions

from sfenv.runs.progress import progress_bar
from sfenv.runs.results import atomic_write_text
from sfenv.scenario import Scenario
from sfenv.sim import make_simulator

__all__ = ["StepsProgress", "eval_postfix", "heuristic_levels", "make_eval_callback", "make_progress_callback",
           "play_episode", "played_as", "plot_learning_curve", "training_summary"]


def play_episode(
    predict: Callable[..., Any], env: Any, seed: int, masked: bool, normalize: Callable[[Any], Any] | None = None,
    defer: Deferral | None = None, policy: Any = None,
) -> tuple[dict[str, Any], float]:
    """Play one seeded episode with ``predict(obs, deterministic=True[, action_masks=...])``.

    :param predict: an SB3 ``predict``-like function.
    :param env: a GeoSchedEnv, possibly wrapped (e.g. ``FlattenObservation``).
    :param seed: the episode seed (the episode of ``make_simulator(scenario, seed)``).
    :param masked: pass the env's action masks to ``predict``.
    :param normalize: applied to every observation before ``predict`` (VecNormalize's ``normalize_obs``).
    :param defer: play the recipe's deferral (:func:`sfenv.agents.deferral.deferred_action`) with
        ``policy``, the SB3 policy network, instead of ``predict``.
    :return: the report of the finished episode (a dict, with ``stopped_early``) and the raw
        undiscounted return.  A policy whose episode does not end within ``max(max_episode_steps,
        100 x jobs)`` steps is stopped there and the episode is played on to its end with waits
        (:meth:`sfenv.env.GeoSchedEnv.wait_to_end`, as the evaluator's
        :func:`~sfenv.app.evaluate.run_policy_episode` does), so every job counts (those never
        started censored at the end) and the return includes the rewards of those waits.
    """
    base = env.unwrapped
    obs, _ = env.reset(seed=seed)
    limit = max(base.scenario.cfg.env.max_episode_steps, 100 * base.view.num_jobs)
    ret, steps, done = 0.0, 0, False
    while not done and steps < limit:
        x = normalize(obs) if normalize is not None else obs
        if defer is not None:
            action, _ = deferred_action(policy, x, base.action_masks() if masked else None,
                                        heuristic_actions(base, defer), defer.margin)
        elif masked:
            action, _ = predict(x, deterministic=True, action_masks=base.action_masks())
        else:
            action, _ = predict(x, deterministic=True)
        obs, reward, terminated, truncated, _ = env.step(int(np.asarray(action).item()))
        ret += float(reward)
        done = terminated or truncated
        steps += 1
    for reward in base.wait_to_end():  # stopped at the step limit: the episode ends as it would with waits
        ret += float(reward)
    return {**base.sim.report().to_dict(), "stopped_early": not done}, ret


def make_eval_callback(
    env_fn: Callable[[], Any],
    seeds: Sequence[int],
    eval_every: int,
    run_dir: Path,
    masked: bool,
    save_best: Callable[[Any, str], object],
    history: list[dict] | None = None,
    evaluate_first: bool = False,
    log: Callable[[str], None] | None = None,
    defer: Deferral | None = None,
) -> Any:
    """Build an :class:`EvalJCTCallback` (SB3's ``BaseCallback`` is imported here, lazily).

    :param env_fn: makes the evaluation env (the training env's settings, no VecNormalize).
    :param seeds: held-out episode seeds, played every evaluation.
    :param eval_every: environment steps between evaluations (> 0).
    :param run_dir: the run folder (``eval.json`` goes there).
    :param masked: the algorithm takes action masks.
    :param save_best: ``save_best(model, prefix)`` saves the model, its statistics and sidecar as ``<prefix>*``.
    :param history: evaluation points of an earlier part of the run (``--resume``), kept and extended.
    :param evaluate_first: also evaluate when training starts (a warm-started policy is then a
        candidate for the best model).
    :param log: called with one line per evaluation (None: silent).
    :param defer: the recipe's ``play_defer``: the evaluations play it (:func:`play_episode`).
    """
    from stable_baselines3.common.callbacks import BaseCallback

    class EvalJCTCallback(BaseCallback):
        """Evaluate on held-out seeds every ``eval_every`` steps; log JCT, cost, unfinished; keep the best."""

        def __init__(self) -> None:
            super().__init__(verbose=0)
            self.env = env_fn()
            self.seeds = [int(s) for s in seeds]
            self.eval_every = int(eval_every)
            self.history: list[dict] = list(history or [])
            self.best = max((h["mean_return"] for h in self.history), default=-math.inf)
            self._next = 0

        def _on_training_start(self) -> None:
            done = self.history[-1]["timesteps"] if self.history else 0
            self._next = max(self.num_timesteps, done) + self.eval_every
            if evaluate_first and not self.history:
                self.evaluate()

        def _on_step(self) -> bool:
            if self.num_timesteps >= self._next:
                self._next += self.eval_every * max(1, (self.num_timesteps - self._next) // self.eval_every + 1)
                self.evaluate()
            return True

        def _on_training_end(self) -> None:
            if not self.history or self.history[-1]["timesteps"] < self.num_timesteps:
                self.evaluate()

        def evaluate(self) -> dict:
            """Play every seed now; log, record, and save the model if it is the best so far."""
            vn = self.model.get_vec_normalize_env()
            normalize = vn.normalize_obs if vn is not None and vn.norm_obs else None
            reports, returns = [], []
            for s in self.seeds:
                rep, ret = play_episode(self.model.predict, self.env, s, masked, normalize, defer, self.model.policy)
                reports.append(rep)
                returns.append(ret)
            point = {
                "timesteps": int(self.num_timesteps),
                "mean_jct_h": float(np.mean([r["mean_jct_s"] for r in reports]) / 3600.0),
                "cost_usd": float(np.mean([r["cost_usd"] for r in reports])),
                "unfinished": float(np.mean([r["unfinished"] for r in reports])),
                "mean_return": float(np.mean(returns)),
                "stopped_early": int(sum(r["stopped_early"] for r in reports)),  # played on with waits
            }
            for key in ("mean_jct_h", "cost_usd", "unfinished", "mean_return"):
                self.logger.record(f"eval/{key}", point[key])
            point["best"] = point["mean_return"] > self.best
            if point["best"]:
                self.best = point["mean_return"]
                save_best(self.model, "best_model")
            self.logger.record("eval/best_mean_return", self.best)
            self.logger.dump(self.num_timesteps)
            self.history.append(point)
            _atomic_json(run_dir / "eval.json", self.history)
            if log is not None:
                best_note = " (best so far: saved as best_model.zip)" if point["best"] else ""
                log(f"eval at step {point['timesteps']:,}: mean JCT {point['mean_jct_h']:.2f} h, cost "
                    f"{point['cost_usd']:.0f} USD, unfinished {point['unfinished']:.1f}, return "
                    f"{point['mean_return']:.1f}{best_note}")
            return point

    return EvalJCTCallback()


def eval_postfix(point: dict[str, Any]) -> str:
    """The training bar's note of an evaluation point (:class:`EvalJCTCallback`'s ``history`` entry)."""
    best = ", best" if point.get("best") else ""
    return (f"eval @{point['timesteps']:,}: JCT {point['mean_jct_h']:.2f} h, unfinished {point['unfinished']:.1f}, "
            f"return {point['mean_return']:.1f}{best}")


class StepsProgress:
    """A bar over a training run's environment steps: count, rate, elapsed, ETA and the last evaluation.

    Drawn on stderr only when ``enabled`` and stderr (``file``) is a terminal (:mod:`sfenv.runs.progress`).

    :param total: steps of this run (after a resume: the steps still to go).
    :param start: the step count the run starts from (a resumed run's saved count).
    :param history: the evaluation points, read at each update (:class:`EvalJCTCallback`'s ``history``,
        which grows as it evaluates); the last one is shown.
    :param enabled: False draws nothing (``--quiet``).
    :param file: where the bar goes (default: stderr).
    """

    def __init__(self, total: int, start: int = 0, history: list[dict] | None = None, enabled: bool = True,
                 file: IO[str] | None = None) -> None:
        self.start = start
        self.history = history if history is not None else []
        self._shown = len(self.history)
        self.bar = progress_bar(total, "train", "step", enabled, file)
        if self.history:
            self.bar.set_postfix_str(eval_postfix(self.history[-1]), refresh=False)

    def update(self, num_timesteps: int) -> None:
        """Move the bar to ``num_timesteps`` (the model's count) and show a new evaluation if there is one."""
        if len(self.history) != self._shown:
            self._shown = len(self.history)
            self.bar.set_postfix_str(eval_postfix(self.history[-1]), refresh=False)
        done = min(num_timesteps - self.start, self.bar.total or 0)
        if done > self.bar.n:
            self.bar.update(done - self.bar.n)

    def close(self) -> None:
        """Close the bar (it stays on the terminal with its last figures)."""
        self.bar.close()


def make_progress_callback(total: int, history: list[dict], enabled: bool = True) -> Any:
    """An SB3 callback drawing :class:`StepsProgress` over ``model.learn`` (SB3 imported here, lazily).

    :param total: steps ``learn`` runs.
    :param history: the evaluation callback's ``history`` (put this callback after it, so a new point
        shows at the step it is made).
    :param enabled: False draws nothing.
    """
    from stable_baselines3.common.callbacks import BaseCallback

    class TrainingProgress(BaseCallback):
        """:class:`StepsProgress` from training start to end."""

        def __init__(self) -> None:
            super().__init__(verbose=0)
            self.progress: StepsProgress | None = None

        def _on_training_start(self) -> None:
            self.progress = StepsProgress(total, self.num_timesteps, history, enabled)

        def _on_step(self) -> bool:
            if self.progress is not None:
                self.progress.update(self.num_timesteps)
            return True

        def _on_training_end(self) -> None:
            if self.progress is not None:
                self.progress.update(self.num_timesteps)  # the evaluation made at the end, if any
                self.progress.close()

    return TrainingProgress()


def _atomic_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(data, indent=1))


def heuristic_levels(agents: Sequence[str], scenario: Scenario, seeds: Sequence[int]) -> dict[str, dict[str, float]]:
    """Mean censored JCT (h), cost and unfinished jobs of reference agents on ``seeds`` (the eval seeds).

    :param agents: agent names; names the registry does not know are skipped.
    :param scenario: the evaluation scenario (workload size already applied).
    """
    from sfenv.agents.registry import make_agent

    from sfenv.errors import UnknownName

    out: dict[str, dict[str, float]] = {}
    for name in agents:
        try:
            make_agent(name)
        except UnknownName:
            continue
        rows = []
        for s in seeds:  # the evaluator's episode (run_episode), without importing the evaluator
            agent = make_agent(name)
            agent.reset(int(s))
            sim = make_simulator(scenario, int(s))
            rows.append(sim.run(agent.decide, replan=agent.replan if agent.replans else None,
                                replan_hourly=agent.replan_hourly))
        out[name] = {
            "mean_jct_h": float(np.mean([r.mean_jct_s for r in rows]) / 3600.0),
            "cost_usd": float(np.mean([r.cost_usd for r in rows])),
            "unfinished": float(np.mean([r.unfinished for r in rows])),
        }
    return out


def plot_learning_curve(history: Sequence[dict], levels: dict[str, dict[str, float]], path: Path, title: str) -> Path:
    """Draw eval mean JCT (and cost) against training steps, heuristics as horizontal lines; save a PNG.

    :param history: evaluation points (``timesteps``, ``mean_jct_h``, ``cost_usd``).
    :param levels: :func:`heuristic_levels` on the same seeds.
    :param path: the PNG to write.
    :param title: the figure title.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    steps = [h["timesteps"] for h in history]
    for ax, key, label in ((axes[0], "mean_jct_h", "mean JCT (h, censored)"), (axes[1], "cost_usd", "cost (USD)")):
        ax.plot(steps, [h[key] for h in history], marker="o", color="black", label="learned policy")
        for i, (name, lv) in enumerate(levels.items()):
            ax.axhline(lv[key], linestyle="--", color=f"C{i}", label=name)
        ax.set_xlabel("training steps")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    tmp = path.with_name(f".{path.stem}.tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    os.replace(tmp, path)
    return path


def played_as(play: str, play_env: dict | None = None, deferral: Deferral | dict | None = None) -> str:
    """How a recipe's model is played, as a progress or summary line says it.

    :param deferral: the recipe's ``play_defer`` (a :class:`~sfenv.agents.deferral.Deferral` or its record).
    :return: ``", played work-conserving"``, its ``play_env`` settings (``", min_relative_mfu 0.7"``) and its
        deferral (``", deferring to spantrain+swf unless 1 nats surer"``); empty when it is played as
        trained with none.
    """
    said = ", played work-conserving" if play == "work-conserving" else ""
    said += "".join(f", {k} {v}" for k, v in sorted((play_env or {}).items()) if v is not None)
    if isinstance(deferral, dict):
        deferral = check_play_defer(deferral, "play_defer")
    if deferral is not None:
        said += f", {deferral.describe()}"
    return said


def training_summary(history: Sequence[dict], levels: dict[str, dict[str, float]], seeds: Sequence[int],
                     play: str = "as-trained", play_env: dict | None = None,
                     deferral: Deferral | dict | None = None) -> str:
    """One line: the best model's held-out mean JCT against FIFO's and the best reference agent's.

    E.g. ``best model (step 8,192): mean JCT 2.01 h on seeds 10000..10015; fifo 2.64 h (0.76x),
    best heuristic spantrain+swf 2.09 h (0.96x)``.  The best model is the last evaluation marked
    ``best`` (the highest mean return, as :func:`make_eval_callback` keeps it); a ratio below 1 is
    a shorter mean JCT than the reference's.

    :param history: the evaluation points (``eval.json``).
    :param levels: :func:`heuristic_levels` on the same seeds (may be empty: no comparison).
    :param seeds: the evaluation seeds.
    :param play: the recipe's play mode (the evaluations played it so); ``work-conserving`` is said in the line.
    :param play_env: the recipe's play-only env settings (the evaluations had them), said in the line.
    :param deferral: the recipe's ``play_defer`` (the evaluations played it so), said in the line.
    :return: the line ("no evaluation" when ``history`` is empty).
    """
    best = [h for h in history if h.get("best")]
    if not best:
        return "no evaluation of the model was recorded"
    point = best[-1]
    jct = point["mean_jct_h"]
    span = f"seeds {seeds[0]}..{seeds[-1]}" if len(seeds) > 1 else f"seed {seeds[0]}"
    played = played_as(play, play_env, deferral)
    line = f"best model (step {point['timesteps']:,}{played}): mean JCT {jct:.2f} h on {span}"
    if point.get("unfinished"):
        line += f" ({point['unfinished']:.1f} jobs unfinished per episode)"
    parts = []
    if "fifo" in levels:
        parts.append(f"fifo {levels['fifo']['mean_jct_h']:.2f} h ({jct / levels['fifo']['mean_jct_h']:.2f}x)")
    if levels:
        name = min(levels, key=lambda n: levels[n]["mean_jct_h"])
        level = levels[name]["mean_jct_h"]
        parts.append("fifo is the best heuristic here" if name == "fifo" else
                     f"best heuristic {name} {level:.2f} h ({jct / level:.2f}x)")
    return line + ("; " + ", ".join(parts) if parts else "")
