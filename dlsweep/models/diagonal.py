"""The signed diagonal network (Gissin et al. 2020, Appendix D and section 4.3, Appendix G.1).

The linear predictor sigma = w_+^N - w_-^N (elementwise powers of two weight vectors, "depth" N as
an exponent like the toy model), w_+(0) = w_-(0) = sigma0^(1/N), so sigma(0) = 0. With the
toy model's depth normalization 1/N^2 (THEORY.md 1.1), over m examples x_j (N(0, I) entries, or
columns scaled to unit norm: a dictionary of m-dimensional atoms, App. D):

    squared      l = 1/(2N^2) (1/m) sum_j <w* - sigma, x_j>^2             (y_j = <w*, x_j>)
                 (m = 0: the population loss 1/(2N^2) ||sigma - w*||^2, the signed toy model)
    exponential  l = 1/N^2 (1/m) sum_j exp(-y_j <sigma, x_j>),      y_j = sign <w*, x_j>
    logistic     l = 1/N^2 (1/m) sum_j log(1 + exp(-y_j <sigma, x_j>))

w* is fixed by the task, or (squared loss) drawn per seed as App. D's sparse hidden vector: the
trajectory's `sparsity` s features at random positions, values 1 + Exp(mean 10); the positions of
sparsity s are the first s of one random order, so the supports of a seed are nested in s.

Observed: the `k` largest |sigma_i|, descending; summarized: the correlation
<sigma, w*> / (||sigma|| ||w*||) of the final predictor with w*. With `select` > 0 the model
selects feature i once |sigma_i| > select (App. D's "chosen" features), and the engine keeps the
order of selection (compared with orthogonal matching pursuit, `dlsweep.compare`).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dlsweep import compare, schema
from dlsweep.models.family import Family
from dlsweep.models.toy import integer_power

LOSSES = ("squared", "exponential", "logistic")
EXPONENTIAL_MEAN = 10.0     # |w*_i| = 1 + Exp(mean 10) on the support of a random sparse w* (App. D)


@struct.dataclass
class Diagonal:
    """Static configuration: dimension d, observed values k, largest depth, loss, examples m,
    unit-norm example columns, a w* drawn per seed and sparsity, the selection threshold, the
    dtype of drawn data."""

    d: int = struct.field(pytree_node=False)
    k: int = struct.field(pytree_node=False)
    max_depth: int = struct.field(pytree_node=False)
    loss_kind: str = struct.field(pytree_node=False)
    examples: int = struct.field(pytree_node=False)
    unit_columns: bool = struct.field(pytree_node=False, default=False)
    random_target: bool = struct.field(pytree_node=False, default=False)
    select: float = struct.field(pytree_node=False, default=0.0)
    dtype: str = struct.field(pytree_node=False, default="float32")

    def draw(self, key, task):
        """One seed's data: x (m x d, N(0, 1) entries or unit-norm columns) with labels
        sign <w*, x_j> for a classification loss; for a random w*, the magnitudes of its entries
        and the random order of the features (`target`)."""
        drawn = {}
        if self.examples:
            x = gaussian_examples(key, self.examples, self.d, self.dtype, self.unit_columns)
            drawn = {"x": x} if self.loss_kind == "squared" else {"x": x, "y": sign_labels(x, task["w_star"])}
        if self.random_target:
            magnitude_key, order_key = jax.random.split(jax.random.fold_in(key, 1))
            drawn["magnitudes"] = 1.0 + EXPONENTIAL_MEAN * jax.random.exponential(magnitude_key, (self.d,), self.dtype)
            drawn["order"] = jax.random.permutation(order_key, self.d).astype(jnp.int32)
        return drawn

    def init(self, key, hp, task):
        del key
        dtype = hp["sigma0"].dtype
        w0 = jnp.power(hp["sigma0"], 1.0 / jnp.asarray(hp["depth"], dtype))
        return {"plus": jnp.full((self.d,), w0, dtype), "minus": jnp.full((self.d,), w0, dtype)}

    def predictor(self, params, hp):
        """sigma = w_+^N - w_-^N."""
        return (integer_power(params["plus"], hp["depth"], self.max_depth)
                - integer_power(params["minus"], hp["depth"], self.max_depth))

    def target(self, hp, task):
        """w*: the task's, or the seed's random one with the trajectory's sparsity."""
        return target(task, hp["sparsity"]) if self.random_target else task["w_star"]

    def loss(self, params, hp, task):
        """The module docstring's losses, 1/N^2-normalized."""
        sigma = self.predictor(params, hp)
        n = jnp.asarray(hp["depth"], sigma.dtype)
        if self.loss_kind == "squared":
            residual = self.target(hp, task) - sigma
            if not self.examples:
                return jnp.sum(residual * residual) / (2.0 * n * n)
            residual = task["x"] @ residual
            return jnp.mean(residual * residual) / (2.0 * n * n)
        return classification_loss(self.loss_kind, task["y"] * (task["x"] @ sigma)) / (n * n)

    def observe(self, params, hp, task):
        """The k largest |sigma_i|."""
        return {"sigma": jax.lax.top_k(jnp.abs(self.predictor(params, hp)), self.k)[0]}

    def selected(self, params, hp, task):
        """|sigma_i| > select (none when select = 0)."""
        if not self.select:
            return jnp.zeros((0,), bool)
        return jnp.abs(self.predictor(params, hp)) > self.select

    def summarize(self, params, hp, task):
        return {"correlation": cosine(self.predictor(params, hp), self.target(hp, task))}


