"""Environment benchmark: env steps/s and the share of training time spent in ``env.step``.

Steps/s with random (masked and unmasked) actions, next to CartPole measured in the same run;
and the share of a MaskablePPO training run's wall time spent inside ``env.step``.

Run: ``python -m sfenv.experiments.bench_env [--steps 5000] [--train-steps 16384] [--against DIR]``
(``--against``: the same masked-steps measurement for another checkout, alternately with this code).
Targets: >= 5,000 steps/s on 8 regions, >= 1,000 on 64, <= 20 % of training time in env.step.

``--proposers`` measures instead the candidate proposers' cost: masked steps/s with the default
proposers, ``"best"`` and ``"best+spantrain"`` (the recommended recipe's) on spider-8-contended and
spider-64, each in a fresh interpreter (process-wide memos start cold for every row), ``--rounds``
times, and the ratio ``best+spantrain / default`` of each round (target >= 0.5); with ``--against
DIR`` the other checkout's rows too, just before this code's in each round.

A ``--sets`` entry may name the WAN model it plays after a colon: ``best+spantrain:v4`` plays the
env id's scenario with env v4's settings (``sfenv.registration.VERSION_SIM``; ``:v5`` ... ``:v2``),
``best+spantrain:full-zb`` with every zero-bubble period replayed (``sim.skip_zero_bubble_periods:
false``, docs/model.md).  So ``--sets best+spantrain:v4,best+spantrain`` prints env v6's speed with
SpanTrain's candidates against env v4's in one run, and ``--sets best+spantrain:full-zb,best+spantrain``
the skipping's speed-up.

``--fit-reuse`` counts instead how often that recipe's plan searches repeat, and measures its rate
with every search answered from memos (:func:`fit_reuse`): how much any memo or faster search
could save.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import gymnasium as gym
import numpy as np

import sfenv  # noqa: F401
from sfenv.app.cli import positive_int
from sfenv.app.script import ScriptParser
from sfenv.errors import InvalidInput


def _random_steps(env: gym.Env, info: dict, steps: int, masked: bool, rng: np.random.Generator) -> dict:
    """``steps`` random actions (valid ones if ``masked``), resetting at episode ends; the last info."""
    space = env.action_space
    assert isinstance(space, gym.spaces.Discrete)  # GeoSched's actions: candidates and wait
    for _ in range(steps):
        if masked:
            a = int(rng.choice(np.flatnonzero(info["action_mask"])))
        else:
            a = int(rng.integers(space.n))
        _, _, term, trunc, info = env.step(a)
        if term or trunc:
            _, info = env.reset()
    return info


def steps_per_s(env_id: str, steps: int, masked: bool = True, **kw) -> float:
    """Random steps per second of ``gym.make(env_id, **kw)`` after 200 masked warm-up steps."""
    env = gym.make(env_id, **kw)
    rng = np.random.default_rng(0)
    _, info = env.reset(seed=0)
    info = _random_steps(env, info, 200, True, rng)  # warm caches
    t = time.perf_counter()
    _random_steps(env, info, steps, masked, rng)
    return steps / (time.perf_counter() - t)


def _timed_play(env: gym.Env, steps: int, actions: list[int] | None = None) -> tuple[list[int], float]:
    """``steps`` steps from ``reset(seed=0)``: masked random actions (seed 0), or ``actions`` replayed.

    :return: the actions taken and the steps per second.
    """
    rng = np.random.default_rng(0)
    _, info = env.reset(seed=0)
    taken: list[int] = []
    t = time.perf_counter()
    for i in range(steps):
        a = actions[i] if actions is not None else int(rng.choice(np.flatnonzero(info["action_mask"])))
        taken.append(a)
        _, _, term, trunc, info = env.step(a)
        if term or trunc:
            _, info = env.reset()
    return taken, steps / (time.perf_counter() - t)


def fit_reuse(env_id: str, steps: int) -> dict[str, dict[str, float]]:
    """How often the recommended recipe's plan searches repeat over ``steps`` random steps; its rate with them free.

    Plays ``gym.make(env_id, proposers="best+spantrain")`` from seed 0 and reads the memo of its
    SpanTrain decision proposer (:meth:`sfenv.agents.spantrain.SpanTrainAgent.fit_keys`) and the
    env's shared :class:`~sfenv.env.proposers.PlanCache` (:meth:`~sfenv.env.proposers.PlanCache.fit_keys`,
    the other proposers' searches): every entry is one plan search (a memo miss).
    ``multi_region_distinct_without_links`` counts the multi-region searches that stay distinct when
    the link state is dropped from the key: the fewest any memo keyed on job shape, regions and
    GPUs could have made, exact or not; ``multi_region_distinct_rounded`` the same with each
    region's GPUs rounded down to :data:`sfenv.env.proposers.BUDGETS` too.

    ``rates`` bounds what any memo or faster search could give: the same steps replayed twice (same
    seed, same actions, so every state and plan search was met before and is answered from the
    memos) with ``best+spantrain`` and with the default proposers; ``*_first`` is the first pass,
    ``*_replayed`` the faster replay (steps/s).
    """
    from sfenv.agents.spantrain import SpanTrainAgent

    from sfenv.env import GeoSchedEnv
    from sfenv.env.proposers import round_budget

    env = gym.make(env_id, proposers="best+spantrain")
    base = env.unwrapped
    assert isinstance(base, GeoSchedEnv)
    # DecisionProposer(spantrain+swf).agent.placement: the SpanTrain agent behind the ordered one
    agents = [getattr(getattr(p, "agent", None), "placement", None) for p in base.proposers]
    spantrain = next(a for a in agents if isinstance(a, SpanTrainAgent))
    actions, first = _timed_play(env, steps)
    cache = base.cache
    out: dict[str, dict[str, float]] = {}
    # SpanTrain stores one key per search; the cache also stores plans moved between equal regions
    for name, keys, fits in (("spantrain", spantrain.fit_keys(), None), ("plan_cache", cache.fit_keys(), cache.misses)):
        multi = [k for k in keys if len(k[1]) > 1]
        out[name] = {"fits": len(keys) if fits is None else fits, "multi_region": len(multi),
                     "multi_region_distinct_without_links": len({k[:3] for k in multi}),
                     "multi_region_distinct_rounded": len({(k[0], k[1], tuple(map(round_budget, k[2])))
                                                           for k in multi})}
    searched = cache.misses + len(spantrain.fit_keys())
    rates = {"recipe_first": first, "recipe_replayed": max(_timed_play(env, steps, actions)[1] for _ in range(2))}
    rates["replay_searches"] = cache.misses + len(spantrain.fit_keys()) - searched  # 0: the replays met no new search
    default_env = gym.make(env_id)
    default_actions, rates["default_first"] = _timed_play(default_env, steps)
    rates["default_replayed"] = max(_timed_play(default_env, steps, default_actions)[1] for _ in range(2))
    out["rates"] = rates
    return out


def print_fit_reuse(env_id: str, steps: int, counts: dict[str, dict[str, float]]) -> None:
    """Per env id: SpanTrain's and the plan cache's searches, what a link-blind memo keeps, and the rates."""
    print(f"{env_id}, {steps} masked random steps with best+spantrain:")
    for name, label in (("spantrain", "SpanTrain's decision"), ("plan_cache", "other proposers (PlanCache)")):
        c = counts[name]
        print(f"  {label:<28}: {c['fits']:5d} plan searches, {c['multi_region']:5d} on several regions; "
              f"of these {c['multi_region_distinct_without_links']:5d} distinct without the link state, "
              f"{c['multi_region_distinct_rounded']:5d} with GPUs rounded too")
    r = counts["rates"]
    print(f"  steps/s, first pass: best+spantrain {r['recipe_first']:.0f}, default {r['default_first']:.0f} "
          f"({r['recipe_first'] / r['default_first']:.3f}); the same steps replayed, every search answered "
          f"from the memos: {r['recipe_replayed']:.0f} and {r['default_replayed']:.0f} "
          f"({r['recipe_replayed'] / r['default_replayed']:.3f})")


def cartpole_steps_per_s(steps: int) -> float:
    env = gym.make("CartPole-v1")
    env.reset(seed=0)
    t = time.perf_counter()
    for _ in range(steps):
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        if term or trunc:
            env.reset()
    return steps / (time.perf_counter() - t)


class StepTimer(gym.Wrapper):
    """Accumulates the wall time spent inside the wrapped env's ``step`` (benchmark only)."""

    total = 0.0

    def step(self, action):  # noqa: D102
        t = time.perf_counter()
        out = self.env.step(action)
        StepTimer.total += time.perf_counter() - t
        return out

    def action_masks(self) -> np.ndarray:  # noqa: D102
        from sfenv.env import GeoSchedEnv

        base = self.env.unwrapped
        assert isinstance(base, GeoSchedEnv)
        return base.action_masks()


