"""The deep diagonal network on sparse regression (models/diagonal_net.py) with the init's `shape`
axis (models/layers.py), against an independent NumPy float64 GD loop written from Azulay et al.'s
definitions, and against the theory's interpolators (dlsweep.analysis.theory, THEORY.md 2.8).

The loop runs on the very examples the program drew (`engine.draw_task`), so the two differ only
in the rounding order of the same float64 operations."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from dlsweep import api, engine, spec
from dlsweep.analysis import theory
from dlsweep.spec import SpecError

TASK = {"d": 12, "examples": 5, "sparsity": 2, "noise": 0.05}
# GD ends O(lr) from the gradient flow's limit argmin Q_c (Azulay's Theorem 1 is for the flow):
# 0.078 lr on THEORY.md 4.6's problem (7.9e-5 at lr 1e-3, 3.1e-4 at 4e-3), 0.070 lr at most on
# TASK's (measured at lr 5e-3 and 0.01); asserted below GD_GAP_PER_LR lr.
GD_GAP_PER_LR = 0.25


def run_sweep(folder, task: dict, axes: dict, steps: int, lr: float, stop: dict | None = None, compare: bool = True):
    sweep = spec.resolve({"name": "diagonal-net", "model": "diagonal_net", "steps": steps, "dtype": "float64",
                          "compare": compare, "task": task, "axes": axes | {"lr": [lr]}, "record": {"points": 10},
                          "stop": stop or {"rel_loss": 0.0}})
    api.run(sweep, out=folder, progress_bar=False)
    return sweep, api.load(folder)


def drawn(sweep, seed: int = 0) -> dict[str, np.ndarray]:
    program, _, task = api.compile_inputs(sweep)
    return engine.draw_task(program, task, seed, sweep.seed)


def reference_gd(x, y, depth: int, sigma0: float, shape: float, lr: float, steps: int, signed: bool) -> np.ndarray:
    """GD on 1/(2n) ||X beta - y||^2 over beta = prod_l u_l+ - prod_l u_l- (signed) or prod_l u_l,
    with u_1 = sigma0^(1/N) rho^((N-1)/N), u_l = sigma0^(1/N) rho^(-1/N) (l >= 2), rho = (1 - s)/(1 + s)."""
    rho = (1 - shape) / (1 + shape)
    first, other = sigma0 ** (1 / depth) * rho ** ((depth - 1) / depth), sigma0 ** (1 / depth) * rho ** (-1 / depth)
    start = np.array([first] + [other] * (depth - 1))[:, None] * np.ones((1, x.shape[1]))
    signs = [(1.0, start.copy()), (-1.0, start.copy())] if signed else [(1.0, start.copy())]
    n = len(y)
    for _ in range(steps):
        beta = sum(sign * np.prod(layers, axis=0) for sign, layers in signs)
        g = x.T @ (x @ beta - y) / n
        for sign, layers in signs:
            grads = [sign * g * np.prod(np.delete(layers, l, axis=0), axis=0) for l in range(depth)]
            layers -= lr * np.array(grads)
    return sum(sign * np.prod(layers, axis=0) for sign, layers in signs)


@pytest.mark.parametrize("form", ["signed", "plain"])
def test_gd_equals_the_numpy_reference_at_every_depth_and_shape(tmp_path, form):
    """Expected: the final predictor after 300 steps at lr 0.05 equals the NumPy loop's to 1e-10
    relative, for depths 1, 2, 3 in one program (depths 1 and 2 padded to 3 layers), sigma0 0.05
    and 0.5 and shapes -0.3, 0, 0.5 (d 12, n 5, 2 nonzeros, noise 0.05, one seed); the recorded
    population error is ||beta - beta*||^2 + noise^2 with beta* = (1/sqrt 2, 1/sqrt 2, 0, ...)."""
    sweep, runs = run_sweep(tmp_path, TASK | {"form": form},
                            {"depth": [1, 2, 3], "sigma0": [0.05, 0.5], "shape": [-0.3, 0.0, 0.5]}, 300, 0.05,
                            compare=False)
    data = drawn(sweep)
    beta_star = np.r_[np.full(2, 1 / math.sqrt(2)), np.zeros(10)]
    for run in runs.itertuples():
        expected = reference_gd(data["x"], data["y"], run.depth, run.sigma0, run.shape, 0.05, 300, form == "signed")
        np.testing.assert_allclose(run.beta, expected, rtol=1e-10, atol=1e-13 * np.abs(expected).max())
        assert run.population_error == pytest.approx(np.sum((run.beta - beta_star) ** 2) + 0.05**2, rel=1e-12)


def test_depth_one_ignores_shape_and_plain_starts_at_sigma0(tmp_path):
    """Depth 1 has no shape: every shape gives the same run. The plain form starts at beta = sigma0
    (recorded population error at step 0: d sigma0^2 - 2 sigma0 sum beta* + 1 + noise^2, beta* of
    unit norm); the signed form at 0 (1 + noise^2)."""
    for form, start in (("plain", 0.1), ("signed", 0.0)):
        sweep, runs = run_sweep(tmp_path / form, TASK | {"form": form},
                                {"depth": [1], "sigma0": [0.1], "shape": [-0.5, 0.0, 0.9]}, 20, 0.05, compare=False)
        betas = np.stack(runs.beta.to_numpy())
        np.testing.assert_array_equal(betas, np.broadcast_to(betas[0], betas.shape))
        first = api.load_trajectories(tmp_path / form).query("step == 0").population_error
        expected = 12 * start**2 - 2 * start * math.sqrt(2) + 1 + 0.05**2
        np.testing.assert_allclose(first, expected, rtol=1e-12)


def test_shape_enters_only_through_c_and_gd_reaches_the_q_minimizer(tmp_path):
    """Azulay's Theorem 1 (THEORY.md 2.8): at depth 2 gradient flow sees the init only through
    c = 2 alpha (1 + s^2)/(1 - s^2) and ends at argmin Q_c over the interpolators. Expected (d 12,
    n 5, no noise, lr 0.01, until the loss is 1e-13): alpha 0.01 at s = 0 and alpha 0.004 at
    s = +-0.65465 (rho = 4.79129; c = 0.02 both) end within 1e-7 of each other (measured 1.6e-8), so
    their population errors ||beta - beta*||^2 differ by at most (||beta - beta*|| + ||beta' -
    beta*||) ||beta - beta'|| <= 2 sqrt(max error) sqrt(d) 1e-7 (measured: a tenth of that); every
    run's `distance_q` is below GD_GAP_PER_LR lr = 2.5e-3 (measured 4.2e-4 to 6.8e-4); the
    distances to the interpolators equal NumPy's recomputation from the drawn data to 1e-9."""
    s = (4.79129 - 1) / (4.79129 + 1)       # |1 - rho| / (1 + rho) at rho = 4.79129 (THEORY.md 4.6): c = 0.02
    sweep, runs = run_sweep(tmp_path, TASK | {"noise": 0.0},
                            {"depth": [2], "sigma0": [0.01, 0.004], "shape": [-s, 0.0, s]}, 400_000, 0.01,
                            stop={"rel_loss": 0.0, "loss": 1e-13})
    assert runs.converged.all()
    c = theory.azulay_c(runs.sigma0, runs["shape"].abs())
    same_c = runs[np.isclose(c, 0.02, rtol=1e-5)]
    assert len(same_c) == 3
    betas = np.stack(same_c.beta.to_numpy())
    assert np.abs(betas - betas[0]).max() < 1e-7
    errors = same_c.population_error.to_numpy()
    np.testing.assert_allclose(errors, errors[0], rtol=0, atol=2 * np.sqrt(errors.max() * TASK["d"]) * 1e-7)
    assert (runs.distance_q < GD_GAP_PER_LR * 0.01).all(), runs.distance_q
    data = drawn(sweep)
    l1, l2 = theory.min_l1_interpolator(data["x"], data["y"]), theory.min_l2_interpolator(data["x"], data["y"])
    for run in runs.itertuples():
        assert run.distance_l1 == pytest.approx(np.linalg.norm(run.beta - l1), rel=1e-9)
        assert run.distance_l2 == pytest.approx(np.linalg.norm(run.beta - l2), rel=1e-9)
        assert run.l1_l2_position == pytest.approx(run.distance_l1 / (run.distance_l1 + run.distance_l2), rel=1e-12)


