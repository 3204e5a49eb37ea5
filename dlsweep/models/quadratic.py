"""The quadratic network (Gissin et al. 2020, section 4.2, Theorem 5, Appendix F).

f_W(x) = sum_i (w_i . x)^2 = <W^T W, x x^T> (+ b, an optional trainable global bias), W in
R^{d x d}, teacher W* = diag(sqrt(sigma*_1), ..., sqrt(sigma*_k), 0, ...), so y = ||W* x||^2 and
the targets are the eigenvalues sigma*_i of W*^T W*. With r = y - f_W(x), x ~ N(0, I) (THEORY.md 1.3):

    variance loss (Definition 2)   l = (1/16) E[r^2] - (1/16) (E r)^2
    squared loss                   l = (1/16) E[r^2]

E is the mean over n examples (drawn per seed), or for n = 0 the population expectation: with
M = W*^T W* - W^T W, E r = tr M - b and Var r = 2 ||M||_F^2, so the variance loss is
(1/8) ||M||_F^2 and the squared loss (1/16) (2 ||M||_F^2 + (tr M - b)^2).

Init: orthogonal, W(0) = sqrt(sigma0) Q (Q Haar-random from the run's key), so W(0)^T W(0) =
sigma0 I; the bias starts at its optimum for W(0), b(0) = E[y - ||W(0) x||^2]. The bias is the
task's flag `bias`, traced (without it b stays 0 and gets no gradient), so sweeps differing in it
alone share one compiled program. Observed: the k
largest eigenvalues of W^T W (squared singular values of W). Theorem 5: under the population
variance loss they follow the depth-2 toy model, w <- w + (lr/2) w (sigma* - w^2) with sigma = w^2.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dlsweep import schema
from dlsweep.models.family import Family
from dlsweep.models.layers import select

LOSSES = ("variance", "squared")


@struct.dataclass
class Quadratic:
    """Static configuration: dimension d, observed values k, loss, examples n."""

    d: int = struct.field(pytree_node=False)
    k: int = struct.field(pytree_node=False)
    loss_kind: str = struct.field(pytree_node=False)
    examples: int = struct.field(pytree_node=False)

    def draw(self, key, task):
        """One seed's dataset: x_j with N(0, 1) entries (n x d), y_j = ||W* x_j||^2."""
        if self.examples == 0:
            return {}
        x = jax.random.normal(key, (self.examples, self.d), task["w_star_diagonal"].dtype)
        projected = x * task["w_star_diagonal"]
        return {"x": x, "y": jnp.sum(projected * projected, axis=1)}

    def init(self, key, hp, task):
        dtype = hp["sigma0"].dtype
        q, r = jnp.linalg.qr(jax.random.normal(key, (self.d, self.d), dtype))
        q = q * jnp.sign(jnp.diagonal(r))[None, :]                  # Haar measure (Mezzadri 2007)
        w = jnp.sqrt(hp["sigma0"]) * q
        zero = jnp.zeros((), dtype)
        return {"w": w, "b": select(task["bias"], self._mean_residual(w, zero, task), zero)}

    def _mean_residual(self, w, b, task):
        """E r = E[y - ||W x||^2 - b]."""
        if self.examples == 0:
            return jnp.sum(task["w_star_diagonal"] ** 2) - jnp.sum(w * w) - b
        return jnp.mean(self._residual(w, b, task))

    def _residual(self, w, b, task):
        hidden = task["x"] @ w.T
        return task["y"] - jnp.sum(hidden * hidden, axis=1) - b

    def loss(self, params, hp, task):
        """The module docstring's variance or squared loss."""
        w = params["w"]
        b = select(task["bias"], params["b"], jnp.zeros((), w.dtype))
        if self.examples == 0:
            m = jnp.diag(task["w_star_diagonal"] ** 2) - w.T @ w
            spread = 2.0 * jnp.sum(m * m)                               # Var r
            mean = jnp.trace(m) - b
        else:
            r = self._residual(w, b, task)
            mean = jnp.mean(r)
            spread = jnp.mean(r * r) - mean * mean
        return (spread if self.loss_kind == "variance" else spread + mean * mean) / 16.0

    def observe(self, params, hp, task):
        """The k largest eigenvalues of W^T W."""
        singular = jnp.linalg.svd(params["w"], compute_uv=False)[: self.k]
        return {"sigma": singular * singular}


def validate_task(task: dict, error: schema.Error) -> dict:
    """[task] of the quadratic network: `sigma_star` (the nonzero eigenvalues of W*^T W*, > 0),
    `d` (>= len(sigma_star)), `examples` (n >= 0; 0 = the population loss), `loss` (variance or
    squared), `bias` (a trainable global bias started at its optimum)."""
    out = schema.target_values(task, error, ("sigma_star", "d", "examples", "loss", "bias", "top"))
    k = len(out["sigma_star"])
    bias = schema.flag(task, "bias", error)
    out = out | {"d": schema.integer(task, "d", k, k, error, bound="len(sigma_star)")}
    return out | {"top": schema.top(task, k, out["d"], error),
                  "examples": schema.integer(task, "examples", 0, 0, error, note=" (0: the population loss)"),
                  "loss": schema.choice(task, "loss", LOSSES, error), "bias": bias}


def make_task(sweep) -> dict:
    """sigma*, the diagonal of W* = diag(sqrt(sigma*), 0, ...) (d entries) and the flag `bias`."""
    task = sweep.task
    root = np.zeros(task["d"])
    root[: len(task["sigma_star"])] = np.sqrt(task["sigma_star"])
    return schema.arrays(sweep, {"sigma_star": task["sigma_star"], "w_star_diagonal": root}) | schema.switches(sweep, "bias")


FAMILY = Family(
    name="quadratic",
    summary="Gissin et al. 2020 sec. 4.2: f(x) = ||W x||^2 (+ b), variance or squared loss, top eigenvalues of W^T W",
    axes=("sigma0", "lr"),
    task_keys={"sigma_star": "nonzero eigenvalues of W*^T W* (k numbers > 0)",
               "d": "input dimension (default k)",
               "examples": "number of Gaussian examples per seed (default 0: the population loss)",
               "loss": "variance (Definition 2, default) or squared",
               "bias": "a trainable global bias started at its optimum (default false)",
               "top": "how many of the largest eigenvalues are observed (default k; targets only if k)"},
    validate_task=validate_task,
    build=lambda sweep: Quadratic(
        d=sweep.task["d"], k=sweep.task["top"], loss_kind=sweep.task["loss"], examples=sweep.task["examples"]),
    make_task=make_task,
    observed=r"eigenvalues $\lambda_i(W^\top W)$",
    targets=schema.targets_if_all_observed,
)
