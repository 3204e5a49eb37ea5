"""The baselines of `dlsweep.compare` (the max-margin separator of Gissin et al.'s Figures 6-7,
scikit-learn's orthogonal matching pursuit and the agreement score of their Figure 3), and the
spec rules of the diagonal network's dictionary task (a random w* with a `sparsity` axis,
unit-norm columns, `select`)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import optimize

from dlsweep import compare, spec
from dlsweep.models import diagonal


def dictionary(rows: int = 80, atoms: int = 1000, seed: int = 0) -> np.ndarray:
    """A Gaussian (rows x atoms) matrix with unit-norm columns (NumPy's generator)."""
    x = np.random.default_rng(seed).standard_normal((rows, atoms))
    return x / np.linalg.norm(x, axis=0)


def test_omp_recovers_a_well_separated_sparse_support_largest_first():
    """y = x w* with 3 nonzeros 10, 5, 2 at features 7, 420, 913 of 1000 unit-norm atoms in 80
    dimensions (far inside OMP's exact-recovery regime: coherence ~0.4, s = 3). Expected, by
    construction: OMP's first 3 picks are exactly {7, 420, 913}, feature 7 (the largest) first."""
    x = dictionary()
    w = np.zeros(1000)
    w[[7, 420, 913]] = [10.0, 5.0, 2.0]
    order = compare.omp_order(x, x @ w, 3)
    assert sorted(order.tolist()) == [7, 420, 913] and order[0] == 7


def test_omp_order_does_not_depend_on_column_scale():
    """OMP picks by normalized correlation: scaling the columns of x by 1..1000 (and w* by the
    inverse, so y is unchanged) leaves the order of the first 10 picks of a 10-sparse w* the same."""
    x = dictionary(seed=1)
    rng = np.random.default_rng(2)
    w = np.zeros(1000)
    w[rng.choice(1000, 10, replace=False)] = 1.0 + rng.exponential(10.0, 10)
    scales = np.arange(1.0, 1001.0)
    np.testing.assert_array_equal(compare.omp_order(x * scales, x @ w, 10), compare.omp_order(x, x @ w, 10))


@pytest.mark.parametrize("first, second, expected", [
    ([1, 2, 3], [3, 2, 1], 1.0),
    ([1, 2, 3], [3, 4, 5], 1 / 3),
    ([1, 2, 3], [3, 4], 1 / 2),            # min(sizes) = 2: the network chose only 2
    ([1, 2, 3], [], math.nan),              # nothing chosen: no agreement
])
def test_agreement_is_the_overlap_over_the_smaller_set(first, second, expected):
    """|A & B| / min(|A|, |B|) (THEORY.md, Gissin Fig 3), NaN when a set is empty."""
    got = compare.agreement(np.array(first), np.array(second, dtype=np.int64))
    assert (math.isnan(got) and math.isnan(expected)) or got == pytest.approx(expected, rel=1e-15)


def test_omp_agreement_per_run_uses_the_runs_sparsity_and_selection():
    """One seed's data (x, a random w* as magnitudes and order) and three runs: sparsity 3 with
    OMP's own picks (agreement 1), sparsity 3 with 2 of them and a stranger (2/3), sparsity 1 with
    the wrong feature first then the right one (0: only the first s = 1 counts)."""
    x = dictionary(seed=3)
    rng = np.random.default_rng(4)
    task = {"x": x.astype(np.float32), "magnitudes": 1.0 + rng.exponential(10.0, 1000),
            "order": rng.permutation(1000)}
    support = np.flatnonzero(task["order"] < 3)
    w = np.where(task["order"] < 3, task["magnitudes"], 0.0)
    picks = compare.omp_order(x, x @ w, 3)
    assert sorted(picks.tolist()) == sorted(support.tolist())
    stranger = next(i for i in range(1000) if i not in support)
    runs = pd.DataFrame({"sparsity": [3, 3, 1], "selected": [picks, np.array([picks[0], picks[1], stranger]),
                                                              np.array([stranger, picks[0]])]})
    omp = compare.omp(diagonal.target)
    got = omp.columns(omp.fit(task), runs)["omp_agreement"]
    np.testing.assert_allclose(got, [1.0, 2 / 3, 0.0], rtol=1e-15)


def separable(m: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """m Gaussian examples in d dimensions labelled y = sign <w*, x> by a Gaussian w* (NumPy's
    generator), as Gissin et al.'s classifiers' data: separable through the origin by w*."""
    rng = np.random.default_rng(seed)
    x, w_star = rng.standard_normal((m, d)), rng.standard_normal(d)
    return x, np.sign(x @ w_star), w_star


@pytest.mark.parametrize("m, d", [(200, 100), (40, 5), (30, 60)], ids=["fig6-size", "m>>d", "m<d"])
def test_max_margin_meets_the_optimality_conditions_of_the_hard_margin_svm(m, d):
    """w solves min ||w||^2 / 2 s.t. g_j.w >= 1 (g_j = y_j x_j) iff (KKT, a convex program with
    affine constraints) every g_j.w >= 1 and w = sum_j a_j g_j with a_j >= 0, a_j = 0 wherever
    g_j.w > 1. Checked in float64: margins >= 1 - 1e-9 (the solver's rounding on O(1) data is
    ~1e-13); the active constraints (|g_j.w - 1| < 1e-7) represent w with a >= 0 to 1e-8 of
    ||w|| (the nonnegative least squares of w on them, a problem of its own)."""
    x, y, _ = separable(m, d, seed=m + d)
    w = compare.max_margin(x, y)
    margins = y * (x @ w)
    assert margins.min() >= 1 - 1e-9
    active = np.abs(margins - 1) < 1e-7
    _, residual = optimize.nnls((y[active, None] * x[active]).T, w)
    assert residual <= 1e-8 * np.linalg.norm(w)


def test_max_margin_equals_a_hinge_svm_of_very_large_c():
    """scikit-learn's hinge-loss LinearSVC without intercept at C = 1e4 (its dual's bound on each
    a_j above every a_j of this data, so its optimum is the hard margin's) reaches the same w to
    its tolerance: correlation with w* equal to 1e-6, weights to 1e-4 relative."""
    svm_module = pytest.importorskip("sklearn.svm")
    x, y, w_star = separable(200, 100, seed=6)
    w = compare.max_margin(x, y)
    reference = svm_module.LinearSVC(C=1e4, loss="hinge", fit_intercept=False, tol=1e-10,
                                     max_iter=1_000_000).fit(x, y).coef_.ravel()
    np.testing.assert_allclose(reference, w, rtol=1e-4, atol=1e-4 * np.abs(w).max())
    correlation = compare.svm_correlation({"x": x, "y": y, "w_star": w_star})
    expected = reference @ w_star / np.linalg.norm(reference) / np.linalg.norm(w_star)
    assert correlation == pytest.approx(expected, abs=1e-6)


def test_max_margin_leaves_unlabelled_examples_out_and_refuses_inseparable_data():
    """An example with y = 0 (on the labelling hyperplane) does not constrain w: the separator of
    {(1, 0) -> +1, (0, 2) -> +1} is (1, 1/2) (by hand: both margins 1, the least norm on that
    segment's line), with or without a third example (-5, -5) labelled 0. Two examples x and -x
    with the same label admit no separator through the origin, and examples all labelled 0 leave
    nothing to separate: a ValueError each."""
    x, y = np.array([[1.0, 0.0], [0.0, 2.0]]), np.array([1.0, 1.0])
    np.testing.assert_allclose(compare.max_margin(x, y), [1.0, 0.5], rtol=1e-12)
    np.testing.assert_allclose(compare.max_margin(np.vstack([x, [-5.0, -5.0]]), np.append(y, 0.0)), [1.0, 0.5],
                               rtol=1e-12)
    with pytest.raises(ValueError, match="no linear separator"):
        compare.max_margin(np.array([[1.0, 2.0], [-1.0, -2.0]]), np.array([1.0, 1.0]))
    with pytest.raises(ValueError, match="no labelled example"):
        compare.max_margin(np.ones((3, 2)), np.zeros(3))


DICTIONARY = {"name": "dictionary", "model": "diagonal", "steps": 100,
              "task": {"w_star": "random", "d": 20, "examples": 8, "normalize": True, "select": 0.1},
              "axes": {"depth": [2], "sigma0": [1e-3], "lr": [0.1], "sparsity": [1, 2, 3], "seed": [0, 1]}}


def with_changes(task=None, axes=None, drop_axes=()):
    raw = {**DICTIONARY, "task": {**DICTIONARY["task"], **(task or {})},
           "axes": {k: v for k, v in {**DICTIONARY["axes"], **(axes or {})}.items() if k not in drop_axes}}
    return spec.resolve(raw)


def test_dictionary_task_resolves_with_its_defaults():
    """The dictionary spec resolves: top 5 observed, no targets (so no levels), sparsity an integer
    axis before seed, and `compare` allowed (OMP)."""
    sweep = with_changes()
    assert sweep.task["top"] == 5 and "sigma_star" not in sweep.task and sweep.record.levels == ()
    assert list(sweep.axes) == ["depth", "sigma0", "lr", "sparsity", "seed"]
    assert sweep.axes["sparsity"].dtype.kind == "i"
    assert spec.resolve({**DICTIONARY, "compare": True}).compare


@pytest.mark.parametrize("changes, key, message", [
    ({"drop_axes": ["sparsity"]}, "task.w_star", "needs an axis `sparsity`"),
    ({"task": {"w_star": [1.0, 2.0]}}, "axes.sparsity", 'task.w_star = "random"'),
    ({"axes": {"sparsity": [1, 21]}}, "axes.sparsity", "<= d = 20"),
    ({"axes": {"sparsity": [0, 1]}}, "axes.sparsity", "integers >= 1"),
    ({"axes": {"sparsity": [1.5]}}, "axes.sparsity", "integers >= 1"),
    ({"task": {"loss": "exponential"}}, "task.w_star", 'needs loss = "squared"'),
    ({"task": {"w_star": "sparse"}}, "task.w_star", 'or "random"'),
    ({"task": {"normalize": "yes"}}, "task.normalize", "true or false"),
    ({"task": {"examples": 0}}, "task.normalize", "examples >= 2"),
    ({"task": {"select": -0.1}}, "task.select", ">= 0"),
    ({"task": {"select": True}}, "task.select", ">= 0"),
])
def test_dictionary_task_errors_name_the_key(changes, key, message):
    with pytest.raises(spec.SpecError) as error:
        with_changes(**changes)
    assert f"key '{key}'" in str(error.value) and message in str(error.value), str(error.value)


def test_compare_needs_a_selection_to_compare_with_omp():
    """`compare = true` on the squared loss without `select` has no baseline: a spec error."""
    with pytest.raises(spec.SpecError, match="key 'compare'.*no baseline"):
        spec.resolve({**DICTIONARY, "task": {**DICTIONARY["task"], "select": 0}, "compare": True})
