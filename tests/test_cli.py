"""The command line: `dlsweep run` (summary, progress bar only on a terminal, --set, exit codes),
`dlsweep show` (finished and partial folders), `dlsweep models`, and errors as one
`dlsweep: error: ...` line with exit code 2 and no traceback."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import select
import shutil
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from conftest import CLI, SMALL_CHUNK
from dlsweep import cli, spec, store

N_SMALL = 12


def run_main(capsys, *args) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_cli_error(code: int, out: str, err: str, *fragments: str) -> None:
    assert code == 2, (out, err)
    assert err.startswith("dlsweep: error: "), err
    assert err.count("\n") == 1, err                      # one line, no traceback
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, err


# ----------------------------------------------------------------------------- run


def test_run_prints_a_summary(tmp_path, small_spec, capsys):
    out = tmp_path / "o"
    code, stdout, err = run_main(capsys, "run", small_spec, "--out", out, "--chunk-size", SMALL_CHUNK,
                                 "--max-chunks", 1)
    assert code == 0 and err == ""                        # not a terminal: no progress bar
    assert f"{out}: ran 1 chunk(s)" in stdout and "traj-steps/s" in stdout and "compile" in stdout
    assert f"{out}: {N_SMALL} trajectories, 2 chunk(s) still missing" in stdout

    code, stdout, err = run_main(capsys, "run", small_spec, "--out", out)
    assert code == 0 and err == ""
    assert f"{out}: ran 2 chunk(s)" in stdout
    assert f"{out}: 1 chunk(s) were already finished (resumed)" in stdout
    last = stdout.rstrip().splitlines()[-1]                 # the last line counts how the trajectories ended
    assert last.startswith(f"{out}: {N_SMALL} trajectories, complete; ") and ", 0 diverged, " in last

    code, stdout, err = run_main(capsys, "run", small_spec, "--out", out)
    assert code == 0 and "ran " not in stdout
    assert f"{out}: 3 chunk(s) were already finished (resumed)" in stdout
    assert f"{out}: {N_SMALL} trajectories, complete" in stdout


def test_run_applies_every_set(tmp_path, small_spec, capsys):
    out = tmp_path / "o"
    code, stdout, _ = run_main(capsys, "run", small_spec, "--out", out, "--set", "steps=60",
                               "--set", "axes.lr=[1e-3, 2e-3]", "--set", "axes.sigma0.num=2")
    assert code == 0 and "complete" in stdout
    written = spec.load(out / store.SPEC_FILE)
    assert written.steps == 60 and written.axes["lr"].tolist() == [1e-3, 2e-3] and len(written.axes["sigma0"]) == 2
    assert len(store.load(out)) == 3 * 2 * 2


def test_run_in_a_fresh_process_is_quiet_when_piped(tmp_path, small_spec, run_cli):
    """End to end through `python -m dlsweep.cli`, with the default folder runs/<name>."""
    done = run_cli("run", small_spec, "--chunk-size", SMALL_CHUNK, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    folder = Path("runs") / "small"
    assert f"{folder}: {N_SMALL} trajectories, complete" in done.stdout
    assert "traj [" not in done.stderr and "\r" not in done.stderr and "%|" not in done.stderr, done.stderr
    assert len(store.load(tmp_path / folder)) == N_SMALL


def _run_on_a_terminal(args, cwd, timeout=120, rows=24, columns=120) -> tuple[int, str, str]:
    """Run the CLI with stderr on a pseudo-terminal of the given size; return (code, stdout, terminal)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    proc = subprocess.Popen([*CLI, *map(str, args)], cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=slave)
    os.close(slave)
    seen, deadline = [], time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:                     # EIO: the child closed the terminal
                    break
                if not data:
                    break
                seen.append(data)
            elif proc.poll() is not None:
                break
        else:
            proc.kill()
        stdout = proc.stdout.read().decode()
        proc.wait(timeout=30)
    finally:
        os.close(master)
        proc.stdout.close()
    return proc.returncode, stdout, b"".join(seen).decode(errors="replace")


@pytest.mark.parametrize("rows, columns", [(24, 120), (0, 0)], ids=["24x120", "size-unknown"])
def test_progress_bar_on_a_terminal(tmp_path, small_spec, rows, columns):
    """A terminal that reports no size (0x0, as some pseudo-terminals do) still gets the bar."""
    code, stdout, terminal = _run_on_a_terminal(["run", small_spec, "--out", tmp_path / "o",
                                                 "--chunk-size", SMALL_CHUNK], cwd=tmp_path, rows=rows, columns=columns)
    assert code == 0, terminal
    assert f"{N_SMALL}/{N_SMALL}" in terminal and "traj" in terminal, terminal
    assert "chunk 3/3" in terminal and "traj-steps/s" in terminal, terminal
    assert "complete" in stdout and "traj [" not in stdout       # the bar goes to stderr only


