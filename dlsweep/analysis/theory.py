"""Closed forms and bounds of Gissin et al. 2020 for the toy model (THEORY.md sections 2.1-2.4),
of Gidel et al. 2019 and Hacohen & Weinshall for deep linear regression networks (sections
2.5-2.7: rank-k solutions, Theorems 1-3 and Cor. 1-3 of Gidel, the per-principal-component rates
of Hacohen), and of Azulay et al. 2021 for the initialization's shape (sections 1.7, 2.8: the
implicit regularizers Q_c of the two-layer diagonal network and Q of the one-neuron network, the
minimizer of Q_c over the interpolators, and the min-l1 / min-l2 interpolators of its limits).

Gissin's toy model:

Gradient flow on sigma_i = w_i^N obeys d sigma/dt = sigma^(2 - 2/N) (s* - sigma) (eq. 4). The
time to grow from sigma0 to alpha s* is (Appendix A)

    t_alpha = integral_{sigma0}^{alpha s*} d sigma / (sigma^(2-2/N) (s* - sigma))
            = s*^(-q) integral_{u0}^{alpha} du / (u^q (1 - u)),     q = 2 - 2/N,  u0 = sigma0 / s*.

Splitting 1/(1-u) = 1 + u/(1-u), the first part is a power (or log) integral in closed form and
the second, after y = u^(2-q), is (1/(2-q)) integral dy / (1 - y^(1/(2-q))): smooth, bounded, and
integrated by quadrature. Everything takes ln(sigma0), so sigma0 far below the float range
(1e-300 and smaller) costs nothing in accuracy, and N >= 1 need not be an integer.

The (s, f) threshold is the sigma0 where t_s(s*_j) = t_f(s*_i) (Definition 1), found by root
finding in ln sigma0.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from scipy import integrate, optimize, special

SQRT2_BOUND = 2 * (math.sqrt(2) - 1)     # Theorem 3 needs c = eta s*_1 below this
LOG_SIGMA0_FLOOR = -1e5                  # N < 2: ln sigma0 below which no threshold is searched
LOG_FLOAT64_MAX = math.log(np.finfo(np.float64).max)


def _q(depth: float) -> float:
    if depth < 1:
        raise ValueError(f"depth N must be >= 1, got {depth}")
    return 2.0 if math.isinf(depth) else 2.0 - 2.0 / depth


def log_time_to_reach_unit(log_u0: float, alpha: float, depth: float) -> float:
    """integral_{u0}^{alpha} du / (u^q (1 - u)) with u0 = exp(log_u0), q = 2 - 2/N: the time
    to reach alpha for a target of 1 (THEORY.md 2.1). Accurate for any log_u0 < ln(alpha)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    log_alpha = math.log(alpha)
    if log_u0 >= log_alpha:
        return 0.0
    q = _q(depth)
    if q == 1.0:
        power_part = log_alpha - log_u0
    elif (1 - q) * log_u0 > LOG_FLOAT64_MAX:    # u0^(1-q) beyond the float range: so is the time
        return math.inf
    else:   # (alpha^(1-q) - u0^(1-q)) / (1-q), u0^(1-q) = exp((1-q) log_u0) (large for q > 1)
        power_part = (math.exp((1 - q) * log_alpha) - math.exp((1 - q) * log_u0)) / (1 - q)
    e = 2.0 - q                                   # y = u^e; e in (0, 1]; e = 0 only at N = inf
    if e == 0.0:                                  # N = inf: integral du / (u (1 - u)) in closed form
        rest = (log_alpha - log_u0) - math.log1p(-alpha) + math.log1p(-math.exp(log_u0))
    else:
        y0, y1 = math.exp(e * log_u0), math.exp(e * log_alpha)
        rest, _ = integrate.quad(lambda y: 1.0 / -math.expm1(math.log(y) / e) if y > 0 else 1.0,
                                 y0, y1, epsabs=0.0, epsrel=1e-13, limit=200)
        rest /= e
    return power_part + rest


