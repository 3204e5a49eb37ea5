"""Independent NumPy float64 gradient-descent reference for the deep linear regression network
`linear_net` (Gidel et al. 2019, eqs. 2, 7, 11, 21, 28; Hacohen & Weinshall; THEORY.md 1.5, 1.6),
written from the papers' equations: hand-derived gradients, no package model code for the
dynamics or the observables, no autodiff, no optax. Used by test_linear_net_reference.py.

    W = W_1 W_2 ... W_L (d x p; W_1 d x h, hidden h x h, W_L h x p; depth 1: W itself)
    loss  l = 1/2 tr(W^T Sigma_x W) - tr(W^T Sigma_xy) + offset,  offset = 1/(2n) ||Y||_F^2
    grad  dl/dW_l = W_{1:l-1}^T (Sigma_x W - Sigma_xy) W_{l+1:L}^T   (Gidel eq. 11; W_{1:0} = I_d,
          W_{L+1:L} = I_p); GD W_l <- W_l - lr dl/dW_l, all layers at once (Gidel eq. 5). Only the
          run's L layers exist here: the package's unused (padded) hidden layers are the identity,
          and a padded sweep must equal an unpadded one (tested).
    depth 1 has the closed form W_t = W_opt + (I - lr Sigma_x)^t (W_0 - W_opt) (Gidel eq. 21).
    observed  sigma: the k largest singular values of W; nuclear_norm: their sum over all;
          norm_squared ||W||_F^2; reconstruction_error ||W - W_ref||_2 (W_ref = B D B^T for the
          autoencoder, Gidel eq. 28, else W_opt); pc_distance_j = ||row_j(U^T (W - W_opt))|| with
          U the eigenvectors of the (unwhitened) Sigma_x, eigenvalues descending (Hacohen's w_j).
    scales  s_1 = sigma0^(1/L) rho^((L-1)/L) (W_1), s = sigma0^(1/L) rho^(-1/L) (the others).

Data: the per-seed statistics the program drew (`engine.draw_task`: sigma_x, sigma_xy, offset,
pcs, w_opt, w_ref, xy_left, xy_right) are used only after checking what can be recomputed here
(`statistics`): population `spectrum` data exactly (Sigma_x = diag(lambda), Sigma_xy =
diag(lambda) W*, offset = 1/2 sum lambda_i w*_i^2 + p noise^2 / 2); sampled data loosely (the
labels' relation Sigma_xy - Sigma_x W* = X^T eps / n within 5 standard deviations, the noise
energy, the Gram matrix's positivity, the autoencoder's y = x); whitening and label shuffling
against the same program's draw with the flag off (the draw of one seed shares its data key);
pcs orthonormal eigenvectors with descending eigenvalues; W_opt = pinv(Sigma_x) Sigma_xy by NumPy
(eigenvalues below SUPPORT_RTOL times the largest count as 0, the documented cut; each case
checks that no eigenvalue is within a factor 3 of the cut, so the convention decides nothing
borderline); xy_left, xy_right singular vectors of Sigma_xy.

Init: `aligned` layers are built here from the checked xy_left, xy_right, and the end-to-end
W(0) is checked against sigma0 sum_i u_i v_i^T from NumPy's SVD (sign-free where the singular
values are distinct). `gaussian` and `glorot` draws cannot be reproduced in NumPy: THE ONE PLACE
THE PACKAGE'S MODEL CODE IS USED is `LinearNet.init` with the run's key fold_in(key(SEED),
run_id) at sigma0 = 1, shape = 0 (the unit draw, `unit_layers`); the layers are that draw times
the scales computed here, checked to equal the package's init at the run's sigma0 and shape
(1e-14), the unused hidden layers to be exactly the identity, and the unit draw's variances
(1/h for W_1 and hidden layers, 1/p (gaussian) or 1/h (glorot) for W_L, 1/p at depth 1) within
30% pooled over the sweep (`check_init_variances`).

Tolerance (`compare_linear_net`): 1e-9 relative at every recorded step on loss, sigma and the
observables above, float64 on both sides (only the rounding order differs, ~1e-16 per operation;
300 steps of a contracting GD keep it below 1e-11, as measured); reconstruction_error and
pc_distance also pass within an absolute floor DISTANCE_ATOL * max(||W_opt||_2, ||W_ref||_2) =
1e-13 * that: they are distances of W to a fixed map, so once GD has brought W within ~1e-7 of
it their rounding (~1e-16 ||W||, absolute) exceeds 1e-9 of the distance (the points that need
the floor are counted in the printed report). Hits exactly where the task has targets (the
observe vector's other entries get infinite targets, so they never hit). Negative controls
(`VARIANTS`): "1/L" and "no_pinv" off by > 1e-3 in some column.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from dlsweep import engine
from gissin_reference import RTOL, SEED, Result, compare, dense, gradient_descent

SUPPORT_RTOL = 1e-6         # eigenvalues of Sigma_x below this times the largest count as 0 (documented)
CUT_MARGIN = 3.0            # no eigenvalue within this factor of the cut (the support is unambiguous)
OBSERVED = ("nuclear_norm", "norm_squared", "reconstruction_error", "pc_distance")
DISTANCES = ("reconstruction_error", "pc_distance")
DISTANCE_ATOL = 1e-13       # times max(||W_opt||_2, ||W_ref||_2): the rounding floor of a distance to them
INIT_VARIANCE_RTOL = 0.3    # the unit draw's variance per layer, pooled over a sweep
VARIANTS = ("1/L", "no_pinv")


def seed_of(run) -> int:
    return int(getattr(run, "seed", 0))


def scales(sigma0: float, depth: int, shape: float = 0.0) -> tuple[float, float]:
    """(s_1, s): the first layer's scale and the others' (the module docstring): s_1 / s = rho =
    (1 - shape) / (1 + shape) and s_1 s^(L-1) = sigma0."""
    ratio = (1.0 - shape) / (1.0 + shape)
    scale = sigma0 ** (1.0 / depth)
    return scale * ratio ** ((depth - 1.0) / depth), scale * ratio ** (-1.0 / depth)


def product(layers: list[np.ndarray]) -> np.ndarray:
    out = layers[0]
    for layer in layers[1:]:
        out = out @ layer
    return out


def assert_close(got, expected, rtol, what, scale=None):
    """|got - expected| <= rtol * scale entrywise (scale: max |expected|, or given)."""
    expected = np.asarray(expected, np.float64)
    scale = np.max(np.abs(expected)) if scale is None else scale
    np.testing.assert_allclose(got, expected, rtol=0, atol=rtol * scale, err_msg=what)


# ----------------------------------------------------------------------------- the data, checked


def twin_draw(result: Result, seed: int, **flags) -> dict:
    """The same program's draw for `seed` with task flags changed (whiten=False, shuffle=False):
    one seed's data key is the same, so the examples are the same before the flag acts."""
    task = result.task | {name: np.asarray(value) for name, value in flags.items()}
    return engine.draw_task(result.program, task, seed, result.sweep.seed)


