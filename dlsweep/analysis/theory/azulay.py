"""Azulay et al. 2021: the initialization's shape (THEORY.md 1.7, 2.8): the implicit regularizers
Q_c of the two-layer diagonal network and Q of the one-neuron network, the minimizer of Q_c over
the interpolators, and the min-l1 / min-l2 interpolators of its limits.
"""

from __future__ import annotations

import numpy as np
from scipy import optimize


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
