"""Hacohen & Weinshall: the per-principal-component convergence of deep linear networks (THEORY.md
1.6, 2.7): eq. 10's contraction and rates, its trajectory, and the fit of measured rates.
"""

from __future__ import annotations

import numpy as np

from dlsweep.analysis.theory.gidel import linear_model_gd, pc_basis


def hacohen_contraction(eigenvalues, lr: float, depth: float):
    """Per-PC contraction of the main result (eqs. 4, 10), in package terms:
    lambda_j = 1 - lr L e_j, e_j an eigenvalue of Sigma_x = X^T X / n. Hacohen's loss is the sum
    (1/2)||WX - Y||^2, so his d_j (eigenvalue of X X^T) is n e_j and his mu is lr / n:
    mu L d_j = lr L e_j. Exact for L = 1; for L >= 2 it assumes A_l = B_l = I (Theorem 2)."""
    return 1.0 - lr * depth * np.asarray(eigenvalues, dtype=float)


def predicted_pc_rates(eigenvalues, lr: float, depth: float):
    """Predicted per-step decay rate of ||w_j(s) - opt_j||: -ln|lambda_j| (lambda_j from
    hacohen_contraction), and its e-folding time in steps -1/ln|lambda_j|. Returns (rates, steps)."""
    with np.errstate(divide="ignore"):
        rates = -np.log(np.abs(hacohen_contraction(eigenvalues, lr, depth)))
        return rates, 1.0 / rates


def predicted_pc_trajectory(w0, sigma_x, sigma_xy, lr: float, depth: float, steps):
    """Eq. 10 in package terms: in principal coordinates w_j^s = lambda_j^s w_j^0 +
    (1 - lambda_j^s) opt_j, lambda_j = 1 - lr L e_j, opt_j = m_j / e_j (pc_basis). That is the
    linear model's GD path at step lr L (linear_model_gd). Returns end-to-end maps
    (len(steps), d, p) in the original coordinates."""
    return linear_model_gd(steps, w0, sigma_x, sigma_xy, lr * depth)


def pc_distances(w, sigma_x, sigma_xy):
    """||w_j(s) - opt_j|| for each principal coordinate j (rows of U^T W(s), pc_basis) of a
    trajectory w (T, d, p). Returns (T, d), columns in decreasing order of e_j."""
    _, u, opt = pc_basis(sigma_x, sigma_xy)
    return np.linalg.norm(np.einsum("ij,tip->tjp", u, np.asarray(w, dtype=float)) - opt, axis=-1)


def fit_pc_rates(steps, distances, floor: float = 1e-12):
    """Measured per-PC decay rates: for each column j of `distances` (T, J), the slope r_j of the
    least-squares fit ln dist_j(s) = c_j - r_j s over the points with dist_j > floor * max_s dist_j
    (below that, rounding dominates). NaN where fewer than two points remain. Returns (J,)."""
    steps = np.asarray(steps, dtype=float)
    dist = np.asarray(distances, dtype=float).reshape(len(steps), -1)
    rates = np.full(dist.shape[1], np.nan)
    for j, column in enumerate(dist.T):
        keep = column > floor * column.max()
        if keep.sum() >= 2:
            rates[j] = -np.polyfit(steps[keep], np.log(column[keep]), 1)[0]
    return rates
