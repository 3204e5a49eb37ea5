"""Faults a finished or running sweep meets, driven through the command line: damaged parts
(truncated, emptied, changed), a damaged manifest, a full disk, a read-only folder, a grid too
large for memory, every trajectory diverged, Ctrl-C at any moment. Each test
asserts the message the user reads and that nothing already written is lost
(docs/reliability.md lists what is promised and which test proves it)."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest

from conftest import CLI, LONG_CHUNK, SMALL_CHUNK, run_main, warning_lines
from dlsweep import grid, interrupt, plan, store


N_SMALL = 12              # conftest.SMALL: depth 3 x sigma0 4 x lr 1
N_SMALL_CHUNKS = N_SMALL // SMALL_CHUNK


def copy_of(folder: Path, tmp_path: Path, name: str = "copy") -> Path:
    out = tmp_path / name
    shutil.copytree(folder, out)
    return out


def assert_same_dataset(folder: Path, reference: Path) -> None:
    pd.testing.assert_frame_equal(store.load(folder), store.load(reference), check_exact=True)
    pd.testing.assert_frame_equal(store.load_trajectories(folder), store.load_trajectories(reference), check_exact=True)


def part(folder: Path, index: int, table: str = store.RUNS) -> Path:
    return folder / table / store.part_name(index)


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def empty(path: Path) -> None:
    path.write_bytes(b"")


def flip_a_byte(path: Path) -> None:
    """Same size, one byte of the data pages changed: only the checksum can tell."""
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0xFF
    path.write_bytes(bytes(data))


DAMAGES = {"truncated": truncate, "zero bytes": empty, "one byte changed": flip_a_byte}


# ----------------------------------------------------------------------------- damaged parts


@pytest.mark.parametrize("damage", DAMAGES)
@pytest.mark.parametrize("table", [store.RUNS, store.TRAJECTORIES])
def test_a_damaged_part_is_named_by_readers_and_computed_again_on_resume(damage, table, tmp_path, small_spec,
                                                                         small_dataset, capsys):
    folder = copy_of(small_dataset, tmp_path)
    damaged = part(folder, 1, table)
    DAMAGES[damage](damaged)
    kept = {i: part(folder, i).read_bytes() for i in (0, 2)}

    # show names the chunk and the file, and says what to do; the run is not complete
    code, out, err = run_main(capsys, "show", folder)
    assert code == 0, err
    assert f"1 ({table}/{store.part_name(1)}:" in out and "partial: 2 of 3 chunks" in out, out
    assert "computes the damaged chunks again" in out
    # readers of the tables name the file and what to do, without a traceback
    for verb in (["thresholds", folder], ["plot", folder, "--kind", "trajectories"]):
        code, out, err = run_main(capsys, *verb)
        if table == store.RUNS or verb[0] == "plot":
            assert code == 2, (verb, out, err)
            assert f"{damaged} is damaged" in err and "run the sweep again on this folder" in err, err
            assert "Traceback" not in err and err.count("\n") == 1, err
    # a resumed run says which chunk it computes again, recomputes that one only, and the result is whole
    code, out, err = run_main(capsys, "run", small_spec, "--out", folder, "--no-progress")
    assert code == 0, err
    assert f"chunk 1 is damaged ({table}/{store.part_name(1)}" in err and "computing it again" in err, err
    assert "ran 1 chunk(s)" in out and "2 chunk(s) were already finished" in out, out
    assert {i: part(folder, i).read_bytes() for i in (0, 2)} == kept
    assert_same_dataset(folder, small_dataset)
    assert store.damaged_chunks(folder) == {}


def test_a_missing_part_counts_as_damaged(tmp_path, small_spec, small_dataset, capsys):
    folder = copy_of(small_dataset, tmp_path)
    part(folder, 2, store.TRAJECTORIES).unlink()
    assert list(store.damaged_chunks(folder)) == [2]
    code, out, err = run_main(capsys, "run", small_spec, "--out", folder, "--no-progress")
    assert code == 0 and "chunk 2 is damaged" in err and "ran 1 chunk(s)" in out, (out, err)
    assert_same_dataset(folder, small_dataset)


# ----------------------------------------------------------------------------- damaged manifest


@pytest.mark.parametrize("damage", ["garbage", "zero bytes", "missing keys", "deleted"])
def test_a_damaged_manifest_is_rebuilt_from_the_chunk_records(damage, tmp_path, small_spec, small_dataset, capsys):
    folder = copy_of(small_dataset, tmp_path)
    original = json.loads((folder / store.MANIFEST).read_text())
    path = folder / store.MANIFEST
    {"garbage": lambda: path.write_bytes(b"\x00{not json"), "zero bytes": lambda: path.write_bytes(b""),
     "missing keys": lambda: path.write_text('{"name": "small"}'), "deleted": path.unlink}[damage]()
    parts = {p: p.read_bytes() for sub in (store.RUNS, store.TRAJECTORIES) for p in (folder / sub).iterdir()}

    code, out, err = run_main(capsys, "show", folder)            # readers work from the records
    assert code == 0 and "complete" in out and "read from the chunk records" in out, (out, err)
    code, out, err = run_main(capsys, "run", small_spec, "--out", folder, "--no-progress")
    assert code == 0, err
    assert "rebuilt from the chunk records" in err and "overwrite" not in err, err
    assert "3 chunk(s) were already finished" in out and "ran" not in out, out      # nothing computed again
    rebuilt = json.loads(path.read_text())
    assert {k: rebuilt[k] for k in store.PLAN_KEYS} == {k: original[k] for k in store.PLAN_KEYS}
    assert {p: p.read_bytes() for p in parts} == parts
    assert_same_dataset(folder, small_dataset)


def test_a_damaged_manifest_without_finished_chunks_of_the_same_sweep_starts_over(tmp_path, small_spec, small_dataset,
                                                                                capsys):
    """Killed right after the manifest was written, with the manifest then damaged: the folder
    holds the same sweep's sweep.toml and no finished chunk, so there is nothing to keep."""
    folder = copy_of(small_dataset, tmp_path)
    shutil.rmtree(folder / store.CHUNKS)
    for sub in (store.RUNS, store.TRAJECTORIES):
        for p in (folder / sub).iterdir():
            p.unlink()
    (folder / store.MANIFEST).write_bytes(b"{")
    code, out, err = run_main(capsys, "run", small_spec, "--out", folder, "--no-progress")
    assert code == 0, err
    assert_same_dataset(folder, small_dataset)


