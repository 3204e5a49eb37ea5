"""Deep matrix sensing: depth padding, Theorem 4 against the toy model, the compiled-in depth, and
the [task] errors."""

import jax
import numpy as np
import pytest

from dlsweep import api, engine, spec, store
from dlsweep.models import matrix_sensing
from dlsweep.models.layers import singular_value_drift


def sweep(model="matrix_sensing", task=None, **overrides):
    raw = {"name": "ms", "model": model, "steps": 1500, "dtype": "float32",
           "task": task or {"sigma_star": [3.0, 2.0, 1.0], "d": 5},
           "axes": {"depth": [1, 2, 3], "sigma0": {"logspace": [-3, -1], "num": 4}, "lr": [2e-2]},
           "record": {"points": 30}, "stop": {"rel_loss": 0.0}}
    raw.update(overrides)
    return spec.resolve(raw)


def run(tmp_path, name, s, **kwargs):
    api.run(s, out=tmp_path / name, progress_bar=False, **kwargs)
    return store.load(tmp_path / name), store.load_trajectories(tmp_path / name)


def test_identity_init_population_follows_the_toy_model(tmp_path):
    """Theorem 4 (Gissin et al. 2020): with W_n(0) = sigma0^(1/N) I and the population loss
    1/(2N) ||W - W*||_F^2, every layer stays diag(w) with w <- w + (lr/N) w^(N-1) (sigma* - w^N),
    the toy model's GD step (eq. 9), so the singular values are the toy's sigma_i. Expected: the
    same first-hitting steps exactly, and sigma within 1e-5 relative (float32 rounding of d x d
    products against scalar powers: a random walk of sqrt(1500) u = 2.3e-6 per rounding a step,
    u = 6e-8; measured 1.0e-6, and 2.9e-6 with XLA held to SSE4.2's narrower vectors). The exact
    hits are robust: at every decisive step the float64 recurrence (reference.toy_gd) is at least
    1.3e-5 from its level, 4.5 times the largest measured difference; sigma0 stops at 10^-1.1 because 0.1 lies exactly on the 5% level of sigma*_2 = 2
    at step 0, where the last bit of (0.1^(1/N))^N decides the hit."""
    axes = {"depth": [1, 2, 3], "sigma0": {"logspace": [-3, -1.1], "num": 4}, "lr": [2e-2]}
    toy_runs, toy_traj = run(tmp_path, "toy", sweep("toy", {"sigma_star": [3.0, 2.0, 1.0]}, axes=axes))
    ms_runs, ms_traj = run(tmp_path, "ms", sweep(axes=axes))
    hits = [c for c in toy_runs.columns if c.startswith("hit_")]
    assert (toy_runs[hits] >= 0).to_numpy().mean() > 0.5            # levels are reached: the check bites
    assert ms_runs[hits].equals(toy_runs[hits])
    sigmas = [f"sigma_{i}" for i in range(3)]
    np.testing.assert_allclose(ms_traj[sigmas].to_numpy(), toy_traj[sigmas].to_numpy(), rtol=1e-5)


@pytest.mark.slow
def test_padded_depth_equals_an_unpadded_one(tmp_path):
    """Depth 2 in a grid padded to depth 4 (two frozen identity layers) against a grid whose largest
    depth is 2, with Gaussian init and 30 measurements: the same recorded values, within 1e-5
    relative (the padded product multiplies by exact identities, so only the order of float32
    operations can differ)."""
    task = {"sigma_star": [3.0, 2.0], "d": 4, "measurements": 30, "init": "gaussian"}
    axes = {"sigma0": {"logspace": [-2, -1], "num": 3}, "lr": [2e-2]}
    padded = run(tmp_path, "padded", sweep(task=task, axes={"depth": [2, 4], **axes}))
    plain = run(tmp_path, "plain", sweep(task=task, axes={"depth": [2], **axes}))
    for table_padded, table_plain in zip(padded, plain):
        depth2 = table_padded[table_padded.run_id.isin(plain[0].run_id)]
        values = [c for c in table_plain.columns if c == "loss" or c.startswith("sigma_") or c == "final_loss"]
        assert len(depth2) == len(table_plain)
        np.testing.assert_allclose(depth2[values].to_numpy(), table_plain[values].to_numpy(), rtol=1e-5, atol=1e-12)


