"""Tests of dlsweep.analysis.theory, deep linear regression part: Gidel et al. 2019 and Hacohen &
Weinshall (THEORY.md 1.5, 1.6, 2.5-2.7 give the formulas, 4.4 and 4.5 the numbers).

Package convention throughout: X (n x d), Y (n x p), Sigma_x = X^T X / n, Sigma_xy = X^T Y / n,
end-to-end map W (d x p), loss 1/(2n)||Y - XW||_F^2, step lr. Hacohen's numbers are stated for his
sum loss (1/2)||WX - Y||^2 with step mu; the conversion d_j = n e_j, mu = lr / n is done in the
tests that use them.

Independent checks (not theory.py's formulas): scipy BFGS over rank-k factorizations A B for the
reduced-rank optimum; solve_ivp (DOP853, rtol 1e-12) of the matrix ODE (Gidel eq. 12) for
Theorem 1; scipy.linalg.expm for Prop. 1; explicit float64 GD loops for eq. 21 and Hacohen eq. 10.
"Matches to the printed digits" means |actual - expected| <= half a unit in the last printed
digit of the THEORY value (assert_digits of test_theory).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, linalg, optimize

from dlsweep.analysis import theory as T
from test_theory import assert_digits


def _assumption1(sigmas, lams, d: int, p: int, seed: int):
    """Statistics satisfying Gidel's Assumption 1 with eps = 0: Sigma_x = U diag(lams) U^T,
    Sigma_xy = U D_xy V^T, U (d x d), V (p x p) random orthogonal. Returns (Sigma_x, Sigma_xy, U, V)."""
    rng = np.random.default_rng(seed)
    u = np.linalg.qr(rng.normal(size=(d, d)))[0]
    v = np.linalg.qr(rng.normal(size=(p, p)))[0]
    dxy = np.zeros((d, p))
    dxy[np.arange(len(sigmas)), np.arange(len(sigmas))] = sigmas
    return u @ np.diag(lams) @ u.T, u @ dxy @ v.T, u, v


def _data_stats(n: int, d: int, p: int, seed: int, scales=None):
    """Random data (columns of X scaled by `scales`) and its statistics (X, Y, Sigma_x, Sigma_xy)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)) * (1.0 if scales is None else np.asarray(scales))
    y = rng.normal(size=(n, p))
    return x, y, x.T @ x / n, x.T @ y / n


# ----------------------------------------------------------------------------- rank-k solutions


@pytest.mark.parametrize("rank", [1, 2])
def test_reduced_rank_solution_is_the_minimizer(rank):
    """reduced_rank_solution minimizes 1/(2n)||Y - XW||^2 over rank <= k: the best of 8 BFGS runs
    over W = A B (A d x k, B k x p, gtol 1e-10) on random data (n=40, d=4, p=3) reaches the same
    loss to 1e-10 and the same W to 1e-5 (the factorization is unique up to A -> A G, B -> G^-1 B),
    and never goes below it. The loss computed from X, Y equals linear_loss + ||Y||^2/(2n) to 1e-12."""
    x, y, sx, sxy = _data_stats(40, 4, 3, seed=3)
    n, d, p = 40, 4, 3
    w_k = T.reduced_rank_solution(sx, sxy, rank)
    exact = T.linear_loss(w_k, sx, sxy)
    assert abs(np.sum((y - x @ w_k) ** 2) / (2 * n) - (exact + np.sum(y**2) / (2 * n))) < 1e-12
    assert np.linalg.matrix_rank(w_k) == rank

    def loss(theta):
        a, b = theta[: d * rank].reshape(d, rank), theta[d * rank:].reshape(rank, p)
        g = sx @ a @ b - sxy
        return T.linear_loss(a @ b, sx, sxy), np.concatenate([(g @ b.T).ravel(), (a.T @ g).ravel()])

    rng = np.random.default_rng(0)
    runs = [optimize.minimize(loss, rng.normal(size=(d + p) * rank), jac=True, method="BFGS",
                              options={"gtol": 1e-10, "maxiter": 10_000}) for _ in range(8)]
    best = min(runs, key=lambda r: r.fun)
    assert all(r.fun >= exact - 1e-12 for r in runs)
    assert abs(best.fun - exact) < 1e-10
    a, b = best.x[: d * rank].reshape(d, rank), best.x[d * rank:].reshape(rank, p)
    np.testing.assert_allclose(a @ b, w_k, atol=1e-5)


