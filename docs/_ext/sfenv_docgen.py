"""Sphinx extension: the tables that live in code, put into the pages while the site is built.

A page line ``<!-- generated: NAME -->`` (an HTML comment, invisible on GitHub) becomes:

- ``env_ids``: the registered ids (:data:`sfenv.registration.ENV_IDS`) with each scenario's size;
- ``env_docstring``: the :class:`sfenv.env.GeoSchedEnv` docstring, turned into MyST Markdown;
- ``scenario_fields``: every field of the scenario file's pydantic models (type, default, bounds);
- ``configs``: the bundled ``sfenv train`` configs with the first sentence of their header comments.

Nothing is written into the source tree.

It also replaces GeoSchedEnv's docstring in the API reference by a pointer to the env page (the
docstring is written in Markdown, as Gymnasium's are, and is rendered there).
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

_ROLE = re.compile(r":(class|func|meth|mod|data|attr|exc):`([^`]+)`")


def docstring_to_myst(doc: str) -> str:
    """Turn a docstring written with Markdown headings/tables and RST roles into MyST Markdown.

    :param doc: the cleaned docstring (``inspect.getdoc``).
    :return: MyST text: ``##`` headings one level down, RST roles as MyST roles, ````x```` as ```x```,
        doctest lines in a ``pycon`` block.
    """
    out: list[str] = []
    in_doctest = False
    for line in doc.splitlines():
        if line.startswith(">>>") and not in_doctest:
            out.append("```pycon")
            in_doctest = True
        elif in_doctest and not line.strip():
            out.append("```")
            in_doctest = False
        if not in_doctest:
            line = _ROLE.sub(lambda m: "{py:" + m.group(1) + "}`" + m.group(2) + "`", line)
            line = re.sub(r"``([^`]+)``", r"`\1`", line)
            if line.startswith("## "):
                line = "#" + line
        out.append(line)
    if in_doctest:
        out.append("```")
    return "\n".join(out) + "\n"


def env_ids_table() -> str:
    """The registered ids with their scenario's regions, links, jobs and step limit.

    :return: a Markdown table.
    """
    import gymnasium as gym

    from sfenv.registration import ENV_IDS
    from sfenv.scenario import load_scenario

    rows = ["| id | scenario | regions | links | jobs | max_episode_steps |", "|---|---|---|---|---|---|"]
    for env_id, name in ENV_IDS.items():
        sc = load_scenario(name)
        topo = sc.topology
        steps = gym.registry[env_id].max_episode_steps
        rows.append(f"| `{env_id}` | `{name}` | {len(topo.regions)} | {len(topo.links)} | "
                    f"{sc.cfg.workload.num_jobs} | {steps} |")
    return "\n".join(rows) + "\n"


def _type_name(annotation: Any) -> str:
    """A short readable name of a field's annotation, e.g. ``int or None``, ``list[RegionCfg]``."""
    import types
    import typing

    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args)
    if origin is typing.Literal:
        return " / ".join(repr(a) for a in args)
    if origin is not None:
        inner = ", ".join("..." if a is Ellipsis else _type_name(a) for a in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    if annotation is type(None):
        return "None"
    return getattr(annotation, "__name__", str(annotation))


def _bounds(info: Any) -> str:
    """The numeric bounds of a pydantic field (also inside ``Optional[Annotated[...]]``), e.g. ``> 0``."""
    import typing

    metas = list(info.metadata)
    stack = [info.annotation]
    while stack:
        ann = stack.pop()
        if typing.get_origin(ann) is typing.Annotated:
            metas += list(typing.get_args(ann)[1:])
            stack.append(typing.get_args(ann)[0])
        else:
            stack += [a for a in typing.get_args(ann) if a is not Ellipsis]
    parts = []
    for meta in metas:
        for sub in [meta, *getattr(meta, "metadata", [])]:
            for attr, sym in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<=")):
                value = getattr(sub, attr, None)
                if value is not None and f"{sym} {value:g}" not in parts:
                    parts.append(f"{sym} {value:g}")
    return ", ".join(parts)


def scenario_fields() -> str:
    """One table per section model of a scenario file, read from the pydantic models.

    :return: Markdown with a heading, the model's docstring and a field table per model.
    """
    from pydantic_core import PydanticUndefined

    from sfenv import scenario as s

    sections = [("top level", s.ScenarioCfg), ("topology", s.TopologyCfg), ("topology.regions[]", s.RegionCfg),
                ("topology.links[]", s.LinkCfg), ("prices", s.PricesCfg), ("prices.zones.NAME", s.ZoneTOU),
                ("workload", s.WorkloadCfg), ("workload.arrival", s.ArrivalCfg),
                ("workload.models[]", s.ModelMixCfg), ("dynamics", s.DynamicsCfg), ("outages", s.OutageCfg),
                ("sim", s.SimCfg), ("reward", s.RewardCfg), ("env", s.EnvCfg), ("egress", s.EgressCfg)]
    out = []
    for title, model in sections:
        doc = docstring_to_myst(inspect.getdoc(model) or "").strip()
        out += [f"### `{title}`", "", doc, "", "| field | type | default | bounds |", "|---|---|---|---|"]
        for name, info in model.model_fields.items():
            if info.default is not PydanticUndefined:
                default = f"`{info.default!r}`"
            elif info.default_factory is not None:
                made = info.default_factory()
                if hasattr(made, "model_fields"):
                    default = "(section defaults)"
                elif isinstance(made, list) and made and hasattr(made[0], "model_dump"):
                    default = f"`{[m.model_dump(exclude_defaults=True) for m in made]!r}`"
                else:
                    default = f"`{made!r}`"
            else:
                default = "required"
            ann = _type_name(info.annotation).replace("|", "\\|")
            out.append(f"| `{name}` | {ann} | {default} | {_bounds(info)} |")
        out.append("")
    return "\n".join(out) + "\n"


def configs_table() -> str:
    """The bundled ``sfenv train`` configs: name, algorithm, scenario, steps and the file's header comment.

    :return: a Markdown table.
    """
    import yaml

    import sfenv.hyperparams

    folder = Path(sfenv.hyperparams.__file__).parent
    rows = ["| `--config` | algo | scenario | steps | what (first sentence of the file's header) |",
            "|---|---|---|---|---|"]
    for path in sorted(folder.glob("train-*.yml")):
        text = path.read_text()
        data = yaml.safe_load(text) or {}
        header = " ".join(line.lstrip("# ").strip() for line in text.splitlines() if line.startswith("#"))
        header = re.sub(r"^sfenv train --config [\w-]+:\s*", "", header)
        header = re.split(r"(?<=[.:;])\s", header, maxsplit=1)[0].rstrip(".:;").replace("|", "\\|")
        scenario = data.get("scenario")
        scenario = f"`{scenario}`" if isinstance(scenario, str) else "generated platforms"
        name = path.stem.removeprefix("train-")
        rows.append(f"| `{name}` | {data.get('algo', '')} | {scenario} | {data.get('steps', '')} | {header} |")
    return "\n".join(rows) + "\n"


def _env_docstring() -> str:
    """The GeoSchedEnv class docstring as MyST Markdown."""
    from sfenv.env import GeoSchedEnv

    return docstring_to_myst(inspect.getdoc(GeoSchedEnv) or "")


#: marker name -> the function that writes its Markdown
GENERATORS = {
    "env_ids": env_ids_table,
    "env_docstring": _env_docstring,
    "scenario_fields": scenario_fields,
    "configs": configs_table,
}
MARKER = re.compile(r"^<!-- generated: (\w+) -->$", re.M)


def fill_markers(app: Any, docname: str, source: list[str]) -> None:
    """Replace every ``<!-- generated: NAME -->`` line of a page by the output of ``GENERATORS[NAME]``.

    :param app: the Sphinx application (unused).
    :param docname: the page's name (unused).
    :param source: the page's text, a one-item list Sphinx lets us edit.
    :raises KeyError: for a marker no generator has (a typo in a page fails the build).
    """
    source[0] = MARKER.sub(lambda m: GENERATORS[m.group(1)](), source[0])


def _short_env_docstring(app: Any, what: str, name: str, obj: Any, options: Any, lines: list[str]) -> None:
    """Replace GeoSchedEnv's Markdown docstring in autodoc by its first line and a link to the env page."""
    if name in ("sfenv.env.GeoSchedEnv", "sfenv.env.geosched.GeoSchedEnv"):
        first = lines[0] if lines else ""
        lines[:] = [first, "", "Spaces, reward, arguments and version history: :doc:`/env`."]


def setup(app: Any) -> dict[str, Any]:
    """Register the generator and the docstring hook.

    :param app: the Sphinx application.
    :return: extension metadata.
    """
    app.connect("source-read", fill_markers)
    app.connect("autodoc-process-docstring", _short_env_docstring)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