def time_to_reach(sigma_star: float, sigma0: float | None = None, alpha: float = 0.5, depth: float = 2.0,
                  log_sigma0: float | None = None) -> float:
    """t_alpha(s*, sigma0): gradient-flow time for sigma to grow from sigma0 to alpha s* (Gissin
    et al. App. A). Give sigma0 or its natural log (for values below the float range)."""
    if log_sigma0 is None:
        if sigma0 is None or sigma0 <= 0:
            raise ValueError(f"sigma0 must be > 0, got {sigma0}")
        log_sigma0 = math.log(sigma0)
    q = _q(depth)
    return sigma_star ** (-q) * log_time_to_reach_unit(log_sigma0 - math.log(sigma_star), alpha, depth)


# ----------------------------------------------------------------------------- Theorem 1


def sigma_gf(t, sigma_star: float, sigma0: float, depth: float):
    """sigma(t) under gradient flow in closed form (Theorem 1): N = 1 exponential, N = 2 logistic
    (stable form sigma0 s* / ((s* - sigma0) e^(-s* t) + sigma0))."""
    t = np.asarray(t, dtype=float)
    if depth == 1:
        return sigma_star + (sigma0 - sigma_star) * np.exp(-t)
    if depth == 2:
        return sigma0 * sigma_star / ((sigma_star - sigma0) * np.exp(-sigma_star * t) + sigma0)
    raise ValueError(f"Theorem 1 gives sigma(t) in closed form for N = 1 and N = 2 only, not N = {depth}")


def time_gf_infinite_depth(sigma, sigma_star: float, sigma0: float):
    """t(sigma) for N -> infinity (Theorem 1): (1/s*^2) ln(sigma (s* - sigma0) / (sigma0 (s* - sigma)))
    - (1/s*)(1/sigma - 1/sigma0)."""
    sigma = np.asarray(sigma, dtype=float)
    return (np.log(sigma * (sigma_star - sigma0) / (sigma0 * (sigma_star - sigma))) / sigma_star**2
            - (1 / sigma - 1 / sigma0) / sigma_star)


def time_to_reach_closed_form(sigma_star: float, sigma0: float, alpha: float, depth: float) -> float:
    """t_alpha in closed form (THEORY.md 2.1): N = 1 and N = 2 logarithms, N >= 3 (and non-integer
    N != 2) through the hypergeometric function 2F1(a, 1; a + 1; u), a = 2/N - 1."""
    u0 = sigma0 / sigma_star
    if depth == 1:
        return math.log((sigma_star - sigma0) / ((1 - alpha) * sigma_star))
    if depth == 2:
        return math.log(alpha * (sigma_star - sigma0) / ((1 - alpha) * sigma0)) / sigma_star
    a = 2 / depth - 1

    def antiderivative(u):
        return u**a / a * special.hyp2f1(a, 1, a + 1, u)

    return sigma_star ** (2 / depth - 2) * (antiderivative(alpha) - antiderivative(u0))


# ----------------------------------------------------------------------------- exact GF threshold


def log_gf_threshold(sigma_star_i: float, sigma_star_j: float, s: float, f: float, depth: float) -> float:
    """ln of the exact gradient-flow (s, f) threshold: the root in ln sigma0 of
    t_s(s*_j) - t_f(s*_i) (Definition 1; incremental below it).

    For N >= 2 the margin grows without bound as sigma0 -> 0, so a root always exists and is
    searched however far down it lies. For N < 2 both times stay finite as sigma0 -> 0; -inf means
    no sigma0 above e^-100000 is incremental (N = 1: none at all)."""
    if not sigma_star_i > sigma_star_j > 0:
        raise ValueError(f"need sigma*_i > sigma*_j > 0, got {sigma_star_i}, {sigma_star_j}")

    def margin(log_sigma0):
        return (time_to_reach(sigma_star_j, alpha=s, depth=depth, log_sigma0=log_sigma0)
                - time_to_reach(sigma_star_i, alpha=f, depth=depth, log_sigma0=log_sigma0))

    high = math.log(s * sigma_star_j)          # at sigma0 = s s*_j, t_s = 0 < t_f: not incremental
    low, step = high - 1.0, 1.0
    while margin(low) <= 0:
        if depth < 2 and low <= LOG_SIGMA0_FLOOR:
            return -math.inf
        step *= 2
        low = high - step if depth >= 2 else max(high - step, LOG_SIGMA0_FLOOR)
    if math.isnan(margin(low)):
        raise ArithmeticError(f"gradient-flow times overflow float64 at ln sigma0 = {low:g} (N = {depth}) "
                              "before the threshold is bracketed")
    return optimize.brentq(margin, low, high, xtol=1e-13, rtol=4 * np.finfo(float).eps, maxiter=500)


