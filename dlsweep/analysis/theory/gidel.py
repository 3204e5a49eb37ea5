"""Gidel et al. 2019: deep linear regression networks (THEORY.md 1.5, 2.5, 2.6): the loss in the
package's terms, its principal coordinates, the rank-k solutions, the linear model's GD and GF
paths, and the two-layer network's Theorems 1-3 and Corollaries 1-3.
"""

from __future__ import annotations

import numpy as np


# Gidel et al. 2019 and Hacohen & Weinshall (THEORY.md 1.5, 1.6, 2.5-2.7). Package convention:
# X (n x d), Y (n x p), Sigma_x = X^T X / n, Sigma_xy = X^T Y / n, end-to-end map W (d x p),
# loss 1/(2n) ||Y - X W||_F^2 = 1/2 tr(W^T Sigma_x W) - tr(W^T Sigma_xy) + const, step lr.


def linear_loss(w, sigma_x, sigma_xy):
    """1/2 tr(W^T Sigma_x W) - tr(W^T Sigma_xy): the loss 1/(2n)||Y - XW||_F^2 less its constant
    ||Y||_F^2 / (2n). `w` may carry leading axes (a trajectory (T, d, p))."""
    w = np.asarray(w, dtype=float)
    return 0.5 * np.einsum("...ip,ij,...jp->...", w, sigma_x, w) - np.einsum("...ip,ip->...", w, sigma_xy)


def pc_basis(sigma_x, sigma_xy, rtol: float = 1e-12):
    """Principal coordinates of the data (Hacohen Def. 1, THEORY 1.6, package terms):
    Sigma_x = U diag(e) U^T with e_1 >= ... >= e_d, and the optimum's rows in that basis,
    opt_j = m_j / e_j with m_j = u_j^T Sigma_xy (row j of U^T Sigma_x^+ Sigma_xy; 0 where
    e_j <= rtol e_1). Returns (e (d,), U (d, d), opt (d, p))."""
    e, u, inv = _eig_desc(sigma_x, rtol)
    return e, u, inv[:, None] * (u.T @ np.asarray(sigma_xy, dtype=float))


def _eig_desc(sigma_x, rtol: float = 1e-12):
    """Eigenvalues e (decreasing) and eigenvectors U of Sigma_x, and 1/e on the support
    e > rtol e_1 (0 off it)."""
    e, u = np.linalg.eigh(np.asarray(sigma_x, dtype=float))
    e, u = e[::-1], u[:, ::-1]
    keep = e > rtol * max(e[0], 0.0)
    return e, u, np.divide(1.0, e, out=np.zeros_like(e), where=keep)


def _pinv_sqrt(sigma_x, rtol: float = 1e-12):
    """(Sigma_x^+)^(1/2): the inverse square root on the support of Sigma_x, 0 off it."""
    _, u, inv = _eig_desc(sigma_x, rtol)
    return (u * np.sqrt(inv)) @ u.T


# ----------------------------------------------------------------------------- rank-k solutions


def reduced_rank_solution(sigma_x, sigma_xy, rank: int, rtol: float = 1e-12):
    """Minimum-norm minimizer of 1/(2n)||Y - XW||^2 over rank(W) <= k (exact reduced-rank
    regression, Gidel eq. 4 / Reinsel & Velu Thm 2.2):

        W_k = S^(+1/2) P_k(S^(+1/2) Sigma_xy),    S = Sigma_x,

    P_k the best rank-k approximation (truncated SVD, Eckart-Young). Why: Sigma_xy lies in the
    range of Sigma_x (it is X^T Y / n), so the loss is 1/2 ||S^(1/2) W - S^(+1/2) Sigma_xy||_F^2 +
    const, Z = S^(1/2) W has rank <= k, and the W of least norm with S^(1/2) W = P_k(.) is
    S^(+1/2) P_k(.). Unique when the k-th and (k+1)-th singular values of S^(+1/2) Sigma_xy differ.
    Components are ranked by sigma_i / sqrt(lambda_i), not by sigma_i (THEORY 2.5, Cor. 2 note)."""
    root = _pinv_sqrt(sigma_x, rtol)
    a, s, bt = np.linalg.svd(root @ np.asarray(sigma_xy, dtype=float), full_matrices=False)
    k = min(int(rank), len(s))
    return root @ ((a[:, :k] * s[:k]) @ bt[:k])


