"""The dataset folder: layout, manifest, atomic parts, reading it without dlsweep, resume,
refusal of a different sweep, --overwrite, a SIGKILLed writer, and the writer lock."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import jaxlib
import numpy as np
import pandas as pd
import pytest

import dlsweep
import conftest
from conftest import CLI, LONG_CHUNK, SMALL_CHUNK, wait_for
from dlsweep import api, cli, engine, grid, spec, store
from dlsweep.spec import SpecError
from dlsweep.store import StoreError
from dlsweep.warning import DlsweepWarning

N_SMALL = 12
PARTS = ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]


def visible(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` except the lock, with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != store.LOCK}


def assert_same_frames(a: Path, b: Path) -> None:
    pd.testing.assert_frame_equal(store.load(a), store.load(b), check_exact=True)
    pd.testing.assert_frame_equal(store.load_trajectories(a), store.load_trajectories(b), check_exact=True)


def copy_of(folder: Path, tmp_path: Path) -> Path:
    out = tmp_path / "copy"
    shutil.copytree(folder, out)
    return out


# ----------------------------------------------------------------------------- layout


def test_layout(small_dataset):
    assert visible(small_dataset) == ["chunks", "manifest.json", "runs", "sweep.toml", "trajectories"]
    assert sorted(os.listdir(small_dataset / "runs")) == PARTS          # no temp files left behind
    assert sorted(os.listdir(small_dataset / "trajectories")) == PARTS
    assert sorted(os.listdir(small_dataset / "chunks")) == [store.record_name(i) for i in range(3)]


def test_sweep_toml_is_the_resolved_spec(small_dataset, small_spec):
    written = spec.load(small_dataset / store.SPEC_FILE)
    original = spec.load(small_spec)
    assert written.spec_hash() == original.spec_hash() == store.read_manifest(small_dataset)["spec_hash"]
    assert written.to_dict() == original.to_dict()
    # resolved: the logspace is written out as its values, defaults are filled in
    text = (small_dataset / store.SPEC_FILE).read_text()
    assert "logspace" not in text and "[stop]" in text and "check_every = 64" in text


def test_sweep_toml_holds_the_overrides(tmp_path, small_spec):
    out = tmp_path / "o"
    api.run(small_spec, out=out, overrides=["steps=50", "axes.lr=[1e-3]", "axes.sigma0.num=2"], progress_bar=False)
    written = spec.load(out / store.SPEC_FILE)
    assert written.steps == 50 and written.axes["lr"].tolist() == [1e-3] and len(written.axes["sigma0"]) == 2
    assert written.spec_hash() == spec.load(small_spec, ["steps=50", "axes.lr=[1e-3]", "axes.sigma0.num=2"]).spec_hash()
    assert len(store.load(out)) == 3 * 2 * 1


def test_manifest(small_dataset, small_spec):
    manifest = json.loads((small_dataset / store.MANIFEST).read_text())
    assert manifest["spec_hash"] == spec.load(small_spec).spec_hash()
    assert manifest["name"] == "small" and manifest["model"] == "toy"
    assert manifest["versions"]["dlsweep"] == dlsweep.__version__
    assert manifest["versions"]["jax"] == jax.__version__
    assert manifest["versions"]["jaxlib"] == jaxlib.__version__
    assert manifest["backend"] == jax.default_backend()
    assert manifest["devices"] == [str(d) for d in jax.devices()]
    assert (manifest["n_runs"], manifest["chunk_size"], manifest["n_chunks"]) == (N_SMALL, SMALL_CHUNK, 3)
    runs = store.load(small_dataset)
    records = store.chunk_records(small_dataset)
    assert set(records) == {0, 1, 2}
    for index, record in records.items():
        start, stop = index * SMALL_CHUNK, (index + 1) * SMALL_CHUNK
        assert record["runs"] == [start, stop]
        assert record["traj_steps"] == runs["steps_run"][start:stop].sum()
        assert record["seconds"] >= 0
        assert record["plan"] == store.plan_of(manifest)               # enough to rebuild the manifest
        for table in (store.RUNS, store.TRAJECTORIES):                 # what a reader checks a part against
            data = (small_dataset / table / store.part_name(index)).read_bytes()
            assert record["parts"][table]["bytes"] == len(data)
            assert record["parts"][table]["rows"] == len(pd.read_parquet(small_dataset / table / store.part_name(index)))


# ----------------------------------------------------------------------------- reading


def test_load_is_sorted_and_tidy(small_dataset, small_spec):
    sweep = spec.load(small_spec)
    runs = dlsweep.load(small_dataset)
    assert runs.index.equals(pd.RangeIndex(N_SMALL))
    assert runs["run_id"].tolist() == list(range(N_SMALL))
    expected = {"run_id": "int64", "depth": "int64", "sigma0": "float64", "lr": "float64",
                "final_loss": "float64", "diverged": "bool", "converged": "bool", "steps_run": "int64"}
    hits = [f"hit_{i}_{pct}" for i in range(2) for pct in ("5", "50", "95")]
    assert list(runs.columns) == list(expected) + hits
    assert runs.dtypes.astype(str).to_dict() == expected | {h: "int64" for h in hits}
    # run_id is the row-major index of the grid: same hyperparameters whatever the chunking
    flat = grid.build(sweep.axes)
    for name, values in flat.columns.items():
        np.testing.assert_array_equal(runs[name].to_numpy(), values)
    # hitting steps are -1 or a step the trajectory reached
    for h in hits:
        assert ((runs[h] == -1) | ((runs[h] >= 0) & (runs[h] <= runs["steps_run"]))).all()
    assert runs["converged"].any() and not runs["converged"].all()      # the fixture has both kinds


def test_trajectories_are_consistent_with_runs(small_dataset, small_spec):
    """Rows at the recorded steps up to each trajectory's stop, plus one at `steps_run` itself when
    it stopped between recorded steps; the last row holds the final loss."""
    sweep = spec.load(small_spec)
    runs, traj = dlsweep.load(small_dataset), dlsweep.load_trajectories(small_dataset)
    assert list(traj.columns) == ["run_id", "step", "loss", "sigma_0", "sigma_1"]
    assert traj.index.equals(pd.RangeIndex(len(traj)))
    assert traj.dtypes.astype(str).tolist() == ["int64", "int64", "float64", "float64", "float64"]
    assert not traj.duplicated(["run_id", "step"]).any()
    recorded = engine.record_steps(sweep.record.schedule, sweep.record.points, sweep.steps).tolist()
    stopped_between = 0
    for row in runs.itertuples():
        mine = traj[traj.run_id == row.run_id]
        expected = [s for s in recorded if s <= row.steps_run]
        if row.steps_run not in recorded:
            expected.append(row.steps_run)
            stopped_between += 1
        assert mine["step"].tolist() == expected, row.run_id
        assert mine["loss"].iloc[-1] == row.final_loss
        assert mine["sigma_0"].iloc[0] == pytest.approx(row.sigma0, rel=1e-5)   # sigma starts at sigma0
    assert stopped_between > 0                                                  # the fixture has such runs
    assert set(traj["run_id"]) == set(runs["run_id"])


@pytest.mark.parametrize("stops", ["none", "mixed"])
def test_trajectory_rows_follow_each_runs_stop(small_spec, stops):
    """`store.chunk_frames`'s trajectories table from synthetic records, against a loop over the
    runs and recorded steps: a run's rows are the recorded steps before its stop and the first at
    or after it, shown at min(step, steps_run), each holding that record's values (with no run
    stopped early, every record: the table's fast path)."""
    sweep = spec.load(small_spec)
    steps = engine.record_steps(sweep.record.schedule, sweep.record.points, sweep.steps)
    n, k, rows = 7, len(sweep.task["sigma_star"]), len(steps)
    steps_run = np.full(n, steps[-1]) if stops == "none" else \
        np.array([0, steps[1], steps[1] + 1, steps[-2], steps[-1] - 1, steps[-1], steps[3]])
    rng = np.random.default_rng(0)
    loss, sigma = rng.random((rows, n), dtype=np.float32), rng.random((rows, n, k), dtype=np.float32)
    summary = {"final_loss": loss[-1], "diverged": np.zeros(n, bool), "converged": steps_run < steps[-1],
               "steps_run": steps_run, "hit": np.full((n, k, len(sweep.record.levels)), -1), "chosen": np.zeros((n, 0))}
    run_ids = np.arange(10, 10 + n)
    _, traj = store.chunk_frames(sweep, run_ids, api.compile_inputs(sweep)[1].rows(0, n), summary,
                                 (loss, {"sigma": sigma}), steps)
    expected = [(int(run_ids[b]), int(min(steps[r], steps_run[b])), loss[r, b], *sigma[r, b])
                for b in range(n) for r in range(rows) if r == 0 or steps[r - 1] < steps_run[b]]
    assert traj.column_names == ["run_id", "step", "loss", *(f"sigma_{i}" for i in range(k))]
    assert list(zip(*(traj.column(name).to_pylist() for name in traj.column_names))) == \
        [(run, step, float(value), *map(float, sigmas)) for run, step, value, *sigmas in expected]
    assert [traj.column(name).type for name in ("run_id", "step", "loss")] == ["int64", "int64", "float"]


