"""The paper's baselines, computed on each seed's data with scikit-learn (the `dlsweep[compare]`
extra, imported here only):

- the max-margin linear SVM of Gissin et al.'s Figures 6-7: the correlation
  <beta_svm, w*> / (||beta_svm|| ||w*||) of its weights with the labelling vector;
- orthogonal matching pursuit (Pati et al. 1993) for Figure 3 (App. D): the agreement
  |S_omp & S_net| / min(|S_omp|, |S_net|) between the first s features OMP picks and the first s
  the network selects (s: the number of nonzeros of w*).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

INSTALL = "pip install 'dlsweep[compare]'"
HARD_MARGIN_C = 1e4           # a hinge-loss SVM with this C is the hard-margin one on separable data


@dataclasses.dataclass(frozen=True)
class Baseline:
    """A comparator: `fit(data)` once per seed on the seed's task arrays (cached over chunks),
    then `columns(fitted, runs)` -> the columns of that seed's rows of the runs table."""

    fit: Callable[[dict[str, np.ndarray]], Any]
    columns: Callable[[Any, pd.DataFrame], dict[str, np.ndarray]]


def available() -> bool:
    try:
        import sklearn  # noqa: F401
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
