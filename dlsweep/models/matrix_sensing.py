"""Deep matrix sensing (Gissin et al. 2020, section 4.1, Theorem 4, Appendix E).

The end-to-end matrix W = W_N ... W_1 of N untied d x d layers predicts a measurement
<A, W> = tr(A^T W). With Gaussian A (entries N(0, 1)) and noise-free labels y = <A, W*>
(A drawn inside the program from the key of the trajectory's `seed`),
W* = diag(sigma*_1, ..., sigma*_k, 0, ...), the loss is depth-normalized by 1/(2N) so that the
singular values follow the toy model's dynamics (THEORY.md 1.1-1.2):

    population:   l(W) = 1/(2N) ||W - W*||_F^2                          (Theorem 4)
    m samples:    l(W) = 1/(2N) (1/m) sum_j <A_j, W - W*>^2 = 1/(2N) vec(D)^T G vec(D),
                  D = W - W*, G = (1/m) sum_j vec(A_j) vec(A_j)^T (the Gram matrix, used when
                  m >= d^2; the m x d^2 measurements themselves otherwise)

Init: "identity" W_n(0) = sigma0^(1/N) I (the theory), or "gaussian" with entries
N(0, sigma0^(2/N) / d) (the paper's Appendix E, "sigma0 in expectation": E ||W x||^2 = sigma0^2
||x||^2; the product's top singular value, about 1.6 sigma0 at depths 1-4 and d = 5, falls like
e^(N l), l = (psi(d/2) + ln(2/d))/2, at depths N >> d). Observed: the top k singular values of W,
k = len(sigma*).

Depth is an axis: the parameters are `max_depth` layers; layers n >= N are the identity and get
no gradient (masked), so depths 1..max_depth share one program. Where the engine compiles the
depth in (a Python integer), only the first N layers are multiplied.
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dlsweep import schema
from dlsweep.models.family import Family
from dlsweep.models.layers import layer_scales, singular_value_drift

INITS = ("identity", "gaussian")


@struct.dataclass
class MatrixSensing:
    """Static configuration: size d, observed values k, largest depth, init, number of
    measurements m (0: the population loss)."""

    d: int = struct.field(pytree_node=False)
    k: int = struct.field(pytree_node=False)
    max_depth: int = struct.field(pytree_node=False)
    init_kind: str = struct.field(pytree_node=False)
    measurements: int = struct.field(pytree_node=False)

    @property
    def statistic(self) -> str:
        return statistic(self.d, self.measurements)

    def draw(self, key, task):
        """The m measurements A_j (entries N(0, 1), rows vec(A_j) row-major) of one seed, kept as
        the Gram matrix (1/m) sum_j vec(A_j) vec(A_j)^T or as themselves (`statistic`)."""
        if self.statistic == "population":
            return {}
        a = jax.random.normal(key, (self.measurements, self.d * self.d), task["w_star"].dtype)
        return {"gram": a.T @ a / self.measurements} if self.statistic == "gram" else {"measurements": a}

    def init(self, key, hp, task):
        """W_1 at scale a_1 and W_2 .. W_N at a (models/layers.py; shape 0 by default: every layer
        at sigma0^(1/N)): a I (identity init) or N(0, a^2 / d) entries; padded layers are I."""
        dtype = hp["sigma0"].dtype
        depth = hp["depth"]
        first, other = layer_scales(hp["sigma0"], depth, hp.get("shape", 0.0))
        layer = jnp.arange(self.max_depth)[:, None, None]
        scale = jnp.where(layer == 0, first, other)
        eye = jnp.eye(self.d, dtype=dtype)
        if self.init_kind == "identity":
            active = scale * eye
        else:
            active = jax.random.normal(key, (self.max_depth, self.d, self.d), dtype) * (scale / np.sqrt(self.d))
        return {"layers": jnp.where(layer < depth, active, eye)}

    def product(self, params, depth):
        """W = W_N ... W_1; padded layers enter as the identity (so get no gradient). For small d
        on CPU the product and its gradient are computed with the batch last (`_chain`)."""
        layers = params["layers"]
        if isinstance(depth, (int, np.integer)):
            used = layers[: int(depth)]
        else:
            eye = jnp.eye(self.d, dtype=layers.dtype)
            used = jnp.where(jnp.arange(self.max_depth)[:, None, None] < depth, layers, eye)
        if len(used) > 1 and _batch_last_kernels(self.d):
            return _chain(used)
        w = used[0]
        for layer in used[1:]:
            w = layer @ w
        return w

    def loss(self, params, hp, task):
        """1/(2N) times the mean squared measurement error (module docstring)."""
        residual = self.product(params, hp["depth"]) - task["w_star"]
        flat = residual.reshape(-1)
        if self.statistic == "population":
            error = jnp.sum(flat * flat)
        elif self.statistic == "gram":
            error = flat @ (task["gram"] @ flat)
        else:
            predictions = task["measurements"] @ flat
            error = jnp.mean(predictions * predictions)
        return error / (2.0 * jnp.asarray(hp["depth"], residual.dtype))

    def observe(self, params, hp, task):
        """The k largest singular values of W: one-sided Jacobi with the batch last for small d
        on CPU (`_singular_values`), else the backend's SVD."""
        w = self.product(params, hp["depth"])
        sigma = _singular_values(w) if _batch_last_kernels(self.d) else jnp.linalg.svd(w, compute_uv=False)
        return {"sigma": sigma[: self.k]}

    def drift_from(self, anchor, hp, task):
        """How far the observed singular values can be from those at `anchor` (Weyl's inequality,
        `layers.singular_value_drift`)."""
        return singular_value_drift(lambda params: self.product(params, hp["depth"]), anchor)