# ----------------------------------------------------------------------------- Theorem 2 (GF)


def log_thm2_bounds(r: float, s: float, f: float, depth: float, sigma_star_j: float = 1.0) -> tuple[float, float, float]:
    """ln of Theorem 2's bounds on sigma0_th (THEORY.md 2.3): (printed lower, printed upper, valid
    upper). In logs because at N = 2 and r near 1 they fall far below the float range.

    N = 2:   s s*_j (s/(f r))^(1/((1-f)(r-1)))  <=  sigma0_th  <=  s s*_j (s/(f r))^((1-s)/(r-1))
    N >= 3:  s s*_j ((1-f)(r-1)/(1+(1-f)(r-1)))^(N/(N-2))  <=  sigma0_th  <=  s s*_j ((r-1)/(r-s))^(N/(N-2))
    The printed N >= 3 upper bound is not valid in general; the one Appendix A proves is
    s s*_j [1 + ((1-s)/(r-1)) (1 - (s/(f r))^p)]^(-1/p), p = 1 - 2/N (N = 2: the printed one).
    NaN below N = 2."""
    base = math.log(s * sigma_star_j)
    if depth == 2:
        lower = base + math.log(s / (f * r)) / ((1 - f) * (r - 1))
        upper = base + math.log(s / (f * r)) * (1 - s) / (r - 1)
        return lower, upper, upper
    if depth < 3:
        return math.nan, math.nan, math.nan
    power = 1.0 if math.isinf(depth) else depth / (depth - 2)
    lower = base + power * math.log((1 - f) * (r - 1) / (1 + (1 - f) * (r - 1)))
    upper = base + power * math.log((r - 1) / (r - s))
    p = 1.0 if math.isinf(depth) else 1 - 2 / depth
    valid = base - math.log(1 + (1 - s) / (r - 1) * (1 - (s / (f * r)) ** p)) / p
    return lower, upper, valid


def thm2_bounds_printed(r: float, s: float, f: float, depth: float, sigma_star_j: float = 1.0) -> tuple[float, float]:
    """Theorem 2 of Gissin et al. exactly as printed: (lower, upper) on sigma0_th (see log_thm2_bounds)."""
    lower, upper, _ = log_thm2_bounds(r, s, f, depth, sigma_star_j)
    return math.exp(lower), math.exp(upper)


def thm2_upper_valid(r: float, s: float, f: float, depth: float, sigma_star_j: float = 1.0) -> float:
    """The upper bound on sigma0_th that Appendix A's argument proves (see log_thm2_bounds)."""
    return math.exp(log_thm2_bounds(r, s, f, depth, sigma_star_j)[2])


# ----------------------------------------------------------------------------- Theorem 3 (GD, N = 2)


class Theorem3Bounds(NamedTuple):
    """Theorem 3's bounds on sigma0_th (NaN where its conditions fail; `reason` says which)."""

    chain_lower: float      # what the proof's chain of inequalities gives
    stated_lower: float     # the lower bound as the theorem states it: chain_lower 2^(1/(A-1))
    upper: float
    reason: str


