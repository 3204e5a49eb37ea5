"""A model from the user's own file (`model = "file.py:Class"`, dlsweep.models.user): the bundled
example sweeps/two-factor.toml against a NumPy float64 reference, the command line end to end,
the run folder's copy of the model, resume, an edited model, keyword arguments, the Python API's
`model=` and clear errors for broken model files."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dlsweep import api, engine, reproduce, spec
from dlsweep.errors import SpecError
from dlsweep.store import StoreError

EXAMPLE = reproduce.SWEEPS / "two-factor.toml"
SIGMA_STAR = np.array([12.0, 6.0, 4.0, 3.0])
SMALL = ["steps=3000", "dtype=float64", "axes.sigma0=[1e-4, 1e-2, 0.3]", "axes.imbalance=[1.0, 3.0]",
         "axes.lr=[1e-3, 5e-3]", "record.points=25"]


def two_factor_reference(sigma0, imbalance, lr, steps, record_steps):
    """sigma_i = u_i v_i under GD on 1/2 ||u o v - sigma*||^2 in float64, from
    u(0) = a sqrt(sigma0), v(0) = sqrt(sigma0) / a: u <- u - eta v r, v <- v - eta u r,
    r = u o v - sigma* (both from the same state). Returns (B, R, k)."""
    u = (imbalance * np.sqrt(sigma0))[:, None] * np.ones_like(SIGMA_STAR)
    v = (np.sqrt(sigma0) / imbalance)[:, None] * np.ones_like(SIGMA_STAR)
    eta = lr[:, None]
    out = np.full((len(sigma0), len(record_steps), len(SIGMA_STAR)), np.nan)
    for step in range(steps + 1):
        where = np.nonzero(record_steps == step)[0]
        if len(where):
            out[:, where, :] = (u * v)[:, None, :]
        residual = u * v - SIGMA_STAR
        u, v = u - eta * v * residual, v - eta * u * residual
    return out


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    folder = tmp_path_factory.mktemp("own") / "two-factor"
    api.run(EXAMPLE, out=folder, overrides=SMALL, progress_bar=False)
    return folder


def test_example_model_matches_numpy_reference(example):
    """sigma_i at every recorded step equals the float64 NumPy loop of the two-factor model to
    1e-10 relative (same recurrence up to the order of operations, a few 1e-16 a step over 3000
    steps, amplified at most ~1e2 by the growth from sigma0 = 1e-4), and the custom axis
    `imbalance` reaches the model (a = 3 differs from a = 1 by more than 1e-3)."""
    runs, traj = api.load(example), api.load_trajectories(example)
    assert len(runs) == 12 and not runs.diverged.any() and set(runs.imbalance) == {1.0, 3.0}
    record_steps = engine.record_steps("log", 25, 3000)
    index = pd.MultiIndex.from_product([runs.run_id, record_steps], names=["run_id", "step"])
    columns = [f"sigma_{i}" for i in range(4)]
    stopped = traj.set_index(["run_id", "step"]).reindex(index)[columns].to_numpy().reshape(len(runs), -1, 4)
    expected = two_factor_reference(runs.sigma0.to_numpy(), runs.imbalance.to_numpy(), runs.lr.to_numpy(), 3000,
                                    record_steps)
    seen = ~np.isnan(stopped)                # a converged run stops early: no rows after its stop step
    assert seen[:, :2].all()
    np.testing.assert_allclose(stopped[seen], expected[seen], rtol=1e-10)
    early = expected[:, 5, 0]
    assert np.abs(early[runs.imbalance.to_numpy() == 3.0] / early[runs.imbalance.to_numpy() == 1.0] - 1).min() > 1e-3


def test_run_folder_keeps_the_model_and_reads_without_the_original(example, tmp_path):
    """The folder holds a copy of two_factor.py beside sweep.toml, whose [model] names it with its
    sha256; a copy of the folder elsewhere loads, takes thresholds and draws without the original."""
    assert (example / "two_factor.py").read_bytes() == (reproduce.SWEEPS / "two_factor.py").read_bytes()
    text = (example / "sweep.toml").read_text()
    assert '[model]\nclass = "two_factor.py:TwoFactor"\nsha256 = "' in text
    moved = tmp_path / "moved"
    shutil.copytree(example, moved)
    table = api.thresholds(moved)
    assert set(table.imbalance) == {1.0, 3.0}
    assert api.plot_run(moved, y="imbalance")[0].name == "heatmap-sigma0-imbalance.png"


def test_command_line_end_to_end(tmp_path, capsys):
    """`dlsweep run / thresholds / plot` on the example spec."""
    from conftest import run_main

    out = tmp_path / "cli"
    code, text, err = run_main(capsys, "run", EXAMPLE, "--out", out, *[a for o in SMALL for a in ("--set", o)])
    assert code == 0, err
    assert run_main(capsys, "thresholds", out)[0] == 0
    code, text, err = run_main(capsys, "plot", out, "--y", "imbalance")
    assert code == 0 and "heatmap-sigma0-imbalance.png" in text


def _model_dir(tmp_path, source: str, name="model.py") -> Path:
    folder = tmp_path / "m"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(textwrap.dedent(source))
    return folder


TWO_FACTOR = (reproduce.SWEEPS / "two_factor.py").read_text()
RAW = {"name": "own", "model": "model.py:TwoFactor", "steps": 200, "task": {"sigma_star": [12.0, 6.0]},
       "axes": {"sigma0": [1e-3, 1e-2], "imbalance": [1.0], "lr": [1e-3]}, "record": {"points": 10}}


def _spec(folder: Path, raw=RAW) -> Path:
    path = folder / "spec.toml"
    path.write_text(spec.dumps_toml(raw))
    return path


def test_resume_and_an_edited_model_is_another_sweep(tmp_path):
    """The same spec resumes (nothing left to run); after the model file changes, the folder is
    refused as holding a different sweep."""
    folder = _model_dir(tmp_path, TWO_FACTOR)
    path, out = _spec(folder), tmp_path / "out"
    api.run(path, out=out, progress_bar=False)
    again = api.run(path, out=out, progress_bar=False)
    assert again.traj_steps == 0
    (folder / "model.py").write_text(TWO_FACTOR + "\n# edited\n")
    with pytest.raises(StoreError, match="holds a different sweep"):
        api.run(path, out=out, progress_bar=False)


def test_an_axis_may_not_take_a_name_the_engine_gives_refinement_points(tmp_path):
    """`pair_i` and `pair_j` are the int32 inputs of a threshold refinement's points
    (`model.PAIR_HPS`): an own model's axis of that name would be cast to int32 or overwritten,
    so the spec is refused, naming the key and the file."""
    path = _spec(_model_dir(tmp_path, TWO_FACTOR), RAW | {"axes": RAW["axes"] | {"pair_j": [0.5, 1.5]}})
    with pytest.raises(SpecError, match=rf"{path}: key 'axes.pair_j': a name the engine gives a threshold refinement"):
        spec.load(path)


def test_keyword_arguments_and_the_python_api(tmp_path):
    """A [model] table's other keys are the class's keyword arguments; `api.run(spec,
    model=Instance(...))` runs the same sweep (same hash) as the spec naming the class and those
    arguments."""
    import importlib.util

    source = TWO_FACTOR.replace("class TwoFactor:", "import dataclasses\n\n\n@dataclasses.dataclass(frozen=True)\nclass TwoFactor:\n    scale: float = 1.0\n")
    source = source.replace('residual = params["u"] * params["v"] - task["sigma_star"]',
                            'residual = params["u"] * params["v"] - self.scale * task["sigma_star"]')
    folder = _model_dir(tmp_path, source)
    raw = RAW | {"model": {"class": "model.py:TwoFactor", "scale": 0.5}}
    by_table = spec.load(_spec(folder, raw), ["steps=20000"])
    module_spec = importlib.util.spec_from_file_location("user_two_factor", folder / "model.py")
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    by_object = api.run(RAW, out=tmp_path / "api", overrides=["steps=20000"], model=module.TwoFactor(scale=0.5),
                        progress_bar=False)
    assert json.loads((by_object.folder / "manifest.json").read_text())["spec_hash"] == by_table.spec_hash()
    traj = api.load_trajectories(by_object.folder)
    last = traj[traj.step == traj.groupby("run_id").step.transform("max")]
    # scale 0.5 reached the model: GD converges to sigma = 0.5 sigma* = (6, 3) (loss <= 1e-6 of its
    # start, so sigma within ~1e-3 relative), not to (12, 6)
    np.testing.assert_allclose(last[["sigma_0", "sigma_1"]].to_numpy(), [[6.0, 3.0]] * 2, rtol=1e-2)
    with pytest.raises(SpecError, match="not a class defined at the top level"):
        api.run(RAW, out=tmp_path / "bad", model=object(), progress_bar=False)


BROKEN = {
    "syntax": ("def init(self:\n", "model.py:TwoFactor", r"model.py, line 1: syntax error"),
    "no class": (TWO_FACTOR, "model.py:ThreeFactor", r"defines no class 'ThreeFactor'; it defines TwoFactor"),
    "no method": (TWO_FACTOR.replace("def observe", "def watch"), "model.py:TwoFactor", r"has no method observe"),
    "not scalar": (TWO_FACTOR.replace("0.5 * jnp.sum(residual * residual)", "0.5 * residual * residual"),
                   "model.py:TwoFactor", r"loss\(params, hp, task\) must return a scalar, got shape \(2,\)"),
    "shape mismatch": (TWO_FACTOR.replace('k = task["sigma_star"].shape[0]', "k = 3"), "model.py:TwoFactor",
                       r"loss\(params, hp, task\) failed on one trajectory's inputs: TypeError"),
    "import error": ("import no_such_module\n", "model.py:TwoFactor", r"raised ModuleNotFoundError"),
    "no file": (TWO_FACTOR, "other.py:TwoFactor", r"no such model file"),
    "no colon": (TWO_FACTOR, "model.py", r"unknown model 'model.py'"),
    "sigma length": (TWO_FACTOR.replace('return {"sigma": params["u"] * params["v"]}',
                                        'return {"sigma": (params["u"] * params["v"])[:1]}'),
                     "model.py:TwoFactor", r"has 1 values but task.sigma_star has 2 targets"),
}


@pytest.mark.parametrize("case", BROKEN)
def test_broken_model_files_are_clear_errors(tmp_path, case, capsys):
    """Each mistake is one line on the command line (exit 2), naming the spec, the model and
    what is wrong; never a traceback from inside JAX."""
    from conftest import run_main

    source, model, message = BROKEN[case]
    path = _spec(_model_dir(tmp_path, source), RAW | {"model": model})
    code, out, err = run_main(capsys, "run", path, "--out", tmp_path / "out")
    assert code == 2 and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1 and str(path) in err, err
    assert pd.Series([err]).str.contains(message).all(), err
    assert not (tmp_path / "out").exists()


def test_shards_show_and_trajectory_figures(tmp_path):
    """A user's model runs in shards into one folder (like a built-in), `show` summarizes the
    folder, and the trajectory figure draws its sigma_i with the class's `observed` label."""
    folder = _model_dir(tmp_path, TWO_FACTOR)
    path, out = _spec(folder, RAW | {"axes": RAW["axes"] | {"sigma0": [1e-3, 1e-2, 1e-1]}}), tmp_path / "sharded"
    for shard in ((1, 2), (2, 2)):
        api.run(path, out=out, chunk_size=1, shard=shard, progress_bar=False)
    status = api.show(out)
    assert status["status"] == "complete" and status["runs"] == "3 of 3" and status["model"] == "model.py:TwoFactor"
    [figure] = api.plot_run(out, kind="trajectories", x="sigma0", y="imbalance")
    assert figure.name == "trajectories.png" and figure.stat().st_size > 10_000


