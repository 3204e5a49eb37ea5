"""The reproductions of the model families: Gissin et al. 2020, section 4 and its appendices
(Figures 1a-d, 3-7) and the deep linear regression papers (Gidel et al. 2019, Hacohen &
Weinshall): each --quick version end to end (run folders, figures), and Gissin's
claims on its numbers (the linear networks' claims: test_reproduce_linear.py). The
`quick_reproduction` fixture (conftest.py) runs each once."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import marked_slow
from dlsweep import api, reproduce

MODEL_NAMES = ("gissin-fig1", "gissin-fig1a", "gissin-fig1b", "gissin-fig1c", "gissin-fig1d", "gissin-fig3",
               "gissin-fig4", "gissin-fig5", "gissin-fig6", "gissin-fig7", "gidel-fig1", "gidel-fig2",
               "hacohen-fig2", "hacohen-fig3", "hacohen-fig4", "hacohen-fig7", "hacohen-fig9", "hacohen-fig10",
               "hacohen-fig12")
SLOW = {"gissin-fig1", "gissin-fig3", "gissin-fig4"}      # 17-19 s each on 2 cores (their --quick runs)


def run_folders(result) -> list:
    variants = reproduce.REPRODUCTIONS[result.name].variants
    return [result.folder / v.folder for v in variants] if variants else [result.folder]


# the panels a reproduction's figures must draw, where a figure sets several side by side (file name: count)
PANELS = {"gissin-fig1": {"panels.png": 4}, "gissin-fig5": {"values-variants.png": 4},
          "gissin-fig6": {"trajectories-sigma00.001-seed0.png": 5}, "gissin-fig7": {"trajectories-seed0.png": 3},
          "gissin-fig4": {"values-variants.png": 8}, "hacohen-fig2": {"pc_curves.png": 2},
          "hacohen-fig3": {"gradient_scales.png": 4}, "hacohen-fig7": {"learning_order.png": 1},
          "hacohen-fig9": {"test_accuracy-accuracy-variants.png": 2},
          "hacohen-fig10": {"accuracy-excess_loss-variants.png": 4},
          "hacohen-fig12": {"accuracy-excess_loss-variants.png": 2}}


def combined_name(repro) -> list[str]:
    if not repro.combined:
        return []
    column = repro.combined[0]
    if column in (reproduce.PANELS, reproduce.LEARNING_ORDER):
        return [f"{column}.png"]
    return [f"{'-'.join((column,) if isinstance(column, str) else column)}-variants.png"]


@pytest.mark.parametrize("name", marked_slow(MODEL_NAMES, SLOW))
def test_quick_reproduction_runs_and_draws_its_figures(quick_reproduction, name):
    """Each figure of a --quick reproduction is written, one per declared figure and run folder
    (its file named by its kind), and every panel of it draws data under an x label, beside a y
    label (a row's panels share the first one's); the
    figures that set panels side by side have the panels the paper's figure has."""
    result = quick_reproduction(name)
    folders = run_folders(result)
    repro = reproduce.REPRODUCTIONS[name]
    declared = [(folder, f["kind"]) for folder in folders for f in repro.figures]
    assert len(result.figures) == len(declared) + len(combined_name(repro))
    for path, (folder, kind) in zip(result.figures, declared):
        assert path.parent == folder / "figures" and path.stem.startswith(kind)
    assert [p.name for p in result.figures[len(declared):]] == combined_name(repro)
    assert all(p.parent == result.folder / "figures" for p in result.figures[len(declared):])
    for folder in folders:
        runs = api.load(folder)
        assert len(runs) > 0 and not runs.diverged.any()
    for path in result.figures:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000
        panels = quick_reproduction.panels[path]
        assert panels and all(p["data"] > 0 and p["xlabel"] for p in panels), (path.name, panels)
        assert any(p["ylabel"] for p in panels), (path.name, panels)        # shared along a row
    for file, count in PANELS.get(name, {}).items():
        assert len(quick_reproduction.panels[result.folder / "figures" / file]) == count


@pytest.mark.parametrize("name", ["gissin-fig2", "gissin-depth-separation", "gissin-gd", "linear-net-phase",
                                  "azulay-fig7-1", "azulay-phase", "azulay-fig7-2"])
def test_the_other_reproductions_draw_every_panel(quick_reproduction, name):
    """The reproductions tested for their numbers elsewhere (test_reproduce, test_linear_net_phase,
    test_diagonal_net): every panel of every figure draws data under an x label, beside a y label;
    the faceted plane of azulay-phase has a panel per depth."""
    result = quick_reproduction(name)
    assert result.figures
    for path in result.figures:
        panels = quick_reproduction.panels[path]
        assert panels and all(p["data"] > 0 and p["xlabel"] for p in panels), (path.name, panels)
        assert any(p["ylabel"] for p in panels), (path.name, panels)
        if name == "azulay-phase":
            assert [p["title"] for p in panels] == ["$N$ = 2", "$N$ = 3", "$N$ = 4"]


def first_step_at(traj, column: str, value: float) -> float:
    """Mean over runs of the first recorded step where `column` >= value (inf if never)."""
    reached = traj[traj[column] >= value].groupby("run_id")["step"].min()
    return reached.reindex(traj.run_id.unique()).fillna(np.inf).mean()


