"""Shards of one sweep sharing a dataset folder: concurrent shards give the dataset of a single
run, one shard runs exactly its chunks and a plain run fills the rest, the lock refuses a plain run
beside a shard (and the reverse) and a second copy of a shard but lets different shards coexist,
bad --shard values, `dlsweep submit` through submitit's local executor, and the removal of dead
writers' temporaries on resume."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from conftest import CLI, SMALL, spec_file, wait_for
from dlsweep import api, cli, store
from dlsweep import submit as submit_module
from dlsweep.spec import SpecError
from dlsweep.store import StoreError

N_SMALL = 12

# 4 trajectories, grid order (sigma0, lr) with lr varying fastest: run_ids 0 and 2 have lr = 1e-9,
# which never converges, so each of their chunks computes for tens of seconds (2e9 steps); run_ids
# 1 and 3 (lr = 5e-2) converge within a few hundred steps. With chunk size 1, shard 1/2 (chunks 0, 2)
# and a plain run are busy long enough to be raced and are killed at the end; shard 2/2 (chunks 1, 3)
# finishes in well under a second of compute.
SLOW = {**SMALL, "name": "slow", "steps": 2_000_000_000,
        "axes": {"depth": [2], "sigma0": [1e-2, 1e-1], "lr": [1e-9, 5e-2]}, "record": {"points": 10}}


def shard_lock(k: int, n: int) -> str:
    return f"{store.LOCK}-shard-{k}-of-{n}"


# ----------------------------------------------------------------------------- helpers / fixtures


@pytest.fixture(scope="module")
def slow_spec(tmp_path_factory) -> Path:
    return spec_file(tmp_path_factory, SLOW)


@pytest.fixture(scope="module")
def reference(tmp_path_factory, small_spec):
    """reference(chunk_size) -> (runs, trajectories) of one uninterrupted plain run of SMALL."""
    done = {}

    def get(chunk_size: int):
        if chunk_size not in done:
            folder = tmp_path_factory.mktemp(f"reference-{chunk_size}") / "data"
            api.run(small_spec, out=folder, chunk_size=chunk_size, progress_bar=False)
            done[chunk_size] = (store.load(folder), store.load_trajectories(folder))
        return done[chunk_size]

    return get


@pytest.fixture
def start():
    """start(*args) -> Popen of `python -m dlsweep.cli ARGS`; still-running ones are killed at teardown."""
    started: list[subprocess.Popen] = []

    def run(*args) -> subprocess.Popen:
        proc = subprocess.Popen([*CLI, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        started.append(proc)
        return proc

    yield run
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def claimed_by(path: Path, proc: subprocess.Popen) -> bool:
    """The lock file names `proc` as its holder (written once the flock is taken)."""
    try:
        return f"pid {proc.pid} on " in path.read_text()
    except FileNotFoundError:
        return False


def kill(proc: subprocess.Popen) -> None:
    proc.kill()
    proc.communicate()


def assert_same_dataset(folder: Path, reference) -> None:
    """Same frames as the reference, and what a plain reader sees holds every run_id exactly once."""
    runs_ref, traj_ref = reference
    runs = pd.read_parquet(folder / store.RUNS)
    assert sorted(runs["run_id"]) == list(range(len(runs_ref)))
    traj = pd.read_parquet(folder / store.TRAJECTORIES)
    assert not traj.duplicated(["run_id", "step"]).any()
    assert len(traj) == len(traj_ref)
    pd.testing.assert_frame_equal(store.load(folder), runs_ref, check_exact=True)
    pd.testing.assert_frame_equal(store.load_trajectories(folder), traj_ref, check_exact=True)


def assert_manifest_complete(folder: Path, chunk_size: int, runs: pd.DataFrame) -> None:
    manifest = store.read_manifest(folder)
    n_chunks = -(-N_SMALL // chunk_size)
    assert (manifest["n_runs"], manifest["chunk_size"], manifest["n_chunks"]) == (N_SMALL, chunk_size, n_chunks)
    records = store.chunk_records(folder)
    assert set(records) == set(range(n_chunks))
    for index, record in records.items():
        start, stop = index * chunk_size, min((index + 1) * chunk_size, N_SMALL)
        assert record["runs"] == [start, stop]
        # written by the shard that computed it, not adopted afterwards from the part files
        assert "adopted" not in record, (index, record)
        assert record["traj_steps"] == runs["steps_run"][start:stop].sum()


def no_temporaries(folder: Path) -> list[str]:
    return [str(p.relative_to(folder)) for p in folder.rglob(".*.tmp-*")]


# ----------------------------------------------------------------------------- 1. concurrent shards


def test_two_concurrent_shards_equal_one_run(tmp_path, small_spec, reference, start):
    out = tmp_path / "sharded"
    procs = [start("run", small_spec, "--out", out, "--chunk-size", 2, "--no-progress", "--shard", f"{k}/2")
             for k in (1, 2)]
    results = [p.communicate(timeout=180) for p in procs]
    for proc, (stdout, stderr) in zip(procs, results):
        assert proc.returncode == 0, stderr
        assert "ran 3 chunk(s)" in stdout, stdout          # each shard ran its own 3 of the 6 chunks
    assert sorted(os.listdir(out / store.RUNS)) == [store.part_name(i) for i in range(6)]
    assert sorted(os.listdir(out / store.TRAJECTORIES)) == [store.part_name(i) for i in range(6)]
    assert_same_dataset(out, reference(2))
    assert_manifest_complete(out, 2, reference(2)[0])
    assert api.show(out)["missing_chunks"] == []
    assert no_temporaries(out) == []


STARTER = """
import pathlib, sys, time
from dlsweep import store
folder, tag = pathlib.Path(sys.argv[1]), sys.argv[2]
(folder / f"ready-{tag}").touch()
while not (folder / "go").exists():
    time.sleep(0.001)
