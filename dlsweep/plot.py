"""Figures from DataFrames (never from files): trajectories, phase-diagram heatmaps, threshold
curves against r, and the learning-rate map. Matplotlib figures made outside pyplot (no backend
is chosen and no global state touched; Agg renders them when saved); colourblind-safe colours (Okabe-Ito for categories, viridis for quantities); cells with no data, undecided or
diverged trajectories are drawn grey and hatched, never in a colour of the data scale.
"""

from __future__ import annotations

import contextlib
import functools
import io
import math
import re
import os
import textwrap
from pathlib import Path

import matplotlib
import matplotlib.ticker
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import BoundaryNorm, ListedColormap
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from dlsweep.analysis import incremental, theory
from dlsweep.errors import PlotError
from dlsweep.figures import TIMES
from dlsweep.store import level_name

OKABE_ITO = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]
MISSING = "#d9d9d9"
EM_PER_CHARACTER = 0.55      # a title character's mean width in em (of its font size), for wrapping
HEADING_WIDTH = 0.96         # the share of a figure's width its heading may take
SINGLE, DOUBLE = 3.4, 7.0                       # paper column widths, inches
LABELS = {"sigma0": r"initialization scale $\sigma_0$", "depth": r"depth $N$", "lr": r"learning rate $\eta$",
          "r": r"target ratio $r = \sigma^*_i / \sigma^*_j$", "seed": "seed",
          "sparsity": r"sparsity $\|w^*\|_0$ (nonzeros of $w^*$)",
          "shape": r"init shape $s$ (0: balanced layers)",
          "momentum": r"momentum $\beta$", "b1": r"Adam $\beta_1$", "b2": r"Adam $\beta_2$", "eps": r"Adam $\epsilon$"}
LOG_AXES = {"sigma0", "lr", "r", "eps"}
ROW_AXES = {"shape", "momentum", "b1", "b2"}         # heatmap rows of equal height, labelled by value (like integer axes)


STYLE = Path(__file__).with_name("figure.mplstyle")
"""The package's figure style (fonts, colours, 200 dpi PNG, editable PDF text)."""


def styled(draw):
    """Make (or save) a figure under the package's `STYLE`, the caller's rcParams left as they were."""
    @functools.wraps(draw)
    def in_style(*args, **kwargs):
        with matplotlib.rc_context(fname=STYLE):
            return draw(*args, **kwargs)

    return in_style


def _subplots(nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float], layout: str | None = None,
              **kwargs) -> tuple[Figure, object]:
    """`plt.subplots` without pyplot: a Figure that no global registry holds, drawn by its own Agg
    canvas (the backend the user chose is left alone)."""
    figure = Figure(figsize=figsize, layout=layout)
    FigureCanvasAgg(figure)
    return figure, figure.subplots(nrows, ncols, **kwargs)


def axis_label(name: str) -> str:
    return LABELS.get(name, name)


def wrapped(title: str | None, width: float, fontsize: float) -> str | None:
    """A title's lines wrapped to fit `width` inches at `fontsize` points (its line breaks kept),
    preferably after a comma, so that a list of settings keeps each setting on one line; lengths
    are those of the rendered text (`_visible_length`), and math is never split."""
    if not title:
        return title
    characters = int(width * 72 / (EM_PER_CHARACTER * fontsize))
    lines = []
    for line in title.split("\n"):
        pieces = [""]
        for item in _top_level_items(line):
            joined = f"{pieces[-1]}, {item}" if pieces[-1] else item
            if _visible_length(joined) < characters or not pieces[-1]:       # room for a trailing comma
                pieces[-1] = joined
            else:
                pieces[-1] += ","
                pieces.append(item)
        lines += [piece if "$" in piece or _visible_length(piece) <= characters
                  else textwrap.fill(piece, characters, break_on_hyphens=False) for piece in pieces]
    return "\n".join(lines)


def _visible_length(text: str) -> int:
    """Characters a text shows: inside $math$ a TeX command (\\sigma) counts as one, and braces,
    `_`, `^` as none; the `$` themselves as none."""
    parts = text.split("$")
    return sum(len(re.sub(r"[{}_^]", "", re.sub(r"\\[A-Za-z]+", "x", part))) if n % 2 else len(part)
               for n, part in enumerate(parts))


def _top_level_items(line: str) -> list[str]:
    """A line split at each ", " outside brackets: "a, (s, f) = (1, 2)" -> ["a", "(s, f) = (1, 2)"]."""
    items, depth, start = [], 0, 0
    for n, character in enumerate(line):
        depth += (character in "([{") - (character in ")]}")
        if depth == 0 and line.startswith(", ", n):
            items.append(line[start:n])
            start = n + 2
    return [*items, line[start:]]


def heading(fig: Figure, title: str, fontsize: float) -> None:
    """A figure's heading over all its panels, centred on the figure and wrapped to its width
    (an axes title is centred on the axes, which a y label shifts, and can run off the figure)."""
    fig.suptitle(wrapped(title, fig.get_figwidth() * HEADING_WIDTH, fontsize), fontsize=fontsize)


def _cell_edges(values: np.ndarray, log: bool) -> np.ndarray:
    """Edges around sorted cell centres: geometric midpoints on log axes, arithmetic otherwise."""
    v = np.log(values) if log else values.astype(float)
    if len(v) == 1:
        edges = np.array([v[0] - 0.5, v[0] + 0.5])
    else:
        mid = (v[1:] + v[:-1]) / 2
        edges = np.concatenate([[v[0] - (mid[0] - v[0])], mid, [v[-1] + (v[-1] - mid[-1])]])
    return np.exp(edges) if log else edges


# ----------------------------------------------------------------------------- trajectories


