"""The papers' baselines, computed on each seed's data when a spec says `compare = true`:

- the max-margin linear SVM of Gissin et al.'s Figures 6-7: the correlation
  <beta_svm, w*> / (||beta_svm|| ||w*||) of its weights with the labelling vector;
- orthogonal matching pursuit (Pati et al. 1993) for Figure 3 (App. D): the agreement
  |S_omp & S_net| / min(|S_omp|, |S_net|) between the first s features OMP picks and the first s
  the network selects (s: the number of nonzeros of w*);
- the interpolators of Azulay et al.'s theory for the diagonal network: the distances of the final
  predictor to the min-l1 and min-l2 interpolators of the seed's data and, at depth 2, to the
  minimizer of Q_c (dlsweep.analysis.theory).

The first two need scikit-learn (the `dlsweep[compare]` extra, imported here only); the third only
scipy.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

INSTALL = "pip install 'dlsweep[compare]'"
HARD_MARGIN_C = 1e4           # a hinge-loss SVM with this C is the hard-margin one on separable data


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


def svm_correlation(task: dict[str, np.ndarray]) -> float:
    """Correlation with w* of the max-margin linear separator (through the origin, like the
    networks) of one seed's examples x (m x d) with labels y = +-1."""
    from sklearn.svm import LinearSVC

    svm = LinearSVC(C=HARD_MARGIN_C, loss="hinge", fit_intercept=False, tol=1e-8, max_iter=1_000_000)
    weights = svm.fit(task["x"], task["y"]).coef_.ravel()
    w_star = task["w_star"]
    return float(weights @ w_star / (np.linalg.norm(weights) * np.linalg.norm(w_star)))


SVM = Baseline(svm_correlation, lambda value, runs: {"svm_correlation": np.full(len(runs), value)})


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


def omp_agreement(task: dict[str, np.ndarray], runs: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per run of one seed: the agreement between the first s features OMP picks on (x, y = x w*)
    and the first s the network selected (runs column `selected`), s = the number of nonzeros of
    the run's w* (its `sparsity`, for a random w*)."""
    from dlsweep.models import diagonal

    x, values = task["x"], []
    for _, run in runs.iterrows():
        w_star = np.asarray(diagonal.target(task, run["sparsity"])) if "order" in task else task["w_star"]
        s = int(np.count_nonzero(w_star))
        values.append(agreement(omp_order(x, x @ w_star, s), np.asarray(run["selected"])[:s]))
    return {"omp_agreement": np.asarray(values, np.float64)}


OMP = Baseline(lambda task: task | {"x": np.asarray(task["x"], np.float64)}, omp_agreement)   # x in float64, once per seed


def diagonal_baseline(task: dict) -> Baseline | None:
    """The diagonal network's comparator: the SVM for a classification loss, OMP for the squared
    loss on data with the selection recorded (`select` > 0), else none."""
    if task["loss"] != "squared":
        return SVM
    return OMP if task["select"] > 0 and task["examples"] > 0 else None


def _interpolator_fit(task: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """One seed's (x, y) in float64 with its min-l1 and min-l2 interpolators."""
    from dlsweep.analysis import theory

    x, y = np.asarray(task["x"], np.float64), np.asarray(task["y"], np.float64)
    return {"x": x, "y": y, "l1": theory.min_l1_interpolator(x, y), "l2": theory.min_l2_interpolator(x, y)}


def _interpolator_columns(signed: bool):
    """Per run of one seed: `distance_l1`, `distance_l2` (||beta - beta_l1||, ||beta - beta_l2||),
    `l1_l2_position` = distance_l1 / (distance_l1 + distance_l2) (0: at the min-l1 interpolator,
    1: at the min-l2 one) and, for the signed form at depth 2, `distance_q` = ||beta - argmin Q_c||
    with c = 2 sigma0 (1 + s^2)/(1 - s^2) from the run's scale and shape (Azulay's Theorem 1; NaN
    elsewhere: no closed form)."""
    def columns(fitted: dict[str, np.ndarray], runs: pd.DataFrame) -> dict[str, np.ndarray]:
        from dlsweep.analysis import theory

        beta = np.stack(runs["beta"].to_numpy()).astype(np.float64)
        to_l1 = np.linalg.norm(beta - fitted["l1"], axis=1)
        to_l2 = np.linalg.norm(beta - fitted["l2"], axis=1)
        to_q = np.full(len(runs), np.nan)
        closed = (runs["depth"].to_numpy() == 2) & signed
        if closed.any():
            shape = runs["shape"].to_numpy() if "shape" in runs else np.zeros(len(runs))
            c = theory.azulay_c(runs["sigma0"].to_numpy(), np.abs(shape))[closed]
            minimizers = theory.azulay_q_minimizer(fitted["x"], fitted["y"], c[:, None] * np.ones(beta.shape[1]))
            to_q[closed] = np.linalg.norm(beta[closed] - minimizers, axis=1)
        return {"distance_q": to_q, "distance_l1": to_l1, "distance_l2": to_l2,
                "l1_l2_position": to_l1 / (to_l1 + to_l2)}

    return columns


def interpolators(task: dict) -> Baseline:
    """The diagonal network's comparator: the theory's interpolators (`_interpolator_columns`)."""
    return Baseline(_interpolator_fit, _interpolator_columns(task["form"] == "signed"), requires=None)
