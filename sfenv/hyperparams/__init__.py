"""Bundled hyperparameter files: ``train-*.yml`` for ``sfenv train --config NAME``, ``zoo-*.yml`` for RL Zoo."""

from __future__ import annotations

from pathlib import Path

__all__ = ["path"]


def path(name: str) -> Path:
    """The installed path of a bundled file, e.g. ``path("zoo-ppo.yml")`` for RL Zoo's ``-conf``.

    :raises FileNotFoundError: if no such file is bundled.
    """
    p = Path(__file__).with_name(name)
    if not p.is_file():
        raise FileNotFoundError(f"no bundled hyperparameter file {name!r} in {p.parent}")
    return p
