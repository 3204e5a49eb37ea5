"""The figures `plot_run` draws, by name, and the files it writes (a leaf: imports nothing of
dlsweep, so the command line lists them without loading the library)."""

PLOT_KINDS = ("heatmap", "trajectories", "thresholds", "lr", "correlation", "agreement", "observables", "pcs",
              "pc_rates", "pc_curves", "gradient_scales", "summary")
NEEDS_TARGETS = ("heatmap", "thresholds", "lr")          # figures of hitting times (the others draw any run)
FIGURE_SUFFIXES = (".png", ".pdf", ".svg")
FORMATS = tuple(suffix.lstrip(".") for suffix in FIGURE_SUFFIXES)   # as --format names them
TIMES = ("step", "eta", "rescaled")                      # the time axes of an observables figure
