"""Model families. A model is a frozen, hashable dataclass of static configuration (its fields are
the compile key) with three pure functions over one trajectory:

    init(key, hp, task)        -> params
    loss(params, hp, task)     -> scalar
    observe(params, hp, task)  -> {"sigma": (k,)}   the values whose learning order is studied

`hp` holds the per-trajectory scalars of the grid (depth, sigma0, lr, seed, ...); `task` holds the
data shared by the whole sweep and must contain `sigma_star` (k,), the targets of `sigma`. The
engine batches trajectories with `jax.vmap`; nothing here knows about batches.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from dlsweep import tasks
from dlsweep.models import matrix_sensing, toy

INTEGER_HPS = ("depth", "seed")     # per-trajectory values passed as int32; every other axis in the sweep's float dtype


@dataclasses.dataclass(frozen=True)
class Family:
    """A model family as the spec and the CLI see it."""

    name: str
    summary: str
    axes: tuple[str, ...]                         # swept axes it needs (`seed` is always optional)
    task_keys: Mapping[str, str]                  # [task] keys -> description
    validate_task: Callable[[dict, Callable[[str, str], Exception]], dict]
    build: Callable[[Any], Any]                   # resolved Sweep -> model instance
    make_task: Callable[[Any], dict] = tasks.make  # resolved Sweep -> the task's arrays


FAMILIES: dict[str, Family] = {
    "toy": Family(
        name="toy",
        summary="Gissin et al. 2020 sec. 2: sigma_i = w_i^N, loss 1/(2N^2) ||w^N - sigma*||^2, w_i(0) = sigma0^(1/N)",
        axes=("depth", "sigma0", "lr"),
        task_keys={"sigma_star": "target values sigma*_i > 0 (list of k numbers)"},
        validate_task=tasks.validate_target_values,
        build=lambda sweep: toy.Toy(k=len(sweep.task["sigma_star"]), max_depth=int(max(sweep.axes["depth"]))),
    ),
    "matrix_sensing": Family(
        name="matrix_sensing",
        summary="Gissin et al. 2020 sec. 4.1: W = W_N...W_1 (d x d), loss 1/(2N) mean <A, W - W*>^2, top singular values of W",
        axes=("depth", "sigma0", "lr"),
        task_keys={"sigma_star": "nonzero diagonal of W* (k numbers > 0)",
                   "d": "matrix size (default k)",
                   "measurements": "number of Gaussian measurements A_j (default 0: the population loss)",
                   "init": "identity (sigma0^(1/N) I) or gaussian (N(0, sigma0^(2/N)/d) entries)"},
        validate_task=tasks.validate_matrix_sensing,
        build=lambda sweep: matrix_sensing.MatrixSensing(
            d=sweep.task["d"], k=len(sweep.task["sigma_star"]), max_depth=int(max(sweep.axes["depth"])),
            init_kind=sweep.task["init"], statistic=matrix_sensing.statistic(sweep.task["d"], sweep.task["measurements"])),
        make_task=tasks.make_matrix_sensing,
    ),
}
