#!/usr/bin/env bash
# Rewrite requirements/lock.txt from an environment whose versions were verified (profiles.md §2):
# run the tests (bash scripts/test.sh) and `qref run --backend all` there first. Usage: bash scripts/lock.sh [VENV]
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${1:-.venv}
{
  echo "# qref's lock: every dependency and backend at the versions its profiles were verified with (profiles.md §2)."
  echo "# Regenerate: bash scripts/lock.sh (after installing and verifying newer releases). Used by scripts/setup.sh as a pip constraints file."
  "$VENV/bin/python" -m pip freeze --exclude-editable | grep -v '^-e' | grep -v '^qref' | sed 's/^\(torch==[0-9.]*\)+cpu$/\1/'
} > requirements/lock.txt.tmp
mv requirements/lock.txt.tmp requirements/lock.txt
echo "wrote requirements/lock.txt ($(grep -vc '^#' requirements/lock.txt) packages)"
