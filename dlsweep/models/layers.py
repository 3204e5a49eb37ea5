"""The init's scale and shape for models of several layers (Azulay et al. 2021; THEORY.md 1.7).

A network of N layers starts with scale a_1 in its first layer and a in each other layer. Its
scale sigma0 = a_1 a^(N-1) is the product's, and its shape is the `shape` axis

    s = (a - a_1) / (a + a_1) in (-1, 1),   rho = a_1 / a = (1 - s) / (1 + s),
    a_1 = sigma0^(1/N) rho^((N-1)/N),       a = sigma0^(1/N) rho^(-1/N).

s = 0 is balanced; s -> 1 puts the scale in the later layers, s -> -1 in the first. At N = 2 and
s >= 0 this is Azulay's shape of a two-layer network with first layer u and second v: alpha =
|u0 v0| = sigma0 and s = (|v0| - |u0|) / (|v0| + |u0|) (not the ratio rho = |u0| / |v0|, which is
(1 - s) / (1 + s)). In the diagonal network u and v are interchangeable, so s and -s give the same
dynamics; for the one-neuron network a w^T x (first layer w, second a) s is Azulay's
(|a0| - ||w0||) / (|a0| + ||w0||). Depth 1 has no shape: its one layer has scale sigma0.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

SHAPE_RANGE = (-1.0, 1.0)          # open interval


def layer_scales(sigma0, depth, shape=0.0):
    """(a_1, a): the first layer's scale and each other layer's (module docstring), in sigma0's
    dtype; at depth 1, a_1 = sigma0."""
    dtype = jnp.asarray(sigma0).dtype
    depth = jnp.asarray(depth, dtype)
    shape = jnp.asarray(shape, dtype)
    ratio = (1.0 - shape) / (1.0 + shape)
    scale = jnp.power(sigma0, 1.0 / depth)
    return scale * jnp.power(ratio, (depth - 1.0) / depth), scale * jnp.power(ratio, -1.0 / depth)


DRIFT_ROUNDING = 16     # x max(m, n) eps ||W||_F: above the error of either observation (Jacobi's tol is sqrt(d) eps)


def singular_value_drift(product, anchor):
    """A model's `drift_from` for observed singular values of its end-to-end matrix W =
    product(params): params -> a bound on how far each sigma_i(W) can be from sigma_i(W_A), W_A =
    product(anchor). By Weyl's inequality |sigma_i(W) - sigma_i(W_A)| <= ||W - W_A||_2 <= ||W -
    W_A||_F, plus DRIFT_ROUNDING max(m, n) eps (||W||_F + ||W_A||_F) for the rounding of the two
    observations (what lets the engine observe W only every few steps)."""
    w_anchor = product(anchor)
    slack = DRIFT_ROUNDING * max(w_anchor.shape) * jnp.finfo(w_anchor.dtype).eps

    def drift(params):
        w = product(params)
        return jnp.linalg.norm(w - w_anchor) + slack * (jnp.linalg.norm(w) + jnp.linalg.norm(w_anchor))

    return drift


def select(flag, on, off):
    """where(flag, on, off) for a task's switch (a boolean scalar, traced in the compiled program,
    so that sweeps differing in it alone share one program); a concrete flag picks its branch, so
    a trace made with known task values shows only the data flow taken (`spec.warn_if_seeds_identical`)."""
    try:
        return on if bool(flag) else off
    except jax.errors.ConcretizationTypeError:
        return jnp.where(flag, on, off)
