"""dlsweep's deep linear regression network `linear_net` (Gidel et al. 2019; Hacohen & Weinshall;
THEORY.md 1.5, 1.6) against the independent NumPy float64 reference of tests/linear_net_reference.py
(hand-derived gradients W_{1:l-1}^T (Sigma_x W - Sigma_xy) W_{l+1:L}^T; see that module's docstring
for the equations, the checks of the drawn statistics and init, and the tolerance).

Every sweep is float64, 300 steps, 20 log-spaced recorded steps, tiny (d <= 5, width <= 6), and
runs once per module. Each comparison: loss, the top-k singular values, nuclear norm, ||W||_F^2,
reconstruction error and pc_distance_j at every recorded step to 1e-9 relative; hits exactly
where the task has targets; negative controls "1/L" (gradients divided by the depth) and
"no_pinv" (W_opt = Sigma_xy) off by > 1e-3. Learning rates give lr lambda_max(Sigma_x) <= 0.3
(asserted < 1 per seed by the reference); near W_opt a depth-L net's curvature is ~L lambda
sigma^(2-2/L) with sigma ~ 1 here, so lr L lambda_max < 2 and no run diverges.

Time: most of it is XLA compiling the package's five chunk programs (two to four times longer for
the gaussian / glorot inits and for a two-seed axis); whitening and label shuffling share one
sweep for that reason, each checked against the program's own draw with its flag off.
"""

from __future__ import annotations

import numpy as np
import pytest

import linear_net_reference as lnr
from gissin_reference import dense, resolve, run_sweep

SIGMA0 = [1e-2, 3e-2, 1e-1, 3e-1]
SPECTRUM = {"data": "spectrum", "eigenvalues": [2.0, 1.0, 0.5], "noise": 0.1, "width": 4, "init": "aligned"}
CASES = {
    # name: (task, axes); population cases have no seed axis (the statistics are not drawn)
    "aligned_padded": (SPECTRUM, {"depth": [1, 2, 3], "sigma0": SIGMA0, "lr": [0.05]}),
    "aligned_unpadded": (SPECTRUM, {"depth": [2], "sigma0": SIGMA0, "lr": [0.05]}),
    "sampled_gaussian": ({"data": "spectrum", "eigenvalues": [2.0, 1.0, 0.5, 0.25], "w_true": [1.0, -0.5],
                          "examples": 20, "noise": 0.1, "width": 5, "init": "gaussian"},
                         {"depth": [1, 2], "sigma0": [1e-2, 1e-1], "lr": [0.05], "seed": [0, 1]}),
    "autoencoder_glorot": ({"data": "autoencoder", "d": 5, "eigenvalues": [4.0, 2.0], "examples": 50,
                            "noise": 0.01, "width": 6, "init": "glorot", "top": 2},
                           {"depth": [2, 3], "sigma0": [1e-2, 1e-1], "lr": [0.02], "shape": [1 / 3, -1 / 3],
                            "seed": [0, 1]}),
    "whitened_shuffled": ({"data": "spectrum", "eigenvalues": [2.0, 0.5, 0.125], "w_true": [1.0, 0.5, -1.0],
                           "examples": 20, "noise": 0.1, "width": 4, "init": "aligned", "whiten": True,
                           "shuffle": True},
                          {"depth": [1, 2], "sigma0": [1e-2, 1e-1], "lr": [0.05], "seed": [0, 1]}),
}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """results(case) -> Result of CASES[case], run once per module."""
    done = {}

    def get(case):
        if case not in done:
            task, axes = CASES[case]
            done[case] = run_sweep(tmp_path_factory, resolve(f"linear_net_{case}", "linear_net", task, axes))
        return done[case]

    return get


def check(result, label):
    """The module docstring's comparison with both negative controls."""
    return lnr.compare_linear_net(result, lnr.reference(result), label,
                                  wrong=[lnr.reference(result, variant) for variant in lnr.VARIANTS])


# ----------------------------------------------------------------------------- tests


