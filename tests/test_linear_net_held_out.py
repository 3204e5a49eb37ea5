"""Labelled data with held-out examples for `linear_net` (Hacohen & Weinshall, section 6.1 and
Figure 9a): the synthetic Gaussian classes against their definition, the amplification of the
highest or lowest principal directions against an independent NumPy computation of the paper's
recipe, and the held-out accuracy against the NumPy float64 reference GD of
tests/linear_net_reference.py.

- classes: x = mu_c + z, c uniform on the classes, z ~ N(0, diag(lambda)), the class means nonzero
  on the first `signal` coordinates only, training and held-out examples centred by the training
  mean (linear_net.classes). Checked on 40,000 examples by sampling statistics, each within 5
  standard errors of its expectation (a chance failure ~1e-6 per check): class shares (binomial
  SE), the per-class means beyond `signal` equal across classes (SE sqrt(lambda_i / n_c)), the
  within-class covariance diag(lambda) (SE lambda_i sqrt(2 / n) on the diagonal, sqrt(lambda_i
  lambda_j / n) off it).
- amplification (Appendix D.1): with U_k the k highest or lowest eigenvectors of the training
  Sigma_x = X^T X / n on its support (eigenvalues above 1e-6 of the largest), X <- c X (I + (f - 1)
  U_k U_k^T) and the held-out X alike, c keeping ||X||_F: equal to this file's NumPy computation
  to 1e-12 relative (float64, a few operations on O(1) entries), and the amplified Sigma_x's
  eigenvalues those of the original with the chosen ones times f^2, all times c^2 (1e-9 of the
  largest: eigenvalues of a symmetric float64 matrix are exact to ~1e-15 of its norm).
- test_accuracy: the share of held-out examples whose largest output x W is at their label, equal
  as a count to the reference's at every recorded step (margins checked far above the rounding).
"""

from __future__ import annotations

import numpy as np
import pytest

import linear_net_reference as lnr
from gissin_reference import dense, resolve, run_sweep
from dlsweep.models import linear_net

SE = 5.0        # standard errors allowed a sampled statistic
EIGENVALUES = [1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125]
CLASSES = {"data": "classes", "eigenvalues": EIGENVALUES, "classes": 3, "signal": 2, "separation": 2.0,
           "width": 4, "init": "glorot"}
AXES = {"depth": [1], "sigma0": [1.0], "lr": [0.1], "seed": [0]}


def validated(task: dict) -> dict:
    return resolve("held_out", "linear_net", task, AXES).task


def unexpected(key: str, message: str) -> AssertionError:
    return AssertionError(f"{key}: {message}")


def test_classes_follow_their_definition():
    """40,000 training and 20,000 held-out examples of 3 classes in d = 6, signal 2, separation 2
    (module docstring): one-hot labels with shares 1/3; the training examples centred (mean 0 to
    1e-12); per class, the training and held-out means agree, the means differ between classes on
    the first 2 coordinates (by more than 20 SE) and agree beyond them; the within-class covariance
    is diag(lambda)."""
    task = validated(CLASSES | {"examples": 40_000, "test_examples": 20_000})
    data = linear_net.labelled_data(task, 3, unexpected)
    x, labels = data["x"], np.argmax(data["y"], axis=1)
    x_test, test_labels = data["x_test"], np.argmax(data["y_test"], axis=1)
    lam = np.array(EIGENVALUES)
    assert x.shape == (40_000, 6) and x_test.shape == (20_000, 6)
    for y in (data["y"], data["y_test"]):
        assert set(np.unique(y)) == {0.0, 1.0} and np.all(y.sum(axis=1) == 1)
    np.testing.assert_allclose(x.mean(axis=0), 0.0, atol=1e-12)
    shares = np.bincount(labels, minlength=3) / len(labels)
    assert np.all(np.abs(shares - 1 / 3) < SE * np.sqrt((1 / 3) * (2 / 3) / len(labels))), shares
    means = np.stack([x[labels == c].mean(axis=0) for c in range(3)])
    counts = np.bincount(labels, minlength=3)
    held_out = np.stack([x_test[test_labels == c].mean(axis=0) for c in range(3)])
    both = np.sqrt(lam * (1 / counts[:, None] + 1 / np.bincount(test_labels, minlength=3)[:, None]))
    assert np.all(np.abs(means - held_out) < SE * both)
    pair_se = np.sqrt(lam * (1 / counts[0] + 1 / counts[1:, None]))         # class 0 against 1 and 2
    assert np.all(np.abs(means[1:, :2] - means[0, :2]) > 20 * pair_se[:, :2])
    assert np.all(np.abs(means[1:, 2:] - means[0, 2:]) < SE * pair_se[:, 2:])
    within = np.concatenate([x[labels == c] - means[c] for c in range(3)])
    covariance = within.T @ within / len(within)
    se = np.sqrt(np.outer(lam, lam) / len(within))
    np.fill_diagonal(se, lam * np.sqrt(2 / len(within)))
    assert np.all(np.abs(covariance - np.diag(lam)) < SE * se), covariance


