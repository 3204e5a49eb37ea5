"""The paper's baselines, computed on each seed's data with scikit-learn (the `dlsweep[compare]`
extra, imported here only): the max-margin linear SVM of Gissin et al.'s Figures 6-7, as the
correlation <beta_svm, w*> / (||beta_svm|| ||w*||) of its weights with the labelling vector."""

from __future__ import annotations

import numpy as np

INSTALL = "pip install 'dlsweep[compare]'"
HARD_MARGIN_C = 1e4           # a hinge-loss SVM with this C is the hard-margin one on separable data


def available() -> bool:
    try:
        import sklearn  # noqa: F401
    except ImportError:
        return False
    return True


def svm_correlation(task: dict[str, np.ndarray]) -> dict[str, float]:
    """Correlation with w* of the max-margin linear separator (through the origin, like the
    networks) of one seed's examples x (m x d) with labels y = +-1."""
    from sklearn.svm import LinearSVC

    svm = LinearSVC(C=HARD_MARGIN_C, loss="hinge", fit_intercept=False, tol=1e-8, max_iter=1_000_000)
    weights = svm.fit(task["x"], task["y"]).coef_.ravel()
    w_star = task["w_star"]
    return {"svm_correlation": float(weights @ w_star / (np.linalg.norm(weights) * np.linalg.norm(w_star)))}
