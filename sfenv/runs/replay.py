"""Action logs of episodes and their replay: what ``sfenv validate`` checks a submitted entry with.

An episode's **action log** is everything the scheduler told the simulator, in order:

- ``decisions``: one entry per decision point (``Simulator.run`` asks ``decide``): a plan
  (:func:`plan_to_json`) that was started, or ``None`` for wait;
- ``replans``: one list of plans per call of the re-planning hook (empty lists included);
- ``replan_hourly`` (present and true only for an agent that asked for it): the hook was also
  called at every hour boundary while a job ran (:meth:`sfenv.sim.Simulator.set_replanner`).

Any scheduler's episode reduces to it, a learned policy's too: through the environment a start
action is the candidate plan it names, wait (or a forced wait) is ``None``, and a masked action
changes nothing and is not logged.  Given the scenario and the seed the simulator is
deterministic, so :func:`replay` replays the log with :meth:`sfenv.sim.Simulator.run` and gets
the episode's report back; :func:`check_row` compares it with the metrics a results row claims.

A row of an entry (``sfenv evaluate --record-actions``) carries ``actions`` (the log) and
``scenario_sha`` (:func:`scenario_sha` of the scenario it was played on, the workload size
included), besides ``scenario``, ``seed`` and the metrics.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any, overload

from sfenv.errors import InvalidInput
from sfenv.model.perf import Plan, Stage
from sfenv.runs.results import scenario_hash
from sfenv.scenario import Scenario
from sfenv.sim import make_simulator
from sfenv.sim.metrics import ADDED_REPORT_FIELDS, EpisodeReport, JobRecord

__all__ = [
    "COMPARED_FIELDS",
    "ROW_FIELDS",
    "ActionRecorder",
    "Rejected",
    "bundled_scenario",
    "check_row",
    "check_split_label",
    "entry_rows",
    "jct_fields",
    "plan_from_json",
    "plan_to_json",
    "replay",
    "scenario_sha",
    "validate_rows",
]


class Rejected(Exception):
    """An entry whose replay differs from what it claims (``sfenv validate`` exits 1).

    The message names the first difference.
    """

#: the metrics a replay must reproduce exactly: every episode-report field (and the per-job ``jcts_s``)
COMPARED_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(EpisodeReport))


def scenario_sha(sc: Scenario) -> str:
    """The scenario's hash, as results files record it (:func:`sfenv.runs.results.scenario_hash`)."""
    return scenario_hash(sc)


def jct_fields(records: Sequence[JobRecord], end: float) -> dict[str, list]:
    """Per-job JCTs of the jobs that arrived, unfinished ones censored at ``end``, with their flags.

    The evaluator's rows carry these (``jcts_s``, ``jct_censored``); a replay must reproduce them.
    """
    arrived = [r for r in records if r.arrived_by(end)]
    return {"jcts_s": [r.censored_jct(end) for r in arrived], "jct_censored": [not r.finished for r in arrived]}


def _init_fields(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if f.init]


@overload
def plan_to_json(plan: Plan) -> dict[str, Any]: ...


@overload
def plan_to_json(plan: Plan | None) -> dict[str, Any] | None: ...


def plan_to_json(plan: Plan | None) -> dict[str, Any] | None:
    """A plan as plain JSON data (None stays None, meaning wait): every constructor field of the plan and its stages."""
    if plan is None:
        return None
    data: dict[str, Any] = {name: getattr(plan, name) for name in _init_fields(Plan)
                            if name not in ("stages", "routes")}
    if plan.routes:  # pinned routes (sim.routing "load"); left out when none, as logs before them were written
        data["routes"] = [list(r) for r in plan.routes]
    data["stages"] = [{"layers": s.layers, "tp": s.tp, "placement": [[int(r), int(n)] for r, n in s.placement]}
                      for s in plan.stages]
    return data


def plan_from_json(data: dict[str, Any] | None) -> Plan | None:
    """The plan :func:`plan_to_json` wrote.

    :raises InvalidInput: for data that is not such a plan (a missing or unknown field, a bad value).
    """
    if data is None:
        return None
    try:
        unknown = set(data) - set(_init_fields(Plan))
        if unknown:
            raise ValueError(f"unknown fields {sorted(unknown)}")
        stages = tuple(Stage(int(s["layers"]), tuple((int(r), int(n)) for r, n in s["placement"]), int(s["tp"]))
                       for s in data["stages"])
        routes = tuple(tuple(int(k) for k in r) for r in data.get("routes", ()))
        return Plan(**{**data, "stages": stages, "routes": routes})
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InvalidInput(f"action log: not a plan ({type(exc).__name__}: {exc})") from None


