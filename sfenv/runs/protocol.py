"""The benchmark protocol: fixed seed splits, generalisation splits and how results name their seeds.

A number published from sfenv is comparable with another only if both were measured on the same
episodes and nothing was tuned on them.  Protocol :data:`PROTOCOL_VERSION` (tied to the ``-v6``
environment ids, :data:`ENV_VERSION`) fixes, for every bundled scenario, three disjoint ranges of
episode seeds:

========== ======================== ==============================================================
split      seeds                    use
========== ======================== ==============================================================
train      0 .. 9,999               anything: training episodes, debugging, exploring
validation 10,000 .. 19,999         model selection, tuning, early stopping (``sfenv train``'s
                                    evaluation callback)
test       1,000,000 .. 1,009,999   reported numbers only; nothing is chosen on it
========== ======================== ==============================================================

Why these: training already drew its episodes from seeds ``0..`` and the evaluation callbacks
from ``10000..``; the experiments of earlier releases reported (and partly designed) on seeds
100-119, 200-239 and 5000-5019, all inside *train*, so they are spent.  No seed of *test* was
used by any earlier experiment, config or test.  ``seeds(split, n)`` is the first ``n`` seeds of
a split, so two papers that report "test, 20 seeds" report the same episodes.

Generalisation splits (a model is reported on platforms it never saw):

- generated platforms: :data:`GENERATED_FAMILY` is the family of generated scenarios
  (:func:`sfenv.agents.learned.generated_scenarios`: spider and Waxman topologies of 6-16
  regions, offered load 0.5-0.95, time-of-use prices with noise, over ``spider-8-contended``);
  its generator seeds are split like the episode seeds (:data:`GENERATOR_SEEDS`), and
  :func:`sfenv.agents.learned.generated_platforms` gives the platforms of a split.  Training configs generate with
  train generator seeds (the bundled ones use seed 7).  :data:`CLOUD_FAMILY` is the same family on
  cloud-like WANs only (``generated_platforms(split, n, family="cloud")``), drawn with the split's
  first generator seed plus :data:`CLOUD_SEED_OFFSET`.
- held-out bundled scenarios, :data:`HELD_OUT_SCENARIOS`: ``geo-8``, ``geo-8-contended`` and
  ``geo-8-contended-cost``, the platform built from measured cloud regions, WAN latencies and
  prices, unlike any generated one.  No training config may train, select or evaluate during
  training on them (tested).  ``geo-8-carbon`` (the same platform with July's carbon and a carbon
  weight, ``train-carbon-rollout``'s scenario) is *not* held out, so that recipe's model has seen the
  platform; ``spider-16`` is *not* held out either: ``train-generalise`` selects its
  model on it and the generated family holds 16-region spider graphs.

Every result names its seeds with a :class:`SeedChoice`: the split, or ``"explicit seeds"`` when
seeds were given by number (allowed, but never labelled as a split: :func:`resolve_seeds` refuses
a split together with explicit seeds, and a :class:`SeedChoice` labelled with a split must hold
that split's first seeds).  A leaderboard entry holds, for every agent, the first
:data:`MIN_ENTRY_SEEDS` seeds of a split or more (:mod:`sfenv.runs.entry`).

Changing any range here changes the protocol: bump :data:`PROTOCOL_VERSION` with the env ids.
This module imports nothing heavy.
"""

from __future__ import annotations

import argparse
import numbers
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sfenv.errors import InvalidInput

__all__ = [
    "CLOUD_FAMILY",
    "CLOUD_SEED_OFFSET",
    "ENV_VERSION",
    "EXPLICIT",
    "GENERATED_FAMILY",
    "GENERATOR_SEEDS",
    "HELD_OUT_SCENARIOS",
    "MIN_ENTRY_SEEDS",
    "PROTOCOL_VERSION",
    "SCENARIO_SPLITS",
    "SEED_RANGES",
    "SPLITS",
    "SeedChoice",
    "add_seed_arguments",
    "check_seeds",
    "check_training_config",
    "resolve_seeds",
    "seed_choice_from_args",
    "seed_ranges",
    "seeds",
    "split_of",
]