def amplified_by_numpy(raw: dict, kind: str, k: int, factor: float) -> tuple[dict, float, np.ndarray]:
    """The paper's recipe on the unamplified data: (amplified x and x_test, c, the chosen
    directions' mask over the ascending eigenvalues of the support)."""
    x = raw["x"]
    lam, vectors = np.linalg.eigh(x.T @ x / len(x))
    support = lam > 1e-6 * lam.max()
    vectors, count = vectors[:, support], int(support.sum())
    chosen = np.zeros(count, bool)
    chosen[slice(count - k, count) if kind == "highest" else slice(0, k)] = True
    u = vectors[:, chosen]
    amplify = np.eye(x.shape[1]) + (factor - 1) * u @ u.T
    c = np.linalg.norm(x) / np.linalg.norm(x @ amplify)
    return {"x": c * x @ amplify, "x_test": c * raw["x_test"] @ amplify}, c, chosen


@pytest.mark.parametrize("data,kind,k,factor", [("classes", "lowest", 2, 10.0), ("classes", "highest", 1, 10.0),
                                                ("digits", "lowest", 2, 5.0), ("digits", "highest", 3, 10.0)])
def test_amplification_follows_the_paper(data, kind, k, factor):
    """Classes (200 training, 50 held out) and the first 300 digits (100 held out): the amplified
    data equal the NumPy recipe (module docstring; 1e-12 relative), the total variance is kept,
    the labels are untouched, and Sigma_x's eigenvalues on the support become c^2 lambda_i, times
    f^2 for the chosen directions (the digits' constant pixels stay at 0 variance, never chosen)."""
    base = CLASSES | {"examples": 200, "test_examples": 50} if data == "classes" else {
        "data": "digits", "examples": 300, "test_examples": 100, "width": 4}
    raw = linear_net.labelled_data(validated(base), 0, unexpected)
    got = linear_net.labelled_data(validated(base | {"amplify": kind, "amplify_pcs": k, "amplify_factor": factor}), 0,
                                   unexpected)
    expected, c, chosen = amplified_by_numpy(raw, kind, k, factor)
    for name in ("x", "x_test"):
        lnr.assert_close(got[name], expected[name], 1e-12, f"amplified {name}")
    for name in ("y", "y_test"):
        np.testing.assert_array_equal(got[name], raw[name])
    assert np.linalg.norm(got["x"]) == pytest.approx(np.linalg.norm(raw["x"]), rel=1e-12)
    lam = np.linalg.eigvalsh(raw["x"].T @ raw["x"] / len(raw["x"]))
    support = lam > 1e-6 * lam.max()
    scaled = lam.copy()
    scaled[np.flatnonzero(support)[chosen]] *= factor**2
    after = np.linalg.eigvalsh(got["x"].T @ got["x"] / len(got["x"]))
    np.testing.assert_allclose(after, np.sort(c**2 * scaled), rtol=0, atol=1e-9 * after.max())


