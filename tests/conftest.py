"""Shared fixtures for the spec / store / CLI tests: small sweep specs written as TOML files,
finished reference datasets (computed once per session), and a runner for the CLI in a fresh
Python process."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import os
import tempfile
import time

import pytest
from hypothesis import settings

# No per-example time limit (hypothesis' default is 200 ms): a wall-clock limit fails on a loaded
# machine, and timing belongs to benchmarks/. CI runs the property tests on a fixed set of
# examples, so a landing never depends on luck; locally each run draws new ones.
settings.register_profile("local", deadline=None)
settings.register_profile("ci", derandomize=True, print_blob=True, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") == "true" else "local")

# Compiled programs of the test session go to a folder of its own (inherited by CLI subprocesses).
os.environ.setdefault("DLSWEEP_CACHE_DIR", tempfile.mkdtemp(prefix="dlsweep-test-cache-"))

CLI = [sys.executable, "-m", "dlsweep.cli"]

# 12 trajectories, 400 steps: a mix of early-converged and full-length trajectories.
SMALL = {
    "name": "small",
    "model": "toy",
    "steps": 400,
    "dtype": "float32",
    "task": {"sigma_star": [3.0, 1.0]},
    "axes": {"depth": [1, 2, 3], "sigma0": {"logspace": [-3, -1], "num": 4}, "lr": [5e-2]},
    "record": {"points": 25},
}
SMALL_CHUNK = 4          # -> 3 chunks

# 20 trajectories that never stop early; with chunk size 2 each of the 10 chunks computes for
# ~0.1 s, so a `dlsweep run` of it lasts a few seconds and can be killed or raced mid-run.
LONG = {
    **SMALL,
    "name": "long",
    "steps": 3_000_000,
    "axes": {"depth": [1, 2], "sigma0": {"logspace": [-3, -1], "num": 10}, "lr": [1e-5]},
    "record": {"points": 30},
}
LONG_CHUNK = 2           # -> 10 chunks


def marked_slow(names, slow: set[str]) -> list:
    """`names` as test parameters, those in `slow` marked slow."""
    return [pytest.param(name, marks=pytest.mark.slow) if name in slow else name for name in names]


def merged(base: dict, changes: dict) -> dict:
    """`base` with `changes` applied; dict values update the table of the same name."""
    raw = copy.deepcopy(base)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(raw.get(key), dict):
            raw[key].update(value)
        else:
            raw[key] = value
    return raw


@pytest.fixture(autouse=True)
def _saved_figures_fit(monkeypatch):
    """Every figure a test saves through `plot.save` holds all its artists inside its canvas: the
    package saves the canvas as laid out (no tight bounding box), so anything the layout left
    outside would be cut. Checked to a pixel at the figure's dpi."""
    from dlsweep import plot

    save = plot.save

    def checked(figure, paths, keep_open=False, rendered=None):
        with plot.matplotlib.rc_context(fname=plot.STYLE):
            figure.draw_without_rendering()
            drawn = figure.get_tightbbox(figure.canvas.get_renderer())
        whole, pixel = figure.bbox_inches, 1.0 / figure.dpi
        assert (drawn.x0 >= whole.x0 - pixel and drawn.y0 >= whole.y0 - pixel and drawn.x1 <= whole.x1 + pixel
                and drawn.y1 <= whole.y1 + pixel), f"the figure's artists {drawn} reach outside its canvas {whole}"
        return save(figure, paths, keep_open, rendered)

    monkeypatch.setattr(plot, "save", checked)


@pytest.fixture
def write_spec(tmp_path):
    """write_spec(changes=None, base=SMALL, name="spec.toml", drop=()) -> path of a TOML spec."""

    def write(changes: dict | None = None, base: dict = SMALL, name: str = "spec.toml", drop=()) -> Path:
        from dlsweep import spec

        raw = merged(base, changes or {})
        for key in drop:
            table, _, sub = key.partition(".")
            if sub:
                del raw[table][sub]
            else:
                del raw[table]
        path = tmp_path / name
        path.write_text(spec.dumps_toml(raw))
        return path

    return write


