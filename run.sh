#!/usr/bin/env bash
# One entry point that does all set-up on a fresh machine, then runs what you ask:
#   ./run.sh            the main job: `sfenv benchmark` (default agents on the default scenario,
#                       results and plots in ./results/<scenario>/ of the folder you run it from)
#   ./run.sh test       the default test suite (what CI runs; runs inside the repository; it also builds
#                       the docs with warnings as errors and runs every code block and example)
#   ./run.sh --OPT...   the main job with options, e.g. ./run.sh --seeds 3 --out-dir my-results
#   ./run.sh ARGS...    any `sfenv` sub-command, e.g. ./run.sh evaluate --agents all --scenario spider-16
# Paths you give (--scenario my.yaml, --out r.json) resolve against the folder you run it from, and
# outputs go there; only the virtual environment and the project files come from this script's folder.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export PIP_DISABLE_PIP_VERSION_CHECK=1 MPLBACKEND="${MPLBACKEND:-Agg}" PYTHONUNBUFFERED=1 RAY_USAGE_STATS_ENABLED=0
VENV="${VENV:-$here/.venv}"
case "$VENV" in /*) ;; *) VENV="$PWD/$VENV" ;; esac  # a relative VENV= is the caller's, like every path
say() { echo "run.sh: $*" >&2; }
stamp="$VENV/.sfenv-installed"
want=$(sha256sum "$here/pyproject.toml" | cut -c1-16)
if [ ! -x "$VENV/bin/python" ] || [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  start=$SECONDS
  say "set-up (once; again only when pyproject.toml changes): the first set-up took 122 s on a 2-core machine"
  if [ ! -x "$VENV/bin/python" ]; then
    say "[1/3] creating the virtual environment $VENV"
    python3 -m venv "$VENV"
  else
    say "[1/3] virtual environment $VENV exists"
  fi
  # CPU torch first (a local wheel on these machines; pip only: uv/poetry would fetch a CUDA build),
  # then the project with its RL and dev extras; torch>=2.8 is then already satisfied.
  say "[2/3] installing CPU torch 2.13.0 (pip)"
  "$VENV/bin/python" -m pip install -q "torch==2.13.0"
  say "[3/3] installing sfenv from $here with the fast, rl, zoo, dev and docs extras (pip, editable)"
  "$VENV/bin/python" -m pip install -q -e "$here[fast,rl,zoo,dev,docs]"
  echo "$want" > "$stamp"
  say "set-up done in $((SECONDS - start)) s"
fi
# The installed `sfenv` script, not `python -m sfenv`: -m would put the current folder first on
# sys.path, where a folder named sfenv (e.g. this clone, seen from its parent) shadows the package.
if [ "$#" -eq 0 ]; then
  exec "$VENV/bin/sfenv" benchmark
elif [[ "$1" == -* && "$1" != "-h" && "$1" != "--help" ]]; then
  exec "$VENV/bin/sfenv" benchmark "$@"  # options alone: the main job with them (./run.sh --seeds 3)
elif [ "$1" = "test" ]; then
  shift
  cd "$here"  # the suite and its pytest settings live in the repository
  # --dist worksteal: an idle worker takes tests queued on the other, so the long tests do not leave one
  # worker running alone at the end (2026-11-26, 2 cores, the same clean clone one after the other:
  # 825 s against 871 s with the default scheduling)
  exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider -rs -n "${SFENV_TEST_WORKERS:-auto}" --dist worksteal \
    --timeout=1200 "$@"
else
  exec "$VENV/bin/sfenv" "$@"
fi
