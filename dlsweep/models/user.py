"""A model from the user's own file: `model = "my_model.py:MyModel"` in a spec (the path relative
to the spec file), or a `[model]` table whose `class` is that string and whose other keys are
keyword arguments of the class.

The class is instantiated once; the instance must have the contract's `init`, `loss` and
`observe` (`dlsweep.Model`) and may have its optional hooks. It needs no flax: the engine wraps it
(`UserModel`), so any object works, hashable or not. `[task]` values reach `task` as arrays in the
sweep's dtype (booleans as bool) and every axis reaches `hp` (depth, sparsity, seed as int32). The
file's content is part of the sweep (its sha256 is in the resolved spec), so an edited model is
a different sweep; a run folder keeps a copy of the file beside `sweep.toml`, which is what the
folder's spec names, so the folder can be read, resumed and refined anywhere.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from dlsweep.errors import SpecError
from dlsweep.model import INTEGER_HPS, METHODS, hook
from dlsweep.models.family import Family

OBSERVED = r"observed values $\sigma_i$"      # figure label where the class gives no `observed`

Error = Callable[[str, str], Exception]


def is_reference(model: Any) -> bool:
    """Whether a spec's `model` names a user's file (a "file.py:Class" string or a table)."""
    return isinstance(model, dict) or (isinstance(model, str) and ":" in model)


@dataclasses.dataclass(frozen=True)
class Reference:
    """What a spec's `model` says: the file (absolute), the class and its keyword arguments, and
    the file's sha256."""

    path: Path
    class_name: str
    kwargs: tuple[tuple[str, Any], ...]
    sha256: str
    source: bytes = dataclasses.field(default=b"", compare=False, repr=False)   # the file's content

    @property
    def label(self) -> str:
        return f"{self.path.name}:{self.class_name}"

    def to_dict(self) -> dict:
        """The resolved `[model]` table: the class by file name (the run folder's copy), the
        file's sha256 and the keyword arguments."""
        return {"class": self.label, "sha256": self.sha256, **dict(self.kwargs)}


def resolve(model: str | dict, base: Path, error: Error) -> Reference:
    """The spec's `model` string or table checked against the file: it exists, the class is
    named, the keyword arguments are TOML values, and where the table gives `sha256`, the file
    still has that content."""
    table = {"class": model} if isinstance(model, str) else dict(model)
    key = "model" if isinstance(model, str) else "model.class"
    target = table.pop("class", None)
    if not isinstance(target, str) or target.count(":") != 1 or not all(target.split(":")):
        raise error(key, f'expected "FILE.py:Class" (a Python file relative to the spec, a colon, a class), got {target!r}')
    expected = table.pop("sha256", None)
    file_name, class_name = target.split(":")
    path = (base / file_name).resolve()
    if path.suffix != ".py":
        raise error(key, f"expected a Python file ending in .py, got {file_name!r}")
    if not path.is_file():
        raise error(key, f"no such model file {str(path)!r}")
    source = path.read_bytes()
    sha = hashlib.sha256(source).hexdigest()
    if expected is not None and expected != sha:
        raise error("model.sha256", f"{path} has changed since this sweep was written (sha256 {sha[:12]}..., "
                                    f"the sweep's {str(expected)[:12]}...); an edited model is a different sweep")
    for name, value in table.items():
        if not isinstance(value, (bool, int, float, str, list)):
            raise error(f"model.{name}", f"expected a number, string, boolean or list (a keyword argument of "
                                         f"{class_name}), got {value!r}")
    return Reference(path, class_name, tuple(sorted((name, _frozen(value)) for name, value in table.items())), sha, source)


def _frozen(value: Any) -> Any:
    """A keyword argument as a hashable value: lists as tuples."""
    return tuple(_frozen(v) for v in value) if isinstance(value, list) else value