def gidel_rank_k_solution(sigma_x, sigma_xy, k: int):
    """Gidel's Cor. 2 sequence W^{k,*} = sum_{i<=k} (sigma_i / lambda_i) u_i v_i^T (THEORY 2.5):
    u_i, v_i, sigma_i from the SVD of Sigma_xy (sigma_1 >= sigma_2 >= ...) and
    lambda_i = u_i^T Sigma_x u_i. Under Assumption 1 with eps = 0 (Sigma_x = U D_x U^T,
    Sigma_xy = U D_xy V^T) it equals reduced_rank_solution when the order of sigma_i / sqrt(lambda_i)
    is that of sigma_i; otherwise it is the limit of the dynamics but not the rank-k optimum."""
    sigma_x = np.asarray(sigma_x, dtype=float)
    u, s, vt = np.linalg.svd(np.asarray(sigma_xy, dtype=float), full_matrices=False)
    k = min(int(k), len(s))
    lam = np.einsum("di,de,ei->i", u[:, :k], sigma_x, u[:, :k])
    if np.any(lam[s[:k] > 0] <= 0):
        raise ValueError(f"lambda_i = u_i^T Sigma_x u_i must be > 0 where sigma_i > 0, got {lam}")
    coef = np.divide(s[:k], lam, out=np.zeros(k), where=s[:k] > 0)
    return (u[:, :k] * coef) @ vt[:k]


def rank_k_distances(w, sigma_x, sigma_xy, ks=None, kind: str = "exact"):
    """||W(t) - W_k||_F for each end-to-end map of a trajectory `w` (T, d, p) and each k in `ks`
    (default 1 .. min(d, p)), W_k = reduced_rank_solution ("exact") or gidel_rank_k_solution
    ("gidel"). Returns (T, len(ks))."""
    solvers = {"exact": reduced_rank_solution, "gidel": gidel_rank_k_solution}
    if kind not in solvers:
        raise ValueError(f"kind must be one of {sorted(solvers)}, got {kind!r}")
    w = np.asarray(w, dtype=float)
    ks = range(1, min(w.shape[-2:]) + 1) if ks is None else ks
    targets = np.stack([solvers[kind](sigma_x, sigma_xy, k) for k in ks])      # (K, d, p)
    return np.linalg.norm(w[:, None] - targets[None], axis=(-2, -1))


def closest_approach(w, sigma_x, sigma_xy, ks=None, kind: str = "exact"):
    """How close a trajectory passes to each rank-k solution: (min_t ||W(t) - W_k||_F, argmin_t)
    for each k, two arrays of length len(ks) (see rank_k_distances)."""
    dist = rank_k_distances(w, sigma_x, sigma_xy, ks, kind)
    return dist.min(axis=0), dist.argmin(axis=0)


# ----------------------------------------------------------------------------- Gidel: linear model


def _linear_model_path(decay, w0, sigma_x, sigma_xy):
    """U diag(decay(e)) U^T (W0 - W*) + W*, W* = Sigma_x^+ Sigma_xy; decay maps the eigenvalues
    e (d,) to factors (T, d). Returns (T, d, p)."""
    e, u, opt = pc_basis(sigma_x, sigma_xy)
    start = u.T @ np.asarray(w0, dtype=float) - opt                       # PC coordinates
    factors = np.atleast_2d(decay(e))
    return np.einsum("ij,tj,jp->tip", u, factors, start) + u @ opt


