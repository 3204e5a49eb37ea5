"""dlsweep's toy model (Gissin et al. 2020, sec. 2) against an independent NumPy float64
reference (tests/reference.py) and against the closed forms of Theorem 1.

Every sweep runs once per module (fixtures below) and is small, so the whole file takes seconds.
Each test says what value it expects, from where, and to what tolerance.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import reference as ref
from dlsweep import api, engine, spec, store

SIGMA_STAR = [12.0, 6.0, 4.0, 3.0]
LEVELS = [0.05, 0.5, 0.95]
K = len(SIGMA_STAR)
SIGMA_COLUMNS = [f"sigma_{i}" for i in range(K)]
KEY = ["depth", "sigma0", "lr"]
HIT_COLUMNS = [f"hit_{i}_{pct}" for i in range(K) for pct in ("5", "50", "95")]

# The float64 grid of tests a, b, d: depths 1, 2, 3, 5, 8, sigma0 from 1e-3 to 0.5, learning
# rates up to 1e-2 (Lemma 1's no-overshoot bound at N = 8 is 0.0129 for s* = 12, THEORY.md 2.4),
# 3000 steps: some values reach all levels, some none, so hits are a mix of steps and -1.
GRID = {"depth": [1, 2, 3, 5, 8], "sigma0": [1e-3, 0.05, 0.5], "lr": [1e-3, 4e-3, 1e-2]}
# Learning rates at which GD blows up for every (depth, sigma0) of GRID (from the reference; at
# N = 1 GD is w - s* <- (1 - eta)(w - s*), unstable for eta > 2, so the blow-up is late near 2:
# eta = 2.0032 fires the blow-up test at step 2168 and is restored to check point 2104, which is
# not a recorded step (the records there are 1976 and 2296); eta = 2.05 is restored to recorded
# step 125; deeper models blow up at once).
DIVERGENT_LRS = [2.0032, 2.05, 3.0]
STEPS = 3000


def sweep_spec(name, steps, axes, dtype="float64", record=None, stop=None):
    raw = {"name": name, "model": "toy", "steps": steps, "dtype": dtype, "task": {"sigma_star": SIGMA_STAR},
           "axes": axes, "record": record or {"schedule": "log", "points": 60, "levels": LEVELS},
           "stop": {"rel_loss": 0.0} | (stop or {})}   # rel_loss 0: never stopped as converged
    return spec.resolve(raw)


def run_sweep(tmp_path_factory, sweep, **kwargs):
    """(sweep, runs table, trajectories table, recorded steps) of one api.run."""
    folder = tmp_path_factory.mktemp(sweep.name)
    api.run(sweep, out=folder, progress_bar=False, **kwargs)
    steps = engine.record_steps(sweep.record.schedule, sweep.record.points, sweep.steps)
    return sweep, store.load(folder), store.load_trajectories(folder), steps


def run_reference(runs, steps, record_steps):
    return ref.toy_gd(SIGMA_STAR, runs["depth"].to_numpy(), runs["sigma0"].to_numpy(), runs["lr"].to_numpy(),
                      steps, record_steps, LEVELS)


def dense(runs, traj, record_steps, column_names):
    """Trajectory columns as (B, R, c) in the runs' order; NaN where a run has no row."""
    index = pd.MultiIndex.from_product([runs["run_id"], record_steps], names=["run_id", "step"])
    frame = traj.set_index(["run_id", "step"]).reindex(index)
    return frame[column_names].to_numpy().reshape(len(runs), len(record_steps), len(column_names))


def expected_row_steps(record_steps, steps_run):
    """Steps of a run's trajectory rows (store.chunk_frames since commit 9bddeb8, "frozen
    trajectories end with a row at their stop step"): the recorded steps before steps_run, and
    steps_run itself (a recorded step or not). For a run that never stopped: every recorded step."""
    return np.union1d(record_steps[record_steps < steps_run], [steps_run])