def instantiate(reference: Reference, error: Error) -> Any:
    """The user's model object: the file imported as a module of its own, the class called with
    the keyword arguments, the contract's methods present."""
    key = f"model ({reference.label})"
    module_name = f"dlsweep_user_model_{reference.sha256[:16]}"
    module = sys.modules.get(module_name)
    if module is None:
        spec = importlib.util.spec_from_file_location(module_name, reference.path)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except SyntaxError as err:
            raise error(key, f"{reference.path}, line {err.lineno}: syntax error: {err.msg}") from None
        except Exception as err:          # the user's module failed to import: say what and where
            raise error(key, f"importing {reference.path} raised {type(err).__name__}: {err}") from None
        sys.modules[module_name] = module
    cls = getattr(module, reference.class_name, None)
    if not isinstance(cls, type):
        classes = sorted(name for name, value in vars(module).items() if isinstance(value, type)
                         and value.__module__ == module_name)
        raise error(key, f"{reference.path} defines no class {reference.class_name!r}"
                         + (f"; it defines {', '.join(classes)}" if classes else ""))
    try:
        instance = cls(**dict(reference.kwargs))
    except Exception as err:
        raise error(key, f"{reference.class_name}(**{dict(reference.kwargs)!r}) raised {type(err).__name__}: {err}") from None
    missing = [name for name in METHODS if not callable(getattr(instance, name, None))]
    if missing:
        raise error(key, f"{reference.class_name} has no method {', '.join(missing)}; a model needs init(key, hp, task), "
                         f"loss(params, hp, task) and observe(params, hp, task) (dlsweep.Model)")
    return instance


class UserModel:
    """The engine's view of a user's model: its methods, hashed and compared by the file's
    content, the class and the keyword arguments (the compile key), whatever the object is."""

    def __init__(self, reference: Reference, instance: Any):
        self.reference, self.instance = reference, instance

    def __getattr__(self, name: str):
        if not name.startswith("_"):
            return getattr(self.instance, name)
        raise AttributeError(name)

    def __hash__(self) -> int:
        return hash(self.reference)

    def __eq__(self, other) -> bool:
        return isinstance(other, UserModel) and other.reference == self.reference

    def __repr__(self) -> str:
        return f"UserModel({self.reference.label})"


def task_values(task: Mapping[str, Any], error: Error) -> dict:
    """`[task]` as NumPy values: numbers and (nested, rectangular) lists of numbers as float64,
    booleans as bool (cast to the sweep's dtype when the arrays are made); `sigma_star`, if
    given, a list of numbers > 0 (the hitting levels' targets)."""
    values = {}
    for name, value in task.items():
        array = np.asarray(value) if not isinstance(value, (str, dict)) else None
        if array is None or array.dtype.kind not in "biuf":
            raise error(name, f"expected a number, a boolean or a (nested) list of numbers, got {value!r}")
        if array.dtype.kind != "b" and not np.isfinite(array).all():
            raise error(name, f"expected finite numbers, got {value!r}")
        values[name] = array if array.dtype.kind == "b" else array.astype(np.float64)
    if "sigma_star" in values:
        targets = values["sigma_star"]
        if targets.ndim != 1 or len(targets) == 0 or not (targets > 0).all():
            raise error("sigma_star", f"expected a list of targets > 0 (the hitting levels are fractions of them), "
                                      f"got {task['sigma_star']!r}")
        values["sigma_star"] = tuple(float(v) for v in targets)
    return values


def task_arrays(task: Mapping[str, Any], dtype: str) -> dict:
    """The validated task as the arrays the model gets: floats in the sweep's dtype."""
    return {name: np.asarray(value, bool if np.asarray(value).dtype.kind == "b" else dtype)
            for name, value in task.items()}