class ActionRecorder:
    """Wraps a ``decide`` (and a re-planning hook) and logs what they return.

    :param decide: the scheduler's ``decide(view) -> Plan | None``.
    :param replan: its re-planning hook, or None.
    :param replan_hourly: the hook is also called at every hour boundary (recorded in the log).
    """

    def __init__(self, decide: Callable[[Any], Plan | None], replan: Callable[[Any], Iterable[Plan]] | None = None,
                 replan_hourly: bool = False):
        self._decide, self._replan = decide, replan
        self.replan_hourly = replan_hourly and replan is not None
        self.decisions: list[dict | None] = []
        self.replans: list[list[dict]] = []

    def decide(self, view: Any) -> Plan | None:
        """Call the wrapped ``decide`` and log its plan."""
        plan = self._decide(view)
        self.decisions.append(plan_to_json(plan))
        return plan

    def replan(self, view: Any) -> list[Plan]:
        """Call the wrapped hook and log its plans."""
        assert self._replan is not None
        plans = list(self._replan(view))
        self.replans.append([plan_to_json(p) for p in plans])
        return plans

    def log(self) -> dict[str, Any]:
        """The action log: ``{"decisions": [...], "replans": [...]}`` (and ``"replan_hourly": true`` if so)."""
        out: dict[str, Any] = {"decisions": list(self.decisions), "replans": [list(r) for r in self.replans]}
        if self.replan_hourly:
            out["replan_hourly"] = True
        return out


def replay(scenario: Scenario, seed: int, log: dict[str, Any]) -> dict[str, Any]:
    """Replay an action log on ``make_simulator(scenario, seed)``; returns the report and per-job JCTs.

    The log must play the episode to the end the simulator defines (:attr:`sfenv.sim.Simulator.done`:
    every job finished, or the horizon or a dead end reached) and be used up by then: a log cut short
    would end the episode early, with every unfinished job censored at an early time (a far better
    JCT), so it is refused; so are decisions or re-planning entries left over.

    :raises InvalidInput: for a malformed log, a log that ends before the episode does, decisions or
        re-planning entries left over after it ended, or a decision the simulator refuses.
    """
    from sfenv.sim import InvalidDecision

    if not isinstance(log, dict) or not isinstance(log.get("decisions"), list) \
            or not isinstance(log.get("replans", []), list):
        raise InvalidInput("action log: expected {'decisions': [...], 'replans': [...]}")
    hourly = log.get("replan_hourly", False)
    if not isinstance(hourly, bool):
        raise InvalidInput(f"action log: replan_hourly {hourly!r}: expected true or false")
    decisions = [plan_from_json(d) for d in log["decisions"]]
    replans = [[plan_from_json(p) for p in r] for r in log.get("replans", [])]
    pos = {"d": 0, "r": 0}

    def decide(view: Any) -> Plan | None:
        i = pos["d"]
        pos["d"] += 1
        return decisions[i]

    def replan(view: Any) -> list[Plan]:
        i = pos["r"]
        if i >= len(replans):
            raise InvalidInput(f"action log: the simulator re-planned a {i + 1}th time; the log holds {len(replans)}")
        pos["r"] += 1
        return [p for p in replans[i] if p is not None]

    sim = make_simulator(scenario, seed)
    try:
        report = sim.run(decide, max_decisions=len(decisions), replan=replan if replans else None,
                         replan_hourly=hourly)
    except InvalidDecision as exc:
        raise InvalidInput(f"action log: decision {pos['d']} is refused by the simulator ({exc})") from None
    if not sim.done:
        unfinished = len(sim.jobs) - sim.finished_count
        held = f"{len(decisions)} decision{'' if len(decisions) == 1 else 's'}"
        raise InvalidInput(f"action log: it ends after {held}, at simulated time "
                           f"{sim.time / 3600:.3f} h, before the episode does ({unfinished} of {len(sim.jobs)} "
                           "jobs unfinished); a log must play the episode to its end (every job finished or "
                           "the horizon reached)")
    if pos["d"] != len(decisions):
        raise InvalidInput(f"action log: {len(decisions) - pos['d']} of its {len(decisions)} decisions left over "
                           f"after the episode ended (at decision {pos['d']})")
    if pos["r"] != len(replans):
        raise InvalidInput(f"action log: {len(replans) - pos['r']} re-planning entries left after the episode")
    row: dict[str, Any] = report.to_dict()
    row.update(jct_fields(sim.records(), report.makespan_s))
    return row


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        try:
            fa, fb = float(a), float(b)
        except (TypeError, ValueError):
            return False
        return fa == fb or (math.isnan(fa) and math.isnan(fb))
    return a == b


