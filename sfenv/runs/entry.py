"""A leaderboard entry judged as a whole: what ``sfenv validate`` checks of a file before replaying it.

Replaying each row (:func:`sfenv.runs.replay.validate_rows`) proves that the row's metrics follow
from its action log, played to the episode's end.  It proves nothing about what the file claims as a
whole, and the figures read out of an entry (each agent's mean over its seeds, the ratios between
agents) depend on that too: a duplicated row, an agent's best episode copied over its other seeds, an
agent's worst seed dropped, train seeds passed off as test seeds, or 3-job episodes filed under a
40-job settings block all replay correctly row by row.  :func:`check_entry` refuses them:

- the file is a results file with its ``settings`` (:mod:`sfenv.runs.results`), not a bare list of
  rows: its ``format`` marker, no top-level key but ``format``, ``settings`` and ``episodes`` (a
  stored ``summary`` could claim other figures than the rows), no settings key the writer does not
  write, recorded on this environment version (``env_version``, :data:`~sfenv.runs.protocol.ENV_VERSION`)
  and protocol (``protocol``);
- ``settings.split`` names the split the entry claims (``test`` for the leaderboard), never
  ``"explicit seeds"``, and ``settings.seeds`` are that split's first N seeds, N at least
  :data:`~sfenv.runs.protocol.MIN_ENTRY_SEEDS`;
- every row was played on the settings' scenario: its name, ``scenario_sha`` and job count
  (``jobs``) are the settings' (``scenario``, ``scenario_sha``, ``num_jobs``);
- there is exactly one row per (agent, seed): every agent of ``settings.agents`` has one episode of
  every seed of ``settings.seeds``, and no row is of another agent or seed.

What no check of a log can tell (who chose the plans, and what they knew) is said in docs/protocol.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sfenv.errors import InvalidInput
from sfenv.runs import protocol
from sfenv.runs.replay import Rejected, entry_rows, show
from sfenv.runs.results import FORMAT

__all__ = ["ENTRY_KEYS", "SETTINGS_KEYS", "EntryClaim", "check_entry", "check_one_row_each", "rerecord_command"]

#: the top-level keys of an entry: those :func:`sfenv.runs.results.results_document` writes
ENTRY_KEYS = ("format", "settings", "episodes")
#: the keys of an entry's settings: those of :func:`sfenv.app.evaluate.run_settings` with seeds and action logs
SETTINGS_KEYS = ("sfenv_version", "scenario", "scenario_sha", "num_jobs", "split", "seeds", "protocol",
                 "record_actions", "env_version", "agents")


@dataclass(frozen=True)
class EntryClaim:
    """What a checked entry holds: its agents, each on the first ``len(seeds)`` seeds of ``split``.

    :param scenario: the bundled scenario's name.
    :param scenario_sha: the hash of the scenario with its workload size (:func:`sfenv.runs.replay.scenario_sha`).
    :param num_jobs: jobs per episode.
    :param split: the protocol split.
    :param seeds: the split's first seeds, every agent's.
    :param agents: the agents, in the settings' order.
    :param env_version: the environment version the episodes were played on.
    """

    scenario: str
    scenario_sha: str
    num_jobs: int
    split: str
    seeds: tuple[int, ...]
    agents: tuple[str, ...]
    env_version: str

    @property
    def episodes(self) -> int:
        """Rows of the entry: one per agent and seed."""
        return len(self.agents) * len(self.seeds)

    def describe(self) -> str:
        """One line: agents, seeds and split, scenario, jobs, its hash and the env version."""
        agents = ", ".join(show(a) for a in self.agents)
        return (f"agents {agents}, each on the first {len(self.seeds)} {self.split} seeds "
                f"({self.seeds[0]}..{self.seeds[-1]}); scenario {show(self.scenario)} with {self.num_jobs} jobs "
                f"(scenario_sha {show(self.scenario_sha)}), env {self.env_version}, "
                f"protocol {protocol.PROTOCOL_VERSION}")


def check_entry(data: Any, source: str = "entry", split: str = "test",
                min_seeds: int = protocol.MIN_ENTRY_SEEDS) -> tuple[EntryClaim, list[dict[str, Any]]]:
    """Check that ``data`` (a results file's content) is a whole leaderboard entry; nothing is replayed.

    :param source: the file's name, for messages.
    :param split: the split the entry must claim (the leaderboard's: ``test``).
    :param min_seeds: the fewest seeds per agent.
    :return: what the entry claims, and its rows (to replay with :func:`sfenv.runs.replay.validate_rows`).
    :raises InvalidInput: for content that holds no rows, or rows without their action logs (unreadable).
    :raises Rejected: naming the first claim that does not hold (see the module docstring).
    """
    rows = entry_rows(data, source)
    settings = data.get("settings") if isinstance(data, dict) else None
    if not isinstance(settings, dict):
        raise Rejected("not a leaderboard entry: the file records no settings (a results file of sfenv evaluate "
                       "--split test --seeds N --record-actions --out FILE has them); --replay-only replays "
                       "its rows without judging the file")
    _check_keys(data, settings)
    claim = _claim(settings, split, min_seeds)
    for number, row in enumerate(rows):
        _check_row_fits(claim, number, row)
    check_one_row_each(rows, claim.agents, claim.seeds)
    return claim, rows


def _check_keys(data: dict[str, Any], settings: dict[str, Any]) -> None:
    """Rejected unless ``data`` holds the results format marker and only the keys a results file's writer writes."""
    if data.get("format") != FORMAT:
        raise Rejected(f"format is {data.get('format')!r}; an entry is a results file of sfenv evaluate --out "
                       f"(format {FORMAT!r})")
    unknown = sorted(set(data) - set(ENTRY_KEYS))
    if unknown:
        raise Rejected(f"unknown top-level key(s) {', '.join(map(repr, unknown))}; an entry holds only "
                       f"{', '.join(ENTRY_KEYS)} (its figures are computed from its episodes)")
    unknown = sorted(set(settings) - set(SETTINGS_KEYS))
    if unknown:
        raise Rejected(f"unknown settings key(s) {', '.join(map(repr, unknown))}; an entry's settings hold only "
                       f"{', '.join(SETTINGS_KEYS)}")


def _setting(settings: dict[str, Any], key: str, kind: type, what: str) -> Any:
    """``settings[key]``, which must be a ``kind`` (not a bool); Rejected naming the key if not."""
    value = settings.get(key)
    if isinstance(value, bool) or not isinstance(value, kind) or (isinstance(value, (str, dict)) and not value):
        raise Rejected(f"settings.{key} is {value!r}; a leaderboard entry records {what}")
    return value


def _claim(settings: dict[str, Any], split: str, min_seeds: int) -> EntryClaim:
    """What the settings claim, each field checked (the rows are not looked at)."""
    label = settings.get("split")
    if label != split:
        why = "seeds given by number" if label == protocol.EXPLICIT else "another split" if label else "no split"
        raise Rejected(f"settings.split is {label!r} ({why}); a leaderboard entry holds the first seeds of the "
                       f"{split} split (sfenv evaluate --split {split} --seeds N --record-actions)")
    if settings.get("protocol") != protocol.PROTOCOL_VERSION or isinstance(settings.get("protocol"), bool):
        raise Rejected(f"settings.protocol is {settings.get('protocol')!r}; this sfenv's seed splits are protocol "
                       f"{protocol.PROTOCOL_VERSION}")
    if settings.get("record_actions") is not True:  # the writer records true whenever rows hold action logs
        raise Rejected(f"settings.record_actions is {settings.get('record_actions')!r}; an entry is written with "
                       "--record-actions (true)")
    env_version = settings.get("env_version")
    if env_version != protocol.ENV_VERSION:
        was = "records no env_version" if env_version is None else f"say env {env_version!r}"
        raise Rejected(f"settings {was}, and this sfenv plays env {protocol.ENV_VERSION}: an entry names the "
                       "environment its episodes were played on; re-record it with this sfenv "
                       "(sfenv evaluate ... --record-actions)")
    scenario = _setting(settings, "scenario", str, "the scenario's name")
    seeds = _setting(settings, "seeds", list, f"the seeds, the first N of split {split!r}")
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        raise Rejected(f"settings.seeds holds a value that is not an integer: {seeds!r}")
    try:
        protocol.SeedChoice(tuple(seeds), split, scenario)
    except InvalidInput as exc:
        raise Rejected(f"settings: {exc}") from None
    if len(seeds) < min_seeds:
        raise Rejected(f"settings.seeds: {len(seeds)} seeds per agent; a leaderboard entry has at least {min_seeds} "
                       "(sfenv.runs.protocol.MIN_ENTRY_SEEDS)")
    agents = _setting(settings, "agents", dict, "its agents")
    return EntryClaim(scenario=scenario, scenario_sha=_setting(settings, "scenario_sha", str, "the scenario's hash"),
                      num_jobs=_setting(settings, "num_jobs", int, "the jobs per episode"), split=split,
                      seeds=tuple(seeds), agents=tuple(agents), env_version=env_version)


def _check_row_fits(claim: EntryClaim, number: int, row: dict[str, Any]) -> None:
    """Rejected unless row ``number`` was played on the claim's scenario, workload, agents and seeds."""
    where = f"row {number} ({show(row['agent'])}, {show(row['scenario'])}, seed {show(row['seed'])})"
    for key, field, want in (("scenario", "scenario", claim.scenario),
                             ("scenario_sha", "scenario_sha", claim.scenario_sha),
                             ("jobs", "num_jobs", claim.num_jobs)):
        if row.get(key) != want or isinstance(row.get(key), bool):
            raise Rejected(f"{where}: {key} is {row.get(key)!r}, settings.{field} is {want!r}; every episode of an "
                           "entry is played on the scenario and workload its settings name")
    if row["agent"] not in claim.agents:
        raise Rejected(f"{where}: agent {row['agent']!r} is not one of settings.agents "
                       f"({', '.join(show(a) for a in claim.agents)})")
    if row["seed"] not in claim.seeds or isinstance(row["seed"], bool):
        raise Rejected(f"{where}: seed {row['seed']!r} is not one of settings.seeds "
                       f"({claim.seeds[0]}..{claim.seeds[-1]})")


def check_one_row_each(rows: Sequence[dict[str, Any]], agents: Sequence[str], seeds: Sequence[int],
                       numbers: Sequence[int] | None = None) -> None:
    """Rejected unless ``rows`` hold exactly one row per agent of ``agents`` and seed of ``seeds``.

    :param numbers: the rows' numbers in messages (default 0, 1, ...).
    :raises Rejected: naming two rows of the same agent and seed, or an agent's missing seeds.
    """
    numbers = list(range(len(rows))) if numbers is None else list(numbers)
    first: dict[tuple[str, int], int] = {}
    for number, row in zip(numbers, rows):
        pair = (row["agent"], row["seed"])
        if pair in first:
            raise Rejected(f"rows {first[pair]} and {number} are both of agent {show(pair[0])}, "
                           f"seed {show(pair[1])}; an entry holds one episode per agent and seed")
        first[pair] = number
    for agent in agents:
        missing = [s for s in seeds if (agent, s) not in first]
        if missing:
            raise Rejected(f"agent {show(agent)} has no episode of seed(s) {', '.join(map(str, missing))} of the "
                           f"{len(seeds)} seeds the settings list; every agent plays every seed")


def rerecord_command(settings: dict[str, Any], out: str) -> str:
    """The ``sfenv evaluate`` command that records an entry of these settings again, into ``out``.

    :param settings: an entry's settings (agents, scenario, num_jobs, split, seeds).
    :param out: the file to write.
    """
    agents = ",".join(settings.get("agents") or [])
    return (f"sfenv evaluate --agents {agents} --scenario {settings.get('scenario')} --num-jobs "
            f"{settings.get('num_jobs')} --split {settings.get('split')} --seeds {len(settings.get('seeds') or [])} "
            f"--record-actions --overwrite --quiet --out {out}")