def check_pcs(sigma_x: np.ndarray, pcs: np.ndarray) -> np.ndarray:
    """pcs orthonormal eigenvectors of sigma_x, eigenvalues descending; returns the eigenvalues,
    checked against NumPy's eigvalsh."""
    d = sigma_x.shape[0]
    scale = np.linalg.norm(sigma_x, 2)
    assert_close(pcs.T @ pcs, np.eye(d), 1e-13, "pcs orthonormal", scale=1.0)
    rotated = pcs.T @ sigma_x @ pcs
    lam = np.diag(rotated)
    assert_close(rotated, np.diag(lam), 1e-13, "pcs diagonalize Sigma_x", scale=scale)
    assert np.all(np.diff(lam) <= 0), f"eigenvalues not descending: {lam}"
    assert_close(lam, np.linalg.eigvalsh(sigma_x)[::-1], 1e-13, "eigenvalues", scale=scale)
    return lam


def check_support(lam: np.ndarray) -> None:
    """No eigenvalue of Sigma_x within CUT_MARGIN of the support cut SUPPORT_RTOL * lambda_max."""
    ratio = lam / lam[0] / SUPPORT_RTOL
    assert np.all((ratio > CUT_MARGIN) | (ratio < 1.0 / CUT_MARGIN)), f"eigenvalues near the support cut: {lam}"