@pytest.fixture
def run_cli():
    """run_cli(*args, cwd=None, timeout=120) -> CompletedProcess of `python -m dlsweep.cli ARGS`."""

    def run(*args, cwd=None, timeout=120):
        return subprocess.run([*CLI, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=timeout)

    return run


def spec_file(tmp_path_factory, raw: dict) -> Path:
    """`raw` written as a TOML spec file named after the sweep."""
    from dlsweep import spec

    path = tmp_path_factory.mktemp("specs") / f"{raw['name']}.toml"
    path.write_text(spec.dumps_toml(raw))
    return path


@pytest.fixture(scope="session")
def small_spec(tmp_path_factory) -> Path:
    return spec_file(tmp_path_factory, SMALL)


@pytest.fixture(scope="session")
def long_spec(tmp_path_factory) -> Path:
    return spec_file(tmp_path_factory, LONG)


def run_main(capsys, *args) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of `dlsweep ARGS` run in this process."""
    from dlsweep import cli

    code = cli.main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def warning_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("dlsweep: warning: ")]


def wait_for(proc: subprocess.Popen, condition, what: str, timeout: float = 90) -> None:
    """Poll `condition()` while `proc` runs; fail (and kill it) if it exits first or time runs out."""
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the writer exited ({proc.returncode}) before {what}:\n{out}\n{err}")
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)


@pytest.fixture(scope="session")
def small_dataset(tmp_path_factory, small_spec) -> Path:
    """A finished, uninterrupted run of SMALL (chunk size 4). Read-only: copy it before changing it."""
    from dlsweep import api

    folder = tmp_path_factory.mktemp("small") / "data"
    api.run(small_spec, out=folder, chunk_size=SMALL_CHUNK, progress_bar=False)
    return folder


@pytest.fixture(scope="session")
def long_reference(tmp_path_factory, long_spec):
    """(runs, trajectories) of an uninterrupted run of LONG (chunk size 2)."""
    from dlsweep import api, store

    folder = tmp_path_factory.mktemp("long") / "data"
    api.run(long_spec, out=folder, chunk_size=LONG_CHUNK, progress_bar=False)
    return store.load(folder), store.load_trajectories(folder)


def panels_of(figure) -> list[dict]:
    """What each panel of a figure draws (colour bars left out): its title, x and y labels (the
    figure's shared ones where the panel has none) and how many of its artists hold data."""
    from matplotlib.collections import Collection
    from matplotlib.image import AxesImage
    from matplotlib.lines import Line2D

    def filled(artist) -> bool:
        if isinstance(artist, Line2D):
            return len(artist.get_xdata()) > 0
        if isinstance(artist, Collection):
            return len(artist.get_paths()) > 0 or (artist.get_array() is not None and artist.get_array().size > 0)
        return isinstance(artist, AxesImage)

    shared_x = figure._supxlabel.get_text() if getattr(figure, "_supxlabel", None) else ""
    shared_y = figure._supylabel.get_text() if getattr(figure, "_supylabel", None) else ""
    return [{"title": ax.get_title(), "xlabel": ax.get_xlabel() or shared_x, "ylabel": ax.get_ylabel() or shared_y,
             "data": sum(filled(a) for a in [*ax.lines, *ax.collections, *ax.images])}
            for ax in figure.axes if ax.get_visible() and not hasattr(ax, "_colorbar")]


@pytest.fixture(scope="session")
def quick_reproduction(tmp_path_factory):
    """name -> Reproduced of each bundled reproduction's --quick version, run once per session;
    `.panels[path]` is what each panel of the figure saved at `path` draws (`panels_of`)."""
    from unittest import mock

    from dlsweep import plot, reproduce

    root = tmp_path_factory.mktemp("reproduce-quick")
    done = {}
    save = plot.save

    def recording(figure, paths, keep_open=False, rendered=None):
        for path in paths:
            get.panels[Path(path)] = panels_of(figure)
        return save(figure, paths, keep_open, rendered)

    def get(name):
        if name not in done:
            with mock.patch.object(plot, "save", recording):
                done[name] = reproduce.run(name, quick=True, out_root=root, progress_bar=False)
        return done[name]

    get.panels = {}
    return get
