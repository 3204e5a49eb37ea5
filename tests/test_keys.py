"""Random initializations: trajectory `run_id` draws from `fold_in(key(seed), run_id)`, so its
result never depends on the chunk size, the shard or the order chunks ran in."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import struct

from dlsweep import api, models, spec, store
from dlsweep.models import toy

JITTER = 0.1


@struct.dataclass
class JitteredToy(toy.Toy):
    """The toy model with w_i(0) = sigma0^(1/N) exp(0.1 z_i), z ~ N(0, I) from the trajectory's key."""

    def init(self, key, hp, task):
        params = super().init(key, hp, task)
        return {"w": params["w"] * jnp.exp(JITTER * jax.random.normal(key, (self.k,), params["w"].dtype))}


@pytest.fixture
def jittered(monkeypatch):
    family = dataclasses.replace(models.FAMILIES["toy"], name="jittered",
                                 build=lambda sweep: JitteredToy(k=len(sweep.task["sigma_star"]),
                                                                 max_depth=int(max(sweep.axes["depth"]))))
    monkeypatch.setitem(models.FAMILIES, "jittered", family)


def sweep(seed=3):
    return spec.resolve({"name": "j", "model": "jittered", "steps": 300, "seed": seed,
                         "task": {"sigma_star": [3.0, 2.0, 1.0]},
                         "axes": {"depth": [1, 2, 3], "sigma0": {"logspace": [-3, -1], "num": 7}, "lr": [1e-2]},
                         "record": {"points": 12}})


def frames(folder):
    return store.load(folder), store.load_trajectories(folder)


def test_initial_values_come_from_fold_in_of_the_run_id(tmp_path, jittered):
    """sigma_i(0) = (sigma0^(1/N) exp(0.1 z_i))^N with z = normal(fold_in(key(seed), run_id)), computed
    here independently in float64 from the same keys; float32 run, so rtol 1e-5."""
    api.run(sweep(), out=tmp_path / "r", progress_bar=False)
    runs, traj = frames(tmp_path / "r")
    start = traj[traj.step == 0].set_index("run_id").loc[runs.run_id]
    for row in runs.itertuples():
        z = np.asarray(jax.random.normal(jax.random.fold_in(jax.random.key(3), row.run_id), (3,), jnp.float32), float)
        expected = (row.sigma0 ** (1 / row.depth) * np.exp(JITTER * z)) ** row.depth
        np.testing.assert_allclose(start.loc[row.run_id, ["sigma_0", "sigma_1", "sigma_2"]].to_numpy(float),
                                   expected, rtol=1e-5)
    assert start.sigma_0.nunique() == len(runs)                   # every trajectory its own draw


def test_results_do_not_depend_on_chunk_size_shard_or_order(tmp_path, jittered):
    api.run(sweep(), out=tmp_path / "one", chunk_size=64, progress_bar=False)
    api.run(sweep(), out=tmp_path / "small", chunk_size=5, progress_bar=False)
    for shard in (3, 1, 2):                                       # shards in reverse-ish order, one folder
        api.run(sweep(), out=tmp_path / "sharded", chunk_size=4, shard=(shard, 3), progress_bar=False)
    reference = frames(tmp_path / "one")
    for other in ("small", "sharded"):
        for a, b in zip(reference, frames(tmp_path / other)):
            assert len(a) > 0
            assert a.equals(b), other


def test_another_seed_draws_other_initializations(tmp_path, jittered):
    api.run(sweep(seed=3), out=tmp_path / "a", progress_bar=False)
    api.run(sweep(seed=4), out=tmp_path / "b", progress_bar=False)
    a, b = (frames(tmp_path / name)[1] for name in ("a", "b"))
    first = a.step == 0
    assert not np.allclose(a[first].sigma_0.to_numpy(), b[first].sigma_0.to_numpy())