won = store.write_file(folder / store.MANIFEST, ('{"plan": "%s"}' % tag).encode(), exclusive=True)
print("won" if won else "lost")
"""


def test_concurrent_starts_agree_on_one_manifest(tmp_path):
    """Writers that start a folder at the same moment (shards on one or several machines) each
    link their manifest into place; exactly one wins, and every one then reads the winner's plan:
    no read-modify-write of a shared file, so nothing depends on a lock the file system may not
    share between machines."""
    folder = tmp_path / "m"
    folder.mkdir()
    tags = ["a", "b", "c", "d"]
    procs = [subprocess.Popen([sys.executable, "-c", STARTER, str(folder), tag], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for tag in tags]
    try:
        deadline = time.monotonic() + 60
        while not all((folder / f"ready-{tag}").exists() for tag in tags):
            dead = [p.communicate()[1] for p in procs if p.poll() is not None]
            assert time.monotonic() < deadline and not dead, f"a starter did not start: {dead}"
            time.sleep(0.01)
        (folder / "go").touch()
        outcomes = []
        for proc in procs:
            stdout, stderr = proc.communicate(timeout=120)
            assert proc.returncode == 0, stderr
            outcomes.append(stdout.strip())
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    assert sorted(outcomes) == ["lost", "lost", "lost", "won"]
    winner = tags[outcomes.index("won")]
    assert json.loads((folder / store.MANIFEST).read_text()) == {"plan": winner}
    assert no_temporaries(folder) == []


def test_a_shard_that_found_no_manifest_joins_the_one_linked_just_after(tmp_path, small_spec, reference, monkeypatch):
    """The race of two shards starting on an empty folder, made deterministic: shard 2 reads no
    manifest, and shard 1 links its manifest into place (the first step of its start, before its
    sweep.toml) before shard 2 goes on. Shard 2 must not take it for a stranger's file ("not empty
    and has no manifest.json"): its own manifest loses the exclusive link, it adopts shard 1's
    plan, and with shard 1 the two fill the dataset of one plain run."""
    out, elsewhere = tmp_path / "raced", tmp_path / "shard-1-plan"
    api.run(small_spec, out=elsewhere, chunk_size=2, shard=(1, 2), max_chunks=1, progress_bar=False)
    unpatched = store.read_manifest
    raced = []

    def read_then_let_shard_1_link(folder):
        found = unpatched(folder)
        if not raced:
            raced.append(store.write_file(out / store.MANIFEST, (elsewhere / store.MANIFEST).read_bytes(), exclusive=True))
        return found

    monkeypatch.setattr(store, "read_manifest", read_then_let_shard_1_link)
    second = api.run(small_spec, out=out, chunk_size=2, shard=(2, 2), progress_bar=False)
    monkeypatch.undo()
    first = api.run(small_spec, out=out, chunk_size=2, shard=(1, 2), progress_bar=False)
    assert raced == [True] and second.chunks_run == first.chunks_run == 3 and first.chunks_missing == 0
    assert store.read_manifest(out) == store.read_manifest(elsewhere)
    assert_same_dataset(out, reference(2))
    assert_manifest_complete(out, 2, reference(2)[0])
    assert no_temporaries(out) == []


# ----------------------------------------------------------------------------- 2. one shard alone, then fill


def test_one_shard_of_three_then_a_plain_run_fills_the_rest(tmp_path, small_spec, reference, capsys):
    out = tmp_path / "third"
    mine = [0, 3, 6, 9]
    assert cli.main(["run", str(small_spec), "--out", str(out), "--chunk-size", "1", "--no-progress",
                     "--shard", "1/3"]) == 0
    printed = capsys.readouterr().out
    assert "ran 4 chunk(s)" in printed and "8 chunk(s) still missing" in printed, printed
    for sub in (store.RUNS, store.TRAJECTORIES):
        assert sorted(os.listdir(out / sub)) == [store.part_name(i) for i in mine]
    assert store.finished_chunks(out) == set(mine)
    manifest = store.read_manifest(out)
    assert (manifest["chunk_size"], manifest["n_chunks"]) == (1, N_SMALL)
    assert set(store.chunk_records(out)) == set(mine)
    runs_ref, traj_ref = reference(1)
    pd.testing.assert_frame_equal(store.load(out), runs_ref[runs_ref.run_id.isin(mine)].reset_index(drop=True),
                                  check_exact=True)
    pd.testing.assert_frame_equal(store.load_trajectories(out),
                                  traj_ref[traj_ref.run_id.isin(mine)].reset_index(drop=True), check_exact=True)

    missing = [i for i in range(N_SMALL) if i not in mine]
    assert cli.main(["show", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "missing_chunks  " + ", ".join(map(str, missing)) in shown, shown
    assert "4 of 12" in shown and "4 of 12 finished (chunk size 1)" in shown
    assert cli.main(["show", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["missing_chunks"] == missing

    before = {p: (p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes())
              for sub in (store.RUNS, store.TRAJECTORIES) for p in (out / sub).iterdir()}
    assert cli.main(["run", str(small_spec), "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "ran 8 chunk(s)" in printed and "4 chunk(s) were already finished (resumed)" in printed, printed
    assert "complete" in printed
    # the shard's parts were not rewritten
    assert {p: (p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes()) for p in before} == before
    assert_same_dataset(out, reference(1))
    assert_manifest_complete(out, 1, runs_ref)
    assert api.show(out)["missing_chunks"] == []


def test_a_shard_adopts_its_own_recordless_parts_and_leaves_the_others(tmp_path, small_spec, reference, capsys):
    """Whole parts without a record are a chunk whose record is still being written, or one stopped
    just before it: a shard adopts those of its own chunks and leaves another shard's alone (that
    shard may write its record a moment later; its own next start, or a plain run, adopts them)."""
    out = tmp_path / "recordless"
    assert cli.main(["run", str(small_spec), "--out", str(out), "--chunk-size", "2", "--no-progress"]) == 0
    for index in (0, 1):                                      # chunk 0 is shard 1/2's, chunk 1 is shard 2/2's
        (out / store.CHUNKS / store.record_name(index)).unlink()
    capsys.readouterr()
    assert cli.main(["run", str(small_spec), "--out", str(out), "--no-progress", "--shard", "1/2"]) == 0
    assert "ran" not in capsys.readouterr().out
    records = store.chunk_records(out)
    assert records[0]["adopted"] is True and 1 not in records
    assert cli.main(["run", str(small_spec), "--out", str(out), "--no-progress", "--shard", "2/2"]) == 0
    assert "ran" not in capsys.readouterr().out
    assert store.chunk_records(out)[1]["adopted"] is True
    assert_same_dataset(out, reference(2))


# ----------------------------------------------------------------------------- 3. refusals


def assert_refused(codes, err: str, holder: subprocess.Popen, count: int) -> None:
    assert codes == [2] * count, (codes, err)
    assert err.count("dlsweep: error: ") == count, err
    assert err.count("is being written") == count, err
    assert f"pid {holder.pid} on " in err, err
    assert "Traceback" not in err, err


def test_a_plain_run_and_the_same_shard_are_refused_while_a_shard_runs(tmp_path, slow_spec, start, run_cli, capsys):
    out = tmp_path / "busy"
    holder = start("run", slow_spec, "--out", out, "--chunk-size", 1, "--no-progress", "--shard", "1/2")
    wait_for(holder, lambda: claimed_by(out / shard_lock(1, 2), holder), "shard 1/2 held its lock")
    codes = [cli.main(["run", str(slow_spec), "--out", str(out)]),
             cli.main(["run", str(slow_spec), "--out", str(out), "--max-chunks", "1"]),
             cli.main(["run", str(slow_spec), "--out", str(out), "--shard", "1/2"])]
    err = capsys.readouterr().err
    again = run_cli("run", slow_spec, "--out", out, "--shard", "1/2")     # a real second process too
    still_running = holder.poll() is None
    claim_kept = claimed_by(out / shard_lock(1, 2), holder)
    finished = store.finished_chunks(out)
    kill(holder)
    assert still_running, "shard 1/2 finished before the others were tried; the test proves nothing"
    assert_refused(codes, err, holder, 3)
    assert "(shard 1/2)" in err
    assert again.returncode == 2, again.stderr
    assert_refused([again.returncode], again.stderr, holder, 1)
    assert claim_kept, "a refused writer cleared the holder's lock file"
    assert finished == set()


def test_a_shard_is_refused_while_a_plain_run_runs(tmp_path, slow_spec, start, capsys):
    out = tmp_path / "busy"
    holder = start("run", slow_spec, "--out", out, "--chunk-size", 1, "--no-progress")
    wait_for(holder, lambda: claimed_by(out / store.LOCK, holder), "the plain run held its lock")
    codes = [cli.main(["run", str(slow_spec), "--out", str(out), "--shard", "1/2"]),
             cli.main(["run", str(slow_spec), "--out", str(out), "--shard", "2/2"]),
             cli.main(["run", str(slow_spec), "--out", str(out), "--shard", "1/1"])]
    err = capsys.readouterr().err
    still_running = holder.poll() is None
    claim_kept = claimed_by(out / store.LOCK, holder)
    kill(holder)
    assert still_running, "the plain run finished before the shards were tried; the test proves nothing"
    assert_refused(codes, err, holder, 3)
    assert claim_kept
    assert store.finished_chunks(out) == set()


# ----------------------------------------------------------------------------- 4. different shards coexist


def test_a_different_shard_runs_beside_a_running_shard(tmp_path, slow_spec, start, run_cli):
    out = tmp_path / "both"
    first = start("run", slow_spec, "--out", out, "--chunk-size", 1, "--no-progress", "--shard", "1/2")
    wait_for(first, lambda: claimed_by(out / shard_lock(1, 2), first), "shard 1/2 held its lock")
    second = run_cli("run", slow_spec, "--out", out, "--chunk-size", 1, "--no-progress", "--shard", "2/2")
    still_running = first.poll() is None
    claim_kept = claimed_by(out / shard_lock(1, 2), first)
    finished = store.finished_chunks(out)
    manifest = store.read_manifest(out)
    kill(first)
    assert still_running, "shard 1/2 finished before 2/2 ran; the test proves nothing"
    assert second.returncode == 0, second.stderr
    assert "is being written" not in second.stderr
    assert "ran 2 chunk(s)" in second.stdout and "2 chunk(s) still missing" in second.stdout, second.stdout
    assert finished == {1, 3}
    assert set(store.chunk_records(out)) == {1, 3} and manifest["n_chunks"] == 4
    assert claim_kept
    runs = store.load(out)
    assert runs["run_id"].tolist() == [1, 3] and (runs["lr"] == 5e-2).all()
    assert api.show(out)["missing_chunks"] == [0, 2]


# ----------------------------------------------------------------------------- 5. bad --shard values


@pytest.mark.parametrize("value", ["0/2", "3/2", "2", "x/y", "1/0", "-1/2", "1/2/3", ""])
def test_bad_shard_values_are_usage_errors(value, tmp_path, small_spec, capsys):
    out = tmp_path / "never"
    with pytest.raises(SystemExit) as info:
        cli.main(["run", str(small_spec), "--out", str(out), f"--shard={value}"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "usage:" in err and "--shard" in err and "expected K/N" in err, err
    assert "Traceback" not in err
    assert not out.exists()


def test_overwrite_with_shard_is_refused(tmp_path, small_spec, small_dataset, capsys):
    out = tmp_path / "never"
    assert cli.main(["run", str(small_spec), "--out", str(out), "--overwrite", "--shard", "1/2"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dlsweep: error: ") and "--overwrite" in err and "--shard" in err, err
    assert "Traceback" not in err
    assert not out.exists()
    # an existing dataset is left alone
    folder = tmp_path / "copy"
    shutil.copytree(small_dataset, folder)
    before = sorted(p.name for p in (folder / store.RUNS).iterdir())
    assert cli.main(["run", str(small_spec), "--out", str(folder), "--overwrite", "--shard", "2/2"]) == 2
    assert sorted(p.name for p in (folder / store.RUNS).iterdir()) == before
    assert store.finished_chunks(folder) == {0, 1, 2}




@pytest.mark.parametrize("shard", [
    (0, 2), (3, 2), (-1, 2), (1, 0), (1,),
    # (1.5, 2) passes the check, writes a folder and runs no chunk; ("1", "2") raises TypeError
    (1.5, 2),
    ("1", "2"),
], ids=lambda shard: ",".join(map(repr, shard)))
def test_api_rejects_a_bad_shard(shard, tmp_path, small_spec):
    out = tmp_path / "never"
    with pytest.raises(SpecError, match="shard="):
        api.run(small_spec, out=out, shard=shard, progress_bar=False)
    assert not out.exists()


# ----------------------------------------------------------------------------- 6. submit (local executor)


def test_submit_local_two_shards(tmp_path, small_spec, reference):
    out = tmp_path / "submitted"
    done = submit_module.submit(small_spec, 2, executor="local", out=out, chunk_size=2)
    assert Path(done.folder) == out
    assert len(done.job_ids) == 2 and len(set(done.job_ids)) == 2
    assert all(isinstance(j, str) and j for j in done.job_ids)
    assert done.results is not None and len(done.results) == 2
    results = sorted(done.results, key=lambda r: r["shard"])
    assert [r["shard"] for r in results] == [1, 2]
    assert [r["chunks_run"] for r in results] == [3, 3]
    runs_ref = reference(2)[0]
    assert sum(r["traj_steps"] for r in results) == runs_ref["steps_run"].sum()
    assert_same_dataset(out, reference(2))
    assert_manifest_complete(out, 2, runs_ref)
    assert no_temporaries(out) == []


def test_cli_submit_local(tmp_path, small_spec, reference, run_cli):
    out = tmp_path / "cli-submitted"
    done = run_cli("submit", small_spec, "--shards", 2, "--executor", "local", "--chunk-size", 2, "--out", out,
                   timeout=240)
    assert done.returncode == 0, done.stderr
    assert f"{out}: submitted 2 shard job(s)" in done.stdout, done.stdout
    assert f"{out}: runs {N_SMALL} of {N_SMALL}" in done.stdout, done.stdout
    assert "chunks 6 of 6 finished (chunk size 2)" in done.stdout
    assert_same_dataset(out, reference(2))


def test_a_failed_shard_is_reported_with_its_cause(tmp_path, small_spec, small_dataset):
    folder = tmp_path / "other"
    shutil.copytree(small_dataset, folder)
    with pytest.raises(StoreError) as info:
        submit_module.submit(small_spec, 1, executor="local", out=folder, overrides=["steps=50"])
    message = str(info.value)
    assert "a shard of" in message and "failed" in message
    assert "different sweep" in message, message


# ----------------------------------------------------------------------------- 7. submit: refusals


def test_submit_without_submitit(tmp_path, small_spec, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "submitit", None)          # `import submitit` raises ImportError
    out = tmp_path / "never"
    with pytest.raises(StoreError, match="pip install"):
        submit_module.submit(small_spec, 2, executor="local", out=out)
    assert not out.exists()
    assert cli.main(["submit", str(small_spec), "--shards", "2", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dlsweep: error: ") and "pip install" in err and "Traceback" not in err, err
    assert not out.exists()


@pytest.mark.parametrize("kwargs", [{"shards": 0}, {"shards": -1}, {"shards": 2, "chunk_size": 0},
                                    {"shards": 2, "executor": "pbs"}])
def test_submit_rejects_bad_arguments(kwargs, tmp_path, small_spec):
    out = tmp_path / "never"
    with pytest.raises(SpecError):
        submit_module.submit(small_spec, out=out, **kwargs)
    assert not out.exists()


def test_cli_submit_zero_shards(tmp_path, small_spec, capsys):
    out = tmp_path / "never"
    assert cli.main(["submit", str(small_spec), "--shards", "0", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dlsweep: error: ") and "--shards" in err and "Traceback" not in err, err
    assert not out.exists()


# ----------------------------------------------------------------------------- 8. dead temporaries


def test_dead_temporaries_are_removed_on_resume(tmp_path, small_spec, small_dataset):
    out = tmp_path / "t"
    api.run(small_spec, out=out, chunk_size=4, progress_bar=False, max_chunks=1)
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True)
    dead = int(finished.stdout)
    with pytest.raises(ProcessLookupError):
        os.kill(dead, 0)                                          # reaped: no such process
    host = platform.node()
    dead_runs = out / store.RUNS / f".part-00000.parquet.tmp-{host}-{dead}"
    dead_traj = out / store.TRAJECTORIES / f".part-00001.parquet.tmp-{host}-{dead}"
    # (not a chunk this resume writes: its own temporaries would take this very name)
    alive = out / store.RUNS / f".part-00042.parquet.tmp-{host}-{os.getpid()}"
    elsewhere = out / store.RUNS / f".part-00002.parquet.tmp-some-other-host-{dead}"
    for path in (dead_runs, dead_traj, alive, elsewhere):
        path.write_bytes(b"PAR1 half a file")
    assert sorted(pd.read_parquet(out / store.RUNS)["run_id"]) == [0, 1, 2, 3]     # readers skip them

    report = api.run(small_spec, out=out, progress_bar=False)
    assert (report.chunks_run, report.chunks_skipped, report.chunks_missing) == (2, 1, 0)
    assert not dead_runs.exists() and not dead_traj.exists()
    assert alive.exists() and alive.read_bytes() == b"PAR1 half a file"       # a live writer's stays
    assert elsewhere.exists()                                                  # another host's: unknown
    assert sorted(pd.read_parquet(out / store.RUNS)["run_id"]) == list(range(N_SMALL))
    assert len(pd.read_parquet(out / store.TRAJECTORIES)) == len(store.load_trajectories(small_dataset))
    pd.testing.assert_frame_equal(store.load(out), store.load(small_dataset), check_exact=True)
    pd.testing.assert_frame_equal(store.load_trajectories(out), store.load_trajectories(small_dataset),
                                  check_exact=True)


def test_shards_of_a_different_count_are_refused(tmp_path, small_spec):
    """A folder started by shards of N = 2 refuses a shard of N = 3, which would compute the same
    chunks again; a plain run may still fill it."""
    out = tmp_path / "n"
    api.run(small_spec, out=out, chunk_size=2, shard=(1, 2), progress_bar=False)
    with pytest.raises(StoreError, match=r"being filled by 2 shards, not 3"):
        api.run(small_spec, out=out, chunk_size=2, shard=(1, 3), progress_bar=False)
    report = api.run(small_spec, out=out, progress_bar=False)
    assert report.chunks_missing == 0