def hits(runs):
    return runs[HIT_COLUMNS].to_numpy().reshape(len(runs), K, len(LEVELS))


def loss_tolerance(sigma, loss, depth, rtol):
    """|d loss| for sigma known to relative `rtol`: loss = sum r^2/(2N^2) with r = sigma - s*, and
    (r + d)^2 - r^2 = 2 r d + d^2, so with |d_i| <= rtol |sigma_i|:
    |d loss| <= sum (|r_i| d_i + d_i^2 / 2) / N^2, plus rtol * loss for the rounding of the loss
    itself. A plain relative test on the loss would be wrong: near convergence r is a difference
    of nearly equal numbers (the loss of a float32 run bottoms out near ulp(s*)^2, not at 0)."""
    residual = np.abs(sigma - np.asarray(SIGMA_STAR))
    d = rtol * np.abs(sigma)            # sigma = w^N < 0 for odd N once GD has overshot through 0
    return rtol * loss + np.sum(residual * d + d * d / 2, axis=-1) / np.asarray(depth, float)[:, None] ** 2


def check_points(record_steps, check_every):
    """Steps at which the engine tests divergence (engine.run_chunk / engine.settle): blocks of
    `check_every` steps started afresh at every recorded step, so every recorded step and every
    `check_every` steps after one."""
    points = set()
    for a, b in zip(record_steps[:-1], record_steps[1:]):
        points.update(range(int(a) + check_every, int(b), check_every))
        points.add(int(b))
    return np.array(sorted(points), np.int64)