def test_pandas_reads_the_folder_without_dlsweep(small_dataset):
    """Another process, which never imports dlsweep, reads the parts with plain pandas."""
    script = (
        "import json, sys\n"
        "import pandas as pd\n"
        "folder = sys.argv[1]\n"
        "runs = pd.read_parquet(folder + '/runs')\n"
        "traj = pd.read_parquet(folder + '/trajectories')\n"
        "assert 'dlsweep' not in sys.modules, 'dlsweep was imported'\n"
        "print(json.dumps({'runs': runs.sort_values('run_id').to_dict('list'), 'n_traj': len(traj),\n"
        "                  'traj_cols': list(traj.columns)}))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", script, str(small_dataset)], capture_output=True, text=True,
                          env=env, cwd=small_dataset, timeout=120)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    runs = dlsweep.load(small_dataset)
    assert got["runs"]["run_id"] == list(range(N_SMALL))
    for column in runs.columns:
        assert got["runs"][column] == runs[column].tolist(), column
    assert got["n_traj"] == len(dlsweep.load_trajectories(small_dataset))
    assert got["traj_cols"] == ["run_id", "step", "loss", "sigma_0", "sigma_1"]


def test_readers_skip_hidden_temp_files(small_dataset, tmp_path):
    folder = copy_of(small_dataset, tmp_path)
    for sub in (store.RUNS, store.TRAJECTORIES):
        (folder / sub / ".part-00003.parquet.tmp-12345").write_bytes(b"PAR1 half a file")
    assert len(pd.read_parquet(folder / store.RUNS)) == N_SMALL
    assert len(pd.read_parquet(folder / store.TRAJECTORIES)) == len(store.load_trajectories(small_dataset))
    assert_same_frames(folder, small_dataset)
    assert store.finished_chunks(folder) == {0, 1, 2}