def toy_lr(task: dict, cell: Mapping[str, float]) -> float | None:
    """The toy model's step (models/toy.py) whose GD this model's equals on a cell of axis values,
    or None where it follows other dynamics. With the population loss, the identity init at shape 0
    (every layer a I, a = sigma0^(1/N)) and W* = diag(sigma*, 0, ...), every layer stays the same
    diagonal matrix diag(a_i): the gradient of 1/(2N) ||W_N ... W_1 - W*||_F^2 in layer n is
    (1/N) diag(a^(N-1) (a^N - w*)), so a_i <- a_i + (eta/N) a_i^(N-1) (w*_i - a_i^N), the toy's eq. 9
    at the same step eta (the toy's 1/(2N^2) loss on one shared weight has the same gradient).

    The observed values are the singular values a_i^N sorted, so they are the toy's values in the
    order of their targets (listed non-increasing) while GD keeps that order. Lemma 1's step,
    eta <= sigma*_max^(2/N - 2), keeps it: the map a -> a + (eta/N) a^(N-1) (w* - a^N) is then
    increasing in a below the target and in w*, so the values with targets above sigma0 grow
    without overshoot and stay in order, while those with targets below sigma0 (and the zeros of
    W*'s diagonal) stay in [0, sigma0] (for sigma0 <= sigma*_max). Every pair with s sigma*_j <=
    sigma0 is not incremental in both models (sigma_j starts at its level), whatever the order of
    the rest; so the models decide every trajectory alike and have the same thresholds."""
    sigma_star = [float(v) for v in task["sigma_star"]]
    if (task["init"] != "identity" or task["measurements"] > 0 or cell.get("shape", 0.0) != 0.0
            or sigma_star != sorted(sigma_star, reverse=True)):
        return None
    depth, lr = float(cell["depth"]), float(cell["lr"])
    return lr if lr <= max(sigma_star) ** (2.0 / depth - 2.0) else None


def statistic(d: int, measurements: int) -> str:
    """How the loss is computed: exactly (population), by the d^2 x d^2 Gram matrix when it is no
    larger than the m x d^2 measurements, else from the measurements."""
    if measurements == 0:
        return "population"
    return "gram" if measurements >= d * d else "measurements"


