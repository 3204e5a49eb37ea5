#!/usr/bin/env bash
# Set up dlsweep with its test extras and run the test suite (arguments go to pytest).
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${DLSWEEP_TEST_VENV:-.venv}"
bash scripts/setup.sh "$venv" test
"$venv/bin/python" -m pytest "$@"
