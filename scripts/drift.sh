#!/usr/bin/env bash
# Drift check (not part of CI's pass/fail): install the NEWEST releases of every backend into a separate venv,
# run the profile tests and the harness against them, and write the drift report (profiles.md §2).
# A backend newer than every verified record of its profile is compared with the newest record; its differences
# are listed as drift in out/drift/report.md (a new behaviour to study, or to make a new record of).
# Usage: bash scripts/drift.sh [OUT_DIR]      (default out/drift; the venv is .venv-drift)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-out/drift}
QREF_VENV=.venv-drift QREF_UNPINNED=1 bash scripts/setup.sh || exit 2
mkdir -p "$OUT"
.venv-drift/bin/python -m pip freeze --exclude-editable > "$OUT/versions.txt"
diff <(grep -v '^#' requirements/lock.txt | sort) <(grep -v '^qref' "$OUT/versions.txt" | sed 's/+cpu$//' | sort) \
  > "$OUT/versions-vs-lock.diff"
echo "newer than the lock:"; grep '^>' "$OUT/versions-vs-lock.diff" || echo "  (nothing)"
.venv-drift/bin/python -m pytest -q -n 2 -p no:cacheprovider tests/test_encode_ml_dtypes.py tests/test_profiles.py \
  tests/test_profile_peers.py > "$OUT/profile-tests.txt" 2>&1
echo "profile tests: $(tail -1 "$OUT/profile-tests.txt")"
.venv-drift/bin/qref run --backend all --out "$OUT/run" --force
rc=$?
case $rc in
  0) echo "qref run: no drift: every installed backend matches a verified record" ;;
  3) echo "qref run: DRIFT: see $OUT/run/report.md (section Drift)" ;;
  *) echo "qref run: unexpected failures (exit $rc): see $OUT/run/report.md" ;;
esac
exit $rc
