"""Agent registry: names used on the command line and by the evaluator, imported lazily."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sfenv.agents.base import SchedulerAgent
from sfenv.agents.plugins import make_plugin, resolve_plugin, split_agent_list

from sfenv.errors import InvalidInput, UnknownName, did_you_mean
from sfenv.interrupts import import_module

__all__ = [
    "AGENTS", "DESCRIPTIONS", "GROUPS", "REVISIONS", "available_agents", "builtin_keywords", "describe", "is_builtin",
    "make_agent", "resolve_names",
]

#: name -> "module:Class"
AGENTS: dict[str, str] = {
    "spiderflow": "sfenv.agents.spiderflow:SpiderFlowAgent",
    "spinsearch": "sfenv.agents.spinsearch:SpinSearchAgent",
    "tpa": "sfenv.agents.tpa:TPAAgent",
    "bace-pipe": "sfenv.agents.bace_pipe:BACEPipeAgent",
    "lcf": "sfenv.agents.bace_baselines:LCFAgent",
    "ldf": "sfenv.agents.bace_baselines:LDFAgent",
    "cr-lcf": "sfenv.agents.bace_baselines:CRLCFAgent",
    "cr-ldf": "sfenv.agents.bace_baselines:CRLDFAgent",
    "spantrain": "sfenv.agents.spantrain:SpanTrainAgent",
    "spantrain-placement": "sfenv.agents.spantrain:SpanTrainPlacementAgent",
    "spantrain-zb": "sfenv.agents.spantrain:SpanTrainZeroBubbleAgent",
    "ilp": "sfenv.agents.ilp:ILPAgent",
    "genetic": "sfenv.agents.genetic:GeneticAgent",
    "fifo": "sfenv.agents.fifo:FIFOAgent",
    "ddp": "sfenv.agents.ddp:DataParallelAgent",
    "random": "sfenv.agents.simple:RandomAgent",
    "cheapest": "sfenv.agents.simple:CheapestRegionAgent",
    "fastest": "sfenv.agents.simple:FastestRegionAgent",
    "lowest-carbon": "sfenv.agents.carbon:LowestCarbonAgent",
    "forecast-carbon": "sfenv.agents.carbon:ForecastCarbonAgent",
    "carbon-defer": "sfenv.agents.carbon:CarbonDeferralAgent",
    "carbon-st": "sfenv.agents.carbon:SpatioTemporalCarbonAgent",
    "carbon-elastic": "sfenv.agents.carbon:CarbonElasticAgent",
}

#: name -> one line for ``sfenv agents`` (an agent without one shows its class docstring's first line)
#: name -> revision of the agent's defaults, for agents whose defaults changed the episodes they play: a
#: results file's settings record it (:func:`sfenv.app.evaluate.agent_settings`), so runs of the old defaults
#: are never resumed or mixed with the new ones.  ``ilp`` 2 (2026-11-27): a 1,000-node MILP budget and the
#: 16 regions with the most free compute, where a 2 s wall-clock limit made its plans depend on the load.
REVISIONS: dict[str, int] = {"ilp": 2}

DESCRIPTIONS: dict[str, str] = {
    "spiderflow": "SpiderFlow: SpinSearch placement + TPA parallelisation (our design from the ACL 2026 abstract)",
    "spinsearch": "SpinSearch: chains grown along the WAN graph from the clusters with most free compute",
    "tpa": "TPA: layers split across a chain by compute, ILP for the parallel degrees inside each cluster",
    "bace-pipe": "BACE-Pipe: pipeline-only, K* GPUs, bandwidth- and congestion-aware priority (arXiv 2605.25375)",
    "lcf": "LCF: one region, the cheapest now; arrival order, head-of-line blocking (BACE-Pipe baseline)",
    "ldf": "LDF: one region, the one with the most free GPUs; arrival order (BACE-Pipe baseline)",
    "cr-lcf": "CR-LCF: cross-region, regions added by ascending price (BACE-Pipe baseline)",
    "cr-ldf": "CR-LDF: cross-region, greedy on capacity and bandwidth (BACE-Pipe baseline)",
    "spantrain": "SpanTrain/DeepCEE: devices grouped by network then compute, zero-bubble pipeline",
    "spantrain-placement": "SpanTrain ablation: its placement only (1F1B, micro-batch 1, plain window, no adapter)",
    "spantrain-zb": "SpanTrain ablation: placement + zero-bubble (micro-batch 1, plain window, no adapter)",
    "ilp": "ILP: a PuLP MILP over region chain, GPU counts and layer split (slow on large platforms)",
    "genetic": "Genetic: DT-FM-style evolutionary search over cluster orders (pymoo)",
    "fifo": "FIFO first-fit: arrival order, first region that fits, else regions in index order",
    "random": "Random: a uniform choice among the startable candidate plans",
    "cheapest": "Cheapest: the cheapest region that fits now, arrival order with backfilling",
    "fastest": "Fastest: the region where the job runs fastest now, arrival order with backfilling",
    "lowest-carbon": "Lowest carbon: the region of lowest grid carbon intensity now (spatial shifting)",
    "forecast-carbon": "Forecast carbon: the region of least forecast carbon over the job's run (spatial)",
    "carbon-defer": "Carbon deferral: Wait-AWhile-style start in the cleanest forecast hour within a slack (temporal)",
    "carbon-st": "Carbon spatio-temporal: the cleanest region and start hour within a slack",
    "carbon-elastic": "Carbon elastic: CarbonScaler-style hourly data-parallel width, wider in clean hours (elastic)",
}

#: named groups accepted wherever a list of agents is
GROUPS: dict[str, tuple[str, ...]] = {
    "default": ("fifo", "cheapest", "random", "bace-pipe", "lcf", "ldf", "cr-lcf", "cr-ldf", "spantrain",
                "spiderflow", "spinsearch"),
    "bace": ("bace-pipe", "lcf", "ldf", "cr-lcf", "cr-ldf"),
    "carbon": ("lowest-carbon", "forecast-carbon", "carbon-defer", "carbon-st", "carbon-elastic"),
    # any PLACEMENT+ORDER is accepted (sfenv.agents.ordering); these are the ones compared by default
    "ordering": ("fifo+swf", "fifo+fgf", "fifo+bace", "spinsearch+swf", "spinsearch+fgf", "spinsearch+bace",
                 "spantrain+swf", "fastest+swf"),
}


def _load(name: str) -> type[SchedulerAgent]:
    if name not in AGENTS and "+" in name:  # PLACEMENT+ORDER, see sfenv.agents.ordering
        from sfenv.agents.ordering import ordered_class

        placement, _, order = name.rpartition("+")
        return ordered_class(_load(placement), placement, order)
    if name not in AGENTS:
        hint = did_you_mean(name, [*AGENTS, *GROUPS, "all"])
        raise UnknownName(f"unknown agent {name!r}{hint}; known: {', '.join(sorted(AGENTS))}, "
                          f"groups: {', '.join(sorted(GROUPS))}, or 'all'")
    module, cls = AGENTS[name].split(":")
    return getattr(import_module(module), cls)  # Ctrl-C deferred: PuLP's import would swallow it


def available_agents() -> list[str]:
    """Registered agents whose module imports (all of them in a complete install)."""
    out = []
    for name in AGENTS:
        try:
            _load(name)
        except ImportError:
            continue
        out.append(name)
    return out


def resolve_names(spec: str | Sequence[str]) -> list[str]:
    """Expand ``"all"``, group names and comma lists into agent names (``model:PATH``/``rllib:PATH`` kept as is).

    Unavailable agents are dropped from ``all`` and groups; naming one explicitly is an error.
    A plug-in (``module:Class[:kw=v,...]``, ``file.py:Class[:kw=v,...]``, or a name an installed package
    registers, :mod:`sfenv.agents.plugins`) is imported and checked now, and named by its canonical spec;
    a built-in name or group wins over an entry point of the same name.

    :raises InvalidInput: if ``spec`` names no agent at all (``""``, ``","``), or is neither a text nor a
        list of texts.
    :raises UnknownName: for a name that is not registered.
    """
    if not isinstance(spec, (str, Sequence)) or any(not isinstance(i, str) for i in spec):
        raise InvalidInput(f"agents {spec!r:.60}: expected a comma list or a list of agent names (texts)")
    items = split_agent_list(spec) if isinstance(spec, str) else list(spec)
    if not any(str(i).strip() for i in items):
        raise InvalidInput(f"agents {spec!r}: no agent named; give a comma list such as fifo,spiderflow, "
                           f"a group ({', '.join(GROUPS)}) or all")
    avail = available_agents()
    out: list[str] = []
    for item in (i.strip() for i in items if i.strip()):
        if item == "all":
            names = avail
        elif item.startswith(("model:", "rllib:")):  # a saved policy, see sfenv.app.evaluate.MODEL_PREFIX
            names = [item]
        elif item in GROUPS:
            names = [n for n in GROUPS[item] if n in avail or "+" in n]
        elif item not in AGENTS and (plugin := resolve_plugin(item)) is not None:
            names = [plugin]
        else:
            _load(item)  # raises with the list of known names
            names = [item]
        out.extend(n for n in names if n not in out)
    return out


def describe(name: str) -> str:
    """One line about agent ``name``: :data:`DESCRIPTIONS`, else its class docstring's first line.

    :raises UnknownName: for a name that is not registered.
    """
    if name in DESCRIPTIONS:
        return DESCRIPTIONS[name]
    doc = (_load(name).__doc__ or "").strip()
    return doc.splitlines()[0] if doc else ""


def is_builtin(name: str) -> bool:
    """Whether ``name`` is a built-in agent: a registered name or ``PLACEMENT+ORDER`` of one (nothing is imported)."""
    if name in AGENTS:
        return True
    placement, plus, order = name.rpartition("+")
    from sfenv.agents.ordering import ORDERS

    return bool(plus) and order in ORDERS and is_builtin(placement)


def builtin_keywords(name: str) -> frozenset[str]:
    """The keyword arguments the built-in agent ``name`` takes (:func:`make_agent`): its constructor's named ones.

    ``PLACEMENT+ORDER`` takes ``blocking`` and the placement's.  Imports the agent's module (sfenv's own),
    never a plug-in.

    :raises UnknownName: if ``name`` is not a built-in agent (:func:`is_builtin`).
    :raises ImportError: if its module does not import here (an optional dependency missing).
    """
    import inspect

    if not is_builtin(name):
        raise UnknownName(f"{name!r} is not a built-in agent")
    if name not in AGENTS:
        return frozenset({"blocking"}) | builtin_keywords(name.rpartition("+")[0])
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return frozenset(p.name for p in inspect.signature(_load(name)).parameters.values() if p.kind in kinds)


def make_agent(name: str, **kwargs: Any) -> SchedulerAgent:
    """Instantiate the agent registered as ``name`` with keyword arguments.

    ``name`` may also be a plug-in spec or an installed entry-point agent (:mod:`sfenv.agents.plugins`).

    :raises InvalidInput: if ``name`` is not a text, or a built-in agent is given a keyword its constructor
        does not take (:func:`builtin_keywords`).
    :raises UnknownName: for a name that is not registered.
    """
    if not isinstance(name, str):
        raise InvalidInput(f"make_agent: name = {name!r:.60}; expected an agent name (a text), e.g. 'fifo'")
    if name not in AGENTS and (plugin := make_plugin(name, **kwargs)) is not None:
        return plugin
    if kwargs and is_builtin(name):
        taken = builtin_keywords(name)
        unknown = sorted(set(kwargs) - taken)
        if unknown:
            raise InvalidInput(f"agent {name!r}: no keyword argument {', '.join(map(repr, unknown))}; it takes "
                               f"{', '.join(sorted(taken)) or 'none'}")
    agent = _load(name)(**kwargs)
    agent.name = name
    return agent
