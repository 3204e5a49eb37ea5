"""A model of your own for dlsweep: the two-factor model sigma_i = u_i v_i with an unbalanced
init (docs/own-model.md). Loss 1/2 ||u o v - sigma*||^2; u(0) = a sqrt(sigma0), v(0) =
sqrt(sigma0) / a, so sigma_i(0) = sigma0 for every imbalance a (a = 1: balanced, the toy model of
depth 2). Gradient flow keeps u_i^2 - v_i^2 = sigma0 (a^2 - 1/a^2) fixed."""

import jax.numpy as jnp


class TwoFactor:
    """sigma_i = u_i v_i from an unbalanced init u(0) = a sqrt(sigma0), v(0) = sqrt(sigma0) / a."""

    observed = r"$\sigma_i = u_i v_i$"          # the figures' label for `sigma`

    def init(self, key, hp, task):
        k = task["sigma_star"].shape[0]
        root, a = jnp.sqrt(hp["sigma0"]), hp["imbalance"]
        return {"u": jnp.full((k,), a * root), "v": jnp.full((k,), root / a)}

    def loss(self, params, hp, task):
        residual = params["u"] * params["v"] - task["sigma_star"]
        return 0.5 * jnp.sum(residual * residual)

    def observe(self, params, hp, task):
        return {"sigma": params["u"] * params["v"]}
