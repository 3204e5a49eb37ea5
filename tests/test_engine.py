"""Engine properties that hold whatever the model: batching, chunking and early stopping never
change a trajectory's result; the record schedule is what the spec asks for."""

import dataclasses
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import marked_slow
from dlsweep import api, engine, spec, store, sweeping
from dlsweep.analysis import theory
from dlsweep.models.toy import integer_power


@pytest.fixture(autouse=True)
def batched_layout(monkeypatch):
    """These tests are of the batched layout (lanes, fillers, replays, refilled slots): their
    sweeps, small, would otherwise run one by one on CPU (`engine.SMALL_WORK_FLOPS`); the tests of
    the one-by-one layout choose it by name."""
    monkeypatch.setattr(engine, "SMALL_WORK_FLOPS", 0.0)


def toy_sweep(**overrides):
    raw = {"name": "t", "model": "toy", "steps": 1500, "dtype": "float32",
           "task": {"sigma_star": [12.0, 6.0, 4.0, 3.0]},
           "axes": {"depth": [1, 2, 3, 6], "sigma0": {"logspace": [-4, -0.5], "num": 9}, "lr": [1e-3, 4e-3]},
           "record": {"points": 40}}
    raw.update(overrides)
    return spec.resolve(raw)


def frames(folder):
    return store.load(folder), store.load_trajectories(folder)


@pytest.mark.parametrize("chunk_size", [8, 24, 1000])
def test_results_do_not_depend_on_chunk_size(tmp_path, chunk_size):
    """Every trajectory is computed alone (vmap), so cutting the grid differently gives the
    same bits; the padded last chunk's extra rows are dropped."""
    sweep = toy_sweep()
    api.run(sweep, out=tmp_path / "one", chunk_size=72, progress_bar=False)
    api.run(sweep, out=tmp_path / "other", chunk_size=chunk_size, progress_bar=False)
    for a, b in zip(frames(tmp_path / "one"), frames(tmp_path / "other")):
        assert len(a) > 0
        assert a.equals(b)


# Sweeps whose trajectories XLA once rounded differently by the chunk size (a trajectory in the
# scalar tail of a vectorized loop, a per-seed slot of another width, a loop split over threads).
INVARIANT = {
    # the toy with the depth compiled in (260 runs a depth, so chunks follow depth): the loss at
    # depth 3 and 4 was 2e-5 relative apart between chunks of 13 and 64
    "toy": {"name": "toy", "model": "toy", "steps": 2000, "dtype": "float32",
            "task": {"sigma_star": [12.0, 6.0, 4.0, 3.0]},
            "axes": {"depth": [3, 4], "sigma0": {"logspace": [-4, -0.5], "num": 260}, "lr": [4e-3]},
            "record": {"points": 12}},
    # matrix sensing with 6 measurements drawn per seed: the per-seed layout (`engine.rows_map`)
    # around the batch-last kernels (`jax.custom_batching.custom_vmap`), Jacobi singular values
    "matrix_sensing": {"name": "ms", "model": "matrix_sensing", "steps": 300, "dtype": "float32", "seed": 5,
                       "task": {"sigma_star": [3.0, 2.0, 1.0], "d": 3, "measurements": 6, "init": "gaussian"},
                       "axes": {"depth": [2], "sigma0": {"logspace": [-3, -1], "num": 16}, "lr": [0.05],
                                "seed": [0, 1, 2]},
                       "record": {"points": 12}},
    # the diagonal network with 12 examples drawn per seed: the per-seed layout of a batch-first model
    "diagonal": {"name": "dg", "model": "diagonal", "steps": 1000, "dtype": "float32", "seed": 5,
                 "task": {"w_star": [2.0, -1.0, 0.5], "d": 5, "examples": 12, "loss": "squared"},
                 "axes": {"depth": [2, 3], "sigma0": {"logspace": [-2, -1], "num": 12}, "lr": [0.05],
                          "seed": [0, 1, 2]},
                 "record": {"points": 12}, "stop": {"rel_loss": 1e-3}},
    # matrix sensing whose runs converge at different steps: slots of a per-seed layout refilled
    # (24 runs per seed, more than its `engine.SEED_SLOTS`)
    "matrix_sensing_stops": {"name": "mss", "model": "matrix_sensing", "steps": 300, "dtype": "float32", "seed": 5,
                             "task": {"sigma_star": [3.0, 2.0, 1.0], "d": 3, "measurements": 6, "init": "gaussian"},
                             "axes": {"depth": [2], "sigma0": {"logspace": [-3, -1], "num": 24}, "lr": [0.05],
                                      "seed": [0, 1, 2]},
                             "record": {"points": 12, "levels": []}, "stop": {"rel_loss": 1e-2}},
    # the deep diagonal network over depth x sigma0 x shape, its dataset drawn once for the chunk
    "diagonal_net": {"name": "dn", "model": "diagonal_net", "steps": 1000, "dtype": "float32",
                     "task": {"d": 30, "examples": 10, "sparsity": 3},
                     "axes": {"depth": [2, 3], "sigma0": {"logspace": [-2, -0.5], "num": 10}, "shape": [0.0, 0.5],
                              "lr": [1e-2]},
                     "record": {"points": 12}},
    # the deep linear network (8 x 8 layers, data per seed), batched (no hitting levels, whose SVD
    # would run it one by one): its batched dots outside YNNPACK's kernels
    # (`engine.COMPILER_OPTIONS`), whose fused variants rounded otherwise from a size threshold on
    "linear_net": {"name": "ln", "model": "linear_net", "steps": 600, "dtype": "float32",
                   "task": {"data": "spectrum", "eigenvalues": [1.0, 0.8, 0.6], "w_true": [1.0, 0.5, 0.25],
                            "width": 8, "init": "gaussian"},
                   "axes": {"depth": [2, 3, 4], "sigma0": {"logspace": [-4, -1], "num": 30}, "lr": [0.05],
                            "seed": [0, 1, 2, 3]},
                   "record": {"points": 20, "levels": []}, "stop": {"rel_loss": 1e-6}},
}


def assert_identical(a, b):
    """Every column of two tables equal bit for bit (NaN where NaN, list columns entry by entry)."""
    assert list(a.columns) == list(b.columns) and len(a) == len(b) > 0
    for name in a.columns:
        x, y = a[name].to_numpy(), b[name].to_numpy()
        if x.dtype == object:
            x, y = np.stack(x), np.stack(y)
        assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), name


REFILLED = ("diagonal", "matrix_sensing_stops", "linear_net")     # runs that converge, more per seed than slots


@pytest.mark.parametrize("refill", [False, True], ids=["as-is", "refill"])
# slow: each compiles its family's program at three sizes, 10-35 s on 2 cores
@pytest.mark.parametrize("family", marked_slow(INVARIANT, {"matrix_sensing", "matrix_sensing_stops", "linear_net", "diagonal"}))
def test_chunk_size_changes_no_bit(tmp_path, monkeypatch, family, refill):
    """Chunks of 13 and 64 run ids and the default chunk size give bit-identical runs and
    trajectories tables: every compiled batch is whole vector blocks (`engine.LANES`), seed slots
    of `engine.SLOT_ROWS` rows, XLA's thread split and library fusions off, and a chunk's rows
    sit at their seed slot among frozen fillers. With the refill phase compiled in whatever the
    work (`engine.REFILL_MIN_FLOPS`), the default chunk of the sweeps in `REFILLED` refills
    fewer slots than it has rows (`engine.slot_count`; checked) while chunks of 13 and 64 run in
    lockstep: the same bits."""
    if refill:
        monkeypatch.setattr(engine, "REFILL_MIN_FLOPS", 0.0)
    sweep = spec.resolve(INVARIANT[family])
    folders = [api.run(sweep, out=tmp_path / str(size), chunk_size=size, progress_bar=False).folder
               for size in (13, 64, None)]
    if refill and family in REFILLED:
        program = api.compile_inputs(sweep)[0]
        period = sweeping._seed_period(sweep, program)
        batch = engine.compiled_batch(store.read_manifest(folders[-1])["chunk_size"], period)
        assert program.refill_from < sweep.steps and engine.slot_count(batch, period) < batch
    tables = [frames(folder) for folder in folders]
    for other in tables[1:]:
        for a, b in zip(tables[0], other):
            assert_identical(a, b)


SMALL = {
    # 6 runs with hits at 3 levels: replays of one row at a time
    "toy": {"name": "st", "model": "toy", "steps": 3000, "dtype": "float32",
            "task": {"sigma_star": [12.0, 6.0, 4.0, 3.0]},
            "axes": {"depth": [2, 3], "sigma0": [1e-3, 1e-2, 1e-1], "lr": [4e-3]},
            "record": {"points": 20}, "stop": {"rel_loss": 1e-3}},
    # a per-seed layout of 3 seeds x 2 runs per seed, hits replayed with the data of their seed
    "matrix_sensing": {"name": "sms", "model": "matrix_sensing", "steps": 300, "dtype": "float32", "seed": 5,
                       "task": {"sigma_star": [3.0, 2.0, 1.0], "d": 3, "measurements": 6, "init": "gaussian"},
                       "axes": {"depth": [2], "sigma0": [1e-3, 1e-1], "lr": [0.05], "seed": [0, 1, 2]},
                       "record": {"points": 12}, "stop": {"rel_loss": 1e-2}},
}


