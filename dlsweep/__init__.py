"""dlsweep: sweeps of gradient-descent trajectories in deep linear models as one compiled JAX program."""

from dlsweep.model import Model

__version__ = "0.1.0"

__all__ = ["Model", "__version__", "load", "load_trajectories"]


def __getattr__(name: str):
    """`dlsweep.load` and `dlsweep.load_trajectories` import the store (and JAX) when first used,
    so that importing the package is instant: the command line arms its Ctrl-C handling first."""
    if name in ("load", "load_trajectories"):
        from dlsweep import api

        return getattr(api, name)
    raise AttributeError(f"module 'dlsweep' has no attribute {name!r}")
