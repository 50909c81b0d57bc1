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
  and protocol (``protocol``) by an sfenv whose version (``sfenv_version``) is a PEP 440 version;
- each agent's settings are those :func:`sfenv.app.evaluate.agent_settings` writes for its kind, key
  for key with their JSON types (:data:`AGENT_SETTINGS_KEYS`); with ``check_agent``
  (:func:`sfenv.app.evaluate.check_agent_settings`, as ``sfenv validate`` passes it) also against the
  agents: a built-in agent's ``kwargs`` are keywords its constructor takes, a saved model's its play
  settings, a plug-in's those its spec names;
- every row holds only the fields the evaluator writes (:data:`ROW_KEYS`), those the replay does not
  compare of their JSON types;
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

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

from sfenv.errors import InvalidInput
from sfenv.runs import protocol
from sfenv.runs.replay import Rejected, entry_rows, show
from sfenv.runs.results import FORMAT
from sfenv.sim.metrics import EpisodeReport

__all__ = ["AGENT_SETTINGS_KEYS", "ENTRY_KEYS", "ROW_KEYS", "SETTINGS_KEYS", "AgentCheck", "EntryClaim",
           "check_entry", "check_one_row_each", "rerecord_command"]

#: the top-level keys of an entry: those :func:`sfenv.runs.results.results_document` writes
ENTRY_KEYS = ("format", "settings", "episodes")
#: the keys of an entry's settings: those of :func:`sfenv.app.evaluate.run_settings` with seeds and action logs
SETTINGS_KEYS = ("sfenv_version", "scenario", "scenario_sha", "num_jobs", "split", "seeds", "protocol",
                 "record_actions", "env_version", "agents")

#: the longest ``sfenv_version`` an entry may record
MAX_VERSION_CHARS = 64
#: a PEP 440 version in its normalised form (as ``sfenv.__version__`` is written), a local label allowed
_PEP440 = re.compile(r"([1-9][0-9]*!)?(0|[1-9][0-9]*)(\.(0|[1-9][0-9]*))*((a|b|rc)(0|[1-9][0-9]*))?"
                     r"(\.post(0|[1-9][0-9]*))?(\.dev(0|[1-9][0-9]*))?(\+[a-z0-9]+(\.[a-z0-9]+)*)?")

#: a check of a JSON value and what it says the value must be
Check = tuple[Callable[[Any], bool], str]


def _text(value: Any) -> bool:
    return isinstance(value, str)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _object(value: Any) -> bool:
    return isinstance(value, dict)


_TEXT: Check = (_text, "text")
_TEXT_OR_NULL: Check = (lambda v: v is None or _text(v), "text or null")
_OBJECT: Check = (_object, "an object")
_TRUE: Check = (lambda v: v is True, "true (written only when on)")
_FLAG: Check = (lambda v: isinstance(v, bool), "true or false")
_SECONDS: Check = (lambda v: _number(v) and math.isfinite(v) and v >= 0, "a number of seconds >= 0")
_COUNT: Check = (_count, "an integer >= 0")
#: fields the replay checks with their types (:func:`sfenv.runs.replay.check_row`) or that are checked before
_REPLAYED: Check = (lambda v: True, "")

#: every key a row of an entry may hold, with its JSON type: what :func:`sfenv.app.evaluate.run_episode` (a
#: scheduler, serial or on a Ray worker) and :func:`~sfenv.app.evaluate.run_policy_episode` (a saved policy:
#: ``stopped_early``, its play settings and deferral) write with ``--record-actions``
ROW_KEYS: dict[str, Check] = {
    **{f.name: _REPLAYED for f in fields(EpisodeReport)},  # compared with the replay, of its JSON type
    "agent": _TEXT, "scenario": _TEXT, "seed": _REPLAYED, "scenario_sha": _TEXT, "actions": _REPLAYED,
    "jcts_s": _REPLAYED, "jct_censored": _REPLAYED, "decisions": _REPLAYED,
    "decision_time_mean_s": _SECONDS, "decision_time_max_s": _SECONDS,
    "carbon_signal": _TEXT, "carbon_fallback_zones": _TEXT,  # a scenario with carbon data
    "privileged_carbon": _TRUE, "stopped_early": _FLAG, "privileged_obs": _TRUE, "work_conserving": _TRUE,
    "min_relative_mfu": (_number, "a number"), "min_spread_speedup": (_number, "a number"), "spread_wait": _TEXT,
    "floor_exempt": _TEXT, "floor_exempt_from": _TEXT,
    "defer_to": _TEXT, "defer_margin": (lambda v: _number(v) or _text(v), "a number or text"), "deferred": _COUNT,
}
#: the keys every row of an entry holds besides its metrics (those the replay requires)
_ROW_REQUIRED = ("agent", "scenario", "seed", "scenario_sha", "actions", "decision_time_mean_s", "decision_time_max_s")

#: each kind of agent's settings, as :func:`sfenv.app.evaluate.agent_settings` writes them: key -> JSON type
AGENT_SETTINGS_KEYS: dict[str, dict[str, Check]] = {
    "built-in agent": {"kwargs": (_object, "an object of its constructor's keywords"),
                       "revision": ((lambda v: _count(v) and v >= 1), "an integer >= 1")},
    "saved model": {"algo": _TEXT_OR_NULL, "model_sha": _TEXT_OR_NULL, "kwargs": _OBJECT},
    "RLlib checkpoint": {"checkpoint": _TEXT},
    "plug-in": {"plugin": _TEXT, "source": ((lambda v: v in ("file", "module")), "'file' or 'module'"),
                "source_sha": _TEXT, "kwargs": _OBJECT},
    "entry-point agent": {"plugin": _TEXT, "source": ((lambda v: v == "entry point"), "'entry point'"),
                          "value": _TEXT, "distribution": _TEXT},
    "agent instance": {"class": _TEXT},
}
#: the keys each kind's writer may leave out
_AGENT_OPTIONAL = {"built-in agent": {"revision"}, "saved model": {"kwargs"}}

