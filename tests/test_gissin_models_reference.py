"""dlsweep's quadratic network (Gissin et al. 2020, section 4.2, Appendix F; THEORY.md 1.3)
against the independent NumPy float64 reference of tests/gissin_reference.py (hand-derived
gradients from the paper's equations; see that module's docstring for the equations, the init and
the tolerance), and Theorem 5: under the population variance loss the eigenvalues of W^T W follow
the depth-2 toy model's GD exactly.

Each sweep runs once per module. The diagonal and convolutional networks are in
test_gissin_classifiers_reference.py (the same references, split so each file runs in well under
a minute on two shared cores).
"""

from __future__ import annotations

import numpy as np
import pytest

import reference as ref
from dlsweep import api, engine, spec, store
from gissin_reference import LEVELS, SEED, compare, dense, quadratic_reference, resolve, run_sweep

QUADRATIC_SIGMA_STAR = [3.0, 2.0, 1.0]
QUADRATIC_CASES = {
    # name: (examples, loss, bias); d = 4 > k = 3 (one direction has target 0)
    "population_variance": (0, "variance", False),
    "population_squared": (0, "squared", False),
    "data_variance": (30, "variance", False),
    "data_squared": (30, "squared", False),
    "data_squared_bias": (30, "squared", True),
}


def quadratic_sweep(case):
    examples, loss, bias = QUADRATIC_CASES[case]
    axes = {"sigma0": [1e-2, 1e-1], "lr": [1e-2], "seed": [0, 1]}     # population: seeds only re-draw Q
    return resolve(f"quadratic_{case}", "quadratic",
                   {"sigma_star": QUADRATIC_SIGMA_STAR, "d": 4, "examples": examples, "loss": loss, "bias": bias},
                   axes)


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """results(case) -> Result of quadratic_sweep(case), run once per module."""
    done = {}

    def get(case):
        if case not in done:
            done[case] = run_sweep(tmp_path_factory, quadratic_sweep(case))
        return done[case]

    return get


# ----------------------------------------------------------------------------- tests: quadratic


@pytest.mark.parametrize("case", [
    "population_variance",
    "population_squared",
    "data_variance",
    "data_squared",
    "data_squared_bias",
])
def test_quadratic(results, case):
    """Quadratic network, sigma* = (3, 2, 1), d = 4, sigma0 in {1e-2, 1e-1}, lr 1e-2, 300 steps;
    n = 30 examples per seed (seeds 0, 1) or the population loss; variance or squared loss; with
    or without the trainable bias (`QUADRATIC_CASES`).

    Expected: quadratic_reference (NumPy float64 GD with gissin_reference's gradients, init
    from the NumPy QR of the run's (4, 4) normal draw, eigenvalues of W^T W by eigvalsh).
    Tolerance: 1e-9 relative on loss and the 3 eigenvalues at every recorded step, hits exact.
    Negative control: the other loss (variance <-> squared; they differ by the (mean r)^2 term)
    and, with the bias, the bias started at 0, are each off by > 1e-3."""
    result = results(case)
    step0 = dense(result.runs, result.traj, result.record_steps[:1], ["sigma_0", "sigma_1", "sigma_2"])[:, 0]
    np.testing.assert_allclose(step0, np.repeat(result.runs["sigma0"].to_numpy()[:, None], 3, 1), rtol=1e-12)
    wrong = [quadratic_reference(result, "other_loss")]
    if QUADRATIC_CASES[case][2]:
        wrong.append(quadratic_reference(result, "bias_at_zero"))
    compare(result, quadratic_reference(result), f"quadratic {case}", wrong=wrong)


# ----------------------------------------------------------------------------- Theorem 5


THEOREM5_SIGMA_STAR = [12.0, 6.0, 4.0, 3.0]
THEOREM5_AXES = {"sigma0": [1.25e-3, 1.75e-2], "lr": [0.025]}     # eta = c / s*_1 with c = 0.3
THEOREM5_STEPS = 300
THEOREM5_RTOL = 2e-5


