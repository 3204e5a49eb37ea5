"""Independent NumPy float64 gradient-descent references for the quadratic, diagonal and
convolutional models of Gissin et al. 2020 (sections 4.2-4.3, Appendices F, G; THEORY.md 1.1,
1.3, 1.4), written from the paper's equations: hand-derived gradients, no package model code, no
autodiff, no optax. GD is params <- params - lr * grad, all parameters at once. Used by
test_gissin_models_reference.py (quadratic, Theorem 5) and test_gissin_classifiers_reference.py
(diagonal, conv); split in two files so that each runs in well under a minute.

quadratic   f(x) = ||W x||^2 + b,  r = y - f(x),  y = ||W* x||^2 = sum_i sigma*_i x_i^2
            variance l = (1/16)(mean r^2 - (mean r)^2):  dl/dW = -(1/(4n)) W sum_j c_j x_j x_j^T,
                                                         c_j = r_j - mean r,  dl/db = 0
            squared  l = (1/16) mean r^2:                 the same with c_j = r_j, dl/db = -(1/8) mean r
            population (n = 0), M = W*^T W* - W^T W:
                variance (1/8)||M||_F^2                   dl/dW = -(1/2) W M
                squared  (1/16)(2||M||_F^2 + (tr M - b)^2) dl/dW = -(1/2) W M - (1/4)(tr M - b) W,
                                                         dl/db = -(1/8)(tr M - b)
            init W(0) = sqrt(sigma0) Q, Q R = the (d, d) standard normal of the run's key (NumPy QR,
            columns times sign(diag R)); b(0) = mean(y - ||W(0) x||^2) (population: tr(W*^T W*) -
            tr(W(0)^T W(0))); observed: the k largest eigenvalues of W^T W (np.linalg.eigvalsh).
diagonal    sigma = w+^N - w-^N,  w+-(0) = sigma0^(1/N),  z_j = <sigma, x_j>
            squared 1/(2N^2) mean (y - z)^2 (population 1/(2N^2)||sigma - w*||^2), exponential
            1/N^2 mean exp(-y z), logistic 1/N^2 mean log(1 + exp(-y z));
            dl/dw+ = N w+^(N-1) g,  dl/dw- = -N w-^(N-1) g,  g = dl/dsigma; observed: the k
            largest |sigma_i|; summary: correlation <sigma, w*>/(|sigma||w*|). A random w* (App. D)
            has, at sparsity s, the drawn magnitudes at the s features that come first in the
            drawn order of features and 0 elsewhere; feature i is selected at the first step with
            |sigma_i| > select.
conv        h_0 = x, h_n[i] = sum_k w_n[k] h_{n-1}[(i + k) mod d] (n = 1..N-1), f(x) = <h_{N-1}, w_N>,
            loss 1/N mean exp(-y f) or 1/N mean log(1 + exp(-y f)); forward and backprop are
            written literally as these index shifts (index arrays), not via the FFT the package uses:
                dl/dw_N = sum_j g_j h_{N-1,j},  delta_{N-1} = g w_N,
                dl/dw_n[k] = sum_{j,i} delta_n[i] h_{n-1}[(i + k) mod d],
                delta_{n-1}[l] = sum_k w_n[k] delta_n[(l - k) mod d];
            init: layer n (0-based) = row n of the (max_depth, d) standard normal of the run's key
            times sigma0^(1/N)/sqrt(d) (the last used row is the dense layer); beta[j] = f(e_j)
            (the model is linear in x); observed: the k largest |rfft(beta)|; correlation as above.

Data are the package's per-seed draws (`engine.draw_task`: only x is taken; y is recomputed here
and checked against the drawn y). Init keys: fold_in(key(SEED), run_id). `compare` checks loss
and each observed value at every recorded step to RTOL = 1e-9 relative (float64 on both sides:
only the order of rounding differs, ~1e-15 per step, and 300 steps of a non-chaotic GD amplify
it to ~1e-13 at most, as measured), the first-hitting steps exactly where the task has targets,
the `correlation` column where the model has one, and that plausible wrong variants of the
reference are off by > 1e-3 (the comparison can fail).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from dlsweep import api, engine, spec, store

RTOL = 1e-9
STEPS = 300
POINTS = 20
SEED = 11                   # the sweeps' root seed: init keys fold_in(key(SEED), run_id)
LEVELS = (0.05, 0.5, 0.95)  # the default hitting levels (tasks with targets)


# ----------------------------------------------------------------------------- running the engine


@dataclasses.dataclass
class Result:
    sweep: object
    runs: pd.DataFrame
    traj: pd.DataFrame
    record_steps: np.ndarray
    program: object
    task: dict
    chunks: int = 1                                        # chunks the run wrote
    drawn: dict = dataclasses.field(default_factory=dict)

    def data(self, seed: int) -> dict:
        """The task (shared arrays and drawn data) that the trajectories of `seed` see (cached)."""
        if int(seed) not in self.drawn:
            self.drawn[int(seed)] = engine.draw_task(self.program, self.task, int(seed), self.sweep.seed)
        return self.drawn[int(seed)]

    def values(self) -> np.ndarray:
        """(B, R, 1 + k): loss and sigma_i at every recorded step, in the runs' order."""
        columns = ["loss"] + [f"sigma_{i}" for i in range(self.program.model.k)]
        return dense(self.runs, self.traj, self.record_steps, columns)

    def hits(self) -> np.ndarray:
        return self.runs[[c for c in self.runs.columns if c.startswith("hit_")]].to_numpy()


