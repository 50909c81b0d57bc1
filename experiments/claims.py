"""Reproduce the seed papers' headline claims as ratios measured in sfenv, with plots.

Every claim is checked the same way: the system and its baselines run on the same seeded episodes
(:func:`sfenv.app.evaluate.evaluate_agents`), each seed gives a paired ratio of one metric, and the
claim's figure is the geometric mean of those ratios.  Its 95 % interval is a Student-t interval
of the mean per-seed log ratio (``--interval t``, default: exact for normal log ratios and
well-behaved at 10 seeds), or SciPy's bias-corrected and accelerated bootstrap of that mean
(``--interval bca``, :func:`scipy.stats.bootstrap`); the output names the method.  Pairing is by
seed: the ratio's two sides ran on the same workload.  The default is 10 seeds per scenario (a
percentile bootstrap over 3 seeds, as before, has 10 distinct resamples and overstates precision).
The verdict compares the point estimate with the range the source gives; the table also says
whether the interval excludes "no effect" (1x, 0 %).

Claims (as the project research brief on the seed papers gives them; all agents are our
re-implementations):

- SpiderFlow (abstract): JCT 1.2-1.3x lower, throughput 1.12-1.25x higher and scheduling overhead
  20-90x lower than ILP- and genetic-based schedulers, on 8 real and up to 64 simulated clusters
  (here: ``spiderflow`` vs ``ilp`` and ``genetic`` on spider-8/16/32/64; overhead = mean wall time
  per decision, also averaged over all sizes);
- BACE-Pipe (summaries): average JCT -27.9 to -64.7 % and electricity cost -12.6 to -30.6 % vs
  LCF, LDF, CR-LCF and CR-LDF (here: on bace-6); the cost claim is also checked on the whole bill,
  electricity plus the egress the clouds bill for bytes sent between regions (``total_cost_usd``;
  the source counts electricity only);
- the cross-region paradox (summary): the cross-region greedy baselines have a worse mean JCT than
  the single-region ones (about +29 % CR-LDF vs LDF, +13 % CR-LCF vs LCF);
- SpanTrain (abstract): 1.3-2.8x training throughput over "widely used training systems" (here: vs
  the FIFO first-fit planner, whose pipelines go through the same plan completion as every agent's
  but keep 1F1B, and vs ``ddp``, data parallelism across regions with a WAN all-reduce, both in
  arrival order, on the cloud-edge-end ``cee`` scenario).  The throughput metric is the mean
  per-job run rate (tokens per second of a job's run time, :mod:`sfenv.sim.metrics`), not the
  system's throughput; mean JCT is reported beside it (the source claims nothing about JCT).
  An ablation says what wins (review finding 5): ``spantrain-placement`` (SpanTrain's placement
  alone: 1F1B, micro-batch 1, plain window, no adapter), ``spantrain-zb`` (+ zero-bubble) and
  ``spantrain`` (+ the adapter's micro-batch and window menu), each step against the previous.

Outputs in ``--out`` (default ``results/claims``): ``runs-<scenario>.json`` (one row per agent and
seed, written atomically after every episode, so an interrupted run resumes where it stopped),
``config.json`` (a resumed run must use the same settings), ``claims.json`` and ``claims.md``
(the measured figures), ``claims.png`` (each figure with its interval against the claimed band)
and ``overhead.png`` (decision time against the number of clusters, log-log).

Run: ``python -m sfenv.experiments.claims [--seeds 10] [--quick] [--only spiderflow,bace,spantrain]``;
``--report-only`` measures and plots the runs already in ``--out`` without running anything.
``--backend ray [--workers N] [--address ADDR]`` runs every episode as a Ray task (the ``ray``
extra; one Ray session for all scenarios, results identical to the serial run but the decision
times, which are measured wherever the episode runs).
``--split test`` plays the first N seeds of a protocol split (:mod:`sfenv.runs.protocol`) instead of
explicit seeds 0..N-1; the report names the seeds either way.
``--quick`` (at most 10 jobs per episode, small ILP and genetic budgets) takes minutes.  At default
budgets the ILP baseline dominates: 20-40 s per decision on 16-64 clusters (12 MILPs with a 2 s
limit each), so the uncapped workloads (80-320 jobs) would take an estimated 50 CPU-hours at 10
seeds.  By default the SpiderFlow scenarios are therefore capped at :data:`JOB_CAPS` jobs per
episode (spider-8 keeps its 40; spider-16/32/64 run their first 12 jobs: the ILP makes more
unaffordable at 10 seeds: an estimated 3-4 hours on two cores); the output says so.  ``--num-jobs N`` caps
every scenario at N instead, ``--num-jobs 0`` runs the full workloads (split them with
``--scenarios`` or run them with ``--backend ray`` on a cluster).
"""