def linear_model_gf(t, w0, sigma_x, sigma_xy):
    """Gradient flow of the linear model (L = 1), Gidel Prop. 1 / eq. 9:
    W(t) = e^(-t Sigma_x)(W0 - Sigma_x^+ Sigma_xy) + Sigma_x^+ Sigma_xy. Returns (len(t), d, p)."""
    t = np.atleast_1d(np.asarray(t, dtype=float))
    return _linear_model_path(lambda e: np.exp(-np.outer(t, e)), w0, sigma_x, sigma_xy)


def linear_model_gd(steps, w0, sigma_x, sigma_xy, lr: float):
    """Gradient descent on the linear model (L = 1), Gidel eq. 21 with the factor on the left
    (THEORY 2.6): W_k = (I - lr Sigma_x)^k (W0 - Sigma_x^+ Sigma_xy) + Sigma_x^+ Sigma_xy.
    Returns (len(steps), d, p)."""
    steps = np.atleast_1d(np.asarray(steps, dtype=float))
    return _linear_model_path(lambda e: np.power.outer(1.0 - lr * e, steps).T, w0, sigma_x, sigma_xy)


# ----------------------------------------------------------------------------- Gidel: two layers, GF


def gidel_w_gf(t, sigma, lam, delta):
    """Theorem 1 (L = 2, eps = 0), THEORY 2.5: the singular value of W1 W2 along (u_i, v_i),
    product started at w0 = e^(-2 delta):
        w(t) = sigma w0 / ((sigma - lam w0) e^(-2 sigma t) + lam w0)   (sigma > 0),
        w(t) = w0 / (1 + 2 lam w0 t)                                    (sigma = 0, i > r_xy).
    Written as sigma / ((sigma - lam w0) e^(2 delta - 2 sigma t) + lam), so large delta does not
    underflow. Broadcasts over t, sigma, lam, delta."""
    t, sigma, lam, delta = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (t, sigma, lam, delta)))
    w0 = np.exp(-2 * delta)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        active = sigma / ((sigma - lam * w0) * np.exp(2 * delta - 2 * sigma * t) + lam)
        inactive = w0 / (1 + 2 * lam * w0 * t)
    return np.where(sigma > 0, active, inactive)[()]


def gidel_phase_times(sigma):
    """Theorem 2: T_i = 1/sigma_i, the rescaled time (t -> delta t) at which component i turns on."""
    return 1.0 / np.asarray(sigma, dtype=float)


def gidel_phase_steps(sigma, lr: float, delta: float, corrected: bool = False):
    """GD step at which component i turns on (layers at e^-delta): delta T_i = delta / (lr sigma_i)
    (eq. 25), or with `corrected` delta / ln(1 + lr sigma_i), where the per-layer growth factor
    1 + lr sigma_i of the early steps brings e^-delta to O(1) (THEORY 2.6 [D])."""
    sigma = np.asarray(sigma, dtype=float)
    return delta / np.log1p(lr * sigma) if corrected else delta / (lr * sigma)


def gidel_step_limit(t, sigma, lam, rtol: float = 1e-12):
    """Theorem 2's delta -> inf limit of w_i(delta t): (sigma/lam) 1{t > T_i} +
    sigma/(lam + sigma) 1{t = T_i}, T_i = 1/sigma (t = T_i up to relative `rtol`)."""
    t, sigma, lam = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (t, sigma, lam)))
    at = np.isclose(t * sigma, 1.0, rtol=rtol, atol=0.0)
    return np.where(at, sigma / (lam + sigma), np.where(t * sigma > 1, sigma / lam, 0.0))[()]


def gidel_norm_sq(t, sigmas, lams, delta: float):
    """||W1 W2(delta t)||_F^2 = sum_i w_i(delta t)^2 at finite delta (Theorem 1; the curves of
    Gidel Fig. 1). `t` scalar or (T,); returns scalar or (T,)."""
    t = np.asarray(t, dtype=float)
    w = gidel_w_gf(delta * t[..., None], np.asarray(sigmas, dtype=float), np.asarray(lams, dtype=float), delta)
    return np.sum(w**2, axis=-1)