def test_reduced_rank_solution_minimum_norm_and_full_rank():
    """Singular Sigma_x (n=3 < d=5): W_k's columns lie in range(Sigma_x) (|N^T W_k| < 1e-12, N an
    orthonormal basis of the null space), adding a null-space part keeps the loss (to 1e-12) and
    raises the norm; at
    k >= rank it is the min-norm least-squares solution Sigma_x^+ Sigma_xy (np.linalg.pinv, 1e-10)."""
    _, _, sx, sxy = _data_stats(3, 5, 2, seed=4)
    null = linalg.null_space(sx)
    assert null.shape[1] == 2
    for k in (1, 2):
        w_k = T.reduced_rank_solution(sx, sxy, k)
        assert np.abs(null.T @ w_k).max() < 1e-12
        shifted = w_k + null @ np.ones((2, 2))
        assert abs(T.linear_loss(shifted, sx, sxy) - T.linear_loss(w_k, sx, sxy)) < 1e-12
        assert np.linalg.norm(shifted) > np.linalg.norm(w_k)
    np.testing.assert_allclose(T.reduced_rank_solution(sx, sxy, 5), np.linalg.pinv(sx) @ sxy, atol=1e-10)


def test_gidel_rank_k_matches_exact_when_orders_agree():
    """THEORY 2.5 Cor. 2 note: under Assumption 1 with sigma = (1, .5, .25), lambda = (1, 1.5, .8)
    (sigma/sqrt(lambda) = 1, .408, .280: same order as sigma) Gidel's W^{k,*} = sum_{i<=k}
    (sigma_i/lambda_i) u_i v_i^T equals the exact reduced-rank solution for k = 1, 2, 3 (to 1e-12);
    d = 4, the fourth direction has lambda = 2 and sigma = 0."""
    sigmas, lams = np.array([1.0, 0.5, 0.25]), np.array([1.0, 1.5, 0.8])
    sx, sxy, u, v = _assumption1(sigmas, [*lams, 2.0], d=4, p=3, seed=5)
    for k in (1, 2, 3):
        expected = (u[:, :k] * (sigmas[:k] / lams[:k])) @ v[:, :k].T
        np.testing.assert_allclose(T.gidel_rank_k_solution(sx, sxy, k), expected, atol=1e-12)
        np.testing.assert_allclose(T.reduced_rank_solution(sx, sxy, k), expected, atol=1e-12)


def test_gidel_rank_k_differs_when_orders_disagree():
    """THEORY 2.5 [D]: sigma = (1, .9), lambda = (4, 1): sigma/sqrt(lambda) = (.5, .9), so the exact
    rank-1 solution takes component 2 ((.9/1) u_2 v_2^T, to 1e-12) while Gidel's W^{1,*} takes
    component 1, with a higher loss: -(1/2) sigma_1^2/lambda_1 = -.125 vs -(1/2) .81 = -.405."""
    sx, sxy, u, v = _assumption1([1.0, 0.9], [4.0, 1.0], d=2, p=2, seed=6)
    np.testing.assert_allclose(T.reduced_rank_solution(sx, sxy, 1), 0.9 * np.outer(u[:, 1], v[:, 1]), atol=1e-12)
    np.testing.assert_allclose(T.gidel_rank_k_solution(sx, sxy, 1), 0.25 * np.outer(u[:, 0], v[:, 0]), atol=1e-12)
    assert T.linear_loss(T.reduced_rank_solution(sx, sxy, 1), sx, sxy) == pytest.approx(-0.405, abs=1e-12)
    assert T.linear_loss(T.gidel_rank_k_solution(sx, sxy, 1), sx, sxy) == pytest.approx(-0.125, abs=1e-12)


