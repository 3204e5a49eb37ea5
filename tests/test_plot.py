"""Figures: each builder of `dlsweep.plot` on a small hand-made frame, checked on what is drawn
(axes, scales, mesh colour codes, line data, legends), and `api.plot_run` / `dlsweep plot` on a
tiny real sweep (file names, -o, errors, headings that name what each figure holds fixed and
fit on it, partial runs)."""

from __future__ import annotations

import math
import re
import os
import shutil
import subprocess
import sys

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PolyCollection, QuadMesh
from matplotlib.colors import to_rgba
from matplotlib.text import Text

from dlsweep import api, cli, plot, spec, store
from dlsweep.analysis import theory
from dlsweep.analysis.incremental import DIVERGED, INCREMENTAL, NOT_INCREMENTAL, UNDECIDED, ThresholdError
from dlsweep.plot import PlotError
from dlsweep.store import StoreError
from dlsweep.warning import DlsweepWarning


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_figures_touch_no_global_matplotlib_state(tmp_path):
    """Importing dlsweep.plot and saving one of its figures as PNG leaves the user's backend as it
    was (here svg, from MPLBACKEND) and pyplot without figures: the figures live outside pyplot
    and Agg renders them when saved."""
    code = ("import matplotlib.pyplot as plt, numpy as np, pandas as pd\n"
            "from dlsweep import plot\n"
            "frame = pd.DataFrame({'sigma0': [1e-3, 1e-2], 'depth': [2, 2], 'x': [1.0, 2.0]})\n"
            f"plot.save(plot.summary_lines(frame, 'sigma0', 'x', 'depth'), [{str(tmp_path / 'f.png')!r}])\n"
            "print(plt.get_backend(), len(plt.get_fignums()))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "MPLBACKEND": "svg"}, check=True)
    assert done.stdout.split() == ["svg", "0"]
    assert (tmp_path / "f.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def legend_texts(legend) -> list[str]:
    return [t.get_text() for t in legend.get_texts()]


def quadmesh(ax) -> QuadMesh:
    meshes = [c for c in ax.collections if isinstance(c, QuadMesh)]
    assert len(meshes) == 1
    return meshes[0]


def line(ax, label: str):
    found = [ln for ln in ax.lines if ln.get_label() == label]
    assert len(found) == 1, [ln.get_label() for ln in ax.lines]
    return found[0]


def bands(ax) -> list[PolyCollection]:
    return [c for c in ax.collections if isinstance(c, PolyCollection)]


def extents(collection) -> tuple[float, float, float, float]:
    """(xmin, xmax, ymin, ymax) of every vertex of a collection, in data coordinates."""
    vertices = np.concatenate([p.vertices for p in collection.get_paths()])
    return vertices[:, 0].min(), vertices[:, 0].max(), vertices[:, 1].min(), vertices[:, 1].max()


# ----------------------------------------------------------------------------- heatmap (status)

SIGMA0 = [1e-4, 1e-3, 1e-2, 1e-1]
DEPTHS = [2, 3, 5]
I, N, U, D = INCREMENTAL, NOT_INCREMENTAL, UNDECIDED, DIVERGED
STATUS = {2: [I, I, N, N],
          3: [U, I, I, N],
          5: [D, I, N, None]}          # None: no trajectory in that cell


def status_frame() -> pd.DataFrame:
    rows = [{"sigma0": s0, "depth": depth, "status": status}
            for depth, statuses in STATUS.items() for s0, status in zip(SIGMA0, statuses) if status is not None]
    return pd.DataFrame(rows).sample(frac=1.0, random_state=0).reset_index(drop=True)   # order must not matter


def test_heatmap_status_axes_codes_and_masked_cells():
    fig = plot.heatmap(status_frame(), "sigma0", "depth", "status")
    ax = fig.axes[0]
    assert len(fig.axes) == 1                                    # no colorbar for categories
    assert ax.get_xscale() == "log" and ax.get_yscale() == "linear"
    assert r"\sigma_0" in ax.get_xlabel()
    assert "depth" in ax.get_ylabel()
    # one equal row per depth, ticked with the depth values
    assert list(ax.get_yticks()) == [0, 1, 2]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["2", "3", "5"]
    # x limits: geometric cell edges around the sigma0 values
    assert ax.get_xlim() == pytest.approx((1e-4 / math.sqrt(10), 1e-1 * math.sqrt(10)), rel=1e-9)

    mesh = quadmesh(ax)
    codes = np.ma.asarray(mesh.get_array()).reshape(len(DEPTHS), len(SIGMA0))
    for r, depth in enumerate(DEPTHS):
        for c, status in enumerate(STATUS[depth]):
            if status == I:
                assert not codes.mask[r, c] and codes[r, c] == 0, (depth, SIGMA0[c])
            elif status == N:
                assert not codes.mask[r, c] and codes[r, c] == 1, (depth, SIGMA0[c])
            elif status == D:
                assert not codes.mask[r, c] and codes[r, c] == 2, (depth, SIGMA0[c])
            else:                                                # undecided, empty: masked
                assert codes.mask[r, c], (depth, SIGMA0[c], status)
    # the two categories get the two Okabe-Ito colours and a diverged cell mid grey; masked cells no
    # colour at all (transparent, the light grey hatched background shows through)
    rgba = mesh.to_rgba(codes)
    assert tuple(rgba[0, 0]) == pytest.approx(to_rgba(plot.OKABE_ITO[0]))
    assert tuple(rgba[0, 3]) == pytest.approx(to_rgba(plot.OKABE_ITO[1]))
    assert tuple(rgba[2, 0]) == pytest.approx(to_rgba(plot.DIVERGED_COLOUR))
    assert rgba[1, 0][3] == 0 and rgba[2, 3][3] == 0
    background = [p for p in ax.patches if p.get_hatch() and p.get_facecolor()[:3] == pytest.approx(to_rgba(plot.MISSING)[:3])]
    assert len(background) == 1
    assert background[0].get_x() == pytest.approx(ax.get_xlim()[0])
    assert background[0].get_width() == pytest.approx(ax.get_xlim()[1] - ax.get_xlim()[0])

    texts = legend_texts(ax.figure.legends[0])
    assert "incremental" in texts and "not incremental" in texts
    assert any("undecided" in t for t in texts) and any(t.startswith("diverged") for t in texts)
    no_diverged = plot.heatmap(status_frame().replace({D: U}), "sigma0", "depth", "status")
    assert not any(t.startswith("diverged") for t in legend_texts(no_diverged.legends[0]))    # only where there is one


THRESHOLDS = pd.DataFrame({                 # rows out of order; depth 7 is not in the heatmap
    "depth": [5, 2, 7, 3],
    "sigma0_th": [4e-3, 2e-3, 9e-3, 3e-3],
    "gf_exact": [4.1e-3, 2.1e-3, 9.1e-3, 3.1e-3],
    "thm2_lower": [1e-3, 1e-70, 1e-3, 1e-5],
    "thm2_upper_valid": [9e-3, 8e-3, 1e-2, math.inf],
})


def test_heatmap_threshold_overlay_lines_and_band():
    fig = plot.heatmap(status_frame(), "sigma0", "depth", "status", thresholds=THRESHOLDS)
    ax = fig.axes[0]
    # one vertical segment per depth row, at that row's threshold, spanning exactly its cell
    measured = line(ax, "measured threshold")
    np.testing.assert_allclose(measured.get_xdata(), np.repeat([2e-3, 3e-3, 4e-3], 2))
    np.testing.assert_allclose(measured.get_ydata(), [-0.5, 0.5, 0.5, 1.5, 1.5, 2.5])
    exact = line(ax, "exact gradient flow")
    np.testing.assert_allclose(exact.get_xdata(), np.repeat([2.1e-3, 3.1e-3, 4.1e-3], 2))
    np.testing.assert_allclose(exact.get_ydata(), [-0.5, 0.5, 0.5, 1.5, 1.5, 2.5])
    # Theorem 2 band: one hatched region per row with a finite valid upper bound (depth 2 and 5),
    # from the lower bound (clipped when it is 1e-70) to the upper bound, over the row's cell
    regions = sorted((extents(b) for b in bands(ax)), key=lambda e: e[2])
    assert len(regions) == 2
    x0, x1, y0, y1 = regions[0]                                 # depth 2
    assert x1 == pytest.approx(8e-3) and (y0, y1) == pytest.approx((-0.5, 0.5))
    assert 1e-70 < x0 <= ax.get_xlim()[0]
    x0, x1, y0, y1 = regions[1]                                 # depth 5
    assert (x0, x1) == pytest.approx((1e-3, 9e-3)) and (y0, y1) == pytest.approx((1.5, 2.5))
    uppers = [ln for ln in ax.lines if ln.get_label().startswith("_") and len(ln.get_xdata()) == 2]
    assert sorted(tuple(ln.get_xdata()) for ln in uppers) == [(8e-3, 8e-3), (9e-3, 9e-3)]
    # the 1e-70 bound does not stretch the axis
    assert ax.get_xlim() == pytest.approx((1e-4 / math.sqrt(10), 1e-1 * math.sqrt(10)), rel=1e-9)
    texts = legend_texts(ax.figure.legends[0])
    assert "measured threshold" in texts and "exact gradient flow" in texts
    assert any("Theorem 2" in t for t in texts)


def test_heatmap_threshold_overlay_on_a_log_y_axis_spans_each_cell():
    lrs = [1e-3, 1e-2, 1e-1]
    frame = pd.DataFrame([{"sigma0": s0, "lr": lr, "status": I if s0 < 5e-3 else N} for lr in lrs for s0 in SIGMA0])
    table = pd.DataFrame({"lr": lrs, "sigma0_th": [2e-3, 3e-3, 4e-3], "gf_exact": [2e-3] * 3})
    ax = plot.heatmap(frame, "sigma0", "lr", "status", thresholds=table).axes[0]
    assert ax.get_yscale() == "log"
    edges = 10.0 ** np.array([-3.5, -2.5, -1.5, -0.5])
    assert ax.get_ylim() == pytest.approx((edges[0], edges[-1]))
    measured = line(ax, "measured threshold")
    np.testing.assert_allclose(measured.get_xdata(), np.repeat([2e-3, 3e-3, 4e-3], 2))
    np.testing.assert_allclose(measured.get_ydata(), [edges[0], edges[1], edges[1], edges[2], edges[2], edges[3]])


def test_a_short_log_axis_of_few_columns_is_ticked_at_each_column():
    """r = 2, 4, 10 (gissin-depth-separation's ratios): a tick labelled by each column's value and
    no minor tick labels (the decade's own 3, 6, 8 labelled no column); a long sigma0 axis keeps
    its decades."""
    frame = pd.DataFrame({"r": [2.0, 4.0, 10.0] * 2, "depth": [2] * 3 + [3] * 3, "value": np.arange(6.0)})
    ax = plot.heatmap(frame, "r", "depth", "value").axes[0]
    assert list(ax.get_xticks()) == [2.0, 4.0, 10.0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["2", "4", "10"]
    assert len(ax.xaxis.get_minorticklocs()) == 0
    wide = plot.heatmap(status_frame(), "sigma0", "depth", "status").axes[0]
    assert len(wide.xaxis.get_minorticklocs()) > 0


def test_heatmap_numeric_colour_has_a_labelled_colorbar():
    values = {2: [1.0, 0.5, -0.5, np.nan], 3: [2.0, 1.5, 0.2, -1.0], 5: [3.0, 2.5, -0.1, -2.0]}
    frame = pd.DataFrame([{"sigma0": s0, "depth": d, "log_hit_ratio": v}
                          for d, vs in values.items() for s0, v in zip(SIGMA0, vs)])
    fig = plot.heatmap(frame, "sigma0", "depth", "log_hit_ratio")
    assert len(fig.axes) == 2                                    # heatmap and colorbar
    ax, cbar_ax = fig.axes
    assert "log_{10}" in cbar_ax.get_ylabel()
    mesh = quadmesh(ax)
    assert mesh.get_cmap().name == "viridis"
    array = np.ma.asarray(mesh.get_array()).reshape(3, 4)
    expected = np.array([values[d] for d in DEPTHS])
    assert array.mask[0, 3] and array.mask.sum() == 1              # the NaN cell: no data colour
    np.testing.assert_allclose(array.filled(np.nan), expected)
    assert mesh.norm.vmin == -2.0 and mesh.norm.vmax == 3.0
    assert "no data (or diverged)" in legend_texts(ax.figure.legends[0])


def test_decisions_frame_status_and_log_hit_ratio():
    runs = pd.DataFrame({
        "run_id": [0, 1, 2, 3, 4],
        "depth": [2, 2, 2, 2, 2],
        "sigma0": [1e-3, 1e-2, 1e-1, 1e-4, 1e-5],
        "diverged": [False, False, False, True, False],
        "hit_0_95": [10, 100, -1, 10, 50],
        "hit_1_5": [100, 10, -1, 100, -1],
    })
    table = plot.decisions_frame(runs, (0, 1), s=0.05, f=0.95)
    assert list(table.status) == [I, N, U, D, I]
    np.testing.assert_allclose(table.log_hit_ratio, [1.0, -1.0, np.nan, 1.0, np.nan])


# ----------------------------------------------------------------------------- trajectories

SIGMA_STAR = [3.0, 2.0, 1.0]
STEPS = np.array([0, 1, 10, 100, 1000])


def traj_frames(depths=(1, 2, 3), sigma0s=(1e-3, 1e-1)):
    runs, traj = [], []
    for run_id, (depth, s0) in enumerate((d, s) for s in sigma0s for d in depths):
        runs.append({"run_id": run_id, "depth": depth, "sigma0": s0, "lr": 1e-3 * (run_id + 1)})
        for step in STEPS:
            traj.append({"run_id": run_id, "step": step, "loss": 1.0,
                         **{f"sigma_{v}": 10 * (run_id + 1) + v + step / 1e4 for v in range(len(SIGMA_STAR))}})
    return pd.DataFrame(traj), pd.DataFrame(runs)


def data_lines(ax):
    return [ln for ln in ax.lines if len(ln.get_xdata()) == len(STEPS)]


@pytest.mark.parametrize("time", ["lr", "step"])
def test_trajectories_panels_lines_time_and_legend(time):
    traj, runs = traj_frames()
    fig = plot.trajectories(traj, runs, SIGMA_STAR, rows="sigma0", cols="depth", time=time)
    axes = fig.axes
    assert len(axes) == 2 * 3                                   # rows (sigma0) x cols (depth)
    for n, ax in enumerate(axes):
        s0, depth = (1e-3, 1e-1)[n // 3], (1, 2, 3)[n % 3]
        assert f"$N$ = {depth}" in ax.get_title() and f"= {s0:.3g}" in ax.get_title()
        assert ax.get_xscale() == "log"
        run = runs[(runs.depth == depth) & (runs.sigma0 == s0)].iloc[0]
        lines = data_lines(ax)
        assert len(lines) == len(SIGMA_STAR)                   # one line per value ...
        assert len(ax.lines) == len(SIGMA_STAR) + len(SIGMA_STAR) + 2     # ... plus guides at sigma*, f, s
        for v, ln in enumerate(lines):
            expected_t = STEPS * run.lr if time == "lr" else STEPS
            np.testing.assert_allclose(ln.get_xdata(), expected_t)
            np.testing.assert_allclose(ln.get_ydata(), 10 * (run.run_id + 1) + v + STEPS / 1e4)
        guides = sorted(ln.get_ydata()[0] for ln in ax.lines if ln not in lines)
        assert guides == pytest.approx(sorted([*SIGMA_STAR, 0.95 * 3.0, 0.05 * 2.0]))
    assert ("eta" in fig.get_supxlabel()) == (time == "lr")
    texts = legend_texts(fig.legends[0])
    assert [t for t in texts if t.startswith(r"$\sigma^*$")] == [rf"$\sigma^*$ = {v:g}" for v in SIGMA_STAR]
    assert any("f = 0.95" in t for t in texts) and any("s = 0.05" in t for t in texts)


def test_trajectories_legend_has_one_entry_per_target_with_several_runs_per_panel():
    traj, runs = traj_frames()
    fig = plot.trajectories(traj, runs, SIGMA_STAR, rows=None, cols="depth")
    assert len(fig.axes) == 3
    assert all(len(data_lines(ax)) == 2 * len(SIGMA_STAR) for ax in fig.axes)
    texts = legend_texts(fig.legends[0])
    assert [t for t in texts if t.startswith(r"$\sigma^*$")] == [rf"$\sigma^*$ = {v:g}" for v in SIGMA_STAR]


# ----------------------------------------------------------------------------- threshold curves


def curve_frame(s=0.05, f=0.95) -> pd.DataFrame:
    rows = []
    for depth in (2, 3):
        for r in (1.5, 2.0, 4.0):
            si, sj = 2.0, 2.0 / r                          # sigma*_j != 1: the plot must divide by it
            gf = math.exp(theory.log_gf_threshold(si, sj, s, f, float(depth)))
            rows.append({"depth": depth, "r": r, "sigma_star_i": si, "sigma_star_j": sj, "s": s, "f": f,
                         "sigma0_th": gf * 1.01, "gf_exact": gf})
    return pd.DataFrame(rows)


def test_threshold_curves_markers_exact_curves_and_limits():
    table = curve_frame()
    fig = plot.threshold_curves(table)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    markers = [ln for ln in ax.lines if ln.get_marker() == "o"]
    curves = [ln for ln in ax.lines if ln.get_marker() in ("None", None, "") and ln.get_linestyle() == "-"]
    assert [ln.get_label() for ln in markers] == ["$N$ = 2 measured", "$N$ = 3 measured"]
    assert len(curves) == 2 and len(bands(ax)) == 2
    for depth, marker, curve in zip((2, 3), markers, curves):
        rows = table[table.depth == depth]
        assert marker.get_linestyle() == "None"
        np.testing.assert_allclose(marker.get_xdata(), rows.r)
        np.testing.assert_allclose(marker.get_ydata(), rows.sigma0_th / rows.sigma_star_j)
        assert marker.get_color() == curve.get_color()
        # the exact gradient-flow curve passes through gf_exact / sigma*_j at each measured r, to the
        # error of interpolating it linearly in log-log between its samples (2%; measured 0.5%)
        on_curve = np.exp(np.interp(np.log(rows.r), np.log(curve.get_xdata()), np.log(curve.get_ydata())))
        np.testing.assert_allclose(on_curve, rows.gf_exact / rows.sigma_star_j, rtol=0.02)
    # N = 2's Theorem 2 lower bound goes below 1e-60 here; the axis stays near the data
    assert min(extents(b)[2] for b in bands(ax)) < 1e-60
    points = (table.sigma0_th / table.sigma_star_j).to_numpy()
    bottom, top = ax.get_ylim()
    assert bottom < points.min() and points.max() < top
    assert bottom >= points.min() / 1e4 * 0.999 and top <= points.max() * 10 * 1.001
    texts = legend_texts(ax.get_legend())
    assert "exact gradient flow" in texts and "Theorem 2 band" in texts


# ----------------------------------------------------------------------------- lr map


def lr_frame() -> pd.DataFrame:
    rows = []
    for (i, j, r, gf) in ((0, 1, 2.0, 4e-3), (0, 2, 4.0, 5e-2)):
        for lr, factor in ((1e-1, 0.7), (1e-3, 1.0), (1e-2, 0.98)):        # out of order on purpose
            rows.append({"depth": 2, "lr": lr, "i": i, "j": j, "r": r, "sigma0_th": gf * factor,
                         "gf_exact": gf, "thm3_chain_lower": gf * factor / 5 * (1 + lr), "thm3_upper": gf * 3 * (1 + lr)})
    rows.append({"depth": 3, "lr": 1e-2, "i": 0, "j": 1, "r": 2.0, "sigma0_th": 1e-6, "gf_exact": 1e-6,
                 "thm3_chain_lower": np.nan, "thm3_upper": np.nan})                    # not N = 2: left out
    return pd.DataFrame(rows)


def test_lr_map_markers_band_and_gradient_flow():
    table = lr_frame()
    ax = plot.lr_map(table).axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    markers = [ln for ln in ax.lines if ln.get_marker() == "o"]
    assert len(markers) == 2
    assert len(bands(ax)) == 2
    for (i, j), marker, band in zip(((0, 1), (0, 2)), markers, bands(ax)):
        rows = table[(table.depth == 2) & (table.i == i) & (table.j == j)].sort_values("lr")
        assert f"pair ({i}, {j})" in marker.get_label()
        np.testing.assert_allclose(marker.get_xdata(), [1e-3, 1e-2, 1e-1])
        np.testing.assert_allclose(marker.get_ydata(), rows.sigma0_th)
        x0, x1, y0, y1 = extents(band)
        assert (x0, x1) == pytest.approx((1e-3, 1e-1))
        assert (y0, y1) == pytest.approx((rows.thm3_chain_lower.min(), rows.thm3_upper.max()))
        gf = [ln for ln in ax.lines if ln.get_linestyle() == "--" and ln.get_ydata()[0] == rows.gf_exact.iloc[0]]
        assert len(gf) == 1
    bottom, top = ax.get_ylim()
    n2 = table[table.depth == 2].sigma0_th
    assert bottom < n2.min() and n2.max() < top and bottom > 1e-6      # the N = 3 row is not drawn
    texts = legend_texts(ax.get_legend())
    assert "Theorem 3 band (lower: its proof's chain)" in texts and any("gradient flow" in t for t in texts)


# ----------------------------------------------------------------------------- api.plot_run / dlsweep plot

TINY = {
    "name": "tiny-plot", "model": "toy", "steps": 3000, "dtype": "float32",
    "task": {"sigma_star": [3.0, 1.0]},
    "axes": {"depth": [2, 3], "sigma0": {"logspace": [-4, -0.5], "num": 8}, "lr": [0.01, 0.03]},
    "record": {"points": 30},
}


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """32 trajectories, 2 depths x 8 sigma0 x 2 learning rates; thresholds.parquet written."""
    folder = tmp_path_factory.mktemp("plot") / "tiny"
    api.run(spec.resolve(TINY), out=folder, progress_bar=False)
    table = api.thresholds(folder)
    assert (table.status == "ok").all()
    return folder


@pytest.fixture
def single_lr_run(tmp_path, small_dataset):
    folder = tmp_path / "small"
    shutil.copytree(small_dataset, folder)
    return folder


PNG, PDF = b"\x89PNG\r\n\x1a\n", b"%PDF"


@pytest.mark.parametrize("kwargs, name", [
    ({}, "heatmap-sigma0-depth"),
    ({"kind": "heatmap", "y": "lr", "color": "log_hit_ratio"}, "heatmap-sigma0-lr"),
    ({"kind": "heatmap", "x": "r", "y": "depth"}, "heatmap-r-depth"),
    ({"kind": "trajectories"}, "trajectories"),
    ({"kind": "thresholds"}, "thresholds"),
    ({"kind": "lr"}, "lr"),
])
def test_plot_run_writes_each_kind(tiny_run, kwargs, name):
    target = tiny_run / "figures" / f"{name}.png"
    target.unlink(missing_ok=True)
    paths = api.plot_run(tiny_run, **kwargs)
    assert paths == [target]
    assert target.read_bytes()[:8] == PNG and target.stat().st_size > 5000


@pytest.mark.parametrize("suffix", [".pdf", ".svg"])
def test_plot_run_also_writes_out(tiny_run, tmp_path, suffix):
    out = tmp_path / "sub" / f"figure{suffix}"
    paths = api.plot_run(tiny_run, kind="thresholds", out=out)
    assert paths == [tiny_run / "figures" / "thresholds.png", out]
    if suffix == ".pdf":
        assert out.read_bytes()[:4] == PDF
    else:
        assert "<svg" in out.read_text()


def test_each_format_is_drawn_once(tiny_run, tmp_path, monkeypatch):
    """A figure written to `out` and to the run folder in PNG and PDF is drawn once per format
    (`plot.save`'s `rendered`), the same bytes at both places of a format; a path without a
    suffix gets the default format's (PNG), as matplotlib's `savefig` gives it."""
    from matplotlib.figure import Figure

    drawn = []
    savefig = Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda figure, *a, **k: drawn.append(k.get("format")) or savefig(figure, *a, **k))
    out = tmp_path / "figure.png"
    paths = api.plot_run(tiny_run, kind="thresholds", out=out, formats=("png", "pdf"))
    assert sorted(drawn) == ["pdf", "png"]
    assert paths[0].read_bytes() == out.read_bytes() and paths[1].read_bytes()[:4] == PDF
    plot.save(plot.summary_lines(pd.DataFrame({"sigma0": [1e-3, 1e-2], "x": [1.0, 2.0], "depth": [2, 2]}), "sigma0", "x",
                                 "depth"), [tmp_path / "figure"])
    assert (tmp_path / "figure.png").read_bytes()[:8] == PNG          # no suffix: the default format's, as matplotlib


def test_a_saved_figure_is_laid_out_once_with_matplotlibs_own_pixels(tmp_path, monkeypatch):
    """`plot.save` runs a figure's constrained layout once and draws it once per format, where
    matplotlib's `savefig` draws it twice (once without rendering, to lay it out). Expected: the
    PNG's pixels equal those of matplotlib's own `savefig` of the same figure built anew (the
    trajectories figure: 2 x 3 panels sharing log time axes, a legend and a heading, in the
    package's style), exactly; one draw against matplotlib's two; and a figure kept open has its
    layout engine back after saving, so a later change is laid out again."""
    from matplotlib.figure import Figure
    from PIL import Image

    monkeypatch.undo()          # plot.save itself, without the suite's check of the canvas (a draw of its own)
    traj, runs = traj_frames()
    make = lambda: plot.trajectories(traj, runs, SIGMA_STAR, title="two rows of panels")  # noqa: E731
    draws = []
    draw = Figure.draw
    monkeypatch.setattr(Figure, "draw", lambda figure, renderer: draws.append(1) or draw(figure, renderer))
    figure = make()
    engine, made = figure.get_layout_engine(), len(draws)
    plot.save(figure, [tmp_path / "ours.png"], keep_open=True)
    assert len(draws) - made == 1 and figure.get_layout_engine() is engine
    with matplotlib.rc_context(fname=plot.STYLE):
        theirs = make()
        made = len(draws)
        theirs.savefig(tmp_path / "theirs.png")
    assert len(draws) - made == 2
    np.testing.assert_array_equal(np.asarray(Image.open(tmp_path / "ours.png")),
                                  np.asarray(Image.open(tmp_path / "theirs.png")))


@pytest.fixture
def captured(monkeypatch):
    """The figures plot_run draws, kept open (plot_run closes them after saving)."""
    figures = []
    monkeypatch.setattr(plot, "close", figures.append)
    return figures


def test_plot_run_default_heatmap_overlays_the_run_thresholds(tiny_run, captured):
    api.plot_run(tiny_run)
    ax = captured[-1].axes[0]
    table = pd.read_parquet(tiny_run / api.THRESHOLDS_FILE)
    table = table[table.lr == table.lr.min()].sort_values("depth")        # the first lr slice
    np.testing.assert_allclose(line(ax, "measured threshold").get_xdata(), np.repeat(table.sigma0_th, 2))
    np.testing.assert_allclose(line(ax, "exact gradient flow").get_xdata(), np.repeat(table.gf_exact, 2))
    runs = store.load(tiny_run)
    runs = runs[runs.lr == runs.lr.min()]
    codes = np.ma.asarray(quadmesh(ax).get_array()).reshape(2, 8)
    status = plot.decisions_frame(runs, (0, 1), 0.05, 0.95).sort_values(["depth", "sigma0"]).status.to_numpy()
    np.testing.assert_array_equal(codes.filled(-1).reshape(-1), [{I: 0, N: 1}.get(s, -1) for s in status])
    assert "$\\sigma^*$ = 3 vs 1" in figure_texts(captured[-1])


def test_plot_run_trajectories_use_the_smallest_lr(tiny_run, captured):
    api.plot_run(tiny_run, kind="trajectories")
    fig = captured[-1]
    assert len(fig.axes) == 3 * 2                             # 3 sigma0 spread over the axis x 2 depths
    runs = store.load(tiny_run)
    traj = store.load_trajectories(tiny_run)
    ax = fig.axes[0]                                          # smallest sigma0, depth 2
    run = runs[(runs.lr == 0.01) & (runs.depth == 2) & (runs.sigma0 == runs.sigma0.min())].iloc[0]
    one = traj[traj.run_id == run.run_id].sort_values("step")
    lines = [ln for ln in ax.lines if len(ln.get_xdata()) == len(one)]
    assert len(lines) == 2
    np.testing.assert_allclose(lines[0].get_xdata(), one.step * 0.01)
    np.testing.assert_allclose(lines[1].get_ydata(), one.sigma_1)


@pytest.mark.parametrize("kwargs, error, fragment", [
    ({"out": "figure.jpg"}, PlotError, "out='figure.jpg': expected a file ending in .png, .pdf, .svg"),
    ({"kind": "bogus"}, PlotError, "kind='bogus'"),
    ({"x": "seed"}, PlotError, "x='seed': not an axis of this run"),
    ({"y": "r"}, PlotError, "y='r': not an axis of this run"),
    ({"at": {"depth": 7}}, PlotError, "at={'depth': 7}: not a value of the axis: 2, 3"),
    ({"at": {"width": 7}}, PlotError, "at={'width': 7}: 'width' is not an axis of the sweep"),
    ({"pair": (1, 0)}, ThresholdError, "needs sigma*_1 > sigma*_0"),
    ({"kind": "summary"}, PlotError, "by default population_error (a diagonal_net run's); this run has none: pick "
                                     "one with y=..., of final_loss"),
])
def test_plot_run_errors(tiny_run, kwargs, error, fragment):
    with pytest.raises(error) as info:
        api.plot_run(tiny_run, **kwargs)
    assert fragment in str(info.value)
    assert not (tiny_run / "figure.jpg").exists()


def test_lr_figure_needs_several_learning_rates(single_lr_run):
    with pytest.raises(PlotError, match="several learning rates"):
        api.plot_run(single_lr_run, kind="lr")
    assert not (single_lr_run / "figures" / "lr.png").exists()


def test_plot_of_a_folder_that_is_not_a_run(tmp_path):
    with pytest.raises(StoreError, match="not a dlsweep run folder"):
        api.plot_run(tmp_path)


def cli_error(capsys, *argv) -> str:
    code = cli.main([str(a) for a in argv])
    captured = capsys.readouterr()
    assert code == 2, captured
    assert captured.err.startswith("dlsweep: error: ") and captured.err.count("\n") == 1, captured.err
    assert "Traceback" not in captured.err and captured.out == ""
    return captured.err


def test_cli_plot_prints_the_figure_paths(tiny_run, tmp_path, capsys):
    out = tmp_path / "t.svg"
    assert cli.main(["plot", str(tiny_run), "--kind", "thresholds", "-o", str(out)]) == 0
    assert capsys.readouterr().out.splitlines() == [str(tiny_run / "figures" / "thresholds.png"), str(out)]
    assert out.exists()


def test_cli_plot_errors_exit_2(tiny_run, single_lr_run, tmp_path, capsys):
    assert "expected a file ending in .png, .pdf, .svg" in cli_error(capsys, "plot", tiny_run, "-o", tmp_path / "f.gif")
    assert "not an axis of this run" in cli_error(capsys, "plot", tiny_run, "--x", "width")
    assert "several learning rates" in cli_error(capsys, "plot", single_lr_run, "--kind", "lr")
    assert "--pair" in cli_error(capsys, "plot", tiny_run, "--pair", "0-1,0-1")
    assert "not a dlsweep run folder" in cli_error(capsys, "plot", tmp_path)
    assert not (tmp_path / "f.gif").exists()


def test_cli_plot_bad_kind_is_a_usage_error(tiny_run, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["plot", str(tiny_run), "--kind", "bogus"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "error: argument --kind: invalid choice: 'bogus'" in err and "Traceback" not in err


def test_cli_plot_unknown_color_is_an_error(tiny_run, capsys):
    assert "--color" in cli_error(capsys, "plot", tiny_run, "--color", "nope")


def test_cli_plot_same_x_and_y_is_an_error(tiny_run, capsys):
    assert "--x" in cli_error(capsys, "plot", tiny_run, "--x", "sigma0", "--y", "sigma0")


# ----------------------------------------------------------------------------- headings: a figure stands alone


def figure_texts(figure) -> str:
    """Every text on a figure (titles, suptitle, legend titles and entries), one per line."""
    return "\n".join(t.get_text() for t in figure.findobj(Text) if t.get_text())


def headings(figure) -> list[Text]:
    """The texts that carry a heading: axes titles, the suptitle and legend titles."""
    found = [t for ax in figure.axes for t in (ax.title, ax._left_title, ax._right_title)]
    found += [legend.get_title() for legend in figure.legends]
    found += [ax.get_legend().get_title() for ax in figure.axes if ax.get_legend() is not None]
    found += [figure._suptitle] if figure._suptitle is not None else []
    return [t for t in found if t.get_text()]


def assert_headings_fit(figure) -> None:
    """Every heading lies inside the figure and overlaps no other heading (as drawn at save time)."""
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in headings(figure)]
    whole = figure.bbox
    for text, box in zip(headings(figure), boxes):
        assert whole.x0 - 0.5 <= box.x0 and box.x1 <= whole.x1 + 0.5, text.get_text()
        assert whole.y0 - 0.5 <= box.y0 and box.y1 <= whole.y1 + 0.5, text.get_text()
    for n, first in enumerate(boxes):
        for second in boxes[n + 1:]:
            assert not first.overlaps(second), [t.get_text() for t in headings(figure)]


# the tiny run: depth 2, 3 x sigma0 x lr 0.01, 0.03; 3000 steps in float32. What each figure draws
# is not named in its heading; every other axis is named at the value the figure takes (the first).
FIXED = {
    "heatmap": ({}, ["$\\eta$ = 0.01", "3,000 steps", "float32", "(s, f) = (0.05, 0.95)"]),
    "heatmap of lr": ({"kind": "heatmap", "y": "lr"}, ["$N$ = 2", "3,000 steps", "float32", "(s, f) = (0.05, 0.95)"]),
    "heatmap of a column": ({"kind": "heatmap", "color": "final_loss"}, ["$\\eta$ = 0.01", "3,000 steps", "float32"]),
    "heatmap of r": ({"kind": "heatmap", "x": "r", "y": "depth"},
                     ["$\\eta$ = 0.01", "3,000 steps", "float32", "(s, f) = (0.05, 0.95)"]),
    "trajectories": ({"kind": "trajectories"}, ["$\\eta$ = 0.01", "3,000 steps", "float32"]),
    "thresholds": ({"kind": "thresholds"}, ["(0.05, 0.95)-incremental", "$\\eta$ = 0.01", "3,000 steps", "float32"]),
    "lr": ({"kind": "lr"}, ["$N$ = 2, gradient descent", "3,000 steps", "float32", "(s, f) = (0.05, 0.95)"]),
    "observables": ({"kind": "observables", "y": "loss"}, ["$\\sigma_0$ = 0.0001", "$\\eta$ = 0.01", "3,000 steps"]),
    "summary": ({"kind": "summary", "y": "final_loss"}, ["$\\eta$ = 0.01", "3,000 steps", "float32"]),
    "at depth 3": ({"at": {"depth": 3.0}, "y": "lr"}, ["$N$ = 3", "3,000 steps"]),
}


@pytest.mark.parametrize("case", FIXED, ids=list(FIXED))
def test_every_figure_names_what_it_holds_fixed_and_its_heading_fits(tiny_run, captured, case):
    kwargs, fixed = FIXED[case]
    api.plot_run(tiny_run, **kwargs)
    figure = captured[-1]
    texts = figure_texts(figure)
    for fragment in fixed:
        assert fragment in texts, (fragment, texts)
    assert "partial" not in texts
    assert_headings_fit(figure)


def test_lr_figure_names_the_depth_once(tiny_run, captured):
    api.plot_run(tiny_run, kind="lr")
    assert figure_texts(captured[-1]).count("$N$ = 2") == 1


def test_a_long_title_is_wrapped_to_fit(tiny_run, captured):
    title = "a title long enough to need several lines on a single-column figure, " * 3
    for kind in ("heatmap", "thresholds", "trajectories"):
        api.plot_run(tiny_run, kind=kind, title=title.strip())
        assert_headings_fit(captured[-1])


@pytest.fixture(scope="module")
def partial_run(tmp_path_factory):
    """The tiny sweep with 1 of its 4 chunks finished."""
    folder = tmp_path_factory.mktemp("partial") / "tiny"
    api.run(spec.resolve(TINY), out=folder, chunk_size=8, max_chunks=1, progress_bar=False)
    return folder


@pytest.mark.parametrize("kind", ["heatmap", "trajectories"])
def test_a_figure_of_a_partial_run_says_so(partial_run, captured, kind):
    assert store.partial_note(partial_run) == "partial: 1 of 4 chunks"
    api.plot_run(partial_run, kind=kind)
    assert "partial: 1 of 4 chunks" in figure_texts(captured[-1])
    assert_headings_fit(captured[-1])


# ----------------------------------------------------------------------------- where a figure cannot be written


def test_unwritable_out_is_an_error_naming_it(tiny_run, tmp_path, capsys):
    """A path under a regular file cannot be created, whoever runs the test (root included)."""
    (tmp_path / "file").write_text("")
    out = tmp_path / "file" / "figure.png"
    with pytest.raises(PlotError, match=rf"^{out}: cannot write the figure \("):
        api.plot_run(tiny_run, kind="thresholds", out=out)
    err = cli_error(capsys, "plot", tiny_run, "--kind", "thresholds", "-o", out)
    assert err.startswith(f"dlsweep: error: {out}: cannot write the figure ("), err


def test_proc_is_an_unwritable_out(tiny_run, capsys):
    assert "/proc/x.png: cannot write the figure" in cli_error(capsys, "plot", tiny_run, "-o", "/proc/x.png")


def test_a_run_folder_that_cannot_take_the_figure(tiny_run, tmp_path, capsys):
    """Where DIR/figures cannot be written (here a file stands in its place): with out the figure
    is written there and a warning says so; without, an error says to give out."""
    folder = tmp_path / "tiny"
    shutil.copytree(tiny_run, folder)
    shutil.rmtree(folder / "figures", ignore_errors=True)
    (folder / "figures").write_text("")
    out = tmp_path / "elsewhere.png"
    with pytest.warns(DlsweepWarning, match=rf"cannot write the figure .*; the figure is only at {out}"):
        assert api.plot_run(folder, kind="thresholds", out=out) == [out]
    assert out.read_bytes()[:8] == PNG
    with pytest.raises(PlotError, match=r"cannot write the figure .*; give out=\.\.\. to write the figure elsewhere"):
        api.plot_run(folder, kind="thresholds")
    assert "give --out ... to write the figure elsewhere" in cli_error(capsys, "plot", folder, "--kind", "thresholds")
    assert cli.main(["plot", str(folder), "--kind", "thresholds", "-o", str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == str(out)
    assert captured.err.startswith("dlsweep: warning: ") and captured.err.count("\n") == 1, captured.err


# ----------------------------------------------------------------------------- every figure: caption, style, formats

TINY_CAPTION = "toy, $\\sigma^*$ = (3, 1); 32 runs: 2 $N$ × 8 $\\sigma_0$ × 2 $\\eta$"


@pytest.mark.parametrize("case", FIXED, ids=list(FIXED))
def test_every_figure_names_its_model_data_and_grid(tiny_run, captured, case):
    """The caption line of TINY: the family, its [task] and the grid (2 depths x 8 sigma0 x 2 lr),
    so a figure copied into a talk still says what was run."""
    api.plot_run(tiny_run, **FIXED[case][0])
    assert TINY_CAPTION in figure_texts(captured[-1])


def test_figures_use_the_package_style_and_leave_the_callers_rcparams(tiny_run, captured):
    """A figure is drawn under dlsweep/figure.mplstyle (8 pt labels, viridis, Okabe-Ito cycle) while
    the caller's rcParams stay as they were, whatever they are."""
    with matplotlib.rc_context({"font.size": 15.0, "axes.labelsize": 20.0, "image.cmap": "magma"}):
        before = dict(matplotlib.rcParams)
        api.plot_run(tiny_run, kind="heatmap", color="final_loss")
        assert dict(matplotlib.rcParams) == before
    ax = captured[-1].axes[0]
    assert ax.xaxis.label.get_fontsize() == 8.0
    assert quadmesh(ax).get_cmap().name == "viridis"
    assert matplotlib.rc_params_from_file(plot.STYLE, use_default_template=False)["savefig.dpi"] == 200


def test_plot_run_writes_every_format_asked(tiny_run):
    """formats=("png", "pdf"): one file each under DIR/figures, the PNG at 200 dpi (its pHYs), the
    PDF a vector file with its text in TrueType fonts (Type 42: CIDFontType2), never Type 3
    bitmaps of glyphs, so it stays editable."""
    from PIL import Image

    paths = api.plot_run(tiny_run, kind="thresholds", formats=("png", "pdf"))
    assert paths == [tiny_run / "figures" / "thresholds.png", tiny_run / "figures" / "thresholds.pdf"]
    with Image.open(paths[0]) as image:
        assert image.info["dpi"] == pytest.approx((200, 200), abs=0.5)
    pdf = paths[1].read_bytes()
    assert pdf[:4] == PDF and b"/CIDFontType2" in pdf and b"/Type3" not in pdf
    for bad in (("jpg",), "png", ()):
        with pytest.raises(PlotError, match=r"formats=.*: expected a list of png, pdf, svg"):
            api.plot_run(tiny_run, kind="thresholds", formats=bad)


def test_cli_format_writes_each_and_refuses_an_unknown_one(tiny_run, capsys):
    assert cli.main(["plot", str(tiny_run), "--kind", "lr", "--format", "png,svg"]) == 0
    assert capsys.readouterr().out.split() == [str(tiny_run / "figures" / "lr.png"), str(tiny_run / "figures" / "lr.svg")]
    with pytest.raises(SystemExit) as exit_:
        cli.main(["plot", str(tiny_run), "--format", "png,jpg"])
    assert exit_.value.code == 2
    assert "--format: expected a comma-separated list of png, pdf, svg; got 'png,jpg'" in capsys.readouterr().err


def test_a_heading_is_wrapped_by_its_rendered_length_and_never_inside_math():
    """TeX markup does not count towards a line's length ($\\sigma_0$ shows 2 characters), and a
    piece with math is never cut inside it: a long facet title of a user's own axis breaks after
    its comma."""
    assert plot._visible_length(r"$\sigma_0$ = 0.001") == 10
    assert plot.wrapped(r"imbalance = 16, $\sigma_0$ = 0.001", 1.0, 7) == "imbalance = 16,\n$\\sigma_0$ = 0.001"
    one_line = r"$N$ = 2, $\sigma_0$ = 0.001"      # 18 characters shown, 26 written: fits 1.3 in at 7 pt
    assert plot.wrapped(one_line, 1.3, 7) == one_line


def test_faceted_heatmap_has_a_panel_per_value_and_one_colour_scale():
    """facet='depth': one panel per depth with its title, one colour bar, every panel on the same
    colour limits (the data's min and max over all panels), each panel's own cells; a boundary
    curve only on the panel it is given for."""
    values = {2: [1.0, 0.5, -0.5, np.nan], 3: [2.0, 1.5, 0.2, -1.0], 5: [3.0, 2.5, -0.1, -2.0]}
    frame = pd.DataFrame([{"sigma0": s0, "depth": d, "shape": sh, "population_error": v + sh}
                          for d, vs in values.items() for s0, v in zip(SIGMA0, vs) for sh in (0.0, 0.5)])
    boundary = (np.array([1e-3, 1e-2]), np.array([0.0, 0.5]), "a theory curve")
    fig = plot.heatmap(frame, "sigma0", "shape", "population_error", facet="depth", boundaries={2: boundary})
    panels, colorbars = fig.axes[:3], fig.axes[3:]
    assert len(colorbars) == 1 and "population error" in colorbars[0].get_ylabel()
    assert [ax.get_title() for ax in panels] == ["$N$ = 2", "$N$ = 3", "$N$ = 5"]
    for ax, depth in zip(panels, DEPTHS):
        mesh = quadmesh(ax)
        assert (mesh.norm.vmin, mesh.norm.vmax) == (-2.0, 3.5)
        cells = np.ma.asarray(mesh.get_array()).reshape(2, 4)
        np.testing.assert_allclose(cells.filled(np.nan), [values[depth], np.add(values[depth], 0.5)])
    assert [len(ax.lines) for ax in panels] == [1, 0, 0]
    assert "a theory curve" in legend_texts(fig.legends[0])


def test_plot_run_facet_errors_name_the_option(tiny_run):
    for kwargs, message in (({"color": "final_loss", "facet": "width"}, "facet='width': expected an axis of the sweep"),
                            ({"color": "final_loss", "facet": "sigma0"}, "facet='sigma0': already the heatmap's x axis"),
                            ({}, "facet='lr': panels side by side are drawn for observables and for a heatmap")):
        with pytest.raises(PlotError, match=re.escape(message)):
            api.plot_run(tiny_run, kind="heatmap", **({"facet": "lr"} | kwargs))


def test_plot_run_facet_draws_one_figure_per_run(tiny_run, captured):
    paths = api.plot_run(tiny_run, kind="heatmap", color="final_loss", y="depth", facet="lr")
    assert paths == [tiny_run / "figures" / "heatmap-sigma0-depth-final_loss-by-lr.png"]
    figure = captured[-1]
    assert [ax.get_title() for ax in figure.axes[:2]] == ["$\\eta$ = 0.01", "$\\eta$ = 0.03"]
    assert "$\\eta$ = 0.01, " not in figure._suptitle.get_text()       # lr is drawn, not held fixed
    assert_headings_fit(figure)


def test_observables_faceted_against_rescaled_time(tiny_run, captured):
    """Gidel et al.'s Figure 1 layout: a column of panels per depth, a line per sigma0 labelled by
    delta = ln(1/sigma0), against the rescaled time lr * step / delta (exact: the x data of each
    line is its steps times lr / delta)."""
    paths = api.plot_run(tiny_run, kind="observables", y="loss", x="sigma0", facet="depth", time="rescaled")
    assert paths == [tiny_run / "figures" / "observables-by-depth-rescaled-time.png"]
    figure = captured[-1]
    panels = figure.axes
    assert [ax.get_title() for ax in panels] == ["$N$ = 2", "$N$ = 3"]
    traj = api.load_trajectories(tiny_run)
    runs = api.load(tiny_run)
    first = runs[(runs.depth == 2) & (runs.lr == runs.lr.min())].sort_values("sigma0").iloc[0]
    delta = np.log(1.0 / first.sigma0)
    lines = panels[0].get_lines()
    assert len(lines) == 8 and lines[0].get_label() == f"$\\delta$ = {delta:.3g}"
    steps = np.sort(traj[traj.run_id == first.run_id].step.to_numpy())
    np.testing.assert_allclose(lines[0].get_xdata(), steps * first.lr / delta, rtol=1e-12)
    assert "rescaled time" in panels[0].get_xlabel() and "$\\eta$ = 0.01" in figure_texts(figure)


def test_time_and_facet_errors_name_the_option(tiny_run):
    for kwargs, message in (({"kind": "heatmap", "time": "eta"}, "time='eta': the time axis of an observables figure"),
                            ({"kind": "observables", "y": "loss", "time": "hours"}, "time='hours'"),
                            ({"kind": "observables", "y": "loss", "facet": "depth"}, "facet='depth': already the axis"),
                            ({"kind": "trajectories", "facet": "lr"}, "facet='lr': panels side by side are drawn for")):
        with pytest.raises(PlotError, match=re.escape(message)):
            api.plot_run(tiny_run, **kwargs)


def test_the_same_figure_saves_to_the_same_bytes(tmp_path):
    """No date in a PDF or SVG and fixed SVG ids (`plot.UNDATED`, the style's svg.hashsalt): a
    figure redrawn from the same frame is the same file in every format, so a rebuilt gallery
    changes only the figures whose data changed."""
    frame = pd.DataFrame({"sigma0": [1e-3, 1e-2], "depth": [2, 2], "x": [1.0, 2.0]})
    saved = []
    for n in range(2):
        paths = [tmp_path / f"{n}.{suffix}" for suffix in ("png", "pdf", "svg")]
        plot.save(plot.summary_lines(frame, "sigma0", "x", "depth"), paths)
        saved.append([path.read_bytes() for path in paths])
    assert saved[0] == saved[1]