def check_sampled_labels(task, sigma_x, sigma_xy, offset, n):
    """Spectrum samples y = x W* + eps, eps ~ N(0, noise^2): R = Sigma_xy - Sigma_x W* = X^T eps / n
    has entries of std noise sqrt(Sigma_x,ii / n) (within 5 std); offset - 1/2 tr(W*^T Sigma_x W*) -
    tr(W*^T R) = ||eps||^2 / (2n), a chi-square of n p degrees of freedom around p noise^2 / 2
    (within 5 std); Sigma_x within 5 std of diag(lambda) (entry std sqrt((lambda_i lambda_j +
    delta_ij lambda_i^2) / n))."""
    lam, w_star, noise, p = np.array(task["eigenvalues"]), w_true(task), task["noise"], task["p"]
    spread = np.sqrt((np.outer(lam, lam) + np.diag(lam**2)) / n)
    assert np.all(np.abs(sigma_x - np.diag(lam)) <= 5 * spread), "Sigma_x far from diag(eigenvalues)"
    residual = sigma_xy - sigma_x @ w_star
    assert np.all(np.abs(residual) <= 5 * noise * np.sqrt(np.diag(sigma_x) / n)[:, None] + 1e-13), \
        "Sigma_xy - Sigma_x W* too large for the label noise"
    energy = offset - 0.5 * np.sum(w_star * (sigma_x @ w_star)) - np.sum(w_star * residual)
    mean = p * noise**2 / 2
    assert abs(energy - mean) <= 5 * mean * np.sqrt(2.0 / (n * p)) + 1e-13, (energy, mean)


def w_true(task) -> np.ndarray:
    """W* (d x p) with the task's w_true on its diagonal."""
    w = np.zeros((task["d"], task["p"]))
    w[np.arange(task["p"]), np.arange(task["p"])] = task["w_true"]
    return w


def check_raw(task, sigma_x, sigma_xy, offset, drawn):
    """The unwhitened, unshuffled statistics of one seed against what the task says about them."""
    d = task["d"]
    assert_close(sigma_x, sigma_x.T, 1e-15, "Sigma_x symmetric")
    if task["data"] == "spectrum" and task["examples"] == 0:       # population: exact
        lam, w_star = np.array(task["eigenvalues"]), w_true(task)
        np.testing.assert_array_equal(sigma_x, np.diag(lam))
        assert_close(sigma_xy, lam[:, None] * w_star, 1e-15, "population Sigma_xy")
        assert_close(offset, 0.5 * np.sum(lam[:, None] * w_star**2) + 0.5 * task["p"] * task["noise"] ** 2,
                     1e-15, "population offset")
    elif task["data"] == "spectrum":
        check_sampled_labels(task, sigma_x, sigma_xy, offset, task["examples"])
    else:                                                           # autoencoder: y = x
        np.testing.assert_array_equal(sigma_xy, sigma_x)
        assert_close(offset, 0.5 * np.trace(sigma_x), 1e-14, "autoencoder offset")
        w_ref = drawn["w_ref"]                                      # B D B^T: symmetric PSD, rank len(D)
        rank = len(task["eigenvalues"])
        ref_lam = np.linalg.eigvalsh(w_ref)[::-1]
        assert_close(w_ref, w_ref.T, 1e-15, "B D B^T symmetric")
        assert ref_lam[rank - 1] > 0 and np.all(np.abs(ref_lam[rank:]) < 1e-12 * ref_lam[0]), ref_lam
        # x = B z + eps: Sigma_x = B (Z^T Z / n) B^T + cross terms + noise^2 I ~ B D B^T (n = 50: loose)
        gap = np.linalg.norm(sigma_x - w_ref - task["noise"] ** 2 * np.eye(d), 2)
        assert gap < 0.5 * ref_lam[0], (gap, ref_lam[0])
    # the Gram matrix of [X Y] / n is PSD: the least-squares loss at W_opt is >= 0
    least = offset - 0.5 * np.sum(sigma_xy * (np.linalg.pinv(sigma_x, rcond=SUPPORT_RTOL, hermitian=True) @ sigma_xy))
    assert least > -1e-10 * offset, (least, offset)       # 0 for the autoencoder, up to rounding