# depths 1, 2 and 4 in one chunk (too few runs per depth for chunks to follow the depths), data per seed
SWITCHED = {"name": "sw", "model": "linear_net", "steps": 400, "dtype": "float32",
            "task": {"data": "spectrum", "eigenvalues": [1.0, 0.8, 0.6], "w_true": [1.0, 0.5, 0.25], "width": 6,
                     "init": "gaussian"},
            "axes": {"depth": [1, 2, 4], "sigma0": {"logspace": [-3, -1], "num": 3}, "lr": [0.05], "seed": [0, 1]},
            "record": {"points": 15, "levels": []}, "stop": {"rel_loss": 1e-6}}


def test_a_one_by_one_program_switched_to_each_runs_depth_gives_the_masked_ones_bits(tmp_path, monkeypatch):
    """A one-by-one sweep of enough work (`engine.SWITCH_MIN_FLOPS`, lowered here) compiles in each
    run's depth, a branch per value, where one of less work multiplies the deepest run's layers,
    those past a run's depth masked to the identity. Expected: the same runs and trajectories
    tables bit for bit (an identity layer's products are exact), with the depths 1, 2 and 4 in
    one chunk: a run given another depth's branch would differ from its first step on."""
    monkeypatch.setattr(engine, "SEQUENTIAL_MIN_FLOPS", 0.0)
    sweep = spec.resolve(SWITCHED)
    tables = []
    for switch_min in (np.inf, 0.0):
        monkeypatch.setattr(engine, "SWITCH_MIN_FLOPS", switch_min)
        program = api.compile_inputs(sweep)[0]
        assert program.sequential and program.switches == (switch_min == 0.0)
        assert sweeping.chunk_group(sweep, program) == sweep.n_runs          # the depths share chunks
        tables.append(frames(api.run(sweep, out=tmp_path / str(switch_min), progress_bar=False).folder))
    assert_same_tables(*tables)
    runs = tables[0][0]
    assert runs.groupby("depth").final_loss.nunique().min() > 1 and runs.final_loss.nunique() > 6


