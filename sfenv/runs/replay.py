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
    "LOG_KEYS",
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
    "show",
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


def show(value: Any) -> str:
    """``value`` for a message line: a string from a file as it is if printable, else its ``repr``.

    Text from a submitted file (an agent's name, a scenario) is printed with control characters
    escaped, so a carriage return or an escape sequence cannot rewrite the line it is printed on, and a
    newline cannot split it; anything that is not a string is shown by its ``repr``.
    """
    if isinstance(value, str) and value.isprintable():
        return value
    return repr(value)


def _int_field(data: dict[str, Any], key: str, where: str, least: int) -> int:
    """``data[key]``, which must be a JSON integer (not a bool) of at least ``least``."""
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise InvalidInput(f"{where}: {key} is {value!r}, expected an integer >= {least}")
    return value


def _typed_field(data: dict[str, Any], key: str, where: str, kind: type, what: str) -> Any:
    """``data[key]``, which must be exactly a JSON ``kind`` (``what`` names it in the message)."""
    value = data[key]
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise InvalidInput(f"{where}: {key} is {value!r}, expected {what}")
    return value


def _stage_from_json(data: Any, where: str) -> Stage:
    """One stage of :func:`plan_to_json`: exactly ``layers``, ``tp`` and ``placement``, each of its JSON type."""
    if not isinstance(data, dict) or set(data) != {"layers", "tp", "placement"}:
        raise InvalidInput(f"{where}: expected {{'layers', 'tp', 'placement'}}, got {data!r}"[:300])
    layers, tp = _int_field(data, "layers", where, 1), _int_field(data, "tp", where, 1)
    placement = data["placement"]
    if not isinstance(placement, list) or not placement:
        raise InvalidInput(f"{where}: placement is {placement!r}, expected a non-empty list of [region, replicas]")
    pairs = []
    for k, pair in enumerate(placement):
        if not isinstance(pair, list) or len(pair) != 2:
            raise InvalidInput(f"{where}: placement[{k}] is {pair!r}, expected [region, replicas]")
        named = {"region": pair[0], "replicas": pair[1]}
        pairs.append((_int_field(named, "region", f"{where}: placement[{k}]", 0),
                      _int_field(named, "replicas", f"{where}: placement[{k}]", 1)))
    regions = [r for r, _ in pairs]
    if len(set(regions)) != len(regions):
        raise InvalidInput(f"{where}: placement names a region twice ({placement!r}); a stage lists each "
                           "region once with its replicas")
    return Stage(layers, tuple(pairs), tp)


def _routes_from_json(data: Any, where: str) -> tuple[tuple[int, ...], ...]:
    """Pinned routes: a non-empty list of non-empty lists of link indices (JSON integers >= 0)."""
    if not isinstance(data, list) or not data:
        raise InvalidInput(f"{where}: routes is {data!r}, expected a non-empty list of routes (lists of link "
                           "indices)"[:300])
    for k, route in enumerate(data):
        if not isinstance(route, list) or not route \
                or not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in route):
            raise InvalidInput(f"{where}: routes[{k}] is {route!r}, expected a non-empty list of link indices "
                               "(integers >= 0)"[:300])
    return tuple(tuple(route) for route in data)


#: a logged plan's fields besides its stages and routes: (name, JSON type, least value or None)
_PLAN_SCALARS: tuple[tuple[str, type, int | None], ...] = (
    ("job_id", int, 0), ("micro_batch", int, 1), ("extra_inflight", int, 0), ("schedule", str, None),
    ("recompute", str, None), ("sequence_parallel", bool, None))