from __future__ import annotations

import contextlib
import math
import textwrap
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from sfenv.app.evaluate import evaluate_agents, quiet_solver_banner
from sfenv.app.script import ScriptParser
from sfenv.errors import InvalidInput
from sfenv.model.sharing import WAN_SHARING
from sfenv.registration import ENV_VERSION, PREVIOUS_VERSIONS, VERSION_SIM
from sfenv.runs import protocol
from sfenv.runs.progress import EpisodesBar
from sfenv.runs.results import atomic_write_json, read_results
from sfenv.scenario import load_scenario
from sfenv.world.files import MAX_YAML_BYTES, read_json

__all__ = [
    "CLAIMS",
    "DEFAULT_SEEDS",
    "INTERVALS",
    "JOB_CAPS",
    "QUICK_BUDGETS",
    "Claim",
    "interval",
    "job_caps",
    "load_runs",
    "main",
    "measure",
    "plot_claims",
    "plot_overhead",
    "run_claims",
]

SPIDER = ("spider-8", "spider-16", "spider-32", "spider-64")
#: seeds per scenario by default
DEFAULT_SEEDS = 10
#: default jobs per episode where the ILP baseline makes the full workload unaffordable at 10 seeds
JOB_CAPS: dict[str, int] = {"spider-16": 12, "spider-32": 12, "spider-64": 12}
#: interval methods: name -> what the output says
INTERVALS = {
    "t": "95 % Student-t interval of the mean per-seed log ratio (paired by seed)",
    "bca": "95 % BCa bootstrap interval (scipy.stats.bootstrap, 9999 resamples) of the mean per-seed log ratio "
           "(paired by seed)",
}
THROUGHPUT_NOTE = "mean per-job run rate: tokens per second of each job's run time, not system throughput"
#: small search budgets for ``--quick`` (the same as the default test run's)
QUICK_BUDGETS: dict[str, dict[str, Any]] = {
    "ilp": {"time_limit": 0.5, "dp_options": (1, 2), "max_regions": 8},
    "genetic": {"population": 12, "generations": 4},
}
#: how a per-seed ratio q = system / baseline turns into the claim's figure
KINDS = {
    "lower": "baseline / system (x)",  # the system's metric is lower by this factor
    "higher": "system / baseline (x)",  # the system's metric is higher by this factor
    "reduction": "reduction vs baseline (%)",
    "increase": "increase vs baseline (%)",
}


@dataclass(frozen=True)
class Claim:
    """One checkable claim: ``system`` vs each of ``baselines`` on each of ``scenarios``.

    :param metric: a column of the evaluator's rows (``mean_jct_s``, ``cost_usd``, ...).
    :param kind: how the paired ratio is expressed, one of :data:`KINDS`.
    :param low: lower end of the claimed range; ``high`` the upper end (``inf`` for "at least").
    :param pooled: also report one figure pooled over all scenarios (the claim is an average).
    """

    key: str
    group: str
    source: str
    text: str
    system: str
    baselines: tuple[str, ...]
    scenarios: tuple[str, ...]
    metric: str
    kind: str
    low: float
    high: float
    pooled: bool = False


