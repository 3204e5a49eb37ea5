"""The validation toolkit of every spec table (the spec's own keys and each family's `[task]`):
validators that take a table and a key and raise `error(key, message)` naming the key and what
was expected; and the task's arrays. A task is a dict of arrays passed unbatched (`in_axes=None`);
random data (measurements, datasets) is drawn inside the program by the model's `draw`, per
value of the `seed` axis (`engine.chunk_task`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax.numpy as jnp

Error = Callable[[str, str], Exception]
DEFAULT_TOP = 5          # observed values of a family whose targets do not fix how many


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def reject_unknown(table: Mapping, known: Sequence[str], error: Error) -> None:
    for key in table:
        if key not in known:
            raise error(key, f"unknown key; expected one of: {', '.join(known)}")


def number(table: Mapping, key: str, default: float, low: float, error: Error, low_open: bool = True) -> float:
    """A finite number > low (>= low where not `low_open`)."""
    value = table.get(key, default)
    if not (is_number(value) and math.isfinite(value) and (value > low if low_open else value >= low)):
        raise error(key, f"expected a finite number {'>' if low_open else '>='} {low:g}, got {value!r}")
    return float(value)


def positive_numbers(task: dict, key: str, error: Error, allow_zero: bool = False) -> tuple[float, ...]:
    """A required non-empty list of finite numbers > 0 (>= 0 with `allow_zero`, then not all 0)."""
    if key not in task:
        raise error(key, "missing (required): a list of numbers, e.g. [12.0, 6.0, 4.0, 3.0]")
    values = task[key]
    bound = ">= 0" if allow_zero else "> 0"
    if not isinstance(values, list) or not values:
        raise error(key, f"expected a non-empty list of numbers {bound}, got {values!r}")
    for i, v in enumerate(values):
        if not is_number(v) or not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
            raise error(key, f"expected numbers {bound}, got {v!r} (entry {i})")
    if not any(values):
        raise error(key, f"expected at least one nonzero entry, got {values!r}")
    return tuple(float(v) for v in values)


def signed_numbers(task: dict, key: str, error: Error, also: str = "") -> tuple[float, ...]:
    """A required non-empty list of finite numbers, not all 0 (`also`: the other accepted forms)."""
    values = task.get(key)
    if not isinstance(values, list) or not values or not all(
            is_number(v) and math.isfinite(v) for v in values):
        raise error(key, f"expected a non-empty list of finite numbers{also}, got {values!r}")
    if not any(values):
        raise error(key, f"expected at least one nonzero entry, got {values!r}")
    return tuple(float(v) for v in values)


def integer(task: Mapping, key: str, default: int | None, minimum: int, error: Error, bound: str = "", note: str = "") -> int:
    """An integer >= minimum; the message names the bound ("len(sigma_star) = 2") and a note."""
    value = task.get(key, default)
    if not is_int(value) or value < minimum:
        named = f"{bound} = {minimum}" if bound else f"{minimum}"
        raise error(key, f"expected an integer >= {named}{note}, got {value!r}")
    return value


def noise(task: dict, default: float, error: Error) -> float:
    """`noise`: a standard deviation >= 0."""
    value = task.get("noise", default)
    if not is_number(value) or not math.isfinite(value) or value < 0:
        raise error("noise", f"expected a standard deviation >= 0, got {value!r}")
    return float(value)


def flag(task: dict, key: str, error: Error) -> bool:
    """true or false (default false)."""
    value = task.get(key, False)
    if not isinstance(value, bool):
        raise error(key, f"expected true or false, got {value!r}")
    return value


def choice(task: dict, key: str, options: tuple, error: Error) -> str:
    """One of `options`; the first is the default."""
    value = task.get(key, options[0])
    if value not in options:
        raise error(key, f"expected one of {options}, got {value!r}")
    return value


def fixed(task: dict, key: str, value: int, error: Error, what: str) -> None:
    """A key the data fix: allowed only with that value."""
    if key in task and task[key] != value:
        raise error(key, f"is fixed by the data: {what} = {value}, got {task[key]!r}")


def target_values(task: dict, error: Error, known=("sigma_star",)) -> dict:
    """[task] of a model with explicit targets: `sigma_star`, a non-empty list of numbers > 0
    (other keys of `known` are left to the caller)."""
    reject_unknown(task, known, error)
    return {"sigma_star": positive_numbers(task, "sigma_star", error)}


def top(task: dict, k: int, d: int, error: Error) -> int:
    """`top`: how many of the largest values are observed, k = len(sigma_star) <= top <= d."""
    value = integer(task, "top", k, k, error, bound="len(sigma_star)")
    if value > d:
        raise error("top", f"expected at most d = {d}, got {value}")
    return value


def targets_if_all_observed(task: dict) -> tuple | None:
    """sigma* are the targets of the observed values when exactly k = len(sigma*) are observed
    (more observed values have no targets)."""
    return task["sigma_star"] if task["top"] == len(task["sigma_star"]) else None


def arrays(sweep, values: dict) -> dict:
    """`values` as the task's arrays, in the sweep's dtype."""
    return {key: jnp.asarray(value, dtype=sweep.dtype) for key, value in values.items()}


def make(sweep) -> dict:
    """The shared arrays of a sweep's task: its validated values, in the sweep's dtype."""
    return arrays(sweep, sweep.task)


def switches(sweep, *names: str) -> dict:
    """The task's boolean switches `names` as boolean scalars: traced in the program, where the
    model selects with them (`models.layers.select`), so sweeps differing in them alone share one."""
    return {name: jnp.asarray(bool(sweep.task[name])) for name in names}
