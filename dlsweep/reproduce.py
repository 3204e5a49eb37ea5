"""The bundled reproductions: each paper figure as a sweep spec in `sweeps/`, the thresholds to
take from it and the figures to draw. `run(name)` does all three and reports where they are.

Each reproduction carries its wall times on the CPU they were measured on (`measured_on`), with an
empty compile cache: `--quick` (`dlsweep reproduce NAME --quick`, both cores) and full size (the
cold end-to-end column of the one-core reproductions table in benchmarks/RESULTS.md).
"""

from __future__ import annotations

import dataclasses
import string
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from dlsweep import api, compare, gallery, spec
from dlsweep.drawing import check_formats
from dlsweep.store import StoreError
from dlsweep.warning import DlsweepWarning

_PACKAGE = Path(__file__).resolve().parent
# the bundled sweep specs: sweeps/ beside the package in the repository (and an editable install),
# dlsweep/sweeps in an installed wheel (pyproject.toml ships them there)
SWEEPS = _PACKAGE / "sweeps" if (_PACKAGE / "sweeps").is_dir() else _PACKAGE.parent / "sweeps"
REFERENCE_CPU = "2-core AMD EPYC, no GPU"                  # where gissin-fig3 was measured
XEON_CPU = "2-core Intel Xeon at 2.6-2.8 GHz (L2 2 MiB), no GPU"   # where every other one was
TIMES = ("times: full size in a process already running (one core, benchmarks/RESULTS.md); --quick as "
         "`dlsweep reproduce NAME --quick` (both cores), a fresh process whose start-up (about 2 s) is included")
NEEDS_BASELINE = ("agreement",)          # figure kinds that draw the comparator's column (`compare = true`)


_VALUES = {"kind": "trajectories", "x": "depth", "y": "sigma0"}    # the observed values over time
VALUES = "values"      # `Reproduction.combined`'s column for the observed values (sigma_i) of every variant
PANELS = "panels"      # ... for one panel per variant: the observed values of its first run
LEARNING_ORDER = "learning_order"   # ... for each variant's learning-order consistency (`api.learning_order`)


class Variant(NamedTuple):
    """One sweep of a reproduction made of several (e.g. with and without a bias)."""

    folder: str                                 # its sub-folder
    title: str
    overrides: tuple[str, ...] = ()             # --set overrides of the bundled sweep
    quick: tuple[str, ...] = ()                 # further ones of its small version (after the reproduction's)
    spec: str = ""                              # the bundled sweep it runs (default: the reproduction's own)


@dataclasses.dataclass(frozen=True)
class Reproduction:
    name: str
    paper: str
    what: str
    quick: tuple[str, ...]                      # --set overrides of the small version
    thresholds: dict | None                     # api.thresholds arguments, or None
    figures: tuple[dict, ...]                   # api.plot_run arguments, one figure each
    variants: tuple[Variant, ...] = ()          # none: one sweep in the folder
    combined: tuple[str | tuple[str, ...], tuple[tuple[str, tuple[str, ...]], ...]] | None = None   # (column or
    # columns (a row each), ((panel title, its variants' sub-folders), ...)): one more figure with the variants
    # side by side
    draw: Callable[[Path, tuple[str, ...]], list[Path]] | None = None    # a figure of the theory alone (no sweep)
    quick_seconds: float | None = None          # wall time of `--quick` on `measured_on` (None: not measured)
    full_seconds: float | None = None           # ... at full size, one core (benchmarks/RESULTS.md; None: not measured)
    verdict: str = ""                           # the gallery's "what matches and what differs" beside the paper
    measured_on: str = REFERENCE_CPU            # the CPU of quick_seconds and full_seconds

    def timing(self) -> str:
        """The measured wall times, as --list prints them."""
        def shown(seconds: float | None) -> str:
            return "not measured" if seconds is None else f"{seconds:.0f} s"

        return f"time on {self.measured_on}: full size {shown(self.full_seconds)}, --quick {shown(self.quick_seconds)}"


FIG7_2_DIRECTION = np.array([0.6, 0.8])       # Azulay et al.'s w~0 / alpha in their Figure 7.2
FIG7_2_PANELS = ((2.0, 0.0), (2.0, 0.2), (2.0, 0.8), (0.01, 0.1), (1.0, 0.1), (2.5, 0.1))     # (alpha, s)


def _draw_fig7_2(folder: Path, formats: tuple[str, ...] = ("png",)) -> list[Path]:
    """Azulay et al.'s Figure 7.2: Theorem 2's Q of one neuron in d = 2 from w~0 = alpha (0.6, 0.8),
    top alpha = 2 at s = 0, 0.2, 0.8, bottom s = 0.1 at alpha = 0.01, 1, 2.5."""
    from dlsweep import plot
    from dlsweep.analysis import theory

    panels = [(rf"$\alpha$ = {alpha:g}, $s$ = {s:g}", alpha * FIG7_2_DIRECTION, float(theory.neuron_delta(alpha, s)))
              for alpha, s in FIG7_2_PANELS]
    paths = [folder / "figures" / f"neuron-q-contours.{suffix}" for suffix in formats]
    plot.save(plot.neuron_q_contours(panels), paths)
    return paths