def resolve(name, model, task, axes, steps=STEPS, dtype="float64", points=POINTS):
    raw = {"name": name, "model": model, "steps": steps, "dtype": dtype, "seed": SEED, "task": task,
           "axes": axes, "record": {"points": points}, "stop": {"rel_loss": 0.0}}  # never stopped as converged
    return spec.resolve(raw)


def run_sweep(tmp_path_factory, sweep) -> Result:
    folder = tmp_path_factory.mktemp(sweep.name)
    api.run(sweep, out=folder, progress_bar=False)
    program, _, task = api.compile_inputs(sweep)
    steps = engine.record_steps(sweep.record.schedule, sweep.record.points, sweep.steps)
    return Result(sweep, store.load(folder), store.load_trajectories(folder), steps, program, task)


def dense(runs, traj, record_steps, columns):
    """(B, R, c) in the runs' order; NaN where a run has no row."""
    index = pd.MultiIndex.from_product([runs["run_id"], record_steps], names=["run_id", "step"])
    frame = traj.set_index(["run_id", "step"]).reindex(index)
    return frame[columns].to_numpy().reshape(len(runs), len(record_steps), len(columns))


def init_noise(run_id: int, shape) -> np.ndarray:
    """The run's standard normal draw: jax.random.normal(fold_in(key(SEED), run_id), shape, float64)."""
    with jax.enable_x64(True):       # float64 draws here, whatever the caller's mode
        key = jax.random.fold_in(jax.random.key(SEED), int(run_id))
        noise = np.asarray(jax.random.normal(key, shape, jnp.float64))
    assert noise.dtype == np.float64
    return noise


# ----------------------------------------------------------------------------- generic NumPy GD


@dataclasses.dataclass
class Trajectory:
    loss: np.ndarray        # (R,)
    sigma: np.ndarray       # (R, k)
    hit: np.ndarray         # (k, L) first step with sigma_i >= level * sigma*_i, -1 if never
    params: dict            # final parameters
    correlation: float | None = None   # <predictor, w*>/(|predictor||w*|) of the final parameters
    chosen: np.ndarray | None = None   # (n,) first step each feature was selected, -1 if never


def gradient_descent(params, loss_and_grad, observe, lr, steps, record_steps, targets=None, levels=LEVELS,
                     selected=None):
    """Plain GD p <- p - lr dl/dp on every entry of `params` (a dict of float64 arrays / floats),
    recording (loss, observe(p)) at `record_steps`, the first-hitting steps of the targets and the
    first step each feature is `selected(p)` (bool array), if given."""
    params = {name: np.array(value, np.float64) for name, value in params.items()}
    record = {int(s): i for i, s in enumerate(record_steps)}
    losses, sigmas = [None] * len(record), [None] * len(record)
    hit = chosen = None
    for t in range(steps + 1):
        loss, grads = loss_and_grad(params)
        sigma = observe(params)
        if selected is not None:
            now = selected(params)
            chosen = np.full(now.shape, -1) if chosen is None else chosen
            chosen[(chosen < 0) & now] = t
        if targets is not None:
            reached = sigma[:, None] >= np.asarray(levels)[None, :] * np.asarray(targets)[:, None]
            hit = np.full(reached.shape, -1) if hit is None else hit
            hit[(hit < 0) & reached] = t
        if t in record:
            losses[record[t]], sigmas[record[t]] = loss, sigma
        if t < steps:
            params = {name: params[name] - lr * grads[name] for name in params}
    return Trajectory(np.array(losses), np.stack(sigmas), hit, params, chosen=chosen)