SEEDED = '''
import jax
import jax.numpy as jnp


class NoisyTarget:
    """sigma = w (one layer), loss 1/2 ||w - t||^2 with t = sigma* + noise drawn per seed."""

    def draw(self, key, task):
        return {"target": task["sigma_star"] + 0.1 * jax.random.normal(key, task["sigma_star"].shape)}

    def init(self, key, hp, task):
        return {"w": jnp.full(task["sigma_star"].shape, hp["sigma0"])}

    def loss(self, params, hp, task):
        return 0.5 * jnp.sum((params["w"] - task["target"]) ** 2)

    def observe(self, params, hp, task):
        return {"sigma": params["w"]}
'''


def test_a_model_that_draws_data_per_seed(tmp_path, recwarn):
    """The optional hook `draw` makes each seed's data inside the program: GD on 1/2 ||w - t||^2
    converges to w = t, so the final sigma of two seeds differ (by the 0.1-scale noise) and equal
    the seed's target; no warning that the seeds are identical."""
    folder = _model_dir(tmp_path, SEEDED)
    raw = {"name": "seeded", "model": "model.py:NoisyTarget", "steps": 2000, "task": {"sigma_star": [2.0, 1.0]},
           "axes": {"sigma0": [0.1], "lr": [0.1], "seed": [0, 1]}, "record": {"points": 10, "levels": []}}
    api.run(_spec(folder, raw), out=tmp_path / "out", progress_bar=False)
    traj = api.load_trajectories(tmp_path / "out")
    final = traj.sort_values(["run_id", "step"]).groupby("run_id")[["sigma_0", "sigma_1"]].last().to_numpy()
    assert np.abs(final[0] - final[1]).max() > 1e-3 and np.abs(final - [2.0, 1.0]).max() < 0.5
    assert not [w for w in recwarn if "identical" in str(w.message)]
    [figure] = api.plot_run(tmp_path / "out")       # no hitting levels: the family's figure, the trajectories
    assert figure.name == "trajectories.png"
