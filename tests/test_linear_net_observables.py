"""The observables of `linear_net` that a task asks for (Hacohen & Weinshall's Figures 2, 3 and 10)
against independent NumPy float64 computations on the layers of the NumPy reference GD of
tests/linear_net_reference.py (hand-derived gradients; the package's model code is used only for
the unit init draw, as there):

- `pc_weights`: w_j = u_j^T W along the listed 1-based principal directions (u_j the eigenvectors
  of the checked Sigma_x, eigenvalues descending), flattened direction-major;
- gradient scale matrices (Hacohen's eq. 7, in the x W_1 ... W_L orientation): with P_l = W_1 ...
  W_{l-1} and S_l = W_{l+1} ... W_L, B_l = P_l P_l^T and A_l = S_l^T S_l; alpha_l = prod_{n>l}
  rows_n var_n and beta_l = prod_{n<l} cols_n var_n with var_n = s_n^2 / h (glorot: every layer's
  entry variance at sigma0 = 1 is 1 / h, Definition 3); observed per layer l = 1..max depth as
  mean_i |A_ii - alpha_l|, the mean off-diagonal entry of A_l, and the same of B_l, NaN past the
  run's depth;
- `accuracy` on the digits: the share of examples whose largest output x Z W is at their label,
  with X loaded here from scikit-learn (pixels / 16, centred), Z = Sigma_x^(-1/2) on the support
  (whitened) or I, and the labels the program drew checked to be the true ones (unshuffled) or a
  permutation of them (shuffled) that gives the drawn Sigma_xy = Z X^T onehot(labels) / n.

Tolerance: 1e-9 relative at every recorded step (float64 on both sides, as the reference module's;
300 contracting GD steps keep the rounding below 1e-11), plus an absolute floor of 1e-12 for the
off-diagonal means, which are sums of O(1) entries that cancel to ~1e-2. Accuracy: exact (a
count of argmax agreements, compared as counts; the outputs' margins are checked to be far above the rounding).
"""

from __future__ import annotations

import numpy as np
import pytest

import linear_net_reference as lnr
from gissin_reference import RTOL, dense, gradient_descent, resolve, run_sweep

OFF_DIAGONAL_ATOL = 1e-12
SCALES = ("a_diagonal_distance", "a_off_diagonal", "b_diagonal_distance", "b_off_diagonal")
SAMPLED = {"data": "spectrum", "eigenvalues": [2.0, 1.0, 0.5, 0.25], "w_true": [1.0, -0.5, 0.3], "examples": 20,
           "noise": 0.1, "width": 5, "init": "glorot", "pc_weights": [1, 3], "gradient_scales": True}
AXES = {"depth": [1, 2, 3], "sigma0": [0.5, 1.0], "lr": [0.05], "seed": [0, 1]}
DIGITS = {"data": "digits", "examples": 30, "width": 4, "init": "glorot"}


def gradient_scales(layers: list[np.ndarray], variances: list[float], max_depth: int) -> np.ndarray:
    """(4, max_depth): the module docstring's per-layer values, NaN past len(layers)."""
    depth = len(layers)
    out = np.full((4, max_depth), np.nan)
    for l in range(depth):              # layer l + 1
        prefix = lnr.product(layers[:l]) if l else np.eye(layers[0].shape[0])
        suffix = lnr.product(layers[l + 1:]) if l < depth - 1 else np.eye(layers[-1].shape[1])
        beta = np.prod([layers[n].shape[1] * variances[n] for n in range(l)])
        alpha = np.prod([layers[n].shape[0] * variances[n] for n in range(l + 1, depth)])
        for i, (matrix, expected) in enumerate(((suffix.T @ suffix, alpha), (prefix @ prefix.T, beta))):
            off = ~np.eye(len(matrix), dtype=bool)
            out[2 * i, l] = np.mean(np.abs(np.diag(matrix) - expected))
            out[2 * i + 1, l] = matrix[off].mean() if off.any() else 0.0
    return out


def glorot_variances(run, width: int) -> list[float]:
    """Each layer's entry variance: s_n^2 / h (glorot; depth 1: sigma0^2 / p, never used)."""
    depth = int(run.depth)
    first, scale = lnr.scales(run.sigma0, depth)
    return [first**2 / width] + [scale**2 / width] * (depth - 1)


