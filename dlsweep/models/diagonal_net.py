"""Deep diagonal networks on sparse regression (Woodworth et al. 2020; Azulay et al. 2021, eq. 8 and
section 9; THEORY.md 1.7, 2.8).

The linear predictor beta (d,) is a product of N layers of d weights each, entrywise:

    signed   beta = u_1+ o ... o u_N+  -  u_1- o ... o u_N-     (Azulay's u+ o v+ - u- o v- at N = 2)
    plain    beta = u_1 o ... o u_N

Every layer starts constant: the first at a_1, the others at a, from the scale sigma0 = a_1 a^(N-1)
and the `shape` axis (models/layers.py); so the signed form starts at beta(0) = 0 and the plain one
at beta(0) = sigma0. Depths 1..max run in one program: layers past a trajectory's depth enter the
product as 1 (and get no gradient). The loss is Azulay's 1/(2n) ||X beta - y||^2 over one seed's
n examples x ~ N(0, I_d) with y = <beta*, x> + noise, beta* the first k coordinates at 1/sqrt(k)
(unit norm). With x ~ N(0, I) the population error of a predictor is exact:

    E (<beta, x> - y)^2 = ||beta - beta*||^2 + noise^2.

Observed: the k largest |beta_i| (`sigma`) and the population error; summarized: the population
error and the final predictor `beta` (a list column, for the distances to the interpolators of the
theory: `dlsweep.compare.INTERPOLATORS`).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dlsweep import compare, schema
from dlsweep.models.family import Family
from dlsweep.models.layers import layer_scales

FORMS = ("signed", "plain")


class SparseRegressionModel:
    """What every model of a linear predictor `predictor(params, hp)` on the sparse regression shares:
    beta*, the loss, the observations and the summaries (its fields: d, sparsity, noise, k, dtype)."""

    def beta_star(self):
        return sparse_target(self.d, self.sparsity, self.dtype)

    def loss(self, params, hp, task):
        """1/(2n) ||X beta - y||^2."""
        residual = task["x"] @ self.predictor(params, hp) - task["y"]
        return 0.5 * jnp.mean(residual * residual)

    def population_error(self, beta):
        """||beta - beta*||^2 + noise^2 (module docstring)."""
        gap = beta - self.beta_star()
        return jnp.sum(gap * gap) + self.noise**2

    def observe(self, params, hp, task):
        """The k largest |beta_i| and the population error."""
        beta = self.predictor(params, hp)
        return {"sigma": jax.lax.top_k(jnp.abs(beta), self.k)[0], "population_error": self.population_error(beta)}

    def summarize(self, params, hp, task):
        """The final population error and predictor."""
        beta = self.predictor(params, hp)
        return {"population_error": self.population_error(beta), "beta": beta}


@struct.dataclass
class DiagonalNet(SparseRegressionModel):
    """Static configuration: dimension d, examples n, nonzeros of beta* (sparsity), label noise
    std, observed values k, largest depth, form, dtype of the drawn data."""

    d: int = struct.field(pytree_node=False)
    examples: int = struct.field(pytree_node=False)
    sparsity: int = struct.field(pytree_node=False)
    noise: float = struct.field(pytree_node=False)
    k: int = struct.field(pytree_node=False)
    max_depth: int = struct.field(pytree_node=False)
    form: str = struct.field(pytree_node=False, default="signed")
    dtype: str = struct.field(pytree_node=False, default="float32")

    def draw(self, key, task):
        return sparse_regression(key, self.examples, self.d, self.sparsity, self.noise, self.dtype)

    def init(self, key, hp, task):
        """Layer 1 at a_1, layers 2..N at a (models/layers.py), the ones past the depth at 1."""
        del key
        dtype = hp["sigma0"].dtype
        first, other = layer_scales(hp["sigma0"], hp["depth"], hp.get("shape", 0.0))
        layer = jnp.arange(self.max_depth)[:, None]
        layers = jnp.where(layer == 0, first, jnp.where(layer < hp["depth"], other, 1.0)) * jnp.ones((1, self.d), dtype)
        return {"plus": layers, "minus": layers} if self.form == "signed" else {"plus": layers}

    def predictor(self, params, hp):
        """beta: the product of the used layers of each sign (module docstring)."""
        used = jnp.arange(self.max_depth)[:, None] < hp["depth"]
        product = jnp.prod(jnp.where(used, params["plus"], 1.0), axis=0)
        if self.form == "signed":
            product = product - jnp.prod(jnp.where(used, params["minus"], 1.0), axis=0)
        return product


def sparse_target(d: int, sparsity: int, dtype):
    """beta*: 1/sqrt(k) on the first k coordinates, 0 elsewhere (unit norm)."""
    return jnp.where(jnp.arange(d) < sparsity, 1.0 / jnp.sqrt(float(sparsity)), 0.0).astype(dtype)


def sparse_regression(key, examples: int, d: int, sparsity: int, noise: float, dtype) -> dict:
    """One seed's examples x (n x d, N(0, 1) entries) and labels y = x beta* + noise N(0, 1)."""
    x_key, noise_key = jax.random.split(key)
    x = jax.random.normal(x_key, (examples, d), dtype)
    return {"x": x, "y": x @ sparse_target(d, sparsity, dtype) + noise * jax.random.normal(noise_key, (examples,), dtype)}


