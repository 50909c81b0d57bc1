"""Copies of a trained model's weights-only files with their metadata edited (shared by the play-setting tests)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any


def copy_with_meta(run: Path, folder: Path, **meta: Any) -> Path:
    """Copy ``run``'s ``best_model.policy.*`` into ``folder``, ``meta`` keys set in the spec; return the spec's path.

    A value of None removes the key.  Called again on the same folder, it edits the copy already there.
    """
    folder.mkdir(parents=True, exist_ok=True)
    spec_path = folder / "best_model.policy.json"
    if not spec_path.exists():
        for f in run.glob("best_model.policy.*"):
            shutil.copy(f, folder / f.name)
    spec = json.loads(spec_path.read_text())
    for key, value in meta.items():
        if value is None:
            spec["meta"].pop(key, None)
        else:
            spec["meta"][key] = value
    spec_path.write_text(json.dumps(spec))
    return spec_path
