"""dlsweep's deep matrix sensing model (Gissin et al. 2020, sec. 4.1) against an independent
NumPy float64 gradient-descent reference written from the paper's equations (no package model
code, no autodiff, no optax):

    W = W_N ... W_1,  D = W - W*,  W* = diag(sigma*_1, ..., sigma*_k, 0, ...)
    loss  l = 1/(2N) <D, G(D)>,  G(D) = D (population)  or  (1/m) sum_j <A_j, D> A_j  (m samples)
    grad  dl/dW_n = (1/N) (W_N ... W_{n+1})^T G(D) (W_{n-1} ... W_1)^T
    GD    W_n <- W_n - eta dl/dW_n            (all layers at once)
    init  identity: W_n(0) = sigma0^(1/N) I;  gaussian: entries N(0, 1) * sigma0^(1/N) / sqrt(d)
    observed  the k largest singular values of W, descending.

The measurements A_j are drawn as the package documents them (jax.random.normal from the data key
of the trajectory's seed, fold_in(fold_in(key(seed), 2^32 - 1), seed value), m x d^2 standard
normals, row j = vec(A_j) row-major); the gaussian init's noise is drawn with jax.random.normal
from the documented key fold_in(key(seed), run_id). Each sweep runs once per
module; every test compares loss and sigma_i at every recorded step to 1e-9 relative (float64)
and checks that a reference with the toy model's 1/(2N^2) normalization instead of 1/(2N) would
be caught (so the comparison can fail).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dlsweep import api, engine, spec, store
from gissin_reference import dense

SIGMA_STAR = [3.0, 2.0, 1.0]
K = len(SIGMA_STAR)
D = 4
SEED = 7
STEPS = 300
POINTS = 20
AXES = {"depth": [1, 2, 3], "sigma0": [1e-2, 1e-1], "lr": [1e-2]}
SIGMA_COLUMNS = [f"sigma_{i}" for i in range(K)]
RTOL = 1e-9


# ----------------------------------------------------------------------------- NumPy reference


def measurement_matrices(m: int, d: int, seed: int) -> np.ndarray:
    """(m, d, d): A_j with N(0, 1) entries (float64), row j of a standard normal (m, d*d) draw from
    the data key of seed value 0 reshaped row-major (the package's documented draw)."""
    with jax.enable_x64(True):       # float64 draws here, whatever the caller's mode
        key = jax.random.fold_in(jax.random.fold_in(jax.random.key(seed), np.uint32(2**32 - 1)), 0)
        return np.asarray(jax.random.normal(key, (m, d * d), jnp.float64)).reshape(m, d, d)


def sensing_operator(a: np.ndarray | None):
    """G(D) = D for the population loss (a is None), else (1/m) sum_j <A_j, D> A_j."""
    if a is None:
        return lambda residual: residual
    m = len(a)
    return lambda residual: np.einsum("j,jkl->kl", np.einsum("jkl,kl->j", a, residual), a) / m


def chain(layers: list[np.ndarray], d: int) -> np.ndarray:
    """layers[-1] @ ... @ layers[0]; the identity for an empty list."""
    out = np.eye(d)
    for layer in layers:
        out = layer @ out
    return out


def reference_gd(layers0: list[np.ndarray], w_star: np.ndarray, a: np.ndarray | None, lr: float,
                 steps: int, record_steps: np.ndarray, k: int, normalization: str = "1/(2N)"):
    """GD from the N layers `layers0` (W_1 first). Returns (loss (R,), sigma (R, k)) at
    record_steps. `normalization` "1/(2N^2)" is a deliberately wrong variant (the toy model's
    factor) used only to show that the comparison discriminates."""
    layers = [np.array(x, np.float64) for x in layers0]
    n_layers, d = len(layers), w_star.shape[0]
    scale = 1.0 / n_layers if normalization == "1/(2N)" else 1.0 / n_layers**2
    apply_g = sensing_operator(a)
    record = set(int(s) for s in record_steps)
    loss_rec, sigma_rec = {}, {}
    for t in range(steps + 1):
        w = chain(layers, d)
        residual = w - w_star
        g = apply_g(residual)
        if t in record:
            loss_rec[t] = 0.5 * scale * np.sum(residual * g)
            sigma_rec[t] = np.linalg.svd(w, compute_uv=False)[:k]
        if t == steps:
            break
        grads = [scale * chain(layers[n + 1:], d).T @ g @ chain(layers[:n], d).T for n in range(n_layers)]
        layers = [layer - lr * grad for layer, grad in zip(layers, grads)]
    steps_sorted = np.sort(np.asarray(record_steps, np.int64))
    return (np.array([loss_rec[int(s)] for s in steps_sorted]),
            np.stack([sigma_rec[int(s)] for s in steps_sorted]))


def identity_layers(depth: int, sigma0: float, d: int) -> list[np.ndarray]:
    return [sigma0 ** (1.0 / depth) * np.eye(d) for _ in range(depth)]


# ----------------------------------------------------------------------------- running the engine


def ms_sweep(name: str, measurements: int, init: str):
    raw = {"name": name, "model": "matrix_sensing", "steps": STEPS, "dtype": "float64", "seed": SEED,
           "task": {"sigma_star": SIGMA_STAR, "d": D, "measurements": measurements, "init": init},
           "axes": AXES, "record": {"points": POINTS}, "stop": {"rel_loss": 0.0}}
    return spec.resolve(raw)


def run_sweep(tmp_path_factory, sweep):
    folder = tmp_path_factory.mktemp(sweep.name)
    api.run(sweep, out=folder, progress_bar=False)
    steps = engine.record_steps(sweep.record.schedule, sweep.record.points, sweep.steps)
    return store.load(folder), store.load_trajectories(folder), steps


def compare(runs, traj, record_steps, initial_layers, a, label):
    """Engine vs reference for every run: loss and sigma at every recorded step to RTOL; the
    1/(2N^2) variant must be off by > 1e-3 for depth >= 2 (the test can fail). Returns the max
    relative differences (loss, sigma) for the report."""
    assert len(runs) == 6 and not runs["diverged"].any() and not runs["converged"].any()
    assert (runs["steps_run"] == STEPS).all()
    assert record_steps[0] == 0 and record_steps[-1] == STEPS and len(record_steps) >= 15
    w_star = np.zeros((D, D))
    w_star[np.arange(K), np.arange(K)] = SIGMA_STAR
    loss_got = dense(runs, traj, record_steps, ["loss"])[..., 0]
    sigma_got = dense(runs, traj, record_steps, SIGMA_COLUMNS)
    assert not np.isnan(loss_got).any() and not np.isnan(sigma_got).any()
    worst_loss = worst_sigma = 0.0
    for row, run in enumerate(runs.itertuples()):
        layers0 = initial_layers(run)
        loss_ref, sigma_ref = reference_gd(layers0, w_star, a, run.lr, STEPS, record_steps, K)
        # the run really moved: some sigma_i changed by more than 10% over the 300 steps
        assert np.max(np.abs(sigma_ref[-1] / sigma_ref[0] - 1)) > 0.1
        np.testing.assert_allclose(loss_got[row], loss_ref, rtol=RTOL, atol=0, err_msg=f"{label} loss {run}")
        np.testing.assert_allclose(sigma_got[row], sigma_ref, rtol=RTOL, atol=0, err_msg=f"{label} sigma {run}")
        worst_loss = max(worst_loss, np.max(np.abs(loss_got[row] / loss_ref - 1)))
        worst_sigma = max(worst_sigma, np.max(np.abs(sigma_got[row] / sigma_ref - 1)))
        if run.depth >= 2:
            loss_bad, sigma_bad = reference_gd(layers0, w_star, a, run.lr, STEPS, record_steps, K, "1/(2N^2)")
            assert np.max(np.abs(sigma_got[row] / sigma_bad - 1)) > 1e-3
            assert np.max(np.abs(loss_got[row] / loss_bad - 1)) > 1e-3
    print(f"{label}: max rel diff loss {worst_loss:.2e}, sigma {worst_sigma:.2e}")
    return worst_loss, worst_sigma


CASES = {"population": (0, "identity"), "m5": (5, "identity"), "m40": (40, "identity"), "gaussian": (40, "gaussian")}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """results(case) -> (runs, trajectories, record steps) of the case's sweep (`CASES`: m and
    init), run once per module."""
    done = {}

    def get(case):
        if case not in done:
            measurements, init = CASES[case]
            done[case] = run_sweep(tmp_path_factory, ms_sweep(f"ms_{case}", measurements, init))
        return done[case]

    return get


# ----------------------------------------------------------------------------- tests


def test_identity_init_population_loss(results):
    """(1) Identity init W_n(0) = sigma0^(1/N) I, population loss 1/(2N) ||W - W*||_F^2, d = 4,
    sigma* = (3, 2, 1), N in {1, 2, 3}, sigma0 in {1e-2, 1e-1}, lr 1e-2, 300 steps.

    Expected: reference_gd (NumPy float64 GD with G(D) = D, the gradient of the module
    docstring). Tolerance: 1e-9 relative on loss and sigma_i at every recorded step (both sides
    are float64 GD on the same equations; rounding differences are ~1e-15 per step). Also: the
    step-0 sigma are exactly sigma0 (to 1e-12), every k value."""
    runs, traj, record_steps = results("population")
    sigma0_rows = dense(runs, traj, record_steps[:1], SIGMA_COLUMNS)[:, 0, :]
    np.testing.assert_allclose(sigma0_rows, np.repeat(runs["sigma0"].to_numpy()[:, None], K, 1), rtol=1e-12)
    compare(runs, traj, record_steps, lambda run: identity_layers(run.depth, run.sigma0, D), None, "population")


def test_identity_init_few_measurements(results):
    """(2) Identity init, m = 5 < d^2 = 16 Gaussian measurements (the engine uses the m x d^2
    measurements directly), loss 1/(2N) (1/m) sum_j <A_j, W - W*>^2.

    Expected: reference_gd with G(D) = (1/m) sum_j <A_j, D> A_j, A_j from
    the documented (5, 16) standard normal draw, rows reshaped row-major to 4 x 4. Tolerance: 1e-9
    relative at every recorded step (float64 on both sides)."""
    runs, traj, record_steps = results("m5")
    a = measurement_matrices(5, D, SEED)
    compare(runs, traj, record_steps, lambda run: identity_layers(run.depth, run.sigma0, D), a, "m=5")


def test_identity_init_many_measurements(results):
    """(3) Identity init, m = 40 >= d^2 = 16 measurements (the engine uses the Gram matrix
    (1/m) sum_j vec(A_j) vec(A_j)^T; the reference uses the A_j themselves).

    Expected: reference_gd with G(D) = (1/m) sum_j <A_j, D> A_j, A_j from
    the documented (40, 16) standard normal draw. Tolerance: 1e-9 relative at every recorded step
    (the two ways of summing differ only in rounding, ~1e-15 per step)."""
    runs, traj, record_steps = results("m40")
    a = measurement_matrices(40, D, SEED)
    compare(runs, traj, record_steps, lambda run: identity_layers(run.depth, run.sigma0, D), a, "m=40")


def test_gaussian_init_many_measurements(results):
    """(4) Gaussian init, m = 40 measurements. The reference's initial layers are drawn
    independently of the model code: noise = jax.random.normal(fold_in(key(seed), run_id),
    (max_depth, d, d), float64), W_n(0) = noise[n] * sigma0^(1/N) / sqrt(d) for n < N (layers
    n >= N are the identity and so drop out of the product).

    Expected: the step-0 singular values recorded by the engine equal those of the reference's
    W(0) (1e-12 relative: the same numbers up to the rounding of sigma0^(1/N) and the product),
    and the whole trajectory equals reference_gd from those layers (1e-9 relative). The init is
    checked to be non-trivial: not a multiple of the identity (distinct step-0 singular values)."""
    check_gaussian_init(*results("gaussian"), "gaussian m=40")


def test_gaussian_init_runs_one_after_another(tmp_path_factory, monkeypatch):
    """(5) The sweep of (4) with its runs one after another (`engine.run_sequential`, chosen here
    whatever the gradient's cost): each run's init key, data and steps as in (4), so the same
    agreement with the reference to the same tolerances."""
    monkeypatch.setattr(engine, "SEQUENTIAL_MIN_FLOPS", 0.0)
    sweep = ms_sweep("ms_gaussian_sequential", *CASES["gaussian"])
    assert api.compile_inputs(sweep)[0].sequential
    check_gaussian_init(*run_sweep(tmp_path_factory, sweep), "gaussian m=40, one run after another")


def gaussian_layers(run) -> list[np.ndarray]:
    """The initial layers of a gaussian-init run, drawn independently of the model code (see (4))."""
    with jax.enable_x64(True):       # float64 draws here, whatever the caller's mode
        noise = np.asarray(jax.random.normal(jax.random.fold_in(jax.random.key(SEED), int(run.run_id)),
                                             (max(AXES["depth"]), D, D), jnp.float64))
    assert noise.dtype == np.float64
    scale = run.sigma0 ** (1.0 / run.depth) / np.sqrt(D)
    return [noise[n] * scale for n in range(run.depth)]


def check_gaussian_init(runs, traj, record_steps, label):
    """(4)'s checks: step-0 singular values of the reference's W(0), distinct per run, then the
    whole trajectory against reference_gd."""
    step0 = dense(runs, traj, record_steps[:1], SIGMA_COLUMNS)[:, 0, :]
    for row, run in enumerate(runs.itertuples()):
        expected = np.linalg.svd(chain(gaussian_layers(run), D), compute_uv=False)[:K]
        assert np.all(np.diff(expected) < -1e-6 * expected[0])        # distinct: really random
        np.testing.assert_allclose(step0[row], expected, rtol=1e-12, atol=0)
    # different runs draw different layers (the key depends on run_id)
    assert len({tuple(np.round(s, 12)) for s in step0}) == len(runs)
    a = measurement_matrices(40, D, SEED)
    compare(runs, traj, record_steps, gaussian_layers, a, label)
