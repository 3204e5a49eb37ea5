"""The signed diagonal network (Gissin et al. 2020, Appendix D and section 4.3, Appendix G.1).

The linear predictor sigma = w_+^N - w_-^N (elementwise powers of two weight vectors, "depth" N as
an exponent like the toy model), w_+(0) = w_-(0) = sigma0^(1/N), so sigma(0) = 0. With the
toy model's depth normalization 1/N^2 (THEORY.md 1.1), over m examples x_j (N(0, I) entries):

    squared      l = 1/(2N^2) (1/m) sum_j (y_j - <sigma, x_j>)^2,   y_j = <w*, x_j>
                 (m = 0: the population loss 1/(2N^2) ||sigma - w*||^2, the signed toy model)
    exponential  l = 1/N^2 (1/m) sum_j exp(-y_j <sigma, x_j>),      y_j = sign <w*, x_j>
    logistic     l = 1/N^2 (1/m) sum_j log(1 + exp(-y_j <sigma, x_j>))

Observed: the `k` largest |sigma_i|, descending; summarized: the correlation
<sigma, w*> / (||sigma|| ||w*||) of the final predictor with w*.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from dlsweep.models.toy import integer_power

LOSSES = ("squared", "exponential", "logistic")


@struct.dataclass
class Diagonal:
    """Static configuration: dimension d, observed values k, largest depth, loss, examples m."""

    d: int = struct.field(pytree_node=False)
    k: int = struct.field(pytree_node=False)
    max_depth: int = struct.field(pytree_node=False)
    loss_kind: str = struct.field(pytree_node=False)
    examples: int = struct.field(pytree_node=False)

    def draw(self, key, task):
        """One seed's dataset: x_j with N(0, 1) entries (m x d), labels y_j = <w*, x_j> (squared
        loss) or sign <w*, x_j>."""
        if self.examples == 0:
            return {}
        return gaussian_examples(key, self.examples, task["w_star"], classify=self.loss_kind != "squared")

    def init(self, key, hp, task):
        del key
        dtype = hp["sigma0"].dtype
        w0 = jnp.power(hp["sigma0"], 1.0 / jnp.asarray(hp["depth"], dtype))
        return {"plus": jnp.full((self.d,), w0, dtype), "minus": jnp.full((self.d,), w0, dtype)}

    def predictor(self, params, hp):
        """sigma = w_+^N - w_-^N."""
        return (integer_power(params["plus"], hp["depth"], self.max_depth)
                - integer_power(params["minus"], hp["depth"], self.max_depth))

    def loss(self, params, hp, task):
        """The module docstring's losses, 1/N^2-normalized."""
        sigma = self.predictor(params, hp)
        n = jnp.asarray(hp["depth"], sigma.dtype)
        if self.examples == 0:
            residual = sigma - task["w_star"]
            return jnp.sum(residual * residual) / (2.0 * n * n)
        output = task["x"] @ sigma
        if self.loss_kind == "squared":
            residual = task["y"] - output
            return jnp.mean(residual * residual) / (2.0 * n * n)
        return classification_loss(self.loss_kind, task["y"] * output) / (n * n)

    def observe(self, params, hp, task):
        """The k largest |sigma_i|."""
        return {"sigma": jax.lax.top_k(jnp.abs(self.predictor(params, hp)), self.k)[0]}

    def summarize(self, params, hp, task):
        return {"correlation": cosine(self.predictor(params, hp), task["w_star"])}


def gaussian_examples(key, examples: int, w_star, classify: bool) -> dict:
    """x_j with N(0, 1) entries (examples x d) and y_j = <w*, x_j>, or sign <w*, x_j> to classify."""
    x = jax.random.normal(key, (examples, w_star.shape[0]), w_star.dtype)
    y = x @ w_star
    return {"x": x, "y": jnp.sign(y) if classify else y}


def classification_loss(kind: str, margin):
    """(1/m) sum_j exp(-margin_j) (exponential) or log(1 + exp(-margin_j)) (logistic)."""
    return jnp.mean(jnp.exp(-margin) if kind == "exponential" else jax.nn.softplus(-margin))


def cosine(a, b):
    """<a, b> / (||a|| ||b||) (0 where a = 0)."""
    norm = jnp.linalg.norm(a) * jnp.linalg.norm(b)
    return jnp.where(norm > 0, a @ b / jnp.where(norm > 0, norm, 1.0), 0.0)