def gidel_norm_sq_limit(t, sigmas, lams, rtol: float = 1e-12):
    """Cor. 1: lim_{delta -> inf} ||W1 W2(delta t)||_F^2 = sum_i (sigma_i/lam_i)^2 1{T_i < t} +
    (sigma_i/(lam_i + sigma_i))^2 1{T_i = t}."""
    t = np.asarray(t, dtype=float)
    w = gidel_step_limit(t[..., None], np.asarray(sigmas, dtype=float), np.asarray(lams, dtype=float), rtol)
    return np.sum(w**2, axis=-1)


# ----------------------------------------------------------------------------- Gidel: two layers, GD


def gidel_gd_product(p0, sigma, lam, lr: float, steps: int):
    """Balanced two-layer GD, eps = 0 (THEORY 2.6, Gidel eq. 22 for the layer entry a, p = a^2):
    p_{k+1} = p_k (1 + lr (sigma - lam p_k))^2. Returns p_0 .. p_steps, shape (steps + 1, ...)."""
    p = np.asarray(p0, dtype=float) * np.ones(np.broadcast(np.asarray(sigma), np.asarray(lam)).shape)
    out = [p]
    for _ in range(int(steps)):
        p = p * (1 + lr * (sigma - lam * p)) ** 2
        out.append(p)
    return np.stack(out)


def gidel_turn_on_step(p0: float, sigma: float, lam: float, lr: float, fraction: float = 0.5,
                       max_steps: int = 10**7) -> int:
    """First GD step k with p_k >= fraction * sigma/lam under gidel_gd_product's recursion
    (THEORY 4.4 uses lam = 1, fraction 1/2); -1 if not reached within max_steps."""
    p, level = float(p0), fraction * sigma / lam
    for k in range(int(max_steps) + 1):
        if p >= level:
            return k
        p = p * (1 + lr * (sigma - lam * p)) ** 2
    return -1


def gidel_thm3_bounds(k, p0: float, sigma: float, lam: float, lr: float):
    """Theorem 3 (0 < p0 < 1, 2 lr sigma < 1), with sigma p0 in the numerators (THEORY 2.6 [R]):
    sigma p0 / ((sigma - lam p0) e^(g k) + lam p0), g = -2 lr sigma + 4 lr^2 sigma^2 (lower) and
    g = -2 lr sigma - lr^2 sigma^2 (upper). For sigma = 0 (i > r_xy): (0, p0 / (1 + p0 lam lr k)).
    Returns (lower, upper), each shaped like k. The upper bound fails within ~0.1% of sigma/lam."""
    k = np.asarray(k, dtype=float)
    if sigma == 0:
        return np.zeros_like(k)[()], (p0 / (1 + p0 * lam * lr * k))[()]

    def bound(g):
        return (sigma * p0 / ((sigma - lam * p0) * np.exp(g * k) + lam * p0))[()]

    return bound(-2 * lr * sigma + 4 * (lr * sigma) ** 2), bound(-2 * lr * sigma - (lr * sigma) ** 2)


def gidel_cor3_limits(sigmas):
    """The step-size limits of Cor. 3 for sigma_1 > sigma_2 > ...: [1/(2 sigma_1)] followed, for
    each i, by 2 (sigma_i - sigma_{i+1}) / sigma_i^2 and (sigma_i - sigma_{i+1}) / (2 sigma_{i+1}^2).
    Cor. 3 needs lr below all of them."""
    s = np.asarray(sigmas, dtype=float)
    gap = s[:-1] - s[1:]
    pairs = np.stack([2 * gap / s[:-1] ** 2, gap / (2 * s[1:] ** 2)], axis=1).ravel()
    return np.concatenate([[1 / (2 * s[0])], pairs])


def gidel_cor3_max_lr(sigmas) -> float:
    """Supremum of the step sizes Cor. 3 allows (strict: lr must be below it)."""
    return float(gidel_cor3_limits(sigmas).min())
