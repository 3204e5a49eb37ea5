"""linear_net's edges: a grid of depth 1 alone, the autoencoder's targets, the errors of its
[task] keys and figure options, the per-PC spread over seeds (`api.pc_spread`, `dlsweep pcs`), and
its singular values observed every few steps (`drift_from`) where the work pays for it."""

from __future__ import annotations

import dataclasses
import re

import jax
import numpy as np
import pandas as pd
import pytest

from dlsweep import api, cli, engine, spec, store
from dlsweep.analysis import theory
from dlsweep.plot import PlotError


@pytest.fixture(scope="module")
def depth_one(tmp_path_factory):
    """The run folder of a grid whose only depth is 1, aligned init, float64, 50 steps."""
    sweep = spec.resolve({"name": "d1", "model": "linear_net", "steps": 50, "dtype": "float64",
                          "task": {"data": "spectrum", "eigenvalues": [2.0, 1.0], "w_true": [1.0, 0.5], "init": "aligned"},
                          "axes": {"depth": [1], "sigma0": [0.01], "lr": [0.1]}, "record": {"points": 10},
                          "stop": {"rel_loss": 0.0}})
    folder = tmp_path_factory.mktemp("linear-net") / "d1"
    api.run(sweep, out=folder, progress_bar=False)
    return folder


def test_depth_one_alone_is_the_linear_model(depth_one):
    """A grid whose only depth is 1 (no layers to pad), aligned init: GD on the linear model,
    W_k = (I - lr Sigma_x)^k (W0 - W_opt) + W_opt (Gidel's eq. 21, theory.linear_model_gd). Expected:
    the recorded singular values equal those of the closed form to 1e-10 relative (float64), with
    Sigma_x = diag(2, 1), Sigma_xy = Sigma_x diag(1, 0.5), W0 = 0.01 I, lr 0.1."""
    traj = api.load_trajectories(depth_one)
    sigma_x, sigma_xy = np.diag([2.0, 1.0]), np.diag([2.0, 0.5])
    path = theory.linear_model_gd(traj.step.to_numpy(), 0.01 * np.eye(2), sigma_x, sigma_xy, 0.1)
    expected = np.linalg.svd(path, compute_uv=False)
    np.testing.assert_allclose(traj[["sigma_0", "sigma_1"]].to_numpy(), expected, rtol=1e-10)


def test_autoencoder_targets_are_the_latent_ones():
    """The autoencoder's optimum has r = len(eigenvalues) singular values 1 (W_opt = I, or the
    projector on B's span once the noise's variances fall below the support cut): targets for
    top <= r, none above (levels must then be [])."""
    def task(top):
        return spec.resolve({"name": "ae", "model": "linear_net", "steps": 10,
                             "task": {"data": "autoencoder", "d": 6, "eigenvalues": [4.0, 2.0], "top": top},
                             "axes": {"depth": [2], "sigma0": [0.01], "lr": [0.01]},
                             "record": {"levels": [0.5] if top <= 2 else []}}).task
    assert task(2)["sigma_star"] == (1.0, 1.0)
    assert "sigma_star" not in task(3)


def test_float32_loss_near_the_optimum_keeps_its_digits():
    """Population data with a large target, W* = diag(100, 50, 20), lambda = (1, 0.5, 0.25), noise
    0.1, float32: at W = W* + Delta (|Delta_ij| <= 0.1) the loss 1/(2n)||Y||^2 - ... form would cancel
    1/(2n)||Y||^2 = 1/2 sum lambda w*^2 + p noise^2/2 = 5,112.5, whose float32 spacing (4.9e-4) is 4%
    of the excess (0.014). Expected: the closed form l(W) = 1/2 sum_ij lambda_i (W - W*)_ij^2 + p noise^2/2
    in float64 at the float32 W, for the loss and (without p noise^2/2) for `excess_loss`. Tolerance
    1e-3 relative: W_opt's float32 rounding (a few spacings of 100, 3e-5) in D = W - W_opt, against
    Delta ~ 0.05, moves the quadratic by ~1e-3 at most."""
    sweep = spec.resolve({"name": "big", "model": "linear_net", "steps": 1, "dtype": "float32",
                          "task": {"data": "spectrum", "eigenvalues": [1.0, 0.5, 0.25], "w_true": [100.0, 50.0, 20.0],
                                   "noise": 0.1, "init": "aligned"},
                          "axes": {"depth": [1], "sigma0": [0.01], "lr": [0.1]}, "record": {"levels": []}})
    program, _, task = api.compile_inputs(sweep)
    drawn = engine.draw_task(program, task, seed=0, root_seed=sweep.seed)
    delta = 0.1 * np.sin(np.arange(9.0) + 1.0).reshape(3, 3)
    w = (np.diag([100.0, 50.0, 20.0]) + delta).astype(np.float32)
    hp = {"depth": np.int32(1), "sigma0": np.float32(0.01), "lr": np.float32(0.1)}
    params = {"single": w}
    excess = 0.5 * np.sum(np.array([1.0, 0.5, 0.25])[:, None] * (w.astype(np.float64) - np.diag([100.0, 50.0, 20.0])) ** 2)
    loss = float(program.model.loss(params, hp, drawn))
    observed = float(program.model.observe(params, hp, drawn)["excess_loss"])
    assert loss == pytest.approx(excess + 3 * 0.1**2 / 2, rel=1e-3)
    assert observed == pytest.approx(excess, rel=1e-3)