@styled
def trajectories(traj: pd.DataFrame, runs: pd.DataFrame, sigma_star, rows: str | None = "sigma0",
                 cols: str | None = "depth", s: float | None = 0.05, f: float | None = 0.95, pair=(0, 1),
                 time: str = "lr", xscale: str = "log", width: float = DOUBLE,
                 ylabel: str = r"$\sigma_i(t)$", title: str | None = None) -> Figure:
    """sigma_i(t) for each value, one panel per (rows, cols) cell (the paper's Figure 2), under
    an optional `title`.
    Time is lr * step (`time="lr"`, so learning rates line up) or the step. Runs of one panel
    that differ only in `seed` are repetitions: drawn as their mean with a band of +- one standard
    deviation. With targets (`sigma_star`, else None): guides at sigma*_i, f sigma*_i and
    s sigma*_j for the pair (i, j)."""
    data = traj.merge(runs, on="run_id")
    row_values = _facet_values(data[rows]) if rows else [None]
    col_values = _facet_values(data[cols]) if cols else [None]
    fig, axes = _subplots(len(row_values), len(col_values), figsize=(width, 1.9 * len(row_values) + 0.6),
                          sharex=True, sharey=True, squeeze=False, layout="constrained")
    k = len([c for c in traj.columns if c.startswith("sigma_")])
    if sigma_star is None:
        pair = None
    repeated = "seed" in data and data["seed"].nunique() > 1
    labelled = False            # the first lines drawn carry the legend's labels
    for r_i, rv in enumerate(row_values):
        for c_i, cv in enumerate(col_values):
            ax = axes[r_i, c_i]
            panel = data
            if rows:
                panel = panel[panel[rows] == rv]
            if cols:
                panel = panel[panel[cols] == cv]
            if panel.empty:         # a cell a partial run has not reached
                ax.text(0.5, 0.5, "no runs yet", transform=ax.transAxes, ha="center", va="center", fontsize=7,
                        color="0.4")
            groups = [] if panel.empty else [("all", panel)] if repeated else panel.groupby("run_id")
            for _, one in groups:
                for v in range(k):
                    colour = OKABE_ITO[v % len(OKABE_ITO)]
                    label = None if labelled else (rf"$\sigma^*$ = {sigma_star[v]:g}" if sigma_star is not None
                                                   else f"{_ordinal(v + 1)} largest")
                    step, mean, spread = _over_repetitions(one, f"sigma_{v}")
                    t = step * (one["lr"].iloc[0] if time == "lr" else 1.0)
                    ax.plot(t, mean, color=colour, lw=1.2, label=label)
                    if spread is not None:
                        ax.fill_between(t, mean - spread, mean + spread, color=colour, alpha=0.25, lw=0)
                labelled = True
            for v in range(k if sigma_star is not None else 0):
                ax.axhline(sigma_star[v], color=OKABE_ITO[v % len(OKABE_ITO)], ls=":", lw=0.8)
            if f is not None and pair is not None:
                ax.axhline(f * sigma_star[pair[0]], color="0.3", ls="--", lw=0.8)
            if s is not None and pair is not None:
                ax.axhline(s * sigma_star[pair[1]], color="0.3", ls="-.", lw=0.8)
            ax.set_xscale(xscale)
            facet = ", ".join(t for t in (facet_title(cols, cv), facet_title(rows, rv)) if t)
            ax.set_title(wrapped(facet, width / len(col_values) * 0.9, 7), fontsize=7)
            ax.tick_params(which="both", labelsize=7)
            if c_i == 0:
                ax.set_ylabel(ylabel, fontsize=8)
    fig.supxlabel(r"time $t = \eta \cdot$ step" if time == "lr" else "GD step", fontsize=9)
    handles, labels = [sum(pairs, []) for pairs in zip(*(ax.get_legend_handles_labels() for ax in axes.flat))]
    if pair is not None:
        handles += [Line2D([], [], color="0.3", ls="--"), Line2D([], [], color="0.3", ls="-.")]
        labels += [rf"level $f \cdot \sigma^*_i$ = {f * sigma_star[pair[0]]:g} (f = {f:g})",
                   rf"level $s \cdot \sigma^*_j$ = {s * sigma_star[pair[1]]:g} (s = {s:g})"]
    _legend_on_top(fig, handles, labels, data["seed"].nunique() if repeated else 1, title)
    return fig


def _facet_values(column: pd.Series) -> list:
    """The values of a facet column in panel order: a categorical's own order, else sorted."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return [value for value in column.cat.categories if value in set(column)]
    return sorted(column.unique())


def _legend_on_top(fig, handles: list, labels: list, seeds: int, title: str | None) -> None:
    """The figure's legend above its panels (a second row past five entries), with the band of
    mean +- 1 std where there are several seeds."""
    if seeds > 1:
        handles, labels = [*handles, Patch(color="0.6", alpha=0.5)], [*labels, f"mean $\\pm$ 1 std over {seeds} seeds"]
    legend = fig.legend(handles, labels, loc="outside upper center",
                        ncol=len(labels) if len(labels) <= 5 else math.ceil(len(labels) / 2), fontsize=7, frameon=False,
                        title=wrapped(title, fig.get_figwidth() * HEADING_WIDTH, 9), title_fontsize=9)
    legend.get_title().set_multialignment("center")


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _over_repetitions(runs_steps: pd.DataFrame, column: str) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(steps, mean, std or None) of a column over the runs of a frame (one run: std None). A run
    that stopped early is frozen, so its last recorded value holds at the later steps."""
    table = runs_steps.pivot_table(index="step", columns="run_id", values=column).sort_index().ffill()
    if table.shape[1] == 1:
        return table.index.to_numpy(), table.iloc[:, 0].to_numpy(), None
    return table.index.to_numpy(), table.mean(axis=1).to_numpy(), table.std(axis=1).to_numpy()


@styled
def correlation_by_depth(runs: pd.DataFrame, baseline: str | None = None, width: float = SINGLE * 1.4,
                         title: str | None = None) -> Figure:
    """The final predictor's correlation with the labelling vector against depth, one line per
    sigma0, mean +- one standard deviation over seeds (the left panels of Gissin et al.'s Figures
    6-7); a baseline column (e.g. `svm_correlation`, one value per seed) as a grey band; under an
    optional `title`."""
    fig, ax = _subplots(figsize=(width, 2.6), layout="constrained")
    for n, (sigma0, rows) in enumerate(sorted(runs.groupby("sigma0"), key=lambda item: -item[0])):
        stats = rows.groupby("depth")["correlation"].agg(["mean", "std"]).fillna(0.0)
        ax.errorbar(stats.index, stats["mean"], yerr=stats["std"], marker="o", ms=3, capsize=2, lw=1.2,
                    color=OKABE_ITO[n % len(OKABE_ITO)], label=rf"$\sigma_0$ = {sigma0:.3g}")
    if baseline is not None:
        per_seed = runs.groupby("seed")[baseline].first() if "seed" in runs else runs[baseline].iloc[:1]
        mean, std = per_seed.mean(), per_seed.std() if len(per_seed) > 1 else 0.0
        ax.axhspan(mean - std, mean + std, color="0.85", lw=0)
        ax.axhline(mean, color="0.3", ls="--", lw=1, label="max-margin SVM (band: $\\pm$ 1 std)")
    ax.set_xlabel(axis_label("depth"))
    ax.set_xticks(sorted(runs["depth"].unique()))
    ax.set_ylabel(r"correlation $\langle \beta, w^* \rangle / \|\beta\| \|w^*\|$", fontsize=8)
    ax.legend(fontsize=7, frameon=False)
    if title:
        heading(fig, title, 8)
    return fig


@styled
def agreement_by_sparsity(runs: pd.DataFrame, width: float = SINGLE * 1.4, title: str | None = None) -> Figure:
    """The agreement of the network's first s selected features with orthogonal matching
    pursuit's (`omp_agreement`) against the sparsity s, mean and +- one standard deviation over
    seeds as a band, one line per (depth, sigma0) (Gissin et al.'s Figure 3), under an optional
    `title`. Runs that selected no feature have no agreement and are left out (their count is in
    the legend)."""
    fig, ax = _subplots(figsize=(width, 2.6), layout="constrained")
    for n, ((depth, sigma0), rows) in enumerate(runs.groupby(["depth", "sigma0"])):
        stats = rows.groupby("sparsity")["omp_agreement"].agg(["mean", "std"]).fillna({"std": 0.0})
        color = OKABE_ITO[n % len(OKABE_ITO)]
        missing = int(rows["omp_agreement"].isna().sum())
        label = rf"$N$ = {depth}, $\sigma_0$ = {sigma0:.3g}" + (f" ({missing} of {len(rows)} runs chose none)" if missing else "")
        ax.plot(stats.index, stats["mean"], marker="o", ms=3, lw=1.2, color=color, label=label)
        ax.fill_between(stats.index, stats["mean"] - stats["std"], np.minimum(stats["mean"] + stats["std"], 1.0),
                        color=color, alpha=0.2, lw=0)
    ax.set_xlabel(axis_label("sparsity"))
    ax.set_ylabel("agreement with OMP\n" r"$|S_{\rm OMP} \cap S_{\rm net}| / \min$ size", fontsize=8)
    ax.set_ylim(0.0, 1.05)
    ax.legend(fontsize=7, frameon=False, loc="lower left")
    if title:
        heading(fig, title, 8)
    return fig


