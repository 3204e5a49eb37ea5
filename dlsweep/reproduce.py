"""The bundled reproductions: each paper figure as a sweep spec in `sweeps/`, the thresholds to
take from it and the figures to draw. `run(name)` does all three and reports where they are.

Each reproduction carries its wall time on the reference CPU (REFERENCE_CPU), measured with an
empty compile cache: `--quick` for every one, and full size where it was measured.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np

from dlsweep import api, compare, spec
from dlsweep.store import StoreError
from dlsweep.warning import DlsweepWarning

_PACKAGE = Path(__file__).resolve().parent
# the bundled sweep specs: sweeps/ beside the package in the repository (and an editable install),
# dlsweep/sweeps in an installed wheel (pyproject.toml ships them there)
SWEEPS = _PACKAGE / "sweeps" if (_PACKAGE / "sweeps").is_dir() else _PACKAGE.parent / "sweeps"
REFERENCE_CPU = "2-core AMD EPYC, no GPU"
NEEDS_BASELINE = ("agreement",)          # figure kinds that draw the comparator's column (`compare = true`)


_VALUES = {"kind": "trajectories", "x": "depth", "y": "sigma0"}    # the observed values over time


class Variant(NamedTuple):
    """One sweep of a reproduction made of several (e.g. with and without a bias)."""

    folder: str                                 # its sub-folder
    title: str
    overrides: tuple[str, ...] = ()             # --set overrides of the bundled sweep
    quick: tuple[str, ...] = ()                 # further ones of its small version (after the reproduction's)


@dataclasses.dataclass(frozen=True)
class Reproduction:
    name: str
    paper: str
    what: str
    quick: tuple[str, ...]                      # --set overrides of the small version
    thresholds: dict | None                     # api.thresholds arguments, or None
    figures: tuple[dict, ...]                   # api.plot_run arguments, one figure each
    variants: tuple[Variant, ...] = ()          # none: one sweep in the folder
    combined: tuple[str, tuple[tuple[str, tuple[str, ...]], ...]] | None = None   # (column, ((panel
    # title, its variants' sub-folders), ...)): one more figure with the variants side by side
    draw: Callable[[Path], list[Path]] | None = None    # a figure of the theory alone: no sweep is run
    quick_seconds: float | None = None          # wall time of `--quick` on REFERENCE_CPU (None: not measured)
    full_seconds: float | None = None           # ... at full size, one core (benchmarks/RESULTS.md; None: not measured)

    def timing(self) -> str:
        """The measured wall times, as --list prints them."""
        def shown(seconds: float | None) -> str:
            return "not measured" if seconds is None else f"{seconds:.0f} s"

        return f"time on {REFERENCE_CPU}: full size {shown(self.full_seconds)}, --quick {shown(self.quick_seconds)}"


FIG7_2_DIRECTION = np.array([0.6, 0.8])       # Azulay et al.'s w~0 / alpha in their Figure 7.2
FIG7_2_PANELS = ((2.0, 0.0), (2.0, 0.2), (2.0, 0.8), (0.01, 0.1), (1.0, 0.1), (2.5, 0.1))     # (alpha, s)


def _draw_fig7_2(folder: Path) -> list[Path]:
    """Azulay et al.'s Figure 7.2: Theorem 2's Q of one neuron in d = 2 from w~0 = alpha (0.6, 0.8),
    top alpha = 2 at s = 0, 0.2, 0.8, bottom s = 0.1 at alpha = 0.01, 1, 2.5."""
    from dlsweep import plot
    from dlsweep.analysis import theory

    panels = [(rf"$\alpha$ = {alpha:g}, $s$ = {s:g}", alpha * FIG7_2_DIRECTION, float(theory.neuron_delta(alpha, s)))
              for alpha, s in FIG7_2_PANELS]
    path = folder / "figures" / "neuron-q-contours.png"
    plot.save(plot.neuron_q_contours(panels), [path])
    return [path]


REPRODUCTIONS = {r.name: r for r in (
    Reproduction(
        "gissin-fig2", "Gissin et al. 2020, Figure 2",
        "toy-model dynamics sigma_i(t), N = 1..4 x sigma0 = 0.1, 0.001",
        ("steps=40000", "record.points=200"), None,
        ({"kind": "trajectories", "s": 0.05, "f": 0.95},),
        quick_seconds=4.1, full_seconds=3.3),
    Reproduction(
        "gissin-depth-separation", "Gissin et al. 2020, Theorem 2 (threshold vs r, N = 2..8)",
        "threshold against the target ratio r for each depth, with the exact GF curve and the Theorem 2 band",
        ("axes.depth=[2, 3, 5]", "task.sigma_star=[1.0, 0.5, 0.25, 0.1]", "steps=100000",
         "axes.sigma0={logspace = [-9, -1.5], num = 31}"),
        {"pairs": "first-vs-rest", "method": "bisect", "s": 0.05, "f": 0.95},
        ({"kind": "heatmap", "pair": (0, 3)}, {"kind": "heatmap", "x": "r", "y": "depth", "pair": (0, 1)},
         {"kind": "thresholds"}),
        quick_seconds=6.7, full_seconds=9.4),
    Reproduction(
        "gissin-gd", "Gissin et al. 2020, Theorem 3 (gradient descent, N = 2)",
        "threshold against the learning rate at N = 2, with Theorem 3's bounds and the GF limit",
        ("axes.lr={logspace = [-3.0791812460476247, -1.1760912590556813], num = 4}",
         "axes.sigma0={logspace = [-6, -0.7], num = 27}"),
        {"pairs": [(0, 1), (0, 2)], "method": "bisect", "s": 0.1, "f": 0.9},
        ({"kind": "lr", "s": 0.1, "f": 0.9}, {"kind": "heatmap", "x": "sigma0", "y": "lr", "s": 0.1, "f": 0.9}),
        quick_seconds=5.2, full_seconds=3.8),
    Reproduction(
        "gissin-fig1a", "Gissin et al. 2020, Figure 1a",
        "depth-4 matrix sensing: top-5 singular values against time, mean and spread over 3 seeds",
        ("task.d=10", "task.measurements=200", "steps=20000"), None, (_VALUES,),
        quick_seconds=9.2, full_seconds=13.5),
    Reproduction(
        "gissin-fig1b", "Gissin et al. 2020, Figure 1b",
        "quadratic network with a global bias: top-5 eigenvalues of W^T W against time, 3 seeds",
        ("steps=8000",), None, (_VALUES,),
        quick_seconds=5.9, full_seconds=2.7),
    Reproduction(
        "gissin-fig1c", "Gissin et al. 2020, Figure 1c",
        "depth-3 diagonal network, exponential loss: 5 largest |sigma_i| against time, 5 seeds",
        ("axes.seed=[0, 1, 2]",), None, (_VALUES,),
        quick_seconds=4.1, full_seconds=2.1),
    Reproduction(
        "gissin-fig1d", "Gissin et al. 2020, Figure 1d",
        "depth-3 circular-convolutional network: 5 largest Fourier amplitudes against time, 5 seeds",
        ("axes.seed=[0, 1, 2]", "task.examples=100", "task.d=50"), None, (_VALUES,),
        quick_seconds=5.0, full_seconds=2.6),
    Reproduction(
        "gissin-fig3", "Gissin et al. 2020, Figure 3",
        "depth-5 signed toy model against orthogonal matching pursuit: agreement of the first s chosen "
        "features, s = 1..25, 100 seeds",
        ("task.d=200", "task.examples=40", "axes.sparsity={linspace = [1, 10], num = 10}",
         "axes.seed={linspace = [0, 9], num = 10}", "steps=30000"), None,
        ({"kind": "agreement"}, {"kind": "trajectories", "x": "sparsity", "y": "sigma0"}),
        quick_seconds=10.9, full_seconds=None),
    Reproduction(
        "gissin-fig4", "Gissin et al. 2020, Figure 4",
        "matrix sensing at depths 1-4: top-5 singular values against time, 1000 and 300 measurements",
        ("task.d=20", "steps=40000"), None, (_VALUES,),
        variants=(Variant("many-measurements", "1000 measurements"),
                  Variant("few-measurements", "300 measurements", ("task.measurements=300",))),
        quick_seconds=46.5, full_seconds=38.9),
    Reproduction(
        "gissin-fig5", "Gissin et al. 2020, Figure 5",
        "quadratic network without / with a global bias, large / small data: top-5 eigenvalues, 3 seeds",
        ("steps=5000",), None, (_VALUES,),
        variants=tuple(Variant(f"{bias}-{size}", f"{'with' if flag == 'true' else 'without'} a global bias, {n} examples",
                               (f"task.bias={flag}", f"task.examples={n}"))
                       for bias, flag in (("no-bias", "false"), ("bias", "true"))
                       for size, n in (("large-data", 1000), ("small-data", 100))),
        quick_seconds=17.4, full_seconds=9.4),
    Reproduction(
        "gissin-fig6", "Gissin et al. 2020, Figure 6",
        "diagonal classifiers of depth 1-5, 100 seeds: correlation with w* against depth (and the SVM's); "
        "5 largest |sigma_i| over time",
        ("axes.seed=[0, 1, 2, 3, 4]", "axes.sigma0=[0.1, 0.001]"), None,
        ({"kind": "correlation"}, _VALUES),
        quick_seconds=7.0, full_seconds=13.4),
    Reproduction(
        "gissin-fig7", "Gissin et al. 2020, Figure 7",
        "circular-convolutional classifiers of depth 1-3, 9 seeds: correlation with w* (and the SVM's); "
        "5 largest Fourier amplitudes over time",
        ("axes.seed=[0, 1, 2]", "steps=20000", "task.d=50", "task.examples=100"), None,
        ({"kind": "correlation"}, _VALUES),
        quick_seconds=6.9, full_seconds=5.1),
    Reproduction(
        "gidel-fig1", "Gidel et al. 2019, Figure 1",
        "linear model vs two-layer network on Sigma_xy = diag(0.1, 0.01, 0.001): ||W||_F^2 rises in one "
        "step per component at delta / sigma_i for depth 2, at once for depth 1",
        ("steps=40000", "task.w_true=[0.1, 0.01]", "axes.sigma0=[2.061153622438558e-09, 4.5399929762484854e-05]"),
        None, ({"kind": "observables", "y": "norm_squared,nuclear_norm"}, _VALUES),
        quick_seconds=4.7, full_seconds=3.9),
    Reproduction(
        "gidel-fig2", "Gidel et al. 2019, Figure 2",
        "linear autoencoder, depth 1 vs 2: trace norm and reconstruction error against the step, 3 seeds",
        ("steps=10000", "task.examples=300", "task.d=10"), None, ({"kind": "observables"}, _VALUES),
        quick_seconds=10.0, full_seconds=5.4),
    Reproduction(
        "hacohen-fig2", "Hacohen & Weinshall, Figure 2 (left)",
        "one-layer linear networks on the 8x8 digits, 10 seeds: distance to the optimum along 6 principal "
        "directions against the step, beside eq. 10's |1 - lr lambda_j|^s",
        ("steps=600", "axes.seed=[0, 1, 2]"), None, ({"kind": "pc_curves"},),
        quick_seconds=5.2, full_seconds=5.3),
    Reproduction(
        "hacohen-fig4", "Hacohen & Weinshall, Figures 2, 4a and 4c",
        "deep linear networks (depths 1, 2, 5) on the 8x8 digits, 10 seeds: distance to the optimum along "
        "each principal direction (mean and std over seeds) and its convergence rate against the eigenvalue, "
        "with the predicted rate; natural and ZCA-whitened data",
        ("steps=600", "task.width=32", "axes.seed=[0, 1, 2]", "record.points=40"), None,
        ({"kind": "pcs"}, {"kind": "pc_rates"}),
        variants=(Variant("natural", "natural digits"), Variant("whitened", "ZCA-whitened digits", ("task.whiten=true",))),
        quick_seconds=12.4, full_seconds=50.1),
    Reproduction(
        "hacohen-fig10", "Hacohen & Weinshall, Figure 10",
        "two-layer linear networks on 48 of the 8x8 digits, 10 seeds: excess loss with real and shuffled "
        "labels, before and after ZCA whitening (shuffled labels learn slower unless the data is whitened)",
        ("steps=1000", "task.width=32", "axes.seed=[0, 1, 2]"), None, (),
        variants=tuple(Variant(f"{data}-{labels}", f"{labels} labels", overrides)
                       for data, whiten in (("natural", "false"), ("whitened", "true"))
                       for labels, overrides in (("real", (f"task.whiten={whiten}",)),
                                                 ("shuffled", (f"task.whiten={whiten}", "task.shuffle=true")))),
        combined=("excess_loss", (("natural digits", ("natural-real", "natural-shuffled")),
                                  ("ZCA-whitened digits", ("whitened-real", "whitened-shuffled")))),
        quick_seconds=19.8, full_seconds=8.0),
    Reproduction(
        "linear-net-phase", "Beyond the papers, deep linear networks",
        "phase diagram over depth (1-5) x sigma0 of (0.05, 0.95)-incremental learning of W* = diag(1, 0.5, "
        "0.25) on Sigma_x = I: the aligned init on the toy model's exact gradient-flow curve, and small "
        "Gaussian layers, 8 seeds (the share of seeds and the median threshold)",
        ("steps=20000", "axes.depth=[1, 2, 3, 4]", "axes.sigma0={logspace = [-6, -0.5], num = 12}",
         "task.width=6", "record.points=30"),
        {"pairs": "adjacent", "method": "grid", "s": 0.05, "f": 0.95},
        ({"kind": "heatmap"}, {"kind": "trajectories", "x": "depth", "y": "sigma0"}),
        variants=(Variant("aligned", "aligned init"),
                  Variant("gaussian", "Gaussian init", ("task.init=gaussian", "axes.seed=[0, 1, 2, 3, 4, 5, 6, 7]"),
                          quick=("axes.seed=[0, 1, 2]",))),
        quick_seconds=33.4, full_seconds=81.3),
    Reproduction(
        "toy-momentum", "Beyond the papers, momentum",
        "the toy model trained by heavy-ball momentum beta = 0, 0.5, 0.9, 0.99 at eta = 1e-3 and 1e-2, depths 2-6: "
        "the (0.05, 0.95) threshold of the two largest targets against depth, beside gradient flow's",
        ("steps=100000", "axes.depth=[2, 3, 4]", "axes.sigma0={logspace = [-5, -0.5], num = 14}",
         "axes.momentum=[0.0, 0.9]", "record.points=30"),
        {"pairs": "adjacent", "method": "grid", "s": 0.05, "f": 0.95},
        ({"kind": "thresholds", "x": "depth", "color": "momentum"},
         {"kind": "thresholds", "x": "depth", "color": "momentum", "at": {"lr": 0.01}},
         {"kind": "heatmap", "x": "sigma0", "y": "momentum", "at": {"depth": 4}}),
        quick_seconds=4.5, full_seconds=4.3),
    Reproduction(
        "azulay-fig7-1", "Azulay et al. 2021, Figure 7.1 (section 9)",
        "two-layer diagonal networks on 5-sparse regression: population error against the init scale, one "
        "curve per shape s = 0, 0.5, 0.7, 0.9, 0.99, beside the min-l1 / min-l2 interpolators; the same "
        "runs against c = 2 alpha (1 + s^2)/(1 - s^2), where the shapes collapse onto one curve",
        ("task.d=200", "task.examples=40", "axes.sigma0={logspace = [-4, -0.6], num = 8}", "axes.lr=[2e-3]",
         "steps=60000"), None,
        ({"kind": "summary"}, {"kind": "summary", "x": "c"},
         {"kind": "heatmap", "color": "l1_l2_position"}),
        quick_seconds=6.4, full_seconds=53.5),
    Reproduction(
        "azulay-fig7-2", "Azulay et al. 2021, Figure 7.2",
        "contours of Theorem 2's Q for one neuron in d = 2 from w~0 = alpha (0.6, 0.8): alpha = 2 at s = 0, 0.2, "
        "0.8 and s = 0.1 at alpha = 0.01, 1, 2.5 (small scale: ~ ||w~||^(3/2); large scale or s -> 1: ellipses "
        "centred at w~0); theory only, no sweep", (), None, (), draw=_draw_fig7_2,
        quick_seconds=2.3, full_seconds=2.3),
    Reproduction(
        "azulay-phase", "Beyond the paper: the scale x shape plane of diagonal networks",
        "population error and the position between the min-l1 and min-l2 interpolators over log init scale x "
        "shape, for depths 2, 3 and 4 in one program; at depth 2 with Theorem 1's boundary (argmin Q_c halfway)",
        ("steps=50000", "axes.sigma0={logspace = [-3, -0.7], num = 5}", "axes.shape=[0.0, 0.7, 0.99]",
         "axes.seed=[0]"), None,
        tuple({"kind": "heatmap", "color": color, "at": {"depth": depth}}
              for color, depth in (("population_error", 2), ("l1_l2_position", 2), ("population_error", 3),
                                   ("population_error", 4))),
        quick_seconds=7.4, full_seconds=53.2),
)}


@dataclasses.dataclass(frozen=True)
class Reproduced:
    name: str
    folder: Path                  # the run folder; with variants, the folder of their run folders
    thresholds: Path | None
    figures: list[Path]
    runs: tuple[api.RunReport, ...] = ()     # each sweep's run: its compile and run (chunks and writing) seconds


def spec_path(name: str) -> Path:
    path = SWEEPS / f"{name}.toml"
    if not path.exists():
        raise StoreError(f"{path}: the bundled sweep of {name!r} is missing (run from a dlsweep checkout)")
    return path


def run(name: str, quick: bool = False, out_root: str | Path = "runs", progress_bar: bool | None = None) -> Reproduced:
    """Run a bundled reproduction (its sweep, thresholds and figures) into `out_root/<name>[-quick]`
    (each variant in a sub-folder of its own). Where its sweep compares with a baseline that
    needs scikit-learn and that is not installed, the comparison column (and a figure that draws
    it) is left out, with one DlsweepWarning saying so."""
    if name not in REPRODUCTIONS:
        raise StoreError(f"unknown reproduction {name!r}; known: {', '.join(REPRODUCTIONS)}")
    repro = REPRODUCTIONS[name]
    folder = Path(out_root) / (f"{name}-quick" if quick else name)
    if repro.draw is not None:
        return Reproduced(name, folder, None, repro.draw(folder))
    table_path, figures, reports = None, [], []
    for variant in repro.variants or (Variant("", ""),):
        run_folder = folder / variant.folder if variant.folder else folder
        overrides = [*(repro.quick if quick else ()), *variant.overrides, *(variant.quick if quick else ()),
                     f"name={folder.name}{'-' + variant.folder if variant.folder else ''}"]
        missing = _missing_baseline(name, overrides)
        if missing:
            overrides.append("compare=false")
        reports.append(api.run(spec_path(name), out=run_folder, overrides=overrides, progress_bar=progress_bar))
        table_path, variant_figures = _analyse(repro, run_folder, variant.title and f"{repro.paper}: {variant.title}" or None,
                                               skip=NEEDS_BASELINE if missing else ())
        figures += variant_figures
    if missing:
        skipped = [f["kind"] for f in repro.figures if f["kind"] in NEEDS_BASELINE]
        warnings.warn(f"{name}: {missing} is not installed, so the runs have no comparison with the paper's baseline"
                      f"{' and the ' + ', '.join(skipped) + ' figure is left out' if skipped else ''}; "
                      f"{compare.INSTALL} (or bash scripts/setup.sh .venv compare) adds it", DlsweepWarning, stacklevel=2)
    if repro.combined:
        figures.append(_combined_figure(repro, folder))
    return Reproduced(name, folder, table_path, figures, tuple(reports))


def _missing_baseline(name: str, overrides: list[str]) -> str | None:
    """The package that the comparison of the reproduction's sweep needs (`compare = true`) and
    that is not installed, or None."""
    sweep = spec.load(spec_path(name), overrides)
    baseline = sweep.family.baseline(sweep.task) if sweep.compare else None
    if baseline is None or compare.available(baseline.requires):
        return None
    return {"sklearn": "scikit-learn"}.get(baseline.requires, baseline.requires)


def _combined_figure(repro: Reproduction, folder: Path) -> Path:
    """The variants' `column` side by side (`Reproduction.combined`), in `folder/figures/`, under
    the paper and the settings of the first variant (the variants differ only in their data)."""
    from dlsweep import plot

    column, groups = repro.combined
    titles = {variant.folder: variant.title for variant in repro.variants}
    panels = [(panel, [(titles[sub], api.load_trajectories(folder / sub)) for sub in subs]) for panel, subs in groups]
    first = folder / repro.variants[0].folder
    sweep = spec.load(first / "sweep.toml")
    _, heading = api.figure_slice(api.load(first), sweep, None, repro.paper, first)
    path = folder / "figures" / f"{column}-variants.png"
    plot.save(plot.variant_curves(panels, column, title=heading), [path])
    return path


def _analyse(repro: Reproduction, folder: Path, title: str | None = None,
             skip: tuple[str, ...] = ()) -> tuple[Path | None, list[Path]]:
    """The thresholds and figures of one run folder of a reproduction, each under `title`, but for
    figures of the kinds in `skip`."""
    table_path = None
    s, f = 0.05, 0.95
    if repro.thresholds:
        args = dict(repro.thresholds)
        if args["pairs"] == "first-vs-rest":
            k = len(spec.load(folder / "sweep.toml").task["sigma_star"])
            args["pairs"] = [(0, j) for j in range(1, k)]
        api.thresholds(folder, **args)
        table_path = folder / api.THRESHOLDS_FILE
        s, f = args["s"], args["f"]
    figures = []
    for figure in repro.figures:
        if figure["kind"] not in skip:
            figures += api.plot_run(folder, **({"s": s, "f": f} | figure | {"title": title}))[:1]
    return table_path, figures
