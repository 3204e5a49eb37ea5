"""The `seed` axis: random data (datasets, measurements) drawn inside the compiled program, once
per value of the axis (engine.chunk_task, engine.draw_task).

(1) Trajectories that differ only in seed see different data, and so get different results;
    trajectories with the same seed see the same data whatever their depth and sigma0 (their
    step-0 loss is the loss of `draw_task`'s data), and a run repeated in the grid (an axis
    value given twice) gets the same result.
(2) A trajectory's result does not depend on which other seeds share its chunk, nor on how the
    chunk holds the data: a one-seed grid [s] (seed a constant of the chunk: the data drawn once,
    unbatched), the same seed inside a multi-seed grid whose chunks are whole seed cycles (the
    data drawn once per seed, `engine.rows_map`), and a chunk size that cuts the cycles (the data
    drawn per trajectory) give identical hits and values equal to VALUES_RTOL of their scale
    (float32: the programs may order a few roundings differently; see `assert_same_values`).
(3) Matrix sensing with measurements gives different singular-value trajectories per seed.

Small float32 sweeps, each run once per module.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from dlsweep import api, engine, grid, spec, store
from gissin_reference import Result

ROOT_SEED = 5
SEEDS = [0, 1, 2]
STEPS = 200
# Two float32 programs that order a few roundings differently start ~1 ulp (eps = 1.2e-7) of the
# trajectory's scale apart, and each GD step can add as much again: at most STEPS eps = 2.4e-5 of
# the scale (measured up to 3.3e-7).
VALUES_RTOL = STEPS * float(np.finfo(np.float32).eps)
# One float32 evaluation of the step-0 loss or sigma against float64: a sum of n products or
# squares is within n u of its value (u = 2^-24; n <= 20 here, the length-5 dot products squared
# and averaged over 12 examples), so 20 u = 1.2e-6 (measured up to 1.6e-7).
STEP0_RTOL = 20 * 2.0**-24


def resolve(name, model, task, axes, steps=STEPS):
    """The sweep of these axes. A spec refuses an axis value given twice, so a repeated value (a
    repeated run, below) is put back into the resolved sweep's axes: the engine must still give
    both runs the same result."""
    unique = {axis: list(dict.fromkeys(values)) for axis, values in axes.items()}
    raw = {"name": name, "model": model, "steps": steps, "dtype": "float32", "seed": ROOT_SEED, "task": task,
           "axes": unique, "record": {"points": 15}, "stop": {"rel_loss": 0.0}}
    sweep = spec.resolve(raw)
    repeated = {axis: np.asarray(values, sweep.axes[axis].dtype) for axis, values in axes.items() if values != unique[axis]}
    return dataclasses.replace(sweep, axes={axis: repeated.get(axis, values) for axis, values in sweep.axes.items()})


# A: the signed diagonal network with a dataset per seed; sigma0 0.05 is listed twice (put back
# after validation, which refuses it in a spec), so every
# (depth, seed) has a repeated run (same hyperparameters, another run_id). Its init is
# deterministic (w+-(0) = sigma0^(1/N)), so the repeated runs must agree.
DIAGONAL_TASK = {"w_star": [2.0, -1.0, 0.5], "d": 5, "examples": 12, "loss": "squared"}
DIAGONAL_AXES = {"depth": [1, 2], "sigma0": [0.05, 0.05, 0.01], "lr": [0.05], "seed": SEEDS}
# B: deep matrix sensing, identity init (deterministic), m = 6 < d^2 measurements per seed.
SENSING_TASK = {"sigma_star": [3.0, 2.0, 1.0], "d": 3, "measurements": 6, "init": "identity"}
SENSING_AXES = {"depth": [1, 2], "sigma0": [0.01], "lr": [0.05], "seed": SEEDS}
# C: the quadratic network (random init from the run's key) with a dataset per seed.
QUADRATIC_TASK = {"sigma_star": [3.0, 2.0], "d": 3, "examples": 20, "loss": "squared"}
QUADRATIC_AXES = {"sigma0": [0.01, 0.1], "lr": [0.02], "seed": SEEDS}

SWEEPS = {     # name: (model, task, axes, chunk_size)
    "diagonal": ("diagonal", DIAGONAL_TASK, DIAGONAL_AXES, None),
    "diagonal_seed1": ("diagonal", DIAGONAL_TASK, DIAGONAL_AXES | {"seed": [1]}, None),
    "diagonal_chunk4": ("diagonal", DIAGONAL_TASK, DIAGONAL_AXES, 4),
    "sensing": ("matrix_sensing", SENSING_TASK, SENSING_AXES, None),
    "sensing_seed2": ("matrix_sensing", SENSING_TASK, SENSING_AXES | {"seed": [2]}, None),
    "quadratic": ("quadratic", QUADRATIC_TASK, QUADRATIC_AXES, None),
    "quadratic_chunk2": ("quadratic", QUADRATIC_TASK, QUADRATIC_AXES, 2),
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """results(name) -> Result of SWEEPS[name] (a sweep and its chunk_size), run once per module."""
    done = {}

    def get(name):
        if name not in done:
            model, task, axes, chunk_size = SWEEPS[name]
            sweep = resolve(name, model, task, axes)
            folder = tmp_path_factory.mktemp(name)
            report = api.run(sweep, out=folder, chunk_size=chunk_size, progress_bar=False)
            program, _, task = api.compile_inputs(sweep)
            steps = engine.record_steps(sweep.record.schedule, sweep.record.points, sweep.steps)
            runs = store.load(folder)
            assert not runs["diverged"].any() and (runs["steps_run"] == sweep.steps).all()
            done[name] = Result(sweep, runs, store.load_trajectories(folder), steps, program, task, report.chunks_run)
        return done[name]

    return get


def max_rel(a, b):
    """The largest elementwise relative difference."""
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), 1e-30)))


def assert_same_values(got, want, label=""):
    """(B, R, 1 + k) loss and sigma of the same trajectories computed by two float32 programs
    that may order some roundings differently (a dot product over a batched vs a shared dataset,
    another batch size). Such differences start at ~1 ulp of the largest entries (eps = 1.2e-7)
    and GD carries them along, so they are ~1e-7 of the trajectory's scale, not of each value: an
    unlearned sigma_i or a converged loss far below that scale shows them as a large relative
    difference (up to 2e-4 measured at a loss of 1e-5 reached from 2). The test is therefore
    normwise: |got - want| <= VALUES_RTOL * (the largest |want| of that quantity over the
    trajectory) at every recorded step (loss and sigma scaled separately). Returns the largest
    such normwise difference and the largest elementwise relative one, for the report."""
    assert got.shape == want.shape and not np.isnan(got).any() and not np.isnan(want).any()
    loss_scale = np.max(np.abs(want[:, :, :1]), axis=1, keepdims=True)
    sigma_scale = np.max(np.abs(want[:, :, 1:]), axis=(1, 2), keepdims=True)
    scale = np.concatenate([np.broadcast_to(loss_scale, want[:, :, :1].shape),
                            np.broadcast_to(sigma_scale, want[:, :, 1:].shape)], axis=2)
    normwise = np.abs(got - want) / scale
    worst = float(normwise.max())
    assert worst <= VALUES_RTOL, f"{label}: normwise difference {worst:.2e} > {VALUES_RTOL:g}"
    return worst, max_rel(got, want)


# ----------------------------------------------------------------------------- (1) data per seed


def test_draw_task_gives_fresh_data_per_seed(results):
    """engine.draw_task (what the trajectories of a seed see): the datasets of seeds 0, 1, 2 are
    pairwise different (every x entry differs), the shared arrays (w*) are the same for all (the
    squared loss takes y = <w*, x> from them, so no labels are drawn), and a second call returns
    the same arrays (the draw is a function of (root seed, seed) only)."""
    result = results("diagonal")
    drawn = {s: result.data(s) for s in SEEDS}
    w_star = np.array(DIAGONAL_TASK["w_star"] + [0.0] * (DIAGONAL_TASK["d"] - len(DIAGONAL_TASK["w_star"])))
    for s in SEEDS:
        assert drawn[s]["x"].shape == (DIAGONAL_TASK["examples"], DIAGONAL_TASK["d"])
        np.testing.assert_array_equal(drawn[s]["w_star"], drawn[0]["w_star"])
        np.testing.assert_allclose(drawn[s]["w_star"], w_star, rtol=1e-7)
        assert "y" not in drawn[s]
        again = result.data(s)
        for name in drawn[s]:
            np.testing.assert_array_equal(again[name], drawn[s][name])
    for a, b in [(0, 1), (0, 2), (1, 2)]:
        assert np.all(drawn[a]["x"] != drawn[b]["x"]), f"seeds {a} and {b} share data"


def test_same_seed_same_data_whatever_depth_and_sigma0(results):
    """Every trajectory of the diagonal sweep (N in {1, 2}, sigma0 in {0.05, 0.05, 0.01}, seeds
    0, 1, 2) starts at sigma = 0, so its step-0 loss is 1/(2N^2) mean_j y_j^2, y_j = <w*, x_j>,
    over the data it sees. Expected: that value computed from draw_task(seed) for the run's own
    seed, to STEP0_RTOL (one float32 evaluation), for every run whatever its depth and sigma0; the three seeds' values
    differ by > 1% (so a trajectory seeing another seed's data would be caught)."""
    result = results("diagonal")
    w_star = np.array(DIAGONAL_TASK["w_star"] + [0.0] * (DIAGONAL_TASK["d"] - len(DIAGONAL_TASK["w_star"])))
    mean_y2 = {s: float(np.mean((result.data(s)["x"].astype(np.float64) @ w_star) ** 2)) for s in SEEDS}
    assert min(abs(mean_y2[a] / mean_y2[b] - 1) for a in SEEDS for b in SEEDS if a != b) > 1e-2
    loss0 = result.values()[:, 0, 0]
    expected = np.array([mean_y2[run.seed] / (2.0 * run.depth**2) for run in result.runs.itertuples()])
    np.testing.assert_allclose(loss0, expected, rtol=STEP0_RTOL)


def test_repeated_run_same_result_other_seed_different(results):
    """The diagonal sweep lists sigma0 = 0.05 twice: each (depth, seed) has two runs with the same
    hyperparameters and different run_ids. Expected: they have identical hits and loss / sigma
    equal to VALUES_RTOL (normwise, `assert_same_values`) at every recorded step (same data,
    deterministic init); runs that differ only in seed differ by > 1% somewhere (different data
    -> different results)."""
    result = results("diagonal")
    runs, values, hits = result.runs, result.values(), result.hits()
    assert hits.shape[1] == 9 and (hits > 0).any()
    repeated = runs[np.isclose(runs["sigma0"], 0.05)].groupby(["depth", "seed"]).groups
    assert len(repeated) == 2 * len(SEEDS)
    exact = True
    for (depth, seed), rows in repeated.items():
        first, second = rows
        assert runs.loc[first, "run_id"] != runs.loc[second, "run_id"]
        np.testing.assert_array_equal(hits[first], hits[second])
        worst = assert_same_values(values[[second]], values[[first]], f"N={depth} seed={seed}")
        exact = exact and np.array_equal(values[second], values[first])
    print(f"repeated runs: max normwise / elementwise rel diff {worst[0]:.1e} / {worst[1]:.1e}; bitwise equal: {exact}")
    by_seed = runs.groupby(["depth", "sigma0"]).groups
    for (depth, sigma0), rows in by_seed.items():
        seeds = runs.loc[rows, "seed"].to_numpy()
        for a in rows:
            for b in rows:
                if runs.loc[a, "seed"] < runs.loc[b, "seed"]:
                    assert max_rel(values[a], values[b]) > 1e-2, f"N={depth} sigma0={sigma0}: seeds {seeds} agree"


# ----------------------------------------------------------------------------- (2) chunk independence


def aligned(multi: Result, single: Result, seed: int):
    """The rows of the multi-seed grid with `seed`, in the order of the one-seed grid's rows
    (both row-major with the seed axis last, so the run_id order agrees), checked by their
    hyperparameters."""
    rows = np.flatnonzero(multi.runs["seed"].to_numpy() == seed)
    assert len(rows) == len(single.runs)
    names = [c for c in single.sweep.axes]
    np.testing.assert_array_equal(multi.runs.iloc[rows][names].to_numpy(), single.runs[names].to_numpy())
    return rows


@pytest.mark.parametrize("multi_name, single_name, seed", [("diagonal", "diagonal_seed1", 1),
                                                           ("sensing", "sensing_seed2", 2)])
def test_one_seed_grid_equals_multi_seed_grid(results, multi_name, single_name, seed):
    """A grid whose seed axis is [s] (seed constant in the chunk: the unbatched path, the data
    drawn once for the chunk) against seed s inside the grid with seeds [0, 1, 2] (the data drawn
    per trajectory under vmap), for the diagonal network (12 examples) and for matrix sensing
    (6 measurements); both inits are deterministic, so run_ids do not matter. Expected: identical
    hits, and loss / sigma equal to VALUES_RTOL (normwise, `assert_same_values`) at every recorded
    step."""
    multi, single = results(multi_name), results(single_name)
    rows = aligned(multi, single, seed)
    assert single.sweep.axes["seed"].tolist() == [seed]
    # the one-seed grid passes seed to the program as a chunk constant (the unbatched draw), the
    # multi-seed grid per trajectory
    assert "seed" in grid.constant_axes(single.sweep.axes, False)
    assert "seed" not in grid.constant_axes(multi.sweep.axes, False)
    np.testing.assert_array_equal(multi.hits()[rows], single.hits())
    got, want = single.values(), multi.values()[rows]
    normwise, elementwise = assert_same_values(got, want, f"{single_name} vs {multi_name}")
    print(f"{single_name} vs {multi_name}: max normwise rel diff {normwise:.1e}, elementwise {elementwise:.1e}")


@pytest.mark.parametrize("whole, cut, chunks", [("quadratic", "quadratic_chunk2", (1, 3)),
                                                 ("diagonal", "diagonal_chunk4", (1, 5))])
def test_chunk_size_does_not_change_results(results, whole, cut, chunks):
    """The quadratic network (random init from fold_in(key(root seed), run_id), 20 examples per
    seed, seeds 0, 1, 2, sigma0 in {0.01, 0.1}) and the diagonal network (12 examples per seed),
    each with the default chunk size (one chunk of whole seed cycles: the data drawn once per
    seed) and a chunk size that cuts the cycles (2 or 4: the same layout, with filler rows). Expected:
    the same runs (run_id and hyperparameters), identical hits, loss / sigma equal to VALUES_RTOL
    (normwise, `assert_same_values`) at every recorded step."""
    large, small = results(whole), results(cut)
    assert (large.chunks, small.chunks) == chunks
    axes = large.sweep.axes
    assert engine.seed_slots(large.program.model, axes) == tuple(SEEDS)      # the layout, whatever the chunk size
    names = ["run_id", *axes]
    np.testing.assert_array_equal(large.runs[names].to_numpy(), small.runs[names].to_numpy())
    assert (large.hits() > 0).any()
    np.testing.assert_array_equal(large.hits(), small.hits())
    normwise, elementwise = assert_same_values(small.values(), large.values(), f"{cut} vs {whole}")
    print(f"{cut} vs {whole}: max normwise rel diff {normwise:.1e}, elementwise {elementwise:.1e}")
    # the seed matters here too (random init or data): seeds 0 and 1 of the first cell differ
    values = large.values()
    assert max_rel(values[0], values[1]) > 1e-2


# ----------------------------------------------------------------------------- (3) matrix sensing


def test_matrix_sensing_seeds_give_different_singular_values(results):
    """Matrix sensing, identity init W_n(0) = sigma0^(1/N) I, 6 Gaussian measurements per seed,
    N in {1, 2}, seeds 0, 1, 2. Expected: at step 0 every seed has sigma_i = sigma0 (the init
    does not depend on the seed, to STEP0_RTOL); the measurements of the seeds differ; the step-0
    loss is 1/(2N) (1/m) sum_j <A_j, W(0) - W*>^2 with the run's own seed's A_j from draw_task
    (1e-5 relative: a float32 quadratic form over d^2 = 9 entries, within (d^2 + d^2) u = 1.1e-6;
    measured 9e-8); afterwards the singular-value trajectories of any two seeds differ by > 1%
    relative at some recorded step, for each depth."""
    result = results("sensing")
    runs, values = result.runs, result.values()
    d = SENSING_TASK["d"]
    np.testing.assert_allclose(values[:, 0, 1:], np.float32(0.01), rtol=STEP0_RTOL)
    drawn = {s: result.data(s) for s in SEEDS}
    (name,) = [n for n in drawn[0] if n not in result.task]
    assert all(not np.allclose(drawn[a][name], drawn[b][name]) for a, b in [(0, 1), (0, 2), (1, 2)])
    w_star = np.diag(SENSING_TASK["sigma_star"]).astype(np.float64)
    for row, run in enumerate(runs.itertuples()):
        a = drawn[run.seed][name].astype(np.float64)
        if name == "gram":                     # (1/m) sum_j vec(A_j) vec(A_j)^T
            residual = (np.eye(d) * run.sigma0 - w_star).reshape(-1)
            expected = residual @ a @ residual / (2.0 * run.depth)
        else:                                  # rows vec(A_j), row-major
            inner = a @ (np.eye(d) * run.sigma0 - w_star).reshape(-1)
            expected = np.mean(inner**2) / (2.0 * run.depth)
        np.testing.assert_allclose(values[row, 0, 0], expected, rtol=1e-5, err_msg=str(run))
    for depth in SENSING_AXES["depth"]:
        rows = np.flatnonzero(runs["depth"].to_numpy() == depth)
        assert len(rows) == len(SEEDS)
        for i, a in enumerate(rows):
            for b in rows[i + 1:]:
                assert max_rel(values[a, :, 1:], values[b, :, 1:]) > 1e-2, f"N={depth}: runs {a}, {b} agree"