def test_a_damaged_manifest_of_another_sweep_is_not_touched(tmp_path, small_spec, small_dataset, capsys):
    folder = copy_of(small_dataset, tmp_path)
    shutil.rmtree(folder / store.CHUNKS)
    (folder / store.MANIFEST).write_bytes(b"{")
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".")}
    code, out, err = run_main(capsys, "run", small_spec, "--out", folder, "--no-progress", "--set", "steps=401")
    assert code == 2 and "is damaged" in err and "--overwrite" in err, err
    assert {p: p.read_bytes() for p in before} == before


def test_parts_whose_record_is_missing_are_adopted_not_recomputed(tmp_path, small_spec, small_dataset, capsys):
    """A run stopped between its last part and the chunk's record: the whole parts are kept."""
    folder = copy_of(small_dataset, tmp_path)
    (folder / store.CHUNKS / store.record_name(1)).unlink()
    parts = {p: p.read_bytes() for sub in (store.RUNS, store.TRAJECTORIES) for p in (folder / sub).iterdir()}
    code, out, err = run_main(capsys, "run", small_spec, "--out", folder, "--no-progress")
    assert code == 0 and "ran" not in out, (out, err)
    assert store.chunk_records(folder)[1]["adopted"] is True
    assert {p: p.read_bytes() for p in parts} == parts
    assert_same_dataset(folder, small_dataset)


