"""Tasks: what every trajectory of a sweep shares (targets, the target or labelling vector),
validated and made from the spec. A task is a dict of arrays passed unbatched (`in_axes=None`);
random data (measurements, datasets) is drawn inside the program by the model's `draw`, per
value of the `seed` axis (`engine.chunk_task`)."""

from __future__ import annotations

import math
from collections.abc import Callable

import jax.numpy as jnp
import numpy as np


Error = Callable[[str, str], Exception]


def _reject_unknown(task: dict, known: tuple[str, ...], error: Error) -> None:
    for key in task:
        if key not in known:
            raise error(key, f"unknown key; expected: {', '.join(known)}")


def _positive_numbers(task: dict, key: str, error: Error, allow_zero: bool = False) -> tuple[float, ...]:
    """A required non-empty list of finite numbers > 0 (>= 0 with `allow_zero`, then not all 0)."""
    if key not in task:
        raise error(key, "missing (required): a list of numbers, e.g. [12.0, 6.0, 4.0, 3.0]")
    values = task[key]
    bound = ">= 0" if allow_zero else "> 0"
    if not isinstance(values, list) or not values:
        raise error(key, f"expected a non-empty list of numbers {bound}, got {values!r}")
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
            raise error(key, f"expected numbers {bound}, got {v!r} (entry {i})")
    if not any(values):
        raise error(key, f"expected at least one nonzero entry, got {values!r}")
    return tuple(float(v) for v in values)


def _integer(task: dict, key: str, default: int, minimum: int, error: Error, bound: str = "", note: str = "") -> int:
    """An integer >= minimum; the message names the bound ("len(sigma_star) = 2") and a note."""
    value = task.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        named = f"{bound} = {minimum}" if bound else f"{minimum}"
        raise error(key, f"expected an integer >= {named}{note}, got {value!r}")
    return value


def _flag(task: dict, key: str, error: Error) -> bool:
    """true or false (default false)."""
    value = task.get(key, False)
    if not isinstance(value, bool):
        raise error(key, f"expected true or false, got {value!r}")
    return value


def _choice(task: dict, key: str, options: tuple, error: Error) -> str:
    """One of `options`; the first is the default."""
    value = task.get(key, options[0])
    if value not in options:
        raise error(key, f"expected one of {options}, got {value!r}")
    return value


def validate_target_values(task: dict, error: Error, known=("sigma_star",)) -> dict:
    """[task] of a model with explicit targets: `sigma_star`, a non-empty list of numbers > 0
    (other keys of `known` are left to the caller)."""
    _reject_unknown(task, known, error)
    return {"sigma_star": _positive_numbers(task, "sigma_star", error)}


def validate_matrix_sensing(task: dict, error: Error) -> dict:
    """[task] of deep matrix sensing: `sigma_star` (the nonzero diagonal of W*, > 0), `d` (size,
    >= len(sigma_star)), `measurements` (m >= 0; 0 = the population loss), `init` (identity or
    gaussian)."""
    from dlsweep.models.matrix_sensing import INITS

    out = validate_target_values(task, error, ("sigma_star", "d", "measurements", "init", "top"))
    k = len(out["sigma_star"])
    out = out | {"d": _integer(task, "d", k, k, error, bound="len(sigma_star)")}
    return out | {"top": _top(task, k, out["d"], error),
                  "measurements": _integer(task, "measurements", 0, 0, error, note=" (0: the population loss)"),
                  "init": _choice(task, "init", INITS, error)}


def validate_quadratic(task: dict, error: Error) -> dict:
    """[task] of the quadratic network: `sigma_star` (the nonzero eigenvalues of W*^T W*, > 0),
    `d` (>= len(sigma_star)), `examples` (n >= 0; 0 = the population loss), `loss` (variance or
    squared), `bias` (a trainable global bias started at its optimum)."""
    from dlsweep.models.quadratic import LOSSES

    out = validate_target_values(task, error, ("sigma_star", "d", "examples", "loss", "bias", "top"))
    k = len(out["sigma_star"])
    bias = _flag(task, "bias", error)
    out = out | {"d": _integer(task, "d", k, k, error, bound="len(sigma_star)")}
    return out | {"top": _top(task, k, out["d"], error),
                  "examples": _integer(task, "examples", 0, 0, error, note=" (0: the population loss)"),
                  "loss": _choice(task, "loss", LOSSES, error), "bias": bias}