OBSERVABLE_LABELS = {
    "nuclear_norm": r"trace norm $\|W\|_*$",
    "norm_squared": r"$\|W\|_F^2$",
    "reconstruction_error": "reconstruction error\n" r"$\|W - W_{\rm ref}\|_2$",
    "loss": "training loss",
    "excess_loss": r"excess loss $\ell(W) - \ell(W_{\rm opt})$",
    "accuracy": "training accuracy",
    "test_accuracy": "held-out accuracy",
}


TIME_LABELS = dict(zip(TIMES, ("GD step", r"time $t = \eta \cdot$ step",
                               r"rescaled time $\eta \cdot$ step / $\delta$, $\delta = \ln(1/\sigma_0)$")))
"""The time axes of `observables`: the step, the time eta * step, and Gidel et al.'s rescaled
time t / delta for an init W(0) = e^(-delta) I, in which a two-layer network's phases stay put as
delta grows (their Theorem 2)."""


@styled
def observables(traj: pd.DataFrame, runs: pd.DataFrame, columns: list[str], hue: str = "depth",
                time: str = "step", width: float = DOUBLE, title: str | None = None,
                facet: str | None = None) -> Figure:
    """One panel per recorded quantity (e.g. `nuclear_norm`, `reconstruction_error`: Gidel et
    al.'s Figure 2) against `time` (`TIME_LABELS`; log axes), one line per value of `hue` (its other
    axes' runs with the first value of each), mean +- one standard deviation over seeds as a band;
    with `facet`, a column of panels per value of it, a row per quantity (Gidel et al.'s Figure 1:
    a model each, a line per delta against rescaled time)."""
    data = traj.merge(runs, on="run_id")
    facets = _facet_values(data[facet]) if facet else [None]
    rows = len(columns) if facet else 1          # without facets, the quantities side by side
    fig, axes = _subplots(rows, len(facets) if facet else len(columns), figsize=(width, 2.4 * rows + 0.2),
                          squeeze=False, sharex=True, layout="constrained")
    for row, column in enumerate(columns):
        for col, value in enumerate(facets):
            ax = axes[row, col] if facet else axes[0, row]
            panel = data if facet is None else data[data[facet] == value]
            for n, (line, runs_of_line) in enumerate(sorted(panel.groupby(hue), key=lambda item: item[0])):
                colour = OKABE_ITO[n % len(OKABE_ITO)]
                step, mean, spread = _over_repetitions(runs_of_line, column)
                lr = runs_of_line["lr"].iloc[0]
                scale = {"step": 1.0, "eta": lr, "rescaled": lr / np.log(1.0 / runs_of_line["sigma0"].iloc[0])}[time]
                label = (rf"$\delta$ = {np.log(1.0 / line):.3g}" if time == "rescaled" and hue == "sigma0"
                         else facet_title(hue, line))
                ax.plot(step * scale, mean, color=colour, lw=1.3, label=label)
                if spread is not None:
                    ax.fill_between(step * scale, mean - spread, mean + spread, color=colour, alpha=0.25, lw=0)
            ax.set_xscale("log")
            ax.set_ylabel(OBSERVABLE_LABELS.get(column, column.replace("_", " ")), fontsize=8)
            if facet is not None and row == 0:
                ax.set_title(facet_title(facet, value))
            ax.tick_params(which="both", labelsize=7)
    for ax in axes[-1]:
        ax.set_xlabel(TIME_LABELS[time], fontsize=8)
    _legend_on_top(fig, *axes[0, 0].get_legend_handles_labels(), data["seed"].nunique() if "seed" in data else 1, title)
    return fig


@styled
def pc_profile(spread: pd.DataFrame, hue: str = "depth", shown: int = 5, width: float = DOUBLE,
               title: str | None = None) -> Figure:
    """Hacohen & Weinshall's Figure 4 from an `api.pc_spread` table: the distance of W's
    coordinates along each principal direction j to the optimum's against j, at `shown` recorded
    steps (log-spaced, a sequential colour each): top row the mean over seeds, bottom row its
    standard deviation (0 for one seed); one column per value of `hue`."""
    values = sorted(spread[hue].unique())
    recorded = np.sort(spread["step"].unique())
    picks = np.unique(np.searchsorted(recorded, np.geomspace(1, recorded[-1], shown - 1)).clip(0, len(recorded) - 1))
    steps = np.concatenate([[recorded[0]], recorded[picks]])
    colours = matplotlib.colormaps["cividis"](np.linspace(0.0, 0.9, len(steps)))
    fig, axes = _subplots(2, len(values), figsize=(width, 4.4), sharex=True, squeeze=False, layout="constrained")
    for c_i, value in enumerate(values):
        rows = spread[spread[hue] == value]
        for step, colour in zip(steps, colours):
            at = rows[rows["step"] == step].sort_values("j")
            axes[0, c_i].plot(at.j + 1, at["mean"], color=colour, lw=1.2, label=f"step {step:,}")
            axes[1, c_i].plot(at.j + 1, at["std"].fillna(0.0), color=colour, lw=1.2)
        axes[0, c_i].set_title(facet_title(hue, value), fontsize=8)
        for ax in axes[:, c_i]:
            ax.set_yscale("log")
            ax.tick_params(which="both", labelsize=7)
    axes[0, 0].set_ylabel("distance to optimum\n" r"$\|w_j - w_j^{\rm opt}\|$, mean", fontsize=8)
    axes[1, 0].set_ylabel("std over seeds", fontsize=8)
    fig.supxlabel(r"principal direction $j$ (by decreasing eigenvalue of $\Sigma_x$)", fontsize=9)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    legend = fig.legend(handles, labels, loc="outside upper center", ncol=len(labels), fontsize=7, frameon=False,
                        title=wrapped(title, width * HEADING_WIDTH, 9), title_fontsize=9)
    legend.get_title().set_multialignment("center")
    return fig


def _relative_curve(ax, traj: pd.DataFrame, column: str, colour, label: str) -> np.ndarray:
    """Draw a column relative to each run's value at step 0, mean over the runs (seeds) with a band
    of +- one standard deviation kept above 1e-3 of the mean (for log axes); returns the steps."""
    start = traj[traj.step == 0].set_index("run_id")[column]
    step, mean, spread = _over_repetitions(traj.assign(**{column: traj[column] / traj.run_id.map(start)}), column)
    ax.plot(step, mean, color=colour, lw=1.3, label=label)
    if spread is not None:
        ax.fill_between(step, np.maximum(mean - spread, mean * 1e-3), mean + spread, color=colour, alpha=0.25, lw=0)
    return step


