#!/usr/bin/env bash
# Run qref's test suite on every core (xdist; slow tests start first, tests/conftest.py) (sets up .venv first when it
# is missing). Usage: bash scripts/test.sh [pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || bash scripts/setup.sh
exec .venv/bin/python -m pytest -n auto --dist loadgroup "$@"