@pytest.mark.parametrize("sequential", [False, True], ids=["lockstep", "sequential"])
@pytest.mark.parametrize("family", marked_slow(SMALL, {"matrix_sensing"}))
def test_a_small_sweep_is_compiled_at_its_own_size(tmp_path, monkeypatch, family, sequential):
    """A sweep smaller than one vector block (`engine.small_sweep_batch`) computes no filler block:
    the default chunk program's batch is its run count and its chunk-record's executed
    trajectory-steps are at most runs x steps plus the one-row replays; chunks of 1, 2 and 5 put
    each run at its fixed position among fillers: the same bits as the default. With its runs one
    after another (`engine.run_sequential`, chosen here whatever the gradient's cost), each run
    computes at most its own steps to its stop (whole check intervals) plus its replays, and
    fillers nothing."""
    monkeypatch.setattr(engine, "SEQUENTIAL_MIN_FLOPS", 0.0 if sequential else np.inf)
    sweep = spec.resolve(SMALL[family])
    program, flat, task = api.compile_inputs(sweep)
    assert program.sequential == sequential
    compiled = api.compile_sweep(sweep, program, task, flat.size, flat.size)
    assert compiled.batch == flat.size * (1 if sequential else len(jax.local_devices()))
    folders = [api.run(sweep, out=tmp_path / str(size), chunk_size=size, progress_bar=False).folder
               for size in (None, 1, 2, 5)]
    (record,) = store.chunk_records(folders[0]).values()
    assert record["executed_traj_steps"] <= 2 * flat.size * sweep.steps
    if sequential:      # each run's whole check intervals, plus at most one replayed interval per level crossing
        k = sweep.stop.check_every
        own = np.minimum(-(-store.load(folders[0])["steps_run"].to_numpy() // k) * k, sweep.steps)
        bound = own.sum() + flat.size * len(sweep.task["sigma_star"]) * len(sweep.record.levels) * k
        for folder in folders:
            executed = sum(r["executed_traj_steps"] for r in store.chunk_records(folder).values())
            assert executed <= bound
            if len(set(own)) > 1:       # the runs stop at different steps: fewer than all to the last stop
                assert executed < flat.size * own.max()
    tables = [frames(folder) for folder in folders]
    for other in tables[1:]:
        for a, b in zip(tables[0], other):
            assert_identical(a, b)


def test_a_batched_program_never_has_a_batch_of_one_row():
    """A batch of one row is how a one-by-one program runs a trajectory (`engine.run_sequential`),
    which a model may compute otherwise than a batch (`models.chain`): a one-run sweep is compiled
    at two rows, on any device count, and larger small sweeps at their own size."""
    assert engine.small_sweep_batch(1) == 2
    assert engine.small_sweep_batch(3) == 3 and engine.small_sweep_batch(engine.LANES + 1) is None
    assert engine.compiled_batch(1, small=engine.small_sweep_batch(1), devices=1) == 2


@pytest.mark.parametrize("levels, library_calls", [([0.5], True), ([], False)], ids=["hitting-levels", "no-levels"])
def test_a_step_through_lapack_runs_one_by_one_on_cpu(levels, library_calls):
    """The deep linear network's hitting levels take the SVD of W every step, a LAPACK call that
    XLA neither fuses nor vectorizes across a batch (and its cost analysis does not count): such a
    sweep runs one trajectory after another on CPU, whatever its gradient's flops; without levels
    its 8 x 8 layers' gradient (a few thousand flops, under `engine.SEQUENTIAL_MIN_FLOPS`) runs
    batched."""
    sweep = spec.resolve({**INVARIANT["linear_net"], "record": {"points": 20, "levels": levels}})
    program, _, task = api.compile_inputs(sweep)
    cost = engine.step_cost(program, list(sweep.axes), task)
    assert cost.library_calls == library_calls
    assert cost.flops < engine.SEQUENTIAL_MIN_FLOPS
    assert program.sequential == (library_calls and jax.default_backend() == "cpu")


def test_early_stop_of_a_chunk_does_not_change_results(tmp_path):
    """A chunk whose trajectories all converge early stops early; the same trajectories inside a
    chunk that keeps running (one slow trajectory) are frozen at the same step with the same values."""
    fast = toy_sweep(axes={"depth": [1], "sigma0": [0.1, 0.2], "lr": [1e-2]}, steps=20_000)
    api.run(fast, out=tmp_path / "fast", progress_bar=False)
    runs_fast, traj_fast = frames(tmp_path / "fast")
    assert runs_fast["converged"].all() and (runs_fast["steps_run"] < 20_000).all()

    mixed = toy_sweep(axes={"depth": [1], "sigma0": [0.1, 0.2], "lr": [1e-2, 1e-4]}, steps=20_000)
    api.run(mixed, out=tmp_path / "mixed", progress_bar=False)
    runs_mixed, traj_mixed = frames(tmp_path / "mixed")
    slow = runs_mixed[runs_mixed.lr == 1e-4]
    assert (slow["steps_run"] > runs_fast["steps_run"].max()).all()
    same = runs_mixed[runs_mixed.lr == 1e-2].reset_index(drop=True)
    cols = [c for c in runs_fast.columns if c != "run_id"]
    assert same[cols].equals(runs_fast[cols])
    ids = dict(zip(same.run_id, runs_fast.run_id))
    sub = traj_mixed[traj_mixed.run_id.isin(ids)].assign(run_id=lambda f: f.run_id.map(ids))
    assert sub.reset_index(drop=True).equals(traj_fast)


def test_converged_trajectory_is_frozen_with_rows_up_to_its_stop(tmp_path):
    sweep = toy_sweep(axes={"depth": [1], "sigma0": [0.1], "lr": [1e-2]}, steps=50_000,
                      record={"points": 100, "schedule": "linear"})
    api.run(sweep, out=tmp_path / "r", progress_bar=False)
    runs, traj = frames(tmp_path / "r")
    (row,) = runs.itertuples()
    assert row.converged and not row.diverged
    # converged: loss <= rel_loss * loss0, checked every check_every steps from each record step
    rec = engine.record_steps("linear", 100, 50_000)
    last_record = rec[rec <= row.steps_run][-1]
    assert row.steps_run == last_record or (row.steps_run - last_record) % sweep.stop.check_every == 0
    assert row.final_loss <= sweep.stop.rel_loss * traj.loss.iloc[0]
    assert traj.step.max() == row.steps_run
    assert traj.loss.iloc[-1] == row.final_loss
    assert traj.step.is_unique and traj.step.is_monotonic_increasing


@pytest.mark.parametrize("schedule", ["log", "linear"])
@given(points=st.integers(2, 400), steps=st.integers(1, 10**6))
@settings(max_examples=60, deadline=None)
def test_record_steps(schedule, points, steps):
    rec = engine.record_steps(schedule, points, steps)
    assert rec[0] == 0 and rec[-1] == steps
    assert np.all(np.diff(rec) > 0)
    assert len(rec) <= points
    if steps >= 10 * points:
        assert len(rec) >= points // 2


@pytest.mark.parametrize("schedule", ["log", "linear"])
@given(points=st.integers(2, 400), steps=st.integers(1, 10**6), check_every=st.integers(1, 512))
@settings(max_examples=80, deadline=None)
def test_record_plan_rounds_only_the_sparse_part_to_the_check_interval(schedule, points, steps, check_every):
    """The refill start P of `engine.record_plan`: recorded exactly as scheduled up to the
    schedule's first gap of K = check_every or more; from P on, every recorded step is on the grid
    steps - j K (slots advance K steps at a time); never more steps than asked for."""
    rec, first = engine.record_plan(schedule, points, steps, check_every)
    raw = engine.record_plan(schedule, points, steps, steps + 1)[0]      # a K past the end: no rounding
    assert rec[0] == 0 and rec[-1] == steps and np.all(np.diff(rec) > 0) and len(rec) <= len(raw) <= points
    if first == steps:
        assert np.array_equal(rec, raw)
        return
    k = check_every
    assert 0 < first < steps and first in rec and np.all((steps - rec[rec >= first]) % k == 0)
    dense = rec[rec < first]
    assert np.array_equal(dense, raw[:len(dense)]) and raw[len(dense)] - dense[-1] >= k    # up to the first wide gap


def test_a_sweep_of_little_work_runs_one_by_one_on_cpu(tmp_path, monkeypatch):
    """On CPU a sweep of less work than `engine.SMALL_WORK_FLOPS` (runs x steps x the gradient's
    flops) runs one by one when its model has no `drift_from`: one copy of the step, no replay,
    and each run computes exactly the steps to its stop (none diverges here); a sweep whose stop
    rule converges, up to `engine.CONVERGING_WORK_FACTOR` times that work. More work, or a model
    that bounds its drift (matrix sensing), keeps the batch."""
    monkeypatch.setattr(engine, "SMALL_WORK_FLOPS", 1e10)
    sweep = toy_sweep(stop={"rel_loss": 1e-3})
    program, flat, task = api.compile_inputs(sweep)
    work = flat.size * sweep.steps * engine.step_cost(program, list(sweep.axes), task).flops
    assert work < engine.SMALL_WORK_FLOPS and program.sequential
    runs = store.load(api.run(sweep, out=tmp_path / "r", progress_bar=False).folder)
    assert runs["converged"].any() and not runs["converged"].all() and not runs["diverged"].any()
    (record,) = store.chunk_records(tmp_path / "r").values()
    assert record["executed_traj_steps"] == runs["steps_run"].sum()      # each run to its own stop
    monkeypatch.setattr(engine, "SMALL_WORK_FLOPS", 0.99 * work)
    assert api.compile_inputs(sweep)[0].sequential
    assert not api.compile_inputs(toy_sweep(stop={"rel_loss": 0.0}))[0].sequential     # the same work, no convergence
    monkeypatch.setattr(engine, "SMALL_WORK_FLOPS", 0.99 * work / engine.CONVERGING_WORK_FACTOR)
    assert not api.compile_inputs(sweep)[0].sequential
    monkeypatch.setattr(engine, "SMALL_WORK_FLOPS", 1e10)
    assert not api.compile_inputs(spec.resolve(SMALL["matrix_sensing"]))[0].sequential


def test_a_compile_option_this_xla_lacks_is_dropped_and_other_errors_are_not():
    """`engine._compile` drops the compile-time-only options (`SEQUENTIAL_SPEED_OPTIONS`) that an
    XLA without them refuses, keeps the others, and passes any other compile error on."""
    lowered = jax.jit(lambda x: 2.0 * x).lower(np.float32(1.5))
    compiled = engine._compile(lowered, engine.COMPILER_OPTIONS, {"xla_cpu_no_such_option_here": True})
    assert float(compiled(np.float32(1.5))) == 3.0
    with pytest.raises(jax.errors.JaxRuntimeError):     # a known option with a bad value is an error
        engine._compile(lowered, {"xla_cpu_experimental_ynn_fusion_type": "NOT_A_FUSION_TYPE"}, {})


def test_a_one_by_one_program_compiles_with_the_options_its_step_wants(monkeypatch):
    """A one-by-one program compiles with XLA's older loop emitters (`SEQUENTIAL_SPEED_OPTIONS`)
    unless its model selects features (`engine.selects_features`): the diagonal network with
    `select` > 0 tracks an (n,) first-selection step per feature after every step, a loop the
    older emitters leave scalar; with `select` = 0 (or no `selected` hook) nothing is tracked. A
    step that is its products (here the deep linear network's SVD for its hitting levels) in a
    sweep of little work also compiles with LLVM's O1 (`Program.quick_compile`,
    `QUICK_COMPILE_OPTIONS`); a small model's step keeps O2, and so does the same step in a sweep
    of more work than `QUICK_COMPILE_MAX_FLOPS` with more parameters than
    `QUICK_COMPILE_MAX_PARAMETERS`."""
    selecting = {**INVARIANT["diagonal"], "task": {**INVARIANT["diagonal"]["task"], "select": 0.5}}
    through_lapack = {**INVARIANT["linear_net"], "record": {"points": 20, "levels": [0.5]}}
    speeds = []
    real = engine._compile
    monkeypatch.setattr(engine, "_compile", lambda lowered, options, speed: speeds.append(speed) or real(lowered, options, speed))
    for raw, selects, quick in ((selecting, True, False), (INVARIANT["diagonal"], False, False),
                                (SMALL["toy"], False, False), (through_lapack, False, True)):
        sweep = spec.resolve(raw)
        program, flat, task = api.compile_inputs(sweep)
        assert program.quick_compile == (quick and jax.default_backend() == "cpu")
        program = dataclasses.replace(program, sequential=True)
        assert engine.selects_features(program, list(flat.columns), task) == selects
        api.compile_sweep(sweep, program, task, 8, api.chunk_group(sweep, program))
        expected = {} if selects else engine.SEQUENTIAL_SPEED_OPTIONS | (engine.QUICK_COMPILE_OPTIONS if quick else {})
        assert speeds.pop() == expected
    sweep = spec.resolve(through_lapack)
    program, _, task = api.compile_inputs(sweep)
    cost = engine.step_cost(program, list(sweep.axes), task)
    monkeypatch.setattr(engine, "QUICK_COMPILE_MAX_FLOPS", sweep.n_runs * sweep.steps * cost.flops)   # its work at the bound
    assert api.compile_inputs(sweep)[0].quick_compile == (jax.default_backend() == "cpu")     # few parameters
    monkeypatch.setattr(engine, "QUICK_COMPILE_MAX_PARAMETERS", cost.parameters - 1)
    assert not api.compile_inputs(sweep)[0].quick_compile


def test_refilled_slots_compute_what_lockstep_computes():
    """Trajectories that stop at very different steps (converged or diverged) run in refilled slots
    (`engine._refill_phase`): every summary value and record equals, bit for bit, the same program
    run all in lockstep (refill from the last step, the same recorded steps, so the same check steps),
    and the refill computes fewer trajectory-steps than lockstep does."""
    import dataclasses

    sweep = toy_sweep(steps=6000, axes={"depth": [2, 3], "sigma0": {"logspace": [-3, -0.5], "num": 40},
                                        "lr": [2e-3, 8e-3, 0.15, 0.3]}, record={"points": 60})
    lockstep, flat, task = api.compile_inputs(sweep)          # small work: compiled all in lockstep
    program = engine.Program.from_sweep(sweep, lockstep.model)
    assert lockstep.refill_from == sweep.steps > program.refill_from
    results = [engine.compile_chunk(p, flat.size, list(sweep.axes), task, sweep.seed)(
        np.arange(flat.size), flat.rows(0, flat.size), task) for p in (program, lockstep)]
    (summary, _), (summary_lockstep, _) = results
    steps_run = summary["steps_run"]
    assert summary["diverged"].any() and summary["converged"].any() and (steps_run == sweep.steps).any()
    assert len(np.unique(steps_run)) > 10
    assert_same_chunk_results(*results)
    assert summary["executed"] < summary_lockstep["executed"]


def learning_steps_reference(depth, sigma0, shape, lr):
    """`engine.learning_steps` in float64, written from its docstring (THEORY.md 2.1's t_alpha,
    leading term in the effective scale c = sigma0 (1 + s^2) / (1 - s^2), in steps of lr): c is
    half of Azulay's c of the theory module (`theory.azulay_c`, 2 sigma0 (1 + s^2) / (1 - s^2))."""
    c = float(theory.azulay_c(sigma0, shape)) / 2
    if depth == 1:
        growth = 0.0
    elif depth == 2:
        growth = max(np.log(1 / c), 0.0)
    else:
        growth = c ** (2 / depth - 1) / (1 - 2 / depth)
    return (1 + growth) / lr


def test_learning_steps_is_the_theorys_learning_time():
    """`engine.learning_steps` against its float64 reference on every combination of depths 1-5,
    sigma0 1e-6..1, shapes -0.99..0.99 and two lr. Tolerance: float32 `log` and `pow` round to a
    few ulps of their results, and a power c^a carries the rounding of a ln c, |a ln c| <= 14 here:
    (2 + 14) x 4 ulps of 1.2e-7 ~ 8e-6 relative; 2e-5."""
    grid = np.array(np.meshgrid([1, 2, 3, 4, 5], [1e-6, 1e-3, 0.05, 1.0], [-0.99, 0.0, 0.5, 0.99], [1e-3, 0.1],
                                indexing="ij")).reshape(4, -1)
    hps = {"depth": grid[0].astype(np.int32), "sigma0": grid[1].astype(np.float32), "shape": grid[2].astype(np.float32),
           "lr": grid[3].astype(np.float32)}
    got = np.asarray(engine.learning_steps(hps, grid.shape[1]))
    expected = [learning_steps_reference(int(n), float(np.float32(s0)), float(np.float32(s)), float(np.float32(lr)))
                for n, s0, s, lr in grid.T]
    np.testing.assert_allclose(got, expected, rtol=2e-5)
    with np.errstate(all="raise"):      # NumPy's float32 on the host (`DealtExecutable`): the same tolerance
        on_host = engine.learning_steps(hps, grid.shape[1], np)
    assert type(on_host) is np.ndarray and on_host.dtype == np.float32
    np.testing.assert_allclose(on_host, expected, rtol=2e-5)
    # the theory's ordering: slower the deeper (from a small init: sigma0 = 1e-6, c <= 1e-4), the
    # smaller sigma0, the more balanced the shape (|s| smaller) and the smaller lr; strictly where
    # c < 1 (sigma0 <= 1e-3) at depth >= 2, where ln(1/c) and c^(2/N - 1) still fall
    steps = got.reshape(5, 4, 4, 2)
    assert np.all(np.diff(steps[:, 0], axis=0) > 0)
    assert np.all(np.diff(steps, axis=1) <= 0) and np.all(np.diff(steps[1:, :2], axis=1) < 0)
    assert np.all(np.diff(steps[:, :, 1:], axis=2) <= 0) and np.all(np.diff(steps[1:, :2, 1:], axis=2) < 0)
    assert np.array_equal(steps[:, :, 0], steps[:, :, 3]) and np.all(steps[..., 0] > steps[..., 1])
    # an axis the sweep lacks: depth 2, sigma0 1, shape 0, lr 1
    assert np.asarray(engine.learning_steps({}, 3)).tolist() == [1.0, 1.0, 1.0]


def test_the_refill_queue_starts_the_runs_predicted_longest_first():
    """The refill phase's queue (`engine._longest_first`), per seed slot (2 columns: row b in
    column b % 2): the live rows first, the longest to learn first (`learning_steps`), then in row
    order; the frozen rows after them in row order. Expected: Python's sort of the same rows by
    the float64 reference (36 rows of random depths 1-4, sigma0, shapes and lr from a few values,
    so rows tie and ties are left to row order; distinct keys at least 1e-3 apart relatively, so
    float32 cannot swap them), and an axis that is one value for the whole chunk (a scalar lr)
    orders nothing."""
    rng = np.random.default_rng(5)
    size, columns = 36, 2
    hps = {"depth": rng.integers(1, 5, size).astype(np.int32), "sigma0": rng.choice([1e-3, 1e-2, 0.1], size),
           "shape": rng.choice([0.0, 0.9], size), "lr": rng.choice([0.01, 0.1], size),
           "seed": np.arange(size, dtype=np.int32) % columns}
    frozen = rng.random(size) < 0.25

    def expected_order(lr):
        key = [learning_steps_reference(int(hps["depth"][b]), hps["sigma0"][b], hps["shape"][b], lr[b]) for b in range(size)]
        distinct = np.unique(key)
        assert np.all(np.diff(distinct) > 1e-3 * distinct[1:])
        return [sorted(range(column, size, columns), key=lambda b: (frozen[b], -key[b], b)) for column in range(columns)]

    for lr, given in ((hps["lr"], hps), (np.full(size, 0.1), {**hps, "lr": np.float32(0.1)})):
        order = np.asarray(engine._longest_first(jnp.asarray(frozen.reshape(-1, columns)), given))
        assert [[int(k) * columns + column for k in order[:, column]] for column in range(columns)] == expected_order(lr)


def test_deal_by_work_gives_every_device_as_many_units_the_longest_first():
    """`engine.deal_by_work` (Graham's LPT rule with equal counts), worked by hand: gissin-fig4's
    four stops (2,656, 8,928, 19,872, 28,832 steps) go 28,832 -> device 0, 19,872 -> 1, 8,928 ->
    1 (the least loaded), 2,656 -> 0 (device 1 is full): 31,488 and 28,800 steps, where dealing
    in turn gave 22,528 and 37,760; equal works go in turn, as the units come; fillers (no work)
    fill the devices with room; units that cannot be dealt evenly are an error."""
    assert [s.tolist() for s in engine.deal_by_work(np.array([2656, 8928, 19872, 28832]), 2)] == [[0, 3], [1, 2]]
    assert [s.tolist() for s in engine.deal_by_work(np.ones(6), 3)] == [[0, 3], [1, 4], [2, 5]]
    assert [s.tolist() for s in engine.deal_by_work(np.array([5.0, 0, 0, 0]), 2)] == [[0, 3], [1, 2]]
    assert [s.tolist() for s in engine.deal_by_work(np.array([3.0, 1, 2]), 1)] == [[0, 1, 2]]
    with pytest.raises(ValueError, match="5 units do not deal evenly over 2 devices"):
        engine.deal_by_work(np.ones(5), 2)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 4), st.integers(1, 6), st.data())
