#!/usr/bin/env bash
# Create .venv (if missing) and install qref with every optional backend, from this repository's own files.
# Safe to re-run. Usage: bash scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
. .venv/bin/activate
python -m pip install -q --upgrade pip
# torch first and pinned, so the CPU wheel is used and bitsandbytes/torchao do not pull a GPU build.
python -m pip install -q "torch==2.13.0" || python -m pip install -q "torch>=2.4,<2.15" --index-url https://download.pytorch.org/whl/cpu
python -m pip install -q -e ".[all]"
python -c "import qref; print('qref', qref.__version__, 'installed in .venv')"
