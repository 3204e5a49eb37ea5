"""Sequential vs simultaneous learning in deep linear regression networks (the `linear-net-phase`
reproduction): with Gidel's aligned init on Sigma_x = lambda I, each singular mode of the network is
Gissin's toy model at step N lambda eta (`models.linear_net.toy_lr`), so its thresholds carry the
toy's theory; seeds of a Gaussian init are summarized per cell (`analysis.incremental.over_seeds`,
`thresholds_over_seeds`)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dlsweep import api, models, spec
from dlsweep.analysis import incremental, theory

PHASE_NAMES = ("linear-net-phase",)           # the reproductions tested here
LEVELS = [0.05, 0.5, 0.95]
W_TRUE = [1.0, 0.5, 0.25]


def sweep_of(model: str, task: dict, axes: dict, steps: int, points: int = 2):
    return spec.resolve({"name": model, "model": model, "steps": steps, "dtype": "float64", "task": task,
                         "axes": axes, "record": {"points": points, "levels": LEVELS}})


def linear_task(**changes) -> dict:
    return {"data": "spectrum", "eigenvalues": [2.0, 2.0, 2.0], "w_true": W_TRUE, "width": 4, "init": "aligned"} | changes


def flow_margin(row):
    """ln sigma0 -> the toy's gradient-flow margin t_s(s*_j) - t_f(s*_i) (incremental while
    positive, THEORY.md 2.2) in GD steps of the row's toy_lr, for a row of a thresholds table."""
    def margin(log_sigma0: float) -> float:
        sigma0 = math.exp(log_sigma0)
        return (theory.time_to_reach(row.sigma_star_j, sigma0, row.s, row.depth)
                - theory.time_to_reach(row.sigma_star_i, sigma0, row.f, row.depth)) / row.toy_lr
    return margin


def step_in_log_sigma0(row) -> float:
    """A GD step's worth of ln sigma0 at the flow's threshold: hitting steps are integers, so GD
    resolves the threshold only to the change of sigma0 that moves the margin by one step,
    1 / |d margin / d ln sigma0| (THEORY.md 2.2)."""
    margin, at = flow_margin(row), math.log(row.gf_exact)
    return 2e-4 / abs(margin(at + 1e-4) - margin(at - 1e-4))


@pytest.mark.parametrize("task, scale", [(linear_task(), 2.0),
                                         (linear_task(eigenvalues=[4.0, 1.0, 0.25], whiten=True), 1.0)],
                         ids=["sigma_x=2I", "whitened"])
def test_aligned_network_takes_the_toy_models_steps_at_n_lambda_eta(tmp_path, task, scale):
    """Each mode a of the aligned network follows a <- a - eta lambda a^(N-1) (a^N - w*_i); the toy's
    eq. 9 is w <- w - (eta_toy / N) w^(N-1) (w^N - sigma*_i). Expected, in float64 for depths 1-4
    and sigma0 from 1e-4 to 0.1: the network's recorded singular values equal the toy's run at
    eta_toy = N lambda eta (lambda = 2 for Sigma_x = 2I; 1 once whitened, where the targets are
    sqrt(lambda_i) w*_i) to 1e-9 relative, and every first-hitting step is the same (the two differ
    only in the order of floating-point products)."""
    lr, depths, sigma0 = 0.01, [1, 2, 3, 4], [1e-4, 1e-3, 1e-2, 0.1]
    net_sweep = sweep_of("linear_net", task, {"depth": depths, "sigma0": sigma0, "lr": [lr]}, 3000, points=30)
    api.run(net_sweep, out=tmp_path / "net", progress_bar=False)
    targets = models.FAMILIES["linear_net"].targets(net_sweep.task)
    toy_sweep = sweep_of("toy", {"sigma_star": list(targets)},
                         {"depth": depths, "sigma0": sigma0, "lr": [n * scale * lr for n in depths]}, 3000, points=30)
    api.run(toy_sweep, out=tmp_path / "toy", progress_bar=False)
    net, toy = api.load(tmp_path / "net"), api.load(tmp_path / "toy")
    toy = toy[np.isclose(toy.lr, toy.depth * scale * lr, rtol=1e-12)]
    hits = [f"hit_{i}_{round(100 * level)}" for i in range(3) for level in LEVELS]
    pairs = net.merge(toy, on=["depth", "sigma0"], suffixes=("_net", "_toy"))
    assert len(pairs) == len(depths) * len(sigma0)
    for column in hits:
        assert (pairs[f"{column}_net"] == pairs[f"{column}_toy"]).all(), column
    paths = api.load_trajectories(tmp_path / "net").merge(net[["run_id", "depth", "sigma0"]], on="run_id").merge(
        api.load_trajectories(tmp_path / "toy").merge(toy[["run_id", "depth", "sigma0"]], on="run_id"),
        on=["depth", "sigma0", "step"], suffixes=("_net", "_toy"))
    assert paths.groupby(["depth", "sigma0"]).size().min() >= 5      # recorded until both converge
    for i in range(3):
        np.testing.assert_allclose(paths[f"sigma_{i}_net"], paths[f"sigma_{i}_toy"], rtol=1e-9, atol=0)