_CHECKED: dict[tuple[str, int], dict] = {}


def statistics(result: Result, seed: int) -> dict:
    """The drawn statistics of `seed` after the module docstring's checks (cached per sweep and
    seed): sigma_x, sigma_xy, offset, pcs, w_opt, w_ref, xy_left, xy_right as float64 arrays."""
    cache_key = (result.sweep.name, seed)
    if cache_key in _CHECKED:
        return _CHECKED[cache_key]
    task, drawn = result.sweep.task, result.data(seed)
    sigma_x, sigma_xy, offset = drawn["sigma_x"], drawn["sigma_xy"], float(drawn["offset"])
    # raw: unwhitened and unshuffled; before: unwhitened (shuffled if the task shuffles)
    raw = twin_draw(result, seed, whiten=False, shuffle=False) if task["whiten"] or task["shuffle"] else drawn
    before = twin_draw(result, seed, whiten=False) if task["whiten"] else drawn
    check_raw(task, raw["sigma_x"], raw["sigma_xy"], float(raw["offset"]), raw)
    lam = check_pcs(raw["sigma_x"], drawn["pcs"])                  # pcs of the unwhitened Sigma_x
    check_support(lam)
    if task["shuffle"]:     # a permutation of the labels: same X, same ||Y||, other Sigma_xy
        assert_close(before["sigma_x"], raw["sigma_x"], 1e-14, "shuffle keeps Sigma_x")
        assert_close(float(before["offset"]), float(raw["offset"]), 1e-14, "shuffle keeps 1/(2n) ||Y||^2")
        assert np.linalg.norm(before["sigma_xy"] - raw["sigma_xy"]) > 1e-2 * np.linalg.norm(raw["sigma_xy"])
    if task["whiten"]:      # X <- X Sigma_x^(-1/2) on the support: Sigma_x -> projector
        ev, vecs = np.linalg.eigh(before["sigma_x"])
        keep = ev > SUPPORT_RTOL * ev.max()
        inv_sqrt = vecs @ np.diag(np.where(keep, 1.0 / np.sqrt(np.where(keep, ev, 1.0)), 0.0)) @ vecs.T
        assert_close(sigma_x, vecs[:, keep] @ vecs[:, keep].T, 1e-13, "whitened Sigma_x = projector")
        assert_close(sigma_xy, inv_sqrt @ before["sigma_xy"], 1e-12, "whitened Sigma_xy")
        assert_close(offset, float(before["offset"]), 1e-15, "whitening keeps the offset")
    w_opt = np.linalg.pinv(sigma_x, rcond=SUPPORT_RTOL, hermitian=True) @ sigma_xy
    kept = np.linalg.eigvalsh(sigma_x)
    kept = kept[kept > SUPPORT_RTOL * kept.max()]                # the rounding of a solve grows with cond
    assert_close(drawn["w_opt"], w_opt, 100 * np.finfo(float).eps * kept.max() / kept.min(),
                 "W_opt = pinv(Sigma_x) Sigma_xy")
    if task["data"] != "autoencoder":
        np.testing.assert_array_equal(drawn["w_ref"], drawn["w_opt"])
    check_singular_vectors(sigma_xy, drawn["xy_left"], drawn["xy_right"])
    out = {name: np.asarray(drawn[name], np.float64) for name in
           ("sigma_x", "sigma_xy", "pcs", "w_opt", "w_ref", "xy_left", "xy_right")} | {"offset": offset}
    _CHECKED[cache_key] = out
    return out