@pytest.fixture(scope="module", params=["batched", "one-by-one"])
def layout(request):
    """Both CPU layouts: batched (block peaks and replays) and one by one (what this small work
    runs by default, `engine.SMALL_WORK_FLOPS`)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(engine, "SMALL_WORK_FLOPS", 0.0 if request.param == "batched" else np.inf)
        yield request.param


@pytest.fixture(scope="module")
def f64_grid(tmp_path_factory, layout):
    """GRID in float64, cut into chunks of 16 (45 runs: the last chunk is padded)."""
    return run_sweep(tmp_path_factory, sweep_spec("f64", STEPS, GRID), chunk_size=16)


@pytest.fixture(scope="module")
def f64_grid_divergent(tmp_path_factory, layout):
    """GRID plus DIVERGENT_LRS, default chunking (90 runs, one chunk: another batch size)."""
    axes = GRID | {"lr": GRID["lr"] + DIVERGENT_LRS}
    return run_sweep(tmp_path_factory, sweep_spec("f64div", STEPS, axes))


# ----------------------------------------------------------------------------- a, b: float64 exact


def test_float64_sigma_matches_numpy_reference(f64_grid):
    """(a) sigma_i at every recorded step equals the NumPy float64 GD loop (reference.toy_gd,
    eqs. 3 and 9) to 1e-10 relative.

    Why 1e-10: both sides are float64 GD with the same operations up to order (autodiff + optax
    vs the closed gradient): rounding differs by a few 1e-16 per step; over 3000 steps, with the
    N >= 3 sensitivity to early errors ((s*/sigma0)^(1-2/N) <= 1.2e3 here), that stays below
    ~1e-12 (observed max ~2e-14). A wrong exponent, normalization (1/N vs 1/N^2) or init is off by
    far more than 1e-10. The loss is checked with the first-order tolerance of loss_tolerance."""
    sweep, runs, traj, record_steps = f64_grid
    assert len(runs) == 45 and not runs["diverged"].any() and not runs["converged"].any()
    assert (runs["steps_run"] == STEPS).all()
    assert len(traj) == len(runs) * len(record_steps)
    expected = run_reference(runs, STEPS, record_steps)
    sigma = dense(runs, traj, record_steps, SIGMA_COLUMNS)
    np.testing.assert_allclose(sigma, expected.sigma, rtol=1e-10, atol=0)
    loss = dense(runs, traj, record_steps, ["loss"])[..., 0]
    tolerance = loss_tolerance(expected.sigma, expected.loss, runs["depth"], 1e-10)
    assert np.all(np.abs(loss - expected.loss) <= tolerance)
    np.testing.assert_array_equal(runs["final_loss"], loss[:, -1])
    # step 0 is the init of eq. 3: sigma_i(0) = sigma0 (to rounding of (sigma0^(1/N))^N)
    np.testing.assert_allclose(sigma[:, 0, :], np.repeat(runs["sigma0"].to_numpy()[:, None], K, 1), rtol=1e-14)


def test_float64_hits_match_numpy_reference(f64_grid):
    """(b) every hit_<i>_<pct> column equals the reference's first step t in 0..steps with
    sigma_i(t) >= level * sigma*_i (checked at every step), -1 if none: exactly.

    Exact equality is well posed only if no sigma at a decisive step lies within the 1e-10 of
    test (a) of its threshold; asserted first (reference margin > 1e-9, observed min ~2e-7)."""
    sweep, runs, traj, record_steps = f64_grid
    assert [c for c in runs.columns if c.startswith("hit_")] == HIT_COLUMNS
    expected = run_reference(runs, STEPS, record_steps)
    assert expected.margin.min() > 1e-9
    got = hits(runs)
    assert (got == -1).any() and (got == 0).any() and ((got > 0)).any()   # the grid exercises all cases
    np.testing.assert_array_equal(got, expected.hit)


# ----------------------------------------------------------------------------- c: Theorem 1


@pytest.mark.parametrize("depth, sigma_star, sigma0, t, expected", [
    (1, 12.0, 0.1, 1.0, 7.62223),
    (2, 12.0, 0.1, 0.5, 9.26661),
    (2, 6.0, 0.1, 0.5, 1.52383),
    (2, 4.0, 0.1, 0.5, 0.637138),
    (2, 3.0, 0.1, 0.5, 0.401565),
    (2, 12.0, 1e-3, 0.5, 0.390339),
])
def test_theorem1_closed_forms(depth, sigma_star, sigma0, t, expected):
    """Theorem 1 closed forms (reference.sigma_gf_n1 / sigma_gf_n2) give THEORY.md 4.1's values to
    their 6 significant digits (|error| <= half a unit of the last printed digit), and agree with
    a DOP853 solution of eq. 4 to 1e-9 relative (solver rtol 1e-12)."""
    closed = {1: ref.sigma_gf_n1, 2: ref.sigma_gf_n2}[depth](t, sigma_star, sigma0)
    half_ulp = 0.5 * 10.0 ** (np.floor(np.log10(expected)) - 5)
    assert abs(closed - expected) <= half_ulp
    np.testing.assert_allclose(ref.sigma_gf_ode([t], sigma_star, sigma0, depth)[0], closed, rtol=1e-9)


def test_theorem1_infinite_depth_time():
    """Theorem 1, N = inf: t(sigma = 6) for s* = 12, sigma0 = 0.1 is 0.852633 (THEORY.md 4.1, 6
    digits); the DOP853 solution of d sigma/dt = sigma^2 (s* - sigma) at that time is 6 (1e-9)."""
    t = ref.time_gf_ninf(6.0, 12.0, 0.1)
    assert abs(t - 0.852633) <= 5e-7
    np.testing.assert_allclose(ref.sigma_gf_ode([t], 12.0, 0.1, np.inf)[0], 6.0, rtol=1e-9)


@pytest.fixture(scope="module")
def gd_vs_gf(tmp_path_factory):
    """N in {1, 2, 3}, sigma0 in {0.1, 1e-3}, four learning rates, 4000 steps, recorded every 50
    steps (linear schedule, 81 points), so step 50 and t = 0.5 at every lr are recorded."""
    axes = {"depth": [1, 2, 3], "sigma0": [0.1, 1e-3], "lr": [1e-2, 1e-3, 5e-4, 2.5e-4]}
    record = {"schedule": "linear", "points": 81, "levels": LEVELS}
    return run_sweep(tmp_path_factory, sweep_spec("gdgf", 4000, axes, record=record))


def test_gd_theory_numbers(gd_vs_gf):
    """THEORY.md 4.1, GD (eq. 9), sigma0 = 0.1, s* = 12, eta = 0.01, 50 steps: N = 2 gives
    9.15984, N = 3 gives 9.09485 (6 significant digits: |error| <= 5e-6). And GF at N = 2, t = 0.5
    is 9.26661 (Theorem 1); the package's smallest-lr run (eta = 2.5e-4, step 2000) is within the
    O(eta) bound of test_gd_follows_theorem1_n2: |ln(sigma_GD/sigma_GF)| <= (h/4)(ln(s*/sigma0) + 2),
    h = eta s* = 3e-3, i.e. 3.4e-3 relative (observed 1.7e-3)."""
    sweep, runs, traj, record_steps = gd_vs_gf
    at = traj.merge(runs[["run_id"] + KEY], on="run_id").set_index(KEY + ["step"])["sigma_0"]
    assert abs(at[(2, 0.1, 1e-2, 50)] - 9.15984) <= 5e-6
    assert abs(at[(3, 0.1, 1e-2, 50)] - 9.09485) <= 5e-6
    gf = ref.sigma_gf_n2(0.5, 12.0, 0.1)
    assert abs(gf - 9.26661) <= 5e-6
    bound = (2.5e-4 * 12.0 / 4) * (np.log(12.0 / 0.1) + 2)
    assert abs(np.log(at[(2, 0.1, 2.5e-4, 2000)] / 9.26661)) <= bound


def test_gd_follows_theorem1_n2(gd_vs_gf):
    """N = 2, eta <= 1e-3: sigma_i(k) follows Theorem 1's logistic at t = eta k.

    Expected: sigma_GF(t) (reference.sigma_gf_n2). Tolerances (reference.gd_gf_n2_first_order
    derives them): GD vs GF differ at O(h), h = eta s*_i; to first order
    ln(sigma_GD / sigma_GF) = e(tau) = (h/4)(1-x)(3 ln((1-x0)/(1-x)) - tau), so
      - |ln(sigma_GD/sigma_GF)| <= (h/4)(ln(s*/sigma0) + 2)       (the O(eta) bound; observed <= 0.55x),
      - |ln(sigma_GD/sigma_GF) - e(tau)| <= h^2                   (the O(eta^2) remainder; observed
        coefficient <= 0.5 on this grid, also at h = 0.12),
      - the gap halves with eta: max gap(eta) / max gap(eta/2) in [1.9, 2.1] (first order)."""
    sweep, runs, traj, record_steps = gd_vs_gf
    sel = runs[(runs["depth"] == 2) & (runs["lr"] <= 1e-3)]
    sigma = dense(sel, traj, record_steps, SIGMA_COLUMNS)
    s_star = np.asarray(SIGMA_STAR)[None, None, :]
    lr = sel["lr"].to_numpy()[:, None, None]
    sigma0 = sel["sigma0"].to_numpy()[:, None, None]
    t = lr * record_steps[None, :, None]
    gap = np.log(sigma / ref.sigma_gf_n2(t, s_star, sigma0))
    h = lr * s_star
    assert np.all(np.abs(gap) <= (h / 4) * (np.log(s_star / sigma0) + 2))
    assert np.all(np.abs(gap - ref.gd_gf_n2_first_order(t, s_star, sigma0, lr)) <= h**2)
    worst = pd.Series(np.abs(gap).max(axis=(1, 2)), index=pd.MultiIndex.from_frame(sel[["sigma0", "lr"]]))
    for sigma0_value in (0.1, 1e-3):
        for lr_value in (1e-3, 5e-4):
            ratio = worst[(sigma0_value, lr_value)] / worst[(sigma0_value, lr_value / 2)]
            assert 1.9 <= ratio <= 2.1


def test_gd_follows_theorem1_n1(gd_vs_gf):
    """N = 1: eq. 9 is linear, so the GD iterate is exactly s* + (sigma0 - s*)(1 - eta)^k
    (reference.sigma_gd_n1) to 1e-11 relative: each GD step rounds by at most ~3 u s* (u = 1.1e-16)
    and the error decays by (1 - eta) a step, the reference's (1 - eta)^k is off by k u relative,
    so both stay within 4 u s* min(k, 1/eta), against sigma >= s* (1 - e^(-k eta)) >= s* min(k eta,
    1) / 2: at most 8 u / eta = 3.5e-12 at the smallest eta, 2.5e-4 (measured 5.5e-13). And it stays
    within |sigma0 - s*| eta / (2e(1 - eta)) (+1e-12) of Theorem 1's s* + (sigma0 - s*) e^(-t),
    t = eta k (bound derived in reference.sigma_gd_n1). That bound is sharp at t = 1, so the run
    comes within 1.5e-4 of it (3e-6 absolute), still 1e5 times the float64 rounding of sigma."""
    sweep, runs, traj, record_steps = gd_vs_gf
    sel = runs[runs["depth"] == 1]
    sigma = dense(sel, traj, record_steps, SIGMA_COLUMNS)
    s_star = np.asarray(SIGMA_STAR)[None, None, :]
    lr = sel["lr"].to_numpy()[:, None, None]
    sigma0 = sel["sigma0"].to_numpy()[:, None, None]
    k = record_steps[None, :, None]
    np.testing.assert_allclose(sigma, ref.sigma_gd_n1(k, s_star, sigma0, lr), rtol=1e-11)
    gf = ref.sigma_gf_n1(lr * k, s_star, sigma0)
    assert np.all(np.abs(sigma - gf) <= np.abs(sigma0 - s_star) * lr / (2 * np.e * (1 - lr)) + 1e-12)


def test_gd_n3_first_order_in_lr(gd_vs_gf):
    """N = 3 has no closed form (Theorem 1 covers N = 1, 2, inf); GD still converges to the GF of
    eq. 4 at first order: with the GF from DOP853 (rtol 1e-12), the largest |ln(sigma_GD/sigma_GF)|
    over t <= 1 halves with eta (ratio in [1.85, 2.15]) and is below 2 eta s*_1 ln(s*/sigma0)."""
    sweep, runs, traj, record_steps = gd_vs_gf
    worst = {}
    for lr_value in (1e-3, 5e-4, 2.5e-4):
        for sigma0_value in (0.1, 1e-3):
            row = runs[(runs["depth"] == 3) & (runs["lr"] == lr_value) & (runs["sigma0"] == sigma0_value)]
            steps = record_steps[(record_steps > 0) & (lr_value * record_steps <= 1.0)]
            sigma = dense(row, traj, steps, SIGMA_COLUMNS)[0]
            gf = np.stack([ref.sigma_gf_ode(lr_value * steps, s, sigma0_value, 3) for s in SIGMA_STAR], axis=1)
            worst[lr_value, sigma0_value] = np.abs(np.log(sigma / gf)).max()
            assert worst[lr_value, sigma0_value] <= 2 * lr_value * 12.0 * np.log(12.0 / sigma0_value)
    for sigma0_value in (0.1, 1e-3):
        for lr_value in (1e-3, 5e-4):
            assert 1.85 <= worst[lr_value, sigma0_value] / worst[lr_value / 2, sigma0_value] <= 2.15


# ----------------------------------------------------------------------------- d: divergence


def expected_stop(reference, all_steps, checks, blowup):
    """Per run, from the reference: the first check point where the engine's divergence test
    fires (non-finite sigma or loss, or loss > blowup * loss(0)) and the last check point before
    it (the state a diverged run is restored to), or (-1, steps) if none fires."""
    at = {int(s): j for j, s in enumerate(all_steps)}
    cols = [at[int(c)] for c in checks]
    loss = reference.loss[:, cols]
    finite = np.isfinite(loss) & np.all(np.isfinite(reference.sigma[:, cols, :]), axis=-1)
    with np.errstate(invalid="ignore"):
        bad = ~finite | (loss > blowup * reference.loss[:, :1])
    fired = bad.any(axis=1)
    first = np.where(fired, bad.argmax(axis=1), -1)
    restored = np.where(fired, np.where(first > 0, checks[np.maximum(first - 1, 0)], 0), checks[-1])
    # the decisive comparisons are not borderline: (loss / (blowup * loss0)) not within 1e-6 of 1
    ratio = loss / (blowup * reference.loss[:, :1])
    with np.errstate(invalid="ignore"):
        assert not np.any(np.abs(ratio - 1) < 1e-6)
    return fired, restored


def test_divergent_lr_rows_frozen_and_others_unchanged(f64_grid, f64_grid_divergent):
    """(d) GRID + DIVERGENT_LRS (lr 2.005, 2.05, 3.0: GD blows up for every depth and sigma0).

    Expected for the divergent rows: diverged True, converged False, steps_run = the last check
    point before the first one where the reference (eq. 9 in float64) shows non-finite values or
    loss > blowup * loss(0) (check points: check_points()), final_loss finite and equal to the
    reference loss there (loss_tolerance at 1e-10), trajectory rows exactly at
    expected_row_steps (recorded steps before steps_run, then steps_run) with sigma = reference
    (1e-10), hits = reference hits that are <= steps_run, else -1.

    Expected for every other row: bit-identical to the run of GRID alone (all runs columns but
    run_id, and all of its trajectory rows), matched on (depth, sigma0, lr); the engine promises
    that a trajectory never depends on the others in its chunk (here: other batch size and
    chunking too)."""
    sweep, runs, traj, record_steps = f64_grid_divergent
    _, base_runs, base_traj, _ = f64_grid

    checks = check_points(record_steps, sweep.stop.check_every)
    all_steps = np.union1d(record_steps, checks)
    expected = run_reference(runs, STEPS, all_steps)
    fired, restored = expected_stop(expected, all_steps, checks, sweep.stop.blowup)
    divergent = runs["lr"].isin(DIVERGENT_LRS).to_numpy()
    np.testing.assert_array_equal(fired, divergent)          # the grid is what this test says it is
    assert restored[divergent].max() >= 1000                 # a late divergence: restored past many checks
    assert not np.isin(restored[divergent], record_steps).all()   # ... and one between recorded steps

    div = runs[divergent]
    assert div["diverged"].all() and not div["converged"].any()
    np.testing.assert_array_equal(div["steps_run"], restored[divergent])
    assert np.isfinite(div["final_loss"]).all()
    at = np.searchsorted(all_steps, restored[divergent])
    loss_expected = expected.loss[divergent, at]
    sigma_expected = expected.sigma[divergent, at]
    tolerance = loss_tolerance(sigma_expected[:, None], loss_expected[:, None], div["depth"], 1e-10)[:, 0]
    assert np.all(np.abs(div["final_loss"].to_numpy() - loss_expected) <= tolerance)
    hit_expected = np.where(expected.hit[divergent] <= restored[divergent][:, None, None], expected.hit[divergent], -1)
    np.testing.assert_array_equal(hits(div), hit_expected)

    div_traj = traj[traj["run_id"].isin(div["run_id"])]
    for run_id, steps_run, row in zip(div["run_id"], div["steps_run"], np.nonzero(divergent)[0]):
        rows = div_traj[div_traj["run_id"] == run_id]
        np.testing.assert_array_equal(rows["step"], expected_row_steps(record_steps, steps_run))
        cols = np.searchsorted(all_steps, rows["step"])
        np.testing.assert_allclose(rows[SIGMA_COLUMNS].to_numpy(), expected.sigma[row, cols], rtol=1e-10)

    # every other row: identical to GRID run alone
    others = runs[~divergent].drop(columns="run_id")
    merged = others.merge(base_runs.drop(columns="run_id"), on=KEY, how="outer", suffixes=("", "_base"),
                          indicator=True)
    assert (merged["_merge"] == "both").all() and len(merged) == len(base_runs)
    for column in others.columns.difference(KEY):
        np.testing.assert_array_equal(merged[column], merged[f"{column}_base"], err_msg=column)

    def keyed(table, run_table):
        frame = table.merge(run_table[["run_id"] + KEY], on="run_id").drop(columns="run_id")
        return frame.set_index(KEY + ["step"]).sort_index()

    mine = keyed(traj[traj["run_id"].isin(runs["run_id"][~divergent])], runs)
    pd.testing.assert_frame_equal(mine, keyed(base_traj, base_runs), check_exact=True)


# ----------------------------------------------------------------------------- e: float32


def test_float32_default_run_close_to_float64_reference(tmp_path_factory):
    """(e) Default dtype (float32), N in {1, 2, 3}, sigma0 in {0.05, 0.5}, lr in {1e-3, 1e-2},
    2000 steps: sigma at every recorded step within 1e-4 relative of the float64 reference.

    Why 1e-4: float32's unit roundoff is u = 6e-8, and each GD step rounds the stored w by up
    to ~u (plus ~u |update / w| from the update itself). Random-walk accumulation over 2000 steps
    gives ~sqrt(2000) u = 2.7e-6 in w, x N <= 3 in sigma = w^N, x at most (s*/sigma0)^(1-2/N) <= 6
    for the N = 3 sensitivity to early errors: ~5e-5 (observed max ~1e-5). A float64 computation
    would agree to ~1e-13, so the run must also differ by more than 1e-9 somewhere (it really ran
    in float32). Hits: equal where the reference's margin exceeds 1e-3 (10x the sigma tolerance),
    otherwise within one step. Loss: loss_tolerance at 1e-4."""
    axes = {"depth": [1, 2, 3], "sigma0": [0.05, 0.5], "lr": [1e-3, 1e-2]}
    raw_spec = sweep_spec("f32", 2000, axes, dtype="float32")
    assert raw_spec.dtype == "float32"
    sweep, runs, traj, record_steps = run_sweep(tmp_path_factory, raw_spec)
    assert not runs["diverged"].any()
    all_steps = np.union1d(record_steps, runs["steps_run"])   # a stopped run's last row is at steps_run
    expected = run_reference(runs, 2000, all_steps)
    sigma = dense(runs, traj, all_steps, SIGMA_COLUMNS)
    present = ~np.isnan(sigma[..., 0])
    for row, steps_run in enumerate(runs["steps_run"]):
        np.testing.assert_array_equal(all_steps[present[row]], expected_row_steps(record_steps, steps_run))
    # a run stops before 2000 steps only as converged with loss exactly 0 (rel_loss = 0)
    assert (runs["converged"] == (runs["steps_run"] < 2000)).all()
    assert (runs.loc[runs["converged"], "final_loss"] == 0).all()
    rel = np.abs(sigma[present] / expected.sigma[present] - 1)
    assert rel.max() <= 1e-4
    assert rel.max() > 1e-9
    loss = dense(runs, traj, all_steps, ["loss"])[..., 0]
    tolerance = loss_tolerance(expected.sigma, expected.loss, runs["depth"], 1e-4)
    assert np.all(np.abs(loss - expected.loss)[present] <= tolerance[present])
    got, want = hits(runs), expected.hit
    safe = expected.margin > 1e-3
    np.testing.assert_array_equal(got[safe], want[safe])
    assert np.all(np.abs(got - want)[~safe] <= 1)