def test_deal_by_work_deals_every_unit_once_and_evenly(count, per_device, data):
    """Any works: the shares partition the units, each holds `len(work) / count` of them in unit
    order, and the heaviest share is at most the lightest plus the largest unit's work (LPT: a
    unit goes to the least loaded device with room, and every device fills at the same count)."""
    work = np.array(data.draw(st.lists(st.integers(0, 10**6), min_size=count * per_device, max_size=count * per_device)),
                    np.float64)
    shares = engine.deal_by_work(work, count)
    assert sorted(np.concatenate(shares).tolist()) == list(range(len(work)))
    assert all(len(share) == per_device and np.all(np.diff(share) > 0) for share in shares)
    loads = [work[share].sum() for share in shares]
    assert max(loads) - min(loads) <= work.max()


def test_a_dealt_chunk_puts_every_share_back_in_row_order():
    """`engine.DealtExecutable` on one device twice, with a stand-in program that returns its rows'
    run ids: gissin-fig4's chunk (depths 1-4 at sigma0 1e-4, `learning_steps` longest at depth 4)
    deals rows 0 and 3 to the first share and 1 and 2 to the second (in turn: 0 and 2, 1 and 3);
    with a per-seed layout (units of 2) whole cycles move together, a frozen row weighing
    nothing. `Dealt.gathered` puts the summaries (axis 0) and records (axis 1) back in row order
    and sums `executed`."""
    def program(root_key, run_ids, live, hps, task):
        rows = np.asarray(run_ids)
        return {"executed": np.float32(len(rows)), "run": rows, "live": np.asarray(live)}, (np.stack([rows, 10 * rows]),)

    device = jax.local_devices()[0]
    dealt = engine.DealtExecutable((program, program), (device, device), steps=100_000)
    hps = {"depth": np.array([1, 2, 3, 4], np.int32), "sigma0": np.float32(1e-4), "lr": np.full(4, 4e-3, np.float32)}
    results = dealt(None, np.arange(4, dtype=np.int32), np.ones(4, bool), hps, {})
    assert [share[0]["run"].tolist() for share in results.shares] == [[0, 3], [1, 2]]
    summary, (records,) = results.gathered()
    assert summary["run"].tolist() == [0, 1, 2, 3] and summary["executed"] == 4.0
    assert records.tolist() == [[0, 1, 2, 3], [0, 10, 20, 30]]
    capped = dataclasses.replace(dealt, steps=10_000)     # works 250, 2,553, 10,000, 10,000: depth 3 now ties depth 4
    assert [share[0]["run"].tolist() for share in capped(None, np.arange(4, dtype=np.int32), np.ones(4, bool), hps, {}).shares] \
        == [[1, 2], [0, 3]]

    cycles = dataclasses.replace(dealt, unit=2)           # rows (0, 1), (2, 3), (4, 5), (6, 7): depths 3, 2, 4, 1
    hps = {"depth": np.repeat(np.array([3, 2, 4, 1], np.int32), 2), "sigma0": np.float32(1e-4)}
    live = np.array([True, True, False, False, True, True, True, True])       # the depth-2 cycle frozen: no work
    results = cycles(None, np.arange(8, dtype=np.int32), live, hps, {})
    # works 131, 0, 402, 2: depth 4 -> device 0, depth 3 -> 1, depth 1 -> 1, the frozen cycle -> 0 (live, the
    # depth-2 cycle's 20 would have sent depth 1 to device 0 instead; in turn: cycles 0 and 2, 1 and 3)
    assert [share[0]["run"].tolist() for share in results.shares] == [[2, 3, 4, 5], [0, 1, 6, 7]]
    summary, (records,) = results.gathered()
    assert summary["run"].tolist() == list(range(8)) and summary["live"].tolist() == live.tolist()
    assert records[1].tolist() == [10 * b for b in range(8)]


def assert_same_chunk_results(result, other):
    """Two chunk programs' (summary, records) equal bit for bit, but for the trajectory-steps
    each computed (`executed`)."""
    (summary, records), (summary_other, records_other) = result, other
    for name in summary.keys() - {"executed"}:
        jax.tree.map(np.testing.assert_array_equal, summary[name], summary_other[name])
    jax.tree.map(np.testing.assert_array_equal, records, records_other)


