#!/usr/bin/env bash
# Build dlsweep's wheel, install it (with its dependencies) into a fresh environment outside the
# repository, and run `dlsweep --help` and a bundled reproduction from there: a module or a data
# file (a sweep spec) left out of the wheel fails here, where the repository cannot stand in.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet --upgrade pip
"$work/venv/bin/python" -m pip wheel --quiet --no-deps --wheel-dir "$work/wheel" .
"$work/venv/bin/python" -m pip install --quiet "$work"/wheel/dlsweep-*.whl
cd "$work"
venv/bin/dlsweep --help > /dev/null
venv/bin/dlsweep reproduce gissin-fig2 --quick --out-root "$work/runs"
find "$work/runs" -name manifest.json | grep -q . || { echo "wheel check: no run folder written" >&2; exit 1; }
find "$work/runs" -name "*.png" | grep -q . || { echo "wheel check: no figure drawn" >&2; exit 1; }
echo "wheel check: ok"
