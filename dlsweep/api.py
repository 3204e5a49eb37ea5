"""The verbs of dlsweep as Python functions; `dlsweep.cli` is a thin shell over these. Each lives
in the module of its concern: running a sweep (`sweeping`), its thresholds (`thresholding`), the
per-family analyses (`analyses`) and the figures (`drawing`, a registry of figure kinds)."""

from __future__ import annotations

from dlsweep import store
from dlsweep.analyses import accessibility, early_stopping, learning_order, pc_rates, pc_spread, pc_weight_spread
from dlsweep.drawing import PC_CURVES, figure_slice, plot_run
from dlsweep.sweeping import (RunReport, chunk_group, compile_inputs, compile_sweep, default_chunk_size,
                              default_folder, list_models, plan_run, run, show)
from dlsweep.thresholding import THRESHOLDS_FILE, thresholds

__all__ = ["PC_CURVES", "RunReport", "THRESHOLDS_FILE", "accessibility", "chunk_group", "compile_inputs",
           "compile_sweep", "default_chunk_size", "default_folder", "early_stopping", "figure_slice",
           "learning_order", "list_models", "load", "load_trajectories", "pc_rates", "pc_spread",
           "pc_weight_spread", "plan_run", "plot_run", "run", "show", "thresholds"]


def load(folder, chunks=None, columns=None):
    """The runs table of a run folder (`store.load`: its finished chunks, sorted by run_id); of a
    partial one with a DlsweepWarning "partial: x of y chunks", also in `attrs["partial"]`."""
    return store.said_partial(folder, store.load(folder, chunks, columns))


def load_trajectories(folder):
    """The trajectories table of a run folder (`store.load_trajectories`), saying a partial one
    as `load` does."""
    return store.said_partial(folder, store.load_trajectories(folder))