def test_scale_and_shape_move_gd_from_the_l1_to_the_l2_interpolator(tmp_path):
    """The limits of Q_c (THEORY.md 2.8): small c (alpha 1e-4, s = 0) is the rich regime, near the
    min-l1 interpolator; large c, by scale (alpha 10) or by shape (alpha 0.01, s = 0.999: c = 20), is
    the kernel regime, near the min-l2 one. Expected (depth 2, d 12, n 5): l1_l2_position below 0.1
    at the small c and above 0.9 at both large ones (measured 0.021, and 0.99998 at both)."""
    _, runs = run_sweep(tmp_path, TASK | {"noise": 0.0},
                        {"depth": [2], "sigma0": [1e-4, 0.01, 10.0], "shape": [0.0, 0.999]}, 200_000, 0.01,
                        stop={"rel_loss": 0.0, "loss": 1e-12})
    position = runs.set_index(["sigma0", "shape"]).l1_l2_position
    assert position[(1e-4, 0.0)] < 0.1
    assert position[(10.0, 0.0)] > 0.9 and position[(0.01, 0.999)] > 0.9


@pytest.mark.parametrize("change, key, message", [
    ({"sparsity": 13}, "task.sparsity", "expected at most d = 12 nonzeros"),
    ({"form": "tied"}, "task.form", "signed"),
    ({"noise": -1}, "task.noise", "expected a standard deviation >= 0"),
    ({"width": 3}, "task.width", "unknown"),
])
def test_task_errors_name_the_key(change, key, message):
    with pytest.raises(SpecError) as err:
        spec.resolve({"name": "x", "model": "diagonal_net", "steps": 10, "task": TASK | change,
                      "axes": {"depth": [2], "sigma0": [0.1], "lr": [0.1]}})
    assert key in str(err.value) and message in str(err.value), str(err.value)


