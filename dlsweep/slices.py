"""Slices of a run's tables by axis values: the `at={axis: value}` that the analyses and figures
accept (`check_at`, `only`), and the first value of the axes a figure does not draw
(`first_slice`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dlsweep.errors import PlotError
from dlsweep.spec import Sweep


def check_at(sweep: Sweep, at: dict[str, float] | None) -> None:
    """A PlotError naming an axis or a value of `at` that the sweep does not have."""
    for axis, value in (at or {}).items():
        if axis not in sweep.axes:
            raise PlotError(f"at={{{axis!r}: {value:g}}}: {axis!r} is not an axis of the sweep: {', '.join(sweep.axes)}")
        if not np.isclose(sweep.axes[axis], value, rtol=1e-12, atol=0).any():
            raise PlotError(f"at={{{axis!r}: {value:g}}}: not a value of the axis: "
                            f"{', '.join(f'{v:g}' for v in sweep.axes[axis])}")


def only(frame: pd.DataFrame, at: dict[str, float] | None) -> pd.DataFrame:
    """The rows of a runs or derived table at the values `at` gives for the axes it has."""
    for axis, value in (at or {}).items():
        if axis in frame:
            frame = frame[np.isclose(frame[axis], value, rtol=1e-12, atol=0)]
    return frame


def first_slice(frame: pd.DataFrame, axes: list[str]) -> pd.DataFrame:
    """The rows at the first (smallest) value of each of `axes` present in the frame."""
    for axis in axes:
        if axis in frame:
            frame = frame[frame[axis] == frame[axis].min()]
    return frame
