"""Two-layer fully connected linear networks with scalar output (Azulay et al. 2021, section 6,
Theorem 2; THEORY.md 1.7, 2.8): f(x) = sum_j a_j <w_j, x>, predictor beta = W^T a, on the sparse
regression of models/diagonal_net.py (loss 1/(2n) ||X beta - y||^2).

Init: each neuron's first layer w_j(0) = |w0| u_j with u_j a unit direction drawn per seed, and its
second a_j(0) = |a0|, from the scale sigma0 = |a0| |w0| and the `shape` axis s = (|a0| - |w0|) /
(|a0| + |w0|) (models/layers.py at depth 2: the first layer is w). With one neuron, gradient flow
conserves delta = a^2 - ||w||^2 = 4 sigma0 s / (1 - s^2) and reaches the interpolator minimizing
Azulay's Q (Theorem 2; `theory.neuron_q_minimizer`). With several neurons the directions are
independent, or `shared` (u_j = u_1): then W = (|w0|/|a0|) a u_1^T, so W W^T = a a^T at s = 0
(the strictly balanced init of Azulay's Proposition 1), and the network is
one neuron with a = sqrt(h) |a0|, w = sqrt(h) |w0| u_1: scale h sigma0, the same shape, and
Theorem 2 with w~0 = h sigma0 u_1 and delta = h 4 sigma0 s / (1 - s^2).

Observed: the k largest |beta_i| and the population error; summarized: the population error and
the final predictor `beta`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import struct

from dlsweep import compare, schema
from dlsweep.models.diagonal_net import (SPARSE_REGRESSION_FAMILY, SPARSE_REGRESSION_KEYS, SparseRegressionModel,
                                         sparse_regression, validate_sparse_regression)
from dlsweep.models.family import Family
from dlsweep.models.layers import layer_scales


@struct.dataclass
class Neuron(SparseRegressionModel):
    """Static configuration: dimension d, examples n, nonzeros of beta*, label noise std, neurons
    (width), observed values k, one direction for every neuron (shared), dtype of the drawn data."""

    d: int = struct.field(pytree_node=False)
    examples: int = struct.field(pytree_node=False)
    sparsity: int = struct.field(pytree_node=False)
    noise: float = struct.field(pytree_node=False)
    width: int = struct.field(pytree_node=False)
    k: int = struct.field(pytree_node=False)
    shared: bool = struct.field(pytree_node=False, default=False)
    dtype: str = struct.field(pytree_node=False, default="float32")

    def draw(self, key, task):
        """The seed's sparse regression data and the neurons' unit directions u_j (width x d)."""
        data_key, direction_key = jax.random.split(key)
        directions = jax.random.normal(direction_key, (1 if self.shared else self.width, self.d), self.dtype)
        directions = jnp.broadcast_to(directions, (self.width, self.d))
        directions = directions / jnp.linalg.norm(directions, axis=1, keepdims=True)
        return sparse_regression(data_key, self.examples, self.d, self.sparsity, self.noise, self.dtype) | {"direction": directions}

    def init(self, key, hp, task):
        """w_j = |w0| u_j, a_j = |a0| (module docstring)."""
        del key
        first, second = layer_scales(hp["sigma0"], 2, hp.get("shape", 0.0))
        return {"w": first * task["direction"], "a": jnp.full((self.width,), second, hp["sigma0"].dtype)}

    def predictor(self, params, hp):
        """beta = W^T a."""
        return params["a"] @ params["w"]


DIRECTIONS = ("independent", "shared")


def validate_task(task: dict, error: schema.Error) -> dict:
    """[task]: the sparse regression (`diagonal_net.validate_sparse_regression`), `width`, the
    number of neurons (default 1), and `directions`: independent (default) or shared by every
    neuron (strictly balanced at shape 0)."""
    schema.reject_unknown(task, (*SPARSE_REGRESSION_KEYS, "width", "directions"), error)
    return validate_sparse_regression(task, error) | {"width": schema.integer(task, "width", 1, 1, error),
                                                      "directions": schema.choice(task, "directions", DIRECTIONS, error)}


FAMILY = Family(
    name="neuron",
    summary="Azulay et al. 2021 sec. 6: f(x) = sum_j a_j <w_j, x> (two layers, scalar output), sparse regression, "
            "init scale x shape; population error, distance to Theorem 2's interpolator",
    axes=("sigma0", "lr"),
    task_keys=SPARSE_REGRESSION_KEYS | {
        "width": "number of neurons (default 1: Theorem 2's single neuron)",
        "directions": "independent (default: a random unit direction per neuron) or shared (one for all: "
                      "strictly balanced at shape 0, and one neuron of scale width x sigma0)"},
    validate_task=validate_task,
    build=lambda sweep: Neuron(
        d=sweep.task["d"], examples=sweep.task["examples"], sparsity=sweep.task["sparsity"],
        noise=sweep.task["noise"], width=sweep.task["width"], k=sweep.task["top"],
        shared=sweep.task["directions"] == "shared", dtype=sweep.dtype),
    baseline=compare.neuron_interpolators,
    **SPARSE_REGRESSION_FAMILY,
)