def plan_from_json(data: dict[str, Any] | None, where: str = "action log") -> Plan | None:
    """The plan :func:`plan_to_json` wrote, every field of its exact JSON type.

    Integers must be JSON integers (not bools, not ``1.75`` or ``"3"``: nothing is rounded or
    converted), ``sequence_parallel`` a bool, ``schedule`` and ``recompute`` strings, the stages
    lists of ``{"layers", "tp", "placement"}`` whose placement names each region once, and pinned
    ``routes`` (when present) lists of link indices.  A value the plan's semantics rule out (a
    micro-batch below one, a negative window, a stage without layers) is refused here too.

    :param where: how messages name the plan (e.g. ``"action log: decision 3"``).
    :raises InvalidInput: naming ``where`` and the field, for data that is not such a plan.
    """
    if data is None:
        return None
    if not isinstance(data, dict):
        raise InvalidInput(f"{where}: not a plan ({data!r})"[:300])
    fields = set(_init_fields(Plan))
    unknown, missing = set(data) - fields, fields - set(data) - {"routes"}
    if unknown or missing:
        what = f"unknown fields {sorted(unknown)}" if unknown else f"no {', '.join(sorted(missing))}"
        raise InvalidInput(f"{where}: not a plan ({what})")
    values: dict[str, Any] = {}
    for key, kind, least in _PLAN_SCALARS:
        values[key] = (_int_field(data, key, where, least) if least is not None
                       else _typed_field(data, key, where, kind, "true or false" if kind is bool else "a string"))
    stages = data["stages"]
    if not isinstance(stages, list) or not stages:
        raise InvalidInput(f"{where}: stages is {stages!r}, expected a non-empty list"[:300])
    values["stages"] = tuple(_stage_from_json(s, f"{where}: stages[{k}]") for k, s in enumerate(stages))
    values["routes"] = _routes_from_json(data["routes"], where) if "routes" in data else ()
    return Plan(**values)


#: the keys of an action log (:meth:`ActionRecorder.log`; ``replan_hourly`` only when true)
LOG_KEYS = ("decisions", "replans", "replan_hourly")


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


def _check_routes(decisions: Sequence[Plan | None], replans: Sequence[Sequence[Plan | None]], sim: Any) -> None:
    """Every plan's pinned routes fit it: one route per cross-region transfer, each a path of the topology's links.

    :raises InvalidInput: naming the decision or re-planning entry and what does not fit.
    """
    from sfenv.model.perf import plan_wan_transfers

    named = [(f"decision {i}", p) for i, p in enumerate(decisions)]
    named += [(f"replans[{i}][{k}]", p) for i, r in enumerate(replans) for k, p in enumerate(r)]
    links = sim.topo.num_links
    for where, plan in named:
        if plan is None or not plan.routes or not 0 <= plan.job_id < len(sim.jobs):
            continue  # an unknown job is the simulator's to refuse
        transfers = plan_wan_transfers(plan, sim.jobs[plan.job_id].spec)
        if len(plan.routes) != len(transfers):
            raise InvalidInput(f"action log: {where}: routes pins {len(plan.routes)} routes for the plan's "
                               f"{len(transfers)} cross-region transfers")
        for k, (route, (a, b, *_)) in enumerate(zip(plan.routes, transfers)):
            try:
                if max(route) >= links:
                    raise ValueError(f"link {max(route)} of {links}")
                sim.topo.directed_route(a, b, route)
            except ValueError as exc:
                raise InvalidInput(f"action log: {where}: routes[{k}] is not a route from region {a} to {b} "
                                   f"({exc})") from None