def test_population_aligned_padded(results):
    """Population spectrum lambda = (2, 1, 0.5), W* = I_3, label noise 0.1 (offset 1/2 sum lambda +
    3 * 0.01 / 2 = 1.765), width 4, aligned init, depths 1, 2, 3 in one sweep (max depth 3: depth 2
    has one padded identity layer), sigma0 in SIGMA0, lr 0.05 (lr lambda_max = 0.1).

    Expected: the reference (module docstring), with Sigma_x = diag(lambda), Sigma_xy = diag(lambda)
    W*, offset exactly; W(0) = sigma0 U I V^T from NumPy's SVD; targets sigma* = (1, 1, 1) (the
    singular values of W_opt = W*), hits exact and >= 3 reached after step 0. Tolerance 1e-9
    relative. At depth 1 the reference's final W also equals Gidel's eq. 21 closed form
    W_opt + (I - lr Sigma_x)^300 (W_0 - W_opt) to 1e-12 relative (a check of the reference itself)."""
    result = results("aligned_padded")
    assert result.sweep.task["sigma_star"] == (1.0, 1.0, 1.0)
    data = lnr.statistics(result, 0)
    assert data["offset"] == pytest.approx(1.765, rel=1e-15)
    check(result, "population aligned padded")
    right = lnr.memoized(lnr.reference(result))
    for run in result.runs.itertuples():
        if run.depth == 1:
            out = right(run)
            decay = np.linalg.matrix_power(np.eye(3) - run.lr * data["sigma_x"], result.sweep.steps)
            closed = data["w_opt"] + decay @ (out.w0 - data["w_opt"])
            lnr.assert_close(out.w, closed, 1e-12, f"Gidel eq. 21 {run}")


def test_population_aligned_unpadded_equals_padded(results):
    """The same depth-2 runs as test_population_aligned_padded in a sweep whose max depth is 2 (no
    padded layer): equal to the reference at 1e-9 relative (as there), and the depth-2 trajectories
    of the two sweeps (loss and every observed column, matched by sigma0) equal to 1e-12 relative
    or within the distances' absolute floor 1e-13 ||W_opt||_2 (only the padding, an exact identity
    factor, differs: its products are exact, so the two differ by at most the rounding order of
    the compiled programs; measured: bitwise equal)."""
    unpadded = results("aligned_unpadded")
    check(unpadded, "population aligned unpadded")
    padded = results("aligned_padded")
    columns = [c for c in unpadded.traj.columns if c not in ("run_id", "step")]
    deep = padded.runs[padded.runs["depth"] == 2].sort_values("sigma0", ignore_index=True)
    mine = unpadded.runs.sort_values("sigma0", ignore_index=True)
    np.testing.assert_array_equal(deep["sigma0"].to_numpy(), mine["sigma0"].to_numpy())
    a = dense(deep, padded.traj, padded.record_steps, columns)
    b = dense(mine, unpadded.traj, unpadded.record_steps, columns)
    floor = lnr.DISTANCE_ATOL * np.linalg.norm(lnr.statistics(unpadded, 0)["w_opt"], 2)
    print(f"padded vs unpadded depth 2: max abs diff {np.max(np.abs(a - b)):.1e}")
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=floor)


def test_sampled_gaussian(results):
    """Spectrum data sampled per seed: n = 20 examples of x ~ N(0, diag(2, 1, 0.5, 0.25)),
    y = x W* + N(0, 0.1^2), W* = diag(1, -0.5) (4 x 2), width 5, gaussian init, depths 1, 2,
    sigma0 in {1e-2, 1e-1}, lr 0.05, seeds 0, 1 (no targets: sigma* depends on the sample).

    Expected: the reference from the drawn statistics after the loose checks (Sigma_x within 5
    std of diag(lambda), Sigma_xy - Sigma_x W* within 5 std of the noise's X^T eps / n, the noise
    energy within 5 std of p noise^2 / 2); init from the package's unit draw (the one use of its
    code) times the documented scales, equal to its init to 1e-14; the unit draw's variances
    1/h (first), 1/p (last, single) within 30% (or 4 standard errors) pooled over the sweep.
    Tolerance 1e-9 relative; negative controls off by > 1e-3."""
    result = results("sampled_gaussian")
    print("unit-draw variance / documented:", lnr.check_init_variances(result))
    assert "sigma_star" not in result.sweep.task
    check(result, "sampled gaussian")