@pytest.mark.parametrize("unroll", [1, 3])
# slow: matrix sensing, 11-12 s each on 2 cores
@pytest.mark.parametrize("family", marked_slow(["toy", "diagonal", "matrix_sensing"], {"matrix_sensing"}))
def test_the_accelerator_layout_computes_what_the_cpu_layout_computes(family, unroll):
    """An accelerator's layout (`engine.with_layout`): the levels tested after every step
    (`hits_every_step`, no block peak and no replay) where the model observes sigma exactly,
    and `unroll` steps written out per loop iteration (3: a block of 64 steps, or a group of 16,
    leaves a remainder, run one step at a time).
    Run on the CPU for runs that converge (but matrix sensing's), diverge and run to the end, every summary value and
    record equals the CPU layout's bit for bit (the same steps in the same order). Where the
    levels are tested every step it computes exactly the steps its runs need: their whole
    check intervals plus the fillers' first, with no replay; matrix sensing (`drift_from`) keeps
    its block peak and replays the same groups. The diagonal model's and matrix sensing's sweeps
    have their data drawn per seed (the per-seed layout, `engine.rows_map`)."""
    import dataclasses

    if family == "toy":
        sweep = toy_sweep(steps=1500, axes={"depth": [2, 3], "sigma0": {"logspace": [-3, -0.5], "num": 12},
                                            "lr": [2e-3, 0.15, 0.3]}, record={"points": 30})
    elif family == "diagonal":
        sweep = spec.resolve({**INVARIANT["diagonal"], "axes": {**INVARIANT["diagonal"]["axes"], "lr": [0.05, 2.0]}})
    else:
        sweep = spec.resolve({**SMALL["matrix_sensing"], "axes": {**SMALL["matrix_sensing"]["axes"],
                                                                 "sigma0": [1e-3, 1e-1, 0.4], "lr": [0.05, 2.5]}})
    program, flat, task = api.compile_inputs(sweep)
    assert not program.hits_every_step and program.unroll == 1
    exact = family != "matrix_sensing"
    accelerator = dataclasses.replace(program, hits_every_step=exact, unroll=unroll)
    seeds = engine.seed_slots(program.model, sweep.axes)
    assert (seeds is not None) == (family != "toy")
    batch = engine.compiled_batch(flat.size, len(seeds) if seeds else None)
    results = [engine.compile_chunk(p, batch, list(sweep.axes), task, sweep.seed, seeds=seeds)(
        np.arange(flat.size), flat.rows(0, flat.size), task) for p in (program, accelerator)]
    (summary, _), (summary_accelerator, _) = results
    assert summary["diverged"].any() and (summary["steps_run"] == sweep.steps).any() and (summary["hit"] > 0).any()
    assert summary["converged"].any() == exact      # matrix sensing's 6 measurements: sigma* is never all reached
    assert_same_chunk_results(*results)
    if not exact:
        assert summary_accelerator["executed"] == summary["executed"]
        return
    # lockstep: every row steps until the chunk's last live run stops (a check step), no replay
    last = int(summary["steps_run"][~summary["diverged"]].max())
    assert summary_accelerator["executed"] == batch * last < summary["executed"]


def test_an_accelerator_tests_levels_every_step_in_unrolled_loops(monkeypatch):
    """On an accelerator the batch always runs (never one by one) and never refills its slots,
    its levels are tested after every step where the model observes sigma exactly at every step
    (no `drift_from`), and its loops run `engine.ACCELERATOR_UNROLL` steps an iteration; a model
    that bounds its drift keeps the block peak (its exact sigma is an SVD: matrix sensing, and
    the linear network whatever its work, as one by one is the CPU's alone). The step's flops are
    counted (`engine.step_cost` lowers it for the CPU, whose cost analysis an accelerator's
    plugin lacks)."""
    monkeypatch.setattr(engine, "REFILL_MIN_FLOPS", 0.0)
    sensing_sweep = spec.resolve(SMALL["matrix_sensing"])
    assert api.compile_inputs(sensing_sweep)[0].refill_from < sensing_sweep.steps     # on CPU: refilled
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    toy, _, _ = api.compile_inputs(toy_sweep())
    assert (toy.hits_every_step, toy.unroll, toy.sequential) == (True, engine.ACCELERATOR_UNROLL, False)
    sensing, _, _ = api.compile_inputs(sensing_sweep)
    assert (sensing.hits_every_step, sensing.unroll, sensing.sequential) == (False, engine.ACCELERATOR_UNROLL, False)
    assert sensing.refill_from == sensing_sweep.steps and sensing.step_flops > 0
    with_levels = spec.resolve(INVARIANT["linear_net"] | {"record": {"points": 20, "levels": [0.5]}})
    network, _, _ = api.compile_inputs(with_levels)      # its SVD bounded by `drift_from`, as matrix sensing's
    assert (network.hits_every_step, network.sequential, engine.anchored(network)) == (False, False, True)


def test_the_step_cost_is_counted_without_a_cpu_backend(monkeypatch):
    """`engine.step_cost` lowers the step for the CPU (whose cost analysis an accelerator's plugin
    lacks); where JAX runs without its CPU backend (`JAX_PLATFORMS` naming accelerators alone,
    so `jax.devices("cpu")` raises) it analyses the default backend's lowering instead: here the
    CPU's, so the same cost."""
    sweep = spec.resolve(SMALL["matrix_sensing"])
    program, _, task = api.compile_inputs(sweep)
    expected = engine.step_cost(program, list(sweep.axes), task)
    devices = jax.devices

    def without_cpu(backend=None):
        if backend == "cpu":
            raise RuntimeError("Unknown backend cpu")
        return devices(backend)

    monkeypatch.setattr(jax, "devices", without_cpu)
    assert engine.step_cost(program, list(sweep.axes), task) == expected and expected.flops > 0


def test_chunks_follow_the_leading_axis_on_cpu_alone(tmp_path, monkeypatch):
    """On CPU a grid with enough runs per depth is cut by depth (`grid.aligned_group`: 300 runs
    each, at least MIN_ALIGNED_GROUP = 256), so depth enters the chunk program as a constant; on an
    accelerator the whole grid is one group (`engine.follows_leading_axis`), as `run` and
    `plan_run` both see it."""
    sweep = toy_sweep(axes={"depth": [2, 3], "sigma0": {"logspace": [-3, -0.5], "num": 300}, "lr": [1e-2]})
    program = api.compile_inputs(sweep)[0]
    assert api.chunk_group(sweep, program) == 300
    assert api.plan_run(sweep, out=tmp_path / "run").compiled_in == ("depth",)
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert api.chunk_group(sweep, program) == sweep.n_runs == 600
    assert api.plan_run(sweep, out=tmp_path / "run").compiled_in == ()


def test_a_lockstep_chunk_keeps_its_states_in_cache_on_cpu(monkeypatch):
    """On CPU a chunk whose runs all step in lockstep holds at most `engine.CPU_CHUNK_STATE_BYTES`
    of states (in whole `LANES` blocks): matrix sensing at d = 10 and depth 3 keeps 3 layers of
    10 x 10 float32 (1,200 bytes) and its hits and flags a trajectory, so its 1,200 runs go in
    chunks of the largest multiple of 64 at or under 192 KiB / state (128), while the toy's few
    scalars a run leave its chunk at the whole grid. A program that runs one by one is not
    bounded: one trajectory at a time is in cache."""
    raw = {"name": "ms10", "model": "matrix_sensing", "steps": 200, "dtype": "float32",
           "task": {"sigma_star": [12.0, 6.0, 4.0, 3.0], "d": 10, "init": "gaussian"},
           "axes": {"depth": [3], "sigma0": {"logspace": [-3, -1], "num": 1200}, "lr": [1e-3]},
           "record": {"points": 20}, "stop": {"rel_loss": 0.0}}

    def chunk_and_state(raw):
        sweep = spec.resolve(raw)
        program, _, task = api.compile_inputs(sweep)
        state = engine.state_bytes(program, list(sweep.axes), task)
        return api.default_chunk_size(program, sweep.n_runs, list(sweep.axes), task), state, program

    with jax.enable_x64(False):       # float32 states, whatever mode an earlier test left on
        size, state, program = chunk_and_state(raw)
        assert not program.sequential and program.refill_from == 200
        assert 4 * 3 * 100 <= state <= 4 * 3 * 100 + 128      # the layers, then hits (4 x 3 int32) and scalars
        assert size == engine.CPU_CHUNK_STATE_BYTES // state // engine.LANES * engine.LANES == 128
        toy = toy_sweep(axes={"depth": [3], "sigma0": {"logspace": [-3, -1], "num": 1200}, "lr": [1e-3]})
        toy_program, _, toy_task = api.compile_inputs(toy)
        assert api.default_chunk_size(toy_program, toy.n_runs, list(toy.axes), toy_task) == 1216   # 19 blocks
        monkeypatch.setattr(engine, "SEQUENTIAL_MIN_FLOPS", 0.0)
        size, _, program = chunk_and_state(raw)
        assert program.sequential and size == 1216


def test_a_one_by_one_sweep_is_cut_into_chunks_of_bounded_work(tmp_path, monkeypatch):
    """A program that runs its trajectories one by one holds at most `SEQUENTIAL_CHUNK_FLOPS` of
    work (runs x steps x gradient flops) per chunk, in whole vector blocks, so a long sweep
    reports progress and keeps its finished chunks; its runs, each computed alone, are the same
    bits as in one chunk. A per-seed layout does not apply one by one (`seed_cycle` 1)."""
    monkeypatch.setattr(engine, "SEQUENTIAL_MIN_FLOPS", 0.0)                   # one by one (this file's default: batched)
    raw = INVARIANT["diagonal"]
    sweep = spec.resolve({**raw, "axes": {**raw["axes"], "sigma0": {"logspace": [-2, -1], "num": 34}}})
    program, _, task = api.compile_inputs(sweep)
    assert engine.seed_slots(program.model, sweep.axes) == (0, 1, 2)          # data drawn per seed ...
    assert program.sequential and program.step_flops > 0 and sweeping.seed_cycle(sweep, program) == 1
    work = program.record_steps[-1] * program.step_flops
    assert engine.max_sequential_chunk(program) == engine.SEQUENTIAL_CHUNK_FLOPS // work > sweep.n_runs
    whole = api.run(sweep, out=tmp_path / "whole", progress_bar=False)
    monkeypatch.setattr(engine, "SEQUENTIAL_CHUNK_FLOPS", 70 * work)         # 70 runs: one block of 64
    assert api.default_chunk_size(program, sweep.n_runs, list(sweep.axes), task) == engine.LANES
    cut = api.run(sweep, out=tmp_path / "cut", progress_bar=False)
    assert (whole.chunks_run, cut.chunks_run) == (1, -(-sweep.n_runs // engine.LANES))
    for a, b in zip(frames(whole.folder), frames(cut.folder)):
        assert_identical(a, b)


@given(w=st.floats(0.01, 3.0), n=st.integers(1, 9))
@settings(max_examples=80, deadline=None)
def test_integer_power_and_its_derivative(w, n):
    """w**n by masked multiplies equals the float64 power, and d/dw w**n = n w**(n-1)."""
    with jax.enable_x64(True):
        value, slope = jax.value_and_grad(lambda x: integer_power(x, jnp.int32(n), 9))(jnp.float64(w))
        assert float(value) == pytest.approx(w**n, rel=1e-14)
        assert float(slope) == pytest.approx(n * w ** (n - 1), rel=1e-14)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8])