def test_fig1a_matrix_sensing_learns_the_largest_singular_value_first(quick_reproduction):
    """Figure 1a: the singular values of W reach half their targets 12, 6, 4 in that order, and the
    5th (W* has rank 4) stays below 0.1."""
    result = quick_reproduction("gissin-fig1a")
    traj = api.load_trajectories(result.folder)
    times = [first_step_at(traj, f"sigma_{i}", target / 2) for i, target in enumerate([12.0, 6.0, 4.0])]
    assert times[0] < times[1] < times[2] < np.inf
    assert traj.sigma_4.max() < 0.1


def test_fig6_deeper_diagonal_classifiers_correlate_better_with_the_sparse_labelling_vector(quick_reproduction):
    """Figure 6, left: at depth 1 the correlation with w* is close to the max-margin SVM's (within
    0.1; both maximize an l2 margin), at depth >= 2 it is higher, and above 0.95 at the smallest
    sigma0."""
    result = quick_reproduction("gissin-fig6")
    runs = api.load(result.folder)
    mean = runs.groupby(["depth", "sigma0"]).correlation.mean()
    svm = runs.groupby("seed").svm_correlation.first().mean()
    assert abs(mean.loc[1].mean() - svm) < 0.1
    smallest = runs.sigma0.min()
    for depth in range(2, 6):
        assert mean.loc[(depth, smallest)] > mean.loc[1].max()
        assert mean.loc[(depth, smallest)] > 0.95


def test_fig7_deeper_convolutional_classifiers_correlate_better_than_depth_one(quick_reproduction):
    """Figure 7, left: depth 1 is close to the SVM (within 0.1); depths 2 and 3 correlate higher."""
    result = quick_reproduction("gissin-fig7")
    runs = api.load(result.folder)
    mean = runs.groupby("depth").correlation.mean()
    assert abs(mean.loc[1] - runs.groupby("seed").svm_correlation.first().mean()) < 0.1
    assert mean.loc[2] > mean.loc[1] and mean.loc[3] > mean.loc[1]


@pytest.mark.slow
def test_fig3_the_deep_model_picks_the_features_omp_picks_first(quick_reproduction):
    """Figure 3 (quick: 200 unit-norm atoms in 40 dimensions, s = 1..10, 10 seeds): the first s
    features the depth-5 model selects (|sigma_i| > 0.1) agree with OMP's first s: mean
    agreement >= 0.95 for s <= 3, and lower at s = 10 than at s = 1 (near 1 for small s, falling
    with s). The selections are in order of their steps, and the runs table loads without dlsweep's
    readers (plain pandas)."""
    import pandas as pd

    result = quick_reproduction("gissin-fig3")
    runs = pd.read_parquet(result.folder / "runs")
    mean = runs.groupby("sparsity").omp_agreement.mean()
    assert (mean.loc[[1, 2, 3]] >= 0.95).all(), mean
    assert mean.loc[10] < mean.loc[1]
    assert runs.omp_agreement.notna().mean() > 0.8          # most runs selected a feature
    for at in runs.selected_at:
        assert np.all(np.diff(at) >= 0)


@pytest.mark.slow
def test_fig4_depth_one_grows_a_fifth_singular_value_that_depth_four_does_not(quick_reproduction):
    """Figure 4: with too few measurements (300 < d^2 = 400) depth 1 grows a 5th singular value
    that W* lacks (recovery fails), depth 4 keeps it near 0 (rank 4)."""
    result = quick_reproduction("gissin-fig4")
    folder = result.folder / "few-measurements"
    traj, runs = api.load_trajectories(folder), api.load(folder)
    peak = traj.merge(runs[["run_id", "depth"]]).groupby("depth").sigma_4.max()
    assert peak.loc[1] > 0.5 and peak.loc[4] < 0.1


def test_compare_without_scikit_learn_is_a_clear_error_before_anything_is_written(monkeypatch, tmp_path):
    """`compare = true` with scikit-learn's OMP (gissin-fig3) needs the `compare` extra; without it
    the run stops at once, naming the key and the install command (a finished run's spec still
    loads without scikit-learn). The SVM of gissin-fig6 needs scipy alone: its spec runs."""
    from dlsweep import compare, spec
    from dlsweep.spec import SpecError

    monkeypatch.setattr(compare, "available", lambda module: module is None)
    assert spec.load(reproduce.spec_path("gissin-fig3")).compare
    with pytest.raises(SpecError, match=r"gissin-fig3.toml: key 'compare': .*scikit-learn.*dlsweep\[compare\]"):
        api.run(reproduce.spec_path("gissin-fig3"), out=tmp_path / "fig3")
    assert not (tmp_path / "fig3").exists()
    fig6 = spec.load(reproduce.spec_path("gissin-fig6"), overrides=["steps=64", "axes.seed=[0, 1]", "axes.depth=[1]"])
    assert fig6.compare
    assert api.run(fig6, out=tmp_path / "fig6", progress_bar=False).chunks_missing == 0
    assert api.load(tmp_path / "fig6")["svm_correlation"].notna().all()
