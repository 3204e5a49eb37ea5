#!/usr/bin/env bash
# Set up dlsweep with its test extras and run the test suite: every test not marked slow (8-13
# minutes on two cores, with the host's load). Arguments go to pytest and come after that
# selection, so `-m slow` runs the slow tests alone and `-m ''` runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${DLSWEEP_TEST_VENV:-.venv}"
bash scripts/setup.sh "$venv" test
"$venv/bin/python" -m pytest -m "not slow" "$@"