def test_progress_bar_follows_isatty_and_no_progress(tmp_path, small_spec, capsys, monkeypatch):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    code, stdout, err = run_main(capsys, "run", small_spec, "--out", tmp_path / "a", "--chunk-size", SMALL_CHUNK)
    assert code == 0
    assert f"{N_SMALL}/{N_SMALL}" in err and "chunk 3/3" in err, err
    assert "traj [" not in stdout
    code, stdout, err = run_main(capsys, "run", small_spec, "--out", tmp_path / "b", "--chunk-size", SMALL_CHUNK,
                                 "--no-progress")
    assert code == 0 and err == "" and "complete" in stdout


# ----------------------------------------------------------------------------- show and models


def test_show_a_finished_run(small_dataset, small_spec, capsys):
    code, out, err = run_main(capsys, "show", small_dataset)
    assert code == 0 and err == ""
    lines = {line.split(None, 1)[0]: line.split(None, 1)[1] for line in out.splitlines()}
    assert lines["name"] == "small" and lines["model"] == "toy"
    assert lines["spec_hash"] == spec.load(small_spec).spec_hash()
    assert lines["runs"] == f"{N_SMALL} of {N_SMALL}"
    assert lines["chunks"].startswith("3 of 3 finished")
    assert lines["missing_chunks"] == "none"
    assert "run_id" in lines["columns"] and "hit_1_95" in lines["columns"]

    code, out, _ = run_main(capsys, "show", small_dataset, "--json")
    summary = json.loads(out)
    assert code == 0 and summary["missing_chunks"] == [] and summary["runs"] == f"{N_SMALL} of {N_SMALL}"
    assert summary["versions"]["dlsweep"] and summary["backend"]
    assert 0 < summary["converged"] < N_SMALL and summary["diverged"] == 0


def test_show_a_partial_run_reports_missing_chunks(tmp_path, small_dataset, capsys):
    folder = tmp_path / "partial"
    shutil.copytree(small_dataset, folder)
    for sub in (store.RUNS, store.TRAJECTORIES):                  # as if chunks 1 and 2 were never run
        for index in (1, 2):
            (folder / sub / store.part_name(index)).unlink()
    code, out, err = run_main(capsys, "show", folder)
    assert code == 0 and err == ""
    lines = {line.split(None, 1)[0]: line.split(None, 1)[1] for line in out.splitlines()}
    assert lines["missing_chunks"] == "1, 2"
    assert lines["runs"] == f"{SMALL_CHUNK} of {N_SMALL}"
    assert lines["chunks"].startswith("1 of 3 finished")
    summary = json.loads(run_main(capsys, "show", folder, "--json")[1])
    assert summary["missing_chunks"] == [1, 2]

    for sub in (store.RUNS, store.TRAJECTORIES):                  # nothing finished yet
        (folder / sub / store.part_name(0)).unlink()
    code, out, _ = run_main(capsys, "show", folder)
    assert code == 0 and "0, 1, 2" in out and f"0 of {N_SMALL}" in out


def test_models_lists_the_toy_model(capsys):
    """`dlsweep models` lists every family by name (alphabetically), the toy with its axes and task."""
    code, out, err = run_main(capsys, "models")
    assert code == 0 and err == ""
    names = [line for line in out.splitlines() if line and not line.startswith(" ")]
    assert names == sorted(names) and "toy" in names
    assert "axes: depth, sigma0, lr (+ seed; an optimizer's momentum, b1, b2, eps)" in out and "task: sigma_star" in out


# ----------------------------------------------------------------------------- errors


def test_spec_error_in_a_fresh_process(tmp_path, write_spec, run_cli):
    path = write_spec({"axes": {"sigma0": [1e-3, 1e-40]}})
    done = run_cli("run", path, cwd=tmp_path)
    assert_cli_error(done.returncode, done.stdout, done.stderr, str(path), "key 'axes.sigma0'", "underflows float32")
    assert not (tmp_path / "runs").exists()                       # nothing written


@pytest.mark.parametrize("case", ["missing file", "invalid toml", "bad set", "unknown key", "chunk size 0",
                                  "level out of range"])
