"""What a model family is to the rest of dlsweep: its model, its `[task]` schema, its data, its
targets, its baseline and its theory hook, in one `Family` that its module defines as `FAMILY`
(`models.FAMILIES` finds every one). Nothing above the models names a model: the spec, the run,
the thresholds and the figures ask the sweep's family."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from dlsweep import schema

if TYPE_CHECKING:
    from dlsweep.compare import Baseline
    from dlsweep.models.user import Reference

Error = Callable[[str, str], Exception]


def _no_axes_check(task: dict, axes: dict, error: Error) -> None:
    """Every combination of [task] and axes fits."""


@dataclasses.dataclass(frozen=True)
class Family:
    """A model family as the spec, the run and the figures see it."""

    name: str
    summary: str
    axes: tuple[str, ...]                         # swept axes it needs (`seed` is always optional)
    task_keys: Mapping[str, str]                  # [task] keys -> description
    validate_task: Callable[[dict, Error], dict]  # [task], error(key, message) -> the validated task
    build: Callable[[Any], Any]                   # resolved Sweep -> model instance (`dlsweep.Model`)
    make_task: Callable[[Any], dict] = schema.make     # resolved Sweep -> the task's arrays
    observed: str = r"$\sigma_i(t)$"            # what `sigma` is, as a figure's axis label
    targets: Callable[[dict], tuple | None] = lambda task: task.get("sigma_star")  # validated [task]
    # -> the targets of the observed values (hitting levels are fractions of them), or None
    baseline: Callable[[dict], Baseline | None] = lambda task: None   # validated [task] -> the
    # comparator run on each seed's data when the spec says `compare = true` (`dlsweep.compare`)
    optional_axes: tuple[str, ...] = ()           # further axes it may sweep (before `seed`)
    check_axes: Callable[[dict, dict, Error], None] = _no_axes_check
    # validated [task] and axes -> raises error(key, message) where they do not fit together
    toy_lr: Callable[[dict, Mapping[str, float]], float | None] = lambda task, cell: None   # validated
    # [task] and one cell's axis values -> the toy model's step whose GD this one equals (so Gissin's
    # theory applies to its thresholds), or None
    theory_of_c: Callable[[dict, str], Callable | None] = lambda task, column: None   # validated
    # [task] and a runs column -> the theory of that column against Azulay's c = 2 sigma0 (1 + s^2) /
    # (1 - s^2) of a depth-2 init, as a function (model, each seed's data with its interpolators
    # (`compare.fit_interpolators`), cs) -> (values at cs, at the min-l1 and at the min-l2
    # interpolator), for the summary and heatmap figures; None where the family has none
    figure: str = "trajectories"                  # the figure kind `plot_run` draws by default of a run
    # whose task has no targets (with targets: the heatmap of incremental learning)
    reference: Reference | None = None            # a model from the user's file (`models.user`)