# ----------------------------------------------------------------------------- batch-last kernels
# vmap puts the batch first, and XLA's CPU backend runs (B, d, d) @ (B, d, d) as a loop of tiny
# dot kernels and the SVD as one LAPACK call per matrix. The functions below see the batch as the
# LAST axis (`_batch_last`), so a d x d product is d broadcast multiply-adds over contiguous
# trajectories that XLA vectorizes; loops and `lax.switch` keep each product its own kernel (XLA
# would otherwise fuse chained products and recompute them). benchmarks/RESULTS.md has the timings.

SMALL_D = 10        # largest d computed with the batch last (at d = 12 `@` and LAPACK caught up)
MAX_SWEEPS = 30     # Jacobi sweeps at most (d <= 10 converges in well under 10)


def _batch_last_kernels(d: int) -> bool:
    """Whether size d uses the kernels below: d <= SMALL_D on CPU, where they were measured."""
    return d <= SMALL_D and jax.default_backend() == "cpu"


def _batch_last(fn):
    """A per-trajectory function made of `fn`, which takes and returns arrays whose last axis is
    the batch: called alone it runs on a batch of one; under vmap the batch axis is moved last
    for `fn` and back (`jax.custom_batching.custom_vmap`). `fn` is traced once per shape
    (`jax.jit` keeps its trace): a chunk program calls these kernels at a dozen sites (records,
    anchors, replays, the memory probe), and each call traced the d = 10 Jacobi SVD anew, 0.3 s
    apiece. The compiled program is the same (XLA inlines the calls), bit for bit."""
    traced = jax.jit(fn)

    @jax.custom_batching.custom_vmap
    def per_trajectory(*args):
        return jax.tree.map(lambda x: x[..., 0], traced(*(a[..., None] for a in args)))

    @per_trajectory.def_vmap
    def batched(size, in_batched, *args):
        last = [jnp.moveaxis(a, 0, -1) if b else jnp.broadcast_to(a[..., None], (*a.shape, size))
                for a, b in zip(args, in_batched)]
        out = traced(*last)
        return jax.tree.map(lambda x: jnp.moveaxis(x, -1, 0), out), jax.tree.map(lambda _: True, out)

    return per_trajectory


def _outer_sum(cols, rows):
    """sum_k cols[k] rows[k]^T: a d x d product from the left factor's columns and the right
    factor's rows, each (d, B)."""
    out = cols[0][:, None] * rows[0][None]
    for col, row in zip(cols[1:], rows[1:]):
        out = out + col[:, None] * row[None]
    return out


def _pick(stack, n):
    """stack[n] for a traced n, as an array of its own (a dynamic slice read inside a product
    measured 3x slower)."""
    return jax.lax.switch(n, [lambda s, i=i: s[i] for i in range(len(stack))], stack)


def _prefixes(layers):
    """P_n = W_n ... W_1 for n = 1..N, layers (N, d, d, B)."""
    d = layers.shape[1]

    def step(n, carry):
        below, out = carry
        layer = _pick(layers, n)
        below = _outer_sum([layer[:, k] for k in range(d)], [below[k] for k in range(d)])
        return below, out.at[n].set(below)

    return jax.lax.fori_loop(1, len(layers), step, (layers[0], layers))[1]


def _layer_grads(layers, prefixes, g):
    """dl/dW_n = C_n P_{n-1}^T from G = dl/dW: C_N = G, C_{n-1} = W_n^T C_n, P_0 = I."""
    d, top = layers.shape[1], len(layers) - 1

    def step(i, carry):
        c, out = carry
        below, layer = _pick(prefixes, top - i - 1), _pick(layers, top - i)
        out = out.at[top - i].set(_outer_sum([c[:, k] for k in range(d)], [below[:, k] for k in range(d)]))
        return _outer_sum([layer[k] for k in range(d)], [c[k] for k in range(d)]), out

    c, out = jax.lax.fori_loop(0, top, step, (g, jnp.zeros_like(layers)))
    return out.at[0].set(c)