@pytest.mark.parametrize("task, key, message", [
    ({"data": "images"}, "task.data", "spectrum"),
    ({"data": "spectrum"}, "task.eigenvalues", "missing"),
    ({"eigenvalues": [1.0, -1.0]}, "task.eigenvalues", "> 0"),
    ({"eigenvalues": [1.0], "power_law": 1.0, "d": 3}, "task.power_law", "not both"),
    ({"power_law": 1.0}, "task.d", "power_law spectrum needs the dimension d"),
    ({"eigenvalues": [1.0, 0.5], "d": 3}, "task.d", "len(eigenvalues) = 2"),
    ({"eigenvalues": [1.0], "w_true": [1.0, 2.0]}, "task.w_true", "at most d = 1"),
    ({"eigenvalues": [1.0], "noise": -0.1}, "task.noise", ">= 0"),
    ({"eigenvalues": [1.0], "shuffle": True}, "task.shuffle", "examples >= 1"),
    ({"eigenvalues": [1.0], "init": "orthogonal"}, "task.init", "gaussian"),
    ({"eigenvalues": [1.0, 1.0], "top": 3}, "task.top", "min(d, p) = 2"),
    ({"data": "digits", "d": 32}, "task.d", "the digits' pixels = 64"),
    ({"data": "digits", "examples": 5000}, "task.examples", "at most the 1797 digits"),
    ({"data": "digits", "noise": 0.1}, "task.noise", "unknown key"),
    ({"data": "autoencoder", "w_true": [1.0]}, "task.w_true", "unknown key"),
])
def test_task_errors_name_the_key(task, key, message):
    """Each bad [task] of linear_net is a SpecError naming the key and what was expected."""
    with pytest.raises(spec.SpecError) as err:
        spec.resolve({"name": "bad", "model": "linear_net", "steps": 10, "task": {"data": "spectrum"} | task,
                      "axes": {"depth": [2], "sigma0": [0.01], "lr": [0.01]}})
    assert key in str(err.value) and message in str(err.value), str(err.value)


@pytest.mark.parametrize("kind, options, message", [
    ("pcs", {"x": "width"}, "x='width': expected an axis of the sweep"),
    ("observables", {"x": "width"}, "x='width': expected an axis of the sweep"),
    ("observables", {"y": "trace"}, "no recorded trace"),
])
def test_figure_options_name_what_was_wrong(depth_one, kind, options, message):
    """A figure asked of a missing axis or an unrecorded column is a PlotError that names it."""
    with pytest.raises(PlotError, match=re.escape(message)):
        api.plot_run(depth_one, kind=kind, **options)


def test_pc_spread_contracts_by_each_directions_factor(tmp_path):
    """The spread over seeds per principal direction (`api.pc_spread`, Hacohen's std over networks).
    At depth 1, GD moves W - W_opt by (I - lr Sigma_x) each step (Gidel's eq. 21), so the distance
    along u_j of every seed is |1 - lr lambda_j|^s times its distance at step 0, and so are the mean
    and standard deviation over seeds. Expected (Sigma_x = diag(1, 0.5, 0.1), Gaussian init of
    scale 0.5, lr 0.1, 5 seeds, float64): mean and std at each recorded step equal 0.9^s, 0.95^s and
    0.99^s times those at step 0 to 1e-9 relative + 1e-15 (the rounding of W - W_opt, ~ eps ||W_opt||,
    once direction 1 has shrunk to 1e-9); at step 0 they equal NumPy's mean and std
    (ddof 1) of the recorded pc_distance_j; seeds = 5."""
    sweep = spec.resolve({"name": "spread", "model": "linear_net", "steps": 200, "dtype": "float64",
                          "task": {"data": "spectrum", "eigenvalues": [1.0, 0.5, 0.1], "w_true": [1.0, 0.5]},
                          "axes": {"depth": [1], "sigma0": [0.5], "lr": [0.1], "seed": [0, 1, 2, 3, 4]},
                          "record": {"points": 12}, "stop": {"rel_loss": 0.0}})
    api.run(sweep, out=tmp_path, progress_bar=False)
    spread = api.pc_spread(tmp_path)
    assert (spread.seeds == 5).all() and sorted(spread.j.unique()) == [0, 1, 2]
    start = spread[spread.step == 0].set_index("j")
    first = api.load_trajectories(tmp_path).query("step == 0")
    for j in range(3):
        assert start.loc[j, "mean"] == pytest.approx(first[f"pc_distance_{j}"].mean(), rel=1e-12)
        assert start.loc[j, "std"] == pytest.approx(first[f"pc_distance_{j}"].std(ddof=1), rel=1e-12)
    factor = spread.j.map({0: 0.9, 1: 0.95, 2: 0.99}) ** spread.step
    for column in ("mean", "std"):
        np.testing.assert_allclose(spread[column], factor * spread.j.map(start[column]), rtol=1e-9, atol=1e-15)