def test_theorem5_quadratic_variance_is_the_depth2_toy(tmp_path_factory):
    """Theorem 5 (Gissin et al. 2020, App. F; THEORY.md 1.3): under the population variance loss
    (1/8)||W*^T W* - W^T W||_F^2 from an orthogonal init, GD keeps W in the eigenbasis of W*^T W*
    and each eigenvalue follows sigma <- sigma (1 + (lr/2)(sigma* - sigma))^2, the depth-2 toy
    model's GD (eq. 9 at N = 2). sigma* = (12, 6, 4, 3), d = 6 (two directions with target 0),
    sigma0 in {1.25e-3, 1.75e-2}, lr = 0.025 (c = lr s*_1 = 0.3 < 1: no overshoot, Lemma 1),
    300 steps, float32 (the default dtype), levels 5/50/95%, against the toy model at depth 2.

    Expected: (a) every level of every value is reached after step 0 (all 24 hits in 1..300, so
    the check bites); (b) the quadratic sweep's hit_* columns equal the depth-2 toy sweep's and
    the float64 toy recurrence's (tests/reference.py), exactly; (c) the eigenvalues of both
    float32 sweeps equal the float64 recurrence to THEOREM5_RTOL = 2e-5 relative at every recorded
    step. The tolerance: float32 rounds each operation to eps = 1.2e-7 relative; the logistic
    growth carries a relative error of sigma along without amplifying it (ln sigma grows at a
    rate s* - sigma that does not depend on sigma itself while sigma << s*) and damps it near
    saturation, so the per-step roundings add up to ~sqrt(300) * a few eps ~ 1e-6 (measured:
    1.3e-6 for the quadratic, 8.6e-7 for the toy); 2e-5 leaves 15x room.
    (d) The exact-hit comparison is robust at that tolerance: at every hit the float64 recurrence
    is > 50 * 2e-5 = 1e-3 away from the threshold at the hitting step and the step before
    (reference.Reference.margin; sigma0 was chosen for this: the margins are >= 1.8e-3 here, while
    e.g. sigma0 = 1.2e-3 would put one hit 4e-5 from its threshold), so float32 rounding cannot
    move a hit."""
    common = {"steps": THEOREM5_STEPS, "dtype": "float32", "seed": SEED, "axes": THEOREM5_AXES,
              "record": {"points": 40, "levels": list(LEVELS)}, "stop": {"rel_loss": 0.0}}
    quad = spec.resolve(common | {"name": "theorem5_quadratic", "model": "quadratic",
                                  "task": {"sigma_star": THEOREM5_SIGMA_STAR, "d": 6, "loss": "variance"}})
    toy = spec.resolve(common | {"name": "theorem5_toy", "model": "toy", "task": {"sigma_star": THEOREM5_SIGMA_STAR},
                                 "axes": {"depth": [2]} | THEOREM5_AXES})
    folders = {}
    for sweep in (quad, toy):
        folders[sweep.name] = tmp_path_factory.mktemp(sweep.name)
        api.run(sweep, out=folders[sweep.name], progress_bar=False)
    key = ["sigma0", "lr"]
    q_runs = store.load(folders["theorem5_quadratic"]).sort_values(key, ignore_index=True)
    t_runs = store.load(folders["theorem5_toy"]).sort_values(key, ignore_index=True)
    np.testing.assert_array_equal(q_runs[key].to_numpy(), t_runs[key].to_numpy())
    k = len(THEOREM5_SIGMA_STAR)
    hit_columns = store.hit_columns(k, LEVELS)
    record_steps = engine.record_steps(quad.record.schedule, quad.record.points, quad.steps)
    expected = ref.toy_gd(THEOREM5_SIGMA_STAR, 2, q_runs["sigma0"].to_numpy(), q_runs["lr"].to_numpy(),
                          THEOREM5_STEPS, record_steps, LEVELS)
    # (a) every level reached, none at step 0
    assert (expected.hit >= 1).all()
    # (d) the hits are decided far from the thresholds
    assert expected.margin.min() > 50 * THEOREM5_RTOL, expected.margin.min()
    # (b) equal hits: quadratic == toy == float64 recurrence
    q_hits = q_runs[hit_columns].to_numpy()
    np.testing.assert_array_equal(q_hits, t_runs[hit_columns].to_numpy())
    np.testing.assert_array_equal(q_hits, expected.hit.reshape(len(q_runs), -1))
    # (c) eigenvalues along the recurrence
    columns = [f"sigma_{i}" for i in range(k)]
    got = dense(q_runs, store.load_trajectories(folders["theorem5_quadratic"]), record_steps, columns)
    toy_got = dense(t_runs, store.load_trajectories(folders["theorem5_toy"]), record_steps, columns)
    worst = np.max(np.abs(got / expected.sigma - 1))
    worst_toy = np.max(np.abs(toy_got / expected.sigma - 1))
    print(f"theorem 5: max rel diff quadratic (float32) vs float64 toy recurrence {worst:.1e}, "
          f"toy (float32) vs recurrence {worst_toy:.1e}")
    np.testing.assert_allclose(got, expected.sigma, rtol=THEOREM5_RTOL, atol=0)
    np.testing.assert_allclose(toy_got, expected.sigma, rtol=THEOREM5_RTOL, atol=0)
    # the two directions with target 0 decay, so the top-4 eigenvalues are the targeted ones:
    # at the end each is within 1% of its target
    np.testing.assert_allclose(got[:, -1], np.tile(THEOREM5_SIGMA_STAR, (len(q_runs), 1)), rtol=1e-2)
