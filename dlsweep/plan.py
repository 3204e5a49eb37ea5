"""What a run is about to do, and what its trajectories did, in numbers and one-line messages.

Before anything large exists: the grid's size (refused when its per-trajectory columns would not
fit comfortably in memory), the trajectory-steps and the disk its two tables will take, and the
chunk plan (`Plan`, what `dlsweep run --dry-run` prints). After the chunks: how many trajectories
converged, diverged or ran every step (`Outcome`), and where they diverged.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import os
from collections.abc import Mapping
from pathlib import Path

import jax
import numpy as np
import pandas as pd

from dlsweep import engine


# The flat grid (`grid.build`) holds one 8-byte value per trajectory and axis, and what reads a
# whole run folder back (`store.load`: the outcome of a run, `show`) a few times more; nothing
# large may be allocated before the grid is known to fit, so its columns may take at most this
# share of the machine's memory.
GRID_BYTES_PER_VALUE = 8
GRID_MEMORY_SHARE = 16

# Parquet bytes per value (snappy; dictionary encoding for integers and flags only), measured on
# the run folders of toy-threshold (float32 and float64), matrix-sensing, hacohen-fig4 and
# azulay-phase: a float of the runs table (float64 whatever the sweep's dtype; 29 zero mantissa
# bits in a float32 sweep's) takes 3.8-6.3 bytes, one of a float64 sweep up to 8; its integers
# (run_id, steps_run, hitting steps) 3-8; a part's footer (schema, statistics, pandas metadata)
# 490-545 bytes per column. The trajectories' floats, in the sweep's dtype and split into byte
# streams before compression (`store`), took 2.6-4.4 bytes (float32) and 6.2-7.3 (float64) on
# toy-threshold (both dtypes), matrix-sensing and the reproductions azulay-phase, gissin-fig6,
# linear-net-phase, gidel-fig2 and hacohen-fig2, fig7, fig9 and fig10; their run_id and step
# together under 1 byte a row. The trajectories counted are an upper bound (a trajectory that
# stops early records fewer rows).
FLOAT_BYTES = {"float32": 6, "float64": 8}                  # the runs table's
TRAJECTORY_FLOAT_BYTES = {"float32": 3.5, "float64": 7}
TRAJECTORY_ID_BYTES = 1
FOOTER_BYTES_PER_COLUMN = 550

DIVERGED_SHARE_WARNED = 0.05     # a diverged share at least this large is worth a warning
CELLS_LISTED = 3                 # lr values named in a divergence warning, largest share first


def physical_memory() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def grid_too_large(sizes: Mapping[str, int], memory: int | None = None) -> str | None:
    """Why a grid of these axis sizes cannot be built here, or None: its per-trajectory columns
    (8 bytes per trajectory and axis) must stay within 1/GRID_MEMORY_SHARE of physical memory."""
    memory = physical_memory() if memory is None else memory
    n_runs = math.prod(sizes.values())
    per_run = GRID_BYTES_PER_VALUE * len(sizes)
    limit = memory // GRID_MEMORY_SHARE // per_run
    if n_runs <= limit:
        return None
    product = " x ".join(f"{axis} {size}" for axis, size in sizes.items())
    return (f"{n_runs:.3g} trajectories ({product}): their {len(sizes)} per-trajectory column(s) would take "
            f"{human_bytes(n_runs * per_run)}, more than the 1/{GRID_MEMORY_SHARE} of this machine's "
            f"{human_bytes(memory)} of memory they may use (at most {limit:.3g} trajectories); use fewer values "
            "per axis or split the sweep into several specs")


def human_bytes(n: float) -> str:
    """Decimal units: 512 B, 34.5 kB, 2.3 GB."""
    if n < 1000:
        return f"{n:.0f} B"
    power = min(int(math.log10(n) // 3), 4)
    return f"{n / 1000 ** power:.3g} {('kB', 'MB', 'GB', 'TB')[power - 1]}"


@dataclasses.dataclass(frozen=True)
class Columns:
    """What one trajectory writes: runs-table values (besides its axes) and trajectories-table
    floats per recorded step."""

    runs_values: int          # run_id, final_loss, the flags, steps_run, hitting steps, summaries, selections
    trajectory_floats: int    # the loss and every observed value

    @classmethod
    def of(cls, program: engine.Program, hp_names: list[str], task: dict) -> Columns:
        """From the shapes of one trajectory's state, records and summaries
        (`engine.trajectory_shapes`)."""
        state, summary, records = engine.trajectory_shapes(program, hp_names, task)
        # run_id, final_loss, diverged, converged, steps_run; `selected` and `selected_at` hold
        # up to one entry per feature each
        return cls(5 + _size(state.hit) + 2 * _size(state.chosen) + _size(summary), _size(records))


def _size(tree) -> int:
    """Values in a pytree of shapes."""
    return sum(math.prod(leaf.shape) for leaf in jax.tree.leaves(tree))


@dataclasses.dataclass(frozen=True)
class Disk:
    """Estimated bytes of the two tables: runs (one row per trajectory) and trajectories (at most
    one row per trajectory and recorded step: a trajectory that stops early records fewer; none
    where the sweep sets `[record] trajectories = false`, `recorded` False)."""

    runs: int
    trajectories: int
    recorded: bool = True

    @classmethod
    def estimate(cls, n_runs: int, n_axes: int, n_chunks: int, recorded_steps: int, columns: Columns,
                 dtype: str, recorded: bool = True) -> Disk:
        runs_columns = n_axes + columns.runs_values
        trajectory_columns = 2 + columns.trajectory_floats
        rows = n_runs * recorded_steps
        trajectories = (round(rows * (columns.trajectory_floats * TRAJECTORY_FLOAT_BYTES[dtype] + TRAJECTORY_ID_BYTES))
                        + n_chunks * trajectory_columns * FOOTER_BYTES_PER_COLUMN)
        return cls(n_runs * runs_columns * FLOAT_BYTES[dtype] + n_chunks * runs_columns * FOOTER_BYTES_PER_COLUMN,
                   trajectories if recorded else 0, recorded)

    @property
    def total(self) -> int:
        return self.runs + self.trajectories

    def beyond_free_space(self, folder: Path, share: float = 1.0) -> str | None:
        """A note when `share` of the estimate (the chunks still to run) is more than the space
        free on `folder`'s file system, else None."""
        need, free = self.total * share, shutil.disk_usage(folder).free
        if need <= free:
            return None
        return (f"{folder}: the chunks to run may write about {human_bytes(need)}, more than the {human_bytes(free)} "
                f"free there; a full disk stops the run after its last finished chunk (kept): free space, or "
                f"shrink the sweep ([record] points, [record] trajectories = false, fewer axis values)")

    def describe(self) -> str:
        if not self.recorded:
            return f"disk about {human_bytes(self.total)} (runs; no trajectories: [record] trajectories = false)"
        return (f"disk about {human_bytes(self.total)} (runs {human_bytes(self.runs)}, trajectories up to "
                f"{human_bytes(self.trajectories)})")


