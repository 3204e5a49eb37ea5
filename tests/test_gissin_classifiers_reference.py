"""dlsweep's signed diagonal and circular-convolutional networks (Gissin et al. 2020, Appendix D,
section 4.3, Appendices G.1, G.3; THEORY.md 1.1, 1.4) against the independent NumPy float64
references of tests/gissin_reference.py (hand-derived gradients from the paper's equations; the
convolution layers forward and backward as literal index shifts, not FFTs; see that module's
docstring for the equations, the init and the tolerance).

Each sweep runs once per module. The quadratic network and Theorem 5 are in
test_gissin_models_reference.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from gissin_reference import (RTOL, compare, conv_beta, conv_loss_and_grad, conv_reference, diagonal_reference,
                              resolve, run_sweep)

DIAGONAL_W_STAR = [3.0, -2.0, 1.0]
DIAGONAL_CASES = {
    # name: (examples, loss, lr); d = 6 (three zero coordinates), depth 1..3
    "population_squared": (0, "squared", 0.02),
    "data_squared": (20, "squared", 0.02),
    "exponential": (20, "exponential", 0.5),
    "logistic": (20, "logistic", 1.0),
}


LR = 0.05


def dictionary_sweep():
    """App. D's setting, small: 8 unit-norm columns of 6 examples, a random w* per seed with 1-3
    nonzeros, features selected once |sigma_i| > 0.5."""
    task = {"w_star": "random", "d": 8, "examples": 6, "normalize": True, "loss": "squared", "top": 3, "select": 0.5}
    axes = {"depth": [1, 2, 3], "sigma0": [1e-2], "lr": [LR], "sparsity": [1, 2, 3], "seed": [0, 1]}
    return resolve("diagonal_dictionary", "diagonal", task, axes)


def diagonal_sweep(case):
    examples, loss, lr = DIAGONAL_CASES[case]
    axes = {"depth": [1, 2, 3], "sigma0": [1e-2, 1e-1], "lr": [lr]} | ({"seed": [0, 1]} if examples else {})
    task = {"w_star": DIAGONAL_W_STAR, "d": 6, "examples": examples, "loss": loss}
    if loss != "squared":
        task["top"] = 4
    return resolve(f"diagonal_{case}", "diagonal", task, axes)


CONV_CASES = {"exponential": 0.2, "logistic": 0.3}     # loss: lr


def conv_sweep(case):
    task = {"frequencies": [1.0, 0.5, 2.0], "d": 8, "examples": 16, "loss": case, "top": 4}
    axes = {"depth": [1, 2, 3], "sigma0": [0.1, 0.5], "lr": [CONV_CASES[case]], "seed": [0, 1]}
    return resolve(f"conv_{case}", "conv", task, axes)


# ----------------------------------------------------------------------------- fixtures


SWEEPS = ({f"diagonal_{c}": (lambda c=c: diagonal_sweep(c)) for c in DIAGONAL_CASES}
          | {"diagonal_dictionary": dictionary_sweep}
          | {f"conv_{c}": (lambda c=c: conv_sweep(c)) for c in CONV_CASES})


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """results(name) -> Result of the sweep `SWEEPS[name]`, run once per module."""
    done = {}

    def get(name):
        if name not in done:
            done[name] = run_sweep(tmp_path_factory, SWEEPS[name]())
        return done[name]

    return get


# ----------------------------------------------------------------------------- tests: diagonal


@pytest.mark.parametrize("case", list(DIAGONAL_CASES))
def test_diagonal(results, case):
    """Signed diagonal network, w* = (3, -2, 1, 0, 0, 0), N in {1, 2, 3}, sigma0 in {1e-2, 1e-1},
    300 steps: the population squared loss (lr 0.02), or m = 20 examples per seed (seeds 0, 1)
    with the squared (lr 0.02), exponential (lr 0.5) or logistic (lr 1) loss (labels
    sign <w*, x>, w* unit-normalized; the 4 largest |sigma_i| observed).

    Expected: diagonal_reference (NumPy float64 GD, sigma(0) = 0, gissin_reference's
    gradients). Tolerance: 1e-9 relative on loss and |sigma| at every recorded step (step 0 is
    exactly 0 on both sides), hits exact (squared loss: targets |w*_i| = 3, 2, 1), and the
    correlation <sigma, w*>/(|sigma||w*|) of the final sigma to 1e-9. Negative control: the
    untied normalization 1/N instead of 1/N^2 is off by > 1e-3 at N = 2, 3."""
    result = results(f"diagonal_{case}")
    worst = compare(result, diagonal_reference(result), f"diagonal {case}",
                    wrong=[diagonal_reference(result, "1/(2N)")], has_correlation=True)
    assert worst["correlation"] < RTOL
    # the correlation is informative: the final predictors point roughly along w*
    assert (result.runs["correlation"] > 0.5).all()


def test_diagonal_dictionary(results):
    """App. D's sparse recovery, small: x with 6 rows and 8 unit-norm columns per seed (seeds 0,
    1), w* drawn per seed with sparsity s in {1, 2, 3} (nested supports: the first s features of
    one random order, magnitudes 1 + Exp(mean 10)), N in {1, 2, 3}, sigma0 1e-2, lr 0.3, 300
    steps, the squared loss; a feature is selected once |sigma_i| > 0.5.

    Expected: diagonal_reference on the drawn magnitudes and order (unit column norms checked to
    1e-13). Tolerance: as test_diagonal, and the order of selection and the step of each
    selection exactly equal (`selected`, `selected_at`). Negative control: 1/N for 1/N^2."""
    result = results("diagonal_dictionary")
    worst = compare(result, diagonal_reference(result), "diagonal dictionary",
                    wrong=[diagonal_reference(result, "1/(2N)")], has_correlation=True)
    assert worst["selected"] >= 20              # selections happened and were compared
    # w* differs per seed and sparsity; the selections do too
    orders = {tuple(run.selected) for run in result.runs.itertuples()}
    assert len(orders) >= 6


# ----------------------------------------------------------------------------- tests: conv


@pytest.mark.parametrize("case", list(CONV_CASES))
def test_conv(results, case):
    """Circular-convolutional network, d = 8, labelling vector irfft(1, 0.5, 2, 0, 0) normalized,
    m = 16 examples per seed (seeds 0, 1), N in {1, 2, 3}, sigma0 in {0.1, 0.5}, 300 steps,
    exponential (lr 0.2) or logistic (lr 0.3) loss, the 4 largest of the 5 Fourier amplitudes.

    Expected: conv_reference (NumPy float64 GD with the forward pass and backprop written as index
    shifts, no FFT except for the observed amplitudes |rfft(beta)|, beta = f(e_j)). Tolerance:
    1e-9 relative on loss and amplitudes at every recorded step and on the final correlation.
    Negative control: layers with (i - k) in place of (i + k) (a convolution instead of the
    paper's correlation-indexed layer) are off by > 1e-3 at N = 2, 3."""
    result = results(f"conv_{case}")
    compare(result, conv_reference(result), f"conv {case}", wrong=[conv_reference(result, "(i-k)")],
            has_correlation=True)


def test_conv_reference_is_the_fft_product():
    """Sanity of the conv reference itself (no package code): for random layers, the beta of the
    index-shift forward pass has rfft(beta) = prod_n rfft(w_n) (Gunasekar et al. 2018, the
    identity the package's FFT shortcut relies on) to 1e-12, and the backprop gradient equals a
    central finite difference to 1e-6 relative."""
    rng = np.random.default_rng(0)
    d, depth, m = 7, 3, 5
    layers = {f"w{n}": rng.normal(size=d) for n in range(depth)}
    beta = conv_beta(layers, d)
    np.testing.assert_allclose(np.fft.rfft(beta), np.prod([np.fft.rfft(w) for w in layers.values()], axis=0),
                               rtol=1e-12, atol=1e-12)
    x, y = rng.normal(size=(m, d)), np.sign(rng.normal(size=m))
    for loss_kind in CONV_CASES:
        fn = conv_loss_and_grad(loss_kind, x, y)
        _, grads = fn(layers)
        for name in layers:
            for k in range(d):
                step = 1e-6
                up = {n: v.copy() for n, v in layers.items()}
                down = {n: v.copy() for n, v in layers.items()}
                up[name][k] += step
                down[name][k] -= step
                numeric = (fn(up)[0] - fn(down)[0]) / (2 * step)
                np.testing.assert_allclose(grads[name][k], numeric, rtol=1e-6, atol=1e-9)