def test_integer_power_is_the_product_of_its_squares(n):
    """float32, one depth per element, as one array and as a batch of trajectories (the masked
    and the blended products of `models.toy`): w**n is bit for bit w**(n-1) w, w**(n-1) the
    product of the squares w**(2**b) that the bits of n - 1 take, in that order (the NumPy float32
    loop below); the square w**8 that n - 1 < 8 does not take overflows for w = 1e5 (1e40 > 3.4e38,
    float32's largest) and leaves the power finite: 1e5**n is finite for n <= 7."""
    w = np.array([1e5, -1e5, 0.7, -1.3, 0.02, 1.0 + 2**-20], np.float32)   # no subnormal: XLA flushes them
    depth = np.full(w.shape, n, np.int32)
    below = np.ones_like(w)
    square = w.copy()
    for bit in range(4):                         # n - 1 <= max_n - 1 = 8 = 0b1000: four bits
        if (n - 1) >> bit & 1:
            below = below * square
        with np.errstate(over="ignore"):
            square = square * square
    with np.errstate(over="ignore"):
        expected = below * w
    power = lambda x, d: integer_power(x, d, 9)  # noqa: E731
    for got in (jax.jit(power)(w, depth), jax.jit(jax.vmap(power))(w, depth)):     # masked, blended
        got = np.asarray(got)
        np.testing.assert_array_equal(got, expected)
        assert np.isfinite(got[:2]).all() == (n <= 7)


def test_trajectory_steps_reported(tmp_path):
    sweep = toy_sweep(stop={"rel_loss": 0.0})
    report = api.run(sweep, out=tmp_path / "r", progress_bar=False)
    assert report.traj_steps == report.n_runs * sweep.steps
    assert report.chunks_run >= 1 and report.chunks_missing == 0
    assert report.traj_steps_per_second > 0


RUN_SMALL_SWEEP = """
import sys
from dlsweep import api, engine, spec
one_by_one = len(sys.argv) > 4
engine.SMALL_WORK_FLOPS = 0.0               # batched, sharded; or one by one, dealt over the devices however little work
engine.SEQUENTIAL_MIN_FLOPS = 0.0 if one_by_one else engine.SEQUENTIAL_MIN_FLOPS
engine.SHARD_CPU_BATCHES = True             # the simulated CPU devices stand for an accelerator's
sweep = spec.resolve({"name": "d", "model": "toy", "steps": 2000, "dtype": "float32",
    "task": {"sigma_star": [12.0, 6.0, 4.0, 3.0]},
    "axes": {"depth": [1, 2, 3, 6], "sigma0": {"logspace": [-4, -0.5], "num": int(sys.argv[3])}, "lr": [1e-3, 4e-3]},
    "record": {"points": 40}, "stop": {"rel_loss": 1e-4}})
assert api.compile_inputs(sweep)[0].sequential == one_by_one
report = api.run(sweep, out=sys.argv[1], chunk_size=int(sys.argv[2]), progress_bar=False)
program, flat, task = api.compile_inputs(sweep)
compiled = api.compile_sweep(sweep, program, task, int(sys.argv[2]), flat.size)
n = int(sys.argv[2])
_, results = compiled.launch(range(n), {k: v[:n] for k, v in flat.columns.items()}, task)
if one_by_one:
    print("dealt over", len(results.shares) if isinstance(results, engine.Dealt) else 1)
else:
    print("shards", [s.data.shape[0] for s in results[0]["final_loss"].addressable_shards])
"""