@pytest.mark.parametrize("extra,lr", [({"amplify": "lowest"}, 0.3), ({"whiten": True, "shuffle": True}, 0.2)])
def test_held_out_accuracy_follows_the_reference(tmp_path_factory, extra, lr):
    """Classes in d = 6 (3 classes, 30 training and 200 held-out examples), glorot init at width 4,
    depths 1 and 2, seeds 0 and 1, 300 float64 steps; the lowest direction amplified 10 times (lr
    0.3), or the examples ZCA-whitened and the training labels shuffled per seed (lr 0.2: the
    whitened eigenvalues are 1). The drawn Sigma_x, Sigma_xy are those of the checked data, Z X and
    the drawn labels (1e-12; shuffled: a permutation of the true labels, never of the held-out
    ones), and `accuracy` and `test_accuracy` equal the reference's counts at every recorded step,
    with the held-out examples mapped by the training examples' Z; unshuffled, the held-out accuracy
    rises above chance (1/3) by the end (measured in this test)."""
    task = CLASSES | {"examples": 30, "test_examples": 200} | extra
    axes = {"depth": [1, 2], "sigma0": [1.0], "lr": [lr], "seed": [0, 1]}
    result = run_sweep(tmp_path_factory, resolve(f"linear_net_held_out_{len(extra)}", "linear_net", task, axes))
    assert not result.runs.diverged.any()
    data = linear_net.labelled_data(result.sweep.task, result.sweep.seed, unexpected)
    x, true_labels, test_labels = data["x"], np.argmax(data["y"], axis=1), np.argmax(data["y_test"], axis=1)
    lam, vectors = np.linalg.eigh(x.T @ x / 30)
    z = vectors @ np.diag(1.0 / np.sqrt(lam)) @ vectors.T if extra.get("whiten") else np.eye(6)   # full rank: n > d
    got = dense(result.runs, result.traj, result.record_steps, ["accuracy", "test_accuracy"])
    for row, run in enumerate(result.runs.itertuples()):
        drawn = {name: np.asarray(value, np.float64) for name, value in result.data(run.seed).items()}
        labels = np.asarray(result.data(run.seed)["labels"])
        if extra.get("shuffle"):
            assert sorted(labels) == sorted(true_labels) and np.any(labels != true_labels)
        else:
            np.testing.assert_array_equal(labels, true_labels)
        lnr.assert_close(drawn["sigma_x"], z @ x.T @ x @ z / 30, 1e-12, "Sigma_x of the data")
        lnr.assert_close(drawn["sigma_xy"], z @ x.T @ np.eye(3)[labels] / 30, 1e-12, "Sigma_xy of the data")
        np.testing.assert_array_equal(drawn["test_labels"], test_labels)
        stats = {name: drawn[name] for name in ("sigma_x", "sigma_xy", "pcs", "w_opt", "w_ref")} | {
            "offset": float(drawn["offset"])}
        counts, margin = lnr.accuracy_paths(result, run, stats, [(x @ z, labels), (data["x_test"] @ z, test_labels)])
        assert margin > 1e-9, run
        np.testing.assert_array_equal(np.rint(got[row] * [30, 200]), counts, err_msg=str(run))
        if not extra.get("shuffle"):
            assert got[row][-1, 1] > 0.5, run


@pytest.mark.parametrize("task,key,message", [
    ({"data": "spectrum", "eigenvalues": [1.0], "amplify": "lowest"}, "amplify", "unknown key"),
    (CLASSES | {"amplify_pcs": 2}, "amplify_pcs", 'only with amplify = "highest" or "lowest"'),
    (CLASSES | {"amplify": "lowest", "amplify_pcs": 6}, "amplify_pcs", "fewer than the 6 principal directions"),
    (CLASSES | {"amplify": "lowest", "examples": 4, "amplify_pcs": 3}, "amplify_pcs", "fewer than the 3"),
    (CLASSES | {"amplify": "middle"}, "amplify", "expected one of"),
    (CLASSES | {"eigenvalues": [0.5, 1.0]}, "eigenvalues", "descending"),
    (CLASSES | {"power_law": 2.0}, "power_law", "either eigenvalues or power_law"),
    (CLASSES | {"amplify": "lowest", "whiten": True}, "amplify", "whitening undoes"),
    (CLASSES | {"signal": 7}, "signal", "at most d = 6"),
    ({"data": "digits", "examples": 1700, "test_examples": 200}, "test_examples", "at most the 97 digits"),
    ({"data": "digits", "amplify": "highest", "amplify_pcs": 62}, "amplify_pcs", "digits' nonzero variance"),
])
def test_held_out_options_name_the_key(task, key, message):
    from dlsweep.errors import SpecError

    with pytest.raises(SpecError, match=message) as info:
        validated(task)
    assert key in str(info.value)


