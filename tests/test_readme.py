"""The README stays true: its quick-start code runs, and CI runs the test command it gives."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_readme_opens_with_the_two_commands():
    block = re.search(r"```bash\n(.*?)```", README, re.S)
    assert block is not None and README.index(block.group(0)) < README.index("## ")
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines() if line.strip()]
    assert commands == ["./run.sh", "./run.sh test"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert re.search(r"^bash \./run\.sh test\b", ci, re.M)  # CI runs exactly the README's test command


def test_quick_start_code_runs():
    section = README[README.index("## Quick start (Python)"):]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    namespace: dict = {}
    exec(compile(code.group(1), "README.md quick start", "exec"), namespace)  # noqa: S102
    assert namespace["report"].jobs > 0 and namespace["model"].num_timesteps >= 2048


def test_every_python_block_runs_and_every_yaml_block_is_a_valid_scenario():
    import yaml

    from sfenv.scenario import load_scenario

    quick = re.search(r"```python\n(.*?)```", README[README.index("## Quick start (Python)"):], re.S).group(1)
    pythons = [b for b in re.findall(r"```python\n(.*?)```", README, re.S) if b != quick]  # quick start: above
    yamls = re.findall(r"```yaml\n(.*?)```", README, re.S)
    assert pythons and yamls
    for i, code in enumerate(pythons):
        exec(compile(code, f"README.md python block {i}", "exec"), {})  # noqa: S102
    for block in yamls:
        sc = load_scenario(yaml.safe_load(block))
        assert sc.name and sc.cfg.workload.num_jobs > 0