def test_pcs_command_prints_and_writes_the_tables(depth_one, tmp_path, capsys):
    """`dlsweep pcs DIR` prints the spread at the last step every seed recorded and writes the whole
    table with -o (the same rows as api.pc_spread); --rates prints the per-PC rates beside eq. 10's;
    any other file ending is an error that names -o."""
    out = tmp_path / "spread.csv"
    assert cli.main(["pcs", str(depth_one), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "mean" in printed and f"written to {out}" in printed
    expected = api.pc_spread(depth_one)
    written = pd.read_csv(out)
    assert len(written) == len(expected) and list(written.columns) == list(expected.columns)
    np.testing.assert_allclose(written["mean"], expected["mean"], rtol=1e-12)
    assert cli.main(["pcs", str(depth_one), "--rates"]) == 0
    assert "predicted" in capsys.readouterr().out
    assert cli.main(["pcs", str(depth_one), "-o", str(tmp_path / "spread.txt")]) == 2
    assert "-o " in capsys.readouterr().err



def test_glorot_uniform_init_bounds_and_variances():
    """init = "glorot_uniform" at sigma0 = 1, depth 3, d = p = 20, h = 300: every layer's entries lie
    in [-a, a], a = sqrt(6 / (fan-in + fan-out)) (Glorot & Bengio's uniform init), with variance
    a^2 / 3 within 5 standard errors (the variance estimate of N uniform entries has relative
    standard error sqrt(4/5 - 4/9) / (1/3) / sqrt(N) = 0.89 / sqrt(N)) and mean within 5 standard
    errors of 0; the 1 x 300 x 300 hidden layer is the one in use at depth 3."""
    from dlsweep import sweeping

    sweep = spec.resolve({"name": "g", "model": "linear_net", "steps": 10,
                          "task": {"data": "spectrum", "eigenvalues": [1.0] * 20, "width": 300, "init": "glorot_uniform"},
                          "axes": {"depth": [3], "sigma0": [1.0], "lr": [0.01]}})
    program, _, task = sweeping.compile_inputs(sweep)
    full = {k: np.asarray(v) for k, v in engine.draw_task(program, task, 0, 0).items()}
    hp = {"depth": np.int32(3), "sigma0": np.float32(1.0), "lr": np.float32(0.01)}
    import jax

    params = program.model.init(jax.random.key(7), hp, full)
    fans = {"first": (20, 300), "hidden": (300, 300), "last": (300, 20)}
    for name, (fan_in, fan_out) in fans.items():
        values = np.asarray(params[name], np.float64).ravel()
        bound = np.sqrt(6.0 / (fan_in + fan_out))
        assert np.abs(values).max() <= bound * (1 + 1e-6), name        # float32 rounding of the scaled draw
        variance = bound**2 / 3
        assert abs(np.mean(values**2) / variance - 1) < 5 * 0.89 / np.sqrt(values.size), name
        assert abs(np.mean(values)) < 5 * np.sqrt(variance / values.size), name


def _phase_sweep(init: str, dtype: str = "float32") -> spec.Sweep:
    """A small linear-net-phase: d = p = 3, width 8, depths 1 to 3 (depth 1 is the linear model's
    own matrix), sigma0 over four decades, hitting levels at 5%, 50% and 95% of each target,
    converging (rel_loss 1e-4)."""
    return spec.resolve({"name": "phase", "model": "linear_net", "steps": 6000, "dtype": dtype,
                         "task": {"data": "spectrum", "eigenvalues": [1.0, 1.0, 1.0], "w_true": [1.0, 0.5, 0.25],
                                  "width": 8, "init": init},
                         "axes": {"depth": [1, 2, 3], "sigma0": {"logspace": [-5, -1], "num": 4}, "lr": [0.1]},
                         "record": {"points": 20, "levels": [0.05, 0.5, 0.95]}, "stop": {"rel_loss": 1e-4}})


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="one by one is the CPU's layout")
@pytest.mark.parametrize("init, dtype", [("aligned", "float32"), ("gaussian", "float32"), ("gaussian", "float64")])
def test_observing_every_few_steps_keeps_exact_hits(tmp_path, monkeypatch, init, dtype):
    """With more work than `engine.SMALL_WORK_FLOPS` a one-by-one linear network is `anchored`: its
    SVD is taken every `engine.ANCHOR_EVERY` steps and sigma bounded in between by `drift_from`
    (Weyl), a group that may hold a first hit replayed step by step. Against the same sweep
    observed at every step (the model without `drift_from`), in float32 and float64, depths 1-3:
    identical first-hitting steps and stop steps (the guarantee), and the same GD path. The
    recorded singular values were equal bit for bit on an AVX-512 Xeon (the two programs
    compute the same update); the tolerance, 1e-4 relative in float32 and 1e-12 in float64, is
    room for a CPU where they fuse the update differently (one rounding a step, 6e-8 or 1e-16
    relative, over the runs' few thousand steps), far below the 5% to 95% gaps between levels."""
    from dlsweep.models import linear_net

    monkeypatch.setattr(engine, "SMALL_WORK_FLOPS", 0)
    sweep = _phase_sweep(init, dtype)
    program = api.compile_inputs(sweep)[0]
    assert program.sequential and engine.anchored(program)
    runs, traj = {}, {}
    for name in ("anchored", "every_step"):
        if name == "every_step":
            monkeypatch.delattr(linear_net.LinearNet, "drift_from")
            assert not engine.anchored(api.compile_inputs(sweep)[0])
        folder = api.run(sweep, out=tmp_path / name, progress_bar=False).folder
        runs[name], traj[name] = api.load(folder), api.load_trajectories(folder)
    hits = [c for c in runs["anchored"].columns if c.startswith("hit_")]
    assert (runs["anchored"][hits] >= 0).to_numpy().mean() > 0.5          # levels are reached: the check bites
    assert runs["anchored"][hits].equals(runs["every_step"][hits])
    assert runs["anchored"]["steps_run"].equals(runs["every_step"]["steps_run"])
    np.testing.assert_allclose(traj["anchored"].filter(like="sigma_").to_numpy(),
                               traj["every_step"].filter(like="sigma_").to_numpy(),
                               rtol=1e-4 if dtype == "float32" else 1e-12)
    (record,) = store.chunk_records(tmp_path / "anchored").values()
    assert record["executed_traj_steps"] > runs["anchored"]["steps_run"].sum()      # some groups were replayed


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="one by one is the CPU's layout")
def test_little_work_observes_every_step(monkeypatch):
    """One by one, a sweep of less work than `engine.SMALL_WORK_FLOPS` is not `anchored` (its
    replay's second copy of the step costs more compile than the SVDs it saves), while the same
    sweep with more work is; a batched program of a `drift_from` model stays anchored whatever its
    work (matrix sensing), and one without levels (nothing to bound) runs one by one like any
    model's sweep of little work."""
    sweep = _phase_sweep("aligned")
    program, flat, task = api.compile_inputs(sweep)
    work = flat.size * sweep.steps * program.step_flops
    monkeypatch.setattr(engine, "SMALL_WORK_FLOPS", 1.01 * work / engine.CONVERGING_WORK_FACTOR)
    program = api.compile_inputs(sweep)[0]
    assert program.sequential and not engine.anchored(program)
    monkeypatch.setattr(engine, "SMALL_WORK_FLOPS", 0.99 * work / engine.CONVERGING_WORK_FACTOR)
    assert engine.anchored(api.compile_inputs(sweep)[0])
    sensing = spec.resolve({"name": "ms", "model": "matrix_sensing", "steps": 100,
                            "task": {"sigma_star": [2.0, 1.0], "d": 3},
                            "axes": {"depth": [2], "sigma0": [0.01, 0.1], "lr": [0.01]}})
    program = api.compile_inputs(sensing)[0]
    assert not program.sequential and engine.anchored(program)
    without_levels = dataclasses.replace(sensing, record=dataclasses.replace(sensing.record, levels=()))
    assert api.compile_inputs(without_levels)[0].sequential      # little work and no peak to bound: one by one
