#!/usr/bin/env bash
# Create (or reuse) a virtual environment and install dlsweep into it.
#   scripts/setup.sh [VENV_DIR] [EXTRAS]      defaults: .venv, none ("test" for the test suite)
# With CI=true (or DLSWEEP_FRESH_VENV=1) the environment is always created anew, so no
# leftover of an earlier install can stand in for a missing install step.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-.venv}"
extras="${2:-}"
python="${PYTHON:-python3}"
"$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "dlsweep needs Python >= 3.11")'
if [[ "${CI:-}" == "true" || "${DLSWEEP_FRESH_VENV:-}" == "1" ]]; then
    rm -rf "$venv"
fi
[[ -x "$venv/bin/python" ]] || "$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
target="."
[[ -n "$extras" ]] && target=".[$extras]"
"$venv/bin/python" -m pip install --quiet -e "$target"