#: a check of an agent's settings that knows the agents (:func:`sfenv.app.evaluate.check_agent_settings`): given
#: the agent's name and its settings (their keys and types checked), a sentence saying what is wrong, or None
AgentCheck = Callable[[str, dict[str, Any]], str | None]


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
                min_seeds: int = protocol.MIN_ENTRY_SEEDS, *,
                check_agent: AgentCheck | None = None) -> tuple[EntryClaim, list[dict[str, Any]]]:
    """Check that ``data`` (a results file's content) is a whole leaderboard entry; nothing is replayed.

    :param source: the file's name, for messages.
    :param split: the split the entry must claim (the leaderboard's: ``test``).
    :param min_seeds: the fewest seeds per agent.
    :param check_agent: what checks each agent's settings against the agents it names (a built-in agent's
        keywords, a plug-in's spec): ``sfenv validate`` passes :func:`sfenv.app.evaluate.check_agent_settings`
        (this layer knows no agent); without it only their keys and JSON types are checked.
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
    for name, value in settings["agents"].items():
        _check_agent_settings(name, value)
        problem = check_agent(name, value) if check_agent is not None else None
        if problem is not None:
            raise Rejected(f"settings.agents[{show(name)}]: {problem}")
    for number, row in enumerate(rows):
        _check_row_keys(number, row)
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
    version = settings.get("sfenv_version")
    if not isinstance(version, str) or len(version) > MAX_VERSION_CHARS or not _PEP440.fullmatch(version):
        raise Rejected(f"settings.sfenv_version is {version!r:.80}; an entry records the version of the sfenv that "
                       f"wrote it (a PEP 440 version such as '0.1.0', at most {MAX_VERSION_CHARS} characters)")
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


def _agent_kinds(name: str) -> tuple[str, ...]:
    """The kinds of agent whose settings ``name`` may have: those its form allows, or an agent instance's.

    ``model:`` and ``rllib:`` name saved policies, a name with a colon a plug-in spec; any other name is a
    built-in agent's or an installed entry point's (which, is :func:`sfenv.app.evaluate.check_agent_settings`'s
    to say: this layer knows no agent).
    """
    if name.startswith("model:"):
        return "saved model", "agent instance"
    if name.startswith("rllib:"):
        return "RLlib checkpoint", "agent instance"
    if ":" in name:
        return "plug-in", "agent instance"
    return "built-in agent", "entry-point agent", "agent instance"


def _check_agent_settings(name: str, value: Any) -> None:
    """Rejected unless ``value`` has the keys the evaluator writes in ``settings.agents`` for one kind of agent.

    The kind is one the name allows (:func:`_agent_kinds`), the one whose keys ``value`` holds; every key of it
    (:data:`AGENT_SETTINGS_KEYS`) but those it may leave out, no other, each of its JSON type; a plug-in's and an
    entry point's ``plugin`` is the agent's name.
    """
    where = f"settings.agents[{show(name)}]"
    if not isinstance(value, dict):
        raise Rejected(f"{where} is {value!r:.80}; each agent's settings are an object")
    kinds = _agent_kinds(name)
    kind = next((k for k in kinds if set(value) & set(AGENT_SETTINGS_KEYS[k])), kinds[0])
    keys = AGENT_SETTINGS_KEYS[kind]
    unknown = sorted(set(value) - set(keys))
    if unknown:
        raise Rejected(f"{where}: unknown key(s) {', '.join(show(k) for k in unknown)}; the settings of {kind}s "
                       f"hold only {', '.join(keys)}")
    missing = [k for k in keys if k not in value and k not in _AGENT_OPTIONAL.get(kind, ())]
    if missing:
        raise Rejected(f"{where}: no {', '.join(missing)}; the settings of {kind}s hold {', '.join(keys)}")
    for key, (ok, what) in keys.items():
        if key in value and not ok(value[key]):
            raise Rejected(f"{where}: {key} is {value[key]!r:.80}, expected {what}")
    if "plugin" in keys and value["plugin"] != name:
        raise Rejected(f"{where}: plugin is {value['plugin']!r:.80}; a plug-in's settings name the agent itself")


def _check_row_keys(number: int, row: dict[str, Any]) -> None:
    """Rejected unless row ``number`` holds only the fields the evaluator writes (:data:`ROW_KEYS`), of their types.

    Its metrics, per-job lists, ``decisions`` and action log are the replay's to check.
    """
    where = f"row {number} ({show(row.get('agent'))}, {show(row.get('scenario'))}, seed {show(row.get('seed'))})"
    unknown = sorted(set(row) - set(ROW_KEYS))
    if unknown:
        raise Rejected(f"{where}: unknown key(s) {', '.join(show(k) for k in unknown)}; a row holds only the fields "
                       "sfenv evaluate --record-actions writes (sfenv.runs.entry.ROW_KEYS)")
    missing = [k for k in _ROW_REQUIRED if k not in row]
    if missing:
        raise Rejected(f"{where}: no {', '.join(missing)}; sfenv evaluate --record-actions writes it in every row")
    for key, (ok, what) in ROW_KEYS.items():
        if key in row and not ok(row[key]):
            raise Rejected(f"{where}: {key} is {row[key]!r:.80}, expected {what}")


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