def training_share(train_steps: int) -> tuple[float, float]:
    import torch
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.env_util import make_vec_env

    torch.set_num_threads(1)
    vec = make_vec_env("sfenv/GeoSched-v6", n_envs=1, seed=0, wrapper_class=StepTimer)
    model = MaskablePPO("MultiInputPolicy", vec, seed=0, verbose=0, n_steps=1024)
    StepTimer.total = 0.0
    t = time.perf_counter()
    model.learn(train_steps)
    wall = time.perf_counter() - t
    return StepTimer.total / wall, wall


#: a probe's first lines: refuse to measure a mix of two revisions' sources
_SAME_SOURCE = """
import pathlib, sfenv
try:
    import sfenv.agents as _agents
except ImportError:  # a checkout from before the agents moved under sfenv
    _agents = sfenv
_roots = {pathlib.Path(m.__file__).resolve().parents[1] for m in (sfenv, _agents)}
assert len(_roots) == 1, f"sfenv and sfenv.agents come from different sources: {_roots}"
"""

#: run in a fresh interpreter by :func:`compare_with_checkout`: masked steps/s of two envs and CartPole
_PROBE = _SAME_SOURCE + """
import json, sys
try:
    from sfenv.experiments.bench_env import cartpole_steps_per_s, steps_per_s
except ImportError:  # a checkout from before the packages were renamed
    from experiments.bench_env import cartpole_steps_per_s, steps_per_s
import sfenv
steps, ids = int(sys.argv[1]), sys.argv[2].split(",")
cp = cartpole_steps_per_s(4 * steps)
here = str(pathlib.Path(sfenv.__file__).resolve())
print(json.dumps({"sfenv": here, "cartpole": cp, **{i: steps_per_s(i, steps, True) for i in ids}}))
"""


