"""Agent registry: names used on the command line and by the evaluator, imported lazily."""

from __future__ import annotations

import importlib
from typing import Any

from sfenv.agents.base import SchedulerAgent

__all__ = ["AGENTS", "GROUPS", "make_agent", "available_agents", "resolve_names"]

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
    "ilp": "sfenv.agents.ilp:ILPAgent",
    "genetic": "sfenv.agents.genetic:GeneticAgent",
    "fifo": "sfenv.agents.fifo:FIFOAgent",
    "ddp": "sfenv.agents.ddp:DataParallelAgent",
    "random": "sfenv.agents.simple:RandomAgent",
    "cheapest": "sfenv.agents.simple:CheapestRegionAgent",
}

#: named groups accepted wherever a list of agents is
GROUPS: dict[str, tuple[str, ...]] = {
    "default": ("fifo", "cheapest", "random", "bace-pipe", "lcf", "ldf", "cr-lcf", "cr-ldf", "spantrain",
                "spiderflow", "spinsearch"),
    "bace": ("bace-pipe", "lcf", "ldf", "cr-lcf", "cr-ldf"),
}


def _load(name: str) -> type[SchedulerAgent]:
    if name not in AGENTS:
        raise KeyError(f"unknown agent {name!r}; known: {', '.join(sorted(AGENTS))}")
    module, cls = AGENTS[name].split(":")
    return getattr(importlib.import_module(module), cls)


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


def resolve_names(spec: str | list[str]) -> list[str]:
    """Expand ``"all"``, group names and comma lists into agent names (``model:PATH`` kept as is).

    Unavailable agents are dropped from ``all`` and groups; naming one explicitly is an error.
    """
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    avail = available_agents()
    out: list[str] = []
    for item in (i.strip() for i in items if i.strip()):
        if item == "all":
            names = avail
        elif item.startswith("model:"):  # a saved SB3 model, see sfenv.agents.evaluate.MODEL_PREFIX
            names = [item]
        elif item in GROUPS:
            names = [n for n in GROUPS[item] if n in avail]
        else:
            _load(item)  # raises with the list of known names
            names = [item]
        out.extend(n for n in names if n not in out)
    return out


def make_agent(name: str, **kwargs: Any) -> SchedulerAgent:
    """Instantiate the agent registered as ``name`` with keyword arguments."""
    agent = _load(name)(**kwargs)
    agent.name = name
    return agent