def thm3_bounds(sigma_star_i: float, sigma_star_j: float, sigma_star_max: float, lr: float, s: float,
                f: float) -> Theorem3Bounds:
    """Theorem 3 of Gissin et al. for gradient descent at N = 2 (THEORY.md 2.4), with eta = c / s*_1,
    R = s* / s*_1 and r = s*_i / s*_j:

        chain_lower   s*_j [(1-f)/(r f) (s/(2(1-s)))^A]^(1/(A-1))     (Appendix B's sufficient condition)
        stated_lower  (1/2) s*_j [(1-f)/(r f) (s/(1-s))^A]^(1/(A-1))  (the theorem's statement)
        upper         s*_j [(1-f)/f (s/(1-s))^B]^(1/(B-1))            (both: the necessary condition)

    The proof replaces (s*_j - sigma0)^(A-1) by (s*_j/2)^(A-1) using s*_j >= 2 sigma0; the statement
    moves only one factor 1/2 out of the bracket, so it exceeds the chain's bound by 2^(1/(A-1)) and
    is not implied by the proof (it held in every GD check of THEORY.md 4.3). A bound is NaN where the
    theorem's conditions fail: c >= 2(sqrt 2 - 1), A <= 1 (lower), B <= 1 (upper), or a bound above
    s*_j / 2 (outside sigma0 <= s*_j / 2)."""
    c = lr * sigma_star_max
    if c >= SQRT2_BOUND:
        return Theorem3Bounds(math.nan, math.nan, math.nan, f"c = eta s*_1 = {c:.4g} >= 2(sqrt2 - 1)")
    r = sigma_star_i / sigma_star_j
    ri, rj = sigma_star_i / sigma_star_max, sigma_star_j / sigma_star_max
    a = math.log(1 - c * ri + c**2 * ri**2) / math.log(1 - c * rj - c**2 / 4 * rj**2)
    b = math.log(1 - c * ri - c**2 / 4 * ri**2) / math.log(1 - c * rj + c**2 * rj**2)
    reasons = []
    bounds = dict.fromkeys(("chain lower", "stated lower", "upper"), math.nan)
    if a > 1:
        bounds["chain lower"] = sigma_star_j * ((1 - f) / (r * f) * (s / (2 * (1 - s))) ** a) ** (1 / (a - 1))
        bounds["stated lower"] = sigma_star_j / 2 * ((1 - f) / (r * f) * (s / (1 - s)) ** a) ** (1 / (a - 1))
    else:
        reasons.append(f"A = {a:.4g} <= 1 (no lower bound)")
    if b > 1:
        bounds["upper"] = sigma_star_j * ((1 - f) / f * (s / (1 - s)) ** b) ** (1 / (b - 1))
    else:
        reasons.append(f"B = {b:.4g} <= 1 (no upper bound)")
    for name, value in bounds.items():
        if value > sigma_star_j / 2:
            reasons.append(f"{name} bound {value:.4g} > s*_j/2, outside the theorem's range")
            bounds[name] = math.nan
    return Theorem3Bounds(bounds["chain lower"], bounds["stated lower"], bounds["upper"], "; ".join(reasons))


# ============================================================================= deep linear regression
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


# ----------------------------------------------------------------------------- Hacohen & Weinshall


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


# ----------------------------------------------------------------------------- Azulay et al. 2021
#
# Two-layer diagonal network beta = u+ o v+ - u- o v- from the unbiased init u+-(0) = u0, v+-(0) = v0
# (THEORY.md 1.7, 2.8): scale alpha = |u0 v0| and shape s = (|v0| - |u0|) / (|v0| + |u0|) in [0, 1)
# enter gradient flow only through c = u0^2 + v0^2, and the flow converges to the interpolator
# that minimizes Q_c(beta) = sum_i q_c(beta_i) (Theorem 1).


def azulay_shape(u0, v0):
    """(alpha, s) = (|u0 v0|, (|v0| - |u0|) / (|v0| + |u0|)): the scale and shape of a two-layer
    init (s = 0 balanced, s -> 1 all in v; the sign of either layer does not matter)."""
    u, v = np.abs(np.asarray(u0, dtype=float)), np.abs(np.asarray(v0, dtype=float))
    return u * v, (v - u) / (v + u)


def azulay_layers(alpha, s):
    """(|u0|, |v0|) of scale alpha and shape s (the inverse of azulay_shape): with rho = |u0|/|v0|
    = (1 - s)/(1 + s), |u0| = sqrt(alpha rho) and |v0| = sqrt(alpha / rho)."""
    alpha, s = np.asarray(alpha, dtype=float), np.asarray(s, dtype=float)
    rho = (1.0 - s) / (1.0 + s)
    return np.sqrt(alpha * rho), np.sqrt(alpha / rho)


def azulay_c(alpha, s):
    """c = u0^2 + v0^2 = 2 alpha (1 + s^2) / (1 - s^2): the one number of the init that gradient
    flow sees (Theorem 1)."""
    alpha, s = np.asarray(alpha, dtype=float), np.asarray(s, dtype=float)
    return 2.0 * alpha * (1.0 + s * s) / (1.0 - s * s)