SPARSE_REGRESSION_KEYS = {
    "d": "dimension (default 1000)",
    "examples": "Gaussian examples x ~ N(0, I) per seed (default 100)",
    "sparsity": "nonzeros k of beta* (its first k coordinates, 1/sqrt(k) each; default 5)",
    "noise": "label noise std (default 0.1)",
    "top": "how many of the largest |beta_i| are observed (default 5)"}


SPARSE_REGRESSION_FAMILY = dict(   # what Azulay's networks share: data drawn per seed in the program, no
    make_task=lambda sweep: {},     # targets (judged against the theory's interpolators), the shape axis
    observed=r"largest $|\beta_i|$",   # and the summary figure
    targets=lambda task: None,
    optional_axes=("shape",),
    figure="summary",
)


def validate_sparse_regression(task: dict, error: schema.Error) -> dict:
    """Azulay et al.'s sparse regression: `d`, `examples` n, `sparsity` k <= d, label `noise` std,
    `top` <= d observed |beta_i|. The defaults are their section 9: d = 1000, n = 100, k = 5, noise
    0.1. No targets: what a network learns is judged against the interpolators of the theory
    (`compare`)."""
    d = schema.integer(task, "d", 1000, 1, error)
    out = {"d": d, "examples": schema.integer(task, "examples", 100, 1, error),
           "sparsity": schema.integer(task, "sparsity", 5, 1, error)}
    if out["sparsity"] > d:
        raise error("sparsity", f"expected at most d = {d} nonzeros, got {out['sparsity']}")
    out["noise"] = schema.noise(task, 0.1, error)
    out["top"] = schema.integer(task, "top", min(schema.DEFAULT_TOP, d), 1, error)
    if out["top"] > d:
        raise error("top", f"expected at most d = {d}, got {out['top']}")
    return out


def validate_task(task: dict, error: schema.Error) -> dict:
    """[task]: the sparse regression (`validate_sparse_regression`) and `form` (signed or plain)."""
    schema.reject_unknown(task, (*SPARSE_REGRESSION_KEYS, "form"), error)
    return validate_sparse_regression(task, error) | {"form": schema.choice(task, "form", FORMS, error)}


THEORY_QUANTITIES = ("population_error", "l1_l2_position")       # runs columns with a theory against c


def theory_of_c(task: dict, column: str):
    """Azulay's Theorem 1 for the signed network at depth 2: `column` (THEORY_QUANTITIES) of
    argmin Q_c against c, and at the min-l1 and the min-l2 interpolator (the rich and the kernel
    limit), averaged over the seeds' data; None for another column or the plain form."""
    if column not in THEORY_QUANTITIES or task["form"] != "signed":
        return None

    def curves(model, seeds: list[dict], cs) -> tuple[np.ndarray, float, float]:
        from dlsweep.analysis import theory

        beta_star = np.asarray(model.beta_star(), np.float64)
        values = []
        for fitted in seeds:
            x, y, l1, l2 = fitted["x"], fitted["y"], fitted["l1"], fitted["l2"]
            points = np.concatenate([theory.azulay_q_minimizer(x, y, np.asarray(cs)[:, None] * np.ones(x.shape[1])), [l1, l2]])
            if column == "population_error":
                values.append(np.sum((points - beta_star) ** 2, axis=1) + model.noise**2)
            else:
                to_l1, to_l2 = np.linalg.norm(points - l1, axis=1), np.linalg.norm(points - l2, axis=1)
                values.append(to_l1 / (to_l1 + to_l2))
        *along, rich, kernel = np.mean(values, axis=0)
        return np.asarray(along), float(rich), float(kernel)

    return curves


FAMILY = Family(
    name="diagonal_net",
    summary="Woodworth et al. 2020 / Azulay et al. 2021 sec. 9: beta = u_1+ o ... o u_N+ - u_1- o ... o u_N-, "
            "sparse regression, init scale x shape; population error, distance to the theory's interpolators",
    axes=("depth", "sigma0", "lr"),
    task_keys=SPARSE_REGRESSION_KEYS | {
        "form": "signed (default: u+ o v+ - u- o v-, beta(0) = 0) or plain (u o v, beta(0) = sigma0)"},
    validate_task=validate_task,
    build=lambda sweep: DiagonalNet(
        d=sweep.task["d"], examples=sweep.task["examples"], sparsity=sweep.task["sparsity"],
        noise=sweep.task["noise"], k=sweep.task["top"], max_depth=int(max(sweep.axes["depth"])),
        form=sweep.task["form"], dtype=sweep.dtype),
    baseline=compare.interpolators,
    theory_of_c=theory_of_c,
    **SPARSE_REGRESSION_FAMILY,
)