def check_singular_vectors(sigma_xy, left, right):
    """left (d x d), right (p x p) orthogonal with left^T Sigma_xy right = diag(NumPy's singular
    values, descending)."""
    d, p = sigma_xy.shape
    assert_close(left.T @ left, np.eye(d), 1e-13, "xy_left orthogonal", scale=1.0)
    assert_close(right.T @ right, np.eye(p), 1e-13, "xy_right orthogonal", scale=1.0)
    values = np.linalg.svd(sigma_xy, compute_uv=False)
    diagonal = np.zeros((d, p))
    diagonal[np.arange(len(values)), np.arange(len(values))] = values
    assert_close(left.T @ sigma_xy @ right, diagonal, 1e-13, "singular vectors of Sigma_xy")


# ----------------------------------------------------------------------------- the initial layers


def aligned_layers(task, stats, run) -> list[np.ndarray]:
    """W_1 = s_1 U E, W_l = s I, W_L = s E V^T (depth 1: sigma0 U E V^T), U, V the checked
    singular vectors of Sigma_xy; W(0) checked against sigma0 sum_{i < r} u_i v_i^T from NumPy's
    SVD (r = min(d, p, h)), which is free of the vectors' signs when the r singular values are
    distinct and > 0 (asserted)."""
    d, p, h, depth = task["d"], task["p"], task["width"], int(run.depth)
    left, right = stats["xy_left"], stats["xy_right"]
    if depth == 1:
        layers = [run.sigma0 * left @ np.eye(d, p) @ right.T]
    else:
        first, scale = scales(run.sigma0, depth, getattr(run, "shape", 0.0))
        layers = ([first * left @ np.eye(d, h)] + [scale * np.eye(h)] * (depth - 2)
                  + [scale * np.eye(h, p) @ right.T])
    u, values, vt = np.linalg.svd(stats["sigma_xy"])
    r = min(d, p, h) if depth > 1 else min(d, p)
    assert values[r - 1] > 1e-6 * values[0] and np.all(-np.diff(values[:r]) > 1e-6 * values[0]), values
    assert_close(product(layers), run.sigma0 * u[:, :r] @ vt[:r], 1e-13, "aligned W(0)", scale=run.sigma0)
    return layers


@functools.lru_cache(maxsize=None)
def package_init(model):
    """The package's LinearNet.init, jitted (one compile per model instead of one per operation)."""
    return jax.jit(model.init)


def init_of(result: Result, run, stats, sigma0: float, shape: float) -> dict[str, np.ndarray]:
    """The package's init (THE ONE USE OF ITS MODEL CODE) with the run's key fold_in(key(SEED),
    run_id) at the given sigma0 and shape (dict of single / first / hidden / last)."""
    with jax.enable_x64(True):       # the float64 init, whatever the caller's mode
        key = jax.random.fold_in(jax.random.key(SEED), int(run.run_id))
        hp = {"sigma0": jnp.float64(sigma0), "depth": np.int32(run.depth), "lr": jnp.float64(run.lr),
              "shape": jnp.float64(shape)}
        params = package_init(result.program.model)(key, hp, {name: jnp.asarray(v) for name, v in stats.items()})
        return {name: np.asarray(value, np.float64) for name, value in params.items()}


def unit_layers(result: Result, run, stats) -> dict[str, np.ndarray]:
    """The run's unit draw: the package's init at sigma0 = 1, shape = 0."""
    return init_of(result, run, stats, 1.0, 0.0)


