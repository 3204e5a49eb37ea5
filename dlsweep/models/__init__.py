"""Model families: the registry of the built-in ones (`FAMILIES`), each a module of this package
behind the model contract (`dlsweep.model`: init, loss, observe and the optional hooks), and the
family of a model from the user's own file (`user_family`, `models.user`). A built-in model is a
frozen, hashable dataclass of static configuration (its fields are the compile key).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from dlsweep import compare, tasks
from dlsweep.errors import SpecError
from dlsweep.models import conv, diagonal, diagonal_net, linear_net, matrix_sensing, neuron, quadratic, toy, user

INTEGER_HPS = ("depth", "sparsity", "seed")     # per-trajectory values passed as int32; every other axis in the sweep's float dtype


@dataclasses.dataclass(frozen=True)
class Family:
    """A model family as the spec and the CLI see it."""

    name: str
    summary: str
    axes: tuple[str, ...]                         # swept axes it needs (`seed` is always optional)
    task_keys: Mapping[str, str]                  # [task] keys -> description
    validate_task: Callable[[dict, Callable[[str, str], Exception]], dict]
    build: Callable[[Any], Any]                   # resolved Sweep -> model instance
    make_task: Callable[[Any], dict] = tasks.make  # resolved Sweep -> the task's arrays
    observed: str = r"$\sigma_i(t)$"            # what `sigma` is, as a figure's axis label
    targets: Callable[[dict], tuple | None] = lambda task: task.get("sigma_star")  # validated [task]
    # -> the targets of the observed values (hitting levels are fractions of them), or None
    baseline: Callable[[dict], compare.Baseline | None] = lambda task: None   # validated [task] ->
    # the comparator run on each seed's data when the spec says `compare = true` (`dlsweep.compare`)
    optional_axes: tuple[str, ...] = ()           # further axes it may sweep (before `seed`)
    check_axes: Callable[[dict, dict, Callable[[str, str], Exception]], None] = lambda task, axes, error: None
    # validated [task] and axes -> raises error(key, message) where they do not fit together
    toy_lr: Callable[[dict, Mapping[str, float]], float | None] = lambda task, cell: None   # validated
    # [task] and one cell's axis values -> the toy model's step whose GD this one equals (so Gissin's
    # theory applies to its thresholds), or None
    reference: user.Reference | None = None       # a model from the user's file (`models.user`)


def user_family(reference: user.Reference, instance: Any, task_keys: Sequence[str], axes: Sequence[str]) -> Family:
    """The family of a model from the user's file: it sweeps `lr` and whichever other axes the
    spec gives, takes any `[task]` values as arrays (`user.task_values`), has targets where the
    task gives `sigma_star`, and no baseline or theory."""
    model = user.UserModel(reference, instance)
    summary = next(iter((type(instance).__doc__ or "").strip().splitlines()), "")

    def build(sweep):
        hp = {axis: np.asarray(values[0], np.int32 if axis in INTEGER_HPS else sweep.dtype)
              for axis, values in sweep.axes.items()}
        error = lambda key, message: SpecError(f"{sweep.source}: key '{key}': {message}")  # noqa: E731
        user.check_contract(model, hp, user.task_arrays(sweep.task, sweep.dtype), sweep.task.get("sigma_star"), error)
        return model

    return Family(
        name=reference.label, summary=summary or f"{reference.class_name} from {reference.path}",
        axes=("lr",), task_keys=dict.fromkeys(task_keys, "a value of the model's task"),
        validate_task=user.task_values, build=build,
        make_task=lambda sweep: user.task_arrays(sweep.task, sweep.dtype),
        observed=getattr(instance, "observed", user.OBSERVED),
        optional_axes=tuple(a for a in axes if a not in ("lr", "seed")), reference=reference)


SPARSE_REGRESSION_KEYS = {
    "d": "dimension (default 1000)",
    "examples": "Gaussian examples x ~ N(0, I) per seed (default 100)",
    "sparsity": "nonzeros k of beta* (its first k coordinates, 1/sqrt(k) each; default 5)",
    "noise": "label noise std (default 0.1)",
    "top": "how many of the largest |beta_i| are observed (default 5)"}

FAMILIES: dict[str, Family] = {
    "toy": Family(
        name="toy",
        summary="Gissin et al. 2020 sec. 2: sigma_i = w_i^N, loss 1/(2N^2) ||w^N - sigma*||^2, w_i(0) = sigma0^(1/N)",
        axes=("depth", "sigma0", "lr"),
        task_keys={"sigma_star": "target values sigma*_i > 0 (list of k numbers)"},
        validate_task=tasks.validate_target_values,
        build=lambda sweep: toy.Toy(k=len(sweep.task["sigma_star"]), max_depth=int(max(sweep.axes["depth"]))),
        toy_lr=lambda task, cell: float(cell["lr"]),
    ),
    "matrix_sensing": Family(
        name="matrix_sensing",
        summary="Gissin et al. 2020 sec. 4.1: W = W_N...W_1 (d x d), loss 1/(2N) mean <A, W - W*>^2, top singular values of W",
        axes=("depth", "sigma0", "lr"),
        task_keys={"sigma_star": "nonzero diagonal of W* (k numbers > 0)",
                   "d": "matrix size (default k)",
                   "measurements": "number of Gaussian measurements A_j (default 0: the population loss)",
                   "init": "identity (sigma0^(1/N) I) or gaussian (N(0, sigma0^(2/N)/d) entries)",
                   "top": "how many of the largest singular values are observed (default k; targets only if k)"},
        validate_task=tasks.validate_matrix_sensing,
        build=lambda sweep: matrix_sensing.MatrixSensing(
            d=sweep.task["d"], k=sweep.task["top"], max_depth=int(max(sweep.axes["depth"])),
            init_kind=sweep.task["init"], measurements=sweep.task["measurements"]),
        make_task=tasks.make_matrix_sensing,
        optional_axes=("shape",),
        observed=r"singular values $\sigma_i(W)$",
        targets=tasks.targets_if_all_observed,
        toy_lr=matrix_sensing.toy_lr,
    ),
    "quadratic": Family(
        name="quadratic",
        summary="Gissin et al. 2020 sec. 4.2: f(x) = ||W x||^2 (+ b), variance or squared loss, top eigenvalues of W^T W",
        axes=("sigma0", "lr"),
        task_keys={"sigma_star": "nonzero eigenvalues of W*^T W* (k numbers > 0)",
                   "d": "input dimension (default k)",
                   "examples": "number of Gaussian examples per seed (default 0: the population loss)",
                   "loss": "variance (Definition 2, default) or squared",
                   "bias": "a trainable global bias started at its optimum (default false)",
                   "top": "how many of the largest eigenvalues are observed (default k; targets only if k)"},
        validate_task=tasks.validate_quadratic,
        build=lambda sweep: quadratic.Quadratic(
            d=sweep.task["d"], k=sweep.task["top"], loss_kind=sweep.task["loss"],
            examples=sweep.task["examples"]),
        make_task=tasks.make_quadratic,
        observed=r"eigenvalues $\lambda_i(W^\top W)$",
        targets=tasks.targets_if_all_observed,
    ),
    "diagonal": Family(
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
        validate_task=tasks.validate_diagonal,
        build=lambda sweep: diagonal.Diagonal(
            d=sweep.task["d"], k=sweep.task["top"], max_depth=int(max(sweep.axes["depth"])),
            loss_kind=sweep.task["loss"], examples=sweep.task["examples"], unit_columns=sweep.task["normalize"],
            random_target=sweep.task["w_star"] == tasks.RANDOM_TARGET, select=sweep.task["select"], dtype=sweep.dtype),
        make_task=tasks.make_diagonal,
        observed=r"largest $|\sigma_i|$",
        baseline=compare.diagonal_baseline,
        optional_axes=("sparsity",),
        check_axes=tasks.check_diagonal_axes,
    ),
    "conv": Family(
        name="conv",
        summary="Gissin et al. 2020 App. G.3: N-1 circular convolutions + a dense layer, top Fourier amplitudes",
        axes=("depth", "sigma0", "lr"),
        task_keys={"frequencies": "real DFT coefficients of the labelling vector at frequencies 0, 1, ... (the rest 0)",
                   "d": "signal length (default 2 len(frequencies))",
                   "examples": "number of Gaussian examples per seed (>= 1)",
                   "loss": "exponential (default) or logistic",
                   "top": "how many of the largest Fourier amplitudes are observed (default 5)"},
        validate_task=tasks.validate_conv,
        build=lambda sweep: conv.Conv(
            d=sweep.task["d"], k=sweep.task["top"], max_depth=int(max(sweep.axes["depth"])),
            loss_kind=sweep.task["loss"], examples=sweep.task["examples"]),
        make_task=tasks.make_conv,
        observed=r"Fourier amplitudes $|\hat\beta_f|$",
        baseline=lambda task: compare.SVM,
        optional_axes=("shape",),
    ),
    "linear_net": Family(
        name="linear_net",
        summary="Gidel et al. 2019 / Hacohen & Weinshall: x -> x W_1...W_L, least squares from Sigma_x, Sigma_xy; "
                "singular values, per-PC distance to the optimum",
        axes=("depth", "sigma0", "lr"),
        task_keys={"data": "spectrum (default: x ~ N(0, diag(eigenvalues)), y = x W* + noise), autoencoder (Gidel's "
                           "x = B z + noise, y = x) or digits (scikit-learn's 8x8 digits, one-hot labels)",
                   "eigenvalues": "spectrum: eigenvalues of Sigma_x (d numbers > 0); autoencoder: the latent "
                                  "variances D (default 4, 2, 1, 1/2, 1/4)",
                   "power_law": "spectrum: lambda_i = i^(-a), i = 1..d, instead of eigenvalues",
                   "d": "input size (spectrum: len(eigenvalues); autoencoder: default 20)",
                   "w_true": "spectrum: the diagonal of the true d x p map W* (p = its length; default: d ones)",
                   "examples": "examples per seed (spectrum: default 0, the population statistics; autoencoder: 1000; "
                               "digits: the first n images, default all 1797)",
                   "noise": "spectrum: label noise std (default 0); autoencoder: input noise std (default 1e-3)",
                   "width": "hidden width h (default max(d, p))",
                   "init": "gaussian (default), aligned (Gidel: W(0) = sigma0 U V^T) or glorot (Hacohen's Def. 3)",
                   "whiten": "ZCA-whiten the inputs of each seed (default false)",
                   "shuffle": "shuffle the labels of each seed (default false)",
                   "top": "how many of the largest singular values of W are observed (default min(d, p, h, 5))"},
        validate_task=tasks.validate_linear_net,
        build=lambda sweep: linear_net.LinearNet(
            d=sweep.task["d"], p=sweep.task["p"], width=sweep.task["width"], k=sweep.task["top"],
            max_depth=int(max(sweep.axes["depth"])), init_kind=sweep.task["init"], data=sweep.task["data"],
            examples=sweep.task["examples"], noise=sweep.task.get("noise", 0.0), dtype=sweep.dtype),
        make_task=tasks.make_linear_net,
        observed=r"singular values $\sigma_i(W)$",
        optional_axes=("shape",),
        toy_lr=linear_net.toy_lr,
    ),
    "diagonal_net": Family(
        name="diagonal_net",
        summary="Woodworth et al. 2020 / Azulay et al. 2021 sec. 9: beta = u_1+ o ... o u_N+ - u_1- o ... o u_N-, "
                "sparse regression, init scale x shape; population error, distance to the theory's interpolators",
        axes=("depth", "sigma0", "lr"),
        task_keys=SPARSE_REGRESSION_KEYS | {
            "form": "signed (default: u+ o v+ - u- o v-, beta(0) = 0) or plain (u o v, beta(0) = sigma0)"},
        validate_task=tasks.validate_diagonal_net,
        build=lambda sweep: diagonal_net.DiagonalNet(
            d=sweep.task["d"], examples=sweep.task["examples"], sparsity=sweep.task["sparsity"],
            noise=sweep.task["noise"], k=sweep.task["top"], max_depth=int(max(sweep.axes["depth"])),
            form=sweep.task["form"], dtype=sweep.dtype),
        make_task=lambda sweep: {},
        observed=r"largest $|\beta_i|$",
        targets=lambda task: None,
        baseline=compare.interpolators,
        optional_axes=("shape",),
    ),
    "neuron": Family(
        name="neuron",
        summary="Azulay et al. 2021 sec. 6: f(x) = sum_j a_j <w_j, x> (two layers, scalar output), sparse regression, "
                "init scale x shape; population error, distance to Theorem 2's interpolator",
        axes=("sigma0", "lr"),
        task_keys=SPARSE_REGRESSION_KEYS | {
            "width": "number of neurons (default 1: Theorem 2's single neuron)",
            "directions": "independent (default: a random unit direction per neuron) or shared (one for all: "
                          "strictly balanced at shape 0, and one neuron of scale width x sigma0)"},
        validate_task=tasks.validate_neuron,
        build=lambda sweep: neuron.Neuron(
            d=sweep.task["d"], examples=sweep.task["examples"], sparsity=sweep.task["sparsity"],
            noise=sweep.task["noise"], width=sweep.task["width"], k=sweep.task["top"],
            shared=sweep.task["directions"] == "shared", dtype=sweep.dtype),
        make_task=lambda sweep: {},
        observed=r"largest $|\beta_i|$",
        targets=lambda task: None,
        baseline=compare.neuron_interpolators,
        optional_axes=("shape",),
    ),
}