_prefix_products = _batch_last(_prefixes)
_layer_gradients = _batch_last(_layer_grads)


@jax.custom_vjp
def _chain(layers):
    """W = W_N ... W_1 of layers (N, d, d), N >= 2, with its gradient, both batch-last under vmap."""
    return _prefix_products(layers)[-1]


def _chain_forward(layers):
    prefixes = _prefix_products(layers)
    return prefixes[-1], (layers, prefixes)


def _chain_backward(residuals, g):
    return (_layer_gradients(*residuals, g),)


_chain.defvjp(_chain_forward, _chain_backward)


def _dot(x, y):
    """sum_i x[i] y[i] over the leading axis, as multiply-adds."""
    out = x[0] * y[0]
    for i in range(1, len(x)):
        out = out + x[i] * y[i]
    return out


def _rotate(x, y, tol):
    """One Jacobi rotation of each column pair (x_j, y_j) not yet orthogonal (|x.y| > tol |x| |y|)
    that makes it orthogonal: x <- c x - s y, y <- s x + c y with t = s / c the smaller root of
    t^2 + 2 zeta t - 1 = 0, zeta = (|y|^2 - |x|^2) / (2 x.y). Returns the columns and which
    pairs rotated."""
    alpha, beta, gamma = _dot(x, x), _dot(y, y), _dot(x, y)
    rotate = jnp.abs(gamma) > tol * jnp.sqrt(alpha) * jnp.sqrt(beta)
    zeta = (beta - alpha) / (2 * jnp.where(rotate, gamma, 1))
    a = jnp.abs(zeta)
    inv = 1 / jnp.maximum(a, 1)          # for |zeta| > 1, t = 1/(a + sqrt(1 + a^2)) without a^2
    t = jnp.where(a > 1, inv / (1 + jnp.sqrt(1 + inv * inv)), 1 / (a + jnp.sqrt(1 + a * a)))
    t = jnp.where(zeta < 0, -t, t)
    c = jnp.where(rotate, 1 / jnp.sqrt(1 + t * t), 1)
    s = jnp.where(rotate, c * t, 0)
    return c * x - s * y, s * x + c * y, rotate


def _top(values, k):
    """The k largest of a list of (B,) arrays, descending: v_i goes to slot
    #{j: v_j > v_i} + #{j < i: v_j = v_i}."""
    ranks = [sum((w > v).astype(jnp.int32) for w in values) + sum((w == v).astype(jnp.int32) for w in values[:i])
             for i, v in enumerate(values)]
    return [sum(jnp.where(rank == slot, v, 0) for rank, v in zip(ranks, values)) for slot in range(k)]