def test_toy_lr_only_where_the_network_follows_the_toy_model():
    """`toy_lr` is N lambda eta exactly where the modes decouple into scalar networks with one time
    scale (aligned init at shape 0, population data, Sigma_x = lambda I or whitened, every mode in
    the width), and None wherever one of those fails."""
    family = models.FAMILIES["linear_net"]

    def toy_lr(cell=None, **changes):
        task = family.validate_task(linear_task(**changes), lambda key, message: ValueError(f"{key}: {message}"))
        return family.toy_lr(task, {"depth": 3, "lr": 0.1} | (cell or {}))

    assert toy_lr() == pytest.approx(3 * 2.0 * 0.1, rel=1e-15)
    assert toy_lr(eigenvalues=[4.0, 1.0, 0.25], whiten=True) == pytest.approx(0.3, rel=1e-15)
    assert toy_lr({"shape": 0.0}) == pytest.approx(0.6, rel=1e-15)
    assert toy_lr(init="gaussian") is None
    assert toy_lr(init="glorot") is None
    assert toy_lr(eigenvalues=[4.0, 1.0, 0.25]) is None        # modes on different time scales
    assert toy_lr(examples=50) is None                          # sampled statistics
    assert toy_lr(width=2) is None                              # the third mode starts (and stays) at 0
    assert toy_lr({"shape": 0.5}) is None                       # unbalanced layers
    assert models.FAMILIES["toy"].toy_lr({}, {"depth": 3, "lr": 0.1}) == 0.1
    gaussian = {"sigma_star": [1.0], "init": "gaussian", "measurements": 0}
    assert models.FAMILIES["matrix_sensing"].toy_lr(gaussian, {"depth": 3, "lr": 0.1}) is None


def test_aligned_network_thresholds_carry_the_toy_models_theory(tmp_path):
    """The thresholds of an aligned network are the toy's at step N lambda eta, so `api.thresholds`
    puts Gissin's theory beside them, with `toy_lr`. Expected (Sigma_x = I, lr = 0.01, bisection to
    1e-5): toy_lr = N lr; at N = 2, 3, 4 each bisected threshold is within three GD steps' worth
    (step_in_log_sigma0: 0.1% to 2% of sigma0 here) of the exact gradient-flow threshold gf_exact
    of the toy (theory.log_gf_threshold; at N = 2, (1, 0.5): 3.644e-5): one for the integer
    hitting steps, and GD's path lags the flow's by O(lr) in time, a few steps over the
    ln(s*/sigma0) e-folds of the growth (reference.gd_gf_n2_first_order), partly cancelling
    between t_f and t_s (measured: at most 0.7 of a step's worth, at N = 4; 0.21% at most). At
    N = 2 it lies in Theorem 3's band; at N = 1 the theory says no sigma0 is incremental and none
    is."""
    lr = 0.01
    sweep = sweep_of("linear_net", linear_task(eigenvalues=[1.0, 1.0, 1.0]),
                     {"depth": [1, 2, 3, 4], "sigma0": {"logspace": [-7, -0.5], "num": 14}, "lr": [lr]}, 12000)
    api.run(sweep, out=tmp_path, progress_bar=False)
    table = api.thresholds(tmp_path, pairs="adjacent", method="bisect", rtol=1e-5)
    np.testing.assert_allclose(table.toy_lr, table.depth * lr, rtol=1e-15)
    deep = table[table.depth >= 2]
    assert (deep.status == "ok").all()
    for row in deep.itertuples():
        assert abs(math.log(row.sigma0_th / row.gf_exact)) <= 3 * step_in_log_sigma0(row), row
    first = deep[(deep.depth == 2) & (deep.i == 0)].iloc[0]
    assert first.gf_exact == pytest.approx(3.6444e-5, rel=1e-4)
    two = deep[deep.depth == 2]
    assert ((two.thm3_chain_lower <= two.sigma0_th) & (two.sigma0_th <= two.thm3_upper)).all()
    shallow = table[table.depth == 1]
    assert (shallow.status == "below grid").all() and shallow.gf_exact.isna().all()


def test_networks_off_the_toy_model_get_no_theory(tmp_path):
    """A Gaussian init follows no closed form: its thresholds table has no theory columns and no
    `toy_lr`. Expected: the columns are absent, and every depth-2 and depth-3 seed has a threshold."""
    sweep = sweep_of("linear_net", linear_task(init="gaussian", width=6),
                     {"depth": [2, 3], "sigma0": {"logspace": [-6, -0.5], "num": 12}, "lr": [0.02], "seed": [0, 1]}, 8000)
    api.run(sweep, out=tmp_path, progress_bar=False)
    table = api.thresholds(tmp_path, pairs=[(0, 1)])
    assert not {"toy_lr", "gf_exact"} & set(table.columns)
    assert len(table) == 4 and (table.status == "ok").all()