#: the protocol's version; it changes with every change of a range below or of the observation
PROTOCOL_VERSION = 1
#: the environment id version this protocol goes with (``sfenv/GeoSched-v6`` ...)
ENV_VERSION = "v6"
#: the splits, in order of use
SPLITS = ("train", "validation", "test")
#: the label of seeds given by number rather than by split
EXPLICIT = "explicit seeds"
#: the fewest seeds per agent of a leaderboard entry (``sfenv validate``, :mod:`sfenv.runs.entry`): ratios
#: and intervals over fewer episodes are too wide to rank on.  Only entries are held to it: evaluations
#: and files checked with ``sfenv validate --replay-only`` may use fewer.
MIN_ENTRY_SEEDS = 10
#: the episode seed ranges of every bundled scenario under this protocol
SEED_RANGES: dict[str, range] = {
    "train": range(0, 10_000),
    "validation": range(10_000, 20_000),
    "test": range(1_000_000, 1_010_000),
}
#: bundled scenario -> its splits (all share :data:`SEED_RANGES` in protocol 1; a scenario file
#: of the user's takes them too)
SCENARIO_SPLITS: dict[str, dict[str, range]] = {name: SEED_RANGES for name in (
    "bace-6", "cee", "geo-8", "geo-8-carbon", "geo-8-contended", "geo-8-contended-cost", "spider-8",
    "spider-8-contended", "spider-16", "spider-32", "spider-64")}
#: generator seeds (the ``seed`` argument of ``generated_scenarios``) of the generated-platform splits
GENERATOR_SEEDS: dict[str, range] = {
    "train": range(0, 1_000),
    "validation": range(10_000, 11_000),
    "test": range(1_000_000, 1_001_000),
}
#: the family of generated platforms (keyword arguments of ``generated_scenarios`` but ``count`` and ``seed``)
GENERATED_FAMILY: dict[str, Any] = {
    "base": "spider-8-contended", "num_regions": (6, 8, 10, 12, 16), "generators": ("spider", "waxman"),
    "load": (0.5, 0.95), "price_noise": (0.02, 0.15), "num_jobs": 60,
}
#: the family of cloud-like generated platforms (issue 34): :data:`GENERATED_FAMILY` with ``cloud`` topologies
#: only (:func:`sfenv.world.generators.cloud_topology`: every region pair linked, measured-cloud statistics)
CLOUD_FAMILY: dict[str, Any] = {**GENERATED_FAMILY, "generators": ("cloud",)}
#: a split's cloud-like platforms use its generator seed ``GENERATOR_SEEDS[split][0] + CLOUD_SEED_OFFSET``
#: (10,001 for validation, 1,000,001 for test): other draws than the generated family's
CLOUD_SEED_OFFSET = 1
#: bundled scenarios no training config may use (train on, select on, or evaluate during training)
HELD_OUT_SCENARIOS: tuple[str, ...] = ("geo-8", "geo-8-contended", "geo-8-contended-cost")


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise InvalidInput(f"split {split!r}: expected one of {', '.join(SPLITS)}")


def seed_ranges(scenario: str | None = None) -> dict[str, range]:
    """The split ranges of ``scenario`` (a bundled name; any other scenario, or None, takes :data:`SEED_RANGES`)."""
    return SCENARIO_SPLITS.get(scenario or "", SEED_RANGES)


def seeds(split: str, n: int, scenario: str | None = None) -> list[int]:
    """The first ``n`` episode seeds of ``split`` for ``scenario``.

    :param split: ``train``, ``validation`` or ``test``.
    :param n: how many (1 .. the split's size).
    :param scenario: a bundled scenario name (None: the common ranges).
    :raises InvalidInput: for an unknown split or ``n`` out of range.
    """
    _check_split(split)
    rng = seed_ranges(scenario)[split]
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= len(rng):
        raise InvalidInput(f"seeds: n = {n!r}; expected an integer in 1..{len(rng)} for split {split!r}")
    return list(rng[:n])