def test_closest_approach_visits_rank_k_solutions_in_order():
    """Gidel Cor. 2: the Theorem 1 trajectory W(delta t) = U diag(w_i(delta t)) V^T (delta = 30,
    sigma = (1, .5, .25), lambda = (1, 1.5, .8)) passes within 1e-6 relative of W^{k,*} for k = 1,
    2, 3 (both kinds), at rescaled times in (1/sigma_k, 1/sigma_{k+1}) (the last one after 1/sigma_3
    = 4); the distances table is (T, 3)."""
    sigmas, lams, delta = np.array([1.0, 0.5, 0.25]), np.array([1.0, 1.5, 0.8]), 30.0
    sx, sxy, u, v = _assumption1(sigmas, lams, d=3, p=3, seed=7)
    times = np.linspace(0.0, 8.0, 801)
    w = np.einsum("ik,tk,jk->tij", u, T.gidel_w_gf(delta * times[:, None], sigmas, lams, delta), v)
    edges = np.concatenate([1 / sigmas, [np.inf]])
    for kind in ("exact", "gidel"):
        assert T.rank_k_distances(w, sx, sxy, kind=kind).shape == (801, 3)
        dmin, where = T.closest_approach(w, sx, sxy, ks=[1, 2, 3], kind=kind)
        for k in range(3):
            assert dmin[k] < 1e-6 * np.linalg.norm(T.gidel_rank_k_solution(sx, sxy, k + 1))
            assert edges[k] < times[where[k]] < edges[k + 1]


# ----------------------------------------------------------------------------- Gidel: linear model


def test_linear_model_gf_and_gd():
    """Prop. 1: linear_model_gf equals expm(-t Sigma_x)(W0 - W*) + W* (scipy expm, W* = pinv(Sigma_x)
    Sigma_xy) to 1e-12; eq. 21 (factor on the left, THEORY 2.6): linear_model_gd equals 30 steps of
    W <- W - lr (Sigma_x W - Sigma_xy) (lr = .1) to 1e-12 at every step."""
    _, _, sx, sxy = _data_stats(50, 4, 2, seed=8)
    w0 = np.random.default_rng(9).normal(size=(4, 2))
    w_star = np.linalg.pinv(sx) @ sxy
    ts = np.array([0.0, 0.3, 2.0, 10.0])
    expected = np.stack([linalg.expm(-t * sx) @ (w0 - w_star) + w_star for t in ts])
    np.testing.assert_allclose(T.linear_model_gf(ts, w0, sx, sxy), expected, atol=1e-12)
    w, path = w0.copy(), [w0]
    for _ in range(30):
        w = w - 0.1 * (sx @ w - sxy)
        path.append(w)
    np.testing.assert_allclose(T.linear_model_gd(np.arange(31), w0, sx, sxy, 0.1), np.stack(path), atol=1e-12)


# ----------------------------------------------------------------------------- Gidel: continuous


def test_theorem1_matches_matrix_ode():
    """Theorem 1: solve_ivp (DOP853, rtol 1e-12) of Gidel eq. 12 for (W1, W2) from W1(0) =
    U e^-delta Q, W2(0) = Q^T e^-delta V^T (Q orthogonal; delta = 2, sigma = (1, .5, .25),
    lambda = (1, 1.5, .8)) gives W1 W2(t) = U diag(gidel_w_gf(t)) V^T to 1e-10 at t = 1, 3, 6."""
    sigmas, lams, delta = np.array([1.0, 0.5, 0.25]), np.array([1.0, 1.5, 0.8]), 2.0
    sx, sxy, u, v = _assumption1(sigmas, lams, d=3, p=3, seed=10)
    q = np.linalg.qr(np.random.default_rng(11).normal(size=(3, 3)))[0]

    def rhs(_, y):
        w1, w2 = y[:9].reshape(3, 3), y[9:].reshape(3, 3)
        g = sxy - sx @ w1 @ w2
        return np.concatenate([(g @ w2.T).ravel(), (w1.T @ g).ravel()])

    y0 = np.concatenate([(math.exp(-delta) * u @ q).ravel(), (math.exp(-delta) * q.T @ v.T).ravel()])
    ts = [1.0, 3.0, 6.0]
    sol = integrate.solve_ivp(rhs, (0, 6), y0, method="DOP853", rtol=1e-12, atol=1e-14, t_eval=ts)
    for i, t in enumerate(ts):
        product = sol.y[:9, i].reshape(3, 3) @ sol.y[9:, i].reshape(3, 3)
        np.testing.assert_allclose(product, u @ np.diag(T.gidel_w_gf(t, sigmas, lams, delta)) @ v.T, atol=1e-10)


