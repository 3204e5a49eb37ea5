"""Optimizers through `[optimizer]` (dlsweep.optimizers): momentum, Nesterov and Adam on the toy
model against the NumPy float64 references of tests/optimizer_reference.py, with their
hyperparameters swept as axes of one program; plain GD unchanged; spec errors."""

from __future__ import annotations

import tomllib

import numpy as np
import pandas as pd
import pytest

from optimizer_reference import toy_optimizer
from dlsweep import api, engine, spec, store

SIGMA_STAR = [12.0, 6.0, 4.0, 3.0]
STEPS = 400
BASE = {"name": "opt", "model": "toy", "steps": STEPS, "dtype": "float64", "task": {"sigma_star": SIGMA_STAR},
        "axes": {"depth": [1, 2, 3], "sigma0": [1e-2, 0.1], "lr": [1e-3, 4e-3]},
        "record": {"points": 30, "levels": [0.05, 0.5]}, "stop": {"rel_loss": 0.0}}


def _run(tmp_path_factory, raw):
    sweep = spec.resolve(raw)
    folder = tmp_path_factory.mktemp(sweep.name)
    api.run(sweep, out=folder, progress_bar=False)
    return sweep, folder, store.load(folder), store.load_trajectories(folder)


def _sigma(runs, traj, record_steps):
    """sigma_i at the recorded steps as (B, R, k), in the runs' order."""
    index = pd.MultiIndex.from_product([runs.run_id, record_steps], names=["run_id", "step"])
    columns = [f"sigma_{i}" for i in range(len(SIGMA_STAR))]
    return traj.set_index(["run_id", "step"]).reindex(index)[columns].to_numpy().reshape(
        len(runs), len(record_steps), len(columns))


CASES = {
    # name: (optimizer table, swept hyperparameter axes, learning rates)
    "momentum": ({"name": "momentum"}, {"momentum": [0.0, 0.5, 0.9]}, [1e-3, 4e-3]),
    "nesterov": ({"name": "nesterov", "momentum": 0.8}, {}, [1e-3, 4e-3]),
    # Adam moves each w_i by about eta a step: 300 steps at eta <= 1e-3 keep every value far
    # below its target, away from where its update is the sign of a cancelling residual
    "adam": ({"name": "adam", "b2": 0.99}, {"b1": [0.8, 0.9], "eps": [1e-8, 1e-3]}, [3e-4, 1e-3]),
}


@pytest.mark.parametrize("name", CASES)
def test_optimizer_matches_numpy_reference(tmp_path_factory, name):
    """sigma_i at every recorded step of a float64 sweep equals the NumPy float64 loop of the
    optimizer's update rule (optimizer_reference.toy_optimizer) to 1e-9 relative, every swept
    hyperparameter value in the one program.

    Why 1e-9: both sides run the same float64 recurrences up to the order of operations (autodiff
    and optax against the closed gradient), a few 1e-16 per step; over 400 steps, amplified by at
    most the toy's sensitivity to early errors ((s*/sigma0)^(1-2/N) <= 1.1e2 at N = 3,
    sigma0 = 1e-2), that is below 1e-11. A wrong sign, bias correction or momentum placement
    (heavy ball vs Nesterov) is off by more than 1e-4 at the first recorded steps."""
    table, swept, lrs = CASES[name]
    raw = BASE | {"name": name, "optimizer": table, "axes": BASE["axes"] | {"lr": lrs} | swept}
    sweep, _, runs, traj = _run(tmp_path_factory, raw)
    assert not runs.diverged.any() and (runs.steps_run == STEPS).all()
    for axis in swept:
        assert sorted(runs[axis].unique()) == swept[axis]
    fixed = dict(sweep.optimizer.fixed)
    hyperparameters = {h: runs[h].to_numpy() if h in swept else fixed[h] for h in sweep.optimizer.kind.defaults}
    record_steps = engine.record_steps("log", 30, STEPS)
    expected = toy_optimizer(name, SIGMA_STAR, runs.depth.to_numpy(), runs.sigma0.to_numpy(), runs.lr.to_numpy(),
                             hyperparameters, STEPS, record_steps)
    np.testing.assert_allclose(_sigma(runs, traj, record_steps), expected, rtol=1e-9, atol=0)
    plain = toy_optimizer("momentum", SIGMA_STAR, runs.depth.to_numpy(), runs.sigma0.to_numpy(), runs.lr.to_numpy(),
                          {"momentum": 0.0}, STEPS, record_steps)
    moved = np.abs(expected[runs.depth.to_numpy() > 1] / plain[runs.depth.to_numpy() > 1] - 1).max()
    assert moved > 1e-4 or name == "momentum"      # the reference itself tells the optimizers apart


def test_momentum_zero_is_gradient_descent_bit_for_bit(tmp_path_factory):
    """momentum = 0 is t = g, so w - eta t = w - eta g: the heavy-ball runs at momentum 0 equal
    plain GD's (no [optimizer] table) bit for bit, in the default float32, hitting steps and all;
    an explicit `name = "sgd"` is the same sweep (same hash)."""
    raw = BASE | {"name": "gd", "dtype": "float32"}
    sweep, _, gd, gd_traj = _run(tmp_path_factory, raw)
    assert spec.resolve(raw | {"optimizer": {"name": "sgd"}}).spec_hash() == sweep.spec_hash()
    _, _, heavy, heavy_traj = _run(tmp_path_factory, raw | {"name": "hb", "optimizer": {"name": "momentum"},
                                                            "axes": raw["axes"] | {"momentum": [0.0, 0.9]}})
    keys = ["depth", "sigma0", "lr"]
    at_zero = heavy[heavy.momentum == 0].merge(gd[keys + ["run_id"]], on=keys, suffixes=("", "_gd"))
    assert len(at_zero) == len(gd)
    hits = [c for c in gd.columns if c.startswith("hit_")]
    np.testing.assert_array_equal(at_zero[hits].to_numpy(), gd.set_index("run_id").loc[at_zero.run_id_gd, hits].to_numpy())
    record_steps = engine.record_steps("log", 30, STEPS)
    np.testing.assert_array_equal(_sigma(at_zero, heavy_traj, record_steps),
                                  _sigma(gd.set_index("run_id").loc[at_zero.run_id_gd].reset_index(), gd_traj, record_steps))
    fast = heavy[heavy.momentum == 0.9].merge(gd[keys + ["hit_1_50"]], on=keys, suffixes=("", "_gd"))
    reached = (fast.hit_1_50 > 0) & (fast.hit_1_50_gd > 0)
    assert reached.any() and (fast.hit_1_50[reached] < fast.hit_1_50_gd[reached]).all()   # momentum is faster


