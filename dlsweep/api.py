"""The verbs of dlsweep as Python functions; `dlsweep.cli` is a thin shell over these. Each lives
in the module of its concern: running a sweep (`sweeping`), its thresholds (`thresholding`), the
per-family analyses (`analyses`) and the figures (`drawing`, a registry of figure kinds)."""

from __future__ import annotations

from dlsweep.analyses import accessibility, early_stopping, learning_order, pc_rates, pc_spread, pc_weight_spread
from dlsweep.drawing import PC_CURVES, figure_slice, plot_run
from dlsweep.store import load, load_trajectories
from dlsweep.sweeping import (RunReport, chunk_group, compile_inputs, compile_sweep, default_chunk_size,
                              default_folder, list_models, plan_run, run, show)
from dlsweep.thresholding import THRESHOLDS_FILE, thresholds

__all__ = ["PC_CURVES", "RunReport", "THRESHOLDS_FILE", "accessibility", "chunk_group", "compile_inputs",
           "compile_sweep", "default_chunk_size", "default_folder", "early_stopping", "figure_slice",
           "learning_order", "list_models", "load", "load_trajectories", "pc_rates", "pc_spread",
           "pc_weight_spread", "plan_run", "plot_run", "run", "show", "thresholds"]