def test_autoencoder_glorot_shape(results):
    """Gidel's linear autoencoder (section 4.2): x = B z + N(0, 0.01^2) (not the default 1e-3: its
    noise eigenvalues ~1e-6 fall below the support cut and the loss would end ~1e-6 of its start,
    where the cancellation in 1/2 tr(W^T Sigma_x W) - tr(W^T Sigma_xy) + offset costs ~1e-9),
    z ~ N(0, diag(4, 2)), B 5 x 2 uniform, y = x, n = 50 per seed, width 6, glorot init with the
    shape axis s in {1/3, -1/3}, i.e. layer ratios rho = (1 - s)/(1 + s) = 1/2 and 2 (s_1 = sigma0^(1/L)
    rho^((L-1)/L), s = sigma0^(1/L) rho^(-1/L)),
    depths 2, 3, sigma0 in {1e-2, 1e-1}, lr 0.02 (lr lambda_max(Sigma_x) < 1, asserted per seed),
    seeds 0, 1.

    Expected: Sigma_xy = Sigma_x exactly, offset = tr(Sigma_x)/2, W_ref = B D B^T symmetric of
    rank 2 and within 50% of Sigma_x in the 2-norm; W_opt = pinv(Sigma_x) Sigma_xy = I (to 1e-9:
    the rounding of a solve at cond(Sigma_x) ~ 1e5); the layers equal the unit draw times the shape's
    documented scales (1e-14), unit variances 1/h in every layer (glorot: first, hidden, last)
    within 30% over the sweep; targets sigma* = (1, 1) (the task's: the latent directions, top = 2),
    hits exact. Tolerance 1e-9 relative; negative controls off by > 1e-3."""
    result = results("autoencoder_glorot")
    assert result.sweep.task["sigma_star"] == (1.0,) * 2
    print("unit-draw variance / documented:", lnr.check_init_variances(result))
    for seed in (0, 1):     # full support (noise eigenvalues ~1e-4 >> the cut): W_opt = I, as sigma* says
        lnr.assert_close(lnr.statistics(result, seed)["w_opt"], np.eye(5), 1e-9, "W_opt = I")
    check(result, "autoencoder glorot shape")


def test_whitened_shuffled(results):
    """Spectrum data sampled per seed (n = 20, lambda = (2, 0.5, 0.125), W* = diag(1, 0.5, -1),
    noise 0.1), labels shuffled and inputs ZCA-whitened per seed in the program (one sweep for both
    per-seed transformations: each is checked against the same program's draw with its flag off),
    aligned init (from the whitened, shuffled Sigma_xy's singular vectors), depths 1, 2, sigma0 in
    {1e-2, 1e-1}, lr 0.05 (whitened Sigma_x = I), seeds 0, 1.

    Expected: the shuffle (unwhitened draws, with and without it) keeps Sigma_x and 1/(2n) ||Y||^2
    (1e-14 relative) and changes Sigma_xy by > 1% (a permutation of the labels), and the
    unshuffled labels pass the loose label checks; the whitened Sigma_x equals the projector on
    the unwhitened one's support (here I) and Sigma_xy = Sigma_x^(-1/2) Sigma_xy(unwhitened) by
    NumPy's eigh (1e-12 relative), the offset unchanged, pcs those of the unwhitened Sigma_x;
    W(0) = sigma0 U I V^T from NumPy's SVD; no targets (sampled data). Tolerance 1e-9 relative;
    the "1/L" control off by > 1e-3 ("no_pinv" coincides with the right reference here: Sigma_x = I)."""
    result = results("whitened_shuffled")
    assert "sigma_star" not in result.sweep.task
    lnr.compare_linear_net(result, lnr.reference(result), "whitened shuffled", wrong=[lnr.reference(result, "1/L")])