def _top(task: dict, k: int, d: int, error: Error) -> int:
    """`top`: how many of the largest values are observed, k = len(sigma_star) <= top <= d."""
    top = _integer(task, "top", k, k, error, bound="len(sigma_star)")
    if top > d:
        raise error("top", f"expected at most d = {d}, got {top}")
    return top


def targets_if_all_observed(task: dict) -> tuple | None:
    """sigma* are the targets of the observed values when exactly k = len(sigma*) are observed
    (more observed values have no targets)."""
    return task["sigma_star"] if task["top"] == len(task["sigma_star"]) else None


RANDOM_TARGET = "random"    # w_star drawn per seed with the `sparsity` axis's number of nonzeros
DEFAULT_TOP = 5


def validate_diagonal(task: dict, error: Error) -> dict:
    """[task] of the signed diagonal network: `w_star` (the first entries of the target /
    labelling vector, the rest 0; or "random": drawn per seed with `sparsity` nonzeros), `d`,
    `examples` (m; 0 = the population loss, squared only), `normalize` (unit-norm example
    columns), `loss` (squared, exponential or logistic), `top` (how many of the largest |sigma_i|
    are observed), `select` (the threshold on |sigma_i| that selects a feature; 0: none). A
    squared loss with a fixed w* has targets: sigma_star = the `top` largest |w*_i|."""
    from dlsweep.models.diagonal import LOSSES

    _reject_unknown(task, ("w_star", "d", "examples", "normalize", "loss", "top", "select"), error)
    loss = _choice(task, "loss", LOSSES, error)
    random = task.get("w_star") == RANDOM_TARGET
    if random:
        if loss != "squared":
            raise error("w_star", f'"{RANDOM_TARGET}" needs loss = "squared" (its labels would change with the sparsity)')
        if "d" not in task:
            raise error("d", "missing: a random w_star needs the dimension d")
        w_star, nonzero = RANDOM_TARGET, []
        d = _integer(task, "d", 1, 1, error)
    else:
        w_star = _signed_numbers(task, "w_star", error, also=f', or "{RANDOM_TARGET}"')
        nonzero = sorted((abs(v) for v in w_star if v != 0), reverse=True)
        d = _integer(task, "d", len(w_star), len(w_star), error, bound="len(w_star)")
    examples = _integer(task, "examples", 0, 0 if loss == "squared" else 1, error,
                        note=" (0: the population loss)" if loss == "squared" else " (a classification loss needs data)")
    normalize = _flag(task, "normalize", error)
    if normalize and examples < 2:
        raise error("normalize", f"unit-norm columns need examples >= 2, got examples = {examples}")
    top = _integer(task, "top", len(nonzero) or min(DEFAULT_TOP, d), 1, error)
    if top > d:
        raise error("top", f"expected at most d = {d} observed values, got {top}")
    select = task.get("select", 0.0)
    if isinstance(select, bool) or not isinstance(select, (int, float)) or not math.isfinite(select) or select < 0:
        raise error("select", f"expected a finite number >= 0 (0: no selection recorded), got {select!r}")
    out = {"w_star": w_star, "d": d, "examples": examples, "normalize": normalize, "loss": loss, "top": top,
           "select": float(select)}
    if loss == "squared" and not random and top <= len(nonzero):
        out["sigma_star"] = tuple(nonzero[:top])
    return out


def check_diagonal_axes(task: dict, axes: dict, error: Error) -> None:
    """A random w_star goes with a `sparsity` axis of values in 1..d, and only it."""
    random = task["w_star"] == RANDOM_TARGET
    if random and "sparsity" not in axes:
        raise error("task.w_star", f'"{RANDOM_TARGET}" needs an axis `sparsity` (the number of nonzeros of w*)')
    if "sparsity" in axes and not random:
        raise error("axes.sparsity", f'a sparsity axis needs task.w_star = "{RANDOM_TARGET}"')
    if random and axes["sparsity"].max() > task["d"]:
        raise error("axes.sparsity", f"expected values <= d = {task['d']}, got {int(axes['sparsity'].max())}")


