"""The product of a chain of small matrices (`models.chain`): its value and gradient against
NumPy float64, for one trajectory, a batch of one and a batch of several (the two ways it is
computed), and which way each takes."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dlsweep.models import chain

SHAPES = {"two": [(5, 4), (4, 2)], "deep": [(3, 8), (8, 8), (8, 8), (8, 3)], "wide": [(2, 7), (7, 3), (3, 6)]}


def numpy_chain_and_grads(factors, target):
    """W = M_1 ... M_L and the gradient of 1/2 ||W - T||_F^2 in each factor: dl/dM_l =
    (M_1 ... M_{l-1})^T (W - T) (M_{l+1} ... M_L)^T, written out in float64."""
    product = lambda ms, side: functools.reduce(np.matmul, ms, np.eye(side))  # noqa: E731
    w = product(factors, factors[0].shape[0])
    g = w - target
    return w, [product(factors[:n], factors[0].shape[0]).T @ g @ product(factors[n + 1:], factors[n].shape[1]).T
               for n in range(len(factors))]


def loss(factors, target):
    w = chain.chain(*factors)
    return 0.5 * jnp.sum((w - target) ** 2)


@pytest.mark.parametrize("batch", [None, 1, 5], ids=["alone", "batch-of-one", "batch-of-five"])
@pytest.mark.parametrize("shapes", SHAPES.values(), ids=SHAPES.keys())
def test_chain_value_and_gradient_equal_numpy_float64(shapes, batch):
    """Expected: NumPy's float64 product and its gradient, computed in float64 here, to 1e-13
    relative to the largest entry (sums of at most 8 x 8 x 8 products of O(1) numbers: a few
    hundred roundings of 1.1e-16 each, bounded by about 1e-14 of the entries' scale; 10x margin)."""
    rng = np.random.default_rng(len(shapes) * 10 + (batch or 0))
    rows = batch or 1
    factors = [rng.normal(size=(rows, *shape)) / np.sqrt(shape[0]) for shape in shapes]
    target = rng.normal(size=(shapes[0][0], shapes[-1][1]))
    with jax.enable_x64(True):
        value_and_grad = jax.value_and_grad(loss)
        if batch is None:
            value, grads = value_and_grad([jnp.asarray(f[0]) for f in factors], target)
            values, grads = [value], [[g] for g in grads]
            products = [chain.chain(*(jnp.asarray(f[0]) for f in factors))]
        else:
            values, grads = jax.vmap(value_and_grad, (0, None))([jnp.asarray(f) for f in factors], target)
            products = jax.vmap(lambda *f: chain.chain(*f))(*(jnp.asarray(f) for f in factors))
    for b in range(rows):
        w, expected = numpy_chain_and_grads([f[b] for f in factors], target)
        scale = max(np.abs(w).max(), 1.0)
        np.testing.assert_allclose(np.asarray(products[b]), w, rtol=0, atol=1e-13 * scale)
        assert abs(float(values[b]) - 0.5 * np.sum((w - target) ** 2)) <= 1e-13 * max(np.sum((w - target) ** 2), 1.0)
        for got, want in zip(grads, expected):
            np.testing.assert_allclose(np.asarray(got[b]), want, rtol=0, atol=1e-13 * max(np.abs(want).max(), 1.0))


def test_only_small_matrices_on_cpu_are_chained():
    """`chain.fits`: every side at most `chain.SMALL`, and only on CPU (where dot calls cost more
    than the products of small matrices)."""
    cpu = jax.default_backend() == "cpu"
    assert chain.fits(3, 8, 3) == cpu
    assert chain.fits(chain.SMALL, 1) == cpu
    assert not chain.fits(chain.SMALL + 1, 3)


def test_one_trajectory_multiplies_without_dot_calls_and_a_batch_with_them():
    """One trajectory (alone or a batch of one) is broadcast multiplies and sums, no `dot_general`
    (each a call of its own on CPU); a batch of several is XLA's dots under vmap."""
    factors = [jnp.ones((3, 8)), jnp.ones((8, 8)), jnp.ones((8, 3))]
    gradient = jax.grad(lambda *f: jnp.sum(chain.chain(*f)), argnums=(0, 1, 2))

    def lowered(batch):
        if batch is None:
            return jax.jit(gradient).lower(*factors).as_text()
        return jax.jit(jax.vmap(gradient)).lower(*(jnp.broadcast_to(f, (batch, *f.shape)) for f in factors)).as_text()

    assert "dot_general" not in lowered(None) and "dot_general" not in lowered(1)
    assert "dot_general" in lowered(4)


def fewest_multiplies(sides):
    """The fewest scalar multiplies of a chain with these sides, over every parenthesization
    (enumerated, not the dynamic programme of `chain.cheapest`)."""
    if len(sides) == 2:
        return 0
    return min(fewest_multiplies(sides[:k + 1]) + fewest_multiplies(sides[k:]) + sides[0] * sides[k] * sides[-1]
               for k in range(1, len(sides) - 1))


CHAINS = {"narrow-output": [(64, 128), (128, 128), (128, 128), (128, 128), (128, 10)],
          "narrow-input": [(3, 40), (40, 40), (40, 50)], "mixed": [(30, 5), (5, 60), (60, 4), (4, 50), (50, 2)],
          "square": [(16, 16)] * 4, "one": [(7, 9)]}


@pytest.mark.parametrize("shapes", CHAINS.values(), ids=CHAINS.keys())
def test_cheapest_multiplies_in_the_order_of_fewest_multiplies(shapes):
    """Expected: NumPy's float64 product, to 1e-13 relative to its largest entry (sums of at most
    128 x 128 x 128 products of O(1) numbers, well under 1e-13 in float64); and XLA's count of
    floating-point operations of the compiled product, 2 per multiply-add, equal to twice the
    fewest multiplies over every parenthesization (exact integers)."""
    rng = np.random.default_rng(len(shapes))
    factors = [rng.normal(size=shape) / np.sqrt(shape[0]) for shape in shapes]
    with jax.enable_x64(True):
        got = chain.cheapest(*(jnp.asarray(f) for f in factors))
        lowered = jax.jit(chain.cheapest).lower(*(jnp.asarray(f) for f in factors))
    want = functools.reduce(np.matmul, factors)
    np.testing.assert_allclose(np.asarray(got), want, rtol=0, atol=1e-13 * np.abs(want).max())
    flops = (lowered.cost_analysis() or {}).get("flops", 0.0)
    assert flops == 2 * fewest_multiplies([shapes[0][0]] + [s[1] for s in shapes])