#: run in a fresh interpreter by :func:`proposer_rows`: masked steps/s of one env id with one proposer set
_PROPOSER_PROBE = _SAME_SOURCE + """
import json, sys
from sfenv.experiments.bench_env import steps_per_s
try:
    from sfenv.experiments.bench_env import set_kwargs
except ImportError:  # a checkout from before the zero-bubble skip: plain proposer sets only
    def set_kwargs(env_id, name):
        return {"proposers": name}
print(json.dumps(steps_per_s(sys.argv[1], int(sys.argv[2]), True, **set_kwargs(sys.argv[1], sys.argv[3]))))
"""

#: the suffix of a ``--sets`` entry that plays it with ``sim.skip_zero_bubble_periods: false``
FULL_ZB = "full-zb"


def set_kwargs(env_id: str, name: str) -> dict:
    """``gym.make`` keywords of a ``--sets`` entry.

    A proposer set; followed by ``:`` and an earlier env version (``v5`` ... ``v2``), also the env id's
    scenario with that version's WAN settings (:data:`sfenv.registration.VERSION_SIM`); followed by
    ``:`` and :data:`FULL_ZB`, with every zero-bubble period replayed (``sim.skip_zero_bubble_periods``
    false, docs/model.md).
    """
    from sfenv.registration import VERSION_SIM

    proposers, colon, suffix = name.partition(":")
    choices = (*VERSION_SIM, FULL_ZB)
    if not proposers or (colon and suffix not in choices):
        raise ValueError(f"--sets: {name!r}; expected a proposer set, optionally followed by ':' and one of "
                         f"{', '.join(choices)}")
    if not colon:
        return {"proposers": proposers}
    from sfenv.scenario import load_scenario

    sim = {"skip_zero_bubble_periods": False} if suffix == FULL_ZB else VERSION_SIM[suffix]
    scenario = load_scenario(gym.spec(env_id).kwargs["scenario"])
    return {"proposers": proposers, "scenario": scenario.with_overrides(sim=sim)}