def test_theorem1_is_gissin_logistic_and_inactive_branch():
    """THEORY 2.5 [D]: w(t) is Gissin's N=2 logistic (sigma_gf) with s* = sigma/lambda,
    sigma0 = e^(-2 delta), time 2 lambda t (rtol 1e-12, sigma = .3, lambda = 2, delta = 3); for
    sigma = 0, w0/(1 + 2 lambda w0 t) (Theorem 1, i > r_xy), rtol 1e-14."""
    t = np.linspace(0.0, 40.0, 9)
    w0 = math.exp(-6.0)
    np.testing.assert_allclose(T.gidel_w_gf(t, 0.3, 2.0, 3.0), T.sigma_gf(4.0 * t, 0.15, w0, 2), rtol=1e-12)
    np.testing.assert_allclose(T.gidel_w_gf(t, 0.0, 2.0, 3.0), w0 / (1 + 4.0 * w0 * t), rtol=1e-14)


def test_theorem2_values_of_theory_4_4():
    """THEORY 4.4: sigma = .1, lambda = 1, w(delta t) at t = (.9, 1, 1.1)/sigma is 0.0575074,
    0.0909091, 0.0986647 at delta = 10 and 4.2e-18, 0.0909091, 0.100000 at delta = 200 (to the
    printed digits). Theorem 2's limit: 0, sigma/(lambda+sigma), sigma/lambda (1e-15); T = 1/sigma."""
    t = np.array([0.9, 1.0, 1.1]) / 0.1
    for value, expected in zip(T.gidel_w_gf(10 * t, 0.1, 1.0, 10.0), ("0.0575074", "0.0909091", "0.0986647")):
        assert_digits(value, expected, "delta=10")
    for value, expected in zip(T.gidel_w_gf(200 * t, 0.1, 1.0, 200.0), ("4.2e-18", "0.0909091", "0.100000")):
        assert_digits(value, expected, "delta=200")
    np.testing.assert_allclose(T.gidel_step_limit(t, 0.1, 1.0), [0.0, 0.1 / 1.1, 0.1], atol=1e-15)
    assert T.gidel_phase_times(0.1) == pytest.approx(10.0, rel=1e-15)


def test_corollary1_fig1_norms():
    """THEORY 4.4, Fig. 1 (Sigma_xy = diag(.1, .01, .001), Sigma_x = I, layers e^-20: delta = 20):
    ||W1W2(delta t)||_F^2 at t = 5, 10, 50, 100, 500, 5000 is 4.24835e-18, 8.26446e-3, 0.0100000,
    0.0100980, 0.0101000, 0.0101010 (printed digits); Cor. 1's limit is 0 at t = 5 and the same
    values at the others (plateaus .01, .0101, .010101; at t = 10 and 100, jumps (.1/1.1)^2 and
    .01 + (.01/1.01)^2) to the printed digits."""
    sigmas, lams = [0.1, 0.01, 0.001], [1.0, 1.0, 1.0]
    ts = np.array([5.0, 10.0, 50.0, 100.0, 500.0, 5000.0])
    expected = ("4.24835e-18", "8.26446e-3", "0.0100000", "0.0100980", "0.0101000", "0.0101010")
    for t, value, limit, text in zip(ts, T.gidel_norm_sq(ts, sigmas, lams, 20.0),
                                     T.gidel_norm_sq_limit(ts, sigmas, lams), expected):
        assert_digits(value, text, f"t={t}")
        if t > 5:
            assert_digits(limit, text, f"limit t={t}")
    assert T.gidel_norm_sq_limit(5.0, sigmas, lams) == 0.0


def test_corollary3_step_sizes():
    """THEORY 4.4: Cor. 3's limits for sigma = (.1, .01, .001) are 5, 18, 180, 450, 4500 (exact up
    to float rounding, rtol 1e-12), so lr < 5."""
    np.testing.assert_allclose(np.sort(T.gidel_cor3_limits([0.1, 0.01, 0.001])), [5, 18, 180, 450, 4500], rtol=1e-12)
    assert T.gidel_cor3_max_lr([0.1, 0.01, 0.001]) == pytest.approx(5.0, rel=1e-12)


# ----------------------------------------------------------------------------- Gidel: discrete