def test_padded_layers_stay_the_identity():
    """Layers n >= N start at the identity and get no gradient."""
    model = matrix_sensing.MatrixSensing(d=3, k=2, max_depth=4, init_kind="gaussian", measurements=0)
    task = matrix_sensing.make_task(sweep(task={"sigma_star": [2.0, 1.0], "d": 3}))
    hp = {"depth": np.int32(2) * np.ones((), np.int32), "sigma0": np.float32(0.1), "lr": np.float32(0.01)}
    params = model.init(jax.random.key(0), {k: jax.numpy.asarray(v) for k, v in hp.items()}, task)
    grad = jax.grad(model.loss)(params, {k: jax.numpy.asarray(v) for k, v in hp.items()}, task)
    np.testing.assert_array_equal(params["layers"][2:], np.broadcast_to(np.eye(3), (2, 3, 3)))
    assert np.all(np.asarray(grad["layers"][2:]) == 0) and np.any(np.asarray(grad["layers"][:2]) != 0)


@pytest.mark.slow
def test_compiled_in_depth_gives_the_same_trajectories(tmp_path, monkeypatch):
    """Chunks that follow the depth axis compile the depth in (only N layers multiplied): against
    the program with depth batched and layers masked, the same hitting steps and values within
    1e-5 relative."""
    s = sweep(task={"sigma_star": [3.0, 2.0], "d": 3, "measurements": 20, "init": "gaussian"})
    batched = run(tmp_path, "batched", s)
    monkeypatch.setattr("dlsweep.grid.MIN_ALIGNED_GROUP", 1)
    monkeypatch.setattr("dlsweep.grid.ALIGNED_BATCHES", 0)
    compiled_in = run(tmp_path, "compiled", s, chunk_size=4)
    assert store.read_manifest(tmp_path / "compiled")["group"] == 4
    hits = [c for c in batched[0].columns if c.startswith("hit_")]
    assert batched[0][hits].equals(compiled_in[0][hits])
    np.testing.assert_allclose(compiled_in[1].filter(like="sigma_").to_numpy(),
                               batched[1].filter(like="sigma_").to_numpy(), rtol=1e-5)