def compare(result: Result, reference, label: str, wrong=(), has_correlation=False):
    """Engine vs reference(run) -> Trajectory for every run: loss and sigma at every recorded step
    to RTOL, hits exactly (tasks with targets), the correlation column to RTOL. Each of `wrong`
    (deliberately wrong references: wrong(run) -> Trajectory, or None where the variant coincides
    with the right one) must be off by > 1e-3 somewhere in loss or sigma, on the first 3 runs
    where it differs (at least 2). Returns the max relative differences for the report."""
    runs, traj, record_steps = result.runs, result.traj, result.record_steps
    k = result.program.model.k
    columns = [f"sigma_{i}" for i in range(k)]
    assert len(runs) >= 4 and not runs["diverged"].any() and not runs["converged"].any()
    assert (runs["steps_run"] == result.sweep.steps).all()
    assert record_steps[0] == 0 and record_steps[-1] == result.sweep.steps and len(record_steps) >= 15
    loss_got = dense(runs, traj, record_steps, ["loss"])[..., 0]
    sigma_got = dense(runs, traj, record_steps, columns)
    assert not np.isnan(loss_got).any() and not np.isnan(sigma_got).any()
    targets = result.sweep.task.get("sigma_star")
    assert result.sweep.record.levels == (LEVELS if targets is not None else ())
    hit_columns = store.hit_columns(k, result.sweep.record.levels)
    worst = {"loss": 0.0, "sigma": 0.0} | ({"correlation": 0.0} if has_correlation else {})
    caught = [0] * len(wrong)
    for row, run in enumerate(runs.itertuples()):
        expected = reference(run)
        # the run really moved: the loss fell by > 5% and some observed value changed by > 10%
        assert expected.loss[-1] < 0.95 * expected.loss[0], f"{label} {run}: the loss barely moved"
        top = np.max(np.abs(expected.sigma[-1] - expected.sigma[0]) / np.maximum(np.abs(expected.sigma[-1]), 1e-300))
        assert top > 0.1, f"{label} {run}: sigma barely moved"
        np.testing.assert_allclose(loss_got[row], expected.loss, rtol=RTOL, atol=0, err_msg=f"{label} loss {run}")
        np.testing.assert_allclose(sigma_got[row], expected.sigma, rtol=RTOL, atol=0, err_msg=f"{label} sigma {run}")
        nonzero = expected.sigma != 0
        worst["loss"] = max(worst["loss"], np.max(np.abs(loss_got[row] / expected.loss - 1)))
        worst["sigma"] = max(worst["sigma"], np.max(np.abs(sigma_got[row][nonzero] / expected.sigma[nonzero] - 1)))
        if targets is not None:
            got = np.array([getattr(run, c) for c in hit_columns]).reshape(expected.hit.shape)
            np.testing.assert_array_equal(got, expected.hit, err_msg=f"{label} hits {run}")
        if expected.chosen is not None:      # the selection order and steps, exactly
            features = np.flatnonzero(expected.chosen >= 0)
            features = features[np.argsort(expected.chosen[features], kind="stable")]
            np.testing.assert_array_equal(run.selected, features, err_msg=f"{label} selected {run}")
            np.testing.assert_array_equal(run.selected_at, expected.chosen[features], err_msg=f"{label} steps {run}")
            worst["selected"] = worst.get("selected", 0) + len(features)
        if has_correlation:
            np.testing.assert_allclose(run.correlation, expected.correlation, rtol=RTOL, atol=0,
                                       err_msg=f"{label} correlation {run}")
            worst["correlation"] = max(worst["correlation"], abs(run.correlation / expected.correlation - 1))
        for i, variant in enumerate(wrong):
            if caught[i] >= 3:                           # enough to show the comparison can fail
                continue
            with np.errstate(all="ignore"):             # a wrong variant may blow up (nan: told apart)
                bad = variant(run)
            if bad is not None:
                with np.errstate(all="ignore"):
                    diffs = np.concatenate([np.abs(loss_got[row] / bad.loss - 1),
                                            np.abs(sigma_got[row][nonzero] / bad.sigma[nonzero] - 1)])
                off = np.inf if np.isnan(diffs).any() else np.max(diffs)       # nan: a blown-up variant
                assert off > 1e-3, f"{label} {run}: wrong variant {i} is not told apart ({off:.1e})"
                worst[f"wrong{i}"] = min(worst.get(f"wrong{i}", np.inf), off)
                caught[i] += 1
    assert all(c >= 2 for c in caught), f"{label}: the negative controls ran on {caught} runs only"
    if targets is not None:
        assert (runs[hit_columns].to_numpy() > 0).sum() >= 3, f"{label}: (almost) no level reached after step 0"
    print(f"{label}: max rel diff " + ", ".join(f"{name} {value:.1e}" for name, value in worst.items()
                                                if not name.startswith("wrong") and name != "selected")
          + (f"; {worst['selected']} selections equal" if "selected" in worst else "")
          + "; wrong variants off by >= " + ", ".join(f"{value:.1e}" for name, value in worst.items()
                                                     if name.startswith("wrong")))
    return worst