def drawn_layers(result: Result, run, stats) -> list[np.ndarray]:
    """The unit draw's used layers times the scales computed here; checked to equal the package's
    init at the run's sigma0 and shape, with the unused hidden layers exactly the identity."""
    depth, h = int(run.depth), result.sweep.task["width"]
    unit = unit_layers(result, run, stats)
    if depth == 1:
        layers = [run.sigma0 * unit["single"]]
        scaled = {"single": layers[0]}
    else:
        first, scale = scales(run.sigma0, depth, getattr(run, "shape", 0.0))
        layers = [first * unit["first"]] + [scale * w for w in unit["hidden"][: depth - 2]] + [scale * unit["last"]]
        scaled = {"first": layers[0], "last": layers[-1]}
        for padded in unit["hidden"][depth - 2:]:
            np.testing.assert_array_equal(padded, np.eye(h), err_msg="unused hidden layer not the identity")
    actual = init_of(result, run, stats, run.sigma0, getattr(run, "shape", 0.0))
    for name, expected in scaled.items():
        assert_close(actual[name], expected, 1e-14, f"{name}: init = unit draw x documented scale")
    if depth > 2:
        assert_close(actual["hidden"][: depth - 2], np.stack(layers[1:-1]), 1e-14, "hidden scale")
    return layers


def check_init_variances(result: Result) -> dict[str, float]:
    """The unit draws' entries pooled over the sweep per layer role: variance within
    max(INIT_VARIANCE_RTOL, 4 standard errors sqrt(2/N)) of 1/h (first, hidden; glorot's last) or
    1/p (gaussian's last; single), mean within 4 standard errors of 0; and all roles together,
    each entry divided by its documented std, within INIT_VARIANCE_RTOL of variance 1. Returns the
    measured / documented variance per role and "all"."""
    task = result.sweep.task
    h, p, glorot = task["width"], task["p"], task["init"] == "glorot"
    expected = {"single": 1.0 / p, "first": 1.0 / h, "hidden": 1.0 / h, "last": 1.0 / (h if glorot else p)}
    pooled: dict[str, list] = {name: [] for name in expected}
    for run in result.runs.itertuples():
        unit = unit_layers(result, run, statistics(result, seed_of(run)))
        depth = int(run.depth)
        if depth == 1:
            pooled["single"].append(unit["single"].ravel())
        else:
            pooled["first"].append(unit["first"].ravel())
            pooled["hidden"].extend(w.ravel() for w in unit["hidden"][: depth - 2])
            pooled["last"].append(unit["last"].ravel())
    ratios, normalized = {}, []
    for name, entries in pooled.items():
        if entries:
            values = np.concatenate(entries)
            ratios[name] = np.mean(values**2) / expected[name]
            bound = max(INIT_VARIANCE_RTOL, 4 * np.sqrt(2.0 / values.size))
            assert abs(ratios[name] - 1) < bound, (name, ratios[name], values.size)
            assert abs(np.mean(values)) < 4 * np.sqrt(expected[name] / values.size), (name, np.mean(values))
            normalized.append(values / np.sqrt(expected[name]))
    ratios["all"] = np.mean(np.concatenate(normalized) ** 2)
    assert abs(ratios["all"] - 1) < INIT_VARIANCE_RTOL, ratios
    return ratios


# ----------------------------------------------------------------------------- GD


def loss_and_grad(stats, variant="right"):
    """The module docstring's loss and Gidel's eq. 11 gradients of layers w0..w{L-1}. Variant
    "1/L" (negative control): the gradients divided by the depth (the 1/(2N) normalization of the
    package's matrix-sensing loss)."""
    sigma_x, sigma_xy, offset = stats["sigma_x"], stats["sigma_xy"], stats["offset"]

    def fn(params):
        layers = [params[f"w{l}"] for l in range(len(params))]
        depth, d, p = len(layers), sigma_x.shape[0], sigma_xy.shape[1]
        w = product(layers)
        residual = sigma_x @ w - sigma_xy
        loss = 0.5 * np.sum(w * (sigma_x @ w)) - np.sum(w * sigma_xy) + offset
        prefixes = [np.eye(d)]                          # W_{1:l-1}
        for layer in layers[:-1]:
            prefixes.append(prefixes[-1] @ layer)
        suffixes = [np.eye(p)]                          # W_{l+1:L}, built from the end
        for layer in layers[:0:-1]:
            suffixes.insert(0, layer @ suffixes[0])
        factor = 1.0 / depth if variant == "1/L" else 1.0
        return loss, {f"w{l}": factor * prefixes[l].T @ residual @ suffixes[l].T for l in range(depth)}

    return fn