def test_load_sorts_whatever_the_row_order_on_disk(small_dataset, tmp_path):
    folder = copy_of(small_dataset, tmp_path)
    for sub in (store.RUNS, store.TRAJECTORIES):
        for part in (folder / sub).glob("part-*.parquet"):
            frame = pd.read_parquet(part)
            frame.iloc[::-1].to_parquet(part, index=False)         # rows in reverse order
    assert pd.read_parquet(folder / store.RUNS)["run_id"].iloc[0] != 0
    with pytest.raises(StoreError, match="is damaged"):             # the parts no longer match their records
        store.load(folder)
    manifest = store.read_manifest(folder)
    for index in range(3):                                          # whole parts without a record are adopted
        (folder / store.CHUNKS / store.record_name(index)).unlink()
    plan = grid.chunks(manifest["n_runs"], manifest["chunk_size"], manifest["group"])
    assert store.adopt_parts(folder, manifest, plan) == [0, 1, 2]
    assert_same_frames(folder, small_dataset)


def test_load_of_a_folder_without_parts_is_a_store_error(tmp_path):
    with pytest.raises(StoreError, match="no finished chunks"):
        dlsweep.load(tmp_path)


def test_parts_are_written_under_a_dot_name_and_renamed(tmp_path, small_spec, monkeypatch):
    renames, links = [], []
    real_replace, real_link = os.replace, os.link

    def replace(src, dst):
        src, dst = Path(src), Path(dst)
        assert src.is_file()
        if dst.suffix == ".parquet":
            assert not dst.exists()                        # the final name appears only when the part is whole
        renames.append((src, dst))
        return real_replace(src, dst)

    def link(src, dst):
        links.append((Path(src), Path(dst)))
        return real_link(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(os, "link", link)
    out = tmp_path / "o"
    api.run(small_spec, out=out, chunk_size=SMALL_CHUNK, progress_bar=False, max_chunks=2)
    parts = [(s, d) for s, d in renames if d.suffix in (".parquet", ".json")]
    assert sorted(str(d.relative_to(out)) for _, d in parts) == sorted(
        [f"{sub}/{p}" for sub in (store.RUNS, store.TRAJECTORIES) for p in PARTS[:2]]
        + [f"{store.CHUNKS}/{store.record_name(i)}" for i in range(2)])
    for src, dst in parts:
        assert src.parent == dst.parent and src.name.startswith(f".{dst.name}")
    # a chunk's record (the "finished" mark) comes after its runs part, which comes after its trajectories
    order = [str(d.relative_to(out)) for _, d in parts]
    for i in range(2):
        assert (order.index(f"trajectories/{PARTS[i]}") < order.index(f"runs/{PARTS[i]}")
                < order.index(f"chunks/{store.record_name(i)}"))
    # sweep.toml is replaced atomically; the manifest is linked into place once, by the first writer
    assert store.SPEC_FILE in {d.name for _, d in renames}
    assert [d.name for _, d in links] == [store.MANIFEST]
    assert all(s.name.startswith(".") for s, _ in renames + links)
    assert not [p for p in out.rglob(".*.tmp-*")]


# ----------------------------------------------------------------------------- resume


def test_resume_after_max_chunks_equals_one_full_run(tmp_path, small_spec, small_dataset):
    out = tmp_path / "r"
    first = api.run(small_spec, out=out, chunk_size=SMALL_CHUNK, progress_bar=False, max_chunks=2)
    assert (first.chunks_run, first.chunks_skipped, first.chunks_missing) == (2, 0, 1)
    assert store.finished_chunks(out) == {0, 1}
    with pytest.warns(DlsweepWarning, match="partial: 2 of 3 chunks"):
        assert dlsweep.load(out)["run_id"].tolist() == list(range(8))
    summary = api.show(out)
    assert summary["missing_chunks"] == [2] and summary["runs"] == f"8 of {N_SMALL}"

    second = api.run(small_spec, out=out, progress_bar=False)          # chunk size comes from the manifest
    assert (second.chunks_run, second.chunks_skipped, second.chunks_missing) == (1, 2, 0)
    assert_same_frames(out, small_dataset)
    assert api.show(out)["missing_chunks"] == []

    before = snapshot(out / store.RUNS) | snapshot(out / store.TRAJECTORIES)
    third = api.run(small_spec, out=out, progress_bar=False)
    assert (third.chunks_run, third.chunks_skipped, third.chunks_missing) == (0, 3, 0)
    assert snapshot(out / store.RUNS) | snapshot(out / store.TRAJECTORIES) == before


def test_a_different_sweep_is_refused(tmp_path, small_spec, small_dataset):
    folder = copy_of(small_dataset, tmp_path)
    before = snapshot(folder)
    for overrides in (["steps=401"], ["axes.lr=[1e-2]"], ["record.levels=[0.5]"]):
        with pytest.raises(StoreError) as info:
            api.run(small_spec, out=folder, overrides=overrides, progress_bar=False)
        message = str(info.value)
        assert "overwrite=True" in message and "different sweep" in message, message
        assert store.read_manifest(folder)["spec_hash"] in message
    assert snapshot(folder) == before


def test_overwrite_starts_over(tmp_path, small_spec, small_dataset):
    folder = copy_of(small_dataset, tmp_path)
    (folder / store.RUNS / ".part-00007.parquet.tmp-1").write_bytes(b"junk")
    report = api.run(small_spec, out=folder, overrides=["axes.depth=[2]"], overwrite=True, progress_bar=False)
    assert (report.n_runs, report.chunks_skipped, report.chunks_missing) == (4, 0, 0)
    assert store.read_manifest(folder)["spec_hash"] == spec.load(small_spec, ["axes.depth=[2]"]).spec_hash()
    assert spec.load(folder / store.SPEC_FILE).axes["depth"].tolist() == [2]
    runs = dlsweep.load(folder)
    assert runs["run_id"].tolist() == [0, 1, 2, 3] and (runs["depth"] == 2).all()
    assert len(pd.read_parquet(folder / store.RUNS)) == 4                # the old sweep's parts are gone
    assert set(pd.read_parquet(folder / store.TRAJECTORIES)["run_id"]) == {0, 1, 2, 3}
    assert not (folder / store.RUNS / ".part-00007.parquet.tmp-1").exists()

    # --overwrite on the same sweep recomputes every chunk
    again = api.run(small_spec, out=folder, overrides=["axes.depth=[2]"], overwrite=True, progress_bar=False)
    assert (again.chunks_run, again.chunks_skipped) == (len(grid.chunks(4, store.read_manifest(folder)["chunk_size"])), 0)


def test_a_non_empty_folder_without_manifest_is_refused(tmp_path, small_spec):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("keep me")
    with pytest.raises(StoreError, match=r"overwrite=True"):
        api.run(small_spec, out=folder, progress_bar=False)
    assert visible(folder) == ["notes.txt"] and (folder / "notes.txt").read_text() == "keep me"


@pytest.mark.parametrize("kwargs", [
    {"overrides": ["axes.sigma0=[1e-40]"]},
    {"overrides": ["steps=0"]},
    {"overrides": ["nonsense"]},
    {"chunk_size": 0},
])
def test_a_bad_spec_leaves_no_folder(tmp_path, small_spec, kwargs):
    out = tmp_path / "never"
    with pytest.raises(SpecError):
        api.run(small_spec, out=out, progress_bar=False, **kwargs)
    assert not out.exists()


def test_a_bad_spec_leaves_an_existing_dataset_untouched(tmp_path, small_spec, small_dataset):
    folder = copy_of(small_dataset, tmp_path)
    before = snapshot(folder)
    with pytest.raises(SpecError):
        api.run(small_spec, out=folder, overrides=["axes.lr=[0]"], overwrite=True, progress_bar=False)
    assert snapshot(folder) == before


def test_chunk_status_survives_an_interruption_after_a_part_is_written(tmp_path, small_spec, monkeypatch):
    out = tmp_path / "i"
    real_write_chunk = store.write_chunk

    def write_then_stop(folder, index, runs, trajectories, record):
        real_write_chunk(folder, index, runs, trajectories, record)
        if index == 1:
            raise KeyboardInterrupt

    monkeypatch.setattr(store, "write_chunk", write_then_stop)
    with pytest.raises(KeyboardInterrupt):
        api.run(small_spec, out=out, chunk_size=SMALL_CHUNK, progress_bar=False)
    monkeypatch.setattr(store, "write_chunk", real_write_chunk)
    report = api.run(small_spec, out=out, progress_bar=False)
    assert report.chunks_missing == 0 and len(dlsweep.load(out)) == N_SMALL
    assert store.finished_chunks(out) == {0, 1, 2}
    assert api.show(out)["runs"] == f"{N_SMALL} of {N_SMALL}"


# ----------------------------------------------------------------------------- kill and lock


def _start_long_run(long_spec: Path, out: Path) -> subprocess.Popen:
    return subprocess.Popen([*CLI, "run", str(long_spec), "--out", str(out), "--chunk-size", str(LONG_CHUNK)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _assert_complete(folder: Path, reference) -> None:
    n = len(reference[0])
    runs = pd.read_parquet(folder / store.RUNS)                 # what a plain reader sees
    assert sorted(runs["run_id"]) == list(range(n))             # every trajectory exactly once
    traj = pd.read_parquet(folder / store.TRAJECTORIES)
    assert not traj.duplicated(["run_id", "step"]).any()
    assert set(traj["run_id"]) == set(range(n))
    pd.testing.assert_frame_equal(store.load(folder), reference[0], check_exact=True)
    pd.testing.assert_frame_equal(store.load_trajectories(folder), reference[1], check_exact=True)


def test_sigkill_mid_chunk_then_resume(tmp_path, long_spec, long_reference, capsys):
    n_chunks = len(grid.chunks(len(long_reference[0]), LONG_CHUNK))
    out = tmp_path / "killed"
    proc = _start_long_run(long_spec, out)
    wait_for(proc, lambda: store.finished_chunks(out), "the first chunk was finished")
    time.sleep(0.03)                                             # into the next chunk
    assert proc.poll() is None, "the writer finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL

    finished = store.finished_chunks(out)
    assert 1 <= len(finished) < n_chunks
    # the partial folder holds whole chunks only, for plain readers too
    partial = pd.read_parquet(out / store.RUNS)
    expected_ids = sorted(i for c in finished for i in range(c * LONG_CHUNK, (c + 1) * LONG_CHUNK))
    assert sorted(partial["run_id"]) == expected_ids
    assert api.show(out)["missing_chunks"] == sorted(set(range(n_chunks)) - finished)

    assert cli.main(["run", str(long_spec), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"{len(finished)} chunk(s) were already finished (resumed)" in printed
    assert "complete" in printed
    _assert_complete(out, long_reference)
    assert api.show(out)["missing_chunks"] == []


def test_a_second_writer_is_refused_not_interleaved(tmp_path, long_spec, long_reference, capsys):
    out = tmp_path / "busy"
    proc = _start_long_run(long_spec, out)
    wait_for(proc, lambda: (out / store.MANIFEST).exists(), "the writer started")
    codes = [cli.main(["run", str(long_spec), "--out", str(out)]),
             cli.main(["run", str(long_spec), "--out", str(out), "--overwrite"]),
             cli.main(["run", str(long_spec), "--out", str(out), "--set", "steps=10"])]
    said, err = capsys.readouterr()
    still_running = proc.poll() is None
    stdout, stderr = proc.communicate(timeout=120)
    assert still_running, "the writer finished before the second writer was tried; the test proves nothing"
    assert codes == [2, 2, 2]
    assert said == ""                       # refused before it says its size: only why, on stderr
    assert err.count("dlsweep: error: ") == 3
    assert "is being written" in err and f"pid {proc.pid}" in err
    assert "Traceback" not in err
    assert proc.returncode == 0, stderr
    _assert_complete(out, long_reference)
    # with the writer gone the folder can be resumed (nothing left to do)
    assert api.run(long_spec, out=out, progress_bar=False).chunks_run == 0


def test_lock_is_released_after_a_run(tmp_path, small_spec):
    out = tmp_path / "o"
    api.run(small_spec, out=out, chunk_size=SMALL_CHUNK, progress_bar=False, max_chunks=1)
    with store.locked(out):                                      # would raise if still held
        pass
    with store.locked(out):
        with pytest.raises(StoreError, match="being written"):
            api.run(small_spec, out=out, progress_bar=False)
    assert store.finished_chunks(out) == {0}


def test_finished_chunks_reads_any_number_of_digits(tmp_path):
    """record_name pads to five digits but allows more (10^5 chunks and up); temporaries, other
    files and an unreadable record are not finished chunks."""
    (tmp_path / store.CHUNKS).mkdir()
    for name in (store.record_name(3), store.record_name(123456)):
        (tmp_path / store.CHUNKS / name).write_text('{"runs": [0, 1]}')
    for name in (".00001.json.tmp-host-1", "00002.json.bak", "notes.txt"):
        (tmp_path / store.CHUNKS / name).write_text('{"runs": [0, 1]}')
    (tmp_path / store.CHUNKS / store.record_name(4)).write_text('{"runs": [0, ')
    assert store.finished_chunks(tmp_path) == {3, 123456}


# ----------------------------------------------------------------------------- no trajectories table


def test_a_sweep_without_trajectories_writes_its_runs_table_alone(tmp_path, small_dataset):
    """`[record] trajectories = false`: the same runs table bit for bit (the same program runs),
    no trajectories/ folder or parts, a record naming the runs part alone; a reader of the
    trajectories, a figure of them and `show` say why there are none; damage to the runs part is
    still found and a lost record is adopted from the runs part alone; the spec hash of a sweep that
    writes trajectories is the one it had before the key existed (no `trajectories` in its table)."""
    raw = conftest.merged(conftest.SMALL, {"record": {"trajectories": False}})
    sweep = spec.resolve(raw)
    assert "trajectories" not in spec.resolve(conftest.SMALL).to_dict()["record"]
    assert sweep.to_dict()["record"]["trajectories"] is False
    assert sweep.spec_hash() != spec.resolve(conftest.SMALL).spec_hash()
    out = tmp_path / "lean"
    plan = api.plan_run(sweep, out=out, chunk_size=SMALL_CHUNK)
    assert plan.disk.trajectories == 0 < plan.disk.runs
    assert "no trajectories: [record] trajectories = false" in plan.disk.describe()
    report = api.run(sweep, out=out, chunk_size=SMALL_CHUNK, progress_bar=False)
    assert report.chunks_run == 3
    assert visible(out) == ["chunks", "manifest.json", "runs", "sweep.toml"]
    pd.testing.assert_frame_equal(store.load(out), store.load(small_dataset), check_exact=True)
    assert all(set(r["parts"]) == {store.RUNS} for r in store.chunk_records(out).values())
    assert spec.load(out / store.SPEC_FILE).record.trajectories is False
    for read in (lambda: store.load_trajectories(out), lambda: api.plot_run(out, kind="trajectories")):
        with pytest.raises(StoreError, match=r"no trajectories table: its sweep sets \[record\] trajectories = false"):
            read()
    assert api.show(out)["trajectories"] == "not recorded ([record] trajectories = false)"
    assert "trajectories" not in api.show(small_dataset)

    damaged = copy_of(out, tmp_path)
    part = damaged / store.RUNS / PARTS[1]
    part.write_bytes(part.read_bytes()[:-8])
    assert set(store.damaged_chunks(damaged)) == {1}
    (damaged / store.CHUNKS / store.record_name(1)).unlink()
    (damaged / store.RUNS / PARTS[1]).unlink()
    (damaged / store.CHUNKS / store.record_name(2)).unlink()          # its runs part is whole: adopted
    again = api.run(sweep, out=damaged, progress_bar=False)
    assert (again.chunks_run, again.chunks_skipped) == (1, 2)
    assert store.chunk_records(damaged)[2].get("adopted") is True
    pd.testing.assert_frame_equal(store.load(damaged), store.load(out), check_exact=True)


@pytest.mark.parametrize("value", ["no", 0, [False]])
def test_record_trajectories_must_be_a_boolean(value):
    with pytest.raises(SpecError, match=r"record\.trajectories.*expected true or false"):
        spec.resolve(conftest.merged(conftest.SMALL, {"record": {"trajectories": value}}))
