"""The product of a chain of matrices, W = M_1 M_2 ... M_L: in the order of fewest multiplies
(`cheapest`), and for small matrices on CPU with its gradient (`chain`).

`cheapest` parenthesizes the chain by its static shapes (the matrix-chain order, O(L^3) over the
L factors). A deep network of width h on d inputs and p outputs, p << h, multiplied from the
right (W_{L-1} (W_L)) is h x h x p multiplies a layer where from the left it is d x h x h: one
core of a 2-core Xeon, the gradient step of Hacohen's depth-5 network (d = 64, h = 128, p = 10),
199 -> 105 us, XLA's cost analysis 1.95e7 -> 3.6e6 flops.

XLA's CPU backend runs each tiny matrix product as a call of its own (`dot`), and on a CPU a sweep
whose step observes singular values by LAPACK runs its trajectories one by one (a batch of one,
`engine.run_sequential`), where those calls are most of a step. For one trajectory (alone or a
batch of one) the products here are broadcast multiplies summed over the shared axis, which XLA
fuses into a few loops; for a batch of several they are XLA's dots under vmap, which batch well.
Measured on one core, the gradient of ||W - I||^2 / 2 for 3 x 8, 8 x 8, 8 x 8, 8 x 3 factors, in
us per trajectory-step: one trajectory 0.45 here against 5.1 with dots; at a batch of 192 the
same sums with the batch moved last took 3.0 against 1.1 for the dots. The two ways give the same
values up to the rounding of the sums' order, so the engine never runs one trajectory both ways:
a batched program's batch has more than one row (`engine.small_sweep_batch`).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

SMALL = 10     # largest side multiplied as broadcast sums (there a product is a few hundred multiplies)

REDUCTIONS = (lambda a, b: jnp.sum(a[:, :, None] * b[None], axis=1),     # a b
              lambda a, b: jnp.sum(a[:, :, None] * b[:, None], axis=0),   # a^T b
              lambda a, b: jnp.sum(a[:, None] * b[None], axis=2))         # a b^T
DOTS = (jnp.matmul, lambda a, b: a.T @ b, lambda a, b: a @ b.T)


def cheapest(*factors):
    """M_1 M_2 ... M_L multiplied in the order of fewest scalar multiplies (the matrix-chain
    order of the static shapes; among equals, from the left: (M_1 M_2) M_3)."""
    sides = [factors[0].shape[-2]] + [factor.shape[-1] for factor in factors]
    count = len(factors)
    cost, split = {(i, i): 0 for i in range(count)}, {}
    for span in range(1, count):
        for i in range(count - span):
            j = i + span
            options = {k: cost[i, k] + cost[k + 1, j] + sides[i] * sides[k + 1] * sides[j + 1] for k in range(i, j)}
            split[i, j] = min(reversed(options), key=options.get)      # among equals the last split: from the left
            cost[i, j] = options[split[i, j]]

    def product(i, j):
        if i == j:
            return factors[i]
        k = split[i, j]
        return product(i, k) @ product(k + 1, j)

    return product(0, count - 1)


def fits(*sides: int) -> bool:
    """Whether matrices of these sides are multiplied here: every side <= `SMALL`, on CPU."""
    return max(sides) <= SMALL and jax.default_backend() == "cpu"


def _prefixes(products, *factors):
    """Q_l = M_1 M_2 ... M_l for l = 1..L."""
    times = products[0]
    out = [factors[0]]
    for factor in factors[1:]:
        out.append(times(out[-1], factor))
    return tuple(out)


def _factor_grads(products, *args):
    """dl/dM_l = Q_{l-1}^T C_l from the L factors, their L prefixes and G = dl/dW (`args`, in that
    order): C_L = G, C_{l-1} = C_l M_l^T, Q_0 = I."""
    _, left_transposed, right_transposed = products
    count = len(args) // 2
    factors, prefixes, c = args[:count], args[count:2 * count], args[-1]
    grads = [None] * count
    for n in range(count - 1, 0, -1):
        grads[n] = left_transposed(prefixes[n - 1], c)
        c = right_transposed(c, factors[n])
    grads[0] = c
    return tuple(grads)


def _one_or_batched(fn):
    """fn(products, *matrices) of one trajectory with `REDUCTIONS` (alone or a batch of one), and
    under vmap of several with `DOTS` (`jax.custom_batching.custom_vmap`)."""
    @jax.custom_batching.custom_vmap
    def per_trajectory(*args):
        return fn(REDUCTIONS, *args)

    @per_trajectory.def_vmap
    def batched(size, in_batched, *args):
        if size == 1:
            out = jax.tree.map(lambda x: x[None], per_trajectory(*(a[0] if b else a for a, b in zip(args, in_batched))))
        else:
            out = jax.vmap(functools.partial(fn, DOTS), tuple(0 if b else None for b in in_batched))(*args)
        return out, jax.tree.map(lambda _: True, out)

    return per_trajectory


_prefix_products = _one_or_batched(_prefixes)
_factor_gradients = _one_or_batched(_factor_grads)


@jax.custom_vjp
def chain(*factors):
    """W = M_1 M_2 ... M_L of L >= 2 factors (m_{l-1} x m_l each)."""
    return _prefix_products(*factors)[-1]


def _chain_forward(*factors):
    prefixes = _prefix_products(*factors)
    return prefixes[-1], (factors, prefixes)


def _chain_backward(residuals, g):
    factors, prefixes = residuals
    return _factor_gradients(*factors, *prefixes, g)


chain.defvjp(_chain_forward, _chain_backward)