def _run_in_process(tmp_path, folder, chunk_size, sigma0s, env, one_by_one=False):
    script = tmp_path / "run_small_sweep.py"
    script.write_text(RUN_SMALL_SWEEP)
    done = subprocess.run([sys.executable, str(script), str(folder), str(chunk_size), str(sigma0s), *["one-by-one"] * one_by_one],
                          env={**os.environ, **env}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done


@pytest.mark.slow
@pytest.mark.parametrize(("sigma0s", "shards"), [(9, [engine.LANES] * 4), (3, [24])], ids=["blocks", "small-sweep"])
def test_four_devices_give_the_same_dataset_as_one(tmp_path, sigma0s, shards):
    """The batch axis sharded over 4 (simulated CPU) devices, each computing the layout one device
    computes: one vector block of `engine.LANES` trajectories for a sweep of 72 (a chunk of 24
    padded to 4 x 64); a sweep of 24 runs at its own size (`engine.small_sweep_batch`) on the
    first device alone: same bits as one device."""
    one = _run_in_process(tmp_path, tmp_path / "one", 24, sigma0s, {})
    four = _run_in_process(tmp_path, tmp_path / "four", 24, sigma0s,
                           {"XLA_FLAGS": "--xla_force_host_platform_device_count=4"})
    assert f"shards [{shards[0]}]" in one.stdout
    assert f"shards {shards}" in four.stdout
    assert store.read_manifest(tmp_path / "four")["devices"] == ["cpu:0", "cpu:1", "cpu:2", "cpu:3"]
    for a, b in zip(frames(tmp_path / "one"), frames(tmp_path / "four")):
        assert len(a) and a.equals(b)


@pytest.mark.slow
@pytest.mark.parametrize("sigma0s", [9, 3], ids=["chunks-of-24", "small-sweep"])
def test_one_by_one_runs_dealt_over_three_devices_give_the_same_dataset_as_one(tmp_path, sigma0s):
    """A sweep that runs one by one, its chunks' rows dealt over 3 (simulated CPU) devices
    (`engine.DealtExecutable`; chunks of 24 of 72 runs in a batch of 66, 22 a device, or a
    small sweep's 24 runs, 8 a device): each
    trajectory is still computed alone, so the same bits as one device, and the same
    trajectory-steps computed (runs stop at different steps: rel_loss = 1e-4)."""
    one = _run_in_process(tmp_path, tmp_path / "one", 24, sigma0s, {}, one_by_one=True)
    three = _run_in_process(tmp_path, tmp_path / "three", 24, sigma0s,
                            {"XLA_FLAGS": "--xla_force_host_platform_device_count=3"}, one_by_one=True)
    assert "dealt over 1" in one.stdout and "dealt over 3" in three.stdout
    assert store.read_manifest(tmp_path / "three")["devices"] == ["cpu:0", "cpu:1", "cpu:2"]
    for a, b in zip(frames(tmp_path / "one"), frames(tmp_path / "three")):
        assert len(a) and a.equals(b)
    runs = store.load(tmp_path / "one")
    assert runs["steps_run"].nunique() > 3
    executed = [sum(r["executed_traj_steps"] for r in store.chunk_records(tmp_path / f).values()) for f in ("one", "three")]
    assert executed[0] == executed[1] == runs["steps_run"].sum()


def tables_of_runs(tmp_path, script, args, settings):
    """`script` run in a process of its own once per (name, environment, expected output) of
    `settings`, with the folder `tmp_path / name` and `args` as its arguments: each run's
    (runs, trajectories) tables, once its output holds what it should."""
    path = tmp_path / "script.py"
    path.write_text(script)
    tables = []
    for name, env, expected in settings:
        done = subprocess.run([sys.executable, str(path), str(tmp_path / name), *map(str, args)], capture_output=True,
                              text=True, timeout=300, env=os.environ | env)
        assert done.returncode == 0, done.stderr
        assert expected in done.stdout
        tables.append(frames(tmp_path / name))
    return tables


def assert_same_tables(first, second):
    for a, b in zip(first, second):
        assert len(a) and a.equals(b)


RUN_DATA_SWEEP = """
import sys
from dlsweep import api, engine, spec
engine.SMALL_WORK_FLOPS = 0.0               # one by one and dealt over the devices however little work
engine.SEQUENTIAL_MIN_FLOPS = 0.0
sweep = spec.resolve({"name": "d", "model": "diagonal_net", "steps": 1500, "dtype": "float32",
    "task": {"d": 300, "examples": 20, "sparsity": 5, "noise": 0.1},
    "axes": {"depth": [2, 3], "sigma0": {"logspace": [-2, -0.5], "num": 4}, "shape": [0.0, 0.9], "lr": [2e-3]},
    "record": {"points": 20}, "stop": {"loss": 1e-9, "rel_loss": 0.0}})
program, flat, task = api.compile_inputs(sweep)
assert program.sequential
api.run(sweep, out=sys.argv[1], progress_bar=False)
print("dealt over", engine.deal_count(program, flat.size))
"""


@pytest.mark.parametrize("devices", [2, pytest.param(3, marks=pytest.mark.slow)])     # 11 s each on 2 cores
def test_one_by_one_runs_on_shared_data_dealt_over_devices_give_the_same_dataset_as_one(tmp_path, devices):
    """A one-by-one sweep whose gradient is products with shared data (a diagonal network's
    X beta and X^T r), its rows dealt over 2 or 3 (simulated CPU) devices: each device runs the
    module one device compiles (`engine.DealtExecutable`), so every table equals one device's bit
    for bit. A program partitioned over the devices (`jax.shard_map`) rounded its gradient
    otherwise: final losses up to 2% apart on 2 and on 3 devices (runs converged near 1e-12)."""
    assert_same_tables(*tables_of_runs(tmp_path, RUN_DATA_SWEEP, [], [
        (f"devices-{count}", {"XLA_FLAGS": f"--xla_force_host_platform_device_count={count}"}, f"dealt over {count}")
        for count in (1, devices)]))


RUN_BATCHED_SWEEP = """
import sys
from dlsweep import api, engine, spec, store
engine.DEAL_MIN_FLOPS = engine.REFILL_MIN_FLOPS = engine.SMALL_WORK_FLOPS = 0.0   # batched, dealt, refilled
if sys.argv[2] == "toy":
    sweep = spec.resolve({"name": "b", "model": "toy", "steps": 2000, "dtype": "float32",
        "task": {"sigma_star": [12.0, 6.0, 4.0, 3.0]},
        "axes": {"depth": [1, 2, 3, 6], "sigma0": {"logspace": [-4, -0.5], "num": 100}, "lr": [1e-3, 4e-3]},
        "record": {"points": 40}, "stop": {"rel_loss": 1e-4}})
else:
    sweep = spec.resolve({"name": "b", "model": "diagonal_net", "steps": 3000, "dtype": "float32",
        "task": {"d": 50, "examples": 20, "sparsity": 5, "noise": 0.1},
        "axes": {"depth": [2, 3], "sigma0": {"logspace": [-2, -0.5], "num": 20}, "shape": [0.0, 0.9],
                 "lr": [2e-3], "seed": [0, 1, 2]},
        "record": {"points": 20}, "stop": {"loss": 1e-6, "rel_loss": 0.0}})
program, flat, task = api.compile_inputs(sweep)
assert not program.sequential and program.deals and program.refill_from < sweep.steps
api.run(sweep, out=sys.argv[1], progress_bar=False)
size = store.read_manifest(sys.argv[1])["chunk_size"]
compiled = api.compile_sweep(sweep, program, task, size, api.chunk_group(sweep, program))
share = compiled.batch // len(getattr(compiled.executable, "devices", [None]))
print("dealt over", len(getattr(compiled.executable, "devices", [None])), "by", getattr(compiled.executable, "unit", 1),
      "refilled", engine.slot_count(share, len(engine.seed_slots(program.model, sweep.axes) or ()) or None, devices=1) < share)
"""


@pytest.mark.parametrize(("model", "unit"), [("toy", 1), pytest.param("diagonal_net", 3, marks=pytest.mark.slow)],
                         ids=["rows", "seed-cycles"])      # seed-cycles: 33 s on 2 cores
def test_batched_runs_dealt_over_devices_give_the_same_dataset_as_one(tmp_path, model, unit):
    """A batched sweep of enough work (`Program.deals`) deals each chunk over every CPU device
    (`engine.DealtExecutable`): the toy's vector rows, or a diagonal network's whole cycles of
    three seeds (its per-seed layout, the data drawn once per seed), each device computing its
    share as a batch of its own, refilled as its runs stop. Each trajectory is computed as in
    any other chunking, so 1 and 3 (simulated CPU) devices give the same tables bit for bit."""
    assert_same_tables(*tables_of_runs(tmp_path, RUN_BATCHED_SWEEP, [model], [
        (f"devices-{count}", {"XLA_FLAGS": f"--xla_force_host_platform_device_count={count}"},
         f"dealt over {count} by {unit if count > 1 else 1} refilled True") for count in (1, 3)]))


def test_a_batched_sweep_deals_its_chunks_from_deal_min_flops_of_work(monkeypatch):
    """`Program.deals` (set with the layout): a batched CPU sweep whose runs to the step limit
    hold `engine.DEAL_MIN_FLOPS` of work deals its chunks over the CPU devices; 0.1% less does not,
    nor does a sweep that runs one by one (`engine.deal_count` deals those)."""
    sweep = toy_sweep(steps=1000)
    program, flat, task = api.compile_inputs(sweep)
    least = int(np.ceil(engine.DEAL_MIN_FLOPS / (program.record_steps[-1] * program.step_flops)))
    laid = [engine.with_layout(program, list(sweep.axes), task, n) for n in (int(least * 0.999), least)]
    assert [p.deals for p in laid] == [False, jax.default_backend() == "cpu"]
    assert not any(p.sequential for p in laid)
    monkeypatch.setattr(engine, "SEQUENTIAL_MIN_FLOPS", 0.0)
    one_by_one = engine.with_layout(program, list(sweep.axes), task, least)
    assert one_by_one.sequential == (jax.default_backend() == "cpu") and not one_by_one.deals


def test_a_dealt_chunk_holds_a_cache_sized_share_for_every_device():
    """On CPU a lockstep chunk keeps its states within `engine.CPU_CHUNK_STATE_BYTES` (a core's
    L2 cache); a chunk dealt over the devices (`Program.deals`) keeps each device's share so,
    so it holds that many runs for every device: matrix sensing at d = 5 (666 bytes a trajectory),
    chunks of 256 on one device and of 512 dealt over two."""
    script = """
import dataclasses
from dlsweep import api, engine, spec, sweeping
engine.use_cpu_cores()
sweep = spec.resolve({"name": "m", "model": "matrix_sensing", "steps": 2000, "dtype": "float32",
    "task": {"sigma_star": [12.0, 6.0, 4.0, 3.0], "d": 5, "measurements": 0, "init": "gaussian"},
    "axes": {"depth": [1, 2, 3, 4, 5, 6], "sigma0": {"logspace": [-4, -1], "num": 1667}, "lr": [1e-3]},
    "stop": {"rel_loss": 0.0}})
program, flat, task = api.compile_inputs(sweep)
print(*[sweeping.default_chunk_size(dataclasses.replace(program, deals=deals), flat.size, list(sweep.axes), task)
        for deals in (False, True)])
"""
    done = subprocess.run([sys.executable, "-c", script], env=os.environ | {engine.CPU_DEVICES_ENV: "2"},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["256", "512"]


RUN_THREADED_SWEEP = """
import sys
from dlsweep import api, engine, spec
engine.SEQUENTIAL_MIN_FLOPS = float(sys.argv[3])
engine.SMALL_WORK_FLOPS = 0.0               # the layout by the gradient's cost alone
sweep = spec.resolve({"name": "t", "model": "diagonal_net", "steps": 600, "dtype": "float32",
    "task": {"d": int(sys.argv[2]), "examples": 10, "sparsity": 5, "noise": 0.1},
    "axes": {"sigma0": {"logspace": [-2, -0.5], "num": 64}, "shape": [0.0, 0.9], "depth": [2], "lr": [2e-3]},
    "record": {"points": 10}, "stop": {"rel_loss": 0.0}})
program = api.compile_inputs(sweep)[0]
api.run(sweep, out=sys.argv[1], progress_bar=False)
print("sequential", program.sequential, "flops", program.step_flops)
"""


@pytest.mark.parametrize("d", [700, 2000])
def test_xla_thread_count_does_not_change_the_bits(tmp_path, d):
    """XLA splits a large product over its thread pool (as many threads as $NPROC, else as the
    cores the process may use), and a split sum rounds otherwise. A batched sweep's products stay
    under that size: the largest data a batched program holds (gradient just under
    `engine.SEQUENTIAL_MIN_FLOPS`: d = 700, 10 examples, chunks of 64) and a one-by-one sweep's
    (d = 2000) give the same tables with 1 thread and 4. Forced batched, the d = 2000 sweep's
    products (10 x 2000 by 2000 x 64) gave other tables with 1 thread and 4, so this test sees a
    layout whose products grow past that size."""
    assert_same_tables(*tables_of_runs(tmp_path, RUN_THREADED_SWEEP, [d, engine.SEQUENTIAL_MIN_FLOPS], [
        (f"threads-{threads}", {"NPROC": str(threads)}, f"sequential {d > 700}") for threads in (1, 4)]))


RUN_THREADED_SENSING = """
import sys
from dlsweep import api, spec
sweep = spec.resolve({"name": "t", "model": "matrix_sensing", "steps": 256, "dtype": "float32",
    "task": {"sigma_star": [6.0, 3.0], "top": 3, "d": 40, "measurements": 1000, "init": "gaussian"},
    "axes": {"depth": [2, 3], "sigma0": [1e-2, 1e-1], "lr": [2e-2]}, "record": {"points": 8}})
program = api.compile_inputs(sweep)[0]
api.run(sweep, out=sys.argv[1], progress_bar=False)
print("sequential", program.sequential)
"""


def test_matrix_sensings_threaded_products_do_not_change_the_bits(tmp_path):
    """Matrix sensing's gradient is autodiff's two products with its m x d^2 measurements (A vec(D)
    and A^T r; 1000 x 1600 here, 6.4 MB), which XLA splits over its thread pool by output rows
    (d = 50, m = 1,000 on the 2-core Xeon: 995 us a gradient with 1 thread, 501 us with 2): a
    one-by-one sweep gives the same tables with 1 thread and 4."""
    assert_same_tables(*tables_of_runs(tmp_path, RUN_THREADED_SENSING, [], [
        (f"threads-{threads}", {"NPROC": str(threads)}, "sequential True") for threads in (1, 4)]))


CPU_DEVICES = """
import jax
from dlsweep import engine
print(engine.use_cpu_cores(), jax.device_count())
"""


@pytest.mark.parametrize(("env", "expected"), [
    ({}, f"{len(os.sched_getaffinity(0))} {len(os.sched_getaffinity(0))}"),    # one per core this process may use
    ({engine.CPU_DEVICES_ENV: "3"}, "3 3"),
    ({engine.CPU_DEVICES_ENV: "3", "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}, "None 2"),   # the user's count
], ids=["cores", "setting", "xla-flags"])
def test_the_command_asks_jax_for_a_cpu_device_per_core(env, expected):
    """`engine.use_cpu_cores`, which the `dlsweep` command calls before JAX starts: one CPU device
    per usable core, or $DLSWEEP_CPU_DEVICES; a count XLA_FLAGS asks for is left alone."""
    clean = {k: v for k, v in os.environ.items() if k not in (engine.CPU_DEVICES_ENV, "XLA_FLAGS")}
    done = subprocess.run([sys.executable, "-c", CPU_DEVICES], env=clean | env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-2:] == expected.split()


def test_on_several_cpu_devices_a_batch_stays_on_the_first_and_work_is_dealt():
    """With the devices the command makes (here 2), a batched program is never partitioned over
    them (`engine.lockstep_devices`: the first alone, 64-row blocks, as on one; one of enough work
    is dealt instead, `Program.deals`), and a one-by-one chunk is dealt over both once its work
    reaches `SMALL_WORK_FLOPS` (`engine.deal_count`)."""
    script = """
import dataclasses
from dlsweep import api, engine, spec
engine.use_cpu_cores()
sweep = spec.resolve({"name": "t", "model": "toy", "steps": 1000, "task": {"sigma_star": [1.0]},
                      "axes": {"depth": [2], "sigma0": [0.1], "lr": [0.1]}})
program = api.compile_inputs(sweep)[0]
least = engine.SMALL_WORK_FLOPS / (100 * program.record_steps[-1])     # 100 rows to the step limit
deals = [engine.deal_count(dataclasses.replace(program, step_flops=flops), 100) for flops in (least * 0.999, least)]
print(len(engine.lockstep_devices()), engine.compiled_batch(24), engine.slot_count(1024), *deals)
"""
    done = subprocess.run([sys.executable, "-c", script], env=os.environ | {engine.CPU_DEVICES_ENV: "2"},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    # 100 rows x 1000 steps x the least flops = SMALL_WORK_FLOPS: dealt; 0.1% less: not
    assert done.stdout.split() == ["1", str(engine.LANES), str(1024 // engine.SLOT_SHARE), "1", "2"]


@pytest.mark.parametrize("value", ["0", "two", "-1"])
def test_a_bad_cpu_device_count_is_one_line_naming_the_setting(value):
    done = subprocess.run([sys.executable, "-m", "dlsweep.cli", "models"], env=os.environ | {engine.CPU_DEVICES_ENV: value},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip() == (f"dlsweep: error: {engine.CPU_DEVICES_ENV}={value!r}: expected a whole number "
                                   "of CPU devices >= 1 (1 runs on one core)")


@pytest.mark.slow
def test_compiled_programs_persist_in_the_cache_folder(tmp_path):
    """A run leaves its compiled program in $DLSWEEP_CACHE_DIR; `off` leaves nothing behind, and
    the results do not depend on the cache."""
    cache = tmp_path / "cache"
    _run_in_process(tmp_path, tmp_path / "a", 72, 9, {"DLSWEEP_CACHE_DIR": str(cache)})
    entries = {p.name for p in cache.iterdir()}
    assert any(name.startswith("jit_") for name in entries), entries
    _run_in_process(tmp_path, tmp_path / "b", 72, 9, {"DLSWEEP_CACHE_DIR": str(cache)})    # loaded, not compiled
    assert {p.name for p in cache.iterdir()} == entries
    _run_in_process(tmp_path, tmp_path / "c", 72, 9, {"DLSWEEP_CACHE_DIR": "off", "HOME": str(tmp_path / "home"),
                                                   "XDG_CACHE_HOME": str(tmp_path / "xdg")})
    assert not (tmp_path / "xdg").exists() and not (tmp_path / "home").exists()
    for folder in ("b", "c"):
        for x, y in zip(frames(tmp_path / "a"), frames(tmp_path / folder)):
            assert x.equals(y)


def test_depth_as_a_scalar_per_chunk_gives_the_same_trajectories(tmp_path, monkeypatch):
    """Chunks that follow the depth axis pass depth (and the single lr) to the program unbatched.
    Against the program where every hyperparameter is batched: the same hitting steps, stops and
    flags exactly; values equal up to rounding (XLA may fold scalar factors such as eta/N
    differently). Run in float64: some sigma come within 4.6e-6 of a level at a decisive step
    (the float64 recurrence of reference.toy_gd), less than two float32 programs differ here
    (4e-5), so in float32 the exact hits would hang on the CPU's rounding. Values to 1e-9
    relative: a rounding of u = 1.1e-16 a step over 1500 steps, amplified at most
    (s*/sigma0)^(1 - 2/N) = 2.4e3 at N = 6 and sigma0 = 1e-4 (the sensitivity of the growth to
    early errors): 4e-10 (measured 5e-14)."""
    sweep = toy_sweep(dtype="float64", axes={"depth": [1, 2, 3, 6], "sigma0": {"logspace": [-4, -0.5], "num": 9},
                                             "lr": [4e-3]})
    api.run(sweep, out=tmp_path / "batched", progress_bar=False)
    monkeypatch.setattr("dlsweep.grid.MIN_ALIGNED_GROUP", 1)
    monkeypatch.setattr("dlsweep.grid.ALIGNED_BATCHES", 0)
    api.run(sweep, out=tmp_path / "scalar", chunk_size=4, progress_bar=False)
    assert store.read_manifest(tmp_path / "batched")["group"] == 36
    assert store.read_manifest(tmp_path / "scalar")["group"] == 9           # 3 chunks per depth: 4 + 4 + 1
    assert store.read_manifest(tmp_path / "scalar")["n_chunks"] == 12
    (runs_a, traj_a), (runs_b, traj_b) = frames(tmp_path / "batched"), frames(tmp_path / "scalar")
    exact = [c for c in runs_a.columns if c != "final_loss"]
    assert len(runs_a) == 36 and runs_a[exact].equals(runs_b[exact])
    assert traj_a[["run_id", "step"]].equals(traj_b[["run_id", "step"]])
    values = [c for c in traj_a.columns if c.startswith("sigma_") or c == "loss"]
    np.testing.assert_allclose(traj_b[values].to_numpy(), traj_a[values].to_numpy(), rtol=1e-9, atol=0)
    np.testing.assert_allclose(runs_b.final_loss, runs_a.final_loss, rtol=1e-9, atol=0)


def test_a_program_with_a_constant_axis_refuses_a_chunk_where_it_varies():
    program, flat, task = api.compile_inputs(toy_sweep())
    compiled = engine.compile_chunk(program, 8, list(flat.columns), task, 0, constant={"depth": (1, 2)})
    with pytest.raises(ValueError, match="depth"):
        compiled(np.arange(16, 24), flat.rows(16, 24), task)          # depths 1 and 2
    with pytest.raises(ValueError, match="depth.*not among"):
        compiled(np.arange(40, 48), flat.rows(40, 48), task)          # depth 3


def test_no_levels_records_the_same_trajectories_without_hits(tmp_path):
    """`levels = []` runs the plain steps (nothing watched): the same recorded losses and sigmas
    as with hitting levels, and no hit columns."""
    sweep = toy_sweep(stop={"rel_loss": 0.0})
    api.run(sweep, out=tmp_path / "hits", progress_bar=False)
    api.run(toy_sweep(stop={"rel_loss": 0.0}, record={"points": 40, "levels": []}), out=tmp_path / "plain",
            progress_bar=False)
    runs_hits, traj_hits = frames(tmp_path / "hits")
    runs_plain, traj_plain = frames(tmp_path / "plain")
    assert not [c for c in runs_plain.columns if c.startswith("hit_")]
    assert traj_plain.equals(traj_hits)
    same = [c for c in runs_plain.columns]
    assert runs_plain[same].equals(runs_hits[same])


def test_a_level_the_block_saw_reached_at_a_group_start_is_hit_there_at_the_latest():
    """`engine._anchor_hits`, the hits a block knows before its replays: those from before the
    block, kept, and a level that the block's own exact observation saw reached at the start of
    a later group (g >= 1), at that step (start + g * size): the first hit is then at most that
    step even where a replay of an earlier group, another program, rounds its steps differently
    and finds nothing. Group 0's flags are the levels hit before the block (ignored here), and a
    group past the block's end (length 0) holds no observation. Expected values by hand: rows of
    4 groups of 16 steps, the last past the block's end, from step 100 (row 1 from its own step
    40, as in a refilled slot)."""
    never = np.iinfo(np.int32).max
    hit = jnp.asarray([[[-1, 7]], [[-1, -1]]], np.int32)                 # (rows, k = 1, levels = 2)
    reached = np.zeros((2, 4, 1, 2), bool)                               # (rows, groups, k, levels)
    reached[0, 0, 0, 0] = True       # group 0: ignored (its flags are the hits before the block)
    reached[0, 2, 0, :] = True       # level 0 seen at group 2's start; level 1 already hit at 7
    reached[1, 1, 0, 1] = reached[1, 2, 0, 1] = True      # level 1 seen at groups 1 and 2: the first counts
    reached[1, 3, 0, 0] = True       # level 0 seen at group 3, which is past this block's end
    groups = engine.ReplayGroups(None, None, jnp.asarray(reached), jnp.zeros((2, 4, 1)))
    lengths = jnp.asarray([16, 16, 16, 0])
    got = engine._anchor_hits(hit, groups, lengths, jnp.asarray([100, 40], np.int32), 16, never)
    np.testing.assert_array_equal(got, [[[100 + 2 * 16, 7]], [[never, 40 + 16]]])
    scalar_start = engine._anchor_hits(hit[:1], jax.tree.map(lambda x: x[:1], groups), lengths, 100, 16, never)
    np.testing.assert_array_equal(scalar_start, got[:1])