@pytest.fixture(scope="module")
def sampled(tmp_path_factory):
    return run_sweep(tmp_path_factory, resolve("linear_net_observables", "linear_net", SAMPLED, AXES))


def test_pc_weights_and_gradient_scales_follow_the_reference(sampled):
    """Spectrum data sampled per seed (n = 20, d = 4, p = 3), glorot init at width 5, depths 1-3,
    sigma0 0.5 and 1, lr 0.05, seeds 0 and 1, 300 float64 steps: `pc_weights` of directions 1 and
    3 and the four gradient-scale values per layer at every recorded step equal the reference's
    (module docstring; 1e-9 relative, 1e-12 absolute for the off-diagonal means), NaN exactly past
    each run's depth; A_L and B_1 are I (their distances 0 and off-diagonal means 0), and at sigma0
    = 1 the init's B_2 diagonal sits near beta_2 = 1 (mean |B_ii - 1| < 1.5, a width-5 draw)."""
    result = sampled
    d, p, width = 4, 3, SAMPLED["width"]
    columns = [f"pc_weights_{i}" for i in range(2 * p)] + [f"{name}_{l}" for name in SCALES for l in range(3)]
    got = dense(result.runs, result.traj, result.record_steps, columns)
    for row, run in enumerate(result.runs.itertuples()):
        stats = lnr.statistics(result, lnr.seed_of(run))
        layers = lnr.drawn_layers(result, run, stats)
        variances = glorot_variances(run, width)
        directions = stats["pcs"][:, [0, 2]]

        def observe(params):
            current = [params[f"w{l}"] for l in range(len(layers))]
            weights = (directions.T @ lnr.product(current)).reshape(-1)
            return np.concatenate([weights, gradient_scales(current, variances, 3).reshape(-1)])

        out = gradient_descent({f"w{l}": layer for l, layer in enumerate(layers)}, lnr.loss_and_grad(stats), observe,
                               run.lr, result.sweep.steps, result.record_steps)
        expected = out.sigma
        assert np.array_equal(np.isnan(got[row]), np.isnan(expected)), run
        off = np.zeros(expected.shape[1], bool)
        off[2 * p + 3: 2 * p + 6] = off[2 * p + 9:] = True
        np.testing.assert_allclose(got[row][:, ~off], expected[:, ~off], rtol=RTOL, atol=0, err_msg=str(run))
        np.testing.assert_allclose(got[row][:, off], expected[:, off], rtol=RTOL, atol=OFF_DIAGONAL_ATOL,
                                   err_msg=str(run))
        depth = int(run.depth)
        last_a, first_b = 2 * p + depth - 1, 2 * p + 6
        assert np.all(got[row][:, [last_a, last_a + 3, first_b, first_b + 3]] == 0.0)
        if depth >= 2 and run.sigma0 == 1.0:
            assert got[row][0, 2 * p + 6 + 1] < 1.5


@pytest.mark.parametrize("whiten,shuffle,lr", [(False, False, 0.5), (True, True, 0.2)])
def test_digits_accuracy_follows_the_reference(tmp_path_factory, whiten, shuffle, lr):
    """The first 30 digits, glorot init at width 4, depths 1 and 2, sigma0 1, seeds 0 and 1, 300
    float64 steps, natural (lr 0.5) and whitened with shuffled labels (lr 0.2: Sigma_x's eigenvalues
    are then 1, and lr 0.5 diverges at depth 2): none diverges, and the recorded `accuracy` equals the
    reference's exactly at every recorded step (module docstring), and rises from the init's
    (measured in this test: >= 0.5 by the end at depth 1, where 30 examples in 64 dimensions can be
    fitted)."""
    from sklearn.datasets import load_digits

    task = DIGITS | {"whiten": whiten, "shuffle": shuffle}
    axes = {"depth": [1, 2], "sigma0": [1.0], "lr": [lr], "seed": [0, 1]}
    result = run_sweep(tmp_path_factory, resolve(f"linear_net_accuracy_{whiten}", "linear_net", task, axes))
    assert not result.runs.diverged.any()
    data = load_digits()
    x = data.data[:30] / 16.0
    x = x - x.mean(axis=0)
    true = data.target[:30]
    got = dense(result.runs, result.traj, result.record_steps, ["accuracy"])[..., 0]
    for row, run in enumerate(result.runs.itertuples()):
        drawn = {name: np.asarray(value, np.float64) for name, value in result.data(run.seed).items()}
        labels = np.asarray(result.data(run.seed)["labels"])
        if shuffle:
            assert sorted(labels) == sorted(true) and np.any(labels != true)
        else:
            np.testing.assert_array_equal(labels, true)
        sigma_x = x.T @ x / 30
        lam, vectors = np.linalg.eigh(sigma_x)
        keep = lam > lnr.SUPPORT_RTOL * lam.max()
        zca = vectors @ np.diag(np.where(keep, 1.0 / np.sqrt(np.where(keep, lam, 1.0)), 0.0)) @ vectors.T
        z = zca if whiten else np.eye(64)
        lnr.assert_close(drawn["sigma_xy"], z @ x.T @ np.eye(10)[labels] / 30, 1e-12, "Sigma_xy of the drawn labels")
        stats = {name: drawn[name] for name in ("sigma_x", "sigma_xy", "pcs", "w_opt", "w_ref")} | {
            "offset": float(drawn["offset"])}
        counts, margin = lnr.accuracy_paths(result, run, stats, [(x @ z, labels)])
        assert margin > 1e-9, run
        np.testing.assert_array_equal(np.rint(got[row] * 30), counts[:, 0], err_msg=str(run))
        if run.depth == 1:
            assert got[row][-1] >= 0.5 and got[row][-1] > got[row][0]