@pytest.mark.slow
def test_observing_every_few_steps_keeps_exact_hits(tmp_path, monkeypatch):
    """The engine observes W only every `ANCHOR_EVERY` steps and bounds sigma in between with the
    model's `drift_from` (Weyl). Against the same sweep observed at every step (the model without
    `drift_from`): identical first-hitting steps, and the same GD up to the order of float32
    operations in the two programs (recorded values within 1e-4 relative). Blocks of
    2.5 `ANCHOR_EVERY` steps are not whole groups, so the last group of each block is short."""
    task = {"sigma_star": [3.0, 2.0, 1.0], "d": 5, "measurements": 40, "init": "gaussian"}
    s = sweep(task=task, stop={"rel_loss": 0.0, "check_every": engine.ANCHOR_EVERY * 5 // 2})
    anchored = run(tmp_path, "anchored", s)
    monkeypatch.delattr(matrix_sensing.MatrixSensing, "drift_from")
    every_step = run(tmp_path, "every_step", s)
    hits = [c for c in anchored[0].columns if c.startswith("hit_")]
    assert (anchored[0][hits] >= 0).to_numpy().mean() > 0.5            # levels are reached: the check bites
    assert anchored[0][hits].equals(every_step[0][hits])
    np.testing.assert_allclose(anchored[1].filter(like="sigma_").to_numpy(),
                               every_step[1].filter(like="sigma_").to_numpy(), rtol=1e-4)


@pytest.mark.parametrize("d", [2, 5, 10, 12])
def test_drift_bounds_the_observed_singular_values(d):
    """Weyl's inequality as the engine relies on it, in float32 with the model's own observation
    (Jacobi for d <= 10, LAPACK above): sigma_i(W) <= sigma_i(W_A) + drift(W) for every i, for W =
    W_A + a perturbation of relative size 0 .. 1 (1e-7: a few ulps, where only the rounding slack
    holds the bound), on 512 random pairs of depth-2 products per size; and the slack alone is
    below 1e-4 ||W_A||_F, so the bound stays useful (the slack is 2 layers.DRIFT_ROUNDING d eps
    ||W_A||_F by construction, 4.6e-5 ||W_A||_F at d = 12: a check of that constant, not of
    rounding)."""
    model = matrix_sensing.MatrixSensing(d=d, k=d, max_depth=2, init_kind="gaussian", measurements=0)
    hp = {"depth": jax.numpy.int32(2)}
    rng = np.random.default_rng(d)
    scales = np.repeat([0.0, 1e-7, 1e-6, 1e-4, 1e-2, 1.0], 512 // 6 + 1)[:512]
    anchors = rng.standard_normal((512, 2, d, d)).astype(np.float32)
    moved = (anchors + scales[:, None, None, None] * rng.standard_normal(anchors.shape)).astype(np.float32)

    def check(anchor, params):
        anchor, params = {"layers": anchor}, {"layers": params}
        bound = model.observe(anchor, hp, {})["sigma"] + model.drift_from(anchor, hp, {})(params)
        return model.observe(params, hp, {})["sigma"], bound, model.drift_from(anchor, hp, {})(anchor)

    sigma, bound, slack = jax.jit(jax.vmap(check))(anchors, moved)
    assert np.all(np.asarray(sigma) <= np.asarray(bound))
    norms = np.linalg.norm(np.einsum("bij,bjk->bik", anchors[:, 1], anchors[:, 0]), axis=(1, 2))
    assert np.all(np.asarray(slack) < 1e-4 * norms)


@pytest.mark.parametrize("shape", [(3, 5), (6, 2), (4, 4)])
def test_drift_bounds_the_singular_values_of_any_shape(shape):
    """Weyl's inequality as `layers.singular_value_drift` states it for any m x n matrix, in float32
    with the backend's SVD: sigma_i(W) <= sigma_i(W_A) + drift(W) for every i, for W = W_A + a
    perturbation of relative size 0 .. 1 (1e-7: a few ulps, where only the rounding slack holds
    the bound), on 512 random pairs per shape."""
    rng = np.random.default_rng(sum(shape))
    scales = np.repeat([0.0, 1e-7, 1e-6, 1e-4, 1e-2, 1.0], 512 // 6 + 1)[:512]
    anchors = rng.standard_normal((512, *shape)).astype(np.float32)
    moved = (anchors + scales[:, None, None] * rng.standard_normal(anchors.shape)).astype(np.float32)

    def check(anchor, w):
        sigma = lambda m: jax.numpy.linalg.svd(m, compute_uv=False)  # noqa: E731
        return sigma(w), sigma(anchor) + singular_value_drift(lambda m: m, anchor)(w)

    got, bound = jax.jit(jax.vmap(check))(anchors, moved)
    assert np.all(np.asarray(got) <= np.asarray(bound))


@pytest.mark.parametrize("task, key, message", [
    ({"sigma_star": [3.0, 2.0], "d": 1}, "task.d", "len(sigma_star) = 2"),
    ({"sigma_star": [3.0], "measurements": -1}, "task.measurements", ">= 0"),
    ({"sigma_star": [3.0], "init": "orthogonal"}, "task.init", "identity"),
    ({"sigma_star": [3.0], "rank": 2}, "task.rank", "unknown key"),
    ({"sigma_star": [3.0, 0.0]}, "task.sigma_star", "> 0"),
])
def test_task_errors_name_the_key(task, key, message):
    with pytest.raises(spec.SpecError, match=key) as error:
        sweep(task=task)
    assert message in str(error.value)