#: proposer sets :func:`proposer_rows` compares (``"default"`` first: the ratios' denominator)
PROPOSER_SETS = ("default", "best", "best+spantrain")
#: env ids :func:`proposer_rows` measures by default (the recommended configs' and the largest platform)
PROPOSER_ENV_IDS = ("sfenv/Spider8Contended-v0", "sfenv/Spider64-v0")
#: env ids ``--fit-reuse`` plays: the same scenarios at the current version (it runs in this process only)
FIT_REUSE_ENV_IDS = tuple(env_id.replace("-v0", "-v6") for env_id in PROPOSER_ENV_IDS)


def check_checkout(source: str | Path) -> Path:
    """``source`` resolved, if it is a checkout of sfenv.

    That is a folder with ``sfenv/__init__.py`` and ``agents/`` beside it (or, from before the agents
    moved, ``sfenv/agents/``).

    :raises InvalidInput: otherwise (a missing or other folder would measure the installed code against
        itself, without a word).
    """
    root = Path(source)
    if not ((root / "sfenv" / "__init__.py").is_file()
            and ((root / "agents").is_dir() or (root / "sfenv" / "agents").is_dir())):
        raise InvalidInput(f"--against {str(source)!r:.200}: not a checkout of sfenv (no sfenv/__init__.py "
                           "and agents/ in it); give another revision's source folder (git worktree add)")
    return root.resolve()


def import_root(source: Path, scratch: Path) -> Path:
    """A folder to put first on ``PYTHONPATH`` so that every ``sfenv`` package comes from ``source``.

    The source tree keeps ``agents/``, ``experiments/`` and ``scenarios/`` beside ``sfenv/`` (they
    install as ``sfenv.agents`` etc.), so ``source`` alone would mix that revision's ``sfenv``
    with the installed ``sfenv.agents``.  This builds ``scratch/sfenv``: links to ``source/sfenv``'s
    entries and to those three folders, where Python's path import finds them first.

    :param source: a checkout's root (e.g. ``git worktree add /tmp/old REV``).
    :param scratch: an empty folder to build the links in.
    :return: ``scratch``, or ``source`` when its ``sfenv`` already holds ``agents``.
    """
    pkg = source / "sfenv"
    if (pkg / "agents").is_dir() or not (source / "agents").is_dir():
        return source
    overlay = scratch / "sfenv"
    overlay.mkdir(parents=True)
    for entry in pkg.iterdir():
        if entry.name != "__pycache__":
            (overlay / entry.name).symlink_to(entry.resolve())
    for sub in ("agents", "experiments", "scenarios"):
        if (source / sub).is_dir() and not (overlay / sub).exists():
            (overlay / sub).symlink_to((source / sub).resolve())
    return scratch