@styled
def pc_curves(traj: pd.DataFrame, runs: pd.DataFrame, directions: list[int], predicted: dict[int, np.ndarray] | None = None,
              spread: pd.DataFrame | None = None, width: float = SINGLE * 1.4, title: str | None = None) -> Figure:
    """Hacohen & Weinshall's Figure 2 (left) against the step, one colour per principal direction
    j, with eq. 10's lambda^s where `predicted` (j -> the contraction |1 - lr N lambda_j|) is given
    (dashed): with `spread` (`analyses.pc_weight_spread`: step, j, std) a first panel of the
    paper's quantity, the std of w_j over the networks, then a panel of the distance to the
    optimum along each direction (`pc_distance_j` relative to step 0, mean over seeds with a band
    of +- one standard deviation); without, the distance alone."""
    panels = 1 if spread is None else 2
    fig, axes = _subplots(1, panels, figsize=(width * (1.0 if panels == 1 else 1.55), 2.8 if panels == 1 else 3.8),
                          squeeze=False,
                          layout="constrained")
    axes = axes[0]
    for n, j in enumerate(directions):
        colour = OKABE_ITO[n % len(OKABE_ITO)]
        rows = spread[spread.j == j].sort_values("step") if spread is not None else ()
        if len(rows):           # a direction whose w_j was recorded
            step, std = rows["step"].to_numpy(), rows["std"].to_numpy()
            axes[0].plot(step, std, color=colour, lw=1.3, label=f"$j$ = {j + 1}")
            if predicted is not None:
                axes[0].plot(step, std[0] * predicted[j] ** (step - step[0]).astype(float), color=colour, lw=0.9,
                             ls="--")
        step = _relative_curve(axes[-1], traj, f"pc_distance_{j}", colour, f"$j$ = {j + 1}")
        if predicted is not None:
            axes[-1].plot(step, predicted[j] ** step.astype(float), color=colour, lw=0.9, ls="--")
    for ax in axes:
        if predicted is not None:
            ax.plot([], [], color="0.3", ls="--", lw=0.9, label=r"eq. 10: $|1 - \eta N \lambda_j|^s$")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("GD step $t$", fontsize=8)
        ax.tick_params(which="both", labelsize=7)
    if spread is not None:
        largest = spread["std"].max()
        axes[0].set_ylim(largest * 1e-8, largest * 3.0)
        axes[0].set_ylabel(r"std of $w_j$ over the networks", fontsize=8)
        axes[0].set_title("(a) spread over networks (the paper's Figure 2)", fontsize=8)
        axes[1].set_title(r"(b) distance to the optimum", fontsize=8)
    axes[-1].set_ylim(1e-8, 3.0)
    axes[-1].set_ylabel(r"$\|w_j - w_j^{\rm opt}\|$ relative to step 0", fontsize=8)
    if spread is not None:         # above the panels: every corner of them has curves
        _legend_on_top(fig, *axes[0].get_legend_handles_labels(), int(spread["seeds"].max()), title)
        return fig
    axes[0].legend(fontsize=7, frameon=False, ncol=2)
    if title:
        heading(fig, title, 8)
    return fig


@styled
def gradient_scales(traj: pd.DataFrame, layers: list[int], width: float = DOUBLE, title: str | None = None) -> Figure:
    """Hacohen & Weinshall's Figure 3: per layer l of `layers` (1-based; a row each), (a) the mean
    distance of the diagonal of the gradient scale matrices A_l and B_l from their expectations at
    the init, alpha_l and beta_l, and (b) the mean of their off-diagonal entries, against the GD
    step (log axis), mean +- one standard deviation over the runs (seeds) as a band."""
    fig, axes = _subplots(len(layers), 2, figsize=(width, 2.0 * len(layers) + 0.9), sharex=True, squeeze=False,
                          layout="constrained")
    sides = (("A", "a", OKABE_ITO[0], r"$A_l$ (outputs, $p \times p$)"), ("B", "b", OKABE_ITO[1],
                                                                           r"$B_l$ (inputs, $d \times d$)"))
    for row, layer in enumerate(layers):
        for col, part in enumerate(("diagonal_distance", "off_diagonal")):
            ax = axes[row, col]
            for _, prefix, colour, label in sides:
                step, mean, spread = _over_repetitions(traj, f"{prefix}_{part}_{layer - 1}")
                ax.plot(step, mean, color=colour, lw=1.3, label=label)
                if spread is not None:
                    ax.fill_between(step, mean - spread, mean + spread, color=colour, alpha=0.25, lw=0)
            if part == "off_diagonal":
                ax.axhline(0.0, color="0.5", lw=0.6, ls=":")
            ax.set_xscale("log")
            ax.set_title(f"layer {layer}", fontsize=8)
            ax.tick_params(which="both", labelsize=7)
        axes[row, 0].set_ylabel(r"mean $|A_{ii} - \alpha_l|$, $|B_{ii} - \beta_l|$", fontsize=8)
        axes[row, 1].set_ylabel("mean off-diagonal entry", fontsize=8)
    axes[0, 0].set_title(f"(a) diagonal's distance from its expectation, layer {layers[0]}", fontsize=8)
    axes[0, 1].set_title(f"(b) off-diagonal entries, layer {layers[0]}", fontsize=8)
    fig.supxlabel("GD step", fontsize=8)
    _legend_on_top(fig, *axes[0, 0].get_legend_handles_labels(), traj.run_id.nunique(), title)
    return fig


@styled
def learning_order(table: pd.DataFrame, width: float = SINGLE * 1.4, title: str | None = None) -> Figure:
    """Hacohen & Weinshall's Figure 7: the correlation of two ensembles' accessibility (from
    `analyses.learning_order`, one table per variant: columns variant, subset, correlation) as
    bars, one group per subset of examples, one colour per variant (natural data orange, whitened
    blue as in the paper)."""
    fig, ax = _subplots(figsize=(width, 2.8), layout="constrained")
    subsets = list(dict.fromkeys(table["subset"]))
    variants = list(dict.fromkeys(table["variant"]))
    bar = 0.8 / len(variants)
    for n, variant in enumerate(variants):
        rows = table[table.variant == variant].set_index("subset").loc[subsets]
        positions = np.arange(len(subsets)) + (n - (len(variants) - 1) / 2) * bar
        ax.bar(positions, rows["correlation"], width=bar, color=OKABE_ITO[(1 - n) % len(OKABE_ITO)], label=variant)
        for x, value in zip(positions, rows["correlation"]):
            ax.text(x, value, f"{value:.2f}", ha="center", va="bottom" if value >= 0 else "top", fontsize=7)
    ax.axhline(0.0, color="0.3", lw=0.6)
    ax.set_xticks(np.arange(len(subsets)), subsets, fontsize=8)
    ax.set_xlabel("examples", fontsize=8)
    ax.set_ylabel("correlation of the two ensembles'\naccessibility (Pearson)", fontsize=8)
    low = min(0.0, float(table["correlation"].min()) - 0.1)
    ax.set_ylim(low, 1.1)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=7, frameon=False, loc="upper left")
    if title:
        heading(fig, title, 8)
    return fig


@styled
def pc_rates(rates: pd.DataFrame, width: float = SINGLE * 1.4, title: str | None = None) -> Figure:
    """Measured per-PC convergence rates (`rate`, per step; mean over seeds, bars +- one std)
    against the principal direction j (by decreasing eigenvalue of Sigma_x), one colour per depth,
    with Hacohen & Weinshall's prediction -ln|1 - lr N lambda_j| (eq. 10, `predicted`) as a
    dashed line: falling with j on natural data, flat once whitened."""
    fig, ax = _subplots(figsize=(width, 2.8), layout="constrained")
    for n, (depth, rows) in enumerate(sorted(rates.groupby("depth"), key=lambda item: item[0])):
        colour = OKABE_ITO[n % len(OKABE_ITO)]
        rows = rows.sort_values("j")
        ax.plot(rows["j"] + 1, rows["predicted"], color=colour, lw=1.0, ls="--")
        ax.errorbar(rows["j"] + 1, rows["rate"], yerr=rows["rate_std"].fillna(0.0), fmt="o", color=colour, ms=2.5,
                    elinewidth=0.6, label=facet_title("depth", depth))
    ax.plot([], [], color="0.3", ls="--", lw=1.0, label=r"predicted $-\ln|1 - \eta N \lambda_j|$")
    ax.set_yscale("log")
    ax.set_xlabel(r"principal direction $j$ (by decreasing eigenvalue $\lambda_j$ of $\Sigma_x$)", fontsize=8)
    ax.set_ylabel("convergence rate along $j$\n(per GD step)", fontsize=8)
    ax.tick_params(which="both", labelsize=7)
    ax.legend(fontsize=7, frameon=False, loc="best")
    if title:
        heading(fig, title, 8)
    return fig