# ----------------------------------------------------------------------------- quadratic reference


def quadratic_loss_and_grad(loss_kind, s_diag, x=None, y=None):
    """The module docstring's quadratic-network losses and their gradients (bias b: entry 'b'
    of the parameters when trained; held at 0 otherwise)."""
    s_matrix = np.diag(s_diag)

    def fn(p):
        w, b = p["w"], p.get("b", np.float64(0.0))
        grads = {}
        if x is None:
            m = s_matrix - w.T @ w
            fro2, mean = np.sum(m * m), np.trace(m) - b
            if loss_kind == "variance":
                loss, grad_w, grad_b = fro2 / 8.0, -0.5 * w @ m, 0.0
            else:
                loss = (2.0 * fro2 + mean * mean) / 16.0
                grad_w, grad_b = -0.5 * w @ m - 0.25 * mean * w, -mean / 8.0
        else:
            n = len(y)
            r = y - np.sum((x @ w.T) ** 2, axis=1) - b
            if loss_kind == "variance":
                loss, c = (np.mean(r * r) - np.mean(r) ** 2) / 16.0, r - np.mean(r)
            else:
                loss, c = np.mean(r * r) / 16.0, r
            grad_w = -(w @ (x.T @ (c[:, None] * x))) / (4.0 * n)
            grad_b = -np.sum(c) / (8.0 * n)
        grads["w"] = grad_w
        if "b" in p:
            grads["b"] = grad_b
        return loss, grads

    return fn


def quadratic_reference(result: Result, variant: str = "right"):
    """reference(run) for a quadratic sweep. Variants (negative controls): "other_loss" swaps the
    variance and squared losses, "bias_at_zero" starts the bias at 0 instead of its optimum."""
    task = result.sweep.task
    d, k, sigma_star = task["d"], len(task["sigma_star"]), np.array(task["sigma_star"])
    s_diag = np.zeros(d)
    s_diag[:k] = sigma_star
    loss_kind = task["loss"]
    if variant == "other_loss":
        loss_kind = "squared" if loss_kind == "variance" else "variance"

    def reference(run):
        noise = init_noise(run.run_id, (d, d))
        q, r = np.linalg.qr(noise)
        q = q * np.sign(np.diag(r))[None, :]
        w0 = np.sqrt(run.sigma0) * q
        np.testing.assert_allclose(w0.T @ w0, run.sigma0 * np.eye(d), rtol=0, atol=1e-14)
        x = y = None
        if task["examples"]:
            data = result.data(run.seed if hasattr(run, "seed") else 0)
            x = data["x"]
            y = np.sum(s_diag[None, :] * x * x, axis=1)                  # ||W* x||^2
            np.testing.assert_allclose(data["y"], y, rtol=1e-13)
        params = {"w": w0}
        if task["bias"]:
            if variant == "bias_at_zero":
                params["b"] = 0.0
            elif x is None:
                params["b"] = np.sum(s_diag) - np.trace(w0.T @ w0)       # E[y - ||W(0) x||^2]
            else:
                params["b"] = np.mean(y - np.sum((x @ w0.T) ** 2, axis=1))
        observe = lambda p: np.linalg.eigvalsh(p["w"].T @ p["w"])[::-1][:k]  # noqa: E731
        return gradient_descent(params, quadratic_loss_and_grad(loss_kind, s_diag, x, y), observe, run.lr,
                                result.sweep.steps, result.record_steps, sigma_star)

    return reference


