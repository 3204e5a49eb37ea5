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


@given(sizes=st.lists(st.integers(1, 40), min_size=1, max_size=3), chunk_size=st.integers(1, 500),
       min_group=st.sampled_from([1, 7, 256]), smallest_batch=st.sampled_from([1, 8, 64]))
def test_aligned_chunks_never_straddle_a_value_of_the_leading_axis(sizes, chunk_size, min_group, smallest_batch):
    """The plan follows the leading axis when each of its values has at least MIN_ALIGNED_GROUP
    runs and ALIGNED_BATCHES of the program's smallest batches; then every chunk holds one of its
    values, so the axis can enter the program as a scalar; every run is covered once, in order."""
    axes = {name: np.arange(1, n + 1) for name, n in zip(["depth", "sigma0", "lr"], sizes)}
    flat = grid.build(axes)
    original, grid.MIN_ALIGNED_GROUP = grid.MIN_ALIGNED_GROUP, min_group
    try:
        group = grid.aligned_group(axes, smallest_batch)
    finally:
        grid.MIN_ALIGNED_GROUP = original
    per_value = flat.size // sizes[0]
    follows = sizes[0] > 1 and per_value >= max(min_group, grid.ALIGNED_BATCHES * smallest_batch)
    assert group == (per_value if follows else flat.size)
    plan = grid.chunks(flat.size, chunk_size, group)
    assert np.concatenate([np.arange(c.start, c.stop) for c in plan]).tolist() == list(range(flat.size))
    assert [c.index for c in plan] == list(range(len(plan)))
    constant = grid.constant_axes(axes, group < flat.size)
    for c in plan:
        assert 1 <= c.stop - c.start <= chunk_size
        rows = flat.rows(c.start, c.stop)
        for name, values in constant.items():
            assert len(set(rows[name].tolist())) == 1 and rows[name][0] in values, (name, c)


def test_constant_axes():
    axes = {"depth": np.array([1, 2]), "sigma0": np.array([0.1, 0.2]), "lr": np.array([1e-3])}
    assert grid.constant_axes(axes, follows_leading=True) == {"depth": (1, 2), "lr": (1e-3,)}
    assert grid.constant_axes(axes, follows_leading=False) == {"lr": (1e-3,)}