@pytest.mark.parametrize("damage", ["zero bytes", "not json"])
def test_an_unreadable_chunk_record_is_named_and_its_whole_parts_kept(damage, tmp_path, small_spec, small_dataset,
                                                                     capsys):
    """A record emptied or overwritten: `show` names it among the damaged chunks, a reader that
    finds no other finished chunk says which record is unreadable and how to resume, and the
    rerun keeps the chunk's whole parts (adopted) with one warning naming the record."""
    folder = copy_of(small_dataset, tmp_path)
    record = folder / store.CHUNKS / store.record_name(1)
    record.write_bytes(b"" if damage == "zero bytes" else b"not json")
    parts = {p: p.read_bytes() for sub in (store.RUNS, store.TRAJECTORIES) for p in (folder / sub).iterdir()}
    code, out, err = run_main(capsys, "show", folder)
    assert code == 0 and "1 (chunks/00001.json unreadable)" in out and "--out" in out, (out, err)
    alone = copy_of(folder, tmp_path, "alone")
    for index in (0, 2):
        (alone / store.CHUNKS / store.record_name(index)).unlink()
    code, out, err = run_main(capsys, "thresholds", alone)
    assert code == 2 and "no finished chunk (the record of chunk 1 is unreadable)" in err and "--out" in err, err
    code, out, err = run_main(capsys, "run", small_spec, "--out", folder, "--no-progress")
    assert code == 0 and "ran" not in out, (out, err)
    assert warning_lines(err) == [f"dlsweep: warning: {folder}: chunk 1's record chunks/00001.json was unreadable; its "
                                  "parts are whole and kept, the record written again"], err
    assert {p: p.read_bytes() for p in parts} == parts
    assert_same_dataset(folder, small_dataset)


@pytest.mark.parametrize("damage", ["deleted", "not toml", "another sweep"])
def test_a_damaged_sweep_toml_is_named_and_a_rerun_writes_it_back(damage, tmp_path, small_spec, small_dataset, capsys):
    """The folder's resolved spec lost, garbled or replaced: `show` says so beside an intact
    status, `thresholds` and `plot` refuse with the fix (never "not a dlsweep run folder"), and
    running the sweep's spec on the folder writes it back without computing anything."""
    folder = copy_of(small_dataset, tmp_path)
    path = folder / store.SPEC_FILE
    original = path.read_text()
    {"deleted": path.unlink, "not toml": lambda: path.write_text("junk = ["),
     "another sweep": lambda: path.write_text(original.replace("steps = 400", "steps = 401"))}[damage]()
    code, out, err = run_main(capsys, "show", folder)
    assert code == 0 and "complete" in out and "thresholds and plot need it" in out, (out, err)
    assert f"run the sweep's spec again on this folder (--out {folder})" in out, out
    for verb in ("thresholds", "plot"):
        code, out, err = run_main(capsys, verb, folder)
        assert code == 2 and str(path) in err and "it writes sweep.toml back" in err, err
        assert "not a dlsweep run folder" not in err, err
    code, out, err = run_main(capsys, "run", small_spec, "--out", folder, "--no-progress")
    assert code == 0 and "ran" not in out and path.read_text() == original, (out, err)
    code, out, err = run_main(capsys, "thresholds", folder)
    assert code == 0, err


def test_show_after_a_rebuilt_manifest_says_what_it_lost(tmp_path, small_dataset, capsys):
    folder = copy_of(small_dataset, tmp_path)
    (folder / store.MANIFEST).unlink()
    code, out, err = run_main(capsys, "show", folder)
    assert code == 0 and "None" not in out, out
    assert out.count("unknown (manifest.json rebuilt from the chunk records)") == 3, out


# ----------------------------------------------------------------------------- a full disk


class FullDisk:
    """os.fsync that fails with ENOSPC from its `after`-th call on (a disk that fills up mid-run):
    the error reaches the writer where a real full disk reports it, at the flush of a file."""

    def __init__(self, after: int):
        self.calls, self.after, self.real = 0, after, os.fsync

    def __call__(self, fd):
        self.calls += 1
        if self.calls > self.after:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return self.real(fd)