@pytest.mark.parametrize("shape", [1.0, -1.0, 1.5])
def test_a_shape_outside_the_open_interval_is_a_spec_error(shape):
    with pytest.raises(SpecError, match=r"axes.shape.*expected shapes in \(-1, 1\)"):
        spec.resolve({"name": "x", "model": "diagonal_net", "steps": 10, "task": TASK,
                      "axes": {"depth": [2], "sigma0": [0.1], "lr": [0.1], "shape": [0.0, shape]}})


AZULAY_NAMES = ("azulay-fig7-1", "azulay-phase", "azulay-fig7-2")       # the reproductions tested here


def test_azulay_fig7_1_quick_reproduction(quick_reproduction):
    """Azulay et al.'s Figure 7.1 (quick: d 200, n 40, 8 scales x 5 shapes, lr 2e-3). Expected: it
    draws its three figures; at every scale the population error grows with
    the shape (s = 0 best, the paper's claim; measured: strictly, at all 8 scales); at the smallest
    scale s = 0 is nearer the min-l1 interpolator's error than the min-l2 one's, and at the largest
    every shape is within 1% of the min-l2 one's (the kernel regime; measured 0.2%); every run that
    reached the paper's stop (loss 5e-5) is within the norm of the residual the stop leaves,
    ||X beta - y|| <= sqrt(2 n 5e-5) = 0.063, of argmin Q_c for its c (Theorem 1): the flow would
    close that residual moving beta by about the residual over X's singular values (>= 8.3), up to
    its path's curvature (measured at most 0.011)."""
    result = quick_reproduction(AZULAY_NAMES[0])
    for path in result.figures:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000
    assert len(result.figures) == 3
    runs = api.load(result.folder)
    assert not runs.diverged.any() and runs.converged.mean() > 0.9
    table = runs.pivot_table(index="shape", columns="sigma0", values="population_error")
    assert (np.diff(table.to_numpy(), axis=0) > 0).all(), table
    sweep = spec.load(result.folder / "sweep.toml")
    data = drawn(sweep)
    beta_star = np.r_[np.full(5, 1 / math.sqrt(5)), np.zeros(195)]
    rich, kernel = (np.sum((b - beta_star) ** 2) + 0.01 for b in (theory.min_l1_interpolator(data["x"], data["y"]),
                                                                   theory.min_l2_interpolator(data["x"], data["y"])))
    smallest, largest = table.iloc[:, 0], table.iloc[:, -1]
    assert abs(smallest[0.0] - rich) < abs(smallest[0.0] - kernel)
    np.testing.assert_allclose(largest, kernel, rtol=0.01)
    stop_residual = math.sqrt(2 * len(data["y"]) * sweep.stop.loss)
    assert (runs[runs.converged].distance_q < stop_residual).all()