@styled
def value_panels(panels: list[tuple[str, pd.DataFrame, float, str]], width: float = DOUBLE,
                 title: str | None = None) -> Figure:
    """One panel per (title, trajectories of one run, its lr, y label): its observed values
    (columns sigma_0, sigma_1, ...) against time eta * step on a log axis, each value a colour
    (Gissin et al.'s Figure 1: four models side by side)."""
    heading_lines = (wrapped(title, width * HEADING_WIDTH, 9) or "").count("\n") + 1 if title else 0
    fig, axes = _subplots(1, len(panels), figsize=(width, 2.6 + 0.17 * heading_lines), squeeze=False,
                          layout="constrained")
    for ax, (panel, traj, lr, ylabel) in zip(axes[0], panels):
        columns = sorted((c for c in traj.columns if c.startswith("sigma_")), key=lambda c: int(c.split("_")[1]))
        time = traj["step"].to_numpy() * lr
        for n, column in enumerate(columns):
            ax.plot(time[1:], traj[column].to_numpy()[1:], color=OKABE_ITO[n % len(OKABE_ITO)],
                    label=f"{_ordinal(n + 1)} largest")
        ax.set_xscale("log")
        ax.set_title(wrapped(panel, width / len(panels) * 0.95, 8))
        ax.set_ylabel(ylabel)
    fig.supxlabel(r"time $t = \eta \cdot$ step", fontsize=9)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    _legend_on_top(fig, handles, labels, 1, title)
    return fig


ABSOLUTE = ("accuracy", "test_accuracy")
"""Recorded quantities that `variant_curves` draws as they are, on a linear axis (a share in
[0, 1]); the others relative to their value at step 0, on a log axis."""
PEAKED = ("test_accuracy",)     # marked at their mean's maximum: where early stopping would stop


@styled
def variant_curves(panels: list[tuple[str, list[tuple[str, pd.DataFrame]]]], columns: str | tuple[str, ...],
                   width: float = DOUBLE, title: str | None = None, floor: float | None = None) -> Figure:
    """Recorded quantities against the GD step for several sweeps of one reproduction (its
    variants): a row of panels per quantity of `columns` (relative to its initial value, q(t) /
    q(0), on log axes cut at `floor`, the dtype's rounding floor, marked; those in `ABSOLUTE` as
    they are), one panel per (panel title, lines), one line per (label, trajectories of its
    runs), mean +- one standard deviation over the runs (seeds) as a band; log step axis."""
    columns = (columns,) if isinstance(columns, str) else tuple(columns)
    fig, axes = _subplots(len(columns), len(panels), figsize=(width, 2.3 * len(columns) + 0.4), sharex=True,
                          sharey="row", squeeze=False, layout="constrained")
    for row, column in enumerate(columns):
        for ax, (panel, lines) in zip(axes[row], panels):
            for n, (label, traj) in enumerate(lines):
                colour = OKABE_ITO[n % len(OKABE_ITO)]
                if column in ABSOLUTE:
                    step, mean, spread = _over_repetitions(traj, column)
                    if column in PEAKED:
                        label = f"{label}: {_peak_text(step, mean)}"
                        peak = int(np.argmax(mean))
                        if peak < len(mean) - 1:
                            ax.plot(step[peak], mean[peak], marker="v", ms=5, color=colour, mec="black", mew=0.5,
                                    zorder=5)
                    ax.plot(step, mean, color=colour, lw=1.3, label=label)
                    if spread is not None:
                        ax.fill_between(step, mean - spread, mean + spread, color=colour, alpha=0.25, lw=0)
                else:
                    _relative_curve(ax, traj, column, colour, label)
                    ax.set_yscale("log")
            if floor is not None and column not in ABSOLUTE:
                ax.axhspan(floor / 100, floor, color="0.85", lw=0, zorder=3)
                ax.text(0.98, 0.02, "below the rounding floor", transform=ax.transAxes, ha="right", va="bottom",
                        fontsize=6, color="0.35", zorder=4)
                ax.set_ylim(floor / 100, None)
            ax.set_xscale("log")
            if row == 0:
                ax.set_title(panel, fontsize=8)
                ax.legend(fontsize=7, frameon=False)
            ax.tick_params(which="both", labelsize=7)
        label = OBSERVABLE_LABELS.get(column, column.replace("_", " "))
        axes[row, 0].set_ylabel(label if column in ABSOLUTE else label + "\nrelative to step 0", fontsize=8)
        if column in ABSOLUTE:
            axes[row, 0].set_ylim(0.0, 1.02)
    if len(columns) > 1:
        fig.supxlabel("GD step", fontsize=8)
    else:
        for ax in axes[-1]:
            ax.set_xlabel("GD step", fontsize=8)
    if title:
        heading(fig, title, 9)
    return fig


def _peak_text(step: np.ndarray, mean: np.ndarray) -> str:
    """Where a mean curve peaks before its end (early stopping would stop there), or that it does not."""
    peak = int(np.argmax(mean))
    if peak == len(mean) - 1:
        return f"still rising at the last step, {mean[-1]:.2f}"
    return f"peak {mean[peak]:.2f} at step {step[peak]:,.0f} (early stop), last {mean[-1]:.2f}"


SYMBOLS = {"sigma0": r"$\sigma_0$", "depth": "$N$", "lr": r"$\eta$", "sparsity": r"$\|w^*\|_0$", "shape": "$s$",
           "momentum": r"$\beta$", "b1": r"$\beta_1$", "b2": r"$\beta_2$", "eps": r"$\epsilon$"}


def facet_symbol(name: str) -> str:
    """An axis's symbol in a figure (its name where it has none)."""
    return SYMBOLS.get(name, name)


def facet_title(name: str | None, value) -> str:
    if name is None:
        return ""
    if isinstance(value, str):          # a label that says what it is ("with bias")
        return value
    symbol = facet_symbol(name)
    return f"{symbol} = {value:.3g}" if isinstance(value, (int, float, np.number)) else f"{symbol} = {value}"


# ----------------------------------------------------------------------------- heatmaps


CATEGORIES = [incremental.INCREMENTAL, incremental.NOT_INCREMENTAL, incremental.DIVERGED]
DIVERGED_COLOUR = "#7a7a7a"      # mid grey: a diverged cell (a smaller lr helps) apart from an undecided one (more steps)


def decisions_frame(runs: pd.DataFrame, pair: tuple[int, int], s: float, f: float) -> pd.DataFrame:
    """Per trajectory: Definition 1's status for `pair` and the log10 ratio of the hitting steps
    log10(hs / hf) (> 0 where sigma_j reaches s later than sigma_i reaches f)."""
    table = incremental.decisions(runs, [pair], s, f)
    hf = table[f"hit_{pair[0]}_{level_name(f)}"].to_numpy(float)
    hs = table[f"hit_{pair[1]}_{level_name(s)}"].to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where((hf > 0) & (hs > 0), np.log10(hs / hf), np.nan)
    return table.assign(log_hit_ratio=ratio)