# ----------------------------------------------------------------------------- diagonal reference


def diagonal_loss_and_grad(loss_kind, depth, w_star, x=None, y=None, normalization=None):
    """The module docstring's diagonal-network losses and gradients; `normalization` overrides
    the depth factor (1/N^2) for the negative control."""
    n = depth
    scale = 1.0 / n**2 if normalization is None else normalization

    def fn(p):
        plus, minus = p["plus"], p["minus"]
        sigma = plus**n - minus**n
        if x is None:
            residual = sigma - w_star
            loss, grad_sigma = 0.5 * scale * residual @ residual, scale * residual
        else:
            m = len(y)
            z = x @ sigma
            if loss_kind == "squared":
                r = y - z
                loss, grad_sigma = 0.5 * scale * np.mean(r * r), -scale * (x.T @ r) / m
            elif loss_kind == "exponential":
                e = np.exp(-y * z)
                loss, grad_sigma = scale * np.mean(e), -scale * (x.T @ (y * e)) / m
            else:
                loss = scale * np.mean(np.log1p(np.exp(-y * z)))
                grad_sigma = -scale * (x.T @ (y / (1.0 + np.exp(y * z)))) / m
        return loss, {"plus": n * plus ** (n - 1) * grad_sigma, "minus": -n * minus ** (n - 1) * grad_sigma}

    return fn


def correlation(a, b):
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def diagonal_reference(result: Result, variant: str = "right"):
    """reference(run) for a diagonal sweep. Variant "1/(2N)" (negative control) uses the untied
    normalization 1/N (THEORY.md 1.1 warning) in place of 1/N^2; it coincides at N = 1 (None).
    With `normalize`, the drawn columns are checked to have unit norm."""
    task = result.sweep.task
    d, k, loss_kind = task["d"], task["top"], task["loss"]
    random = task["w_star"] == "random"
    if not random:
        w_fixed = np.zeros(d)
        w_fixed[: len(task["w_star"])] = task["w_star"]
        if loss_kind != "squared":
            w_fixed /= np.linalg.norm(w_fixed)
        np.testing.assert_allclose(result.task["w_star"], w_fixed, rtol=1e-15)
    targets = np.sort(np.abs(w_fixed[w_fixed != 0]))[::-1][:k] if "sigma_star" in task else None

    def w_star_of(run):
        if not random:
            return w_fixed
        drawn = result.data(run.seed)
        magnitudes, order = drawn["magnitudes"], drawn["order"]
        assert sorted(order.tolist()) == list(range(d)) and (magnitudes >= 1).all()
        w = np.zeros(d)
        first = [i for i in range(d) if order[i] < run.sparsity]      # the s features first in the order
        w[first] = magnitudes[first]
        return w

    def reference(run):
        if variant != "right" and run.depth == 1:
            return None
        w_star = w_star_of(run)
        x = y = None
        if task["examples"]:
            x = result.data(run.seed)["x"]
            if task["normalize"]:
                np.testing.assert_allclose(np.sqrt((x * x).sum(axis=0)), 1.0, rtol=1e-13)
            y = x @ w_star if loss_kind == "squared" else np.sign(x @ w_star)
            if loss_kind != "squared":
                np.testing.assert_allclose(result.data(run.seed)["y"], y, rtol=1e-13)
        w0 = run.sigma0 ** (1.0 / run.depth)
        params = {"plus": np.full(d, w0), "minus": np.full(d, w0)}
        norm = 1.0 / run.depth if variant == "1/(2N)" else None
        predictor = lambda p: p["plus"] ** run.depth - p["minus"] ** run.depth  # noqa: E731
        select = task["select"]
        out = gradient_descent(params, diagonal_loss_and_grad(loss_kind, run.depth, w_star, x, y, norm),
                               lambda p: np.sort(np.abs(predictor(p)))[::-1][:k],
                               run.lr, result.sweep.steps, result.record_steps, targets,
                               selected=(lambda p: np.abs(predictor(p)) > select) if select else None)
        out.correlation = correlation(predictor(out.params), w_star)
        return out

    return reference