def proposer_rows(
    steps: int = 5000, rounds: int = 2, env_ids: tuple[str, ...] = PROPOSER_ENV_IDS,
    sets: tuple[str, ...] = PROPOSER_SETS, checkout: str | Path | None = None,
) -> list[dict[str, dict[str, dict[str, float]]]]:
    """Masked steps/s per env id and proposer set, each measured in a fresh interpreter, ``rounds`` times.

    Within a round the sets of one env id run one after another (with ``checkout``, that revision's
    rows just before this code's), so their ratios come from the same minutes of the same machine
    (which may be shared: compare ratios, not absolute figures).

    :param steps: measured steps per row (after :func:`steps_per_s`'s 200 warm-up steps).
    :param rounds: repetitions.
    :param env_ids: registered env ids.
    :param sets: values of the env's ``proposers`` argument; the first is the ratios' denominator.
    :param checkout: another revision's source folder to measure too (first on ``PYTHONPATH``).
    :return: per round ``{"this" or "other": {env id: {set: steps/s}}}``.
    """
    here = Path(__file__).resolve().parents[1]
    sources = ([("other", check_checkout(checkout))] if checkout else []) + [("this", here)]
    out = []
    with tempfile.TemporaryDirectory() as scratch:
        codes = [(name, import_root(path, Path(scratch) / name)) for name, path in sources]
        for _ in range(rounds):
            row: dict[str, dict[str, dict[str, float]]] = {name: {} for name, _ in codes}
            for env_id in env_ids:
                for name, path in codes:
                    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(path), os.environ.get("PYTHONPATH", "")])}
                    row[name][env_id] = {}
                    for proposers in sets:
                        res = subprocess.run([sys.executable, "-c", _PROPOSER_PROBE, env_id, str(steps), proposers],
                                             env=env, capture_output=True, text=True, check=True,
                                             cwd=tempfile.gettempdir())
                        row[name][env_id][proposers] = float(res.stdout.strip().splitlines()[-1])
            out.append(row)
    return out


def print_proposer_rows(rows: list[dict[str, dict[str, dict[str, float]]]]) -> None:
    """Print :func:`proposer_rows`' figures, one line per round, code and env id, with ratios to the first set."""
    for i, row in enumerate(rows):
        for name, by_env in row.items():
            for env_id, figures in by_env.items():
                base_name, base = next(iter(figures.items()))
                cells = "  ".join(f"{prop} {_steps_rate(sps)}" for prop, sps in figures.items())
                ratios = "  ".join(f"{prop}/{base_name} {sps / base:.3f}" for prop, sps in figures.items()
                                   if prop != base_name)
                print(f"round {i + 1} {name:<5} {env_id[6:]:<20} masked steps/s: {cells}   {ratios}")
        if "other" in row:
            for env_id, figures in row["this"].items():
                cells = "  ".join(f"{prop} {sps / row['other'][env_id][prop]:.3f}" for prop, sps in figures.items())
                print(f"round {i + 1} this/other {env_id[6:]:<20} masked steps/s: {cells}")


def _steps_rate(sps: float) -> str:
    """A steps/s figure in six places: whole above 100, one decimal below (spider-64's slowest sets play a few)."""
    return f"{sps:6.0f}" if sps >= 100 else f"{sps:6.1f}"


def compare_with_checkout(
    checkout: str | Path, steps: int = 3000, rounds: int = 3,
    env_ids: tuple[str, ...] = ("sfenv/Spider8-v0", "sfenv/Spider64-v0"),
) -> list[dict[str, dict]]:
    """Masked steps/s of this code and of another checkout, alternately, each in a fresh interpreter.

    The same-conditions comparison of two revisions (e.g. ``git worktree add /tmp/old REV``):
    each round runs the checkout, then this code, each measuring CartPole too, so a ratio to
    CartPole and a ratio between the two come from the same minutes of the same machine.

    The default ids are the ``-v0`` ones, which both old and new checkouts register (with the same
    observation: v0 keeps the privileged entry).

    :param checkout: the other revision's source folder (it goes first on ``PYTHONPATH``).
    :return: per round ``{"other": {...}, "this": {...}}``: steps/s per env id, ``cartpole`` and
        the ``sfenv`` module file each used.
    """
    here = Path(__file__).resolve().parents[1]
    out = []
    with tempfile.TemporaryDirectory() as scratch:
        codes = [(name, import_root(path, Path(scratch) / name))
                 for name, path in (("other", check_checkout(checkout)), ("this", here))]
        for _ in range(rounds):
            row = {}
            for name, path in codes:
                env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(path), os.environ.get("PYTHONPATH", "")])}
                res = subprocess.run([sys.executable, "-c", _PROBE, str(steps), ",".join(env_ids)], env=env,
                                     capture_output=True, text=True, check=True, cwd=tempfile.gettempdir())
                row[name] = json.loads(res.stdout.strip().splitlines()[-1])
            out.append(row)
    return out