def azulay_q(z, c):
    """q_c(z) = (1/2) [z arcsinh(z/c) - sqrt(z^2 + c^2) + c] (Theorem 1), with sqrt(z^2 + c^2) - c
    written as z^2 / (sqrt(z^2 + c^2) + c) so that the kernel limit z^2/(4c) keeps its digits."""
    z, c = np.asarray(z, dtype=float), np.asarray(c, dtype=float)
    return 0.5 * (z * np.arcsinh(z / c) - z * z / (np.hypot(z, c) + c))


def azulay_Q(beta, c):
    """Q_c(beta) = sum_i q_{c_i}(beta_i) over the last axis (c a number or one per coordinate)."""
    return np.sum(azulay_q(beta, c), axis=-1)


MAX_DUAL_MOVE = 2.0      # azulay_q_minimizer: largest change of any 2 (X^T lam)_i in one Newton step


def azulay_q_minimizer(x, y, c, rtol: float = 1e-12, max_iter: int = 200):
    """argmin Q_c(beta) subject to X beta = y, for a batch of c (..., d) at once (X: n x d, or a
    batch broadcasting with c). Stationarity gives beta = c sinh(2 X^T lam) (the flow's own form,
    THEORY.md 2.8), so Newton's method with backtracking minimizes the convex dual
    phi(lam) = sum_i (c_i / 2) cosh(2 (X^T lam)_i) - lam . y, whose gradient X beta - y is the
    constraint. A step moves no 2 (X^T lam)_i by more than MAX_DUAL_MOVE (from lam = 0 a full
    step at small c would overflow cosh) and is halved until phi falls by Armijo's rule or by less
    than its rounding (near the optimum, where Newton converges quadratically). Stops when every ||X beta - y||_inf <= rtol (1 + ||y||_inf); raises
    ArithmeticError if that takes more than `max_iter` Newton steps."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    c = np.asarray(c, dtype=float)
    shape = np.broadcast_shapes(c.shape[:-1], x.shape[:-2], y.shape[:-1])
    c, y = np.broadcast_to(c, (*shape, x.shape[-1])), np.broadcast_to(y, (*shape, x.shape[-2]))
    tol = rtol * (1.0 + np.max(np.abs(y), axis=-1))
    x_t = np.swapaxes(x, -1, -2)            # X^T; products as matmuls broadcasting X over the batch

    def times_x(v):                         # v X, (..., n) -> (..., d)
        return (v[..., None, :] @ x)[..., 0, :]

    def at(lam):
        nu = 2.0 * times_x(lam)
        with np.errstate(over="ignore", invalid="ignore"):
            dual = np.sum(0.5 * c * np.cosh(nu), axis=-1) - np.sum(lam * y, axis=-1)
            return c * np.sinh(nu), c * np.cosh(nu), np.where(np.isfinite(dual), dual, np.inf)

    lam = np.zeros(y.shape)
    beta, weight, dual = at(lam)
    for _ in range(max_iter):
        residual = (x @ beta[..., None])[..., 0] - y
        if np.all(np.max(np.abs(residual), axis=-1) <= tol):
            return beta
        hessian = 2.0 * (x * weight[..., None, :]) @ x_t
        direction = -np.linalg.solve(hessian, residual[..., None])[..., 0]
        decrease = np.sum(residual * direction, axis=-1)            # < 0: a descent direction
        reach = 2.0 * np.max(np.abs(times_x(direction)), axis=-1)
        step = np.minimum(1.0, MAX_DUAL_MOVE / reach)               # cosh grows by at most e^2 a step
        slack = 16 * np.finfo(float).eps * (1.0 + np.abs(dual))    # the dual's rounding: near the optimum
        for _ in range(60):                                         # Armijo backtracking, per element
            trial = at(lam + step[..., None] * direction)
            short = ~(trial[2] <= dual + 1e-4 * step * decrease + slack)
            if not short.any():
                break
            step = np.where(short, step / 2, step)
        lam = lam + step[..., None] * direction
        beta, weight, dual = at(lam)
    raise ArithmeticError(f"azulay_q_minimizer: no convergence to rtol {rtol:g} in {max_iter} Newton steps")


def min_l2_interpolator(x, y):
    """argmin ||beta||_2 subject to X beta = y: X^+ y (the kernel limit c -> inf of Q_c)."""
    return np.linalg.pinv(np.asarray(x, dtype=float)) @ np.asarray(y, dtype=float)


def min_l1_interpolator(x, y):
    """argmin ||beta||_1 subject to X beta = y (the rich limit c -> 0 of Q_c), as the linear
    program min 1.(p + m) over X (p - m) = y, p, m >= 0 (scipy's HiGHS)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    d = x.shape[1]
    result = optimize.linprog(np.ones(2 * d), A_eq=np.hstack([x, -x]), b_eq=y, bounds=(0, None), method="highs")
    if not result.success:
        raise ArithmeticError(f"min_l1_interpolator: {result.message}")
    return result.x[:d] - result.x[d:]


def neuron_delta(alpha, s):
    """delta = a^2 - ||w||^2, conserved under gradient flow of the one-neuron network a w^T x, from
    the init's scale alpha = |a0| ||w0|| and shape s = (|a0| - ||w0||)/(|a0| + ||w0||):
    4 alpha s / (1 - s^2) (THEORY.md 1.7)."""
    alpha, s = np.asarray(alpha, dtype=float), np.asarray(s, dtype=float)
    return 4.0 * alpha * s / (1.0 - s * s)


def neuron_q(x, delta):
    """q^(x) = (S - delta) sqrt(S + delta/2), S = sqrt(x^2 + delta^2/4) (Azulay's Theorem 2)."""
    x, delta = np.asarray(x, dtype=float), np.asarray(delta, dtype=float)
    big_s = np.sqrt(x * x + delta * delta / 4.0)
    return (big_s - delta) * np.sqrt(big_s + delta / 2.0)


def neuron_q_prime(x, delta):
    """dq^/dx = (3/2) sqrt(S - delta/2)."""
    x, delta = np.asarray(x, dtype=float), np.asarray(delta, dtype=float)
    return 1.5 * np.sqrt(np.sqrt(x * x + delta * delta / 4.0) - delta / 2.0)


def neuron_Q(w, w0, delta):
    """Q(w~) = q^(||w~||) - q^'(||w~0||) <w~0 / ||w~0||, w~> over the last axis (Theorem 2): the
    function whose minimizer over X w~ = y gradient flow reaches from the predictor w~0 = a0 w0."""
    w, w0 = np.asarray(w, dtype=float), np.asarray(w0, dtype=float)
    norm0 = np.linalg.norm(w0, axis=-1)
    return (neuron_q(np.linalg.norm(w, axis=-1), delta)
            - neuron_q_prime(norm0, delta) * np.sum(w0 * w, axis=-1) / norm0)


def neuron_q_minimizer(x, y, w0, delta: float, rtol: float = 1e-12):
    """argmin Q(w~) subject to X w~ = y for the one-neuron network from the predictor w~0 = `w0`
    with delta = a0^2 - ||w0||^2 (Theorem 2). Stationarity grad Q = X^T lam gives
    w~ = r(||z||) z / ||z|| with z = X^T lam + q^'(||w~0||) w~0 / ||w~0|| and r the inverse of q^':
    with t = (q / (3/2))^2, r = sqrt(t (t + delta)). The n equations X w~(lam) = y are solved by
    scipy's hybrid Powell method from the minimum-l2 multipliers; raises ArithmeticError unless
    ||X w~ - y||_inf <= rtol (1 + ||y||_inf)."""
    x, y, w0 = (np.asarray(v, dtype=float) for v in (x, y, w0))
    pull = neuron_q_prime(np.linalg.norm(w0), delta) * w0 / np.linalg.norm(w0)

    def predictor(lam):
        z = x.T @ lam + pull
        t = (np.linalg.norm(z) / 1.5) ** 2
        return np.sqrt(t * (t + delta)) * z / np.linalg.norm(z)

    start = np.linalg.lstsq(x.T, neuron_q_prime(np.linalg.norm(min_l2_interpolator(x, y)), delta)
                            * min_l2_interpolator(x, y) / np.linalg.norm(min_l2_interpolator(x, y)) - pull, rcond=None)[0]
    solution = optimize.root(lambda lam: x @ predictor(lam) - y, start, method="hybr", tol=1e-14)
    w = predictor(solution.x)
    if np.max(np.abs(x @ w - y)) > rtol * (1.0 + np.max(np.abs(y))):
        raise ArithmeticError(f"neuron_q_minimizer: the constraint is off by {np.max(np.abs(x @ w - y)):.2g} ({solution.message})")
    return w
