#!/usr/bin/env bash
# Run qref's test suite on every core, at most 8 xdist workers (memory: each imports the backends; slow tests start
# first, tests/conftest.py); sets up .venv first when it is missing. Usage: bash scripts/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || bash scripts/setup.sh
workers=$(.venv/bin/python -c "import os; print(max(2, min(8, len(os.sched_getaffinity(0)))))")
exec .venv/bin/python -m pytest -n "$workers" "$@"