def test_run_errors_exit_2(tmp_path, write_spec, capsys, case):
    out = tmp_path / "o"
    args, fragments = {
        "missing file": lambda: (["run", tmp_path / "nope.toml"], ["nope.toml", "no such spec file"]),
        "invalid toml": lambda: (["run", tmp_path / "bad.toml"], ["bad.toml", "not valid TOML"]),
        "bad set": lambda: (["run", write_spec(), "--set", "steps"], ["--set steps: ", "KEY=VALUE"]),
        "unknown key": lambda: (["run", write_spec({"stop": {"patience": 2}})], ["key 'stop.patience'", "unknown key"]),
        "chunk size 0": lambda: (["run", write_spec(), "--chunk-size", "0"], ["--chunk-size 0: ", "integer >= 1"]),
        "level out of range": lambda: (["run", write_spec(), "--set", "record.levels=[0.5, 1.01]"],
                                       ["key 'record.levels' (from --set 'record.levels=[0.5, 1.01]')", "(0, 1]"]),
    }[case]()
    (tmp_path / "bad.toml").write_text("steps = = 3\n")
    code, stdout, err = run_main(capsys, *args, "--out", out)
    assert_cli_error(code, stdout, err, *fragments)
    assert stdout == "" and not out.exists()


def test_refusals_exit_2(tmp_path, small_spec, small_dataset, capsys):
    folder = tmp_path / "d"
    shutil.copytree(small_dataset, folder)
    assert_cli_error(*run_main(capsys, "run", small_spec, "--out", folder, "--set", "steps=401"),
                     "different sweep", "--overwrite")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "data.csv").write_text("x\n")
    assert_cli_error(*run_main(capsys, "run", small_spec, "--out", tmp_path / "other"), "--overwrite")
    assert_cli_error(*run_main(capsys, "show", tmp_path / "other"), "not a dlsweep run folder")
    assert_cli_error(*run_main(capsys, "show", tmp_path / "absent"), "absent")
    # --overwrite is the way out
    code, stdout, _ = run_main(capsys, "run", small_spec, "--out", folder, "--set", "steps=401", "--overwrite")
    assert code == 0 and "complete" in stdout
    assert store.read_manifest(folder)["spec_hash"] == spec.load(small_spec, ["steps=401"]).spec_hash()


@pytest.mark.parametrize("argv", [[], ["fly"], ["run"], ["run", "a.toml", "--chunk-size", "many"], ["show"]])
def test_usage_errors_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_out_that_is_a_file_is_an_error(tmp_path, small_spec, capsys):
    target = tmp_path / "results.parquet"
    target.write_text("not a folder")
    assert_cli_error(*run_main(capsys, "run", small_spec, "--out", target), str(target))


def test_spec_that_is_not_utf8_is_an_error(tmp_path, capsys):
    path = tmp_path / "latin1.toml"
    path.write_bytes('name = "caf\u00e9"\n'.encode("latin-1"))
    assert_cli_error(*run_main(capsys, "run", path, "--out", tmp_path / "o"), str(path))


def test_show_of_a_damaged_manifest_without_chunk_records_is_an_error(tmp_path, small_dataset, capsys):
    """With the chunk records there, the manifest is read from them (tests/test_faults.py);
    without them nothing holds the plan, and the error says what to do."""
    folder = tmp_path / "d"
    shutil.copytree(small_dataset, folder)
    shutil.rmtree(folder / store.CHUNKS)
    (folder / store.MANIFEST).write_text('{"name": ')
    assert_cli_error(*run_main(capsys, "show", folder), store.MANIFEST, "--overwrite")


def test_negative_max_chunks_is_an_error(tmp_path, small_spec, capsys):
    out = tmp_path / "o"
    assert_cli_error(*run_main(capsys, "run", small_spec, "--out", out, "--chunk-size", SMALL_CHUNK,
                               "--max-chunks", -1), "--max-chunks")
    assert not out.exists()


def test_thresholds_and_heatmap_of_a_run_without_the_levels_are_errors(tmp_path, write_spec, capsys):
    """A run recorded with `levels = []` (or without s and f among its levels) has no hitting
    times to decide from: thresholds and the status heatmap say so; trajectories still draw, and
    are what `plot` draws by default of such a run."""
    path = write_spec({"record": {"levels": []}})
    out = tmp_path / "o"
    assert run_main(capsys, "run", path, "--out", out, "--no-progress")[0] == 0
    assert_cli_error(*run_main(capsys, "thresholds", out), "--s 0.05", "its levels are none")
    assert_cli_error(*run_main(capsys, "plot", out, "--kind", "heatmap"), "--s 0.05", "its levels are none")
    for kind in (["--kind", "trajectories"], []):
        code, printed, _ = run_main(capsys, "plot", out, *kind)
        assert code == 0 and printed.strip().endswith("trajectories.png")
