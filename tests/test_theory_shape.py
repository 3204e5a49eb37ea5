"""Tests of dlsweep.analysis.theory, initialization-shape part: Azulay et al. 2021 (THEORY.md 1.7
and 2.8 give the formulas, 4.6 the numbers).

Independent references: float64 NumPy gradient-descent loops of the two-layer diagonal network
u+ o v+ - u- o v- and of the one-neuron network a w^T x, written from the papers' definitions;
scipy's SLSQP on the primal problem min Q_c(beta) s.t. X beta = y; Woodworth's Q_a0 written out
here. "Matches to the printed digits" means |actual - expected| <= half a unit in the last printed
digit of the THEORY value (assert_digits of test_theory). The data of 4.6 are X = 10 x 30 rows of
numpy's default_rng(0).standard_normal and beta* = (1, -0.7, 0.5, 0, ...), y = X beta*.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize

from dlsweep.analysis import theory as T
from test_theory import assert_digits


@pytest.fixture(scope="module")
def data():
    """THEORY.md 4.6's regression problem: (X, y, beta*)."""
    x = np.random.default_rng(0).standard_normal((10, 30))
    beta_star = np.zeros(30)
    beta_star[:3] = [1.0, -0.7, 0.5]
    return x, x @ beta_star, beta_star


def diagonal_gd(x, y, u0: float, v0: float, lr: float, steps: int, loss_tol: float = 1e-12):
    """GD on 1/(2n)||X beta - y||^2 over beta = u+ o v+ - u- o v-, all layers' entries starting at
    u0 (u+-) and v0 (v+-), so beta(0) = 0; stops once the loss is below loss_tol."""
    d, n = x.shape[1], len(y)
    up, vp, um, vm = (np.full(d, value) for value in (u0, v0, u0, v0))
    for _ in range(steps):
        residual = x @ (up * vp - um * vm) - y
        if residual @ residual / (2 * n) < loss_tol:
            break
        g = x.T @ residual / n
        up, vp, um, vm = up - lr * g * vp, vp - lr * g * up, um + lr * g * vm, vm + lr * g * um
    return up * vp - um * vm


def test_q_function_matches_theory_values():
    """THEORY.md 4.6: q_1(1) = 0.233580, q_0.01(1) = 2.15415, q_10(0.1) = 2.49998e-4,
    q_0.5(-2) = 1.31394; the kernel limit q_c(1) / (1/(4c)) = 0.999992 at c = 100."""
    assert_digits(float(T.azulay_q(1.0, 1.0)), "0.233580")
    assert_digits(float(T.azulay_q(1.0, 0.01)), "2.15415")
    assert_digits(float(T.azulay_q(0.1, 10.0)), "2.49998e-4")
    assert_digits(float(T.azulay_q(-2.0, 0.5)), "1.31394")
    assert_digits(float(T.azulay_q(1.0, 100.0)) * 400.0, "0.999992")


def test_q_tends_to_the_l1_norm_in_the_rich_limit():
    """THEORY.md 4.6: Q_c(z) / ((1/2) ln(1/c)) for z = (1, -0.5, 0.25) is 1.48935, 1.61647, 1.68322,
    1.71661 at c = 1e-2, 1e-4, 1e-8, 1e-16, tending to ||z||_1 = 1.75."""
    z = np.array([1.0, -0.5, 0.25])
    for c, expected in ((1e-2, "1.48935"), (1e-4, "1.61647"), (1e-8, "1.68322"), (1e-16, "1.71661")):
        assert_digits(float(T.azulay_Q(z, c)) / (0.5 * math.log(1 / c)), expected)


