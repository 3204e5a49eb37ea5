"""Tasks: the data shared by every trajectory of a sweep (targets, later datasets), made from
the spec and its seed. A task is a dict of arrays passed unbatched (`in_axes=None`)."""

from __future__ import annotations

import math
from collections.abc import Callable

import jax.numpy as jnp
import numpy as np


def validate_target_values(task: dict, error: Callable[[str, str], Exception], known=("sigma_star",)) -> dict:
    """[task] of a model with explicit targets: `sigma_star`, a non-empty list of numbers > 0
    (other keys of `known` are left to the caller)."""
    for key in task:
        if key not in known:
            raise error(key, f"unknown key; expected: {', '.join(known)}")
    if "sigma_star" not in task:
        raise error("sigma_star", "missing (required): the target values sigma*_i, e.g. [12.0, 6.0, 4.0, 3.0]")
    values = task["sigma_star"]
    if not isinstance(values, list) or not values:
        raise error("sigma_star", f"expected a non-empty list of numbers > 0, got {values!r}")
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise error("sigma_star", f"expected numbers > 0, got {v!r} (entry {i})")
    return {"sigma_star": tuple(float(v) for v in values)}


def validate_matrix_sensing(task: dict, error: Callable[[str, str], Exception]) -> dict:
    """[task] of deep matrix sensing: `sigma_star` (the nonzero diagonal of W*, > 0), `d` (size,
    >= len(sigma_star)), `measurements` (m >= 0; 0 = the population loss), `init` (identity or
    gaussian)."""
    from dlsweep.models.matrix_sensing import INITS

    known = ("sigma_star", "d", "measurements", "init")
    out = validate_target_values(task, error, known)
    k = len(out["sigma_star"])
    d = task.get("d", k)
    if isinstance(d, bool) or not isinstance(d, int) or d < k:
        raise error("d", f"expected an integer >= len(sigma_star) = {k}, got {d!r}")
    m = task.get("measurements", 0)
    if isinstance(m, bool) or not isinstance(m, int) or m < 0:
        raise error("measurements", f"expected an integer >= 0 (0: the population loss), got {m!r}")
    init = task.get("init", "identity")
    if init not in INITS:
        raise error("init", f"expected one of {INITS}, got {init!r}")
    return out | {"d": d, "measurements": m, "init": init}


def make(sweep) -> dict:
    """The shared arrays of a sweep's task, in the sweep's dtype."""
    return {key: jnp.asarray(value, dtype=sweep.dtype) for key, value in sweep.task.items()}


def make_matrix_sensing(sweep) -> dict:
    """W* = diag(sigma*, 0, ...) and, for m > 0 measurements, A_j with N(0, 1) entries drawn from
    the sweep's seed (NumPy's default generator, rows vec(A_j) row-major), kept as the Gram
    matrix or the measurements themselves (`matrix_sensing.statistic`)."""
    from dlsweep.models.matrix_sensing import statistic

    task = sweep.task
    d, m, k = task["d"], task["measurements"], len(task["sigma_star"])
    w_star = np.zeros((d, d))
    w_star[np.arange(k), np.arange(k)] = task["sigma_star"]
    arrays = {"sigma_star": np.asarray(task["sigma_star"]), "w_star": w_star}
    kind = statistic(d, m)
    if kind != "population":
        a = np.random.default_rng(sweep.seed).standard_normal((m, d * d))
        arrays[kind] = a.T @ a / m if kind == "gram" else a
    return {key: jnp.asarray(value, dtype=sweep.dtype) for key, value in arrays.items()}