def check_row(row: dict[str, Any], replayed: dict[str, Any],
              fields: Sequence[str] = COMPARED_FIELDS) -> str | None:
    """The first metric of ``row`` that ``replayed`` does not reproduce, as a sentence, or None if all match.

    Floats must match exactly (the simulator is deterministic and JSON keeps floats exactly).  A row
    written before a field of :data:`sfenv.sim.metrics.ADDED_REPORT_FIELDS` existed (egress) is
    checked on the fields it has.
    """
    for name in fields:
        if name not in row and name in ADDED_REPORT_FIELDS:
            continue
        if name not in row:
            return f"{name} is missing"
        if not _same(row[name], replayed.get(name)):
            return f"{name} is {row[name]!r} in the file, {replayed.get(name)!r} on replay"
    claimed, got = row.get("jcts_s"), replayed.get("jcts_s")
    if claimed is not None and (got is None or len(claimed) != len(got)
                                or not all(_same(a, b) for a, b in zip(claimed, got))):
        return "jcts_s (per-job JCTs) differ from the replay"
    return None


#: the fields every row of an entry holds (besides its metrics)
ROW_FIELDS = ("agent", "scenario", "seed", "actions", "scenario_sha")


def entry_rows(data: Any, source: str = "entry") -> list[dict[str, Any]]:
    """The episode rows of a results file's content: a list of rows, or a mapping holding them.

    A mapping's rows are under ``episodes`` (a results file of :mod:`sfenv.runs.results`), ``rows`` or
    ``results`` (the first that is a list).

    :raises InvalidInput: if there are no rows, or a row lacks ``scenario``, ``seed`` or its action log, or its
        seed is not an integer.
    """
    rows = data
    if isinstance(data, dict):
        rows = next((data[k] for k in ("episodes", "rows", "results") if isinstance(data.get(k), list)), None)
    if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
        raise InvalidInput(f"{source}: no episode rows (expected a results file of sfenv evaluate --record-actions)")
    for i, r in enumerate(rows):
        missing = [k for k in ROW_FIELDS if k not in r]
        if missing:
            raise InvalidInput(f"{source}: row {i} has no {', '.join(missing)} "
                               "(record the entry with sfenv evaluate --record-actions)")
        if not isinstance(r["seed"], int) or isinstance(r["seed"], bool):
            raise InvalidInput(f"{source}: row {i} has seed {r['seed']!r:.80}, not an integer")
    return rows


def bundled_scenario(name: Any) -> Scenario:
    """The bundled scenario called ``name``, by name only: never a path, whatever files exist here.

    An entry's ``scenario`` field is data from whoever made the file: read as a path it could name any
    file of the validating machine (``/dev/zero`` made validate eat gigabytes).  A scenario file is
    given by the operator instead (``sfenv validate --scenario FILE``).

    :raises InvalidInput: if ``name`` is not the name of a bundled scenario (nothing is read then).
    """
    from importlib import resources

    import yaml

    from sfenv.scenario import bundled_scenarios

    if not isinstance(name, str) or name not in bundled_scenarios():
        shown = repr(name) if len(repr(name)) <= 80 else repr(name)[:77] + "..."
        raise InvalidInput(f"scenario {shown} is not the name of a bundled scenario (bundled: "
                           f"{', '.join(bundled_scenarios())}); a scenario file is given by the one who "
                           "validates (--scenario FILE), never read from an entry")
    text = resources.files("sfenv.scenarios").joinpath(f"{name}.yaml").read_text()
    return Scenario.from_dict(yaml.safe_load(text), f"scenarios/{name}.yaml")


def _where(number: int, row: dict[str, Any]) -> str:
    """How messages name a row: its number, agent, scenario and seed."""
    return f"row {number} ({row.get('agent')}, {row.get('scenario')}, seed {row.get('seed')})"