def check_seeds(seeds: Any, name: str = "seeds") -> list[Any]:
    """``seeds`` as a list, each an episode seed: an integer >= 0 (not a bool), none repeated.

    For the entry points that take seeds by number (:func:`sfenv.app.evaluate.evaluate_agents`), before
    any file is written or episode played; the values are kept as given (a NumPy integer stays one).

    :param name: the argument's name, for the message.
    :raises InvalidInput: naming ``name``, for a value that is not a list of such seeds (a text, a
        number, a float or bool seed, a negative one, one given twice) or an empty one.
    """
    if isinstance(seeds, (str, bytes, Mapping)) or not isinstance(seeds, Iterable):
        raise InvalidInput(f"{name}: got {type(seeds).__name__} {seeds!r:.60}; expected a list of episode seeds "
                           "(integers >= 0), e.g. [0, 1, 2]")
    values = list(seeds)
    if not values:
        raise InvalidInput(f"{name}: empty; expected at least one seed")
    for seed in values:
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
            raise InvalidInput(f"{name}: {seed!r} is not an episode seed; expected integers >= 0")
    repeated = sorted(int(s) for s, times in Counter(int(s) for s in values).items() if times > 1)
    if repeated:
        raise InvalidInput(f"{name}: {', '.join(map(str, repeated))} given more than once; each seed is one episode")
    return values


def split_of(seed: int, scenario: str | None = None) -> str | None:
    """The split ``seed`` belongs to, or None if it is in none."""
    return next((name for name, rng in seed_ranges(scenario).items() if seed in rng), None)


@dataclass(frozen=True)
class SeedChoice:
    """Seeds and what they are: a split's first seeds, or explicit seeds.

    :param seeds: the episode seeds, in order.
    :param label: a split name (then ``seeds`` must be that split's first seeds) or :data:`EXPLICIT`.
    :param scenario: the scenario whose ranges apply (None: the common ranges).
    :raises InvalidInput: if seeds that are not a split's first seeds are labelled with the split.
    """

    seeds: tuple[int, ...]
    label: str
    scenario: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "seeds", tuple(int(s) for s in self.seeds))
        if not self.seeds:
            raise InvalidInput("seeds: empty; expected at least one seed")
        if self.label == EXPLICIT:
            return
        _check_split(self.label)
        if list(self.seeds) != seeds(self.label, min(len(self.seeds), len(seed_ranges(self.scenario)[self.label])),
                                     self.scenario):
            raise InvalidInput(f"seeds {_span(self.seeds)} are not the first {len(self.seeds)} of split "
                               f"{self.label!r}; label them {EXPLICIT!r}")

    @property
    def split(self) -> str | None:
        """The split, or None for explicit seeds."""
        return None if self.label == EXPLICIT else self.label

    def describe(self) -> str:
        """One line for outputs, e.g. ``split test (protocol 1): 20 seeds 1000000..1000019``."""
        what = f"split {self.label} (protocol {PROTOCOL_VERSION})" if self.split else EXPLICIT
        return f"{what}: {len(self.seeds)} seeds {_span(self.seeds)}"

    def record(self) -> dict[str, Any]:
        """What a results file records: ``split`` (or ``"explicit seeds"``), ``seeds`` and ``protocol``."""
        return {"split": self.label, "seeds": list(self.seeds), "protocol": PROTOCOL_VERSION}


def _span(values: Sequence[int]) -> str:
    values = list(values)
    if values == list(range(values[0], values[0] + len(values))):
        return f"{values[0]}..{values[-1]}"
    return ",".join(str(v) for v in values)


def resolve_seeds(split: str | None = None, n: int | None = None, explicit: Sequence[int] | None = None,
                  scenario: str | None = None, default_split: str = "test", default_n: int = 10) -> SeedChoice:
    """The seeds a command runs: a split's first ``n``, or explicit seeds (never both).

    :param split: the split asked for (None: ``default_split`` unless ``explicit`` is given).
    :param n: how many seeds of the split (None: ``default_n``; with ``explicit``, ignored).
    :param explicit: seeds given by number; labelled :data:`EXPLICIT`.
    :raises InvalidInput: if both ``split`` and ``explicit`` are given (explicit seeds are not
        labelled as a split), or for a bad split or count.
    """
    if explicit is not None:
        if split is not None:
            raise InvalidInput(f"explicit seeds cannot be labelled as split {split!r}: give a split or seeds, not both")
        return SeedChoice(tuple(explicit), EXPLICIT, scenario)
    chosen = default_split if split is None else split
    return SeedChoice(tuple(seeds(chosen, default_n if n is None else n, scenario)), chosen, scenario)


