"""The grid: a sweep's axes as flat per-trajectory arrays, and their cut into chunks.

Trajectory `run_id` is the row-major index of the cartesian product of the axes, in the order the
model family lists them (then `seed`), so a run id names the same hyperparameters whatever the
chunk size.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

DEFAULT_MAX_CHUNK = 16_384          # chunks of ~8k-40k trajectories stay in cache (PERFORMANCE.md)
DEFAULT_MEMORY_BUDGET = 512 * 2**20  # bytes of state + records per chunk, when none is given
MIN_ALIGNED_GROUP = 256              # chunks follow the leading axis's values only if each has this many runs
ALIGNED_BATCHES = 4                  # ... and at least this many of the program's smallest batches


@dataclasses.dataclass(frozen=True)
class Grid:
    """Flat hyperparameter columns, one entry per trajectory."""

    columns: dict[str, np.ndarray]

    @property
    def size(self) -> int:
        return len(next(iter(self.columns.values())))

    def rows(self, start: int, stop: int) -> dict[str, np.ndarray]:
        return {name: values[start:stop] for name, values in self.columns.items()}


def build(axes: dict[str, np.ndarray]) -> Grid:
    """Cartesian product of the axes, row-major in the given axis order."""
    mesh = np.meshgrid(*axes.values(), indexing="ij")
    return Grid({name: m.reshape(-1) for name, m in zip(axes, mesh)})


@dataclasses.dataclass(frozen=True)
class Chunk:
    index: int
    start: int   # first run_id
    stop: int    # one past the last run_id


def aligned_group(axes: dict[str, np.ndarray], smallest_batch: int = 1) -> int:
    """Runs per value of the leading axis (a contiguous block of run ids, row-major), when there
    are at least `MIN_ALIGNED_GROUP` of them and `ALIGNED_BATCHES` times the compiled program's
    `smallest_batch` (so the fillers of each group's last chunk stay a small part of it); else
    the whole grid. Chunks never straddle a group, so the leading axis (depth, for most models)
    is one value per chunk and is passed to the compiled program unbatched, where integer powers
    and layer masks cost a scalar test instead of a per-trajectory select."""
    sizes = [len(v) for v in axes.values()]
    n_runs, group = math.prod(sizes), math.prod(sizes[1:])
    return group if sizes[0] > 1 and group >= max(MIN_ALIGNED_GROUP, ALIGNED_BATCHES * smallest_batch) else n_runs


def constant_axes(axes: dict[str, np.ndarray], follows_leading: bool) -> dict[str, tuple]:
    """Axes with one value in every chunk, each with the values it takes: every axis with a
    single value, and the leading axis when the chunks follow its values (`aligned_group`
    smaller than the grid)."""
    leading = next(iter(axes))
    return {name: tuple(values.tolist()) for name, values in axes.items()
            if len(values) == 1 or (follows_leading and name == leading)}


def chunk_size_for(n_runs: int, bytes_per_trajectory: int, budget: int = DEFAULT_MEMORY_BUDGET,
                   cap: int = DEFAULT_MAX_CHUNK, multiple: int = 1) -> int:
    """Trajectories per chunk: at most `budget` bytes and `cap` trajectories (at least one
    `multiple`), a multiple of `multiple` (what the compiled batch is rounded to, so a chunk
    fills it), and the grid cut into equal chunks so the last one is not mostly padding."""
    largest = max(multiple, _round_down(max(1, min(cap, budget // max(1, bytes_per_trajectory))), multiple))
    n_chunks = math.ceil(n_runs / largest)
    return min(_round_up(math.ceil(n_runs / n_chunks), multiple), largest)


def chunks(n_runs: int, chunk_size: int, group: int | None = None) -> list[Chunk]:
    """Consecutive run ids cut into chunks of at most `chunk_size`, never straddling a multiple of
    `group` (default: the whole grid is one group)."""
    group = group or n_runs
    bounds = [(start, min(start + chunk_size, group_start + group, n_runs))
              for group_start in range(0, n_runs, group)
              for start in range(group_start, min(group_start + group, n_runs), chunk_size)]
    return [Chunk(i, start, stop) for i, (start, stop) in enumerate(bounds)]


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def _round_down(n: int, multiple: int) -> int:
    return n // multiple * multiple