def _row_scenarios(rows: Sequence[dict[str, Any]], numbers: Sequence[int], given: Scenario | None,
                   own_workload: bool) -> list[Scenario]:
    """The scenario each row is replayed on: ``given`` or the row's bundled one, with the row's ``jobs`` if asked.

    :raises Rejected: for a row lacking a field, or naming no bundled scenario (before anything is replayed).
    """
    loaded: dict[tuple[str | None, int | None], Scenario] = {}
    out = []
    for number, row in zip(numbers, rows):
        missing = [k for k in ROW_FIELDS if k not in row]
        if missing:
            raise Rejected(f"{_where(number, row)}: no {', '.join(missing)} "
                           "(an entry is recorded with sfenv evaluate --record-actions)")
        if isinstance(row["seed"], bool) or not isinstance(row["seed"], int):
            raise Rejected(f"{_where(number, row)}: seed {row['seed']!r} is not an integer")
        jobs = row.get("jobs") if own_workload else None
        key = (None if given is not None else str(row["scenario"]), jobs if isinstance(jobs, int) else None)
        if key not in loaded:
            try:
                sc = given if given is not None else bundled_scenario(row["scenario"])
            except InvalidInput as exc:
                raise Rejected(f"{_where(number, row)}: {exc}") from None
            if key[1] is not None and key[1] != sc.cfg.workload.num_jobs:
                sc = sc.with_overrides(workload={"num_jobs": key[1]})
            loaded[key] = sc
        out.append(loaded[key])
    return out


def validate_rows(rows: Sequence[dict[str, Any]], scenario: Any = None,
                  progress: Callable[[str], None] | None = None, *, numbers: Sequence[int] | None = None,
                  own_workload: bool = True) -> int:
    """Replay every row's action log to the episode's end and check its metrics; returns the number of episodes checked.

    Each row alone: what the file claims as a whole (one row per agent and seed, the seeds of a split,
    the settings) is :func:`sfenv.runs.entry.check_entry`'s.

    :param scenario: the scenario the rows were played on, given by the one who validates (a name, a
        file or a Scenario); default: each row's ``scenario`` as a bundled name only
        (:func:`bundled_scenario`: a path there is refused before anything is read).
    :param numbers: the rows' numbers in messages (default 0, 1, ...: e.g. their places in a file).
    :param own_workload: replay each row with its own workload size (its ``jobs``); False: every row
        must have been played on ``scenario`` exactly as given (its hash).
    :raises Rejected: at the first row lacking a field, naming no bundled scenario, or whose scenario
        hash or metrics the replay does not reproduce (a log cut short or with decisions left over included).
    :raises InvalidInput: for a ``scenario`` that cannot be loaded or a malformed action log.
    """
    from sfenv.scenario import load_scenario

    numbers = list(range(len(rows))) if numbers is None else list(numbers)
    given = None if scenario is None else load_scenario(scenario)
    for number, row, sc in zip(numbers, rows, _row_scenarios(rows, numbers, given, own_workload)):
        where = _where(number, row)
        if scenario_sha(sc) != row["scenario_sha"]:
            raise Rejected(f"{where}: scenario hash {row['scenario_sha']} is not that of {sc.name!r} with "
                           f"{sc.cfg.workload.num_jobs} jobs ({scenario_sha(sc)})")
        try:
            replayed = replay(sc, row["seed"], row["actions"])
        except InvalidInput as exc:
            raise Rejected(f"{where}: {exc}") from None
        diff = check_row(row, replayed)
        if diff is not None:
            raise Rejected(f"{where}: {diff}")
        if progress is not None:
            progress(f"{where}: ok")
    return len(rows)


def check_split_label(settings: dict[str, Any] | None, rows: Sequence[dict[str, Any]]) -> None:
    """Reject an entry whose settings label its seeds with a split they are not the first seeds of.

    :raises Rejected: naming the label and the seeds.
    """
    from sfenv.runs import protocol

    if not settings or settings.get("split") in (None, protocol.EXPLICIT):
        return
    seeds = sorted({int(r["seed"]) for r in rows})
    scenario = settings.get("scenario")
    try:
        protocol.SeedChoice(tuple(seeds), str(settings["split"]), scenario if isinstance(scenario, str) else None)
    except InvalidInput as exc:
        raise Rejected(f"settings: {exc}") from None