CLAIMS: tuple[Claim, ...] = (
    Claim("spiderflow-jct", "spiderflow", "SpiderFlow abstract", "JCT 1.2-1.3x lower than ILP/GA schedulers",
          "spiderflow", ("ilp", "genetic"), SPIDER, "mean_jct_s", "lower", 1.2, 1.3),
    Claim("spiderflow-throughput", "spiderflow", "SpiderFlow abstract", "throughput 1.12-1.25x higher",
          "spiderflow", ("ilp", "genetic"), SPIDER, "mean_throughput_tokens_s", "higher", 1.12, 1.25),
    Claim("spiderflow-overhead", "spiderflow", "SpiderFlow abstract",
          "scheduling overhead 20-90x lower (average over 8-64 clusters)",
          "spiderflow", ("ilp", "genetic"), SPIDER, "decision_time_mean_s", "lower", 20.0, 90.0, pooled=True),
    Claim("bace-jct", "bace", "BACE-Pipe (summaries)", "mean JCT 27.9-64.7 % lower than LCF/LDF/CR-LCF/CR-LDF",
          "bace-pipe", ("lcf", "ldf", "cr-lcf", "cr-ldf"), ("bace-6",), "mean_jct_s", "reduction", 27.9, 64.7),
    Claim("bace-cost", "bace", "BACE-Pipe (summaries)", "electricity cost 12.6-30.6 % lower",
          "bace-pipe", ("lcf", "ldf", "cr-lcf", "cr-ldf"), ("bace-6",), "cost_usd", "reduction", 12.6, 30.6),
    Claim("bace-total-cost", "bace", "BACE-Pipe (summaries), on the whole bill (issue 31)",
          "electricity cost 12.6-30.6 % lower, checked on electricity + egress (bytes between regions)",
          "bace-pipe", ("lcf", "ldf", "cr-lcf", "cr-ldf"), ("bace-6",), "total_cost_usd", "reduction", 12.6, 30.6),
    Claim("paradox-ldf", "bace", "BACE-Pipe (summary)", "CR-LDF mean JCT worse than LDF (about +29 %)",
          "cr-ldf", ("ldf",), ("bace-6",), "mean_jct_s", "increase", 0.0, math.inf),
    Claim("paradox-lcf", "bace", "BACE-Pipe (summary)", "CR-LCF mean JCT worse than LCF (about +13 %)",
          "cr-lcf", ("lcf",), ("bace-6",), "mean_jct_s", "increase", 0.0, math.inf),
    Claim("spantrain-throughput", "spantrain", "SpanTrain abstract",
          "training throughput 1.3-2.8x higher (" + THROUGHPUT_NOTE + ")",
          "spantrain", ("fifo", "ddp"), ("cee",), "mean_throughput_tokens_s", "higher", 1.3, 2.8),
    Claim("spantrain-jct", "spantrain", "not claimed by the source (reported)", "mean JCT lower",
          "spantrain", ("fifo", "ddp"), ("cee",), "mean_jct_s", "lower", 1.0, math.inf),
    Claim("spantrain-ablation-placement", "spantrain", "ablation (review finding 5)",
          "placement only (1F1B, micro-batch 1, plain window, no adapter): throughput vs the claimed band",
          "spantrain-placement", ("fifo", "ddp"), ("cee",), "mean_throughput_tokens_s", "higher", 1.3, 2.8),
    Claim("spantrain-ablation-zb", "spantrain", "ablation (review finding 5)",
          "+ zero-bubble schedule: throughput vs placement only",
          "spantrain-zb", ("spantrain-placement",), ("cee",), "mean_throughput_tokens_s", "higher", 1.0, math.inf),
    Claim("spantrain-ablation-adapter", "spantrain", "ablation (review finding 5)",
          "+ adapter (micro-batch and window menu, run-time re-tune): throughput vs + zero-bubble",
          "spantrain", ("spantrain-zb",), ("cee",), "mean_throughput_tokens_s", "higher", 1.0, math.inf),
    Claim("spantrain-ablation-jct", "spantrain", "ablation (review finding 5)",
          "mean JCT: SpanTrain vs its ablation variants", "spantrain", ("spantrain-placement", "spantrain-zb"),
          ("cee",), "mean_jct_s", "lower", 1.0, math.inf),
)


def _select(only: Sequence[str] | None) -> list[Claim]:
    if not only:
        return list(CLAIMS)
    known = {c.group for c in CLAIMS} | {c.key for c in CLAIMS}
    bad = [o for o in only if o not in known]
    if bad:
        raise InvalidInput(f"unknown claim or group {bad}; known: {sorted(known)}")
    return [c for c in CLAIMS if c.group in only or c.key in only]


def restrict_scenarios(claims: Sequence[Claim], scenarios: Sequence[str]) -> list[Claim]:
    """The claims on ``scenarios`` only (claims left with none are dropped).

    :raises ValueError: for a scenario no selected claim uses.
    """
    used = {sc for c in claims for sc in c.scenarios}
    bad = [s for s in scenarios if s not in used]
    if bad:
        raise InvalidInput(f"no selected claim runs on {bad}; they run on {sorted(used)}")
    out = [replace(c, scenarios=tuple(s for s in c.scenarios if s in scenarios)) for c in claims]
    return [c for c in out if c.scenarios]


def _plan(claims: Sequence[Claim]) -> dict[str, list[str]]:
    """Scenario -> agents to run (first-seen order)."""
    plan: dict[str, list[str]] = {}
    for c in claims:
        for sc in c.scenarios:
            names = plan.setdefault(sc, [])
            for a in (c.system, *c.baselines):
                if a not in names:
                    names.append(a)
    return plan


