"""Sweep specifications: TOML -> a validated, frozen :class:`Sweep`.

Every error is a :class:`SpecError` that names the file, the key and what was expected, and is
raised before anything is written to disk.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import tomllib
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dlsweep import models, optimizers, schema
from dlsweep.errors import SpecError
from dlsweep.model import INTEGER_HPS, PAIR_HPS, hook
from dlsweep.models import user
from dlsweep.models.layers import SHAPE_RANGE
from dlsweep.plan import grid_too_large
from dlsweep.store import level_name
from dlsweep.warning import DlsweepWarning

DTYPES = ("float32", "float64")
SCHEDULES = ("log", "linear")
MAX_RECORD_POINTS = 1000
MAX_STEPS = 2**31 - 2
MAX_DEPTH = 1024           # depth is unrolled as masked multiplies up to the grid's largest depth
POSITIVE_AXES = ("sigma0", "lr")      # float axes > 0, not below the dtype's smallest normal number
INT_AXIS_RANGE = {"depth": (1, MAX_DEPTH), "sparsity": (1, 2**31 - 1), "seed": (0, 2**31 - 1)}
TOP_LEVEL_KEYS = ("name", "model", "steps", "dtype", "seed", "task", "axes", "record", "stop", "compare", "optimizer")


@dataclasses.dataclass(frozen=True)
class Record:
    """What is recorded: at most `points` steps on a log or linear schedule (where its gaps reach
    `stop.check_every`, rounded to the steps where trajectories are checked:
    `engine.record_plan`), the hitting levels, and whether the trajectories table is written
    (`trajectories = false`: the runs table alone, for a sweep read only through its thresholds,
    first-hitting steps and final values; the trajectories computed are the same)."""

    schedule: str = "log"
    points: int = 200
    levels: tuple[float, ...] = (0.05, 0.5, 0.95)
    trajectories: bool = True

    def to_dict(self) -> dict[str, Any]:
        """The table as plain values; `trajectories` only when off, so a sweep that writes them
        keeps the hash it had before they could be left out."""
        table = {"schedule": self.schedule, "points": self.points, "levels": list(self.levels)}
        return table if self.trajectories else table | {"trajectories": False}


@dataclasses.dataclass(frozen=True)
class Stop:
    """When a trajectory stops before `steps`.

    converged: every hitting level reached and loss <= rel_loss * initial loss or loss <= `loss`
    (an absolute threshold, 0 = none);
    diverged: non-finite parameters or loss, or loss > blowup * initial loss.
    Both are checked every `check_every` steps (and at each recorded step before that interval
    is reached; then on the grid steps - j check_every); a diverged trajectory is restored to
    the last checked state.
    """

    rel_loss: float = 1e-6
    blowup: float = 1e6
    check_every: int = 64
    loss: float = 0.0


@dataclasses.dataclass(frozen=True)
class Sweep:
    """A resolved sweep: every default filled in, every axis an explicit array."""

    name: str
    model: str
    steps: int
    dtype: str
    seed: int
    task: Mapping[str, Any]
    axes: Mapping[str, np.ndarray]
    record: Record
    stop: Stop
    compare: bool = False      # the model's baseline on each seed's data, as runs columns (dlsweep.compare)
    optimizer: optimizers.Optimizer = optimizers.Optimizer()
    family: models.Family | None = dataclasses.field(default=None, compare=False, repr=False)   # of `model`
    source: str = dataclasses.field(default="<memory>", compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The resolved spec as plain TOML-able values (what `sweep.toml` holds): the task's keys
        that a spec may give (what validation derives from them, e.g. targets, is derived again
        when the file is loaded). The optimizer's table only when it is not plain `sgd`, so a
        gradient-descent sweep keeps the hash it had before optimizers could be chosen. A model
        from the user's file as its `[model]` table (`models.user.Reference.to_dict`: the file's
        name and sha256, so an edited model is a different sweep)."""
        given = self.family.task_keys
        optimizer = {} if self.optimizer == optimizers.Optimizer() else {"optimizer": self.optimizer.to_dict()}
        reference = self.family.reference
        return {
            "name": self.name,
            "model": reference.to_dict() if reference is not None else self.model,
            "steps": self.steps,
            "dtype": self.dtype,
            "seed": self.seed,
            "task": {k: _plain(v) for k, v in self.task.items() if k in given},
            "axes": {k: _plain(v) for k, v in self.axes.items()},
            "record": self.record.to_dict(),
            "stop": dataclasses.asdict(self.stop),
            "compare": self.compare,
        } | optimizer

    @property
    def n_runs(self) -> int:
        """Trajectories in the grid: the product of the axes' sizes."""
        return math.prod(len(values) for values in self.axes.values())

    def spec_hash(self) -> str:
        """sha256 of the canonical resolved spec: equal hashes mean identical results."""
        blob = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def to_toml(self) -> str:
        return dumps_toml(self.to_dict())

    def folder_files(self) -> dict[str, bytes]:
        """Files a run folder keeps beside `sweep.toml` for its spec to load there: a user's
        model file, under its own name."""
        reference = self.family.reference
        return {} if reference is None else {reference.path.name: reference.source}