def main() -> None:
    ap = ScriptParser(script=__file__, description="sfenv environment benchmark")
    ap.add_argument("--steps", type=positive_int, default=5000, help="measured steps per row (default: %(default)s)")
    ap.add_argument("--train-steps", type=positive_int, default=16384,
                    help="MaskablePPO steps of the training-share measure (default: %(default)s)")
    ap.add_argument("--against", metavar="DIR", default=None,
                    help="also compare masked steps/s with another checkout (e.g. `git worktree add /tmp/old REV`), "
                         "alternately, 3 rounds")
    ap.add_argument("--proposers", action="store_true",
                    help="measure only the proposer sets default, best and best+spantrain on spider-8-contended "
                         "and spider-64 (each in a fresh interpreter) and print best+spantrain/default")
    ap.add_argument("--rounds", type=positive_int, default=2, help="repetitions of the --proposers measurement")
    ap.add_argument("--sets", default=",".join(PROPOSER_SETS),
                    help="comma-separated proposer sets for --proposers, the ratios' denominator first "
                         f"(default {','.join(PROPOSER_SETS)}; also first-fit); a set followed by :v5 ... :v2 is "
                         f"played with that env version's WAN settings, by :{FULL_ZB} with every zero-bubble period "
                         "replayed")
    ap.add_argument("--fit-reuse", action="store_true",
                    help="count only how often best+spantrain's plan searches repeat over --steps masked random steps "
                         "on spider-8-contended and spider-64, and its steps/s with every search answered from memos")
    args = ap.parse_args()
    if args.against is not None:
        check_checkout(args.against)
    if args.fit_reuse:
        for env_id in FIT_REUSE_ENV_IDS:
            print_fit_reuse(env_id, args.steps, fit_reuse(env_id, args.steps))
        return
    if args.proposers:
        sets = tuple(args.sets.split(","))
        from sfenv.env.proposers import PROPOSER_SETS as known
        from sfenv.registration import VERSION_SIM

        suffixes = ("", *(f":{v}" for v in (*VERSION_SIM, FULL_ZB)))
        if not all(any(name == set_name + suffix for set_name in known for suffix in suffixes) for name in sets):
            ap.error(f"argument --sets: {args.sets!r}; expected names among {','.join(known)}, each optionally "
                     f"followed by one of {', '.join(s for s in suffixes if s)}")
        print_proposer_rows(proposer_rows(args.steps, args.rounds, sets=sets, checkout=args.against))
        return
    if args.against:
        for i, row in enumerate(compare_with_checkout(args.against, args.steps)):
            for name in ("other", "this"):
                m = row[name]
                figures = "  ".join(f"{k[6:]} {m[k]:7.0f} ({m[k] / m['cartpole']:.4f}x CartPole)"
                                    for k in m if k.startswith("sfenv/"))
                print(f"round {i + 1} {name:<5}: {figures}   [{Path(m['sfenv']).parent}]")
    cp = cartpole_steps_per_s(args.steps * 4)
    print(f"CartPole-v1 (gym.make, random actions): {cp:10.0f} steps/s (reference)")
    for env_id, target in [("sfenv/Spider8-v6", 5000), ("sfenv/Spider64-v6", 1000)]:
        for masked in (True, False):
            sps = steps_per_s(env_id, args.steps, masked)
            print(f"{env_id:<18} {'masked' if masked else 'unmasked':<9}: {sps:10.0f} steps/s "
                  f"= {sps / cp:6.3f} x CartPole   (target {target})")
    share, wall = training_share(args.train_steps)
    per_step = 1e6 * wall / max(1, args.train_steps)
    print(f"MaskablePPO {args.train_steps} steps on spider-8: {wall:.1f} s ({per_step:.0f} us/step), "
          f"{100 * share:.1f} % inside env.step ({share * per_step:.0f} us/step; target <= 20 %)")


if __name__ == "__main__":
    from sfenv.app.script import run_script

    raise SystemExit(run_script(main))