@styled
def heatmap(frame: pd.DataFrame, x: str, y: str, color: str, thresholds: pd.DataFrame | None = None,
            title: str | None = None, width: float = SINGLE * 1.4,
            boundary: tuple[np.ndarray, np.ndarray, str] | None = None, facet: str | None = None,
            boundaries: dict | None = None) -> Figure:
    """A phase diagram over two swept axes. `color` is `status` (incremental or not, diverged mid
    grey; undecided and empty cells hatched light grey) or a numeric column (viridis). With `thresholds` (rows
    keyed by `y` when x is sigma0), the measured threshold is drawn as a line and gf_exact and the
    Theorem 2 band are overlaid and labelled; `boundary` (xs, ys, label) is a theory curve drawn
    over the cells. With `facet` (a column of `frame`), one panel per value of it side by side,
    one colour scale and bar for all, and the curve `boundaries[value]` over a panel where given."""
    values = sorted(frame[facet].unique()) if facet else [None]
    panels = [(value, frame if facet is None else frame[frame[facet] == value]) for value in values]
    boundaries = {None: boundary} if facet is None else (boundaries or {})
    panel_width = width if facet is None else max(width * 0.62, DOUBLE / len(values))
    fig, axes = _subplots(1, len(values), figsize=(panel_width * len(values), width * 0.8), layout="constrained",
                          sharey=True, squeeze=False)
    numeric = color != "status"
    if color == "incremental_fraction":
        limits = (0.0, 1.0)
    else:
        limits = (np.nanmin(frame[color]), np.nanmax(frame[color])) if numeric else (None, None)
    legend, mesh = {}, None
    for ax, (value, panel) in zip(axes[0], panels):
        entries, mesh = _heatmap_panel(ax, panel, x, y, color, limits, thresholds, boundaries.get(value))
        legend |= {entry.get_label(): entry for entry in entries}
        if facet is not None:
            ax.set_title(facet_title(facet, value))
            if ax is not axes[0, 0]:
                ax.set_ylabel("")
    if numeric:
        fig.colorbar(mesh, ax=list(axes[0]), label=_quantity_label(color))
    fig.legend(handles=list(legend.values()), loc="outside lower center", ncol=2, fontsize=7, frameon=False)
    if title:
        heading(fig, title, 9)
    return fig


def _heatmap_panel(ax, frame: pd.DataFrame, x: str, y: str, color: str, limits: tuple, thresholds, boundary) -> tuple:
    """One panel of `heatmap`: its cells (numeric colours within `limits`), overlays and labels;
    its legend entries and its mesh."""
    xs, ys = np.sort(frame[x].unique()), np.sort(frame[y].unique())
    grid = frame.pivot_table(index=y, columns=x, values=color, aggfunc="first").reindex(index=ys, columns=xs)
    x_log, y_log = x in LOG_AXES, y in LOG_AXES
    y_rows = y in ROW_AXES or (not y_log and np.allclose(ys, np.round(ys)))    # integer axis (depth, seed): equal rows
    x_edges = _cell_edges(xs, x_log)
    y_edges = np.arange(len(ys) + 1) - 0.5 if y_rows else _cell_edges(ys, y_log)
    ax.add_patch(Rectangle((x_edges[0], y_edges[0]), x_edges[-1] - x_edges[0], y_edges[-1] - y_edges[0],
                           facecolor=MISSING, hatch="///", edgecolor="white", lw=0, zorder=0))
    if color == "status":
        codes = grid.map(lambda v: CATEGORIES.index(v) if v in CATEGORIES else np.nan).to_numpy(float)
        mesh = ax.pcolormesh(x_edges, y_edges, np.ma.masked_invalid(codes),
                             cmap=ListedColormap([*OKABE_ITO[:2], DIVERGED_COLOUR]), norm=BoundaryNorm([-0.5, 0.5, 1.5, 2.5], 3))
        legend = [Patch(color=OKABE_ITO[0], label="incremental"), Patch(color=OKABE_ITO[1], label="not incremental"),
                  Patch(facecolor=MISSING, hatch="///", edgecolor="white", label="undecided (more steps) / no run")]
        if (codes == CATEGORIES.index(incremental.DIVERGED)).any():
            legend.append(Patch(color=DIVERGED_COLOUR, label="diverged (a smaller lr)"))
    else:
        mesh = ax.pcolormesh(x_edges, y_edges, np.ma.masked_invalid(grid.to_numpy(float)), cmap="viridis",
                             vmin=limits[0], vmax=limits[1])
        missing = "no seed decided" if color == "incremental_fraction" else "no data (or diverged)"
        legend = [Patch(facecolor=MISSING, hatch="///", edgecolor="white", label=missing)]
    ax.set_xscale("log" if x_log else "linear")
    ax.set_yscale("log" if y_log else "linear")
    if x_log:
        short = len(xs) <= VALUE_TICKS and xs[-1] / xs[0] < 100
        _value_ticks(ax.xaxis, xs) if short else _plain_ticks(ax.xaxis, xs)
    if y_rows:
        ax.set_yticks(np.arange(len(ys)), [f"{v:g}" for v in ys])
    if thresholds is not None and x == "sigma0":
        legend += _overlay_thresholds(ax, thresholds[thresholds[y].isin(ys)], y, y_edges, list(ys))
    if boundary is not None:
        style = dict(color="white", lw=2.0, ls="--")
        inside = (boundary[1] >= ys.min()) & (boundary[1] <= ys.max())
        rows = np.interp(boundary[1], ys, np.arange(len(ys))) if y_rows else boundary[1]    # equal rows: by row
        ax.plot(boundary[0][inside], rows[inside], **style)
        legend.append(Line2D([], [], **(style | {"color": "0.2"}), label=boundary[2]))
    ax.set_xlabel(axis_label(x))
    ax.set_ylabel(axis_label(y))
    ax.set_xlim(x_edges[0], x_edges[-1])
    ax.set_ylim(y_edges[0], y_edges[-1])
    return legend, mesh


@styled
def summary_lines(frame: pd.DataFrame, x: str, column: str, hue: str, levels: dict[str, float] | None = None,
                  curve: tuple[np.ndarray, np.ndarray, str] | None = None, title: str | None = None,
                  width: float = SINGLE * 1.4, log_y: bool = False) -> Figure:
    """A runs column against `x` (an axis, or `c`), one line per value of `hue`, mean and +- one
    standard deviation over seeds as a band (Azulay et al.'s Figure 7.1: population error against
    the scale, one curve per shape); `levels` (label -> value) as horizontal reference lines and
    `curve` (xs, ys, label) as a theory line; `log_y` for a positive column spanning decades."""
    fig, ax = _subplots(figsize=(width, 2.8), layout="constrained")
    colours = matplotlib.colormaps["viridis"](np.linspace(0.0, 0.9, frame[hue].nunique()))
    for colour, (value, rows) in zip(colours, sorted(frame.groupby(hue), key=lambda item: item[0])):
        stats = rows.groupby(x)[column].agg(["mean", "std"]).fillna({"std": 0.0}).sort_index()
        ax.plot(stats.index, stats["mean"], "o-", ms=2.5, lw=1.2, color=colour, label=facet_title(hue, value))
        ax.fill_between(stats.index, stats["mean"] - stats["std"], stats["mean"] + stats["std"], color=colour, alpha=0.1, lw=0)
    for n, (label, value) in enumerate((levels or {}).items()):
        ax.axhline(value, color="0.3", lw=0.9, ls=(":", "-.")[n % 2], label=label)
    if curve is not None:
        ax.plot(curve[0], curve[1], color="black", lw=1.0, ls="--", label=curve[2], zorder=3)
    if x in LOG_AXES or x == "c":
        ax.set_xscale("log")
    if log_y:
        ax.set_yscale("log")
    if frame[x].dtype.kind == "i":
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.set_xlabel(axis_label(x) if x != "c" else r"$c = u_0^2 + v_0^2 = 2\sigma_0 (1 + s^2) / (1 - s^2)$")
    ax.set_ylabel(_quantity_label(column), fontsize=8)
    ax.legend(fontsize=6.5, frameon=False, ncol=2, loc="best")
    if title:
        heading(fig, title, 8)
    return fig