def observe(stats, k, variant="right"):
    """observe(params) -> [sigma_0..k-1, nuclear_norm, norm_squared, reconstruction_error,
    pc_distance_0..d-1]. Variant "no_pinv" (negative control): W_opt = Sigma_xy (Sigma_x^+ dropped,
    the OCR slip THEORY.md 1.6 notes), also as W_ref where W_ref is W_opt."""
    w_opt, w_ref, pcs = stats["w_opt"], stats["w_ref"], stats["pcs"]
    if variant == "no_pinv":
        w_ref = stats["sigma_xy"] if w_ref is w_opt or np.array_equal(w_ref, w_opt) else w_ref
        w_opt = stats["sigma_xy"]

    def fn(params):
        w = product([params[f"w{l}"] for l in range(len(params))])
        values = np.linalg.svd(w, compute_uv=False)
        along = pcs.T @ (w - w_opt)
        return np.concatenate([values[:k], [values.sum(), np.sum(w * w), np.linalg.norm(w - w_ref, 2)],
                               np.sqrt(np.sum(along * along, axis=1))])

    return fn


def reference(result: Result, variant: str = "right"):
    """reference(run) -> gissin_reference.Trajectory (sigma: the k largest singular values, hit
    where the task has targets) with `observed` {name: (R,) or (R, d)} and `w0`, `w` (W at steps
    0 and the last); None for a variant that coincides with the right one on that run ("1/L" at
    depth 1, "no_pinv" where Sigma_x is a projector: whitened data)."""
    task = result.sweep.task
    k = result.program.model.k
    targets = task.get("sigma_star")

    def run_reference(run):
        if (variant == "1/L" and run.depth == 1) or (variant == "no_pinv" and task["whiten"]):
            return None
        stats = statistics(result, seed_of(run))
        assert run.lr * np.linalg.eigvalsh(stats["sigma_x"]).max() < 1, f"lr too large for {run}"
        layers = aligned_layers(task, stats, run) if task["init"] == "aligned" else drawn_layers(result, run, stats)
        params = {f"w{l}": layer for l, layer in enumerate(layers)}
        padded = None if targets is None else np.concatenate([targets, np.full(3 + task["d"], np.inf)])
        out = gradient_descent(params, loss_and_grad(stats, variant), observe(stats, k, variant), run.lr,
                               result.sweep.steps, result.record_steps, padded)
        everything = out.sigma
        out.sigma = everything[:, :k]
        out.hit = None if out.hit is None else out.hit[:k]
        out.observed = {"nuclear_norm": everything[:, k], "norm_squared": everything[:, k + 1],
                        "reconstruction_error": everything[:, k + 2], "pc_distance": everything[:, k + 3:]}
        out.w0, out.w = product(layers), product([out.params[f"w{l}"] for l in range(len(layers))])
        return out

    return run_reference


def memoized(fn):
    """fn(run) computed once per run_id."""
    done = {}

    def call(run):
        if run.run_id not in done:
            done[run.run_id] = fn(run)
        return done[run.run_id]

    return call


def observed_columns(result: Result) -> dict[str, list[str]]:
    """The trajectories table's columns of each observable (pc_distance: one per input direction)."""
    d = result.sweep.task["d"]
    return {name: [f"{name}_{j}" for j in range(d)] if name == "pc_distance" else [name] for name in OBSERVED}