@pytest.mark.parametrize("after", [0, 2, 5, 7])
def test_a_full_disk_is_named_and_loses_nothing(after, tmp_path, small_spec, small_dataset, monkeypatch, capsys):
    """A run writes manifest, sweep.toml, then per chunk two parts and a record (3 fsyncs each
    file, the folder syncs swallowed); the disk fills up at the `after`-th file."""
    out = tmp_path / "full"
    full = FullDisk(after)
    monkeypatch.setattr(os, "fsync", lambda fd: full(fd) if not os.path.isdir(f"/proc/self/fd/{fd}") else None)
    code, stdout, err = run_main(capsys, "run", small_spec, "--out", out, "--chunk-size", SMALL_CHUNK, "--no-progress")
    assert code == 2, (stdout, err)
    errors = [line for line in err.splitlines() if not line.startswith("dlsweep: warning: ")]
    assert len(errors) == 1 and errors[0].startswith("dlsweep: error: cannot write "), err        # one line
    assert "No space left on device" in err and str(out) in err and "Traceback" not in err, err
    assert not list(out.rglob(".*.tmp-*"))                       # no temporary left behind
    finished = store.finished_chunks(out)
    assert len(finished) == max(0, (after - 2) // 3) < N_SMALL_CHUNKS
    if finished:                                                 # what was finished reads back whole
        runs = store.load(out)
        assert sorted(runs.run_id) == [r for i in sorted(finished) for r in range(i * SMALL_CHUNK, (i + 1) * SMALL_CHUNK)]
    monkeypatch.undo()
    code, stdout, err = run_main(capsys, "run", small_spec, "--out", out, "--no-progress")
    assert code == 0, err
    assert_same_dataset(out, small_dataset)


# ----------------------------------------------------------------------------- a read-only finished run


READ_ONLY_GUARD = """
import builtins, errno, os, sys
folder = os.path.realpath(sys.argv[1])
def inside(path):
    return isinstance(path, (str, bytes, os.PathLike)) and os.path.realpath(os.fsdecode(path)).startswith(folder)
def refuse(path):
    raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fsdecode(path))
real_open, real_os_open = builtins.open, os.open
def open_(file, mode="r", *args, **kwargs):
    if inside(file) and any(c in mode for c in "wax+"):
        refuse(file)
    return real_open(file, mode, *args, **kwargs)
def os_open(path, flags, *args, **kwargs):
    if inside(path) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
        refuse(path)
    return real_os_open(path, flags, *args, **kwargs)
def guard(real):
    def call(path, *args, **kwargs):
        if inside(path) or any(inside(a) for a in args[:1]):
            refuse(path)
        return real(path, *args, **kwargs)
    return call
builtins.open, os.open = open_, os_open
for name in ("mkdir", "makedirs", "replace", "rename", "link", "unlink", "rmdir"):
    setattr(os, name, guard(getattr(os, name)))
from dlsweep.cli import main
sys.exit(main(sys.argv[2:]))
"""


def _unprivileged() -> None:
    os.setgid(65534)
    os.setuid(65534)


def _reader(folder: Path, env: dict):
    """A runner of the CLI that cannot write into `folder`. Not root: the folder's write bits are
    cleared. Root writes through any permission bits, so it runs the CLI as an unprivileged user
    where that user can run this interpreter, and otherwise with every write under the folder
    refused with EROFS at the system-call wrappers (what a read-only mount answers)."""
    if os.geteuid() != 0:
        return lambda *args: subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=300, env=env)
    try:
        usable = subprocess.run([sys.executable, "-c", "import dlsweep.cli"], capture_output=True, env=env,
                                preexec_fn=_unprivileged).returncode == 0
    except OSError:                 # the unprivileged user cannot even start this interpreter
        usable = False
    if usable:
        return lambda *args: subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=300,
                                            env=env, preexec_fn=_unprivileged)
    return lambda *args: subprocess.run([sys.executable, "-c", READ_ONLY_GUARD, str(folder), *map(str, args)],
                                        capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture
def read_only_run(small_dataset):
    """A finished run in a folder nobody may write, and a writable home for the reader's outputs."""
    root = Path(tempfile.mkdtemp(prefix="dlsweep-ro-"))
    root.chmod(0o755)
    folder = root / "archive"
    shutil.copytree(small_dataset, folder)
    home = root / "home"
    home.mkdir()
    home.chmod(0o777)
    for path in [folder, *folder.rglob("*")]:
        path.chmod(0o555 if path.is_dir() else 0o444)
    yield folder, home
    for path in [folder, *folder.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    shutil.rmtree(root)


@pytest.mark.slow
def test_a_read_only_finished_run_can_be_read_shown_and_plotted(read_only_run):
    folder, home = read_only_run
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    env = {**os.environ, "HOME": str(home), "MPLCONFIGDIR": str(home / "mpl"), "DLSWEEP_CACHE_DIR": "off"}
    run = _reader(folder, env)

    shown = run("show", folder)
    assert shown.returncode == 0 and "complete" in shown.stdout, shown.stderr
    read = subprocess.run([sys.executable, "-c", f"import pandas as pd; print(len(pd.read_parquet({str(folder / 'runs')!r})))"],
                          capture_output=True, text=True, env=env)
    assert read.stdout.strip() == "12", read.stderr
    # derived outputs: a clear error naming the file and --out, or written where --out says
    table = run("thresholds", folder)
    assert table.returncode == 2 and "Traceback" not in table.stderr, table.stderr
    assert f"cannot write {folder / 'thresholds.parquet'}" in table.stderr and "--out" in table.stderr, table.stderr
    table = run("thresholds", folder, "--out", home / "th.parquet")
    assert table.returncode == 0 and (home / "th.parquet").is_file(), table.stderr
    figure = run("plot", folder, "--kind", "trajectories")
    assert figure.returncode == 2 and "Traceback" not in figure.stderr and "-o" in figure.stderr, figure.stderr
    figure = run("plot", folder, "--kind", "trajectories", "-o", home / "t.png")
    assert figure.returncode == 0 and (home / "t.png").stat().st_size > 0, figure.stderr
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before


# ----------------------------------------------------------------------------- a grid too large, all diverged


def test_grid_beyond_memory_is_refused_before_it_is_built(tmp_path, small_spec, capsys, monkeypatch):
    """3e10 trajectories: one line naming the key, the numbers and the limit; the flat grid is
    never built (grid.build would allocate 720 GB) and nothing is written."""
    monkeypatch.setattr(grid, "build", lambda axes: pytest.fail("the flat grid was built"))
    out = tmp_path / "o"
    code, stdout, err = run_main(capsys, "run", small_spec, "--out", out,
                                 "--set", "axes.sigma0={logspace=[-3,-1],num=100000}",
                                 "--set", "axes.lr={logspace=[-4,-2],num=100000}")
    assert code == 2 and stdout == "" and err.count("\n") == 1, err
    assert f"dlsweep: error: {small_spec}: key 'axes': 3e+10 trajectories (depth 3 x sigma0 100000 x lr 100000)" in err
    assert f"more than the 1/{plan.GRID_MEMORY_SHARE} of this machine's" in err and "split the sweep" in err
    assert not out.exists()

    # one axis alone: refused before its values are made (np.logspace would allocate 80 GB)
    code, stdout, err = run_main(capsys, "run", small_spec, "--out", out,
                                 "--set", "axes.sigma0={logspace=[-3,-1],num=10000000000}")
    assert code == 2 and err.count("\n") == 1 and "key 'axes.sigma0.num'" in err and "1e+10 trajectories" in err, err
    assert not out.exists()


def test_all_diverged_is_a_loud_warning_and_the_last_line_counts(tmp_path, small_spec, capsys):
    """lr = 5 on targets 3 and 1: every step multiplies the error by more than |1 - 5 * 3| = 14,
    so all 12 trajectories blow up; the data is written and the exit status stays 0."""
    out = tmp_path / "o"
    code, stdout, err = run_main(capsys, "run", small_spec, "--out", out, "--set", "axes.lr=[5.0]")
    assert code == 0
    assert stdout.rstrip().splitlines()[-1] == (f"{out}: {N_SMALL} trajectories, complete; 0 converged, "
                                                f"{N_SMALL} diverged, 0 stopped at the step limit (400)")
    assert warning_lines(err) == [
        f"dlsweep: warning: {out}: every trajectory diverged ({N_SMALL} of {N_SMALL}): {N_SMALL} of {N_SMALL} at lr=5 "
        "(depth 1..3, sigma0 0.001..0.1); the data is written, but holds no trajectory that converged or reached "
        "the step limit: try a smaller lr"]
    assert len(store.load(out)) == N_SMALL
    code, stdout, err = run_main(capsys, "show", out)          # later, show says where they diverged
    assert code == 0 and f"diverged_where  {N_SMALL} of {N_SMALL} at lr=5 (depth 1..3, sigma0 0.001..0.1)" in stdout, stdout


# ----------------------------------------------------------------------------- Ctrl-C


def start(args, cwd) -> subprocess.Popen:
    """The CLI in a fresh process, compiling every program (no persistent cache), so the compile
    phase lasts the whole compile."""
    env = dict(os.environ, DLSWEEP_CACHE_DIR="off")
    return subprocess.Popen([*CLI, *map(str, args)], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def wait_until(proc: subprocess.Popen, condition, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            pytest.fail(f"the run exited ({proc.returncode}) before {what}:\n{proc.communicate()}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)


def interrupted(proc: subprocess.Popen) -> tuple[str, str]:
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == interrupt.EXIT_STATUS == 130, (proc.returncode, stderr)
    return stdout, stderr


RESUME_LINE = "dlsweep: interrupted; finished chunks are kept, run again to resume\n"


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs /proc to see the process's threads")
def test_ctrl_c_at_any_moment_exits_130_with_one_line_and_the_rerun_is_identical(tmp_path, long_spec,
                                                                                    long_reference):
    out = tmp_path / "o"
    args = ["run", long_spec, "--out", out, "--chunk-size", LONG_CHUNK]

    # while JAX imports: the Ctrl-C handling is armed before the heavy imports, which take seconds,
    # and its thread is the process's first, so the signal comes milliseconds into them
    proc = start(args, tmp_path)
    wait_until(proc, lambda: len(os.listdir(f"/proc/{proc.pid}/task")) > 1, "the interrupt handler is armed")
    stdout, stderr = interrupted(proc)
    assert stderr == "dlsweep: interrupted\n" and stdout == "" and not out.exists()

    # while XLA compiles: the size line is printed right before the folder is prepared and the
    # chunk program compiled (seconds; a KeyboardInterrupt there used to end in SIGSEGV)
    proc = start(args, tmp_path)
    wait_until(proc, lambda: proc.stdout.readline().startswith(f"{out}: 20 trajectories"), "the size line")
    time.sleep(0.3)
    stdout, stderr = interrupted(proc)
    assert stderr == RESUME_LINE and not store.finished_chunks(out)

    # while chunks compute and are written
    proc = start(args, tmp_path)
    wait_until(proc, lambda: store.finished_chunks(out), "a finished chunk")
    stdout, stderr = interrupted(proc)
    assert stderr == RESUME_LINE

    proc = start(args, tmp_path)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0 and "complete" in stdout, stderr
    runs, trajectories = long_reference
    pd.testing.assert_frame_equal(store.load(out), runs, check_exact=True)
    pd.testing.assert_frame_equal(store.load_trajectories(out), trajectories, check_exact=True)
    assert not list(out.rglob(".*.tmp-*"))                  # the interrupted writers' temporaries are swept


# ----------------------------------------------------------------------------- chunk sizes


def test_chunk_sizes_13_and_64_give_bit_identical_datasets(tmp_path, write_spec, capsys):
    """The same sweep cut into chunks of 13 (not a multiple of any vector width) and of 64: every
    column of both tables equal bit for bit (tests/test_engine.py covers the other families, the
    per-seed layout and several devices)."""
    path = write_spec({"axes": {"depth": [1, 2, 3, 4], "sigma0": {"logspace": [-3, -1], "num": 30}, "lr": [5e-2]}})
    folders = {}
    for size in (13, 64):
        folders[size] = tmp_path / f"c{size}"
        code, out, err = run_main(capsys, "run", path, "--out", folders[size], "--chunk-size", size, "--no-progress")
        assert code == 0, err
    assert len(store.load(folders[13])) == 120
    assert_same_dataset(folders[13], folders[64])