@styled
def neuron_q_contours(panels: list[tuple[str, np.ndarray, float]], extent: float = 4.0, width: float = DOUBLE) -> Figure:
    """Contours of Azulay et al.'s Q for one neuron in d = 2 (their Figure 7.2), one panel per
    (title, w~0, delta): Q(w~) - Q(w~0) on [-extent, extent]^2 at levels spaced evenly in its square
    root (so a quadratic's ellipses are evenly spaced), with w~0 marked (Q's unconstrained minimum)."""
    grid = np.linspace(-extent, extent, 241)
    points = np.stack(np.meshgrid(grid, grid), axis=-1)
    rows = 2 if len(panels) > 3 else 1
    columns = math.ceil(len(panels) / rows)
    fig, axes = _subplots(rows, columns, figsize=(width, width / columns * rows * 1.05), squeeze=False,
                          layout="constrained")
    for ax, (title, w0, delta) in zip(axes.ravel(), panels):
        values = theory.neuron_Q(points, w0, delta) - float(theory.neuron_Q(w0, w0, delta))
        levels = np.linspace(0.0, np.sqrt(max(values.max(), 1e-300)), 12)[1:] ** 2
        ax.contour(grid, grid, values, levels=levels, cmap="viridis", linewidths=0.9)
        ax.plot(*w0, marker="*", ls="none", color=OKABE_ITO[3], ms=8, label=r"$\tilde w_0$")
        ax.set_title(title, fontsize=8)
        ax.set_aspect("equal")
        ax.tick_params(labelsize=7)
    for ax in axes.ravel()[len(panels):]:
        ax.set_visible(False)
    axes[0, 0].legend(fontsize=7, frameon=False, loc="lower left")
    fig.supxlabel(r"$\tilde w_1$", fontsize=9)
    fig.supylabel(r"$\tilde w_2$", fontsize=9)
    return fig


UNDATED = {".pdf": {"CreationDate": None}, ".svg": {"Date": None}}    # the same figure, the same bytes


@styled
def save(figure: Figure, paths, keep_open: bool = False, rendered: dict[str, bytes] | None = None) -> None:
    """Write a figure to every path (PNG at 200 dpi, or PDF / SVG by suffix; the whole canvas as
    its constrained layout placed every artist; no date in a PDF or SVG, so a figure redrawn from
    the same data is the same file), then close it (unless `keep_open`). A path without a suffix
    gets the default format's, as matplotlib gives it. Each format is drawn once and its bytes
    written to every path of that suffix; `rendered` (suffix -> bytes) carries this figure's
    drawings from one call to the next. A path that cannot be written is a PlotError naming it."""
    rendered = {} if rendered is None else rendered
    try:
        with _laid_out_once(figure):
            _write_formats(figure, paths, rendered)
    finally:
        if not keep_open:
            close(figure)


def _write_formats(figure: Figure, paths, rendered: dict[str, bytes]) -> None:
    """`save`'s writing: each format drawn once, its bytes written to every path of its suffix."""
    for path in map(Path, paths):
        suffix = path.suffix.lower()
        if not suffix:
            suffix = "." + matplotlib.rcParams["savefig.format"]
            path = path.with_name(path.name + suffix)
        if suffix not in rendered:
            buffer = io.BytesIO()
            figure.savefig(buffer, format=suffix.lstrip("."), metadata=UNDATED.get(suffix))
            rendered[suffix] = buffer.getvalue()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(rendered[suffix])
        except OSError as err:
            raise PlotError(f"{path}: cannot write the figure ({os.strerror(err.errno) if err.errno else err})") from None


@contextlib.contextmanager
def _laid_out_once(figure: Figure):
    """The figure laid out by its layout engine once, at the saving dpi, and saved without the
    engine, which is put back afterwards: matplotlib's `savefig` would otherwise draw the whole
    figure once without rendering to lay it out, then again to render it (every artist twice),
    for each format. The same pixels."""
    engine = figure.get_layout_engine()
    if engine is None or not figure.axes:
        yield
        return
    own_dpi, saving_dpi = figure.dpi, matplotlib.rcParams["savefig.dpi"]
    figure.set_dpi(own_dpi if saving_dpi == "figure" else saving_dpi)
    try:
        engine.execute(figure)
    finally:
        figure.set_dpi(own_dpi)
    with matplotlib.rc_context({"figure.autolayout": False, "figure.constrained_layout.use": False}):
        figure.set_layout_engine(None)      # no engine: "none" leaves a placeholder, which savefig lays out
    try:
        yield
    finally:
        figure.set_layout_engine(engine)


def close(figure: Figure) -> None:
    """Free a figure's drawing now (a figure outside pyplot needs no closing, only its memory)."""
    figure.clear()


def _quantity_label(name: str) -> str:
    return {"log_hit_ratio": r"$\log_{10}$(step $\sigma_j$ reaches $s \cdot \sigma^*_j$ / step $\sigma_i$ reaches $f \cdot \sigma^*_i$)",
            "sigma0_th": r"threshold $\sigma_0^{th}$",
            "log10_threshold_over_target": r"$\log_{10}(\sigma_0^{th} / \sigma^*_j)$",
            "final_loss": "final loss",
            "incremental_fraction": "share of seeds learning incrementally",
            "population_error": r"population error $\|\beta - \beta^*\|^2 + \epsilon^2$",
            "l1_l2_position": "position between min-l1 (0) and min-l2 (1)",
            "distance_q": r"$\|\beta - \arg\min Q\|$ (the theory's interpolator)"}.get(name, name)


