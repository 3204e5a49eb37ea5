"""The `shape` axis of every layered model (models/layers.py): the first layer at a_1 = sigma0^(1/N)
rho^((N-1)/N) and the others at a = sigma0^(1/N) rho^(-1/N), rho = (1 - s)/(1 + s), so the product's
scale stays sigma0; and shape runs with depth, scale, lr and seed in one compiled call.

References: the formulas above written out here, and a NumPy float64 loop of the per-mode scalar
dynamics of population matrix sensing (identity init keeps every layer diagonal)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dlsweep import api, models, spec


@pytest.fixture(autouse=True)
def _float64():
    """These tests compute in float64 (jnp.float64 scalars): JAX's x64 mode on for each of them,
    and the mode it was in after."""
    with jax.enable_x64(True):
        yield


def scales(sigma0: float, depth: int, shape: float) -> tuple[float, float]:
    rho = (1 - shape) / (1 + shape)
    return sigma0 ** (1 / depth) * rho ** ((depth - 1) / depth), sigma0 ** (1 / depth) * rho ** (-1 / depth)


def test_layer_scales_keep_the_product_and_match_azulay_at_depth_two():
    """Expected (to 1e-13): a_1 a^(N-1) = sigma0 and a_1 / a = (1 - s)/(1 + s) for N = 1..5 and s in
    (-0.9, 0.99); at N = 2, (|v0| - |u0|)/(|v0| + |u0|) = s and |u0 v0| = sigma0 (Azulay's scale and
    shape); at N = 1, a_1 = sigma0 whatever s."""
    from dlsweep.models.layers import layer_scales

    for depth in range(1, 6):
        for shape in (-0.9, -0.3, 0.0, 0.5, 0.99):
            first, other = (float(v) for v in layer_scales(jnp.float64(0.03), depth, shape))
            assert first * other ** (depth - 1) == pytest.approx(0.03, rel=1e-13)
            assert (first, other) == pytest.approx(scales(0.03, depth, shape), rel=1e-13)
            if depth == 1:
                assert first == pytest.approx(0.03, rel=1e-15)
            if depth == 2:
                assert (other - first) / (other + first) == pytest.approx(shape, rel=1e-12, abs=1e-15)


def test_every_layered_family_takes_the_shape_axis():
    """The families with more than one layer accept `shape`; the toy, Gissin's diagonal model (one
    weight per sign, raised to the power N) and the quadratic network have no layers to shape."""
    layered = {name for name, family in models.FAMILIES.items() if "shape" in family.optional_axes}
    assert layered == {"matrix_sensing", "conv", "linear_net", "diagonal_net", "neuron"}


def init_of(sweep, depth: int, sigma0: float, shape: float, seed: int = 0):
    program, _, task = api.compile_inputs(sweep)
    hp = {"depth": jnp.int32(depth), "sigma0": jnp.float64(sigma0), "lr": jnp.float64(0.01), "shape": jnp.float64(shape)}
    drawn = program.model.draw(jax.random.key(1), task) if hasattr(program.model, "draw") else {}
    return jax.tree.map(np.asarray, program.model.init(jax.random.key(seed), hp, task | drawn))


@pytest.mark.parametrize("model, task, layers_of", [
    ("matrix_sensing", {"sigma_star": [1.0, 0.5], "d": 3, "init": "gaussian"}, lambda p: list(p["layers"])),
    ("conv", {"frequencies": [1.0, 0.5], "d": 8, "examples": 4}, lambda p: list(p["layers"])),
    ("linear_net", {"data": "spectrum", "eigenvalues": [1.0, 0.5], "init": "gaussian", "width": 3},
     lambda p: [p["first"], *p["hidden"], p["last"]]),
    ("diagonal_net", {"d": 6, "examples": 3, "sparsity": 2}, lambda p: list(p["plus"])),
])
def test_shape_rescales_the_first_layer_against_the_others(model, task, layers_of):
    """Same key, shape s against shape 0 at depth 4, sigma0 0.05: the first layer is multiplied by
    rho^((N-1)/N) and every other by rho^(-1/N) (to 1e-12), for s = 0.6 and -0.4."""
    sweep = spec.resolve({"name": "s", "model": model, "steps": 1, "dtype": "float64", "task": task,
                          "axes": {"depth": [4], "sigma0": [0.05], "lr": [0.01], "shape": [0.0]}})
    balanced = layers_of(init_of(sweep, 4, 0.05, 0.0))
    for shape in (0.6, -0.4):
        rho = (1 - shape) / (1 + shape)
        shaped = layers_of(init_of(sweep, 4, 0.05, shape))
        np.testing.assert_allclose(shaped[0], balanced[0] * rho ** 0.75, rtol=1e-12)
        for layer, reference in zip(shaped[1:4], balanced[1:4]):
            np.testing.assert_allclose(layer, reference * rho ** -0.25, rtol=1e-12)


def test_matrix_sensing_with_shape_follows_the_per_mode_scalar_dynamics(tmp_path):
    """Population matrix sensing, identity init, depth 2: W = W_2 W_1 stays diagonal, and mode i
    is the scalar pair (u, v) from (a_1, a) under GD on 1/(2N) (u v - s*_i)^2 (N = 2):
    u <- u - (lr/2)(uv - s*) v, v <- v - (lr/2)(uv - s*) u. Expected: the recorded singular values
    at every record point equal the NumPy loop's to 1e-10 relative, for shapes -0.5, 0, 0.8 and
    sigma0 1e-3, 0.1, all in one run (one compiled program)."""
    sigma_star, lr, steps = [1.0, 0.4], 0.1, 400
    sweep = spec.resolve({"name": "ms", "model": "matrix_sensing", "steps": steps, "dtype": "float64",
                          "task": {"sigma_star": sigma_star, "init": "identity"},
                          "axes": {"depth": [2], "sigma0": [1e-3, 0.1], "lr": [lr], "shape": [-0.5, 0.0, 0.8]},
                          "record": {"points": 20}, "stop": {"rel_loss": 0.0}})
    api.run(sweep, out=tmp_path, progress_bar=False)
    runs, traj = api.load(tmp_path), api.load_trajectories(tmp_path)
    assert len(runs) == 6
    for run in runs.itertuples():
        u0, v0 = scales(run.sigma0, 2, run.shape)
        u, v = np.full(2, u0), np.full(2, v0)
        path = {0: u * v}
        for step in range(1, steps + 1):
            residual = u * v - sigma_star
            u, v = u - lr / 2 * residual * v, v - lr / 2 * residual * u
            path[step] = u * v
        recorded = traj[traj.run_id == run.run_id]
        expected = np.sort(np.array([path[s] for s in recorded.step]), axis=1)[:, ::-1]
        np.testing.assert_allclose(recorded[["sigma_0", "sigma_1"]].to_numpy(), expected, rtol=1e-10)