REPRODUCTIONS = {r.name: r for r in (
    Reproduction(
        "gissin-fig2", "Gissin et al. 2020, Figure 2",
        "toy-model dynamics sigma_i(t), N = 1..4 x sigma0 = 0.1, 0.001",
        ("steps=40000", "record.points=200"), None,
        ({"kind": "trajectories", "s": 0.05, "f": 0.95},),
        verdict=("Same panels (N = 1-4 by sigma0 = 0.001, 0.1) and result: at the small scale N >= 2 learns the "
                 "values one at a time, N = 1 together; at 0.1 the phases overlap. Time is eta x step on a log "
                 "axis."),
        quick_seconds=5.0, full_seconds=2.4, measured_on=XEON_CPU),
    Reproduction(
        "gissin-depth-separation", "Gissin et al. 2020, Theorem 2 (threshold vs r, N = 2..8)",
        "threshold against the target ratio r for each depth, with the exact GF curve and the Theorem 2 band",
        ("axes.depth=[2, 3, 5]", "task.sigma_star=[1.0, 0.5, 0.25, 0.1]", "steps=100000",
         "axes.sigma0={logspace = [-9, -1.5], num = 31}"),
        {"pairs": "first-vs-rest", "method": "bisect", "s": 0.05, "f": 0.95},
        ({"kind": "heatmap", "pair": (0, 3)}, {"kind": "heatmap", "x": "r", "y": "depth", "pair": (0, 1)},
         {"kind": "thresholds"}),
        verdict=("No single figure in the paper: its Theorem 2, checked. The measured thresholds (dots) lie on the "
                 "exact gradient-flow curves inside the Theorem 2 bands for N = 2-8: exponential in 1/(r - 1) at N "
                 "= 2, polynomial for N >= 3."),
        quick_seconds=4.5, full_seconds=5.3, measured_on=XEON_CPU),
    Reproduction(
        "gissin-gd", "Gissin et al. 2020, Theorem 3 (gradient descent, N = 2)",
        "threshold against the learning rate at N = 2, with Theorem 3's bounds and the GF limit; how incremental "
        "each run is (log of the ratio of the hitting steps) over sigma0 x lr",
        ("axes.lr={logspace = [-3.0791812460476247, -1.1760912590556813], num = 4}",
         "axes.sigma0={logspace = [-6, -0.7], num = 27}"),
        {"pairs": [(0, 1), (0, 2)], "method": "bisect", "s": 0.1, "f": 0.9},
        ({"kind": "lr", "s": 0.1, "f": 0.9},
         {"kind": "heatmap", "x": "sigma0", "y": "lr", "color": "log_hit_ratio", "s": 0.1, "f": 0.9}),
        verdict=("Theorem 3, checked: at N = 2 the gradient-descent threshold is flat in eta (8e-4 to 6e-2) and "
                 "equals gradient flow's, inside Theorem 3's band where the theorem holds (c < 2(sqrt 2 - 1)). The "
                 "heatmap colours how incremental each run is (log ratio of the hitting steps)."),
        quick_seconds=3.7, full_seconds=1.9, measured_on=XEON_CPU),
    Reproduction(
        "gissin-fig1a", "Gissin et al. 2020, Figure 1a",
        "depth-4 matrix sensing: top-5 singular values against time, mean and spread over 3 seeds",
        ("task.d=10", "task.measurements=200", "steps=20000"), None, (_VALUES,),
        verdict=("Panel (a) of Figure 1 with 3 seeds (mean and spread); gissin-fig1 draws one network, as the "
                 "paper does."),
        quick_seconds=9.0, full_seconds=25.1, measured_on=XEON_CPU),
    Reproduction(
        "gissin-fig1b", "Gissin et al. 2020, Figure 1b",
        "quadratic network with a global bias: top-5 eigenvalues of W^T W against time, 3 seeds",
        ("steps=8000",), None, (_VALUES,),
        verdict=("Panel (b) of Figure 1 with 3 seeds (mean and spread); gissin-fig1 draws one network, as the "
                 "paper does."),
        quick_seconds=3.9, full_seconds=2.1, measured_on=XEON_CPU),
    Reproduction(
        "gissin-fig1c", "Gissin et al. 2020, Figure 1c",
        "depth-3 diagonal network, exponential loss: 5 largest |sigma_i| against time, 5 seeds",
        ("axes.seed=[0, 1, 2]",), None, (_VALUES,),
        verdict=("Panel (c) of Figure 1 with 5 seeds (mean and spread); gissin-fig1 draws one network, as the "
                 "paper does."),
        quick_seconds=3.8, full_seconds=1.7, measured_on=XEON_CPU),
    Reproduction(
        "gissin-fig1d", "Gissin et al. 2020, Figure 1d",
        "depth-3 circular-convolutional network: 5 largest Fourier amplitudes against time, 5 seeds",
        ("axes.seed=[0, 1, 2]", "task.examples=100", "task.d=50"), None, (_VALUES,),
        verdict=("Panel (d) of Figure 1 with 5 seeds (mean and spread); gissin-fig1 draws one network, as the "
                 "paper does."),
        quick_seconds=5.5, full_seconds=2.4, measured_on=XEON_CPU),
    Reproduction(
        "gissin-fig1", "Gissin et al. 2020, Figure 1",
        "the four panels in one figure, one network each: (a) depth-4 matrix sensing, (b) quadratic network, "
        "(c) depth-3 diagonal network, (d) depth-3 circular-convolutional network; their top values against time",
        (), None, (),
        variants=(Variant("a-matrix-sensing", "depth-4 matrix sensing", ("axes.seed=[0]",),
                          ("task.d=10", "task.measurements=200", "steps=20000"), spec="gissin-fig1a"),
                  Variant("b-quadratic", "quadratic network", ("axes.seed=[0]",), ("steps=8000",), spec="gissin-fig1b"),
                  Variant("c-diagonal", "depth-3 diagonal network", ("axes.seed=[0]",), spec="gissin-fig1c"),
                  Variant("d-convolutional", "depth-3 convolutional network", ("axes.seed=[0]",),
                          ("task.examples=100", "task.d=50"), spec="gissin-fig1d")),
        combined=(PANELS, ()),
        verdict=("Same four panels, one network each, and the same result: every model learns its largest values "
                 "first, one at a time. The paper's models and sizes; our random draws differ from the paper's, so "
                 "the curves do not coincide."),
        quick_seconds=12.6, full_seconds=15.0, measured_on=XEON_CPU),
    Reproduction(
        "gissin-fig3", "Gissin et al. 2020, Figure 3",
        "depth-5 signed toy model against orthogonal matching pursuit: agreement of the first s chosen "
        "features, s = 1..25, 100 seeds",
        ("task.d=200", "task.examples=40", "axes.sparsity={linspace = [1, 10], num = 10}",
         "axes.seed={linspace = [0, 9], num = 10}", "steps=30000"), None,
        ({"kind": "agreement"}, {"kind": "trajectories", "x": "sparsity", "y": "sigma0"}),
        verdict=("Same axes, sizes (1000 atoms in 80 dimensions, 100 draws per sparsity) and result: the "
                 "depth-5 model chooses the features orthogonal matching pursuit chooses first (agreement 1 up "
                 "to s = 4), the agreement falling as s grows (0.76 at s = 10, 0.38 at 25), mean and std over the "
                 "100 draws. The second figure adds the 5 largest |sigma_i| against time per sparsity. The "
                 "longest reproduction: 27 minutes on the AMD EPYC, 52 on this Xeon."),
        quick_seconds=10.9, full_seconds=1603.6),
    Reproduction(
        "gissin-fig4", "Gissin et al. 2020, Figure 4",
        "matrix sensing at depths 1-4: top-5 singular values against time, 1000 and 300 measurements",
        ("task.d=20", "steps=40000"), None, (),
        variants=(Variant("many-measurements", "1000 measurements"),
                  Variant("few-measurements", "300 measurements", ("task.measurements=300",))),
        combined=(VALUES, (("", ("many-measurements", "few-measurements")),)),
        verdict=("Same grid (rows: 1000 / 300 measurements; columns: depth 1-4) and result: depth 1 learns every "
                 "value together and ends with a nonzero 5th (recovery fails), deeper models learn one value at a "
                 "time; with 300 measurements depths 2 and 3 fail too, and at depth 4 the active values readjust "
                 "at each new phase. Runs stop at loss 1e-4, the last phase not always complete."),
        quick_seconds=10.0, full_seconds=78.5, measured_on=XEON_CPU),
    Reproduction(
        "gissin-fig5", "Gissin et al. 2020, Figure 5",
        "quadratic network without / with a global bias, large / small data: top-5 eigenvalues, 3 seeds",
        ("steps=5000",), None, (),
        variants=tuple(Variant(f"{bias}-{size}", f"{'with' if flag == 'true' else 'without'} a global bias, {n} examples",
                               (f"task.bias={flag}", f"task.examples={n}"))
                       for bias, flag in (("no-bias", "false"), ("bias", "true"))
                       for size, n in (("large-data", 1000), ("small-data", 100))),
        combined=(VALUES, (("without a bias", ("no-bias-large-data", "no-bias-small-data")),
                           ("with a global bias", ("bias-large-data", "bias-small-data")))),
        verdict=("Same grid (rows: without / with the global bias; columns: 1000 / 100 examples) and result: "
                 "without the bias the values rise together (the 5th overshoots with 1000 examples, stays nonzero "
                 "with 100); with the bias they are learned one at a time and the 5th stays at 0."),
        quick_seconds=8.8, full_seconds=11.0, measured_on=XEON_CPU),
    Reproduction(
        "gissin-fig6", "Gissin et al. 2020, Figure 6",
        "diagonal classifiers of depth 1-5, 100 seeds: correlation with w* against depth (and the SVM's); "
        "5 largest |sigma_i| over time, one network per depth at sigma0 = 0.001",
        ("axes.seed=[0, 1, 2, 3, 4]", "axes.sigma0=[0.1, 0.001]"), None,
        ({"kind": "correlation"}, {"kind": "trajectories", "x": "depth", "at": {"sigma0": 0.001, "seed": 0}}),
        verdict=("Both parts. Left: depth 1 sits at the max-margin SVM's correlation, depth >= 2 near 1, higher at "
                 "smaller sigma0 (mean and std over 100 seeds). Right: one network per depth at sigma0 = 0.001, "
                 "the values learned one at a time from N = 3."),
        quick_seconds=5.8, full_seconds=12.7, measured_on=XEON_CPU),
    Reproduction(
        "gissin-fig7", "Gissin et al. 2020, Figure 7",
        "circular-convolutional classifiers of depth 1-3, 9 seeds: correlation with w* (and the SVM's); "
        "5 largest Fourier amplitudes over time, one network per depth",
        ("axes.seed=[0, 1, 2]", "steps=20000", "task.d=50", "task.examples=100"), None,
        ({"kind": "correlation"}, {"kind": "trajectories", "x": "depth", "at": {"seed": 0}}),
        verdict=("As Figure 6 for the convolutional network (9 seeds): depth 1 near the SVM, depths 2 and 3 near "
                 "1; one network per depth over time, incremental at N = 3. The paper sweeps more init scales in "
                 "its left panel; this sweep has one."),
        quick_seconds=5.8, full_seconds=4.7, measured_on=XEON_CPU),
    Reproduction(
        "gidel-fig1", "Gidel et al. 2019, Figure 1",
        "linear model vs two-layer network on Sigma_xy = diag(0.1, 0.01, 0.001), W(0) = e^-delta I: ||W||_F^2 "
        "against the rescaled time t / delta for delta = 10, 20, 40 (one step per component at depth 2, a smooth "
        "rise at depth 1), and ||W||_F^2 and the trace norm against the step",
        ("steps=40000", "task.w_true=[0.1, 0.01]", "axes.sigma0=[2.061153622438558e-09, 4.5399929762484854e-05]"),
        None, ({"kind": "observables", "y": "norm_squared", "x": "sigma0", "facet": "depth", "time": "rescaled"},
               {"kind": "observables", "y": "norm_squared,nuclear_norm"}, _VALUES),
        verdict=("Same axes and result: ||W||_F^2 against the rescaled time t / delta, a line per delta = 10, 20, "
                 "40, the linear model beside the two-layer network. The two-layer curves collapse onto one step "
                 "at t / delta ~ 5 (sigma_1 = 0.1) as delta grows; the linear model's rise moves towards t / delta "
                 "= 0. The later components add sigma_i^2 = 1e-4 and 1e-6, too little to see here: the second "
                 "figure's trace norm shows their steps."),
        quick_seconds=5.8, full_seconds=5.0, measured_on=XEON_CPU),
    Reproduction(
        "gidel-fig2", "Gidel et al. 2019, Figure 2",
        "linear autoencoder, depth 1 vs 2: trace norm and reconstruction error against the step, 3 seeds",
        ("steps=10000", "task.examples=300", "task.d=10"), None, ({"kind": "observables"}, _VALUES),
        verdict=("Same quantities and result: the two-layer trace norm climbs in integer steps, the linear model's "
                 "smoothly. The reconstruction error is the paper's eq. 28, ||W - B D B^T||_2, which levels off "
                 "above 0 (the optimum is the projection on span B, not B D B^T)."),
        quick_seconds=5.6, full_seconds=4.5, measured_on=XEON_CPU),
    Reproduction(
        "hacohen-fig2", "Hacohen & Weinshall, Figure 2 (left)",
        "one-layer linear networks on the 8x8 digits, 10 seeds: the std of w_j over the networks and the distance "
        "to the optimum along 6 principal directions against the step, beside eq. 10's |1 - lr lambda_j|^s",
        ("steps=600", "axes.seed=[0, 1, 2]"), None, ({"kind": "pc_curves"},),
        verdict=("Same quantity and result, on the 8x8 digits (CIFAR-10 cannot be downloaded here): the std of "
                 "w_j over 10 networks falls exponentially, faster along directions of larger eigenvalue, exactly "
                 "at eq. 10's rate |1 - lr lambda_j|^s for this one-layer model (a); (b) adds each network's "
                 "distance to the optimum along j, which falls at the same rate. Run in float64, below float32's "
                 "rounding floor."),
        quick_seconds=5.8, full_seconds=5.0, measured_on=XEON_CPU),
    Reproduction(
        "hacohen-fig3", "Hacohen & Weinshall, Figure 3",
        "5-layer linear networks on the 8x8 digits, 10 seeds: the gradient scale matrices A_l, B_l of layers 2 "
        "and 4 against the step (the diagonal's distance from alpha_l, beta_l and the off-diagonal mean)",
        ("steps=300", "axes.seed=[0, 1, 2]", "task.width=64", "record.points=30"), None, ({"kind": "gradient_scales"},),
        verdict=("Same quantities (layers 2 and 4 of 5) and result, on the 8x8 digits in place of the small "
                 "mammals (64 inputs, 10 classes): B_l stays at its init (diagonal distance from beta_l = 1 and "
                 "off-diagonal mean flat) while A_l drifts from step ~100, when the training accuracy levels off "
                 "(~0.95): at layer 2 its diagonal distance 0.17 -> 0.34, its off-diagonal mean 0 -> -0.08. The "
                 "init's distances (0.1-0.17) are the fluctuations of width 128."),
        quick_seconds=6.2, full_seconds=9.9, measured_on=XEON_CPU),
    Reproduction(
        "hacohen-fig4", "Hacohen & Weinshall, Figures 2, 4a and 4c",
        "deep linear networks (depths 1, 2, 5) on the 8x8 digits, 10 seeds: distance to the optimum along "
        "each principal direction (mean and std over seeds) and its convergence rate against the eigenvalue, "
        "with the predicted rate; natural and ZCA-whitened data",
        ("steps=600", "task.width=32", "axes.seed=[0, 1, 2]", "record.points=40"), None,
        ({"kind": "pcs"}, {"kind": "pc_rates"}),
        variants=(Variant("natural", "natural digits"), Variant("whitened", "ZCA-whitened digits", ("task.whiten=true",))),
        verdict=("Figures 4a and 4c on the 8x8 digits (CIFAR-10 cannot be downloaded here): the convergence rate "
                 "along each principal direction falls with its eigenvalue as eq. 10 predicts for depths 1, 2 and "
                 "5; on whitened data every direction converges at one rate."),
        quick_seconds=9.6, full_seconds=19.8, measured_on=XEON_CPU),
    Reproduction(
        "hacohen-fig7", "Hacohen & Weinshall, Figure 7a",
        "learning-order consistency of linear networks on the 8x8 digits: the correlation of two ensembles' "
        "accessibility (10 seeds each), over all examples and the fastest fifth, natural and ZCA-whitened",
        ("steps=100", "record.points=11", "axes.seed={linspace = [0, 5], num = 6}"), None, (),
        variants=(Variant("natural", "natural digits"),
                  Variant("whitened", "ZCA-whitened digits", ("task.whiten=true",))),
        combined=(LEARNING_ORDER, (("", ("natural", "whitened")),)),
        verdict=("Partly the paper's result, on the 8x8 digits (CIFAR-10 cannot be downloaded here): over the "
                 "fifth of the examples learned fastest, the two ensembles agree on natural data (r = 0.25) and "
                 "not once whitened (0.03), the PC-bias ordering the early learning. Over all examples it differs "
                 "(0.87 natural, 1.00 whitened): the whitened networks reach the common optimum within ~30 of "
                 "the 300 steps, after which every network classifies alike, so their accessibility is shared."),
        quick_seconds=6.3, full_seconds=7.8, measured_on=XEON_CPU),
    Reproduction(
        "hacohen-fig9", "Hacohen & Weinshall, Figure 9a",
        "two-layer linear networks on synthetic Gaussian classes (80 training, 2000 held-out examples), 10 seeds: "
        "held-out and training accuracy with the training examples' highest or lowest 1.5% of principal "
        "directions amplified 10 times, and with none",
        ("steps=6000", "axes.seed=[0, 1, 2]", "task.test_examples=500", "record.points=40"), None, (),
        variants=(Variant("none", "none amplified"),
                  Variant("highest", "highest 1.5% amplified", ("task.amplify=\"highest\"",)),
                  Variant("lowest", "lowest 1.5% amplified", ("task.amplify=\"lowest\"",))),
        combined=(("test_accuracy", "accuracy"),
                  ((r"synthetic classes, noise spectrum $\lambda_i = i^{-2}$, $d$ = 64: 1 of 64 principal directions "
                    r"amplified $\times$10", ("none", "highest", "lowest")),)),
        verdict=("Same quantity (held-out accuracy of 10 networks) and result, on synthetic Gaussian classes whose "
                 "trailing principal directions are noise alone, in place of the small mammals (CIFAR-100 cannot be "
                 "downloaded here; on the 8x8 digits, whose trailing directions are not noise alone, amplifying "
                 "them left early stopping's gain where it was, 0.03-0.04, in a trial): early stopping gains 0.19 "
                 "(peak 0.83, last 0.65) with the lowest direction amplified, 0.13 with none and 0 with the "
                 "highest, whose accuracy is still rising after 12,000 steps."),
        quick_seconds=8.3, full_seconds=9.6, measured_on=XEON_CPU),
    Reproduction(
        "hacohen-fig10", "Hacohen & Weinshall, Figure 10",
        "two-layer linear networks on 48 of the 8x8 digits, 10 seeds: training accuracy and excess loss with "
        "real and shuffled labels, before and after ZCA whitening (shuffled labels learn slower unless the data "
        "is whitened)",
        ("steps=1000", "task.width=32", "axes.seed=[0, 1, 2]"), None, (),
        variants=tuple(Variant(f"{data}-{labels}", f"{labels} labels", overrides)
                       for data, whiten in (("natural", "false"), ("whitened", "true"))
                       for labels, overrides in (("real", (f"task.whiten={whiten}",)),
                                                 ("shuffled", (f"task.whiten={whiten}", "task.shuffle=true")))),
        combined=(("accuracy", "excess_loss"), (("natural digits", ("natural-real", "natural-shuffled")),
                                  ("ZCA-whitened digits", ("whitened-real", "whitened-shuffled")))),
        verdict=("Same quantity (training accuracy of 10 two-layer networks) and result, on 48 of the 8x8 digits "
                 "(CIFAR-10 cannot be downloaded here): on natural data shuffled labels are learned later than "
                 "real ones (90% at step 109 against 11), once whitened as fast (step 6 both). The second row adds "
                 "the excess loss, cut at float64's rounding floor, which the whitened runs reach near step 250."),
        quick_seconds=9.8, full_seconds=12.5, measured_on=XEON_CPU),
    Reproduction(
        "hacohen-fig12", "Hacohen & Weinshall, Figure 12 (Appendix C.1)",
        "a linear network with one wide hidden layer (512) on the 8x8 digits, 10 seeds: the training accuracy and "
        "excess loss from Glorot & Bengio's uniform init and from the paper's Definition 3",
        ("steps=1000", "task.width=128", "axes.seed=[0, 1, 2]"), None, (),
        variants=(Variant("definition-3", "Definition 3 init"),
                  Variant("glorot-uniform", "Glorot uniform init", ("task.init=glorot_uniform",))),
        combined=(("accuracy", "excess_loss"), (("8x8 digits, one hidden layer", ("definition-3", "glorot-uniform")),)),
        verdict=("Differs: the paper finds Definition 3 faster (accuracy on dogs and cats). Here the two inits' "
                 "training accuracy is the same within the seeds' spread (0.95 at the end), and Glorot's uniform "
                 "init reaches each level of excess loss about 1.7 times sooner. At this width Glorot's first and "
                 "last layers have about twice Definition 3's variance (2 / (64 + 512) and 2 / (512 + 10) against "
                 "1 / 512), so the product starts larger and GD at the same step moves faster."),
        quick_seconds=6.9, full_seconds=9.5, measured_on=XEON_CPU),
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
        verdict=("Beyond the papers: where deep linear networks learn W* = diag(1, 0.5, 0.25) one value at a time, "
                 "over depth 1-5 x sigma0 (Sigma_x = I). The aligned init sits on the toy model's exact gradient- "
                 "flow thresholds; small Gaussian layers (8 seeds) need a larger scale, their thresholds spread "
                 "over the seeds."),
        quick_seconds=12.9, full_seconds=43.1, measured_on=XEON_CPU),
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
        verdict=("Beyond the papers: heavy-ball momentum. Plain GD sits on gradient flow's threshold; as the "
                 "effective step eta / (1 - beta) grows the threshold falls (at eta = 1e-2, beta = 0.9 halves it, "
                 "beta = 0.99 cuts it 3-5 fold at every depth)."),
        quick_seconds=4.1, full_seconds=3.8, measured_on=XEON_CPU),
    Reproduction(
        "azulay-fig7-1", "Azulay et al. 2021, Figure 7.1 (section 9)",
        "two-layer diagonal networks on 5-sparse regression: population error against the init scale, one "
        "curve per shape s = 0, 0.5, 0.7, 0.9, 0.99, beside the min-l1 / min-l2 interpolators; the same "
        "runs against c = 2 alpha (1 + s^2)/(1 - s^2), where the shapes collapse onto one curve",
        ("task.d=200", "task.examples=40", "axes.sigma0={logspace = [-4, -0.6], num = 8}", "axes.lr=[2e-3]",
         "steps=60000"), None,
        ({"kind": "summary"}, {"kind": "summary", "x": "c"},
         {"kind": "heatmap", "color": "l1_l2_position"}),
        verdict=("Same result: the population error rises from the min-l1 interpolator's level to the min-l2 one's "
                 "as the init scale grows, earlier as s -> 1; against c every shape falls on the theory's curve of "
                 "argmin Q_c. The paper's sizes (d = 1000, n = 100), one draw of the data."),
        quick_seconds=7.6, full_seconds=52.0, measured_on=XEON_CPU),
    Reproduction(
        "azulay-fig7-2", "Azulay et al. 2021, Figure 7.2",
        "contours of Theorem 2's Q for one neuron in d = 2 from w~0 = alpha (0.6, 0.8): alpha = 2 at s = 0, 0.2, "
        "0.8 and s = 0.1 at alpha = 0.01, 1, 2.5 (small scale: ~ ||w~||^(3/2); large scale or s -> 1: ellipses "
        "centred at w~0); theory only, no sweep", (), None, (), draw=_draw_fig7_2,
        verdict=("Same six panels, theory only: the contours of Theorem 2's Q are circles around 0 (~ ||w||^(3/2)) "
                 "at small scale and ellipses centred at w~0 at large scale or s -> 1."),
        quick_seconds=3.0, full_seconds=3.1, measured_on=XEON_CPU),
    Reproduction(
        "azulay-phase", "Beyond the paper: the scale x shape plane of diagonal networks",
        "population error and the position between the min-l1 and min-l2 interpolators over log init scale x "
        "shape, for depths 2, 3 and 4 in one program; at depth 2 with Theorem 1's boundary (argmin Q_c halfway)",
        ("steps=50000", "axes.sigma0={logspace = [-3, -0.7], num = 5}", "axes.shape=[0.0, 0.7, 0.99]",
         "axes.seed=[0]"), None,
        ({"kind": "heatmap", "color": "population_error", "facet": "depth"},
         {"kind": "heatmap", "color": "l1_l2_position", "facet": "depth"}),
        verdict=("Beyond the paper: the log scale x shape plane at depths 2, 3 and 4, one shared colour scale. At "
                 "depth 2 the theory's boundary (argmin Q_c halfway from min-l1 to min-l2) sits on the colour's "
                 "transition; deeper networks stay rich to larger scales."),
        quick_seconds=8.7, full_seconds=57.2, measured_on=XEON_CPU),
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


def run(name: str, quick: bool = False, out_root: str | Path = "runs", progress_bar: bool | None = None,
        formats: tuple[str, ...] = ("png",)) -> Reproduced:
    """Run a bundled reproduction (its sweep, thresholds and figures, each in `formats`) into
    `out_root/<name>[-quick]` (each variant in a sub-folder of its own). Where its sweep compares with a baseline that
    needs scikit-learn and that is not installed, the comparison column (and a figure that draws
    it) is left out, with one DlsweepWarning saying so."""
    if name not in REPRODUCTIONS:
        raise StoreError(f"unknown reproduction {name!r}; known: {', '.join(REPRODUCTIONS)}")
    repro = REPRODUCTIONS[name]
    check_formats(formats)
    folder = Path(out_root) / (f"{name}-quick" if quick else name)
    if repro.draw is not None:
        return Reproduced(name, folder, None, repro.draw(folder, formats))
    table_path, figures, reports = None, [], []
    for variant in repro.variants or (Variant("", ""),):
        run_folder = folder / variant.folder if variant.folder else folder
        overrides = [*(repro.quick if quick else ()), *variant.overrides, *(variant.quick if quick else ()),
                     f"name={folder.name}{'-' + variant.folder if variant.folder else ''}"]
        missing = _missing_baseline(variant.spec or name, overrides)
        if missing:
            overrides.append("compare=false")
        reports.append(api.run(spec_path(variant.spec or name), out=run_folder, overrides=overrides,
                               progress_bar=progress_bar))
        table_path, variant_figures = _analyse(repro, run_folder, variant.title and f"{repro.paper}: {variant.title}" or None,
                                               skip=NEEDS_BASELINE if missing else (), formats=formats)
        figures += variant_figures
    if missing:
        skipped = [f["kind"] for f in repro.figures if f["kind"] in NEEDS_BASELINE]
        warnings.warn(f"{name}: {missing} is not installed, so the runs have no comparison with the paper's baseline"
                      f"{' and the ' + ', '.join(skipped) + ' figure is left out' if skipped else ''}; "
                      f"{compare.INSTALL} (or bash scripts/setup.sh .venv compare) adds it", DlsweepWarning, stacklevel=2)
    if repro.combined:
        figures += _combined_figure(repro, folder, formats)
    return Reproduced(name, folder, table_path, figures, tuple(reports))


@dataclasses.dataclass(frozen=True)
class RunAll:
    """What `run_all` did: each reproduction run, with its wall time, and each that failed, with
    its error (the others ran and were published all the same)."""

    done: list[tuple[Reproduced, float]]
    failed: dict[str, str]


def run_all(quick: bool = False, out_root: str | Path = "runs", formats: tuple[str, ...] = ("png",),
            docs: str | Path | None = "docs", skip: tuple[str, ...] = (),
            progress_bar: bool | None = None) -> RunAll:
    """Every bundled reproduction but those in `skip`, one after another (`run`), each with its
    wall time; one that fails (an error of its own, or of the machine: out of memory, a full disk)
    is reported and the next one runs, its run folders kept for a resume. At full size with
    `docs`, the figures of those that ran are copied into `docs/figures/` and the gallery is
    rewritten (`gallery.write`: docs/gallery.md and the README's gallery section, the README beside
    `docs`); a reproduction skipped or failed keeps the figures and time published before
    (`gallery.earlier`), or shows its measured `full_seconds` and no figure."""
    unknown = [name for name in skip if name not in REPRODUCTIONS]
    if unknown:
        raise StoreError(f"skip: unknown reproduction {', '.join(map(repr, unknown))}; "
                         f"known: {', '.join(REPRODUCTIONS)}")
    check_formats(formats)
    done, failed = [], {}
    for name in REPRODUCTIONS:
        if name not in skip:
            start = time.perf_counter()
            try:
                result = run(name, quick, out_root, progress_bar, formats)
            except Exception as err:            # noqa: BLE001 (one reproduction's failure stops no other)
                failed[name] = f"{type(err).__name__}: {err}"
                continue
            done.append((result, time.perf_counter() - start))
    if docs is not None and not quick:
        docs = Path(docs)
        ran = {result.name: (result, seconds) for result, seconds in done}
        published = gallery.earlier(docs)
        rows = []
        for name, repro in REPRODUCTIONS.items():
            if name in ran:
                result, seconds = ran[name]
                before = published.get(name)
                figures = gallery.publish(result.figures, result.folder, name, docs, before.figures if before else ())
                timing = ""
            else:
                before = published.get(name)
                measured = f" (not run: measured on {repro.measured_on})" if repro.full_seconds is not None else ""
                seconds, timing = (before.seconds, before.timing) if before else (repro.full_seconds, measured)
                figures = before.figures if before else ()
            rows.append(gallery.Row(name, repro.paper, seconds, figures, repro.verdict, timing))
        gallery.write(rows, docs, docs.parent / "README.md")
    return RunAll(done, failed)


def _missing_baseline(name: str, overrides: list[str]) -> str | None:
    """The package that the comparison of the reproduction's sweep needs (`compare = true`) and
    that is not installed, or None."""
    sweep = spec.load(spec_path(name), overrides)
    baseline = sweep.family.baseline(sweep.task) if sweep.compare else None
    if baseline is None or compare.available(baseline.requires):
        return None
    return {"sklearn": "scikit-learn"}.get(baseline.requires, baseline.requires)


def _combined_figure(repro: Reproduction, folder: Path, formats: tuple[str, ...]) -> list[Path]:
    """The variants side by side (`Reproduction.combined`), in `folder/figures/`, under the paper
    and the settings of the first variant: a recorded column (`variant_curves`: one panel per
    group, a line per variant) or, for `VALUES`, the observed values of each variant's first seed
    (one network, as the papers draw it) in a grid of panels: rows and columns the two [task] keys
    in which the variants differ, or the one key by the first swept axis (the groups' titles are
    then unused)."""
    from dlsweep import plot

    column, groups = repro.combined
    first = folder / repro.variants[0].folder
    sweep = spec.load(first / "sweep.toml")
    if column == PANELS:
        figure, name = _panels_figure(repro, folder), "panels"
    elif column == LEARNING_ORDER:
        titles = {variant.folder: variant.title for variant in repro.variants}
        table = pd.concat([api.learning_order(folder / sub).assign(variant=titles[sub])
                           for _, subs in groups for sub in subs], ignore_index=True)
        _, heading = api.figure_slice(api.load(first), sweep, None, repro.paper, first)
        figure, name = plot.learning_order(table, title=heading), LEARNING_ORDER
    elif column == VALUES:
        names = [sub for _, subs in groups for sub in subs]
        traj, runs, keys = _variants_frame(folder, names)
        swept = [axis for axis, values in sweep.axes.items() if len(values) > 1 and axis != "seed"]
        rows, cols = (keys[1], keys[0]) if len(keys) > 1 else (keys[0], swept[0]) if swept else (None, keys[0])
        chosen, heading = api.figure_slice(runs, sweep, (rows, cols), repro.paper, first, seeds=None,
                                           varied=tuple(keys))
        figure = plot.trajectories(traj[traj.run_id.isin(chosen.run_id)], chosen, sweep.family.targets(sweep.task),
                                   rows=rows, cols=cols, s=None, f=None, ylabel=sweep.family.observed, title=heading)
        name = "values-variants"
    else:
        titles = {variant.folder: variant.title for variant in repro.variants}
        panels = [(panel, [(titles[sub], api.load_trajectories(folder / sub)) for sub in subs]) for panel, subs in groups]
        _, heading = api.figure_slice(api.load(first), sweep, None, repro.paper, first)
        floor = float(np.finfo(sweep.dtype).eps)       # a relative change below it is the dtype's rounding
        figure = plot.variant_curves(panels, column, title=heading, floor=floor)
        name = f"{column if isinstance(column, str) else '-'.join(column)}-variants"
    paths = [folder / "figures" / f"{name}.{suffix}" for suffix in formats]
    plot.save(figure, paths)
    return paths


def _panels_figure(repro: Reproduction, folder: Path):
    """One panel per variant (each its own model): the observed values of its first run against
    time, titled by the variant; under the paper, one line per panel says what it ran."""
    from dlsweep import plot

    panels, lines = [], [repro.paper]
    for letter, variant in zip(string.ascii_lowercase, repro.variants):
        sub = folder / variant.folder
        sweep = spec.load(sub / "sweep.toml")
        first, fixed = api.figure_slice(api.load(sub), sweep, (), None, sub, seeds=None)
        run = first.iloc[:1]
        traj = api.load_trajectories(sub)
        panels.append((f"({letter}) {variant.title}", traj[traj.run_id == run.run_id.iloc[0]], float(run.lr.iloc[0]),
                       sweep.family.observed))
        lines.append(f"({letter}) {fixed.replace(chr(10), '; ')}")
    return plot.value_panels(panels, title="\n".join(lines))


def _variants_frame(folder: Path, names: list[str]) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """The trajectories and runs of the variants `names` (sub-folders of `folder`) as one dataset:
    run ids made distinct, and a column for each [task] key in which the variants differ (its
    value in each variant, a label for a flag), those keys listed (at most two: rows, columns)."""
    sweeps = {name: spec.load(folder / name / "sweep.toml") for name in names}
    keys = [key for key in sweeps[names[0]].task
            if len({repr(sweep.task.get(key)) for sweep in sweeps.values()}) > 1]
    if not 1 <= len(keys) <= 2:
        raise StoreError(f"{folder}: the variants {', '.join(names)} differ in {len(keys)} [task] keys "
                         f"({', '.join(keys) or 'none'}); a grid of them needs one or two")
    trajectories, runs, offset = [], [], 0
    for name, sweep in sweeps.items():
        labels = {key: _task_label(key, sweep.task[key]) for key in keys}
        one = api.load(folder / name).assign(**labels)
        trajectories.append(api.load_trajectories(folder / name).assign(run_id=lambda t, o=offset: t.run_id + o))
        runs.append(one.assign(run_id=one.run_id + offset))
        offset += sweep.n_runs
    runs = pd.concat(runs, ignore_index=True)
    for key in keys:            # panels in the order of the variants, not of their labels
        runs[key] = pd.Categorical(runs[key], categories=list(dict.fromkeys(runs[key])), ordered=True)
    return pd.concat(trajectories, ignore_index=True), runs, keys


def _task_label(key: str, value) -> str:
    """A variant's [task] value as a panel label: "with bias" / "without bias" for a flag, else
    "1000 examples" (value then key)."""
    if isinstance(value, bool):
        return f"{'with' if value else 'without'} {key}"
    return f"{value:g} {key}" if isinstance(value, (int, float)) else f"{key} = {value}"


def _analyse(repro: Reproduction, folder: Path, title: str | None = None, skip: tuple[str, ...] = (),
             formats: tuple[str, ...] = ("png",)) -> tuple[Path | None, list[Path]]:
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
            figures += api.plot_run(folder, **({"s": s, "f": f} | figure | {"title": title, "formats": formats}))
    return table_path, figures