def _overlay_thresholds(ax, thresholds: pd.DataFrame, y: str, y_edges: np.ndarray, y_values: list) -> list:
    """Per row of the heatmap (the cell between y_edges[n] and y_edges[n+1] holds y_values[n]):
    the measured threshold as a vertical segment joined into a step line, gf_exact as a dashed
    line, the Theorem 2 band [lower, valid upper] hatched."""
    rows = thresholds.sort_values(y)
    index = np.array([y_values.index(v) for v in rows[y]], dtype=int)
    lo_edges, hi_edges = y_edges[index], y_edges[index + 1]
    handles = []
    measured = "measured threshold"
    if {"sigma0_th_min", "sigma0_th_max"} <= set(rows.columns):      # thresholds over seeds
        measured = "median threshold over seeds"
        style = dict(color="white", lw=1.2, marker="|", ms=8, mew=1.2)
        for row, lo_e, hi_e in zip(rows.itertuples(), lo_edges, hi_edges):
            ax.plot([row.sigma0_th_min, row.sigma0_th_max], [(lo_e + hi_e) / 2] * 2, **style)
        handles.append(Line2D([], [], **(style | {"color": "0.3"}), label="range of the seeds' thresholds"))
    for col, style, label in (("sigma0_th", dict(color=OKABE_ITO[4], lw=2.6), measured),
                              ("gf_exact", dict(color="black", lw=1.2, ls="--"), "exact gradient flow")):
        if col not in rows:
            continue
        xs = np.repeat(rows[col].to_numpy(float), 2)
        ys = np.column_stack([lo_edges, hi_edges]).reshape(-1)
        ax.plot(xs, ys, **style, label=label)
        handles.append(Line2D([], [], **style, label=label))
    if {"thm2_lower", "thm2_upper_valid"} <= set(rows.columns):
        for row, lo_e, hi_e in zip(rows.itertuples(), lo_edges, hi_edges):
            if np.isfinite(row.thm2_upper_valid):
                lower = max(row.thm2_lower, ax.get_xlim()[0] * 1e-3)
                ax.fill_betweenx([lo_e, hi_e], lower, row.thm2_upper_valid, facecolor="none", edgecolor="black",
                                 hatch="....", lw=0, alpha=0.5)
                ax.plot([row.thm2_upper_valid] * 2, [lo_e, hi_e], color="black", lw=0.8)
        handles.append(Patch(facecolor="none", edgecolor="black", hatch="....", label="Theorem 2 band (to upper bound)"))
    return handles


# ----------------------------------------------------------------------------- threshold curves


@styled
def threshold_curves(thresholds: pd.DataFrame, width: float = SINGLE * 1.4, title: str | None = None) -> Figure:
    """sigma0_th / sigma*_j against r on log axes, one colour per depth: measured (markers), and
    where the table carries the theory (runs that follow the toy model's gradient descent:
    `gf_exact`) the exact gradient-flow curve (line) and the Theorem 2 band [lower, valid upper]
    (shaded) -- exponential in 1/(r-1) at N = 2, polynomial for N >= 3 (Gissin et al. Theorem 2);
    `title` under the heading."""
    fig, ax = _subplots(figsize=(width, width * 0.85), layout="constrained")
    s, f = float(thresholds.s.iloc[0]), float(thresholds.f.iloc[0])
    with_theory = "gf_exact" in thresholds
    r_dense = np.geomspace(max(1.02, thresholds.r.min() * 0.95), thresholds.r.max() * 1.05, 60)
    for n_i, (depth, rows) in enumerate(thresholds.groupby("depth")):
        colour = OKABE_ITO[n_i % len(OKABE_ITO)]
        ax.plot(rows.r, rows.sigma0_th / rows.sigma_star_j, "o", color=colour, ms=4, label=f"$N$ = {depth:g} measured")
        if not with_theory:
            continue
        exact = [math.exp(theory.log_gf_threshold(r, 1.0, s, f, float(depth))) for r in r_dense]
        ax.plot(r_dense, exact, "-", color=colour, lw=1.2)
        lower = [theory.thm2_bounds_printed(r, s, f, float(depth))[0] for r in r_dense]
        upper = [theory.thm2_upper_valid(r, s, f, float(depth)) for r in r_dense]
        ax.fill_between(r_dense, lower, upper, color=colour, alpha=0.15, lw=0)
    ax.set_xscale("log")
    ax.set_yscale("log")
    _plain_ticks(ax.xaxis, r_dense)
    _clip_to_data(ax, thresholds.sigma0_th / thresholds.sigma_star_j)     # N = 2's lower bound: 1e-70
    ax.set_xlabel(axis_label("r"))
    ax.set_ylabel(r"threshold $\sigma_0^{th} / \sigma^*_j$")
    heading(fig, "\n".join(filter(None, [f"({s:g}, {f:g})-incremental learning", title])), 9)
    handles, labels = ax.get_legend_handles_labels()
    if with_theory:
        handles += [Line2D([], [], color="0.3"), Patch(color="0.3", alpha=0.15)]
        labels += ["exact gradient flow", "Theorem 2 band"]
    ax.legend(handles, labels, fontsize=7, frameon=False, loc="lower right")
    return fig


PLAIN_TICKS = 7


VALUE_TICKS = 10     # a heatmap log axis of at most this many columns, within two decades, is ticked at each one


def _value_ticks(axis, values) -> None:
    """A tick at each value (a heatmap's column centres), labelled plainly, no minor ticks."""
    axis.set_major_locator(matplotlib.ticker.FixedLocator(values))
    axis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    axis.set_minor_locator(matplotlib.ticker.NullLocator())


def _plain_ticks(axis, values) -> None:
    """Readable ticks (1.5, 2, 3, ...) on a short log axis, at least 1/`PLAIN_TICKS` of the axis's
    span apart so their labels never touch."""
    candidates = np.array([1.1, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30, 50, 100])
    gap = np.log10(np.max(values) / np.min(values)) / PLAIN_TICKS
    inside = []
    for tick in candidates[(candidates >= np.min(values)) & (candidates <= np.max(values))]:
        if not inside or np.log10(tick / inside[-1]) >= gap:
            inside.append(tick)
    if np.max(values) / np.min(values) < 100 and len(inside) >= 2:
        axis.set_major_locator(matplotlib.ticker.FixedLocator(inside))
        axis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
        axis.set_minor_formatter(matplotlib.ticker.NullFormatter())


@styled
def lr_map(thresholds: pd.DataFrame, width: float = SINGLE * 1.4, title: str | None = None) -> Figure:
    """Threshold against learning rate at N = 2 with Theorem 3's bounds and the gradient-flow
    limit, one colour per pair (Gissin et al. Theorem 3); `title` under the heading."""
    rows = thresholds[thresholds.depth == 2]
    fig, ax = _subplots(figsize=(width, width * 0.85), layout="constrained")
    for p_i, ((i, j), pair) in enumerate(rows.groupby(["i", "j"])):
        colour = OKABE_ITO[p_i % len(OKABE_ITO)]
        pair = pair.sort_values("lr")
        ax.plot(pair.lr, pair.sigma0_th, "o-", color=colour, ms=4, lw=1, label=f"pair ({i}, {j}), r = {pair.r.iloc[0]:g}")
        ax.fill_between(pair.lr, pair.thm3_chain_lower, pair.thm3_upper, color=colour, alpha=0.15, lw=0)
        ax.axhline(pair.gf_exact.iloc[0], color=colour, ls="--", lw=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    _clip_to_data(ax, rows.sigma0_th)
    ax.set_xlabel(axis_label("lr"))
    ax.set_ylabel(r"threshold $\sigma_0^{th}$")
    heading(fig, "\n".join(filter(None, ["$N$ = 2, gradient descent", title])), 9)
    handles, labels = ax.get_legend_handles_labels()
    handles += [Line2D([], [], color="0.3", ls="--"), Patch(color="0.3", alpha=0.15)]
    labels += ["gradient flow (exact)", "Theorem 3 band (lower: its proof's chain)"]
    ax.legend(handles, labels, fontsize=7, frameon=False)
    return fig


def _clip_to_data(ax, values, decades: float = 4.0) -> None:
    """Keep a log y axis readable when a bound falls to 1e-100: at most `decades` below the data."""
    values = np.asarray(values, float)
    finite = values[np.isfinite(values) & (values > 0)]
    if len(finite):
        ax.set_ylim(max(ax.get_ylim()[0], finite.min() / 10**decades), min(ax.get_ylim()[1], finite.max() * 10))