def size_line(folder: Path, axes: Mapping[str, np.ndarray], steps: int, disk: Disk) -> str:
    """The line a run prints before compiling: trajectories, the trajectory-steps they run at
    most, and the disk."""
    n_runs = math.prod(len(values) for values in axes.values())
    product = " x ".join(f"{axis} {len(values)} [{_values(values, 3)}]" for axis, values in axes.items())
    return (f"{folder}: {n_runs} trajectories ({product}) x {steps} steps = at most {n_runs * steps:.3g} "
            f"trajectory-steps; {disk.describe()}")


def _values(values: np.ndarray, listed: int) -> str:
    """`1, 2, 3` for at most `listed` values, else the first and last, `0.001 .. 0.1`."""
    if len(values) <= listed:
        return ", ".join(f"{v:g}" for v in values.tolist())
    return f"{values[0]:g} .. {values[-1]:g}"


def axis_summary(values: np.ndarray) -> str:
    """`1, 2, 3` for a few values, `0.001 .. 0.1 (56 values)` for many."""
    return _values(values, 4) + ("" if len(values) <= 4 else f" ({len(values)} values)")


@dataclasses.dataclass(frozen=True)
class Plan:
    """What `run` would do with a folder: the sweep's size, its chunk plan and the disk."""

    folder: Path
    name: str
    model: str
    dtype: str
    steps: int
    recorded_steps: int
    axes: Mapping[str, np.ndarray]
    chunk_size: int
    chunk_size_from: str       # where the chunk size comes from
    chunks: int
    largest_chunk: int         # the chunk size, or less where chunks follow the leading axis
    group: int                 # chunks never straddle a multiple of this many run ids
    constant: tuple[str, ...]  # axes with one value per chunk (unbatched in the program)
    compiled_in: tuple[str, ...]  # of those, the ones compiled in as constants
    finished: int              # chunks already finished in the folder
    to_run: int                # chunks this call would run
    disk: Disk

    @property
    def n_runs(self) -> int:
        return math.prod(len(values) for values in self.axes.values())

    def lines(self) -> list[str]:
        width = max(len(axis) for axis in self.axes)
        axes = [f"  {axis:<{width}}  {len(values):>6}  {axis_summary(values)}" for axis, values in self.axes.items()]
        n_groups = -(-self.n_runs // self.group)
        grouping = (f"chunks follow the {n_groups} values of {next(iter(self.axes))} ({self.group} trajectories each)"
                    if n_groups > 1 else "chunks cut the grid in run-id order")
        constant = ", ".join(f"{a} (compiled in)" if a in self.compiled_in else a for a in self.constant) or "none"
        return [
            f"{self.folder}: plan of sweep {self.name!r} (model {self.model}, {self.dtype}); nothing written",
            "axes (values):",
            *axes,
            f"trajectories: {self.n_runs}, {self.steps} steps each, "
            f"{f'{self.recorded_steps} recorded' if self.disk.recorded else 'none recorded'}: at most "
            f"{self.n_runs * self.steps:.3g} trajectory-steps",
            (f"chunks: {self.chunks} of up to {self.largest_chunk} trajectories" if self.chunks > 1 else
             f"chunks: 1, all {self.largest_chunk} trajectories")
            + f" (chunk size {self.chunk_size}, {self.chunk_size_from}); one compiled program; {grouping}; "
              f"one value per chunk: {constant}",
            f"this run: {self.to_run} chunk(s) to run, {self.finished} already finished",
            self.disk.describe(),
        ]


def chunk_size_notes(requested: int | None, manifest: Mapping, folder: Path, chunks: list,
                     axes: Mapping[str, np.ndarray]) -> list[str]:
    """One line for each way a chunk size given is not used as given, and why: a folder keeps the
    chunk size it was started with (the first shard's, for shards); chunks never straddle two
    values of the leading axis when the plan follows it (`grid.aligned_group`)."""
    if requested is None:
        return []
    size = manifest["chunk_size"]
    if size != requested:
        return [f"chunk_size={requested} ignored: {folder} was started with chunks of {size}, which fix its chunk "
                "plan when resumed (start over with overwrite=True to change it)"]
    largest = max(c.stop - c.start for c in chunks)
    if largest < min(requested, manifest["n_runs"]):
        leading = next(iter(axes))
        return [f"chunk_size={requested} gives chunks of at most {largest}: chunks never straddle two values of "
                f"{leading} ({manifest['group']} trajectories each), so {leading} enters the program as one value "
                "per chunk"]
    return []


@dataclasses.dataclass(frozen=True)
class Outcome:
    """How the finished trajectories of a folder ended, and where they diverged."""

    runs: int
    converged: int
    diverged: int
    at_step_limit: int       # neither converged nor diverged: stopped at the last step
    steps: int
    diverged_cells: str      # the cells of the diverged trajectories, by lr (`diverged_where`)
    whole_lr_diverged: bool  # every trajectory at some lr value diverged

    @classmethod
    def of(cls, runs: pd.DataFrame, axes: Mapping[str, np.ndarray], steps: int) -> Outcome:
        diverged, converged = runs["diverged"].to_numpy(bool), runs["converged"].to_numpy(bool)
        by_lr = runs.groupby("lr")["diverged"].agg(["sum", "size"])
        return cls(len(runs), int(converged.sum()), int(diverged.sum()), int((~diverged & ~converged).sum()), steps,
                   diverged_where(runs, axes) if diverged.any() else "", bool((by_lr["sum"] == by_lr["size"]).any()))

    def counts(self) -> str:
        return (f"{self.converged} converged, {self.diverged} diverged, {self.at_step_limit} stopped at the step "
                f"limit ({self.steps})")

    def warning(self) -> str | None:
        """A warning when a sizeable share diverged (or every trajectory at some lr), naming the
        cells; None otherwise."""
        if self.diverged == self.runs:
            return (f"every trajectory diverged ({self.diverged} of {self.runs}): {self.diverged_cells}; the data is "
                    "written, but holds no trajectory that converged or reached the step limit: try a smaller lr")
        if self.diverged >= DIVERGED_SHARE_WARNED * self.runs or self.whole_lr_diverged:
            return (f"{self.diverged} of {self.runs} trajectories diverged ({self.diverged / self.runs:.0%}): "
                    f"{self.diverged_cells}; try a smaller lr there")
        return None


def diverged_where(runs: pd.DataFrame, axes: Mapping[str, np.ndarray]) -> str:
    """The diverged trajectories by lr value, the largest share first, each with the values of
    the other axes (that vary) among them: `40 of 40 at lr=0.5 (depth 2..4, sigma0 0.001..0.1)`."""
    others = [axis for axis, values in axes.items() if axis != "lr" and len(values) > 1]
    parts = []
    by_lr = sorted(runs.groupby("lr"), key=lambda item: (-item[1]["diverged"].mean(), -item[0]))
    shown = [(lr, group) for lr, group in by_lr if group["diverged"].any()]
    for lr, group in shown[:CELLS_LISTED]:
        bad = group[group["diverged"]]
        ranges = ", ".join(f"{axis} {_values_among(bad[axis].to_numpy(), axes[axis])}" for axis in others)
        parts.append(f"{len(bad)} of {len(group)} at lr={lr:g}" + (f" ({ranges})" if ranges else ""))
    if len(shown) > CELLS_LISTED:
        parts.append(f"and at {len(shown) - CELLS_LISTED} more lr value(s)")
    return "; ".join(parts)


def _values_among(values: np.ndarray, axis: np.ndarray) -> str:
    """Which values of an axis occur: one, a contiguous stretch `a..b`, a few listed, or the
    stretch they span with how many of its values."""
    ordered = np.sort(axis)
    present = np.isin(ordered, values)
    found = ordered[present]
    text = [f"{v:g}" for v in found.tolist()]
    if len(found) == 1:
        return text[0]
    first, last = np.flatnonzero(present)[[0, -1]]
    if present[first:last + 1].all():
        return f"{text[0]}..{text[-1]}"
    if len(found) <= 4:
        return ", ".join(text)
    return f"{text[0]}..{text[-1]} ({len(found)} of {last - first + 1} values)"
