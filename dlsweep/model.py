"""The model contract: what a model family gives the engine (a leaf: imports nothing of dlsweep).

A model is any object (a frozen dataclass, a flax struct, a plain class) with three pure
functions over ONE trajectory; the engine batches trajectories with `jax.vmap` and compiles once,
so nothing here knows about batches:

    init(key, hp, task)        -> params (a pytree)
    loss(params, hp, task)     -> scalar, differentiated by `jax.grad` and stepped by the optimizer
    observe(params, hp, task)  -> {"sigma": (k,), ...}   the values whose learning order is studied
                                                       (hitting levels are fractions of
                                                       task["sigma_star"]); any further named
                                                       scalars or vectors are recorded too

`hp` holds the trajectory's values of the grid's axes (depth, sparsity, seed as int32, the rest
such as sigma0, lr or a swept optimizer hyperparameter in the sweep's dtype); `task` the data
shared by the whole sweep (`in_axes=None`).

Optional hooks (`HOOKS`), looked up through `hook` only:

    draw(key, task)             -> dict of arrays   random data of one value of the `seed` axis,
                                                    merged into task
    summarize(params, hp, task) -> {name: array}    columns of the runs table from the final state
    selected(params, hp, task)  -> bool (n,)        features counted as chosen now (the runs table
                                                    keeps the order they were first chosen)
    drift_from(anchor, hp, task) -> (params -> scalar)   a bound on how far any sigma_i can be
                                                    from its value at `anchor` (then sigma is
                                                    observed only every few steps between checks)

and one attribute, `observed`: the figures' label of `sigma` (a string, LaTeX allowed).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

METHODS = ("init", "loss", "observe")       # what every model has (`Model`)
HOOKS = ("draw", "summarize", "selected", "drift_from")
INTEGER_HPS = ("depth", "sparsity", "seed")     # axes a model gets as int32; every other axis in the sweep's float dtype
PAIR_HPS = ("pair_i", "pair_j")   # int32 inputs of a threshold refinement's points (`engine.decided`): no axis's names


@runtime_checkable
class Model(Protocol):
    """The three functions every model has (module docstring); the optional ones are `HOOKS`."""

    def init(self, key: Any, hp: Mapping[str, Any], task: Mapping[str, Any]) -> Any:
        """The parameters at step 0 of one trajectory."""

    def loss(self, params: Any, hp: Mapping[str, Any], task: Mapping[str, Any]) -> Any:
        """The scalar loss of one trajectory's parameters."""

    def observe(self, params: Any, hp: Mapping[str, Any], task: Mapping[str, Any]) -> Mapping[str, Any]:
        """{"sigma": (k,), ...}: what is recorded; `sigma` what the hitting levels follow."""


def hook(model: Any, name: str) -> Callable | None:
    """The model's optional hook `name` (one of HOOKS), or None where it has none."""
    if name not in HOOKS:
        raise ValueError(f"{name!r} is not a model hook; the hooks are {', '.join(HOOKS)}")
    return getattr(model, name, None)