def test_discrete_turn_on_steps():
    """THEORY 4.4: lambda = 1, lr = .1, first step with p >= sigma/2: 105 (sigma = 1, layers e^-10),
    198 (sigma = .5), 420 (layers e^-40, sigma = 1), exact integers; eq. 25's delta/(lr sigma) = 100,
    and delta/ln(1 + lr sigma) = 104.921 and 419.682 (printed digits)."""
    assert T.gidel_turn_on_step(math.exp(-20), 1.0, 1.0, 0.1) == 105
    assert T.gidel_turn_on_step(math.exp(-20), 0.5, 1.0, 0.1) == 198
    assert T.gidel_turn_on_step(math.exp(-80), 1.0, 1.0, 0.1) == 420
    assert T.gidel_phase_steps(1.0, 0.1, 10.0) == pytest.approx(100.0, rel=1e-12)
    assert_digits(T.gidel_phase_steps(1.0, 0.1, 10.0, corrected=True), "104.921", "delta=10")
    assert_digits(T.gidel_phase_steps(1.0, 0.1, 40.0, corrected=True), "419.682", "delta=40")
    p = T.gidel_gd_product(math.exp(-20), 1.0, 1.0, 0.1, 110)
    assert p[104] < 0.5 <= p[105]


def test_discrete_vs_continuous_50_steps():
    """THEORY 4.4: sigma = lambda = 1, lr = .1, p0 = 1e-4: p_50 = 0.610830; continuous at t = 5
    (delta = -ln(p0)/2): 0.687780 (printed digits)."""
    assert_digits(T.gidel_gd_product(1e-4, 1.0, 1.0, 0.1, 50)[-1], "0.610830", "p_50")
    assert_digits(T.gidel_w_gf(5.0, 1.0, 1.0, -0.5 * math.log(1e-4)), "0.687780", "w(5)")


def test_theorem3_bounds():
    """THEORY 4.4 / 2.6: sigma = .5, lambda = 1, lr = .5, p0 = 1e-3: both bounds equal p0 at k = 0
    (1e-15); the lower bound holds for k <= 200 (rounding slack 1e-12 relative); the upper bound holds
    up to k = 27 and is first violated at k = 28 with p = 0.499967 > 0.499964 (printed digits), where
    p > 0.99 sigma/lambda. For sigma = 0: p_k <= p0/(1 + p0 lambda lr k) for k <= 200."""
    ks = np.arange(201)
    p = T.gidel_gd_product(1e-3, 0.5, 1.0, 0.5, 200)
    lower, upper = T.gidel_thm3_bounds(ks, 1e-3, 0.5, 1.0, 0.5)
    assert lower[0] == pytest.approx(1e-3, abs=1e-15) and upper[0] == pytest.approx(1e-3, abs=1e-15)
    assert np.all(p >= lower * (1 - 1e-12))
    violated = np.flatnonzero(p > upper)
    assert violated[0] == 28
    assert_digits(p[28], "0.499967", "p_28")
    assert_digits(upper[28], "0.499964", "upper_28")
    assert np.all(p[p <= 0.99 * 0.5] <= upper[p <= 0.99 * 0.5])
    p_off = T.gidel_gd_product(1e-3, 0.0, 1.0, 0.5, 200)
    assert np.all(p_off <= T.gidel_thm3_bounds(ks, 1e-3, 0.0, 1.0, 0.5)[1] * (1 + 1e-12))


# ----------------------------------------------------------------------------- Hacohen


def test_hacohen_rates_of_theory_4_5():
    """THEORY 4.5 in package terms: mu = 1e-3 and d = (10, 1, .1) on the sum loss are, for any n,
    lr = mu n and e = d/n on the mean loss (n = 100 and 7 checked). lambda = (.99, .999, .9999) at
    L=1, (.98, .998, .9998) at L=2, (.95, .995, .9995) at L=5 (1e-12); e-folding steps 99.4992,
    999.500, 9999.50 (L=1) and 19.4957, 199.500, 1999.50 (L=5), printed digits."""
    mu, d = 1e-3, np.array([10.0, 1.0, 0.1])
    for n in (100, 7):
        lr, e = mu * n, d / n
        for depth, expected in ((1, [0.99, 0.999, 0.9999]), (2, [0.98, 0.998, 0.9998]), (5, [0.95, 0.995, 0.9995])):
            np.testing.assert_allclose(T.hacohen_contraction(e, lr, depth), expected, atol=1e-12)
        for depth, expected in ((1, ("99.4992", "999.500", "9999.50")), (5, ("19.4957", "199.500", "1999.50"))):
            rates, efold = T.predicted_pc_rates(e, lr, depth)
            np.testing.assert_allclose(rates * efold, 1.0, rtol=1e-15)
            for value, text in zip(efold, expected):
                assert_digits(value, text, f"n={n} L={depth}")


