"""The toy model of depth of Gissin et al. 2020 (section 2, eqs. 2-4, 9).

k independent values sigma_i = w_i^N share one weight per value ("depth" N as an exponent),
depth-normalized loss l_N(w) = 1/(2N^2) ||w^N - sigma*||^2 (eq. 2), init w_i(0) = sigma0^(1/N)
(eq. 3). Gradient descent with step eta is then eq. 9: w <- w + (eta/N) w^(N-1) (sigma* - w^N).

Depth is a per-trajectory integer, so w^N is computed by binary exponentiation with masked
multiplies up to the grid's largest depth: exact products, all depths in one program, and much
faster than `pow` with a traced exponent.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dlsweep import schema
from dlsweep.models.family import Family


def _masked_power(w: jax.Array, n: jax.Array, max_n: int) -> jax.Array:
    """w**n for a traced integer 0 <= n <= max_n by binary exponentiation: one squaring per bit of
    max_n, and where n has the bit, a multiply by the square (exact products, no `pow`)."""
    p = jnp.ones_like(w)
    square = w
    for bit in range(max(1, max_n.bit_length())):
        p = jnp.where((n >> bit) & 1, p * square, p)
        square = square * square
    return p


def _blended_power(w: jax.Array, n: jax.Array, max_n: int) -> jax.Array:
    """`_masked_power` with the masked multiply as a multiply by the blend b s + (1 - b), b in
    {0, 1} the bit: exactly s or exactly 1, so the same products; the square is clipped to the
    dtype's finite range so that an overflowed square the bit does not take gives 1, not 0 x inf."""
    p = jnp.ones_like(w)
    square = w
    finite = jnp.finfo(w.dtype).max
    for bit in range(max(1, max_n.bit_length())):
        take = ((n >> bit) & 1).astype(w.dtype)
        p = p * (take * jnp.clip(square, -finite, finite) + (1 - take))
        square = square * square
    return p


@functools.cache
def _power_function(max_n: int):
    """(w, n) -> w**n (0 <= n <= max_n) that runs `_masked_power` on one trajectory or a batch with
    one n, and `_blended_power` on a batch with an n per trajectory. The same exact products
    either way; on x86 at LLVM -O3 a `where` on a per-trajectory n runs 5x slower than the blend
    (the toy with depths 2-8 in one batch: 17 vs 3.6 ns a trajectory-step), and the blend 5x
    slower than the `where` on a single trajectory with its own n (a per-run loop's)."""
    @jax.custom_batching.custom_vmap
    def power(w, n):
        return _masked_power(w, n, max_n)

    @power.def_vmap
    def _batched(axis_size, in_batched, w, n):
        w_batched, n_batched = in_batched
        w = w if w_batched else jnp.broadcast_to(w, (axis_size, *w.shape))
        if not n_batched:
            return _masked_power(w, n, max_n), True
        return _blended_power(w, n.reshape(n.shape + (1,) * (w.ndim - n.ndim)), max_n), True

    return power


def _power(w: jax.Array, n: jax.Array, max_n: int) -> jax.Array:
    """w**n for an integer 0 <= n <= max_n (`_power_function`); a Python or NumPy integer n is
    compiled in."""
    if isinstance(n, (int, np.integer)):
        return _masked_power(w, n, max_n)
    return _power_function(max_n)(w, n)


@functools.partial(jax.custom_jvp, nondiff_argnums=(2,))
def integer_power(w: jax.Array, n: jax.Array, max_n: int) -> jax.Array:
    """w**n for an integer 1 <= n <= max_n; its derivative n w**(n-1) reuses the same products."""
    return _power(w, n - 1, max_n - 1) * w


@integer_power.defjvp
def _integer_power_jvp(max_n, primals, tangents):
    w, n = primals
    dw, _ = tangents
    below = _power(w, n - 1, max_n - 1)
    return below * w, n.astype(w.dtype) * below * dw


@struct.dataclass
class Toy:
    """Static configuration: number of values k and the largest depth of the grid."""

    k: int = struct.field(pytree_node=False)
    max_depth: int = struct.field(pytree_node=False)

    def init(self, key, hp, task):
        """w_i(0) = sigma0^(1/N) for every i, so sigma_i(0) = sigma0 (eq. 3)."""
        del key
        w0 = jnp.power(hp["sigma0"], 1.0 / hp["depth"].astype(hp["sigma0"].dtype))
        return {"w": jnp.full((self.k,), w0, dtype=hp["sigma0"].dtype)}

    def sigma(self, params, hp):
        return integer_power(params["w"], hp["depth"], self.max_depth)

    def loss(self, params, hp, task):
        """l_N(w) = 1/(2 N^2) sum_i (w_i^N - sigma*_i)^2 (eq. 2)."""
        n = hp["depth"].astype(params["w"].dtype)
        residual = self.sigma(params, hp) - task["sigma_star"]
        return jnp.sum(residual * residual) / (2.0 * n * n)

    def observe(self, params, hp, task):
        return {"sigma": self.sigma(params, hp)}


FAMILY = Family(
    name="toy",
    summary="Gissin et al. 2020 sec. 2: sigma_i = w_i^N, loss 1/(2N^2) ||w^N - sigma*||^2, w_i(0) = sigma0^(1/N)",
    axes=("depth", "sigma0", "lr"),
    task_keys={"sigma_star": "target values sigma*_i > 0 (list of k numbers)"},
    validate_task=schema.target_values,
    build=lambda sweep: Toy(k=len(sweep.task["sigma_star"]), max_depth=int(max(sweep.axes["depth"]))),
    toy_lr=lambda task, cell: float(cell["lr"]),
)
