#!/usr/bin/env bash
# Create .venv (if missing) and install qref with every optional backend at the locked versions
# (requirements/lock.txt: the versions the profiles were verified with, profiles.md §2).
# Safe to re-run. Usage: bash scripts/setup.sh        (QREF_UNPINNED=1: newest releases instead; see README)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${QREF_VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
. "$VENV/bin/activate"
python -m pip install -q --upgrade pip
# the lock is a pip constraints file: every package at its verified version
if [ "${QREF_UNPINNED:-0}" = 1 ]; then
  LOCK=()
  TORCH=torch
else
  LOCK=(-c requirements/lock.txt)
  TORCH=torch==2.13.0
fi
# torch first, so the CPU wheel is used and bitsandbytes/torchao do not pull a GPU build.
python -m pip install -q "${LOCK[@]}" "$TORCH" || \
  python -m pip install -q "${LOCK[@]}" "$TORCH" --index-url https://download.pytorch.org/whl/cpu
python -m pip install -q "${LOCK[@]}" -e ".[all]"
python -c "import qref; print('qref', qref.__version__, 'installed in $VENV')"
