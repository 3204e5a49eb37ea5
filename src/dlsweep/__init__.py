"""dlsweep: sweeps of gradient-descent trajectories in deep linear models as one compiled JAX program."""

__version__ = "0.1.0"

from dlsweep.store import load, load_trajectories  # noqa: E402

__all__ = ["__version__", "load", "load_trajectories"]