def _hacohen_gd_run(steps: int = 200):
    """THEORY 4.5's L=1 run in package terms: q=8 inputs, K=2 one-hot classes, n=400, columns of X
    scaled by geomspace(1, .1, 8) (so the PCs have distinct rates), W0 ~ N(0, 1/8), lr = .1 / e_1
    (lr e_j in about [1e-3, .1]); `steps` float64 GD steps on the mean loss. Returns
    (W (steps+1, 8, 2), W0, Sigma_x, Sigma_xy, lr)."""
    rng = np.random.default_rng(12)
    n, q, k = 400, 8, 2
    x = rng.normal(size=(n, q)) * np.geomspace(1.0, 0.1, q)
    y = np.eye(k)[rng.integers(0, k, size=n)]
    sx, sxy = x.T @ x / n, x.T @ y / n
    lr = 0.1 / np.linalg.eigvalsh(sx)[-1]
    w = w0 = rng.normal(size=(q, k)) / math.sqrt(q)
    path = [w0]
    for _ in range(steps):
        w = w - lr * (sx @ w - sxy)
        path.append(w)
    return np.stack(path), w0, sx, sxy, lr


def test_hacohen_l1_gd_matches_eq10():
    """THEORY 4.5: at L=1, GD on the mean loss follows eq. 10 exactly: predicted_pc_trajectory
    (lambda_j = 1 - lr e_j, opt_j = m_j/e_j) equals 200 GD steps to 1e-12 at every step; so do the
    per-PC distances (pc_distances), which are |lambda_j|^s ||w_j^0 - opt_j|| (rtol 1e-9 while above
    1e-6 of the start)."""
    w, w0, sx, sxy, lr = _hacohen_gd_run()
    steps = np.arange(len(w))
    np.testing.assert_allclose(T.predicted_pc_trajectory(w0, sx, sxy, lr, 1, steps), w, atol=1e-12)
    e, _, _ = T.pc_basis(sx, sxy)
    dist = T.pc_distances(w, sx, sxy)
    predicted = np.abs(T.hacohen_contraction(e, lr, 1))[None] ** steps[:, None] * dist[0]
    big = predicted > 1e-6 * dist[0]
    np.testing.assert_allclose(dist[big], predicted[big], rtol=1e-9)


def test_fit_pc_rates_synthetic_and_gd():
    """fit_pc_rates recovers the rates of exact exponentials c_j e^(-r_j s), r = (.3, .02, 1e-4),
    to 1e-9 relative, ignores points below the 1e-12 relative floor (a column that hits exactly 0 after
    step 60 still gives .3), and is NaN with fewer than two points; on the L=1 GD run of
    test_hacohen_l1_gd_matches_eq10 it recovers predicted_pc_rates(e, lr, 1) to 1e-9 relative."""
    steps = np.arange(0, 300)
    rates = np.array([0.3, 0.02, 1e-4])
    dist = np.array([2.0, 0.5, 3.0]) * np.exp(-np.outer(steps, rates))
    np.testing.assert_allclose(T.fit_pc_rates(steps, dist), rates, rtol=1e-9)
    cut = dist[:, 0].copy()
    cut[60:] = 0.0
    assert T.fit_pc_rates(steps, cut)[0] == pytest.approx(0.3, rel=1e-9)
    assert np.isnan(T.fit_pc_rates(steps[:1], dist[:1]))[0]
    w, _, sx, sxy, lr = _hacohen_gd_run()
    e, _, _ = T.pc_basis(sx, sxy)
    fitted = T.fit_pc_rates(np.arange(len(w)), T.pc_distances(w, sx, sxy))
    np.testing.assert_allclose(fitted, T.predicted_pc_rates(e, lr, 1)[0], rtol=1e-9)
