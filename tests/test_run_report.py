"""A run says what it will do and what happened: its size before compiling, `--dry-run`'s plan,
an ETA after the first chunk, a chunk size not used as given, how the trajectories ended (a
warning naming where they diverged). The faults among these (a grid too large for memory, every
trajectory diverged, Ctrl-C) are driven through the CLI in tests/test_faults.py."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from conftest import SMALL_CHUNK, run_main, warning_lines
from dlsweep import api, grid, plan, spec, store, sweeping
from dlsweep.warning import DlsweepWarning

N_SMALL = 12                            # conftest.SMALL: depth 3 x sigma0 4 x lr 1
N_SMALL_CHUNKS = N_SMALL // SMALL_CHUNK


# ----------------------------------------------------------------------------- size first


def test_grid_limit_is_a_share_of_memory():
    """The limit is exact arithmetic: 3 axes of 8-byte values within 1/16 of the memory."""
    memory = plan.GRID_MEMORY_SHARE * plan.GRID_BYTES_PER_VALUE * 3 * 1000      # room for 1000 trajectories
    assert plan.grid_too_large({"depth": 10, "sigma0": 10, "lr": 10}, memory) is None
    refused = plan.grid_too_large({"depth": 10, "sigma0": 10, "lr": 11}, memory)
    assert refused.startswith("1.1e+03 trajectories (depth 10 x sigma0 10 x lr 11)") and "at most 1e+03" in refused


def test_run_says_its_size_before_compiling_and_an_eta_after_the_first_chunk(tmp_path, small_spec, capsys,
                                                                               monkeypatch):
    printed_before_compile = []
    compile_sweep = sweeping.compile_sweep

    def spy(*args, **kwargs):
        printed_before_compile.append(capsys.readouterr().out)
        return compile_sweep(*args, **kwargs)

    monkeypatch.setattr(sweeping, "compile_sweep", spy)
    out = tmp_path / "o"
    code, stdout, err = run_main(capsys, "run", small_spec, "--out", out, "--chunk-size", SMALL_CHUNK)
    assert code == 0 and err == ""
    # 12 trajectories x 400 steps: the upper bound on trajectory-steps (conftest.SMALL)
    assert printed_before_compile[0].startswith(
        f"{out}: {N_SMALL} trajectories (depth 3 [1, 2, 3] x sigma0 4 [0.001 .. 0.1] x lr 1 [0.05]) x 400 steps = "
        "at most 4.8e+03 trajectory-steps; disk about ")
    first, = [line for line in stdout.splitlines() if line.startswith("first chunk: ")]   # no terminal: one ETA line
    assert f"{SMALL_CHUNK} trajectories in " in first and f"{N_SMALL_CHUNKS - 1} chunk(s) left, about " in first


def test_the_size_said_before_compiling_counts_the_chunks_the_run_cuts(tmp_path, monkeypatch):
    """The size line, said before anything is compiled, estimates the disk (each chunk's Parquet
    footers) with the chunk plan the run then cuts when its memory does not bind
    (`default_chunk_size(by_memory=False)`): expected, the manifest's count, on a one-by-one toy
    sweep of 130 runs (more than a small sweep's 64) whose chunks are capped by their work
    (`SEQUENTIAL_CHUNK_FLOPS` set to 40 runs' worth, rounded to whole batches: 3 chunks), where
    the states a lockstep chunk keeps in cache would allow one."""
    from dlsweep import engine

    raw = {"name": "capped", "model": "toy", "steps": 200, "task": {"sigma_star": [3.0, 1.0]},
           "axes": {"depth": [2], "sigma0": {"logspace": [-3, -1], "num": 130}, "lr": [0.01]}}
    sweep = spec.resolve(raw)
    program = api.compile_inputs(sweep)[0]
    assert program.sequential
    monkeypatch.setattr(engine, "SEQUENTIAL_CHUNK_FLOPS", 40 * sweep.steps * program.step_flops)
    counted = []
    disk = sweeping._disk
    monkeypatch.setattr(sweeping, "_disk", lambda *args: counted.append(args[-1]) or disk(*args))
    said = []
    api.run(sweep, out=tmp_path / "o", progress_bar=False, say=said.append)
    manifest = store.read_manifest(tmp_path / "o")
    assert said[0].startswith(f"{tmp_path / 'o'}: 130 trajectories") and manifest["n_chunks"] == 3
    assert counted[0] == manifest["n_chunks"]          # the first: the size line's, before compiling
    assert len(grid.chunks(130, engine.max_chunk(engine.lockstep_state_bytes(program, list(sweep.axes), {})))) == 1


def test_disk_estimate_matches_a_run_folder(tmp_path, small_spec):
    """Every trajectory runs all 3000 steps (no levels, no loss small enough to stop), so the
    trajectories table has exactly the rows the estimate counts; the bytes per value are
    averages measured on larger folders (plan.FLOAT_BYTES, plan.TRAJECTORY_FLOAT_BYTES), so the
    estimate promises a factor 1.5 either way (on this folder: runs 1.00, trajectories 1.15)."""
    overrides = ["steps=3000", "axes.lr=[1e-3]", "record.levels=[]", "stop.rel_loss=1e-30", "record.points=100"]
    out = tmp_path / "o"
    report = api.run(small_spec, out=out, overrides=overrides, progress_bar=False)
    assert report.outcome.at_step_limit == N_SMALL
    estimate = api.plan_run(small_spec, out=tmp_path / "fresh", overrides=overrides).disk
    recorded = len(api.compile_inputs(spec.load(small_spec, overrides))[0].record_steps)
    assert len(store.load_trajectories(out)) == N_SMALL * recorded
    written = {table: sum(p.stat().st_size for p in (out / table).glob("part-*.parquet"))
               for table in (store.RUNS, store.TRAJECTORIES)}
    for estimated, actual in [(estimate.runs, written[store.RUNS]), (estimate.trajectories, written[store.TRAJECTORIES])]:
        assert 1 / 1.5 <= estimated / actual <= 1.5, (estimate, written)


def test_dry_run_prints_the_plan_and_writes_nothing(tmp_path, small_spec, capsys):
    out = tmp_path / "o"
    code, stdout, err = run_main(capsys, "run", small_spec, "--out", out, "--chunk-size", SMALL_CHUNK, "--dry-run")
    assert code == 0 and err == ""
    assert not out.exists()
    lines = stdout.splitlines()
    assert lines[0] == f"{out}: plan of sweep 'small' (model toy, float32); nothing written"
    assert "  depth        3  1, 2, 3" in lines and "  sigma0       4  0.001, 0.00464159, 0.0215443, 0.1" in lines
    assert f"trajectories: {N_SMALL}, 400 steps each, 23 recorded: at most 4.8e+03 trajectory-steps" in lines
    chunks, = [line for line in lines if line.startswith("chunks: ")]
    assert chunks.startswith(f"chunks: {N_SMALL_CHUNKS} of up to {SMALL_CHUNK} trajectories (chunk size {SMALL_CHUNK}, "
                             "given); one compiled program; chunks cut the grid in run-id order")
    assert "one value per chunk: lr" in chunks
    assert f"this run: {N_SMALL_CHUNKS} chunk(s) to run, 0 already finished" in lines
    assert lines[-1].startswith("disk about ")

    # on a folder that holds a partial run: its plan, and the chunk size given is ignored (a warning)
    assert run_main(capsys, "run", small_spec, "--out", out, "--chunk-size", SMALL_CHUNK, "--max-chunks", 1)[0] == 0
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    code, stdout, err = run_main(capsys, "run", small_spec, "--out", out, "--chunk-size", 5, "--dry-run")
    assert code == 0 and sorted(p.relative_to(out) for p in out.rglob("*")) == before
    assert f"chunks: {N_SMALL_CHUNKS} of up to {SMALL_CHUNK} trajectories (chunk size {SMALL_CHUNK}, fixed by the folder)" in stdout
    assert f"this run: {N_SMALL_CHUNKS - 1} chunk(s) to run, 1 already finished" in stdout
    assert warning_lines(err) == [f"dlsweep: warning: --chunk-size 5 ignored: {out} was started with chunks of "
                                  f"{SMALL_CHUNK}, which fix its chunk plan when resumed (start over with --overwrite "
                                  "to change it)"]


# ----------------------------------------------------------------------------- chunk size


def test_chunk_size_ignored_on_resume_says_so(tmp_path, small_spec, capsys):
    out = tmp_path / "o"
    assert run_main(capsys, "run", small_spec, "--out", out, "--chunk-size", SMALL_CHUNK, "--max-chunks", 1)[0] == 0
    code, stdout, err = run_main(capsys, "run", small_spec, "--out", out, "--chunk-size", 5)
    assert code == 0 and "complete" in stdout
    assert warning_lines(err) == [f"dlsweep: warning: --chunk-size 5 ignored: {out} was started with chunks of "
                                  f"{SMALL_CHUNK}, which fix its chunk plan when resumed (start over with --overwrite "
                                  "to change it)"]
    assert err.count("\n") == 1


def test_chunk_size_cut_by_the_leading_axis_says_so():
    """depth 2 x sigma0 300: chunks follow depth (300 >= grid.MIN_ALIGNED_GROUP runs a value),
    so chunks of 500 become two of 300."""
    axes = {"depth": np.array([1, 2]), "sigma0": np.geomspace(1e-3, 1e-1, 300), "lr": np.array([1e-3])}
    group = grid.aligned_group(axes)
    manifest = {"chunk_size": 500, "n_runs": 600, "group": group}
    notes = plan.chunk_size_notes(500, manifest, Path("runs/x"), grid.chunks(600, 500, group), axes)
    assert notes == ["chunk_size=500 gives chunks of at most 300: chunks never straddle two values of depth "
                     "(300 trajectories each), so depth enters the program as one value per chunk"]
    assert plan.chunk_size_notes(None, manifest, Path("runs/x"), grid.chunks(600, 500, group), axes) == []
    fits = {"chunk_size": 300, "n_runs": 600, "group": group}
    assert plan.chunk_size_notes(300, fits, Path("runs/x"), grid.chunks(600, 300, group), axes) == []


# ----------------------------------------------------------------------------- how the trajectories ended


def test_counts_cover_the_whole_folder_not_only_this_call(tmp_path, small_spec, capsys):
    out = tmp_path / "o"
    code, stdout, _ = run_main(capsys, "run", small_spec, "--out", out, "--chunk-size", SMALL_CHUNK, "--max-chunks", 1)
    assert stdout.rstrip().splitlines()[-1].startswith(
        f"{out}: {N_SMALL} trajectories, {N_SMALL_CHUNKS - 1} chunk(s) still missing; of the {SMALL_CHUNK} finished: ")
    report = api.run(small_spec, out=out, progress_bar=False)
    runs = store.load(out)
    assert report.chunks_run == N_SMALL_CHUNKS - 1 and report.outcome.runs == N_SMALL
    assert (report.outcome.converged, report.outcome.diverged, report.outcome.at_step_limit) == (
        int(runs.converged.sum()), int(runs.diverged.sum()), int((runs.steps_run == 400).sum()))


def outcome_of(diverged: list[bool], lr: list[float], depth: list[int]) -> plan.Outcome:
    runs = pd.DataFrame({"depth": depth, "lr": lr, "diverged": diverged, "converged": [not d for d in diverged]})
    axes = {"depth": np.unique(depth), "lr": np.unique(lr)}
    return plan.Outcome.of(runs, axes, steps=100)


def test_diverged_share_below_five_percent_is_only_counted():
    one_in_forty = outcome_of([True] + [False] * 39, [0.1] * 20 + [0.2] * 20, [1, 2, 3, 4] * 10)
    assert one_in_forty.diverged == 1 and one_in_forty.warning() is None


def test_diverged_share_of_five_percent_names_the_cells():
    two_in_forty = outcome_of([True, False, True] + [False] * 37, [0.2] * 20 + [0.1] * 20, [1, 2, 3, 4] * 10)
    assert two_in_forty.warning() == ("2 of 40 trajectories diverged (5%): 2 of 20 at lr=0.2 (depth 1, 3); "
                                      "try a smaller lr there")


def test_a_whole_lr_diverged_is_warned_however_small_its_share():
    """One lr of 30 diverged entirely: 3% of the runs, but nothing at that lr is usable."""
    lr = np.repeat(np.geomspace(1e-3, 1, 30), 2).tolist()
    outcome = outcome_of([False] * 58 + [True, True], lr, [1, 2] * 30)
    assert outcome.warning() == "2 of 60 trajectories diverged (3%): 2 of 2 at lr=1 (depth 1..2); try a smaller lr there"


def test_diverged_cells_list_the_largest_shares_first():
    lr = [0.1] * 4 + [0.2] * 4 + [0.3] * 4 + [0.4] * 4 + [0.5] * 4
    diverged = [True, False, False, False] + [True, True, False, False] + [True] * 3 + [False] + [True] * 4 * 2
    cells = outcome_of(diverged, lr, [1, 2, 3, 4] * 5).diverged_cells
    assert cells == ("4 of 4 at lr=0.5 (depth 1..4); 4 of 4 at lr=0.4 (depth 1..4); 3 of 4 at lr=0.3 (depth 1..3); "
                     "and at 2 more lr value(s)")


def test_a_run_beyond_the_free_disk_space_warns_and_runs(tmp_path, small_spec, monkeypatch):
    """The chunks to run would write more than the file system holds free (999 bytes here, less
    than any sweep's runs table): one DlsweepWarning naming the folder, the estimate and the free
    space, and the run goes on (a full disk stops it after its last finished chunk)."""
    free = 999
    monkeypatch.setattr(plan.shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10**9, 10**9 - free, free))
    out = tmp_path / "o"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = api.run(small_spec, out=out, progress_bar=False)
    ours = [str(w.message) for w in caught if w.category is DlsweepWarning]
    assert len(ours) == 1 and ours[0].startswith(f"{out}: the chunks to run may write about "), ours
    assert "more than the 999 B free there" in ours[0], ours
    assert report.chunks_missing == 0 and len(api.load(out)) == N_SMALL


def test_the_public_readers_say_a_partial_folder(tmp_path, small_spec):
    """`api.load` / `dlsweep.load` and `load_trajectories` of a folder with 1 of its 3 chunks
    finished: the finished chunk's runs, a DlsweepWarning "partial: 1 of 3 chunks" and the same
    note in `attrs["partial"]`; of a complete folder no warning and an empty note."""
    import dlsweep

    out = tmp_path / "o"
    api.run(small_spec, out=out, chunk_size=SMALL_CHUNK, max_chunks=1, progress_bar=False)
    for read in (api.load, dlsweep.load, api.load_trajectories):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            table = read(out)
        assert [str(w.message) for w in caught] == [f"{out}: partial: 1 of 3 chunks; the table holds the finished "
                                                    "chunks' runs only"]
        assert table.attrs["partial"] == "partial: 1 of 3 chunks" and set(table.run_id) == set(range(SMALL_CHUNK))
    api.run(small_spec, out=out, progress_bar=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert api.load(out).attrs["partial"] == "" and len(api.load_trajectories(out).run_id.unique()) == N_SMALL
