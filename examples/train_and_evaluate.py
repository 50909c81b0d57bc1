"""Train MaskablePPO on a tiny scenario, then score it next to FIFO with the project's evaluator.

Run: ``python examples/train_and_evaluate.py`` (a few thousand steps, a few minutes on 2 cores), or
``--smoke`` (or ``SFENV_EXAMPLES_SMOKE=1``) for a run of a few hundred steps that only shows the
path works. Needs the ``rl`` extra. Outputs go to ``--out`` (default ``runs-example/`` in the
current folder). A run this short does not learn a good policy; it shows the steps. Progress goes
to stderr: what each phase does, and on a terminal bars with the rate and the time left.
"""

from __future__ import annotations

import argparse
import os

from sfenv.agents.learned import train

from sfenv.app.evaluate import evaluate_agents, format_table, summarise
from sfenv.runs import log_stderr


def main() -> None:
    """Train, then evaluate the best model and FIFO on the same held-out seeds."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", default=os.environ.get("SFENV_EXAMPLES_SMOKE") == "1",
                        help="a few hundred steps, 1 evaluation seed")
    parser.add_argument("--out", default="runs-example", help="folder for the run folder")
    args = parser.parse_args()
    steps, seeds, num_jobs = (256, range(1000, 1001), 6) if args.smoke else (8192, range(1000, 1005), 10)

    # spider-8 with few jobs per episode and few candidates: small enough to learn on 2 cores
    env_kwargs = {"num_jobs": num_jobs, "max_candidates": 8}
    final = train(
        "maskable-ppo", "spider-8", total_timesteps=steps, n_envs=2, out_dir=args.out, env_kwargs=env_kwargs,
        algo_kwargs={"n_steps": 64, "batch_size": 64} if args.smoke else None,
        tensorboard=False, plot=False, eval_every=steps, eval_seeds=[900], baselines=["fifo"],
        progress_bar=True, log=log_stderr,  # on a terminal: steps, rate, ETA, the last evaluation; on stderr
    )
    best = final.with_name("best_model.zip")
    model = best if best.exists() else final
    print(f"trained {steps} steps: {model}")

    rows = evaluate_agents(["fifo", f"model:{model}"], "spider-8", seeds=seeds, num_jobs=num_jobs, progress=True)
    print(format_table(summarise(rows)))


if __name__ == "__main__":
    main()
