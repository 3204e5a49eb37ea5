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


def chunk_size_for(n_runs: int, bytes_per_trajectory: int, budget: int = DEFAULT_MEMORY_BUDGET,
                   cap: int = DEFAULT_MAX_CHUNK) -> int:
    """Trajectories per chunk: at most `budget` bytes and `cap` trajectories, and the grid cut into
    equal chunks (a multiple of 8) so the last one is not mostly padding."""
    largest = max(1, min(cap, budget // max(1, bytes_per_trajectory)))
    n_chunks = math.ceil(n_runs / largest)
    size = _round_up(math.ceil(n_runs / n_chunks), 8)
    return size if size <= largest else largest


def chunks(n_runs: int, chunk_size: int) -> list[Chunk]:
    n_chunks = math.ceil(n_runs / chunk_size)
    return [Chunk(i, i * chunk_size, min(n_runs, (i + 1) * chunk_size)) for i in range(n_chunks)]


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple
