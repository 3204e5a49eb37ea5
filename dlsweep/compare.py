"""The papers' baselines, computed on each seed's data when a spec says `compare = true`:

- the max-margin linear SVM of Gissin et al.'s Figures 6-7: the correlation
  <beta_svm, w*> / (||beta_svm|| ||w*||) of its weights with the labelling vector, solved exactly
  (`max_margin`);
- orthogonal matching pursuit (Pati et al. 1993) for Figure 3 (App. D): the agreement
  |S_omp & S_net| / min(|S_omp|, |S_net|) between the first s features OMP picks and the first s
  the network selects (s: the number of nonzeros of w*);
- the interpolators of Azulay et al.'s theory for the diagonal network: the distances of the final
  predictor to the min-l1 and min-l2 interpolators of the seed's data and, at depth 2, to the
  minimizer of Q_c (dlsweep.analysis.theory).

OMP needs scikit-learn (the `dlsweep[compare]` extra, imported here only); the SVM and the
interpolators only scipy.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from scipy import optimize

INSTALL = "pip install 'dlsweep[compare]'"


@dataclasses.dataclass(frozen=True)
class Baseline:
    """A comparator: `fit(data)` once per seed on the seed's task arrays (cached over chunks),
    then `columns(fitted, runs)` -> the columns of that seed's rows of the runs table; `requires`:
    the optional package it imports, if any."""

    fit: Callable[[dict[str, np.ndarray]], Any]
    columns: Callable[[Any, pd.DataFrame], dict[str, np.ndarray]]
    requires: str | None = "sklearn"


def available(module: str | None) -> bool:
    """Whether `module` (a baseline's `requires`) can be imported; True for None."""
    if module is None:
        return True
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def max_margin(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The max-margin linear separator through the origin (the hard-margin SVM without a bias,
    like the networks) of examples x (m x d) with labels y = +-1: the w of least norm with
    y_j <x_j, w> >= 1 for every j, exactly, as Lawson and Hanson's least-distance program
    (Solving Least Squares Problems, 1974, ch. 23): with G = diag(y) x, the nonnegative least
    squares u >= 0 of ||E u - f||, E = [G^T; 1 ... 1] and f = (0, ..., 0, 1), leaves the residual
    r = E u - f, and w = -(r_1 .. r_d) / r_(d+1). Examples with y = 0 (on the labelling
    hyperplane) carry no label and are left out. A ValueError where none is labelled or no
    separator exists (r = 0)."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    labelled = y != 0
    g = y[labelled, None] * x[labelled]
    m, d = g.shape
    if m == 0:
        raise ValueError(f"no labelled example (every one of the {len(y)} labels is 0): no separator to find")
    e = np.vstack([g.T, np.ones((1, m))])
    f = np.zeros(d + 1)
    f[-1] = 1.0
    u, residual_norm = optimize.nnls(e, f, maxiter=20 * max(m, d + 1))
    if residual_norm <= np.sqrt(np.finfo(np.float64).eps):
        raise ValueError(f"no linear separator through the origin of these {m} labelled examples exists")
    r = e @ u - f
    return -r[:d] / r[d]


def svm_correlation(task: dict[str, np.ndarray]) -> float:
    """Correlation with w* of the max-margin linear separator (`max_margin`) of one seed's
    examples x (m x d) with labels y = +-1."""
    weights = max_margin(task["x"], task["y"])
    w_star = np.asarray(task["w_star"], np.float64)
    return float(weights @ w_star / (np.linalg.norm(weights) * np.linalg.norm(w_star)))


SVM = Baseline(svm_correlation, lambda value, runs: {"svm_correlation": np.full(len(runs), value)}, requires=None)


def omp_order(x: np.ndarray, y: np.ndarray, count: int) -> np.ndarray:
    """The first `count` features (columns of x) orthogonal matching pursuit picks to fit y, in
    the order it picks them; the columns are scaled to unit norm first, so the greedy choice is
    the largest |correlation| with the residual (scikit-learn's `orthogonal_mp` assumes it)."""
    from sklearn.linear_model import orthogonal_mp

    unit = x / np.linalg.norm(x, axis=0)
    path = orthogonal_mp(unit, y, n_nonzero_coefs=count, return_path=True).reshape(x.shape[1], -1)
    order: list[int] = []
    for coefficients in path.T:
        order += [i for i in np.flatnonzero(coefficients) if i not in order]
    return np.asarray(order[:count], np.int64)


def agreement(first: np.ndarray, second: np.ndarray) -> float:
    """|A & B| / min(|A|, |B|) of two feature sets (NaN when one is empty)."""
    smaller = min(len(first), len(second))
    return len(np.intersect1d(first, second)) / smaller if smaller else float("nan")


def omp(target: Callable[[dict, int], np.ndarray]) -> Baseline:
    """Orthogonal matching pursuit against the features a network selected: per run of one seed,
    the agreement between the first s features OMP picks on (x, y = x w*) and the first s the
    network selected (runs column `selected`), s = the number of nonzeros of the run's w*
    (`target(task, sparsity)` for a w* drawn per seed, else the task's `w_star`); x in float64,
    once per seed."""
    def columns(task: dict[str, np.ndarray], runs: pd.DataFrame) -> dict[str, np.ndarray]:
        x, values = task["x"], []
        for _, run in runs.iterrows():
            w_star = np.asarray(target(task, run["sparsity"])) if "order" in task else task["w_star"]
            s = int(np.count_nonzero(w_star))
            values.append(agreement(omp_order(x, x @ w_star, s), np.asarray(run["selected"])[:s]))
        return {"omp_agreement": np.asarray(values, np.float64)}

    return Baseline(lambda task: task | {"x": np.asarray(task["x"], np.float64)}, columns)


def fit_interpolators(task: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """One seed's data in float64 (x, y and, for the one-neuron network, the init's directions)
    with its min-l1 and min-l2 interpolators."""
    from dlsweep.analysis import theory

    data = {name: np.asarray(task[name], np.float64) for name in ("x", "y", "direction") if name in task}
    return data | {"l1": theory.min_l1_interpolator(data["x"], data["y"]), "l2": theory.min_l2_interpolator(data["x"], data["y"])}


QMinimizers = Callable[[dict, pd.DataFrame], tuple[np.ndarray, np.ndarray]]    # (fitted, runs) -> (rows, minimizers)


def _interpolator_columns(q_minimizers: QMinimizers):
    """Per run of one seed: `distance_l1`, `distance_l2` (||beta - beta_l1||, ||beta - beta_l2||),
    `l1_l2_position` = distance_l1 / (distance_l1 + distance_l2) (0: at the min-l1 interpolator,
    1: at the min-l2 one) and `distance_q`, ||beta - argmin Q|| for the rows where the theory has a
    closed form (`q_minimizers` gives them and their minimizers; NaN elsewhere)."""
    def columns(fitted: dict[str, np.ndarray], runs: pd.DataFrame) -> dict[str, np.ndarray]:
        beta = np.stack(runs["beta"].to_numpy()).astype(np.float64)
        to_l1 = np.linalg.norm(beta - fitted["l1"], axis=1)
        to_l2 = np.linalg.norm(beta - fitted["l2"], axis=1)
        to_q = np.full(len(runs), np.nan)
        rows, minimizers = q_minimizers(fitted, runs)
        if rows.any():
            to_q[rows] = np.linalg.norm(beta[rows] - minimizers, axis=1)
        return {"distance_q": to_q, "distance_l1": to_l1, "distance_l2": to_l2,
                "l1_l2_position": to_l1 / (to_l1 + to_l2)}

    return columns


def _shape_of(runs: pd.DataFrame) -> np.ndarray:
    return runs["shape"].to_numpy() if "shape" in runs else np.zeros(len(runs))


def _diagonal_q(signed: bool) -> QMinimizers:
    """The signed diagonal network at depth 2: argmin Q_c, c = 2 sigma0 (1 + s^2)/(1 - s^2)
    (Azulay's Theorem 1), batched over the seed's runs."""
    def minimizers(fitted, runs):
        from dlsweep.analysis import theory

        rows = (runs["depth"].to_numpy() == 2) & signed
        c = theory.azulay_c(runs["sigma0"].to_numpy(), np.abs(_shape_of(runs)))[rows]
        if not rows.any():
            return rows, np.zeros((0, fitted["x"].shape[1]))
        return rows, theory.azulay_q_minimizer(fitted["x"], fitted["y"], c[:, None] * np.ones(fitted["x"].shape[1]))

    return minimizers


def _neuron_q(width: int, shared: bool) -> QMinimizers:
    """One neuron, or `width` sharing one direction u (one neuron of scale width x sigma0): argmin Q
    of Azulay's Theorem 2 from w~0 = width sigma0 u with delta = width 4 sigma0 s / (1 - s^2), per
    run; no closed form for independent directions."""
    def minimizers(fitted, runs):
        from dlsweep.analysis import theory

        if width > 1 and not shared:
            return np.zeros(len(runs), bool), np.zeros((0, fitted["x"].shape[1]))
        found = [theory.neuron_q_minimizer(fitted["x"], fitted["y"], width * sigma0 * fitted["direction"][0],
                                           width * float(theory.neuron_delta(sigma0, shape)))
                 for sigma0, shape in zip(runs["sigma0"].to_numpy(), _shape_of(runs))]
        return np.ones(len(runs), bool), np.asarray(found)

    return minimizers


def interpolators(task: dict) -> Baseline:
    """The diagonal network's comparator: the theory's interpolators (`_interpolator_columns`)."""
    return Baseline(fit_interpolators, _interpolator_columns(_diagonal_q(task["form"] == "signed")), requires=None)



def neuron_interpolators(task: dict) -> Baseline:
    """The fully connected network's comparator: the theory's interpolators (`_interpolator_columns`)."""
    return Baseline(fit_interpolators, _interpolator_columns(_neuron_q(task["width"], task["directions"] == "shared")),
                    requires=None)