def test_q_of_shared_weights_is_half_woodworths():
    """Shared weights u = v = a0 have c = 2 a0^2, and Woodworth et al.'s regularizer
    Q_a0(z) = a0^2 [2 - sqrt(4 + (z/a0^2)^2) + (z/a0^2) arcsinh(z/(2 a0^2))] is 2 q_c(z)
    (THEORY.md 2.8; 4.6 checks a0 = 0.3, z = 0.7). Expected: the ratio is 2 to 1e-13 there and on a
    grid of a0 in [0.01, 3], z in [-5, 5]."""
    def woodworth(z, a0):
        t = z / a0**2
        return a0**2 * (2 - np.sqrt(4 + t * t) + t * np.arcsinh(t / 2))

    assert woodworth(0.7, 0.3) / T.azulay_q(0.7, 2 * 0.3**2) == pytest.approx(2.0, rel=1e-13)
    a0, z = np.meshgrid(np.geomspace(0.01, 3, 9), np.linspace(-5, 5, 11)[np.linspace(-5, 5, 11) != 0])
    np.testing.assert_allclose(woodworth(z, a0) / T.azulay_q(z, 2 * a0**2), 2.0, rtol=1e-9)


def test_scale_and_shape_round_trip_and_give_c():
    """azulay_layers inverts azulay_shape, and c = u0^2 + v0^2 = 2 alpha (1 + s^2)/(1 - s^2)
    (THEORY.md 1.7, 2.8); s is |1 - rho| / (1 + rho) for rho = |u0|/|v0| <= 1. Expected: all to
    1e-12 relative on a grid of alpha in [1e-5, 10], s in [0, 0.99]; the two inits of 4.6,
    (alpha, rho) = (0.01, 1) and (0.004, 4.79129), both have c = 0.02: c = alpha (rho + 1/rho), so
    the second rho is the root (5 + sqrt 21)/2 of rho + 1/rho = 5, which 4.79129 prints to 6 digits
    (half a unit of its last digit); at that root c = 0.02 to 1e-12 (float64 rounding of a few
    operations, ~1e-15)."""
    alpha, s = np.meshgrid(np.geomspace(1e-5, 10, 7), [0.0, 0.3, 0.5, 0.9, 0.99])
    u0, v0 = T.azulay_layers(alpha, s)
    back_alpha, back_s = T.azulay_shape(u0, v0)
    np.testing.assert_allclose(back_alpha, alpha, rtol=1e-12)
    np.testing.assert_allclose(back_s, s, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(T.azulay_c(alpha, s), u0**2 + v0**2, rtol=1e-12)
    np.testing.assert_allclose(back_s, np.abs(1 - u0 / v0) / (1 + u0 / v0), rtol=1e-12, atol=1e-15)
    root = (5 + math.sqrt(21)) / 2
    assert abs(root - 4.79129) <= 5e-6
    for alpha_, rho in ((0.01, 1.0), (0.004, root)):
        u0_, v0_ = math.sqrt(alpha_ * rho), math.sqrt(alpha_ / rho)
        assert float(T.azulay_c(*T.azulay_shape(u0_, v0_))) == pytest.approx(0.02, rel=1e-12)


def test_q_minimizer_agrees_with_scipy_on_the_primal():
    """Expected: argmin Q_c s.t. X beta = y by the dual Newton solve equals scipy SLSQP's on the
    primal (tolerance 1e-12, started at the min-l2 solution) within 1e-5, for X 4 x 8 Gaussian
    (seed 1), c = 1, 0.1, 0.01 and a per-coordinate c; the constraint holds to 1e-12."""
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((4, 8)), rng.standard_normal(4)
    for c in (np.full(8, 1.0), np.full(8, 0.1), np.full(8, 0.01), np.geomspace(0.01, 1, 8)):
        ours = T.azulay_q_minimizer(x, y, c)
        found = optimize.minimize(lambda b: T.azulay_Q(b, c), T.min_l2_interpolator(x, y),
                                  jac=lambda b: 0.5 * np.arcsinh(b / c), method="SLSQP",
                                  constraints={"type": "eq", "fun": lambda b: x @ b - y, "jac": lambda b: x},
                                  options={"ftol": 1e-14, "maxiter": 1000})
        assert found.success, found.message
        np.testing.assert_allclose(ours, found.x, atol=1e-5)
        np.testing.assert_allclose(x @ ours, y, atol=1e-12)
        assert T.azulay_Q(ours, c) <= T.azulay_Q(found.x, c) + 1e-12


def interpolator_sensitivity(x, beta, c) -> float:
    """||d beta / d(X beta)||_2 at beta = argmin Q_c s.t. X beta = y: stationarity makes beta =
    c sinh(2 X^T lam), so to first order a change r of X beta moves beta by W X^T (X W X^T)^-1 r,
    W = diag(c cosh(2 X^T lam)) = diag(sqrt(c^2 + beta^2))."""
    w = np.sqrt(c**2 + beta**2)
    return float(np.linalg.norm((w[:, None] * x.T) @ np.linalg.inv(x @ (w[:, None] * x.T)), 2))


def test_q_minimizer_is_batched_over_c(data):
    """One call over a batch of 40 c from 1e-30 to 1e6 equals 40 separate calls, and every row
    satisfies X beta = y to 1e-12 (1 + ||y||_inf). Tolerances: each solve stops once its residual
    is within r = 1e-12 (1 + ||y||_inf) in every entry (a batch row may take more Newton steps than
    it needs alone), so two solutions differ by at most 2 sqrt(n) r times the sensitivity of beta
    to its residual (interpolator_sensitivity; n = 10 constraints; to first order; measured at most
    6% of that bound, 9e-13 at c = 3.5e-25). The stop test may leave the residual anywhere below
    r (measured up to 0.8 r), and recomputed here it sums in another order, so it is allowed the
    rounding of a length-d dot product besides, d (eps/2) |X| |beta| (eps = 2.2e-16)."""
    x, y, _ = data
    cs = np.geomspace(1e-30, 1e6, 40)[:, None] * np.ones(30)
    batch = T.azulay_q_minimizer(x, y, cs)
    assert batch.shape == (40, 30)
    residual = 1e-12 * (1 + np.abs(y).max())
    for row, c in zip(batch, cs):
        bound = 2 * math.sqrt(len(y)) * residual * interpolator_sensitivity(x, row, c)
        np.testing.assert_allclose(row, T.azulay_q_minimizer(x, y, c), rtol=0, atol=bound)
    rounding = x.shape[1] * np.finfo(float).eps / 2 * (np.abs(batch) @ np.abs(x).T)
    assert np.all(np.abs(batch @ x.T - y) <= residual + rounding)


def test_gradient_descent_reaches_the_q_minimizer_whatever_the_shape(data):
    """Theorem 1 (THEORY.md 4.6): the inits (alpha, rho) = (0.01, 1) and (0.004, 4.79129) share
    c = 0.02, so gradient flow reaches the same interpolator, argmin Q_c. Expected, GD at lr 1e-3
    until the loss is below 1e-12 (~126000 steps): both end 7.9e-5 from the minimizer, the gap
    being the step's, linear in lr (4.6: 3.1e-4 at lr 4e-3; asserted below that: a minimizer of
    another c, e.g. 2e-4, is at least 0.43 away), and within 1e-6 of each other (measured 7e-8);
    ||beta - beta*|| = 0.6168 (to the printed digits)."""
    x, y, beta_star = data
    minimizer = T.azulay_q_minimizer(x, y, np.full(30, 0.02))
    ends = [diagonal_gd(x, y, math.sqrt(alpha * rho), math.sqrt(alpha / rho), 1e-3, 400_000)
            for alpha, rho in ((0.01, 1.0), (0.004, 4.79129))]
    for end in ends:
        assert np.linalg.norm(end - minimizer) < 3.1e-4
        assert_digits(float(np.linalg.norm(end - beta_star)), "0.6168")
    assert np.linalg.norm(ends[0] - ends[1]) < 1e-6


def test_q_minimizer_distances_and_limits(data):
    """THEORY.md 4.6: ||argmin Q_c - beta*|| = 0.6168 at c = 0.02, 0.1847 at c = 2e-4, 0.9824 at
    c = 0.300 (alpha = 0.01, rho = 30), and the minimum-l2 solution's is 1.0231. Limits (2.8):
    c = 1e6 gives the min-l2 interpolator to 1e-9 relative (the kernel regime, q_c ~ z^2/(4c));
    c = 1e-30 the min-l1 interpolator (scipy's LP) to 1e-7 relative (the rich regime; slowly:
    8e-3 at c = 1e-8)."""
    x, y, beta_star = data
    for c, expected in ((0.02, "0.6168"), (2e-4, "0.1847"), (float(T.azulay_c(*T.azulay_shape(math.sqrt(0.01 * 30), math.sqrt(0.01 / 30)))), "0.9824")):
        assert_digits(float(np.linalg.norm(T.azulay_q_minimizer(x, y, np.full(30, c)) - beta_star)), expected)
    l2, l1 = T.min_l2_interpolator(x, y), T.min_l1_interpolator(x, y)
    assert_digits(float(np.linalg.norm(l2 - beta_star)), "1.0231")
    assert np.linalg.norm(T.azulay_q_minimizer(x, y, np.full(30, 1e6)) - l2) < 1e-9 * np.linalg.norm(l2)
    assert np.linalg.norm(T.azulay_q_minimizer(x, y, np.full(30, 1e-30)) - l1) < 1e-7 * np.linalg.norm(l1)
    assert np.linalg.norm(T.azulay_q_minimizer(x, y, np.full(30, 1e-8)) - l1) > 1e-3 * np.linalg.norm(l1)


def test_neuron_q_matches_theory_values():
    """THEORY.md 4.6: q^(1; delta = 0) = 1, q^(2; delta = 1) = 1.69900, q^'(2; delta = 1) = 1.87443;
    q^' is the derivative of q^ (central differences, 1e-8 relative); delta = a0^2 - ||w0||^2 =
    4 alpha s / (1 - s^2) for a0 = 1.5, ||w0|| = 0.5 (alpha 0.75, s 0.5)."""
    assert float(T.neuron_q(1.0, 0.0)) == pytest.approx(1.0, rel=1e-15)
    assert_digits(float(T.neuron_q(2.0, 1.0)), "1.69900")
    assert_digits(float(T.neuron_q_prime(2.0, 1.0)), "1.87443")
    for x, delta in ((0.3, 0.0), (2.0, 1.0), (1.0, -2.5), (5.0, 3.0)):
        h = 1e-6 * x
        slope = (T.neuron_q(x + h, delta) - T.neuron_q(x - h, delta)) / (2 * h)
        assert float(T.neuron_q_prime(x, delta)) == pytest.approx(float(slope), rel=1e-8)
    assert float(T.neuron_delta(0.75, 0.5)) == pytest.approx(1.5**2 - 0.5**2, rel=1e-15)


def test_one_neuron_gradient_descent_ends_at_the_minimizer_of_neuron_q():
    """Azulay's Theorem 2: gradient flow of f(x) = a w^T x reaches argmin Q(w~) s.t. X w~ = y. At
    that point grad Q lies in the row space of X (KKT). Expected (d = 20, n = 5, Gaussian X and
    target, seed 2, GD lr 1e-3 until the loss is below 1e-14), at (alpha, s) = (0.01, 0), (0.1, 0.9),
    (1, 0.95): the part of grad Q outside the row space, over ||grad Q||, is below 1e-3 (THEORY
    4.6: 3e-6 to 2e-4; measured 5e-6 to 3e-5); the minimum-l2 predictor's is above 0.05 (measured 0.13
    to 0.83)."""
    rng = np.random.default_rng(2)
    d, n = 20, 5
    x = rng.standard_normal((n, d))
    y = x @ rng.standard_normal(d) / math.sqrt(d)
    direction = rng.standard_normal(d)
    direction /= np.linalg.norm(direction)
    row_space = np.linalg.qr(x.T)[0]

    def off_row_space(g):
        return np.linalg.norm(g - row_space @ (row_space.T @ g)) / np.linalg.norm(g)

    def grad_q(w, w0, delta):
        return (T.neuron_q_prime(np.linalg.norm(w), delta) * w / np.linalg.norm(w)
                - T.neuron_q_prime(np.linalg.norm(w0), delta) * w0 / np.linalg.norm(w0))

    for alpha, s in ((0.01, 0.0), (0.1, 0.9), (1.0, 0.95)):
        a_scale, w_scale = math.sqrt(alpha * (1 + s) / (1 - s)), math.sqrt(alpha * (1 - s) / (1 + s))
        a, w = a_scale, w_scale * direction
        w0_tilde, delta = a * w, float(T.neuron_delta(alpha, s))
        for _ in range(2_000_000):
            residual = x @ (a * w) - y
            if residual @ residual / (2 * n) < 1e-14:
                break
            g = x.T @ residual / n
            a, w = a - 1e-3 * (g @ w), w - 1e-3 * a * g
        assert residual @ residual / (2 * n) < 1e-14
        assert off_row_space(grad_q(a * w, w0_tilde, delta)) < 1e-3, (alpha, s)
        l2 = T.min_l2_interpolator(x, y)
        assert off_row_space(grad_q(l2, w0_tilde, delta)) > 0.05, (alpha, s)


def test_neuron_q_is_least_at_the_init_and_curves_as_theorem_2_says():
    """Theorem 2's Q (THEORY.md 2.8): its unconstrained minimum is the init's predictor w~0 (grad Q
    = q^'(||w~||) w~/||w~|| - q^'(||w~0||) w~0/||w~0|| vanishes there), and its Hessian is
    proportional to (a^2 I + w~ w~^T / a^2)^(-1) with a^2 = S + delta/2 (the time-warped mirror
    descent). Expected, on the six settings of Azulay's Figure 7.2 (w~0 = alpha (0.6, 0.8)): Q at 200
    random points is above Q(w~0); the central-difference Hessian (step 1e-4) at three points is that
    matrix times one scalar, to 1e-5 relative."""
    from dlsweep.reproduce import FIG7_2_DIRECTION, FIG7_2_PANELS

    rng = np.random.default_rng(3)
    for alpha, s in FIG7_2_PANELS:
        w0, delta = alpha * FIG7_2_DIRECTION, float(T.neuron_delta(alpha, s))
        others = w0 + rng.standard_normal((200, 2))
        assert (T.neuron_Q(others, w0, delta) > T.neuron_Q(w0, w0, delta)).all()
        for point in rng.standard_normal((3, 2)) * 2:
            h, eye = 1e-4, np.eye(2)
            hessian = np.array([[(T.neuron_Q(point + h * (eye[i] + eye[j]), w0, delta)
                                  - T.neuron_Q(point + h * (eye[i] - eye[j]), w0, delta)
                                  - T.neuron_Q(point - h * (eye[i] - eye[j]), w0, delta)
                                  + T.neuron_Q(point - h * (eye[i] + eye[j]), w0, delta)) / (4 * h * h)
                                 for j in range(2)] for i in range(2)])
            big_s = math.sqrt(point @ point + delta**2 / 4)
            a2 = big_s + delta / 2
            expected = np.linalg.inv(a2 * eye + np.outer(point, point) / a2)
            scale = np.sum(hessian * expected) / np.sum(expected * expected)
            np.testing.assert_allclose(hessian, scale * expected, rtol=1e-5, atol=1e-5 * np.abs(scale * expected).max())
