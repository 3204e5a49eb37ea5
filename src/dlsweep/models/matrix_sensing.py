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
N(0, sigma0^(2/N) / d) (the paper's Appendix E, "sigma0 in expectation"). Observed: the top k
singular values of W, k = len(sigma*).

Depth is an axis: the parameters are `max_depth` layers; layers n >= N are the identity and get
no gradient (masked), so depths 1..max_depth share one program. Where the engine compiles the
depth in (a Python integer), only the first N layers are multiplied.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

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
        dtype = hp["sigma0"].dtype
        depth = hp["depth"]
        scale = jnp.power(hp["sigma0"], 1.0 / jnp.asarray(depth, dtype))
        eye = jnp.eye(self.d, dtype=dtype)
        if self.init_kind == "identity":
            active = jnp.broadcast_to(scale * eye, (self.max_depth, self.d, self.d))
        else:
            noise = jax.random.normal(key, (self.max_depth, self.d, self.d), dtype)
            active = noise * (scale / np.sqrt(self.d))
        layer = jnp.arange(self.max_depth)[:, None, None]
        return {"layers": jnp.where(layer < depth, active, eye)}

    def product(self, params, depth):
        """W = W_N ... W_1; padded layers enter as the identity (so get no gradient)."""
        layers = params["layers"]
        if isinstance(depth, (int, np.integer)):
            used = [layers[n] for n in range(int(depth))]
        else:
            eye = jnp.eye(self.d, dtype=layers.dtype)
            used = [jnp.where(n < depth, layers[n], eye) for n in range(self.max_depth)]
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
        """The k largest singular values of W."""
        return {"sigma": jnp.linalg.svd(self.product(params, hp["depth"]), compute_uv=False)[: self.k]}


def statistic(d: int, measurements: int) -> str:
    """How the loss is computed: exactly (population), by the d^2 x d^2 Gram matrix when it is no
    larger than the m x d^2 measurements, else from the measurements."""
    if measurements == 0:
        return "population"
    return "gram" if measurements >= d * d else "measurements"