def _plain(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        return value.item()
    return value


# ----------------------------------------------------------------------------- loading


def check_counts(counts: Mapping[str, Any]) -> None:
    """Count parameters (chunk_size, shards, ...), by name: each None or an integer >= 1."""
    for name, value in counts.items():
        if value is not None and (not isinstance(value, int) or value < 1):
            raise SpecError(f"{name}={value!r}: expected an integer >= 1")


def load(path: str | Path, overrides: Sequence[str] = (), model: Any = None) -> Sweep:
    """Read a TOML sweep file, apply `KEY=VALUE` overrides, validate and resolve it; `model`, a
    model object, replaces the file's `model` (`resolve`)."""
    path = Path(path)
    if not path.is_file():
        raise SpecError(f"{path}: no such spec file")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as err:
        raise SpecError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start}); save the spec as UTF-8") from None
    except tomllib.TOMLDecodeError as err:
        raise SpecError(f"{path}: not valid TOML: {err}") from None
    overridden = apply_overrides(raw, overrides, path)
    return resolve(raw, source=str(path), overridden=overridden, model=model)


def apply_overrides(raw: dict, overrides: Sequence[str], path: Path | str) -> dict[str, str]:
    """Set dotted keys from `KEY=VALUE` strings (VALUE parsed as TOML, else a string); returns
    each overridden key's override."""
    overridden = {}
    for item in overrides:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise SpecError(f"{path}: overrides=[{item!r}]: expected KEY=VALUE, e.g. steps=20000")
        try:
            value = tomllib.loads(f"v = {text.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            value = text.strip()
        table = raw
        parts = key.split(".")
        for part in parts[:-1]:
            table = table.setdefault(part, {})
            if not isinstance(table, dict):
                raise SpecError(f"{path}: overrides=[{item!r}]: {part!r} is not a table")
        table[parts[-1]] = value
        overridden[key] = item
    return overridden


class _Where:
    """Formats error locations: `file: key`, with the override that set the key, if one did."""

    def __init__(self, source: str, overridden: Mapping[str, str]):
        self.source, self.overridden = source, overridden

    def error(self, key: str, message: str) -> SpecError:
        return SpecError(self.at(key, message))

    def warn(self, key: str, message: str) -> None:
        warnings.warn(self.at(key, message), DlsweepWarning, stacklevel=4)

    def at(self, key: str, message: str) -> str:
        related = [item for k, item in self.overridden.items()
                   if k == key or k.startswith(key + ".") or key.startswith(k + ".")]
        origin = f" (from overrides=[{related[0]!r}])" if related else ""
        return f"{self.source}: key '{key}'{origin}: {message}"


def resolve(raw: Mapping[str, Any], source: str = "<memory>", overridden: Mapping[str, str] | None = None,
            model: Any = None) -> Sweep:
    """Validate a raw spec mapping and fill in defaults; `overridden`: key -> the override that
    set it (`apply_overrides`), named in errors about that key. `model`, a model object (an
    instance of a class defined at the top level of a .py file), replaces the spec's `model`: it
    is rebuilt from its file and fields (`models.user.table_of`), like a model the spec names."""
    where = _Where(source, overridden or {})
    if model is not None:
        raw = {**raw, "model": user.table_of(model, where.error)}
    _reject_unknown(raw, TOP_LEVEL_KEYS, "", where)

    name = _required(raw, "name", where)
    if (not isinstance(name, str) or not name.strip() or "/" in name or name.startswith(".")
            or not name.isprintable()):
        raise where.error("name", f"expected a non-blank folder name of printable characters, without '/' "
                                  f"and not starting with '.', got {name!r}")
    model = _required(raw, "model", where)
    if user.is_reference(model):
        family = _user_family(model, raw, where)
    elif isinstance(model, str) and model in models.FAMILIES:
        family = models.FAMILIES[model]
    else:
        raise where.error("model", f"unknown model {model!r}; known: {', '.join(models.FAMILIES)}, or a model of your "
                                   f'own, "FILE.py:Class"')
    model_name = family.name

    _required(raw, "steps", where)
    steps = schema.integer(raw, "steps", None, 1, where.error)
    if steps > MAX_STEPS:
        raise where.error("steps", f"expected at most {MAX_STEPS} (steps are counted in int32), got {steps}")
    dtype = raw.get("dtype", "float32")
    if dtype not in DTYPES:
        raise where.error("dtype", f"expected one of {DTYPES}, got {dtype!r}")
    seed = schema.integer(raw, "seed", 0, 0, where.error)
    if seed > INT_AXIS_RANGE["seed"][1]:
        raise where.error("seed", f"expected an integer in [0, {INT_AXIS_RANGE['seed'][1]}], got {seed}")

    task = _table(raw, "task", where, required=family.reference is None)
    task = family.validate_task(task, lambda key, msg: where.error(f"task.{key}", msg))

    axes_raw = _table(raw, "axes", where)
    optimizer_table = _table(raw, "optimizer", where, required=False)
    optimizer_name = _optimizer_name(optimizer_table, where)
    kind = optimizers.KINDS[optimizer_name]
    optional = (*family.optional_axes, *kind.defaults, "seed")
    _reject_unknown_axes(axes_raw, (*family.axes, *optional), where)
    axes = {}
    for axis in (*family.axes, *optional):
        if axis not in axes_raw:
            if axis in optional:
                continue
            raise where.error(f"axes.{axis}", f"missing; model {model_name!r} sweeps {', '.join(family.axes)}")
        axes[axis] = _axis_values(axes_raw[axis], axis, dtype, where, kind.ranges.get(axis))
    family.check_axes(task, axes, where.error)
    optimizer = _optimizer(optimizer_table, optimizer_name, axes, dtype, where)

    record = _record(_table(raw, "record", where, required=False), steps, where, has_targets=family.targets(task) is not None)
    stop = _stop(_table(raw, "stop", where, required=False), where)
    compare = raw.get("compare", False)
    if not isinstance(compare, bool):
        raise where.error("compare", f"expected true or false, got {compare!r}")
    if compare and family.baseline(task) is None:
        raise where.error("compare", f"model {model_name!r} with this task has no baseline to compare with")
    return Sweep(name, model_name, steps, dtype, seed, task, axes, record, stop, compare, optimizer, family, source=source)


def _user_family(model: str | dict, raw: Mapping[str, Any], where: _Where) -> models.Family:
    """The family of a model from the user's file, the path relative to the spec file's folder
    (the working directory for a spec given as a mapping)."""
    base = Path(where.source).parent if where.source != "<memory>" else Path.cwd()
    reference = user.resolve(model, base, where.error)
    instance = user.instantiate(reference, where.error)
    task, axes = raw.get("task", {}), raw.get("axes", {})
    reserved = [axis for axis in PAIR_HPS if isinstance(axes, dict) and axis in axes]
    if reserved:
        raise where.error(f"axes.{reserved[0]}", f"a name the engine gives a threshold refinement's points "
                                                 f"({' and '.join(PAIR_HPS)}); name the axis otherwise")
    return user.family(reference, instance, list(task) if isinstance(task, dict) else [],
                       list(axes) if isinstance(axes, dict) else [])


def warn_if_seeds_identical(sweep: Sweep, model: Any, task: Mapping[str, Any]) -> None:
    """A DlsweepWarning when the seed axis has several values over a model that, with this
    sweep's settings, has no randomness, so every seed runs an identical copy: neither the data
    it draws per seed (`draw`) nor its init depends on the random key, by the data flow of the
    traced program (nothing is run). Traced at the first value of every axis: the models choose
    what is random by their static settings (task, init), never by an axis value."""
    import jax

    seeds = sweep.axes.get("seed", ())
    if len(seeds) < 2:
        return
    hp = {axis: np.asarray(values[0], np.int32 if axis in INTEGER_HPS else sweep.dtype)
          for axis, values in sweep.axes.items()}
    draw = hook(model, "draw")

    def drawn_and_init(key):
        drawn = draw(key, task) if draw is not None else {}
        return drawn, model.init(key, hp, {**task, **drawn})

    if not _depends_on_input(jax.make_jaxpr(drawn_and_init)(jax.random.key(0)).jaxpr):
        warnings.warn(f"{sweep.source}: key 'axes.seed': {len(seeds)} values, but model {sweep.model!r} with these "
                      f"settings has the same data and the same init for every seed, so the {len(seeds)} seeds run "
                      f"identical copies of every trajectory; drop the seed axis", DlsweepWarning, stacklevel=2)


def _depends_on_input(jaxpr) -> bool:
    """Whether any output of a traced program depends on its inputs: an operation with an
    input-dependent operand makes all its results input-dependent (so a nested program counts
    whole: conservative, never a false 'independent')."""
    from jax.extend.core import Var

    dependent = set(jaxpr.invars)
    for eqn in jaxpr.eqns:
        if any(isinstance(v, Var) and v in dependent for v in eqn.invars):
            dependent.update(eqn.outvars)
    return any(isinstance(v, Var) and v in dependent for v in jaxpr.outvars)


def _optimizer_name(table: dict, where: _Where) -> str:
    """The `[optimizer]` table's optimizer, a key of `optimizers.KINDS` (default sgd)."""
    name = table.get("name", "sgd")
    if not isinstance(name, str) or name not in optimizers.KINDS:
        raise where.error("optimizer.name", f"unknown optimizer {name!r}; known: {', '.join(optimizers.KINDS)}")
    return name


def _optimizer(table: dict, name: str, axes: Mapping[str, np.ndarray], dtype: str,
               where: _Where) -> optimizers.Optimizer:
    """The resolved optimizer: each hyperparameter that is not an axis fixed at the table's value
    or its default; one that is an axis must not also be given a value here."""
    kind = optimizers.KINDS[name]
    _reject_unknown(table, ("name", *kind.defaults), "optimizer", where)
    fixed = []
    for hyperparameter, default in kind.defaults.items():
        if hyperparameter in axes:
            if hyperparameter in table:
                raise where.error(f"optimizer.{hyperparameter}", f"also swept as axes.{hyperparameter}; give it in one "
                                                                 f"place: a value here or the axis")
            continue
        value = table.get(hyperparameter, default)
        if not schema.is_number(value):
            raise where.error(f"optimizer.{hyperparameter}", f"expected a number, got {value!r}")
        checked = _check_hyperparameter(np.asarray([value], np.float64), hyperparameter, kind.ranges[hyperparameter],
                                        f"optimizer.{hyperparameter}", dtype, where)
        fixed.append((hyperparameter, float(checked[0])))
    return optimizers.Optimizer(name, tuple(fixed))


def _reject_unknown_axes(axes: Mapping, allowed: Sequence[str], where: _Where) -> None:
    """Unknown axes, with a hint where one is a hyperparameter of another optimizer."""
    for key in axes:
        if key in optimizers.HYPERPARAMETERS and key not in allowed:
            users = [name for name, kind in optimizers.KINDS.items() if key in kind.defaults]
            raise where.error(f"axes.{key}", f"a hyperparameter of optimizer {' / '.join(users)}; set [optimizer] "
                                             f"name = {users[0]!r} to sweep it")
    _reject_unknown(axes, allowed, "axes", where)


def _reject_unknown(table: Mapping, allowed: Sequence[str], prefix: str, where: _Where) -> None:
    schema.reject_unknown(table, allowed, _in_table(prefix, where))


def _in_table(prefix: str, where: _Where) -> schema.Error:
    """`where.error` for the keys of the table `prefix` ("" for the top level)."""
    return lambda key, message: where.error(f"{prefix}.{key}" if prefix else key, message)


def _required(raw: Mapping, key: str, where: _Where) -> Any:
    if key not in raw:
        raise where.error(key, "missing (required)")
    return raw[key]


def _table(raw: Mapping, key: str, where: _Where, required: bool = True) -> dict:
    if key not in raw:
        if required:
            raise where.error(key, "missing table (required)")
        return {}
    value = raw[key]
    if not isinstance(value, dict):
        raise where.error(key, f"expected a table, got {value!r}")
    return value


def _axis_values(value: Any, axis: str, dtype: str, where: _Where,
                 bounds: tuple[float, float, bool] | None = None) -> np.ndarray:
    """An axis's values, checked; `bounds`: an optimizer hyperparameter's range (`optimizers.Kind`)."""
    key = f"axes.{axis}"
    if isinstance(value, dict):
        values = _axis_range(value, key, where)
    elif isinstance(value, list):
        values = value
    elif schema.is_number(value):
        values = [value]
    else:
        raise where.error(key, "expected a list, a number, or {logspace = [a, b], num = n} / {linspace = [a, b], num = n}"
                          f", got {value!r}")
    if len(values) == 0:
        raise where.error(key, "empty axis: give at least one value")
    for i, v in enumerate(values):
        if not schema.is_number(v) or not math.isfinite(v):
            raise where.error(key, f"expected finite numbers, got {v!r} (entry {i})")
    values = np.asarray(values)
    checked = (_check_axis(axis, values, key, dtype, where) if bounds is None
               else _check_hyperparameter(values.astype(np.float64), axis, bounds, key, dtype, where))
    return _distinct(checked, key, dtype, where)


def _distinct(values: np.ndarray, key: str, dtype: str, where: _Where) -> np.ndarray:
    """The axis values unless two are equal as the sweep computes them (float axes in its dtype):
    a repeated value would run the same trajectories twice."""
    computed = values if values.dtype.kind == "i" else values.astype(dtype)
    _, first, counts = np.unique(computed, return_index=True, return_counts=True)
    if (counts > 1).any():
        same = sorted(set(values[computed == computed[first[counts > 1][0]]].tolist()))
        found = (f"duplicate value {same[0]!r}" if len(same) == 1 else
                 f"values {' and '.join(map(repr, same))} are equal in {dtype}")
        listed = f" (of {values.tolist()})" if len(values) <= 12 else ""
        raise where.error(key, f"{found}{listed}: each value of an axis must differ")
    return values


def _axis_range(table: dict, key: str, where: _Where) -> list[float]:
    kinds = [k for k in ("logspace", "linspace") if k in table]
    unknown = [k for k in table if k not in ("logspace", "linspace", "num")]
    if len(kinds) != 1 or unknown:
        raise where.error(key, f"expected {{logspace = [a, b], num = n}} or {{linspace = [a, b], num = n}}, got {table!r}")
    kind = kinds[0]
    bounds = table[kind]
    if not (isinstance(bounds, list) and len(bounds) == 2 and all(schema.is_number(b) and math.isfinite(b) for b in bounds)):
        raise where.error(f"{key}.{kind}", f"expected two finite numbers [a, b], got {bounds!r}")
    num = table.get("num")
    if not schema.is_int(num) or num < 1:
        raise where.error(f"{key}.num", f"expected an integer >= 1, got {num!r}")
    too_large = grid_too_large({key.removeprefix("axes."): num})     # before the values exist
    if too_large:
        raise where.error(f"{key}.num", too_large)
    if kind == "logspace":
        if all(0 < b < 1 for b in bounds):
            where.warn(f"{key}.logspace", f"the bounds are exponents of 10, so {bounds!r} gives values "
                       f"{10.0 ** bounds[0]:g} .. {10.0 ** bounds[1]:g}; for values {bounds[0]:g} .. {bounds[1]:g} write "
                       f"logspace = [{math.log10(bounds[0]):.4g}, {math.log10(bounds[1]):.4g}]")
        return np.logspace(bounds[0], bounds[1], num).tolist()
    return np.linspace(bounds[0], bounds[1], num).tolist()


def _check_axis(axis: str, values: np.ndarray, key: str, dtype: str, where: _Where) -> np.ndarray:
    if axis in INT_AXIS_RANGE:
        low, high = INT_AXIS_RANGE[axis]
        bad = [v for v in values.tolist() if not (low <= v <= high and float(v) == int(v))]
        if bad:
            raise where.error(key, f"expected integers >= {low} and <= {high}, got {bad[0]!r}")
        return values.astype(np.int64)
    values = values.astype(np.float64)
    if axis == "shape":
        low, high = SHAPE_RANGE
        if not ((values > low) & (values < high)).all():
            raise where.error(key, f"expected shapes in ({low:g}, {high:g}) (0: balanced layers; models/layers.py), "
                                   f"got {float(values[(values <= low) | (values >= high)][0])!r}")
        return values
    if axis not in POSITIVE_AXES:
        return values                      # a user's model's own axis: any finite numbers
    if (values <= 0).any():
        raise where.error(key, f"expected {axis} > 0, got {float(values[values <= 0][0])!r}")
    wider = "" if dtype == "float64" else 'dtype = "float64" or '
    _reject_underflow(values, axis, key, dtype, where, hint=f"; use {wider}a larger {axis}")
    info = np.finfo(dtype)
    if (values > info.max).any():
        raise where.error(key, f"{axis} = {float(values[values > info.max][0]):g} overflows {dtype} (largest {info.max:g})")
    return values


def _check_hyperparameter(values: np.ndarray, name: str, bounds: tuple[float, float, bool], key: str, dtype: str,
                          where: _Where) -> np.ndarray:
    """Optimizer hyperparameter values inside their range (low <= v < high, or low < v where low
    is not allowed), a nonzero one not below the dtype's smallest normal number."""
    low, high, low_allowed = bounds
    inside = (values >= low if low_allowed else values > low) & (values < high)
    if not inside.all():
        interval = f"{'[' if low_allowed else '('}{low:g}, {high:g})"
        raise where.error(key, f"expected {name} in {interval}, got {float(values[~inside][0])!r}")
    _reject_underflow(values, name, key, dtype, where)
    return values


def _reject_underflow(values: np.ndarray, name: str, key: str, dtype: str, where: _Where, hint: str = "") -> None:
    """A nonzero value below the dtype's smallest normal number is a spec error (it would flush to
    0 or lose its digits in the sweep's arithmetic)."""
    tiny = np.finfo(dtype).tiny
    under = (values != 0) & (np.abs(values) < tiny)
    if under.any():
        raise where.error(key, f"{name} = {float(values[under][0]):g} underflows {dtype} (smallest normal {tiny:g}){hint}")


def _record(table: dict, steps: int, where: _Where, has_targets: bool = True) -> Record:
    """The record table; hitting levels are fractions of the targets, so a task without targets
    (`sigma_star`) records none."""
    _reject_unknown(table, ("schedule", "points", "levels", "trajectories"), "record", where)
    default = Record() if has_targets else Record(levels=())
    schedule = table.get("schedule", default.schedule)
    if schedule not in SCHEDULES:
        raise where.error("record.schedule", f"expected one of {SCHEDULES}, got {schedule!r}")
    points = schema.integer(table, "points", default.points, 2, _in_table("record", where))
    if points > MAX_RECORD_POINTS:
        raise where.error("record.points", f"expected at most {MAX_RECORD_POINTS} record points, got {points}")
    levels = table.get("levels", list(default.levels))
    if not isinstance(levels, list):
        raise where.error("record.levels", f"expected a list of levels in (0, 1] ([] for no hitting times), got {levels!r}")
    for level in levels:
        if not schema.is_number(level) or not 0 < level <= 1:
            raise where.error("record.levels", f"expected levels in (0, 1], got {level!r}")
    levels = tuple(sorted({float(level) for level in levels}))
    if levels and not has_targets:
        raise where.error("record.levels", f"this task has no targets sigma_star to take levels of; use levels = [], got {list(levels)}")
    for a, b in zip(levels, levels[1:]):
        if level_name(a) == level_name(b):
            raise where.error("record.levels", f"levels {a!r} and {b!r} would share the column name "
                                               f"hit_<i>_{level_name(a)}; make them differ in 6 significant digits")
    trajectories = table.get("trajectories", default.trajectories)
    if not isinstance(trajectories, bool):
        raise where.error("record.trajectories", f"expected true or false (false: no trajectories table), got {trajectories!r}")
    return Record(schedule, points, levels, trajectories)


def _stop(table: dict, where: _Where) -> Stop:
    _reject_unknown(table, ("rel_loss", "blowup", "check_every", "loss"), "stop", where)
    default = Stop()
    error = _in_table("stop", where)
    rel_loss = schema.number(table, "rel_loss", default.rel_loss, 0.0, error, low_open=False)
    blowup = schema.number(table, "blowup", default.blowup, 1.0, error)
    check_every = schema.integer(table, "check_every", default.check_every, 1, error)
    loss = schema.number(table, "loss", default.loss, 0.0, error, low_open=False)
    return Stop(rel_loss, blowup, check_every, loss)


# ----------------------------------------------------------------------------- writing


def dumps_toml(spec: Mapping[str, Any]) -> str:
    """Write a spec as TOML: its scalars and lists, then one `[table]` per top-level table (tables
    inside those as inline tables, e.g. an axis `{logspace = [a, b], num = n}`)."""
    scalars = [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in spec.items() if not isinstance(v, dict)]
    tables = [
        f"\n[{_toml_key(k)}]\n" + "\n".join(f"{_toml_key(kk)} = {_toml_value(vv)}" for kk, vv in v.items())
        for k, v in spec.items()
        if isinstance(v, dict)
    ]
    return "\n".join(scalars) + "\n" + "\n".join(tables) + "\n"


def _toml_key(key: str) -> str:
    """A bare key where TOML allows one (letters, digits, _ and -), else a quoted one."""
    return key if key and all(c.isascii() and (c.isalnum() or c in "_-") for c in key) else _toml_string(key)


def _toml_string(text: str) -> str:
    """A TOML basic string: quote, backslash and control characters (U+0000-U+001F, U+007F) escaped."""
    escaped = "".join(
        "\\" + c if c in '"\\' else f"\\u{ord(c):04x}" if ord(c) < 0x20 or ord(c) == 0x7F else c
        for c in text)
    return f'"{escaped}"'


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {value!r} as TOML")