def test_over_seeds_is_the_share_of_decided_seeds_per_cell():
    """Expected, by hand: cell (1, 2) has 2 incremental of 3 decided seeds (one undecided is left
    out): 2/3 of 3; cell (2, 2) has none decided: NaN of 0; cell (1, 3) 0 of 1."""
    rows = [(1, 2, incremental.INCREMENTAL), (1, 2, incremental.INCREMENTAL), (1, 2, incremental.NOT_INCREMENTAL),
            (1, 2, incremental.UNDECIDED), (2, 2, incremental.DIVERGED), (1, 3, incremental.NOT_INCREMENTAL)]
    frame = pd.DataFrame(rows, columns=["sigma0", "depth", "status"])
    summary = incremental.over_seeds(frame, ["sigma0", "depth"]).set_index(["sigma0", "depth"])
    assert summary.loc[(1, 2)].incremental_fraction == pytest.approx(2 / 3) and summary.loc[(1, 2)].seeds == 3
    assert math.isnan(summary.loc[(2, 2)].incremental_fraction) and summary.loc[(2, 2)].seeds == 0
    assert summary.loc[(1, 3)].incremental_fraction == 0 and summary.loc[(1, 3)].seeds == 1


def test_thresholds_over_seeds_are_the_median_and_range_of_those_found():
    """Expected, by hand: depth 2 with thresholds 1e-4, 3e-4, 2e-4 and one seed above the grid:
    median 2e-4, range [1e-4, 3e-4], 3 seeds; the theory column is carried once per cell."""
    table = pd.DataFrame({"depth": [2, 2, 2, 2], "seed": [0, 1, 2, 3], "i": 0, "j": 1,
                          "sigma0_th": [1e-4, 3e-4, 2e-4, math.nan], "status": ["ok", "ok", "ok", "above grid"],
                          "gf_exact": 5e-5})
    (row,) = incremental.thresholds_over_seeds(table, ["depth"]).itertuples()
    assert (row.sigma0_th, row.sigma0_th_min, row.sigma0_th_max, row.seeds, row.gf_exact) == (2e-4, 1e-4, 3e-4, 3, 5e-5)


@pytest.mark.slow      # 17 s on 2 cores
def test_linear_net_phase_quick_reproduction(quick_reproduction):
    """The bundled phase diagram (quick: depths 1-4, 12 sigma0 over 5.5 decades, 3 Gaussian seeds).
    Expected: it draws both heatmaps; at N = 2..4 the aligned variant's thresholds are the grid's
    reading of the toy's gradient-flow threshold: the grid method interpolates the hitting-step
    margin linearly in ln sigma0 between the grid points around the threshold, half a decade
    apart, so it reads the flow's margin (flow_margin) as crossing 0 where its linear interpolation
    between those points does (up to 8% from gf_exact here, at N = 4); the thresholds are within
    three GD steps' worth of that (step_in_log_sigma0, as in
    test_aligned_network_thresholds_carry_the_toy_models_theory; measured at most 0.52 of one, at
    N = 3, toy_lr 0.15); depth 1 is incremental nowhere in either variant
    (the linear model learns every mode at one rate, Gidel's Prop. 1); the Gaussian init's median
    threshold grows with depth, as the aligned one does (as the toy's does, Gissin's Theorem 2)."""
    result = quick_reproduction(*PHASE_NAMES)
    aligned, gaussian = result.folder / "aligned", result.folder / "gaussian"
    for folder in (aligned, gaussian):
        assert (folder / "figures" / "heatmap-sigma0-depth.png").stat().st_size > 10_000
    table = pd.read_parquet(aligned / "thresholds.parquet")
    deep = table[table.depth >= 2]
    assert (deep.status == "ok").all()
    for row in deep.itertuples():
        lo, hi = math.log(row.bracket_lo), math.log(row.bracket_hi)
        margin = flow_margin(row)
        reading = lo + margin(lo) / (margin(lo) - margin(hi)) * (hi - lo)
        assert abs(math.log(row.sigma0_th) - reading) <= 3 * step_in_log_sigma0(row), row
    seeded = pd.read_parquet(gaussian / "thresholds.parquet")
    for frame in (table, seeded):
        assert (frame[frame.depth == 1].status == "below grid").all()
    medians = incremental.thresholds_over_seeds(seeded[seeded.depth >= 2], ["depth"])
    first_pair = medians[medians.i == 0].sort_values("depth")
    assert (np.diff(first_pair.sigma0_th) > 0).all(), first_pair