def validate_conv(task: dict, error: Error) -> dict:
    """[task] of the circular-convolutional network: `frequencies` (the real DFT coefficients of
    the labelling vector at frequencies 0, 1, ..., the rest 0; >= 0), `d` (signal length),
    `examples` (m >= 1), `loss` (exponential or logistic), `top` (largest amplitudes observed)."""
    from dlsweep.models.conv import LOSSES

    _reject_unknown(task, ("frequencies", "d", "examples", "loss", "top"), error)
    values = _positive_numbers(task, "frequencies", error, allow_zero=True)
    d = _integer(task, "d", 2 * len(values), 2 * len(values) - 1, error, bound="2 len(frequencies) - 1")
    top = _integer(task, "top", min(5, d // 2 + 1), 1, error)
    if top > d // 2 + 1:
        raise error("top", f"expected at most d // 2 + 1 = {d // 2 + 1} observed amplitudes, got {top}")
    return {"frequencies": values, "d": d, "examples": _integer(task, "examples", 1, 1, error),
            "loss": _choice(task, "loss", LOSSES, error), "top": top}


def _signed_numbers(task: dict, key: str, error: Error, also: str = "") -> tuple[float, ...]:
    """A required non-empty list of finite numbers, not all 0 (`also`: the other accepted forms)."""
    values = task.get(key)
    if not isinstance(values, list) or not values or not all(
            not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) for v in values):
        raise error(key, f"expected a non-empty list of finite numbers{also}, got {values!r}")
    if not any(values):
        raise error(key, f"expected at least one nonzero entry, got {values!r}")
    return tuple(float(v) for v in values)


def make(sweep) -> dict:
    """The shared arrays of a sweep's task, in the sweep's dtype."""
    return _arrays(sweep, sweep.task)


def make_matrix_sensing(sweep) -> dict:
    """W* = diag(sigma*, 0, ...), d x d (the measurements are drawn in the program, per seed)."""
    task = sweep.task
    d, k = task["d"], len(task["sigma_star"])
    w_star = np.zeros((d, d))
    w_star[np.arange(k), np.arange(k)] = task["sigma_star"]
    return _arrays(sweep, {"sigma_star": task["sigma_star"], "w_star": w_star})


def _arrays(sweep, arrays: dict) -> dict:
    return {key: jnp.asarray(value, dtype=sweep.dtype) for key, value in arrays.items()}


def make_quadratic(sweep) -> dict:
    """sigma* and the diagonal of W* = diag(sqrt(sigma*), 0, ...) (d entries)."""
    task = sweep.task
    root = np.zeros(task["d"])
    root[: len(task["sigma_star"])] = np.sqrt(task["sigma_star"])
    return _arrays(sweep, {"sigma_star": task["sigma_star"], "w_star_diagonal": root})


def make_diagonal(sweep) -> dict:
    """w* (d entries; unit norm for a classification loss, where only its direction labels) and
    the targets sigma*, if any; nothing for a random w* (drawn per seed in the program)."""
    task = sweep.task
    if task["w_star"] == RANDOM_TARGET:
        return {}
    w_star = np.zeros(task["d"])
    w_star[: len(task["w_star"])] = task["w_star"]
    if task["loss"] != "squared":
        w_star /= np.linalg.norm(w_star)
    arrays = {"w_star": w_star} | ({"sigma_star": task["sigma_star"]} if "sigma_star" in task else {})
    return _arrays(sweep, arrays)


def make_conv(sweep) -> dict:
    """The labelling vector w* = irfft(frequencies, d) / its norm (Gissin et al. App. G.3)."""
    task = sweep.task
    spectrum = np.zeros(task["d"] // 2 + 1)
    spectrum[: len(task["frequencies"])] = task["frequencies"]
    w_star = np.fft.irfft(spectrum, n=task["d"])
    return _arrays(sweep, {"w_star": w_star / np.linalg.norm(w_star)})
