"""One figure of a run folder by kind (`plot_run`): each kind a small function in `FIGURES`, the
registry, drawn with `dlsweep.plot` from the run's tables, its thresholds and its family's
theory."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dlsweep import compare, engine, store
from dlsweep.analyses import pc_rates, pc_spread, pc_weight_spread
from dlsweep.analysis import incremental
from dlsweep.errors import PlotError
from dlsweep.figures import FIGURE_SUFFIXES, FORMATS, NEEDS_TARGETS, PLOT_KINDS, TIMES
from dlsweep.slices import check_at, first_slice, only
from dlsweep.spec import Sweep
from dlsweep.store import load, load_trajectories
from dlsweep.sweeping import draw_inputs, folder_sweep, restores_x64
from dlsweep.thresholding import thresholds_for
from dlsweep.warning import DlsweepWarning


PC_CURVES = (0, 1, 3, 7, 15, 31)     # the principal directions a pc_curves figure shows (0-based)

OBSERVABLES = ("nuclear_norm", "reconstruction_error")     # the default panels of an observables figure


@restores_x64
def plot_run(folder: str | Path, kind: str | None = None, x: str | None = None, y: str | None = None,
             color: str | None = None, pair: tuple[int, int] | None = None, s: float = 0.05, f: float = 0.95,
             out: str | Path | None = None, title: str | None = None, at: dict[str, float] | None = None,
             formats: tuple[str, ...] = ("png",), facet: str | None = None, time: str | None = None) -> list[Path]:
    """Draw one figure of a run folder; it lands in `DIR/figures/<kind>[...].<format>` for each of
    `formats` (png at 200 dpi, pdf, svg) and at `out`.
    Its heading is `title` (if given) over what the figure holds fixed (`figure_slice`: the axes
    it does not draw, at the value it takes, steps, dtype, (s, f)) and, for a partial run, "partial:
    x of y chunks". Returns the paths written (the run folder's copy left out, with a warning,
    where the folder cannot take it and `out` did).

    kind None: the heatmap where the run has targets and hitting levels, else the family's figure
    (`Family.figure`: trajectories, or for Azulay's networks the summary).

    heatmap: x (default sigma0) by y (default depth), colour `status` of `pair` (default the two
    largest targets) or a numeric column (`log_hit_ratio`, `final_loss`, ...), with the measured
    threshold, gf_exact and the Theorem 2 band over it (where the runs follow the toy model's
    dynamics); over a seed axis, by default the share of seeds that learn incrementally, with the
    median threshold and its range; x by y = r by depth with colour
    `log10_sigma0_th` maps the thresholds themselves. trajectories: sigma_i(t) faceted by sigma0 x
    depth (repetitions over seeds as mean and spread). thresholds: sigma0_th against r per depth;
    with x an axis (e.g. depth), sigma0_th of `pair` against it, one line per value of the axis
    `color` (e.g. momentum), with gradient flow's exact threshold against depth.
    lr: sigma0_th against lr at N = 2. correlation: the final predictor's correlation with the
    labelling vector against depth (models that summarize one), with the SVM baseline if run.
    agreement: the agreement of the selected features with OMP's against the sparsity.
    observables: recorded quantities (y: comma-separated columns of the trajectories table, default
    nuclear_norm,reconstruction_error) against the step (or `time`: "eta", eta * step; "rescaled",
    eta * step / ln(1/sigma0), Gidel's t / delta), one line per value of x (default depth), a
    column of panels per value of `facet` if given, the other axes at their first value. pcs: the
    distance to the optimum along each principal direction of the data at a few steps, mean and
    std over seeds (linear_net). pc_rates: the
    measured convergence rate along each direction, with the prediction.
    pc_curves: the distance along a few principal directions against the step, with eq. 10's
    prediction, at the smallest depth and lr (and the std of w_j over the seeds where the task
    records `pc_weights`). gradient_scales: Hacohen's Figure 3, the gradient scale matrices A_l,
    B_l of two layers against the step (`[task] gradient_scales`), at the largest depth. summary:
    a runs column (y, default population_error)
    against an axis (x, default sigma0; `c` = 2 sigma0 (1 + s^2)/(1 - s^2), Azulay's one number of a
    depth-2 init), one line per value of `color` (default shape), mean and std over seeds; for
    diagonal_net with the interpolators' population errors as levels. heatmap with `color` a runs
    column (population_error, l1_l2_position, ...): its mean over seeds over two axes (default
    sigma0 x shape), for diagonal_net at depth 2 with the theory's regime boundary; with `facet` an
    axis (e.g. depth), one panel per value of it, side by side on one colour scale. `at` picks one
    value of other axes (e.g. {"depth": 3}) before the figure takes the first of the rest."""
    folder = Path(folder)
    if kind is not None and kind not in PLOT_KINDS:
        raise PlotError(f"kind={kind!r}: expected one of {', '.join(PLOT_KINDS)}")
    if out is not None and Path(out).suffix.lower() not in FIGURE_SUFFIXES:
        raise PlotError(f"out={str(out)!r}: expected a file ending in {', '.join(FIGURE_SUFFIXES)}")
    check_formats(formats)
    sweep = folder_sweep(folder)
    sigma_star = sweep.family.targets(sweep.task)
    kind = kind or ("heatmap" if sigma_star is not None and sweep.record.levels else sweep.family.figure)
    check_at(sweep, at)
    runs = only(load(folder), at)
    column_heatmap = kind == "heatmap" and color is not None and color in runs.columns and color not in sweep.axes
    if sigma_star is None and kind in NEEDS_TARGETS and not column_heatmap:
        raise PlotError(f"{folder}: a {kind} figure needs targets sigma_star, which this task has not")
    if sigma_star is not None and pair is None:
        adjacent = incremental.pairs_for(sigma_star, "adjacent")
        if not adjacent and kind in NEEDS_TARGETS:
            raise PlotError(f"{folder}: a {kind} figure needs two distinct targets, got sigma_star = {list(sigma_star)}")
        pair = adjacent[0] if adjacent else None
    elif sigma_star is not None:
        incremental.pairs_for(sigma_star, [pair])
    at_name = "".join(f"-{axis}{value:g}" for axis, value in (at or {}).items())    # a figure of a slice: its own file
    request = Request(folder, sweep, runs, sigma_star, x, y, color, pair, s, f, title, at, facet, time)
    if facet is not None and not column_heatmap and kind != "observables":
        raise PlotError(f"facet={facet!r}: panels side by side are drawn for observables and for a heatmap of a "
                        f"runs column (kind='heatmap' with color one of the runs table's numeric columns)")
    if time is not None and (kind != "observables" or time not in TIMES):
        raise PlotError(f"time={time!r}: the time axis of an observables figure: one of {', '.join(TIMES)}")
    figure, name = FIGURES[kind](request)
    return _save_figure(figure, [folder / "figures" / f"{name}{at_name}.{suffix}" for suffix in formats], out)


@dataclasses.dataclass(frozen=True)
class Request:
    """What a figure of the registry is drawn from: the run folder, its sweep and runs table (at
    `at`), the targets, and `plot_run`'s options."""

    folder: Path
    sweep: Sweep
    runs: pd.DataFrame
    sigma_star: tuple | None
    x: str | None
    y: str | None
    color: str | None
    pair: tuple[int, int] | None
    s: float
    f: float
    title: str | None
    at: dict[str, float] | None
    facet: str | None = None
    time: str | None = None


FIGURES: dict[str, Callable[[Request], tuple[Any, str]]] = {}
"""The registry: figure kind -> its function, Request -> (figure, file name without `.png`)."""


def figure_kind(kind: str):
    """Register the decorated function as the figure of `kind` (one of `figures.PLOT_KINDS`)."""
    def register(draw):
        FIGURES[kind] = draw
        return draw

    return register


@figure_kind("trajectories")
def _trajectories(r: Request):
    from dlsweep import plot

    sweep, runs = r.sweep, r.runs
    facets = [a for a in (r.x or "depth", r.y or "sigma0") if a in sweep.axes] or [a for a in sweep.axes if a != "seed"][:1]
    cols, rows = _two_axes(sweep, *facets) if len(facets) == 2 else (facets[0], None)
    chosen = runs[runs[cols].isin(_spread(runs[cols].unique(), 6))]
    if rows:
        chosen = chosen[chosen[rows].isin(_spread(runs[rows].unique(), 3))]
    chosen, heading = figure_slice(chosen, sweep, (rows, cols), r.title, r.folder)
    traj = load_trajectories(r.folder)
    return plot.trajectories(traj[traj.run_id.isin(chosen.run_id)], chosen, r.sigma_star, rows=rows, cols=cols,
                             s=r.s, f=r.f, pair=r.pair, ylabel=sweep.family.observed, title=heading), "trajectories"


@figure_kind("correlation")
def _correlation(r: Request):
    from dlsweep import plot

    if "correlation" not in r.runs or "depth" not in r.runs:
        raise PlotError(f"{r.folder}: the correlation figure needs a depth axis and a model that "
                        f"summarizes its correlation with w* (diagonal, conv)")
    baseline = "svm_correlation" if "svm_correlation" in r.runs else None
    chosen, heading = figure_slice(r.runs, r.sweep, ("depth", "sigma0"), r.title, r.folder)
    return plot.correlation_by_depth(chosen, baseline, title=heading), "correlation"


@figure_kind("agreement")
def _agreement(r: Request):
    from dlsweep import plot

    if "omp_agreement" not in r.runs or "sparsity" not in r.runs:
        raise PlotError(f"{r.folder}: the agreement figure needs a sparsity axis and the OMP baseline "
                        f"(model diagonal with select > 0 and compare = true)")
    chosen, heading = figure_slice(r.runs, r.sweep, ("sparsity", "depth", "sigma0"), r.title, r.folder)
    return plot.agreement_by_sparsity(chosen, title=heading), "agreement"


@figure_kind("observables")
def _observables(r: Request):
    from dlsweep import plot

    traj = load_trajectories(r.folder)
    columns = r.y.split(",") if r.y else [c for c in OBSERVABLES if c in traj]
    missing = [c for c in columns if c not in traj] or ([] if columns else list(OBSERVABLES))
    if missing:
        raise PlotError(f"{r.folder}: no recorded {', '.join(missing)}; the trajectories table has "
                        f"{', '.join(c for c in traj.columns if c not in ('run_id', 'step'))}")
    hue = _axis_of(r.sweep, r.x or "depth")
    facet = r.facet and _axis_of(r.sweep, r.facet, "facet")
    if facet == hue:
        raise PlotError(f"facet={facet!r}: already the axis of the lines (x)")
    if r.time == "rescaled" and "sigma0" not in r.sweep.axes:
        raise PlotError("time='rescaled': the rescaled time t / delta, delta = ln(1/sigma0), needs a sigma0 axis")
    chosen, heading = figure_slice(r.runs, r.sweep, (hue, facet) if facet else hue, r.title, r.folder)
    figure = plot.observables(traj[traj.run_id.isin(chosen.run_id)], chosen, columns, hue=hue, time=r.time or "step",
                              title=heading, facet=facet)
    return figure, "observables" + (f"-by-{facet}" if facet else "") + (f"-{r.time}-time" if r.time else "")


@figure_kind("pcs")
def _pcs(r: Request):
    from dlsweep import plot

    if not store.vector_columns(load_trajectories(r.folder), "pc_distance"):
        raise PlotError(f"{r.folder}: the pcs figure needs pc_distance columns (model linear_net)")
    hue = _axis_of(r.sweep, r.x or "depth")
    _, heading = figure_slice(r.runs[~r.runs.diverged], r.sweep, hue, r.title, r.folder)
    spread = only(pc_spread(r.folder), r.at)
    profile = first_slice(spread, [a for a in r.sweep.axes if a not in (hue, "seed")])
    return plot.pc_profile(profile, hue=hue, title=heading), "pcs"


@figure_kind("pc_curves")
def _pc_curves(r: Request):
    from dlsweep import plot

    rates = pc_rates(r.folder, r.at)
    depth, lr = rates.depth.min(), rates.lr.min()
    rates = rates[(rates.depth == depth) & (rates.lr == lr)].set_index("j")
    directions = [j for j in PC_CURVES if j in rates.index]
    chosen, heading = figure_slice(r.runs[~r.runs.diverged], r.sweep, None, r.title, r.folder)
    traj = load_trajectories(r.folder)
    spread = None
    if r.sweep.task.get("pc_weights"):      # the paper's own quantity, where recorded
        try:
            spread = first_slice(only(pc_weight_spread(r.folder), r.at), [a for a in r.sweep.axes if a != "seed"])
        except incremental.ThresholdError as err:
            warnings.warn(f"pc_curves: the std of w_j over the seeds is left out: {err}", DlsweepWarning, stacklevel=2)
    return plot.pc_curves(traj[traj.run_id.isin(chosen.run_id)], chosen, directions,
                          {j: np.exp(-rates.predicted[j]) for j in directions}, spread, title=heading), "pc_curves"


@figure_kind("gradient_scales")
def _gradient_scales(r: Request):
    from dlsweep import plot

    traj = load_trajectories(r.folder)
    if not store.vector_columns(traj, "a_diagonal_distance"):
        raise PlotError(f"{r.folder}: the gradient_scales figure needs [task] gradient_scales = true "
                        f"(model linear_net)")
    deepest = r.runs[~r.runs.diverged & (r.runs.depth == r.runs.depth.max())]     # a depth-1 run has A = B = I
    chosen, heading = figure_slice(deepest, r.sweep, None, r.title, r.folder)
    depth = int(chosen.depth.iloc[0])
    interior = list(range(2, depth))             # A_l and B_l both products of layers
    layers = sorted({interior[0], interior[-1]} if interior else {1, depth})
    return plot.gradient_scales(traj[traj.run_id.isin(chosen.run_id)], layers, title=heading), "gradient_scales"


@figure_kind("pc_rates")
def _pc_rates(r: Request):
    from dlsweep import plot

    chosen, heading = figure_slice(r.runs[~r.runs.diverged], r.sweep, "depth", r.title, r.folder)
    rates = pc_rates(r.folder, r.at).dropna(subset=["rate"])
    return plot.pc_rates(rates[rates.lr == chosen.lr.iloc[0]], title=heading), "pc_rates"


@figure_kind("summary")
def _summary(r: Request):
    from dlsweep import plot

    sweep = r.sweep
    column, hue = r.y or "population_error", r.color or ("shape" if "shape" in sweep.axes else "depth")
    if r.y is None and column not in r.runs:
        raise PlotError(f"{r.folder}: kind='summary' draws a runs column against an axis, by default population_error "
                        f"(a diagonal_net run's); this run has none: pick one with y=..., of "
                        f"{', '.join(_numeric_columns(r.runs, sweep))}")
    _numeric_column(r.runs, column, sweep, "y")
    _axis_of(sweep, hue, "color")
    frame = r.runs[~r.runs.diverged]
    across = r.x or "sigma0"
    if across == "c":
        frame = _with_c(frame, r.folder)
    else:
        _axis_of(sweep, across)
    frame, heading = figure_slice(frame, sweep, ("sigma0" if across == "c" else across, hue), r.title, r.folder)
    levels, curve = {}, None
    cs = np.geomspace(frame.c.min(), frame.c.max(), 49) if across == "c" else np.zeros(0)
    theory_of_c = _theory_of_c(sweep, column, cs)
    if theory_of_c is not None:
        values, rich, kernel = theory_of_c
        levels = {"min-l1 interpolator": rich, "min-l2 interpolator": kernel}
        curve = (cs, values, r"theory: argmin $Q_c$ (Theorem 1)") if across == "c" else None
    return plot.summary_lines(frame, across, column, hue, levels, curve, title=heading), f"summary-{column}-{across}"


@figure_kind("heatmap")
def _heatmap(r: Request):
    """A runs column's mean (`color` a column of the runs table), the thresholds over r x depth,
    or the phase diagram of `pair`."""
    if r.color is not None and r.color in r.runs.columns and r.color not in r.sweep.axes:
        return _column_heatmap(r)
    if (r.x, r.y) == ("r", "depth"):
        return _threshold_heatmap(r)
    return _phase_diagram(r)


def _column_heatmap(r: Request):
    from dlsweep import plot

    sweep = r.sweep
    x, y = _two_axes(sweep, r.x or "sigma0", r.y or ("shape" if "shape" in sweep.axes else "depth"))
    facet = r.facet and _axis_of(sweep, r.facet, "facet")
    if facet in (x, y):
        raise PlotError(f"facet={facet!r}: already the heatmap's {'x' if facet == x else 'y'} axis")
    _numeric_column(r.runs, r.color, sweep, "color")
    drawn = (x, y, facet) if facet else (x, y)
    frame, heading = figure_slice(r.runs[~r.runs.diverged], sweep, drawn, r.title, r.folder, seeds="mean over {} seeds")
    means = frame.groupby(list(drawn), as_index=False)[r.color].mean()
    panels = {value: frame[frame[facet] == value] for value in frame[facet].unique()} if facet else {None: frame}
    boundaries = {value: _q_boundary(sweep, frame["shape"].abs().max(), r.color) for value, rows in panels.items()
                  if (x, y) == ("sigma0", "shape") and "depth" in rows and (rows.depth == 2).all()}
    if facet:           # the panel a curve belongs to, in its legend entry
        boundaries = {value: (*curve[:2], f"{plot.facet_title(facet, value)}, {curve[2]}")
                      for value, curve in boundaries.items() if curve is not None}
    figure = plot.heatmap(means, x, y, r.color, title=heading, facet=facet, boundary=boundaries.get(None),
                          boundaries=boundaries)
    return figure, f"heatmap-{x}-{y}-{r.color}" + (f"-by-{facet}" if facet else "")


def _threshold_heatmap(r: Request):
    from dlsweep import plot

    table = thresholds_for(r.folder, r.s, r.f, "all", r.at).assign(
        log10_threshold_over_target=lambda t: np.log10(t.sigma0_th / t.sigma_star_j))
    table, heading = figure_slice(table[table.i == r.pair[0]], r.sweep, ("sigma0", "depth"),
                                  r.title or (rf"$\sigma_0$ threshold against $r = \sigma^*_i / \sigma^*_j$: "
                                              rf"$\sigma^*_i$ = {r.sigma_star[r.pair[0]]:g} against each smaller "
                                              rf"$\sigma^*_j$"),
                                  r.folder, levels=(r.s, r.f), seeds=None)
    return plot.heatmap(table, "r", "depth", r.color or "log10_threshold_over_target", title=heading), "heatmap-r-depth"


def _phase_diagram(r: Request):
    from dlsweep import plot

    sweep, pair, s, f = r.sweep, r.pair, r.s, r.f
    x, y = _two_axes(sweep, r.x or "sigma0", r.y or ("depth" if "depth" in sweep.axes else "lr"))
    incremental.check_levels(s, f, sweep.record.levels)
    frame = plot.decisions_frame(r.runs, pair, s, f)
    if r.color is not None and r.color not in frame:
        numeric = [c for c in frame.columns if frame[c].dtype.kind in "fi" and c not in sweep.axes]
        raise PlotError(f"color={r.color!r}: expected status or a numeric column: {', '.join(numeric)}")
    seeds = r.color is None and "seed" in sweep.axes and "seed" not in (x, y)    # colour: the share of seeds
    heading = f"pair ({pair[0]}, {pair[1]}): $\\sigma^*$ = {r.sigma_star[pair[0]]:g} vs {r.sigma_star[pair[1]]:g}"
    frame, heading = figure_slice(frame, sweep, (x, y), f"{r.title}\n{heading}" if r.title else heading, r.folder,
                                  levels=(s, f), seeds="share of {} seeds" if seeds else None)
    table = thresholds_for(r.folder, s, f, [pair], r.at)
    table = first_slice(table[(table.i == pair[0]) & (table.j == pair[1])],
                        [a for a in sweep.axes if a not in (x, y) and not (seeds and a == "seed")])
    if seeds:
        frame = incremental.over_seeds(frame, [x, y])
        table = incremental.thresholds_over_seeds(table, [y])
    figure = plot.heatmap(frame, x, y, "incremental_fraction" if seeds else r.color or "status",
                          thresholds=table if x == "sigma0" else None, title=heading)
    return figure, f"heatmap-{x}-{y}"


@figure_kind("thresholds")
def _thresholds(r: Request):
    """sigma0_th against r per depth, or (x an axis) against x, one line per value of `color`."""
    from dlsweep import plot

    if r.x not in (None, "r"):
        return _threshold_lines(r), f"thresholds-{r.x}-{r.color}"
    table, heading = figure_slice(thresholds_for(r.folder, r.s, r.f, None, r.at), r.sweep, ("sigma0", "depth"),
                                  r.title, r.folder)      # the figure's heading names (s, f)
    return plot.threshold_curves(_with_thresholds(table, r.folder), title=heading), "thresholds"


@figure_kind("lr")
def _lr(r: Request):
    from dlsweep import plot

    table = thresholds_for(r.folder, r.s, r.f, None, r.at)
    if not (table.depth == 2).any() or "lr" not in table or table.lr.nunique() < 2:
        raise PlotError(f"{r.folder}: the lr figure needs depth 2 and several learning rates")
    if "thm3_upper" not in table:
        raise PlotError(f"{r.folder}: the lr figure draws Theorem 3's bounds, which hold for gradient descent on "
                        f"the toy model's dynamics; this sweep's runs do not follow them (optimizer "
                        f"{r.sweep.optimizer.name!r}, model {r.sweep.model!r})")
    table, heading = figure_slice(table[table.depth == 2], r.sweep, ("sigma0", "lr", "depth"), r.title, r.folder,
                                  levels=(r.s, r.f))
    return plot.lr_map(_with_thresholds(table, r.folder), title=heading), "lr"


def _threshold_lines(r: Request):
    """The threshold sigma0_th of `pair` against the axis `x`, one line per value of `color` (an
    axis; default the last other one, seeds aside), mean and spread over seeds; against depth with
    the exact gradient-flow threshold (Gissin et al. Theorem 1 via `theory.log_gf_threshold`) where
    the optimizer's small steps follow gradient flow."""
    from dlsweep import plot
    from dlsweep.analysis import theory

    sweep, x, folder, pair, s, f = r.sweep, _axis_of(r.sweep, r.x), r.folder, r.pair, r.s, r.f
    others = [a for a in sweep.axes if a not in ("sigma0", x, "seed")]
    if r.color is None and not others:
        raise PlotError(f"{folder}: a thresholds figure against {x} draws one line per value of another axis "
                             f"(color=...), and the sweep has none but sigma0 and {x}")
    hue = _axis_of(sweep, r.color or others[-1], "color")
    table = thresholds_for(folder, s, f, [pair], r.at)
    table = _with_thresholds(table[(table.i == pair[0]) & (table.j == pair[1])], folder)
    table, heading = figure_slice(table, sweep, ("sigma0", x, hue), r.title, folder, levels=(s, f))
    targets = table.sigma_star_i.iloc[0], table.sigma_star_j.iloc[0]
    heading += f"\npair ({pair[0]}, {pair[1]}): $\\sigma^*$ = {targets[0]:g} vs {targets[1]:g}"
    curve = None
    if x == "depth" and sweep.optimizer.kind.flow_limit:
        depths = np.sort(table.depth.unique())
        curve = (depths, np.exp([theory.log_gf_threshold(*targets, s, f, float(n)) for n in depths]),
                 "gradient flow (exact)")
    return plot.summary_lines(table, x, "sigma0_th", hue, curve=curve, title=heading, log_y=True)


def _with_thresholds(table: pd.DataFrame, folder: Path) -> pd.DataFrame:
    """The rows of a thresholds table with a threshold (status ok), or a PlotError saying why
    there are none."""
    found = table[table.status == "ok"]
    if found.empty:
        statuses = ", ".join(f"{count} {status}" for status, count in table.status.value_counts().items())
        raise PlotError(f"{folder}: no threshold to draw ({statuses or 'no cells'})"
                             + "".join(f"; {note}" for note in [store.partial_note(folder)] if note))
    return found


def check_formats(formats) -> None:
    """A PlotError unless `formats` is a non-empty sequence of figure formats (png, pdf, svg)."""
    if isinstance(formats, str) or not formats or any(f not in FORMATS for f in formats):
        raise PlotError(f"formats={formats!r}: expected a list of {', '.join(FORMATS)}, e.g. ('png', 'pdf')")


def _save_figure(figure, defaults: list[Path], out: str | Path | None = None) -> list[Path]:
    """Write a figure to `out` (if given) and to its places in the run folder (one per format);
    the paths written, the run folder's first. Where the run folder cannot take it (read-only) and
    `out` can, that is a warning, not an error."""
    from dlsweep import plot

    paths, rendered = [], {}
    try:
        if out is not None:
            plot.save(figure, [Path(out)], keep_open=True, rendered=rendered)
            paths.append(Path(out))
        try:
            plot.save(figure, defaults, keep_open=True, rendered=rendered)
            paths[:0] = defaults
        except PlotError as err:
            if out is None:
                raise PlotError(f"{err}; give out=... to write the figure elsewhere") from None
            warnings.warn(f"{err}; the figure is only at {out}", DlsweepWarning, stacklevel=3)
    finally:
        plot.close(figure)
    return paths


def _two_axes(sweep: Sweep, x: str, y: str) -> tuple[str, str]:
    """Two different axes of the run, for a figure's x and y (or columns and rows)."""
    for option, axis in (("x", x), ("y", y)):
        if axis not in sweep.axes:
            raise PlotError(f"{option}={axis!r}: not an axis of this run ({', '.join(sweep.axes)})")
    if x == y:
        raise PlotError(f"x={x!r} and y={y!r}: a figure needs two different axes")
    return x, y


def _numeric_columns(runs: pd.DataFrame, sweep: Sweep) -> list[str]:
    """The runs table's float columns that are not axes (what a figure can colour or draw)."""
    return [c for c in runs.columns if runs[c].dtype.kind == "f" and c not in sweep.axes]


def _numeric_column(runs: pd.DataFrame, column: str, sweep: Sweep, option: str) -> None:
    """A PlotError naming the numeric runs columns unless `column` is one of them."""
    numeric = _numeric_columns(runs, sweep)
    if column not in numeric:
        raise PlotError(f"{option}={column!r}: expected a numeric column of the runs table: {', '.join(numeric)}")


def _with_c(runs: pd.DataFrame, folder: Path) -> pd.DataFrame:
    """The depth-2 runs with c = 2 sigma0 (1 + s^2)/(1 - s^2) (`theory.azulay_c`)."""
    from dlsweep.analysis import theory
    runs = runs[runs.depth == 2] if "depth" in runs else runs
    if runs.empty:
        raise PlotError(f"{folder}: x='c' is the init's c of a depth-2 network; the run has no depth 2")
    shape = runs["shape"].abs() if "shape" in runs else 0.0
    return runs.assign(c=theory.azulay_c(runs.sigma0.to_numpy(), shape))

BOUNDARY_C = np.geomspace(1e-10, 1e6, 49)      # where _q_boundary looks for c*


def _theory_of_c(sweep: Sweep, column: str, cs) -> tuple[np.ndarray, float, float] | None:
    """The family's theory of the runs column `column` against c (`Family.theory_of_c`: its
    values at `cs`, at the min-l1 and at the min-l2 interpolator) on the sweep's data, each seed's
    drawn as the run draws it, with its interpolators; None where the family has none."""
    curves = sweep.family.theory_of_c(sweep.task, column)
    if curves is None:
        return None
    program, task = draw_inputs(sweep)
    seeds = [compare.fit_interpolators(engine.draw_task(program, task, int(seed), sweep.seed))
             for seed in np.asarray(sweep.axes.get("seed", [0]))]
    return curves(program.model, seeds, cs)


def _q_boundary(sweep: Sweep, max_shape: float, column: str) -> tuple[np.ndarray, np.ndarray, str] | None:
    """Azulay's regime boundary on the (sigma0, shape) plane for a heatmap of `column`, from the
    theory alone (`_theory_of_c` over BOUNDARY_C): c* where the theory's `column` is halfway between
    its rich and kernel limits (interpolated in ln c), drawn as the curve sigma0 = c* (1 - s^2) /
    (2 (1 + s^2)) for s in [0, max_shape]. Returns (sigma0s, shapes, label), or None where the
    family has no theory of the column."""
    theory_of_c = _theory_of_c(sweep, column, BOUNDARY_C)
    if theory_of_c is None:
        return None
    values, rich, kernel = theory_of_c
    progress = np.maximum.accumulate((values - rich) / (kernel - rich))      # rich limit 0 .. kernel's 1
    c_star = float(np.exp(np.interp(0.5, progress, np.log(BOUNDARY_C))))
    shapes = np.linspace(0.0, max_shape, 200)
    return c_star * (1 - shapes**2) / (2 * (1 + shapes**2)), shapes, rf"theory: halfway, $c^*$ = {c_star:.2g}"


def _axis_of(sweep: Sweep, name: str, option: str = "x") -> str:
    """`name` if it is an axis of the sweep, else a PlotError naming the option and the axes."""
    if name not in sweep.axes:
        raise PlotError(f"{option}={name!r}: expected an axis of the sweep: {', '.join(sweep.axes)}")
    return name


def figure_slice(frame: pd.DataFrame, sweep: Sweep, drawn: str | tuple[str | None, ...] | None,
                 title: str | None, folder: Path, levels: tuple[float, float] | None = None,
                 seeds: str | None = "{} seeds", varied: tuple[str, ...] = ()) -> tuple[pd.DataFrame, str]:
    """The rows of a runs or derived table at the first value of every axis but those `drawn` and
    `seed` (and `seed` too where `seeds` is None), and the figure's heading, so that it stands
    alone: the `title` (if any), then what the figure holds fixed: those axes' values, the seeds
    (`seeds` with their count, where the figure takes all of them), steps, dtype and (s, f)
    (`levels`, where they matter); then "partial: x of y chunks" for a run folder not yet complete.
    The caption line (`sweep_caption`) leaves out the [task] keys `varied` across the panels."""
    from dlsweep.plot import facet_title

    drawn = drawn if isinstance(drawn, tuple) else (drawn,)
    others = [a for a in sweep.axes if a not in drawn and (a != "seed" or seeds is None)]
    chosen = first_slice(frame, others)
    if chosen.empty:
        raise PlotError(f"{folder}: every run diverged or was undecided; nothing to draw")
    fixed = [facet_title(a, chosen[a].iloc[0]) for a in others if a in chosen]
    if "seed" in sweep.axes and "seed" not in others and "seed" not in drawn and "seed" in chosen:
        count = chosen["seed"].nunique()       # the seeds the figure takes (one, where `at` picked it)
        fixed.append(seeds.format(count) if count > 1 else facet_title("seed", chosen["seed"].iloc[0]))
    fixed += [f"{sweep.steps:,} steps", sweep.dtype]
    if levels:
        fixed.append(f"(s, f) = ({levels[0]:g}, {levels[1]:g}): the hitting levels, as shares of $\\sigma^*$")
    lines = [title] if title else []
    return chosen, "\n".join([*lines, sweep_caption(sweep, varied), ", ".join(fixed),
                              *filter(None, [store.partial_note(folder)])])


TASK_SYMBOLS = {"sigma_star": r"$\sigma^*$"}
CAPTION_VALUES = 6       # a [task] list longer than this is summarized by its length in a caption


def sweep_caption(sweep: Sweep, varied: tuple[str, ...] = ()) -> str:
    """One line saying what a figure's runs are: the model, its [task] (the data: scalars, and
    lists up to `CAPTION_VALUES` long; but the keys `varied` across panels) and the grid, "toy,
    sigma* = (12, 6, 3); 486 runs: 54 sigma0 x 9 eta"."""
    from dlsweep.plot import facet_symbol

    def shown(value) -> str:
        if isinstance(value, (list, tuple)):
            return f"({', '.join(map(shown, value))})" if len(value) <= CAPTION_VALUES else f"{len(value)} values"
        return f"{value:.3g}" if isinstance(value, float) else str(value)

    task = [f"{TASK_SYMBOLS.get(key, key)} = {shown(value)}" for key, value in sweep.task.items()
            if isinstance(value, (bool, int, float, str, list, tuple)) and key not in varied]
    swept = [f"{len(values)} {'seeds' if axis == 'seed' else facet_symbol(axis)}" for axis, values in sweep.axes.items()
             if len(values) > 1]
    grid = f"{sweep.n_runs:,} run{'s' if sweep.n_runs != 1 else ''}" + (f": {' × '.join(swept)}" if swept else "")
    return f"{sweep.model}" + (f", {', '.join(task)}" if task else "") + f"; {grid}"


def _spread(values, count: int) -> list:
    """Up to `count` values spread evenly over the sorted unique values."""
    values = np.sort(np.unique(values))
    return list(values[np.unique(np.linspace(0, len(values) - 1, min(count, len(values))).round().astype(int))])