def target(task, sparsity):
    """The random sparse w* of one seed at `sparsity` s: magnitudes_i where order_i < s, else 0
    (NumPy or JAX arrays)."""
    return jnp.where(task["order"] < sparsity, task["magnitudes"], 0.0)


def gaussian_examples(key, examples: int, d: int, dtype, unit_columns: bool = False):
    """x with N(0, 1) entries (examples x d), or each column scaled to unit norm."""
    x = jax.random.normal(key, (examples, d), dtype)
    return x / jnp.linalg.norm(x, axis=0) if unit_columns else x


def sign_labels(x, w_star):
    """y_j = sign <w*, x_j>."""
    return jnp.sign(x @ w_star)


def classification_loss(kind: str, margin):
    """(1/m) sum_j exp(-margin_j) (exponential) or log(1 + exp(-margin_j)) (logistic)."""
    return jnp.mean(jnp.exp(-margin) if kind == "exponential" else jax.nn.softplus(-margin))


def cosine(a, b):
    """<a, b> / (||a|| ||b||) (0 where a = 0)."""
    norm = jnp.linalg.norm(a) * jnp.linalg.norm(b)
    return jnp.where(norm > 0, a @ b / jnp.where(norm > 0, norm, 1.0), 0.0)


RANDOM_TARGET = "random"    # w_star drawn per seed with the `sparsity` axis's number of nonzeros


def validate_task(task: dict, error: schema.Error) -> dict:
    """[task] of the signed diagonal network: `w_star` (the first entries of the target /
    labelling vector, the rest 0; or "random": drawn per seed with `sparsity` nonzeros), `d`,
    `examples` (m; 0 = the population loss, squared only), `normalize` (unit-norm example
    columns), `loss` (squared, exponential or logistic), `top` (how many of the largest |sigma_i|
    are observed), `select` (the threshold on |sigma_i| that selects a feature; 0: none). A
    squared loss with a fixed w* has targets: sigma_star = the `top` largest |w*_i|."""
    schema.reject_unknown(task, ("w_star", "d", "examples", "normalize", "loss", "top", "select"), error)
    loss = schema.choice(task, "loss", LOSSES, error)
    random = task.get("w_star") == RANDOM_TARGET
    if random:
        if loss != "squared":
            raise error("w_star", f'"{RANDOM_TARGET}" needs loss = "squared" (its labels would change with the sparsity)')
        if "d" not in task:
            raise error("d", "missing: a random w_star needs the dimension d")
        w_star, nonzero = RANDOM_TARGET, []
        d = schema.integer(task, "d", 1, 1, error)
    else:
        w_star = schema.signed_numbers(task, "w_star", error, also=f', or "{RANDOM_TARGET}"')
        nonzero = sorted((abs(v) for v in w_star if v != 0), reverse=True)
        d = schema.integer(task, "d", len(w_star), len(w_star), error, bound="len(w_star)")
    examples = schema.integer(task, "examples", 0, 0 if loss == "squared" else 1, error,
                              note=" (0: the population loss)" if loss == "squared" else " (a classification loss needs data)")
    normalize = schema.flag(task, "normalize", error)
    if normalize and examples < 2:
        raise error("normalize", f"unit-norm columns need examples >= 2, got examples = {examples}")
    top = schema.integer(task, "top", len(nonzero) or min(schema.DEFAULT_TOP, d), 1, error)
    if top > d:
        raise error("top", f"expected at most d = {d} observed values, got {top}")
    select = task.get("select", 0.0)
    if not schema.is_number(select) or not math.isfinite(select) or select < 0:
        raise error("select", f"expected a finite number >= 0 (0: no selection recorded), got {select!r}")
    out = {"w_star": w_star, "d": d, "examples": examples, "normalize": normalize, "loss": loss, "top": top,
           "select": float(select)}
    if loss == "squared" and not random and top <= len(nonzero):
        out["sigma_star"] = tuple(nonzero[:top])
    return out