def compare_linear_net(result: Result, right, label: str, wrong=()) -> dict[str, float]:
    """gissin_reference.compare (loss, sigma, hits, the run moved) plus the observables at every
    recorded step to RTOL relative, and the negative controls `wrong` (variant references, None
    where one coincides) off by > 1e-3 in some column (loss, sigma or an observable) on at least
    2 runs each. Returns the max relative differences and the smallest negative-control offsets."""
    right = memoized(right)
    worst = compare(result, right, label)
    columns = observed_columns(result)
    got = {name: dense(result.runs, result.traj, result.record_steps, cols) for name, cols in columns.items()}
    k = result.program.model.k
    loss_sigma = dense(result.runs, result.traj, result.record_steps, ["loss"] + [f"sigma_{i}" for i in range(k)])
    caught = [0] * len(wrong)
    for row, run in enumerate(result.runs.itertuples()):
        expected = right(run)
        stats = statistics(result, seed_of(run))
        floor = DISTANCE_ATOL * max(np.linalg.norm(stats["w_opt"], 2), np.linalg.norm(stats["w_ref"], 2))
        for name in columns:
            want = expected.observed[name].reshape(got[name][row].shape)
            atol = floor if name in DISTANCES else 0.0
            np.testing.assert_allclose(got[name][row], want, rtol=RTOL, atol=atol, err_msg=f"{label} {name} {run}")
            relative = np.abs(got[name][row] - want) > RTOL * np.abs(want)
            worst["floored"] = worst.get("floored", 0) + int(relative.sum())
            big = np.abs(want) > floor / RTOL if name in DISTANCES else np.ones(want.shape, bool)
            if big.any():
                worst[name] = max(worst.get(name, 0.0), np.max(np.abs(got[name][row][big] / want[big] - 1)))
        for i, variant in enumerate(wrong):
            bad = variant(run) if caught[i] < 3 else None
            if bad is None:
                continue
            observed = {name: bad.observed[name].reshape(got[name][row].shape) for name in columns}
            with np.errstate(all="ignore"):
                diffs = [np.abs(loss_sigma[row] / np.column_stack([bad.loss, bad.sigma]) - 1)]
                diffs += [np.abs(got[name][row] / observed[name] - 1) for name in columns]
            flat = np.concatenate([x.ravel() for x in diffs])
            off = np.inf if np.isnan(flat).any() else np.max(flat)
            assert off > 1e-3, f"{label} {run}: wrong variant {i} is not told apart ({off:.1e})"
            worst[f"wrong{i}"] = min(worst.get(f"wrong{i}", np.inf), off)
            caught[i] += 1
    assert all(c >= 2 for c in caught), f"{label}: the negative controls ran on {caught} runs only"
    print(f"{label}: observables max rel diff " + ", ".join(f"{name} {worst.get(name, 0):.1e}" for name in columns)
          + f" ({worst['floored']} distances within the absolute floor only)"
          + "; wrong variants off by >= " + ", ".join(f"{v:.1e}" for n, v in worst.items() if n.startswith("wrong")))
    return worst



def accuracy_paths(result: Result, run, stats, sets: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, float]:
    """The reference GD of `run` from its drawn layers on the checked statistics, recording at
    every recorded step the number of examples whose largest output x W is at their label for each
    (inputs X already mapped as the model sees them, labels) of `sets`: ((R, len(sets)) counts, the
    smallest relative margin between the two largest outputs met, which must stay far above the
    rounding for counts to be compared exactly)."""
    layers = drawn_layers(result, run, stats)
    margins = []

    def observe(params):
        w = product([params[f"w{l}"] for l in range(len(layers))])
        counts = []
        for x, labels in sets:
            outputs = x @ w
            top = np.sort(outputs, axis=1)
            margins.append(np.min(top[:, -1] - top[:, -2]) / np.max(np.abs(outputs)))
            counts.append(np.sum(np.argmax(outputs, axis=1) == labels))
        return np.array(counts, float)

    out = gradient_descent({f"w{l}": layer for l, layer in enumerate(layers)}, loss_and_grad(stats), observe,
                           run.lr, result.sweep.steps, result.record_steps)
    return out.sigma, float(min(margins))
