"""Tasks: the data shared by every trajectory of a sweep (targets, later datasets), made from
the spec and its seed. A task is a dict of arrays passed unbatched (`in_axes=None`)."""

from __future__ import annotations

import math
from collections.abc import Callable

import jax.numpy as jnp


def validate_target_values(task: dict, error: Callable[[str, str], Exception]) -> dict:
    """[task] of a model with explicit targets: `sigma_star`, a non-empty list of numbers > 0."""
    for key in task:
        if key != "sigma_star":
            raise error(key, "unknown key; expected: sigma_star")
    if "sigma_star" not in task:
        raise error("sigma_star", "missing (required): the target values sigma*_i, e.g. [12.0, 6.0, 4.0, 3.0]")
    values = task["sigma_star"]
    if not isinstance(values, list) or not values:
        raise error("sigma_star", f"expected a non-empty list of numbers > 0, got {values!r}")
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise error("sigma_star", f"expected numbers > 0, got {v!r} (entry {i})")
    return {"sigma_star": tuple(float(v) for v in values)}


def make(sweep) -> dict:
    """The shared arrays of a sweep's task, in the sweep's dtype."""
    return {key: jnp.asarray(value, dtype=sweep.dtype) for key, value in sweep.task.items()}