def test_azulay_phase_quick_reproduction(quick_reproduction):
    """The (scale x shape) plane at depths 2-4 in one program (quick: 5 scales x 3 shapes, 50000 steps).
    Expected: it draws its four heatmaps; at every depth the balanced init at the smallest scale
    has a lower population error than at the largest (rich vs kernel regime), and deeper networks
    are richer there (depth 4 < depth 3 < depth 2; measured 0.041, 0.060, 0.213); s = 0.99 is
    kernel-like at every scale and depth: within 10% of the largest scale's error (the kernel one,
    0.78-0.79), i.e. 0.08, a seventh of the gap of 0.57 to the rich errors (0.04-0.21) that tells
    the regimes apart (measured at most 3.1%, at sigma0 1e-3, where c = 0.2 is not far into the
    kernel limit); a run whose loss grew 1000-fold (s = 0.99 at the largest scale, depths 3 and 4:
    lr 2e-3 is too large there) is marked diverged, never drawn as a value."""
    result = quick_reproduction(AZULAY_NAMES[1])
    assert [p.name for p in result.figures] == ["heatmap-sigma0-shape-population_error-by-depth.png",
                                                "heatmap-sigma0-shape-l1_l2_position-by-depth.png"]
    runs = api.load(result.folder)
    kept = runs[~runs.diverged]
    assert kept.population_error.max() < 2.0
    balanced = kept[kept["shape"] == 0.0].pivot_table(index="depth", columns="sigma0", values="population_error")
    assert (balanced.iloc[:, 0] < balanced.iloc[:, -1]).all()
    assert balanced.iloc[:, 0][4] < balanced.iloc[:, 0][3] < balanced.iloc[:, 0][2]
    unbalanced = kept[kept["shape"] == 0.99].pivot_table(index="depth", columns="sigma0", values="population_error")
    largest = balanced.iloc[:, -1]
    for depth, row in unbalanced.iterrows():
        np.testing.assert_allclose(row.dropna(), largest[depth], rtol=0.1)
    assert runs.diverged.any() and (runs[runs.diverged]["shape"] == 0.99).all()


def test_summary_and_column_heatmap_figures_name_their_errors(tmp_path):
    """The figure options of final-state columns: -y must be a numeric runs column, --at a swept
    axis and value, --color (the lines of a summary) an axis, -x c needs depth 2; each error names
    the option."""
    from dlsweep.plot import PlotError

    run_sweep(tmp_path, TASK, {"depth": [3], "sigma0": [0.1], "shape": [0.0, 0.5]}, 50, 0.05)
    for options, message in (({"kind": "summary", "y": "beta"}, "y='beta': expected a numeric column"),
                             ({"kind": "summary", "at": {"depth": 2}}, "at={'depth': 2}: not a value of the axis"),
                             ({"kind": "summary", "at": {"width": 2}}, "at={'width': 2}: 'width' is not an axis of the sweep"),
                             ({"kind": "summary", "color": "width"}, "color='width': expected an axis of the sweep"),
                             ({"kind": "summary", "x": "c"}, "x='c' is the init's c of a depth-2 network"),
                             ({"kind": "heatmap", "color": "nothing"}, "needs targets")):
        with pytest.raises(PlotError, match=re.escape(message)):
            api.plot_run(tmp_path, **options)
    paths = api.plot_run(tmp_path, kind="heatmap", color="population_error")
    assert paths[0].name == "heatmap-sigma0-shape-population_error.png"
    assert api.plot_run(tmp_path)[0].name == "summary-population_error-sigma0.png"    # no targets: its own figure


# ----------------------------------------------------------------------------- the one-neuron network


def neuron_sweep(folder, axes: dict, steps: int, lr: float, task: dict | None = None, stop: dict | None = None):
    sweep = spec.resolve({"name": "neuron", "model": "neuron", "steps": steps, "dtype": "float64", "compare": True,
                          "task": (task or TASK | {"noise": 0.0}), "axes": axes | {"lr": [lr]}, "record": {"points": 5},
                          "stop": stop or {"rel_loss": 0.0}})
    api.run(sweep, out=folder, progress_bar=False)
    return sweep, api.load(folder)


def test_neuron_gd_equals_the_numpy_reference(tmp_path):
    """f(x) = sum_j a_j <w_j, x> from w_j = |w0| u_j, a_j = |a0| (|a0| |w0| = sigma0, shape s =
    (|a0| - |w0|)/(|a0| + |w0|)), GD on 1/(2n)||X W^T a - y||^2. Expected: after 300 steps at lr 0.01
    the final predictor equals a NumPy float64 loop's on the drawn data and directions to 1e-10
    relative, for 1 and 3 neurons, sigma0 0.1 and 0.5, shapes -0.5, 0 and 0.9."""
    for width in (1, 3):
        sweep, runs = neuron_sweep(tmp_path / str(width), {"sigma0": [0.1, 0.5], "shape": [-0.5, 0.0, 0.9]}, 300, 0.01,
                                   task=TASK | {"width": width})
        data = drawn(sweep)
        x, y, n = data["x"], data["y"], len(data["y"])
        for run in runs.itertuples():
            rho = (1 - run.shape) / (1 + run.shape)
            w = math.sqrt(run.sigma0 * rho) * data["direction"]
            a = np.full(width, math.sqrt(run.sigma0 / rho))
            for _ in range(300):
                g = x.T @ (x @ (a @ w) - y) / n
                a, w = a - 0.01 * (w @ g), w - 0.01 * np.outer(a, g)
            np.testing.assert_allclose(run.beta, a @ w, rtol=1e-10, atol=1e-13)