def _jacobi_sigma(w):
    """Singular values of w (d, d, B), descending, by one-sided Jacobi (Hestenes): rotate pairs
    of columns until every pair is orthogonal to tol = sqrt(d) eps; the column norms are then the
    singular values. The columns are first divided by 2^floor(log2 max|w|) (exact), so squared
    norms neither overflow nor underflow. Pairs follow the circle method on m = d columns (plus
    a zero column for odd d): X_i = L_i, Y_i = L_{m-1-i}, then L <- (L_0, L_{m-1}, L_1, ...,
    L_{m-2}); m - 1 rounds meet every pair once. A trajectory has converged after m - 1 rounds
    without a rotation; later rounds only move its columns, so it does not depend on the others."""
    d = w.shape[0]
    m, info = d + d % 2, jnp.finfo(w.dtype)
    h = m // 2
    unsigned = jnp.dtype(f"uint{info.bits}")
    exponent = np.array(((1 << info.nexp) - 1) << info.nmant, unsigned)
    big = jnp.abs(w[0, 0])
    for entry in jnp.abs(w).reshape(d * d, -1):          # max |w| (a reduce op measured slower)
        big = jnp.maximum(big, entry)
    power = jax.lax.bitcast_convert_type(big, unsigned) & exponent
    scale = jnp.where(power > 0, jax.lax.bitcast_convert_type(power, w.dtype), 1)
    u = jnp.concatenate([w / scale, jnp.zeros_like(w[:, : m - d])], axis=1)
    tol = np.sqrt(d) * info.eps

    def round_(state):
        x, y, quiet, rounds = state
        x, y, rotated = _rotate(x, y, tol)
        if h > 1:
            x, y = (jnp.concatenate([x[:, :1], y[:, :1], x[:, 1:-1]], axis=1),
                    jnp.concatenate([y[:, 1:], x[:, -1:]], axis=1))
        moved = rotated[0]
        for pair in rotated[1:]:
            moved = moved | pair
        return x, y, jnp.where(moved, 0, quiet + 1), rounds + 1

    def running(state):
        return jnp.any(state[2] < m - 1) & (state[3] < MAX_SWEEPS * (m - 1))

    start = (u[:, :h], u[:, h:][:, ::-1], jnp.zeros(w.shape[2:], jnp.int32), 0)
    two_rounds = lambda state: round_(round_(state))    # noqa: E731 (half the loop-carry copies: measured ~10%)
    x, y, _, _ = jax.lax.while_loop(running, two_rounds, start)
    norms = [jnp.sqrt(_dot(c[:, j], c[:, j])) * scale for c in (x, y) for j in range(h)]
    return jnp.stack(_top(norms, d))


_singular_values = _batch_last(_jacobi_sigma)


def validate_task(task: dict, error: schema.Error) -> dict:
    """[task] of deep matrix sensing: `sigma_star` (the nonzero diagonal of W*, > 0), `d` (size,
    >= len(sigma_star)), `measurements` (m >= 0; 0 = the population loss), `init` (identity or
    gaussian)."""
    out = schema.target_values(task, error, ("sigma_star", "d", "measurements", "init", "top"))
    k = len(out["sigma_star"])
    out = out | {"d": schema.integer(task, "d", k, k, error, bound="len(sigma_star)")}
    return out | {"top": schema.top(task, k, out["d"], error),
                  "measurements": schema.integer(task, "measurements", 0, 0, error, note=" (0: the population loss)"),
                  "init": schema.choice(task, "init", INITS, error)}


def make_task(sweep) -> dict:
    """W* = diag(sigma*, 0, ...), d x d (the measurements are drawn in the program, per seed)."""
    task = sweep.task
    d, k = task["d"], len(task["sigma_star"])
    w_star = np.zeros((d, d))
    w_star[np.arange(k), np.arange(k)] = task["sigma_star"]
    return schema.arrays(sweep, {"sigma_star": task["sigma_star"], "w_star": w_star})


FAMILY = Family(
    name="matrix_sensing",
    summary="Gissin et al. 2020 sec. 4.1: W = W_N...W_1 (d x d), loss 1/(2N) mean <A, W - W*>^2, top singular values of W",
    axes=("depth", "sigma0", "lr"),
    task_keys={"sigma_star": "nonzero diagonal of W* (k numbers > 0)",
               "d": "matrix size (default k)",
               "measurements": "number of Gaussian measurements A_j (default 0: the population loss)",
               "init": "identity (sigma0^(1/N) I) or gaussian (N(0, sigma0^(2/N)/d) entries)",
               "top": "how many of the largest singular values are observed (default k; targets only if k)"},
    validate_task=validate_task,
    build=lambda sweep: MatrixSensing(
        d=sweep.task["d"], k=sweep.task["top"], max_depth=int(max(sweep.axes["depth"])),
        init_kind=sweep.task["init"], measurements=sweep.task["measurements"]),
    make_task=make_task,
    optional_axes=("shape",),
    observed=r"singular values $\sigma_i(W)$",
    targets=schema.targets_if_all_observed,
    toy_lr=toy_lr,
)
