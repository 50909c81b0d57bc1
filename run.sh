#!/usr/bin/env bash
# One entry point that does all set-up on a fresh machine, then runs what you ask:
#   ./run.sh            the main job: benchmark agents on the built-in default scenario (spider-8)
#   ./run.sh test       the default test suite (what CI runs)
#   ./run.sh ARGS...    any `sfenv` sub-command, e.g. ./run.sh evaluate --agents all --scenario spider-16
set -euo pipefail
cd "$(dirname "$0")"
export PIP_DISABLE_PIP_VERSION_CHECK=1 MPLBACKEND="${MPLBACKEND:-Agg}" PYTHONUNBUFFERED=1 RAY_USAGE_STATS_ENABLED=0
VENV="${VENV:-.venv}"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
stamp="$VENV/.sfenv-installed"
want=$(sha256sum pyproject.toml | cut -c1-16)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  # CPU torch first (a local wheel on these machines; pip only: uv/poetry would fetch a CUDA build),
  # then the project with its RL and dev extras; torch>=2.8 is then already satisfied.
  "$VENV/bin/python" -m pip install -q "torch==2.13.0"
  "$VENV/bin/python" -m pip install -q -e ".[rl,dev]"
  echo "$want" > "$stamp"
fi
if [ "$#" -eq 0 ]; then
  exec "$VENV/bin/python" -m sfenv evaluate --agents default --scenario spider-8 --seeds 3
elif [ "$1" = "test" ]; then
  shift
  exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider -n "${SFENV_TEST_WORKERS:-auto}" --timeout=1200 "$@"
else
  exec "$VENV/bin/python" -m sfenv "$@"
fi