def test_neuron_reaches_theorem_2s_interpolator(tmp_path):
    """Azulay's Theorem 2: gradient flow of one neuron reaches argmin Q (theory.neuron_q_minimizer)
    over the interpolators. Expected (d 12, n 5, no noise, lr 1e-3, until the loss is 1e-14): every
    run of sigma0 in {1e-4, 0.01, 0.1, 1} x s in {0, 0.5, 0.9} ends within 1e-3 of it (GD's gap,
    growing with the scale; measured 1.7e-7 to 1.9e-4), and the vanishing init (sigma0 1e-4) ends
    near the min-l2 interpolator ("anti-NTK": Q -> ||w~||^(3/2), whose minimizer is the min-l2 one),
    l1_l2_position above 0.98 (measured 0.988 to 0.997)."""
    _, runs = neuron_sweep(tmp_path, {"sigma0": [1e-4, 0.01, 0.1, 1.0], "shape": [0.0, 0.5, 0.9]}, 400_000, 1e-3,
                           stop={"rel_loss": 0.0, "loss": 1e-14})
    assert runs.converged.all()
    assert (runs.distance_q < 1e-3).all(), runs.distance_q.max()
    assert (runs[runs.sigma0 == 1e-4].l1_l2_position > 0.98).all()


def test_azulay_fig7_2_draws_the_neuron_q_contours(quick_reproduction):
    """Figure 7.2 is theory alone (its numbers: test_theory_shape.py). Expected: one PNG of six
    panels, and no run folder."""
    result = quick_reproduction(AZULAY_NAMES[2])
    assert [p.name for p in result.figures] == ["neuron-q-contours.png"]
    assert result.figures[0].stat().st_size > 50_000 and not (result.folder / "runs").exists()


def test_neurons_sharing_a_direction_are_one_neuron_of_scale_width_times_sigma0(tmp_path):
    """With one direction u for all h neurons, W = (|w0|/|a0|) a u^T, strictly balanced (W W^T = a a^T)
    at s = 0 (Azulay's Proposition 1), and the network is one neuron of scale h sigma0 and the same
    shape, so Theorem 2 applies with w~0 = h sigma0 u and delta = h 4 sigma0 s/(1 - s^2). Expected
    (3 neurons, d 12, n 5, no noise, lr 1e-3 to loss 1e-14; sigma0 0.01, 0.3 x s 0, 0.5): every run
    within 1e-3 of that interpolator (measured 4e-6 to 1.6e-4); with independent directions there is
    no closed form and distance_q is NaN."""
    _, runs = neuron_sweep(tmp_path / "shared", {"sigma0": [0.01, 0.3], "shape": [0.0, 0.5]}, 400_000, 1e-3,
                           task=TASK | {"noise": 0.0, "width": 3, "directions": "shared"},
                           stop={"rel_loss": 0.0, "loss": 1e-14})
    assert runs.converged.all() and (runs.distance_q < 1e-3).all(), runs.distance_q
    _, runs = neuron_sweep(tmp_path / "independent", {"sigma0": [0.3]}, 10, 1e-3, task=TASK | {"width": 3})
    assert runs.distance_q.isna().all() and runs.distance_l2.notna().all()


def test_gd_reaches_the_q_minimizer_across_the_scale_shape_grid(tmp_path):
    """Theorem 1 across a grid (float64, d 12, n 5, no noise, lr 5e-3 until the loss is 1e-13):
    sigma0 in {1e-3, 1e-2, 0.1, 1} x s in {0, 0.5, 0.9}, c from 0.002 to 19. Expected: every run
    converges and ends within GD_GAP_PER_LR lr = 1.25e-3 of argmin Q_c (measured 9e-6 to 3.5e-4)."""
    _, runs = run_sweep(tmp_path, TASK | {"noise": 0.0},
                        {"depth": [2], "sigma0": [1e-3, 1e-2, 0.1, 1.0], "shape": [0.0, 0.5, 0.9]}, 600_000, 5e-3,
                        stop={"rel_loss": 0.0, "loss": 1e-13})
    assert runs.converged.all()
    assert (runs.distance_q < GD_GAP_PER_LR * 5e-3).all(), runs.distance_q.max()