@pytest.mark.parametrize("task,axes,key,message", [
    ({"pc_weights": [0]}, {}, "pc_weights", "principal directions j in 1..d = 4"),
    ({"pc_weights": [2, 2]}, {}, "pc_weights", "distinct"),
    ({"gradient_scales": True, "init": "aligned"}, {}, "gradient_scales", "i.i.d."),
    ({"gradient_scales": True}, {"depth": [1]}, "gradient_scales", "some depth >= 2"),
])
def test_observable_options_name_the_key(task, axes, key, message):
    from dlsweep.errors import SpecError

    with pytest.raises(SpecError, match=message) as info:
        resolve("bad", "linear_net", SAMPLED | task, AXES | axes)
    assert key in str(info.value)


def test_the_spread_of_w_j_is_refused_where_each_seed_samples_its_inputs(tmp_path):
    """Sampled spectrum data: each seed has its own examples, so its own principal directions u_j;
    the spread of w_j = u_j^T W over the seeds would mix bases. Expected: api.pc_weight_spread
    raises a ThresholdError that says so, and the pc_curves figure is drawn without its std panel
    under one warning."""
    from dlsweep import api
    from dlsweep.errors import ThresholdError
    from dlsweep.warning import DlsweepWarning

    folder = tmp_path / "run"
    sweep = resolve("linear_net_sampled_spread", "linear_net", SAMPLED | {"gradient_scales": False},
                    AXES | {"depth": [1], "sigma0": [1.0]}, steps=40, points=15)
    api.run(sweep, out=folder, progress_bar=False)
    with pytest.raises(ThresholdError, match="each seed samples its own examples"):
        api.pc_weight_spread(folder)
    with pytest.warns(DlsweepWarning, match="std of w_j over the seeds is left out"):
        paths = api.plot_run(folder, kind="pc_curves")
    assert paths and paths[0].is_file()


def test_the_gradient_scales_figure_draws_the_deepest_networks(tmp_path, monkeypatch):
    """A sweep of depths 1 and 3 (digits, glorot, width 4): the figure draws depth 3, where layer 2
    is the one whose A_l and B_l are both products of layers, so one row of two panels (at depth 1
    both are I: its figure would repeat layer 1 in two rows of zeros)."""
    from dlsweep import api, plot

    drawn = []
    save = plot.save
    monkeypatch.setattr(plot, "save", lambda figure, paths, keep_open=False, rendered=None: (
        drawn.append([ax.get_title() for ax in figure.axes if ax.get_visible()]), save(figure, paths, keep_open, rendered))[1])
    sweep = resolve("linear_net_scales_figure", "linear_net", DIGITS | {"gradient_scales": True},
                    {"depth": [1, 3], "sigma0": [1.0], "lr": [0.1], "seed": [0, 1]}, steps=20, points=10)
    api.run(sweep, out=tmp_path / "run", progress_bar=False)
    api.plot_run(tmp_path / "run", kind="gradient_scales")
    assert len(drawn) == 1 and len(drawn[0]) == 2 and all("layer 2" in title for title in drawn[0]), drawn