def check_axes(task: dict, axes: dict, error: schema.Error) -> None:
    """A random w_star goes with a `sparsity` axis of values in 1..d, and only it."""
    random = task["w_star"] == RANDOM_TARGET
    if random and "sparsity" not in axes:
        raise error("task.w_star", f'"{RANDOM_TARGET}" needs an axis `sparsity` (the number of nonzeros of w*)')
    if "sparsity" in axes and not random:
        raise error("axes.sparsity", f'a sparsity axis needs task.w_star = "{RANDOM_TARGET}"')
    if random and axes["sparsity"].max() > task["d"]:
        raise error("axes.sparsity", f"expected values <= d = {task['d']}, got {int(axes['sparsity'].max())}")


def make_task(sweep) -> dict:
    """w* (d entries; unit norm for a classification loss, where only its direction labels) and
    the targets sigma*, if any; nothing for a random w* (drawn per seed in the program)."""
    task = sweep.task
    if task["w_star"] == RANDOM_TARGET:
        return {}
    w_star = np.zeros(task["d"])
    w_star[: len(task["w_star"])] = task["w_star"]
    if task["loss"] != "squared":
        w_star /= np.linalg.norm(w_star)
    values = {"w_star": w_star} | ({"sigma_star": task["sigma_star"]} if "sigma_star" in task else {})
    return schema.arrays(sweep, values)


def baseline(task: dict) -> compare.Baseline | None:
    """The comparator: the SVM for a classification loss, orthogonal matching pursuit for the
    squared loss on data with the selection recorded (`select` > 0), else none."""
    if task["loss"] != "squared":
        return compare.SVM
    return compare.omp(target) if task["select"] > 0 and task["examples"] > 0 else None


FAMILY = Family(
    name="diagonal",
    summary="Gissin et al. 2020 App. D/G.1: sigma = w+^N - w-^N, squared / exponential / logistic loss, top |sigma_i|",
    axes=("depth", "sigma0", "lr"),
    task_keys={"w_star": 'first entries of the target / labelling vector w* (the rest 0), or "random": per seed, '
                         "`sparsity` nonzeros 1 + Exp(mean 10) at random positions (squared loss)",
               "d": "dimension (default len(w_star))",
               "examples": "number of Gaussian examples per seed (default 0: the population loss, squared only)",
               "normalize": "scale each feature's column of examples to unit norm (a dictionary; default false)",
               "loss": "squared (default; targets: the largest |w*_i|), exponential or logistic (labels sign <w*, x>)",
               "top": "how many of the largest |sigma_i| are observed (default: the nonzeros of w_star, or 5)",
               "select": "a feature is selected once |sigma_i| > select; the runs table keeps the order (default 0: off)"},
    validate_task=validate_task,
    build=lambda sweep: Diagonal(
        d=sweep.task["d"], k=sweep.task["top"], max_depth=int(max(sweep.axes["depth"])),
        loss_kind=sweep.task["loss"], examples=sweep.task["examples"], unit_columns=sweep.task["normalize"],
        random_target=sweep.task["w_star"] == RANDOM_TARGET, select=sweep.task["select"], dtype=sweep.dtype),
    make_task=make_task,
    observed=r"largest $|\sigma_i|$",
    baseline=baseline,
    optional_axes=("sparsity",),
    check_axes=check_axes,
)
