"""The grid's flat columns and its cut into chunks."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from dlsweep import grid


def test_build_is_row_major_cartesian_product():
    g = grid.build({"depth": np.array([1, 2]), "sigma0": np.array([0.1, 0.2, 0.3]), "lr": np.array([1e-3])})
    assert g.size == 6
    assert g.columns["depth"].tolist() == [1, 1, 1, 2, 2, 2]
    assert g.columns["sigma0"].tolist() == [0.1, 0.2, 0.3] * 2
    assert g.rows(2, 4)["sigma0"].tolist() == [0.3, 0.1]


@given(n=st.integers(1, 200_000), per_traj=st.integers(100, 10**6))
def test_chunks_cover_every_run_once_with_little_padding(n, per_traj):
    size = grid.chunk_size_for(n, per_traj)
    assert 1 <= size <= grid.DEFAULT_MAX_CHUNK
    assert size * per_traj <= max(grid.DEFAULT_MEMORY_BUDGET, 8 * per_traj)
    plan = grid.chunks(n, size)
    covered = np.concatenate([np.arange(c.start, c.stop) for c in plan])
    assert covered.tolist() == list(range(n))
    assert all(c.stop - c.start <= size for c in plan)
    # the compiled batch is `size`; padding of the whole plan stays below one multiple of 8 per chunk
    # unless the memory cap forces a smaller chunk
    padding = len(plan) * size - n
    assert padding < 8 * len(plan) or size == max(1, grid.DEFAULT_MEMORY_BUDGET // per_traj)