def job_caps(scenarios: Sequence[str], num_jobs: int | None = None,
             caps: dict[str, int] | None = None) -> dict[str, int | None]:
    """Jobs per episode for each scenario: ``num_jobs`` for all, else ``caps`` (None: uncapped).

    A cap above a scenario's own workload size gives its size; None means the whole workload.
    """
    out: dict[str, int | None] = {}
    for sc in scenarios:
        cap = num_jobs if num_jobs is not None else (caps or {}).get(sc)
        out[sc] = None if cap is None else min(cap, load_scenario(sc).cfg.workload.num_jobs)
    return out


def run_claims(
    claims: Sequence[Claim],
    seeds: Sequence[int],
    out: Path,
    num_jobs: int | None = None,
    budgets: dict[str, dict[str, Any]] | None = None,
    progress: bool = True,
    backend: str = "serial",
    address: str | None = None,
    workers: int | None = None,
    caps: dict[str, int] | None = None,
    split: str | None = None,
    wan_sharing: str | None = None,
    env_version: str = ENV_VERSION,
) -> dict[str, list[dict[str, Any]]]:
    """Run (or resume) every episode the claims need; returns the rows per scenario.

    ``env_version``: the env version whose WAN model every scenario is played under (the current one,
    or an earlier one's settings, :data:`sfenv.registration.VERSION_SIM`, as its ids play them).  From
    env v6 on it is recorded in ``out``'s settings, so a v6 run never mixes with v5's (runs made before
    the option record none, and ``v5`` plays them as they were).

    ``wan_sharing``: the WAN sharing model (``sim.wan_sharing``, :data:`sfenv.model.sharing.WAN_SHARING`;
    None: ``env_version``'s, ``v5`` for env v5 and v6); ``v3`` to ``v5`` are recorded in ``out``'s
    settings, so their runs never mix with each other's or with ``v2``'s (env v2's runs, made before the
    option, record none).

    ``split``: the protocol split (:mod:`sfenv.runs.protocol`) whose first ``len(seeds)`` seeds of each
    scenario are played (``seeds`` is then ignored); None plays ``seeds`` as explicit seeds, and
    the results files say so.

    ``backend``, ``address`` and ``workers`` are the evaluator's (:func:`evaluate_agents`).

    ``progress``: one bar on stderr over every episode still to play, with rate and ETA, drawn only
    when stderr is a terminal (:class:`sfenv.runs.progress.EpisodesBar`; ``--quiet`` turns it off).

    ``num_jobs`` caps each scenario's workload (a scenario with fewer jobs keeps its own);
    without it, ``caps`` gives per-scenario caps (e.g. :data:`JOB_CAPS`; see :func:`job_caps`).

    :raises ValueError: if ``out`` holds runs made with other settings (they are kept, not mixed).
    """
    out.mkdir(parents=True, exist_ok=True)
    jobs_by = job_caps(list(_plan(claims)), num_jobs, caps)
    if env_version != ENV_VERSION and env_version not in VERSION_SIM:
        raise InvalidInput(f"--env-version: expected one of {', '.join((ENV_VERSION, *PREVIOUS_VERSIONS))}, "
                           f"got {env_version!r}")
    sim = dict(VERSION_SIM.get(env_version, {}))
    wan_sharing = wan_sharing or sim.get("wan_sharing", "v5")
    if wan_sharing not in WAN_SHARING:
        raise InvalidInput(f"--wan-sharing: expected one of {', '.join(WAN_SHARING)}, got {wan_sharing!r}")
    config: dict[str, Any] = {"num_jobs": num_jobs, "job_caps": dict(sorted((caps or {}).items())),
                              "budgets": {k: {n: list(v) if isinstance(v, tuple) else v for n, v in b.items()}
                                          for k, b in sorted((budgets or {}).items())}}
    if wan_sharing != "v2":  # runs made before the option keep their settings
        config["wan_sharing"] = wan_sharing
    if env_version not in VERSION_SIM:  # from env v6 on; v5's runs were made before the option
        config["env_version"] = env_version
    cfg_path = out / "config.json"
    if cfg_path.exists():
        old = read_json(cfg_path, "claims settings file", MAX_YAML_BYTES)
        if old != config:
            raise InvalidInput(f"{out} holds runs made with other settings ({old!s:.300}, now {config}); "
                             "use another --out or delete that directory")
    else:
        atomic_write_json(cfg_path, config)
    rows: dict[str, list[dict[str, Any]]] = {}
    plan = _plan(claims)
    bar = EpisodesBar(sum(len(names) for names in plan.values()) * len(seeds), "claims", enabled=progress)
    try:
        for scenario, names in plan.items():
            played = protocol.seeds(split, len(seeds), scenario) if split else list(seeds)
            on_row = bar.part(scenario, len(names) * len(played))
            played_on = load_scenario(scenario).with_overrides(sim={**sim, "wan_sharing": wan_sharing})
            rows[scenario] = evaluate_agents(names, played_on, played, split=split, num_jobs=jobs_by[scenario],
                                             out=out / f"runs-{scenario}.json", resume=True, progress=False,
                                             on_row=on_row, agent_kwargs=budgets, backend=backend, address=address,
                                             workers=workers)
            bar.end_part()
    finally:
        bar.close()
    return rows


def seeds_note(out: Path, scenarios: Sequence[str]) -> str:
    """One line naming the seeds each scenario's runs in ``out`` were played on, as their results files record them.

    A protocol split's first seeds, or explicit seeds (then the split whose range holds them is
    named too, so a reader can tell train seeds from test seeds).
    """
    parts = []
    for scenario in scenarios:
        path = out / f"runs-{scenario}.json"
        if not path.exists():
            continue
        settings, _ = read_results(path)
        played = sorted(int(x) for x in (settings or {}).get("seeds", []))
        if not played:
            continue
        first, last = played[0], played[-1]
        span = f"{first}..{last}" if last - first + 1 == len(played) else ", ".join(map(str, played))
        label = (settings or {}).get("split", protocol.EXPLICIT)
        if label == protocol.EXPLICIT:
            ranges = {protocol.split_of(x, scenario) for x in played}
            where = f"the {ranges.pop()} split's range" if len(ranges) == 1 and None not in ranges else "no one split"
            label = f"explicit seeds, in {where}"
        else:
            label = f"the {label} split's first {len(played)}"
        parts.append(f"{scenario} {span} ({label})")
    return ("Seeds: " + "; ".join(parts) + ".") if parts else ""


def load_runs(claims: Sequence[Claim], out: Path) -> dict[str, list[dict[str, Any]]]:
    """The rows already in ``out`` for the claims' scenarios (missing files give no rows)."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for scenario in _plan(claims):
        path = out / f"runs-{scenario}.json"
        rows[scenario] = read_results(path)[1] if path.exists() else []
    return rows


def _figure(kind: str, log_q: float) -> float:
    q = math.exp(log_q)
    return {"lower": 1.0 / q, "higher": q, "reduction": 100.0 * (1.0 - q), "increase": 100.0 * (q - 1.0)}[kind]


def interval(log_q: Sequence[float] | np.ndarray, method: str = "t", level: float = 0.95,
             seed: int = 0) -> tuple[float, float]:
    """Confidence interval of the mean of the per-seed log ratios (see :data:`INTERVALS`).

    :param log_q: one paired log ratio per seed.
    :param method: ``"t"`` (Student t) or ``"bca"`` (:func:`scipy.stats.bootstrap`, BCa).
    :param level: confidence level.
    :param seed: the bootstrap's generator seed.
    :return: ``(low, high)``; NaN with fewer than two seeds; a point when every ratio is equal.
    :raises ValueError: for an unknown method.
    """
    if method not in INTERVALS:
        raise InvalidInput(f"interval method must be one of {sorted(INTERVALS)}, not {method!r}")
    x = np.asarray(log_q, dtype=float)
    if len(x) < 2:
        return math.nan, math.nan
    mean = float(x.mean())
    if float(np.ptp(x)) == 0.0:
        return mean, mean
    if method == "t":
        half = float(stats.t.ppf(0.5 + level / 2, len(x) - 1)) * float(x.std(ddof=1)) / math.sqrt(len(x))
        return mean - half, mean + half
    res = stats.bootstrap((x,), np.mean, confidence_level=level, method="BCa", n_resamples=9999,
                          rng=np.random.default_rng(seed))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def _estimate(kind: str, log_q: np.ndarray, method: str = "t") -> dict[str, float]:
    point = _figure(kind, float(np.mean(log_q)))
    low, high = interval(log_q, method)
    if not (math.isfinite(low) and math.isfinite(high)):
        return {"value": point, "ci_low": math.nan, "ci_high": math.nan, "ci_excludes_no_effect": False}
    ends = sorted((_figure(kind, low), _figure(kind, high)))
    return {"value": point, "ci_low": ends[0], "ci_high": ends[1], "ci_excludes_no_effect": low > 0 or high < 0}


def _verdict(claim: Claim, est: dict[str, float]) -> str:
    v = est["value"]
    if not math.isfinite(v):
        return "n/a"
    if v < claim.low or (math.isinf(claim.high) and v <= claim.low):  # "> 0": a tie is not inside
        return "below"
    if v > claim.high:
        return "above"
    return "inside"


def _pooled_label(claim: Claim, pooled_over: Sequence[str]) -> str:
    """The pooled row's scenario: ``all`` when it pools every scenario of the claim as :data:`CLAIMS` defines it.

    A run restricted with ``--scenarios``, or one whose runs are missing for some scenario, pools fewer;
    the row then names them (``pooled: spider-8, spider-16``) so it is not read as the claim's whole range.
    """
    defined = next((c.scenarios for c in CLAIMS if c.key == claim.key), claim.scenarios)
    return "all" if set(pooled_over) == set(defined) else "pooled: " + ", ".join(pooled_over)


def measure(claim: Claim, rows: dict[str, list[dict[str, Any]]], method: str = "t") -> list[dict[str, Any]]:
    """The claim's figure per (scenario, baseline), and pooled over scenarios if the claim says so.

    The pooled row's ``scenario`` is ``all`` only when it pools every scenario :data:`CLAIMS` gives the
    claim; otherwise it names the scenarios pooled (also in ``pooled_over``).

    Seeds where either side has no value (e.g. no finished job) are left out and counted;
    ``unfinished_jobs`` counts both sides' unfinished jobs over the seeds (summed for the pooled row).

    :param method: the interval method (:func:`interval`).
    """
    out: list[dict[str, Any]] = []
    for baseline in claim.baselines:
        pooled: list[float] = []
        pooled_over: list[str] = []
        pooled_skipped = pooled_unfinished = 0
        for scenario in claim.scenarios:
            by = {(r["agent"], r["seed"]): r for r in rows.get(scenario, [])}
            seeds = sorted({s for (a, s) in by if a == claim.system} & {s for (a, s) in by if a == baseline})
            log_q, skipped, unfinished = [], 0, 0
            for s in seeds:
                sys_v, base_v = by[(claim.system, s)][claim.metric], by[(baseline, s)][claim.metric]
                unfinished += by[(claim.system, s)]["unfinished"] + by[(baseline, s)]["unfinished"]
                if not (sys_v > 0 and base_v > 0 and math.isfinite(sys_v) and math.isfinite(base_v)):
                    skipped += 1
                    continue
                log_q.append(math.log(sys_v / base_v))
            if not seeds:
                continue
            est = _estimate(claim.kind, np.array(log_q), method) if log_q else {
                "value": math.nan, "ci_low": math.nan, "ci_high": math.nan, "ci_excludes_no_effect": False}
            pooled.extend(log_q)
            pooled_over.append(scenario)
            pooled_skipped += skipped
            pooled_unfinished += unfinished
            out.append({"claim": claim.key, "scenario": scenario, "system": claim.system, "baseline": baseline,
                        "seeds": len(log_q), "skipped_seeds": skipped, "unfinished_jobs": unfinished, **est,
                        "verdict": _verdict(claim, est)})
        if claim.pooled and len(claim.scenarios) > 1 and pooled:
            est = _estimate(claim.kind, np.array(pooled), method)
            out.append({"claim": claim.key, "scenario": _pooled_label(claim, pooled_over), "system": claim.system,
                        "baseline": baseline, "pooled_over": pooled_over, "seeds": len(pooled),
                        "skipped_seeds": pooled_skipped, "unfinished_jobs": pooled_unfinished, **est,
                        "verdict": _verdict(claim, est)})
    return out


def _fmt(x: float, kind: str) -> str:
    if not math.isfinite(x):
        return "-" if math.isnan(x) else "inf"
    return f"{x:.1f} %" if kind in ("reduction", "increase") else f"{x:.2f}x"


def format_markdown(claims: Sequence[Claim], results: dict[str, list[dict[str, Any]]], method: str = "t",
                    jobs: dict[str, int | None] | None = None, seeds_note: str = "") -> str:
    """A Markdown table: claim, comparison, measured figure with its interval, claimed range, verdict.

    Above it: the interval method, ``seeds_note`` (which seeds were played) and the jobs per
    episode (caps named).
    """
    lines = [f"Intervals: {INTERVALS[method]}; seeds = paired seeds in the row.  Throughput: {THROUGHPUT_NOTE}."]
    if seeds_note:
        lines.append(seeds_note)
    if jobs:
        lines.append("Jobs per episode: " + ", ".join(
            f"{sc} {'all' if n is None else n}" + (" (capped: the ILP baseline's cost)" if sc in JOB_CAPS and
                                                    n is not None else "") for sc, n in jobs.items()) + ".")
    lines += ["",
              "| claim | scenario | system vs baseline | measured (95 % CI) | claimed | verdict "
              "| CI excludes no effect | seeds | unfinished jobs |",
              "|---|---|---|---|---|---|---|---|---|"]
    for c in claims:
        claimed = f"{_fmt(c.low, c.kind)} to {_fmt(c.high, c.kind)}" if math.isfinite(c.high) else \
            f"> {_fmt(c.low, c.kind)}"
        for r in results[c.key]:
            ci = f" ({_fmt(r['ci_low'], c.kind)} to {_fmt(r['ci_high'], c.kind)})" if math.isfinite(r["ci_low"]) else ""
            excl = "yes" if r.get("ci_excludes_no_effect") else ("no" if ci else "-")
            lines.append(f"| {c.text} | {r['scenario']} | {r['system']} vs {r['baseline']} | "
                         f"{_fmt(r['value'], c.kind)}{ci} | {claimed} | {r['verdict']} | {excl} | {r['seeds']} | "
                         f"{r['unfinished_jobs']} |")
    return "\n".join(lines)


def plot_claims(claims: Sequence[Claim], results: dict[str, list[dict[str, Any]]], path: Path) -> None:
    """One panel per claim: each measured figure with its interval, the claimed range shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(claims)
    cols = min(4, n)
    nrows = math.ceil(n / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(4.2 * cols, 3.4 * nrows), squeeze=False)
    for ax, c in zip(axes.flat, claims):
        res = [r for r in results[c.key] if math.isfinite(r["value"])]
        labels = [f"{r['baseline']} @ {r['scenario']}" for r in res]
        y = np.arange(len(res))
        vals = np.array([r["value"] for r in res])
        lo = np.array([r["ci_low"] if math.isfinite(r["ci_low"]) else r["value"] for r in res])
        hi = np.array([r["ci_high"] if math.isfinite(r["ci_high"]) else r["value"] for r in res])
        ends = [c.low, *lo, *hi] + ([c.high] if math.isfinite(c.high) else [])
        if c.kind in ("lower", "higher") and max(ends) / max(1e-9, min(ends)) > 20:
            ax.set_xscale("log")
        if len(res):
            ax.errorbar(vals, y, xerr=[vals - lo, hi - vals], fmt="o", color="tab:blue", capsize=3)
        ax.axvline(1.0 if c.kind in ("lower", "higher") else 0.0, color="grey", lw=0.8, ls=":")
        # the claimed range, shaded; an open range runs to the panel's right edge
        x0, x1 = min(ends), max(ends)
        pad = (x1 - x0) * 0.08 or 1.0
        left, right = (x0 / 1.3, x1 * 1.3) if ax.get_xscale() == "log" else (x0 - pad, x1 + pad)
        ax.axvspan(c.low, c.high if math.isfinite(c.high) else right, color="tab:green", alpha=0.2)
        ax.set_xlim(left, right)
        ax.set_ylim(-0.7, len(res) - 0.3)
        ax.set_yticks(y, labels, fontsize=7)
        ax.set_xlabel(KINDS[c.kind] + " (green: claimed)", fontsize=8)
        ax.set_title("\n".join(textwrap.wrap(f"{c.system}: {c.text}", 44)), fontsize=8)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_overhead(rows: dict[str, list[dict[str, Any]]], path: Path, agents: Sequence[str]) -> None:
    """Mean decision time against the number of clusters (log-log), from the spider-N runs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4))
    for name in agents:
        xs, ys = [], []
        for scenario in SPIDER:
            vals = [r["decision_time_mean_s"] for r in rows.get(scenario, []) if r["agent"] == name]
            if vals:
                xs.append(load_scenario(scenario).topology.num_regions)
                ys.append(1000 * float(np.mean(vals)))
        if xs:
            ax.plot(xs, ys, "o-", label=name)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("clusters")
    ax.set_ylabel("mean decision time (ms, wall clock)")
    ax.set_title("Scheduling overhead vs platform size")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point (see the module docstring)."""
    ap = ScriptParser(script=__file__, description="reproduce the seed papers' claims in sfenv")
    ap.add_argument("--seeds", type=int, default=DEFAULT_SEEDS,
                    help="episodes per agent and scenario (explicit seeds 0..N-1, or the first N of --split)")
    ap.add_argument("--split", choices=protocol.SPLITS, default=None,
                    help="play the first --seeds seeds of this protocol split of each scenario (default: explicit "
                         "seeds 0..N-1, labelled so)")
    ap.add_argument("--quick", action="store_true", help="at most 10 jobs per episode, small ILP/genetic budgets")
    ap.add_argument("--num-jobs", type=int, default=None,
                    help="cap on every scenario's workload size (default: JOB_CAPS on spider-16/32/64; 0: no cap)")
    ap.add_argument("--interval", choices=sorted(INTERVALS), default="t",
                    help="t: Student-t interval of the mean log ratio; bca: BCa bootstrap (scipy)")
    ap.add_argument("--only", default="", help="comma list of claim groups or keys (spiderflow, bace, spantrain)")
    ap.add_argument("--scenarios", default="",
                    help="comma list: run only these of the claims' scenarios (e.g. split a long run over machines)")
    ap.add_argument("--out", type=Path, default=Path("results/claims"))
    ap.add_argument("--report-only", action="store_true",
                    help="run nothing: measure and plot from the runs already in --out")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--backend", choices=("serial", "ray"), default="serial",
                    help="ray: one Ray task per episode (needs the ray extra)")
    ap.add_argument("--address", default=None, help="with --backend ray: the Ray cluster to join (default: local)")
    ap.add_argument("--workers", type=int, default=None, help="with --backend ray: episodes at once (default: CPUs)")
    versions = (ENV_VERSION, *PREVIOUS_VERSIONS)
    ap.add_argument("--env-version", default=ENV_VERSION, metavar="{" + ",".join(versions) + "}",
                    help=f"the env version whose WAN model every scenario is played under (default {ENV_VERSION}; "
                         "an earlier one plays its ids' settings: docs/env.md)")
    ap.add_argument("--wan-sharing", default=None, metavar="{" + ",".join(WAN_SHARING) + "}",
                    help="the WAN sharing model every scenario is played under (sim.wan_sharing; default: the env "
                         "version's, v5 for env v5 and v6; v4, v3 and v2 play env v4's, v3's and v2's models: "
                         "docs/model.md)")
    args = ap.parse_args(argv)
    if args.seeds < 2:
        ap.error("--seeds must be at least 2 (an interval needs two paired seeds)")
    if args.num_jobs is not None and args.num_jobs < 0:
        ap.error("--num-jobs must be >= 0 (0: no cap)")
    if args.wan_sharing is not None and args.wan_sharing not in WAN_SHARING:
        ap.error(f"--wan-sharing must be one of {', '.join(WAN_SHARING)}, not {args.wan_sharing[:20]!r}")
    if args.env_version not in versions:
        ap.error(f"--env-version must be one of {', '.join(versions)}, not {args.env_version[:20]!r}")
    quiet_solver_banner()  # HiGHS prints a start-up banner on stdout otherwise
    claims = _select([o.strip() for o in args.only.split(",") if o.strip()])
    if args.scenarios:
        claims = restrict_scenarios(claims, [s.strip() for s in args.scenarios.split(",") if s.strip()])
    num_jobs = args.num_jobs or (10 if args.quick else None)
    caps = JOB_CAPS if args.num_jobs is None and not args.quick else None
    budgets = QUICK_BUDGETS if args.quick else None
    jobs = job_caps(list(_plan(claims)), num_jobs, caps)
    if args.report_only:
        rows = load_runs(claims, args.out)
    else:
        from sfenv.runs.distributed import check_backend, ray_session

        check_backend(args.backend, args.address, args.workers)
        session = ray_session(args.address, args.workers) if args.backend == "ray" else contextlib.nullcontext()
        with session:  # one Ray for every scenario
            rows = run_claims(claims, range(args.seeds), args.out, num_jobs, budgets, progress=not args.quiet,
                              backend=args.backend, address=args.address, workers=args.workers, caps=caps,
                              split=args.split, wan_sharing=args.wan_sharing, env_version=args.env_version)
    results = {c.key: measure(c, rows, args.interval) for c in claims}
    atomic_write_json(args.out / "claims.json", {"claims": [asdict(c) for c in claims], "results": results,
                                                 "interval_method": INTERVALS[args.interval],
                                                 "jobs_per_episode": jobs})
    table = format_markdown(claims, results, args.interval, jobs, seeds_note(args.out, list(rows)))
    (args.out / "claims.md").write_text(table + "\n")
    plot_claims(claims, results, args.out / "claims.png")
    if any(sc in rows for sc in SPIDER):
        plot_overhead(rows, args.out / "overhead.png", ["spinsearch", "spiderflow", "ilp", "genetic"])
    print(table)
    print(f"results in {args.out}/ (claims.json, claims.md, claims.png, overhead.png)")
    return 0


if __name__ == "__main__":
    from sfenv.app.script import run_script

    raise SystemExit(run_script(main))
