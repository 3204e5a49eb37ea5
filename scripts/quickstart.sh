#!/usr/bin/env bash
# Set up dlsweep (with the `compare` extra, scikit-learn, which the paper reproductions' baselines
# and the digits data need) and run the default example: the toy-model sweep of depth x sigma0,
# its incremental-learning thresholds beside the theory, and its phase-diagram heatmap.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh .venv compare
.venv/bin/dlsweep run sweeps/toy-threshold.toml "$@"
.venv/bin/dlsweep thresholds runs/toy-threshold --method bisect
.venv/bin/dlsweep plot runs/toy-threshold --kind heatmap