# ----------------------------------------------------------------------------- conv reference


def shifted(h, sign=1):
    """(..., k, i) -> h[..., (i + sign * k) mod d]: every shift of h at once (plain index
    arithmetic, the literal form of the layer's sum over k)."""
    d = h.shape[-1]
    index = (np.arange(d)[None, :] + sign * np.arange(d)[:, None]) % d      # index[k, i]
    return h[..., index]


def conv_forward(layers, x, reverse=False):
    """h_0 = x, h_n[i] = sum_k w_n[k] h_{n-1}[(i + k) mod d]; returns (f, [h_0, ..., h_{N-1}]).
    `reverse` uses (i - k) (a true convolution) for the negative control."""
    sign = -1 if reverse else 1
    hs = [x]
    for w in layers[:-1]:
        hs.append(np.einsum("k,...ki->...i", w, shifted(hs[-1], sign)))
    return hs[-1] @ layers[-1], hs


def conv_loss_and_grad(loss_kind, x, y, reverse=False):
    sign = -1 if reverse else 1

    def fn(p):
        layers = [p[f"w{n}"] for n in range(len(p))]
        depth, m = len(layers), x.shape[0]
        f, hs = conv_forward(layers, x, reverse)
        margin = y * f
        if loss_kind == "exponential":
            e = np.exp(-margin)
            loss, g = np.mean(e) / depth, -y * e / (depth * m)               # g_j = dl/df_j
        else:
            loss, g = np.mean(np.log1p(np.exp(-margin))) / depth, -y / (1.0 + np.exp(margin)) / (depth * m)
        grads = [None] * depth
        grads[-1] = hs[-1].T @ g                                             # dl/dw_N
        delta = g[:, None] * layers[-1][None, :]                             # dl/dh_{N-1}
        for n in range(depth - 2, -1, -1):                                   # layer n maps hs[n] -> hs[n+1]
            # dl/dw[k] = sum_{j,i} delta[j,i] h[j,(i + k) mod d]; dl/dh[l] = sum_k w[k] delta[(l - k) mod d]
            grads[n] = np.einsum("ji,jki->k", delta, shifted(hs[n], sign))
            delta = np.einsum("k,jkl->jl", layers[n], shifted(delta, -sign))
        return loss, {f"w{n}": grads[n] for n in range(depth)}

    return fn


def conv_beta(p, d, reverse=False):
    """The induced linear predictor: beta[j] = f(e_j)."""
    return conv_forward([p[f"w{n}"] for n in range(len(p))], np.eye(d), reverse)[0]


def conv_reference(result: Result, variant: str = "right"):
    """reference(run) for a conv sweep. Variant "(i-k)" (negative control): convolution layers
    h_n[i] = sum_k w_n[k] h_{n-1}[(i - k) mod d]; it coincides at N = 1 (None)."""
    task = result.sweep.task
    d, k, loss_kind = task["d"], task["top"], task["loss"]
    spectrum = np.zeros(d // 2 + 1)
    spectrum[: len(task["frequencies"])] = task["frequencies"]
    w_star = np.fft.irfft(spectrum, n=d)
    w_star /= np.linalg.norm(w_star)
    np.testing.assert_allclose(result.task["w_star"], w_star, rtol=1e-13, atol=1e-15)
    max_depth = int(max(result.sweep.axes["depth"]))
    reverse = variant == "(i-k)"

    def reference(run):
        if reverse and run.depth == 1:
            return None
        x = result.data(run.seed)["x"]
        y = np.sign(x @ w_star)
        np.testing.assert_array_equal(result.data(run.seed)["y"], y)
        noise = init_noise(run.run_id, (max_depth, d))
        scale = run.sigma0 ** (1.0 / run.depth) / np.sqrt(d)
        params = {f"w{n}": noise[n] * scale for n in range(run.depth)}
        observe = lambda p: np.sort(np.abs(np.fft.rfft(conv_beta(p, d, reverse))))[::-1][:k]  # noqa: E731
        out = gradient_descent(params, conv_loss_and_grad(loss_kind, x, y, reverse), observe, run.lr,
                               result.sweep.steps, result.record_steps)
        out.correlation = correlation(conv_beta(out.params, d, reverse), w_star)
        return out

    return reference