def test_amplifying_more_directions_than_the_support_names_the_key():
    """A steep spectrum (lambda_i = i^-4, d = 64, 80 examples) leaves only some directions above the
    support cut (1e-6 of the largest eigenvalue), which the drawn data alone tell: amplifying 40 of
    them is refused when the task's arrays are made, naming the key and the count, before anything
    is compiled."""
    from dlsweep import api
    from dlsweep.errors import SpecError

    sweep = resolve("steep", "linear_net", {"data": "classes", "power_law": 4.0, "amplify": "lowest",
                                            "amplify_pcs": 40, "width": 4}, AXES)
    with pytest.raises(SpecError, match=r"key 'task.amplify_pcs': expected fewer than the \d+ principal directions"):
        api.compile_inputs(sweep)


def test_early_stopping_needs_held_out_examples(tmp_path):
    """api.early_stopping on runs without `test_accuracy` (classes with test_examples = 0) raises a
    ThresholdError that names the folder and the key to set; with held-out examples it gives one
    row per run: peak the largest recorded held-out accuracy, peak_step the first recorded step at
    it, last the accuracy at the run's last recorded step, gain = peak - last. The same runs'
    spread of w_j over the seeds is defined (every seed has the sweep's one draw of the classes)."""
    from dlsweep import api
    from dlsweep.errors import ThresholdError

    for held_out in (0, 50):
        folder = tmp_path / f"held-out-{held_out}"
        sweep = resolve(f"held_out_{held_out}", "linear_net",
                        CLASSES | {"examples": 20, "test_examples": held_out, "pc_weights": [1]},
                        AXES | {"seed": [0, 1]}, steps=30, points=10)
        api.run(sweep, out=folder, progress_bar=False)
        if not held_out:
            with pytest.raises(ThresholdError, match="test_examples") as info:
                api.early_stopping(folder)
            assert str(folder) in str(info.value)
            continue
        table = api.early_stopping(folder).set_index("run_id").sort_index()
        traj = api.load_trajectories(folder)
        assert len(table) == 2
        for run_id, row in table.iterrows():
            path = traj[traj.run_id == run_id].sort_values("step")
            accuracy = path.test_accuracy.to_numpy()
            assert row.peak == accuracy.max() and row["last"] == accuracy[-1]
            assert row.peak_step == path.step.to_numpy()[np.argmax(accuracy)]
            assert row.gain == pytest.approx(row.peak - row["last"], abs=0)
        spread = api.pc_weight_spread(folder)
        assert spread.seeds.eq(2).all() and spread["std"].notna().all()


def test_the_digits_are_scikit_learns_and_missing_scikit_learn_says_what_to_install(monkeypatch):
    """`linear_net.digits` reads the file scikit-learn ships without importing it: the pixels and
    labels equal `sklearn.datasets.load_digits()`'s exactly (pixels / 16, centred by the first n,
    one-hot labels; the held-out images follow). Where scikit-learn is not installed the error
    names the extra to install."""
    import importlib.util

    from sklearn.datasets import load_digits

    loaded = load_digits()
    data = linear_net.digits(100, 50)
    x = loaded.data[:150] / 16.0
    np.testing.assert_array_equal(data["x"], x[:100] - x[:100].mean(axis=0))
    np.testing.assert_array_equal(data["x_test"], x[100:] - x[:100].mean(axis=0))
    np.testing.assert_array_equal(np.argmax(data["y"], axis=1), loaded.target[:100])
    np.testing.assert_array_equal(np.argmax(data["y_test"], axis=1), loaded.target[100:150])
    linear_net._digits_table.cache_clear()
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    try:
        with pytest.raises(ImportError, match=r"dlsweep\[compare\]"):
            linear_net.digits(10)
    finally:
        monkeypatch.undo()
        linear_net._digits_table.cache_clear()