def test_thresholds_of_another_optimizer_carry_no_gd_theory(tmp_path_factory):
    """Gissin et al.'s thresholds are of GD: a momentum sweep's thresholds table has its measured
    thresholds but no theory columns, and the lr figure (Theorem 3) refuses it."""
    raw = BASE | {"name": "hb_th", "dtype": "float32", "steps": 3000, "optimizer": {"name": "momentum", "momentum": 0.5},
                  "axes": {"depth": [2], "sigma0": {"logspace": [-4, -0.5], "num": 8}, "lr": [1e-2, 2e-2]},
                  "record": {"points": 10, "levels": [0.05, 0.95]}}
    _, folder, _, _ = _run(tmp_path_factory, raw)
    table = api.thresholds(folder)
    assert "sigma0_th" in table and "gf_exact" not in table and "thm3_upper" not in table
    with pytest.raises(Exception, match="Theorem 3"):
        api.plot_run(folder, kind="lr")


@pytest.mark.parametrize("changes, key, message", [
    ({"optimizer": {"name": "rmsprop"}}, "optimizer.name", "unknown optimizer 'rmsprop'"),
    ({"optimizer": {"name": "momentum", "beta": 0.9}}, "optimizer.beta", "unknown key"),
    ({"optimizer": {"name": "momentum", "momentum": 1.0}}, "optimizer.momentum", r"in \[0, 1\)"),
    ({"optimizer": {"name": "adam", "eps": 0.0}}, "optimizer.eps", r"in \(0, inf\)"),
    ({"dtype": "float32", "optimizer": {"name": "adam", "eps": 1e-50}}, "optimizer.eps", "underflows float32"),
    ({"optimizer": {"name": "momentum", "momentum": "high"}}, "optimizer.momentum", "expected a number"),
    ({"axes": BASE["axes"] | {"momentum": [0.5]}}, "axes.momentum", "optimizer momentum / nesterov"),
    ({"optimizer": {"name": "momentum", "momentum": 0.5}, "axes": BASE["axes"] | {"momentum": [0.1, 0.5]}},
     "optimizer.momentum", "also swept as axes.momentum"),
    ({"optimizer": {"name": "momentum"}, "axes": BASE["axes"] | {"momentum": [0.1, -0.5]}},
     "axes.momentum", r"expected momentum in \[0, 1\), got -0.5"),
    ({"optimizer": "adam"}, "optimizer", "expected a table"),
])
def test_optimizer_spec_errors(changes, key, message):
    """Bad optimizer settings are a SpecError naming the key and what was wrong."""
    with pytest.raises(spec.SpecError, match=rf"key '{key}'.*{message}"):
        spec.resolve(BASE | changes, source="sweep.toml")


def test_optimizer_round_trips_through_sweep_toml():
    """The resolved [optimizer] table (defaults filled in, swept ones left to the axes) is written
    to sweep.toml and read back to the same sweep."""
    sweep = spec.resolve(BASE | {"optimizer": {"name": "adam", "b2": 0.99}, "axes": BASE["axes"] | {"b1": [0.5, 0.9]}})
    assert sweep.to_dict()["optimizer"] == {"name": "adam", "b2": 0.99, "eps": 1e-8}
    again = spec.resolve(tomllib.loads(sweep.to_toml()))
    assert again.optimizer == sweep.optimizer and again.to_dict() == sweep.to_dict()


MOMENTUM_NAMES = ("toy-momentum",)


def test_quick_momentum_reproduction(tmp_path):
    """`dlsweep reproduce toy-momentum --quick`: its three figures, and at momentum 0 (plain GD
    at eta <= 1e-2, inside Lemma 1's no-overshoot step) each threshold's grid bracket holds
    gradient flow's exact threshold (theory.log_gf_threshold, Gissin et al. Theorem 1): GD at
    these steps decides like gradient flow to within one grid spacing (0.32 decades)."""
    from dlsweep import reproduce
    from dlsweep.analysis import theory

    result = reproduce.run("toy-momentum", quick=True, out_root=tmp_path, progress_bar=False)
    assert [p.name for p in result.figures] == ["thresholds-depth-momentum.png", "thresholds-depth-momentum-lr0.01.png",
                                                "heatmap-sigma0-momentum-depth4.png"]
    table = pd.read_parquet(result.thresholds)
    assert sorted(table.momentum.unique()) == [0.0, 0.9] and "gf_exact" not in table
    gd = table[(table.momentum == 0) & (table.i == 0) & (table.j == 1)]
    assert len(gd) == 6 and (gd.status == "ok").all()
    flow = np.exp([theory.log_gf_threshold(12.0, 6.0, 0.05, 0.95, float(n)) for n in gd.depth])
    assert ((gd.bracket_lo <= flow) & (flow <= gd.bracket_hi)).all()