def check_contract(model: Any, hp: Mapping[str, Any], task: Mapping[str, Any], targets: tuple | None, error: Error) -> None:
    """Trace (not run) the model on one trajectory's inputs and check what the engine relies on:
    `loss` a scalar, `observe` a dict whose `sigma` is a vector (as long as `sigma_star`, where
    given); whatever the model raises while traced is reported with its class and method."""
    import jax

    name = model.reference.label
    key = jax.random.key(0)

    def traced(method: str, function, *args):
        try:
            return jax.eval_shape(function, *args)
        except Exception as err:          # the user's code failed on these inputs: say which method and why
            message = str(err).strip().splitlines()[0] if str(err).strip() else ""
            raise error(f"model ({name})", f"{method} failed on one trajectory's inputs: {type(err).__name__}: {message}") from None

    draw = hook(model, "draw")
    if draw is not None:
        task = {**task, **traced("draw(key, task)", draw, key, task)}
    params = traced("init(key, hp, task)", model.init, key, hp, task)
    loss = traced("loss(params, hp, task)", model.loss, params, hp, task)
    if getattr(loss, "shape", None) != ():
        raise error(f"model ({name})", f"loss(params, hp, task) must return a scalar, got shape {getattr(loss, 'shape', loss)}")
    observed = traced("observe(params, hp, task)", model.observe, params, hp, task)
    sigma = observed.get("sigma") if isinstance(observed, dict) else None
    if sigma is None or len(sigma.shape) != 1:
        raise error(f"model ({name})", 'observe(params, hp, task) must return a dict whose "sigma" is a vector (k,), '
                                       f"got {jax.tree.map(lambda leaf: leaf.shape, observed)}")
    if targets is not None and sigma.shape[0] != len(targets):
        raise error(f"model ({name})", f'observe(...)["sigma"] has {sigma.shape[0]} values but task.sigma_star has '
                                       f"{len(targets)} targets")


def table_of(instance: Any, error: Error) -> dict:
    """The `[model]` table of a model object (`api.run(spec, model=MyModel(...))`): its class by
    the absolute path of the file that defines it, and, for a dataclass, its fields as keyword
    arguments. The object must be one its class rebuilds from them (equal fields, or equal
    attributes), since the run folder's spec loads the model from the file again."""
    import inspect

    cls = type(instance)
    try:
        file = inspect.getsourcefile(cls)
    except TypeError:                   # its module is not in sys.modules: the file of its methods' code
        file = next((value.__code__.co_filename for value in vars(cls).values() if hasattr(value, "__code__")), None)
    if file is None or not file.endswith(".py") or cls.__qualname__ != cls.__name__:
        raise error("model", f"{cls.__qualname__} is not a class defined at the top level of a .py file; a run folder "
                             f"loads its model from its file again")
    kwargs = ({field.name: getattr(instance, field.name) for field in dataclasses.fields(instance) if field.init}
              if dataclasses.is_dataclass(instance) else {})
    table = {"class": f"{Path(file).resolve()}:{cls.__name__}", **kwargs}
    rebuilt = instantiate(resolve(table, Path("/"), error), error)
    state = lambda model: ({field.name: getattr(model, field.name) for field in dataclasses.fields(model)}  # noqa: E731
                           if dataclasses.is_dataclass(model) else vars(model))
    if type(rebuilt).__name__ != cls.__name__ or state(rebuilt) != state(instance):
        raise error("model", f"{cls.__name__} from {file} with {kwargs or 'no arguments'} is not the object given; "
                             f"give a model its class rebuilds (a dataclass whose fields are its arguments)")
    return table


def family(reference: Reference, instance: Any, task_keys: Sequence[str], axes: Sequence[str]) -> Family:
    """The family of a model from the user's file: it sweeps `lr` and whichever other axes the
    spec gives, takes any `[task]` values as arrays (`task_values`), has targets where the
    task gives `sigma_star`, and no baseline or theory."""
    model = UserModel(reference, instance)
    summary = next(iter((type(instance).__doc__ or "").strip().splitlines()), "")

    def build(sweep):
        hp = {axis: np.asarray(values[0], np.int32 if axis in INTEGER_HPS else sweep.dtype)
              for axis, values in sweep.axes.items()}
        error = lambda key, message: SpecError(f"{sweep.source}: key '{key}': {message}")  # noqa: E731
        check_contract(model, hp, task_arrays(sweep.task, sweep.dtype), sweep.task.get("sigma_star"), error)
        return model

    return Family(
        name=reference.label, summary=summary or f"{reference.class_name} from {reference.path}",
        axes=("lr",), task_keys=dict.fromkeys(task_keys, "a value of the model's task"),
        validate_task=task_values, build=build,
        make_task=lambda sweep: task_arrays(sweep.task, sweep.dtype),
        observed=getattr(instance, "observed", OBSERVED),
        optional_axes=tuple(a for a in axes if a not in ("lr", "seed")), reference=reference)
