"""What a new user meets first: `dlsweep --version` and whole help texts; errors that speak
Python from the library (`overwrite=True`) and flags from the command line (`--overwrite`);
warnings as one `dlsweep: warning: ...` line; unwritable output paths; the measured times of the
reproductions; and reproductions whose comparison needs scikit-learn when it is missing."""

from __future__ import annotations

import dataclasses
import re
import shutil
import warnings
from pathlib import Path

import pandas as pd
import pytest

from dlsweep import __version__, api, cli, compare, reproduce, store
from dlsweep.analysis.incremental import ThresholdError
from dlsweep.plot import PlotError
from dlsweep.spec import SpecError
from dlsweep.store import StoreError
from dlsweep.warning import DlsweepWarning

ROOT = Path(__file__).resolve().parents[1]


def run_main(capsys, *args) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def cli_error(capsys, *args) -> str:
    """The one stderr line of a command that fails with exit code 2, without 'dlsweep: error: '."""
    code, out, err = run_main(capsys, *args)
    assert code == 2, (out, err)
    assert err.startswith("dlsweep: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    return err.removeprefix("dlsweep: error: ").rstrip("\n")


# ----------------------------------------------------------------------------- version and help


def test_version(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out == f"dlsweep {__version__}\n"


def words(text: str) -> str:
    return " ".join(text.split())


def test_help_describes_the_tool_in_whole_sentences(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    printed = words(capsys.readouterr().out)
    assert cli.DESCRIPTION.endswith(".") and words(cli.DESCRIPTION) in printed


VERBS = ("run", "submit", "thresholds", "pcs", "plot", "reproduce", "show", "models")


@pytest.mark.parametrize("verb", VERBS)
def test_every_verb_has_a_whole_description(verb, capsys):
    parser = cli._parser()
    sub = next(a for a in parser._actions if isinstance(a.choices, dict)).choices[verb]
    assert sub.description and sub.description.endswith("."), sub.description
    with pytest.raises(SystemExit):
        cli.main([verb, "--help"])
    printed = capsys.readouterr().out
    assert words(sub.description) in words(printed)
    assert not re.search(r"\w-\n", printed), printed        # no word broken at a hyphen


# ----------------------------------------------------------------------------- Python names and flags


def test_each_python_name_is_one_flag_in_every_verb():
    parser = cli._parser()
    flags = cli.option_flags(parser)
    subparsers = next(a for a in parser._actions if isinstance(a.choices, dict)).choices.values()
    for sub in subparsers:
        for action in sub._actions:
            if action.option_strings and action.dest != "help":
                assert max(action.option_strings, key=len) == max(flags[action.dest].option_strings, key=len)
    assert max(flags["overrides"].option_strings, key=len) == "--set"
    assert max(flags["chunk_size"].option_strings, key=len) == "--chunk-size"


@pytest.mark.parametrize("message, expected", [
    ("x.toml: key 'steps' (from overrides=['steps=0']): expected", "x.toml: key 'steps' (from --set steps=0): expected"),
    ("x.toml: overrides=['axes.lr=[1e-3, 1e-2]']: bad", "x.toml: --set 'axes.lr=[1e-3, 1e-2]': bad"),
    ("overrides=['a', 'b']", "--set a --set b"),
    ("chunk_size=0: expected an integer >= 1", "--chunk-size 0: expected an integer >= 1"),
    ("start over (overwrite=True) or choose", "start over (--overwrite) or choose"),
    ("overwrite=True cannot be combined with shard=(1, 2)", "--overwrite cannot be combined with --shard 1/2"),
    ("at={'depth': 3.0, 'lr': 0.01}: not a value", "--at depth=3,lr=0.01: not a value"),
    ("pairs=[(0, 9)]: bad", "--pairs 0-9: bad"),
    ("s=0.3: Definition 1 needs s in (0, 0.25)", "--s 0.3: Definition 1 needs s in (0, 0.25)"),
    ("method='grid2': expected", "--method grid2: expected"),
    ("out='/tmp/a b.png': cannot", "--out '/tmp/a b.png': cannot"),
    ("give out=... to write it elsewhere", "give --out ... to write it elsewhere"),
    ("shard=(1,): expected", "--shard (1,): expected"),                    # not K/N: left as written
    # not options: unchanged
    ("axes.sigma0=[0.1], depth=3, e.g. steps=20000, (s, f) = (0.05, 0.95)",
     "axes.sigma0=[0.1], depth=3, e.g. steps=20000, (s, f) = (0.05, 0.95)"),
])
def test_messages_in_flags(message, expected):
    assert cli.in_flags(message, cli.option_flags(cli._parser())) == expected


@pytest.fixture
def folder(tmp_path, small_dataset) -> Path:
    copy = tmp_path / "small"
    shutil.copytree(small_dataset, copy)
    return copy


# (the Python call, the CLI arguments (the folder and spec filled in), the Python wording, the CLI wording)
BOTH_SIDES = {
    "chunk size": (lambda spec, folder: api.run(spec, out=folder.parent / "new", chunk_size=0),
                   ["run", "{spec}", "--out", "{new}", "--chunk-size", "0"], "chunk_size=0", "--chunk-size 0"),
    "malformed override": (lambda spec, folder: api.run(spec, out=folder.parent / "new", overrides=["steps"]),
                           ["run", "{spec}", "--out", "{new}", "--set", "steps"], "overrides=['steps']", "--set steps:"),
    "overridden key": (lambda spec, folder: api.run(spec, out=folder.parent / "new", overrides=["steps=0"]),
                       ["run", "{spec}", "--out", "{new}", "--set", "steps=0"], "(from overrides=['steps=0'])",
                       "(from --set steps=0)"),
    "another sweep": (lambda spec, folder: api.run(spec, out=folder, overrides=["steps=401"]),
                      ["run", "{spec}", "--out", "{folder}", "--set", "steps=401"], "overwrite=True", "--overwrite"),
    "level s": (lambda spec, folder: api.thresholds(folder, s=0.3),
                ["thresholds", "{folder}", "--s", "0.3"], "s=0.3", "--s 0.3"),
    "plot at": (lambda spec, folder: api.plot_run(folder, kind="trajectories", at={"depth": 7}),
                ["plot", "{folder}", "--kind", "trajectories", "--at", "depth=7"], "at={'depth': 7}", "--at depth=7"),
    "plot axis": (lambda spec, folder: api.plot_run(folder, x="width"),
                  ["plot", "{folder}", "--x", "width"], "x='width'", "--x width"),
}


@pytest.mark.parametrize("case", BOTH_SIDES, ids=list(BOTH_SIDES))
def test_errors_speak_python_from_python_and_flags_from_the_command_line(case, small_spec, folder, capsys):
    call, argv, python, flags = BOTH_SIDES[case]
    with pytest.raises((SpecError, StoreError, ThresholdError, PlotError)) as info:
        call(small_spec, folder)
    assert python in str(info.value) and " --" not in str(info.value), info.value
    argv = [a.format(spec=small_spec, folder=folder, new=folder.parent / "new") for a in argv]
    err = cli_error(capsys, *argv)
    assert flags in err and python not in err, err
    assert not (folder.parent / "new").exists()


# ----------------------------------------------------------------------------- warnings


def test_a_warning_is_one_line_on_stderr(tmp_path, write_spec, capsys):
    """The toy model has no randomness: a seed axis over it runs identical copies."""
    path = write_spec({"axes": {"seed": [0, 1]}})
    with pytest.warns(DlsweepWarning, match=r"key 'axes.seed': 2 values"):
        api.run(path, out=tmp_path / "python", progress_bar=False)
    code, out, err = run_main(capsys, "run", path, "--out", tmp_path / "cli", "--no-progress")
    assert code == 0 and "complete" in out
    lines = [line for line in err.splitlines() if line.startswith("dlsweep: warning: ")]
    assert len(lines) == 1 and f"{path}: key 'axes.seed': 2 values" in lines[0], err
    assert "Traceback" not in err and "DlsweepWarning" not in err


def test_other_warnings_go_to_python_as_before(capsys, monkeypatch):
    monkeypatch.setattr(cli, "_models", lambda args: warnings.warn("plain", RuntimeWarning) or 0)
    with pytest.warns(RuntimeWarning, match="plain"):
        assert cli.main(["models"]) == 0
    assert "dlsweep: warning" not in capsys.readouterr().err


# ----------------------------------------------------------------------------- unwritable outputs


def test_pcs_out_that_cannot_be_written(tmp_path, monkeypatch, capsys):
    """A path under a regular file cannot be created, whoever runs the test (root included)."""
    table = pd.DataFrame({"depth": [1], "step": [0], "j": [0], "mean": [1.0], "std": [0.0], "seeds": [1]})
    monkeypatch.setattr(api, "pc_spread", lambda folder: table)
    (tmp_path / "file").write_text("")
    for name in ("spread.csv", "spread.parquet"):
        out = tmp_path / "file" / name
        assert cli_error(capsys, "pcs", tmp_path, "-o", out).startswith(f"-o {out}: cannot write the table (")
    out = tmp_path / "spread.csv"
    assert run_main(capsys, "pcs", tmp_path, "-o", out)[0] == 0 and out.exists()


def test_plot_out_in_proc_is_an_error(small_dataset, capsys):
    err = cli_error(capsys, "plot", small_dataset, "--kind", "trajectories", "-o", "/proc/x.png")
    assert err.startswith("/proc/x.png: cannot write the figure ("), err


# ----------------------------------------------------------------------------- reproductions: times, scikit-learn


def test_list_shows_every_reproduction_with_its_measured_times(capsys):
    code, out, _ = run_main(capsys, "reproduce", "--list")
    assert code == 0
    for repro in reproduce.REPRODUCTIONS.values():
        assert repro.quick_seconds is not None and repro.quick_seconds > 0, repro.name    # each one measured
        assert repro.full_seconds is None or repro.full_seconds > 0, repro.name
        assert repro.timing() in out
    assert reproduce.REFERENCE_CPU in out and out.rstrip().endswith(reproduce.TIMES)
    unmeasured = any(repro.full_seconds is None for repro in reproduce.REPRODUCTIONS.values())
    assert ("full size not measured" in out) == unmeasured


def test_quick_start_installs_what_every_reproduction_needs():
    assert "bash scripts/setup.sh .venv compare" in (ROOT / "scripts" / "quickstart.sh").read_text()
    assert 'compare = ["scikit-learn' in (ROOT / "pyproject.toml").read_text()


SMALL_FIG3 = ("task.d=30", "task.examples=12", "axes.sparsity=[1, 2]", "axes.seed=[0, 1]", "steps=300")


def test_a_reproduction_without_scikit_learn_leaves_the_comparison_out(tmp_path, monkeypatch, capsys):
    """gissin-fig3 at a tiny size: its runs lose the OMP column and its agreement figure, with one
    warning; `dlsweep run` of the same spec, which asks for the comparison, stays an error."""
    monkeypatch.setattr(compare, "available", lambda module: module is None)
    small = dataclasses.replace(reproduce.REPRODUCTIONS["gissin-fig3"], quick=SMALL_FIG3)
    monkeypatch.setitem(reproduce.REPRODUCTIONS, "gissin-fig3", small)
    code, out, err = run_main(capsys, "reproduce", "gissin-fig3", "--quick", "--out-root", tmp_path)
    assert code == 0, err
    notes = [line for line in err.splitlines() if line.startswith("dlsweep: warning: ")]
    assert len(notes) == 1 and "scikit-learn is not installed" in notes[0] and "agreement figure" in notes[0], err
    folder = tmp_path / "gissin-fig3-quick"
    assert "omp_agreement" not in store.load(folder)
    assert [Path(line.removeprefix("figure: ")).name for line in out.splitlines() if line.startswith("figure: ")] \
        == ["trajectories.png"]
    assert "key 'compare'" in cli_error(capsys, "run", reproduce.spec_path("gissin-fig3"), "--out", tmp_path / "run",
                                        *[a for item in SMALL_FIG3 for a in ("--set", item)])