def replay(scenario: Scenario, seed: int, log: dict[str, Any]) -> dict[str, Any]:
    """Replay an action log on ``make_simulator(scenario, seed)``; returns the report and per-job JCTs.

    The log holds only the keys :meth:`ActionRecorder.log` writes (:data:`LOG_KEYS`), and must play the
    episode to the end the simulator defines (:attr:`sfenv.sim.Simulator.done`:
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
    unknown = sorted(set(log) - set(LOG_KEYS))
    if unknown:
        raise InvalidInput(f"action log: unknown key(s) {', '.join(show(k) for k in unknown)}; a log holds only "
                           f"{', '.join(LOG_KEYS)} (ActionRecorder.log)")
    hourly = log.get("replan_hourly", False)
    if not isinstance(hourly, bool):
        raise InvalidInput(f"action log: replan_hourly {hourly!r}: expected true or false")
    decisions = [plan_from_json(d, f"action log: decision {i}") for i, d in enumerate(log["decisions"])]
    if not all(isinstance(r, list) for r in log.get("replans", [])):
        raise InvalidInput("action log: replans holds an entry that is not a list of plans")
    replans = [[plan_from_json(p, f"action log: replans[{i}][{k}]") for k, p in enumerate(r)]
               for i, r in enumerate(log.get("replans", []))]
    sim = make_simulator(scenario, seed)
    _check_routes(decisions, replans, sim)
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


def _number(value: Any) -> bool:
    """A JSON number: an int or a float, never a bool or a string."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _same_kind(claimed: Any, replayed: Any) -> bool:
    """``claimed`` is of the JSON type the replay gives: an integer for an integer, a number for a float."""
    if isinstance(replayed, bool):
        return isinstance(claimed, bool)
    if isinstance(replayed, int):
        return isinstance(claimed, int) and not isinstance(claimed, bool)
    if isinstance(replayed, float):
        return _number(claimed)
    return isinstance(claimed, type(replayed)) if replayed is not None else claimed is None


def _check_lists(row: dict[str, Any], replayed: dict[str, Any]) -> str | None:
    """The per-job lists (``jcts_s``, ``jct_censored``): present, of their JSON types, and as replayed."""
    for name, ok, kind in (("jcts_s", _number, "numbers"), ("jct_censored", lambda v: isinstance(v, bool), "bools")):
        claimed, got = row.get(name), replayed.get(name)
        if not isinstance(claimed, list) or not all(ok(v) for v in claimed):
            return f"{name} is missing" if claimed is None else f"{name} is not a list of {kind}"
        if got is None or len(claimed) != len(got) or not all(_same(a, b) for a, b in zip(claimed, got)):
            return f"{name} (per job) differ from the replay"
    return None


def _check_decisions(row: dict[str, Any]) -> str | None:
    """The row's ``decisions`` count against its action log.

    A scheduler's row counts every call of ``decide``, each logged; a policy's row (it records
    ``stopped_early``) counts its env steps, masked ones too, and its log may end with waits played
    after the step limit, so there the count is at least the plans it started.
    """
    count = row.get("decisions")
    if isinstance(count, bool) or not isinstance(count, int):
        return f"decisions is {'missing' if count is None else repr(count)}, expected an integer"
    log = row["actions"]["decisions"]
    if "stopped_early" in row:
        started = sum(d is not None for d in log)
        if count < started:
            return f"decisions is {count}, and the action log starts {started} plans"
    elif count != len(log):
        return f"decisions is {count}, and the action log holds {len(log)} decisions"
    return None


def check_row(row: dict[str, Any], replayed: dict[str, Any],
              fields: Sequence[str] = COMPARED_FIELDS) -> str | None:
    """The first metric of ``row`` that ``replayed`` does not reproduce, as a sentence, or None if all match.

    Every metric must be of the JSON type the replay gives (an integer for a count, a number for a
    float: never a string or a bool), and floats must match exactly (the simulator is deterministic
    and JSON keeps floats exactly).  The per-job ``jcts_s`` and ``jct_censored`` must be there and
    match; ``decisions`` must count the action log (:func:`_check_decisions`).  A row written before
    a field of :data:`sfenv.sim.metrics.ADDED_REPORT_FIELDS` existed (egress) is checked on the
    fields it has.
    """
    for name in fields:
        if name not in row and name in ADDED_REPORT_FIELDS:
            continue
        if name not in row:
            return f"{name} is missing"
        if not _same_kind(row[name], replayed.get(name)) or not _same(row[name], replayed.get(name)):
            return f"{name} is {row[name]!r} in the file, {replayed.get(name)!r} on replay"
    return _check_lists(row, replayed) or (_check_decisions(row) if isinstance(row.get("actions"), dict) else None)


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
    return f"row {number} ({show(row.get('agent'))}, {show(row.get('scenario'))}, seed {show(row.get('seed'))})"


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
            raise Rejected(f"{where}: scenario hash {show(row['scenario_sha'])} is not that of {sc.name!r} with "
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