def _scenario_names(value: Any) -> list[str]:
    """Bundled names a config's ``scenario``/``eval_scenario`` value mentions (a name, a list or ``{generate}``)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [n for v in value for n in _scenario_names(v)]
    if isinstance(value, dict) and "generate" in value:
        return _scenario_names(value["generate"].get("base", GENERATED_FAMILY["base"]))
    return []


def check_training_config(cfg: dict[str, Any], name: str = "config") -> None:
    """Refuse a training config that breaks the protocol.

    It may not use a held-out scenario (:data:`HELD_OUT_SCENARIOS`) as ``scenario``, a generator's
    ``base`` or ``eval_scenario``; its ``eval_seeds`` may not touch the test split; a generated
    platform family must use a train generator seed.

    :raises InvalidInput: naming the config and the field.
    """
    for field in ("scenario", "eval_scenario"):
        used = sorted(set(_scenario_names(cfg.get(field))) & set(HELD_OUT_SCENARIOS))
        if used:
            raise InvalidInput(f"{name}: {field} uses held-out scenario(s) {', '.join(used)} (sfenv.runs.protocol)")
    scenario = cfg.get("scenario")
    if isinstance(scenario, dict) and "generate" in scenario:
        gen_seed = int(scenario["generate"].get("seed", 0))
        if gen_seed not in GENERATOR_SEEDS["train"]:
            raise InvalidInput(f"{name}: scenario.generate.seed = {gen_seed} is not a train generator seed "
                               f"({GENERATOR_SEEDS['train'].start}..{GENERATOR_SEEDS['train'].stop - 1})")
    test = [s for s in cfg.get("eval_seeds") or [] if split_of(int(s)) == "test"]
    if test:
        raise InvalidInput(f"{name}: eval_seeds {_span(test)} are test seeds; select models on the validation split")


def add_seed_arguments(parser: argparse.ArgumentParser, default_n: int = 10, default_split: str = "test",
                       first_seed_flag: str = "--first-seed") -> None:
    """Add ``--split``, ``--seeds N`` and ``first_seed_flag S`` (explicit seeds ``S .. S+N-1``) to a parser."""
    parser.add_argument("--split", choices=SPLITS, default=None,
                        help=f"the protocol's seed split (sfenv.runs.protocol; default: {default_split} unless "
                             f"{first_seed_flag} is given)")
    parser.add_argument("--seeds", type=int, default=default_n, metavar="N", help="number of seeds (> 0)")
    parser.add_argument(first_seed_flag, type=int, default=None, metavar="S",
                        help="explicit seeds S..S+N-1 instead of a split (labelled 'explicit seeds'; "
                             "not with --split)")


def seed_choice_from_args(args: argparse.Namespace, scenario: str | None = None, default_split: str = "test",
                          first_seed_attr: str = "first_seed",
                          parser: argparse.ArgumentParser | None = None) -> SeedChoice:
    """The :class:`SeedChoice` of options added by :func:`add_seed_arguments`.

    :param parser: if given, bad options end through ``parser.error`` (one line, exit 2) instead
        of an exception.
    :raises InvalidInput: for ``--split`` with explicit seeds, ``--seeds`` < 1 or a negative first seed.
    """
    n, first = args.seeds, getattr(args, first_seed_attr)
    try:
        if n < 1:
            raise InvalidInput(f"--seeds {n}: expected an integer >= 1")
        if first is not None and first < 0:
            raise InvalidInput(f"first seed {first}: expected an integer >= 0")
        explicit = None if first is None else list(range(first, first + n))
        return resolve_seeds(args.split, n, explicit, scenario, default_split=default_split)
    except InvalidInput as exc:
        if parser is None:
            raise
        parser.error(str(exc))
