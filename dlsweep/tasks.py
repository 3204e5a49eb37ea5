"""Tasks: what every trajectory of a sweep shares (targets, the target or labelling vector),
validated and made from the spec. A task is a dict of arrays passed unbatched (`in_axes=None`);
random data (measurements, datasets) is drawn inside the program by the model's `draw`, per
value of the `seed` axis (`engine.chunk_task`)."""

from __future__ import annotations

import math
from collections.abc import Callable

import jax.numpy as jnp
import numpy as np


Error = Callable[[str, str], Exception]


def _reject_unknown(task: dict, known: tuple[str, ...], error: Error) -> None:
    for key in task:
        if key not in known:
            raise error(key, f"unknown key; expected: {', '.join(known)}")


def _positive_numbers(task: dict, key: str, error: Error, allow_zero: bool = False) -> tuple[float, ...]:
    """A required non-empty list of finite numbers > 0 (>= 0 with `allow_zero`, then not all 0)."""
    if key not in task:
        raise error(key, "missing (required): a list of numbers, e.g. [12.0, 6.0, 4.0, 3.0]")
    values = task[key]
    bound = ">= 0" if allow_zero else "> 0"
    if not isinstance(values, list) or not values:
        raise error(key, f"expected a non-empty list of numbers {bound}, got {values!r}")
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
            raise error(key, f"expected numbers {bound}, got {v!r} (entry {i})")
    if not any(values):
        raise error(key, f"expected at least one nonzero entry, got {values!r}")
    return tuple(float(v) for v in values)


def _integer(task: dict, key: str, default: int, minimum: int, error: Error, bound: str = "", note: str = "") -> int:
    """An integer >= minimum; the message names the bound ("len(sigma_star) = 2") and a note."""
    value = task.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        named = f"{bound} = {minimum}" if bound else f"{minimum}"
        raise error(key, f"expected an integer >= {named}{note}, got {value!r}")
    return value


def _noise(task: dict, default: float, error: Error) -> float:
    """`noise`: a standard deviation >= 0."""
    noise = task.get("noise", default)
    if isinstance(noise, bool) or not isinstance(noise, (int, float)) or not math.isfinite(noise) or noise < 0:
        raise error("noise", f"expected a standard deviation >= 0, got {noise!r}")
    return float(noise)


def _flag(task: dict, key: str, error: Error) -> bool:
    """true or false (default false)."""
    value = task.get(key, False)
    if not isinstance(value, bool):
        raise error(key, f"expected true or false, got {value!r}")
    return value


def _choice(task: dict, key: str, options: tuple, error: Error) -> str:
    """One of `options`; the first is the default."""
    value = task.get(key, options[0])
    if value not in options:
        raise error(key, f"expected one of {options}, got {value!r}")
    return value


def validate_target_values(task: dict, error: Error, known=("sigma_star",)) -> dict:
    """[task] of a model with explicit targets: `sigma_star`, a non-empty list of numbers > 0
    (other keys of `known` are left to the caller)."""
    _reject_unknown(task, known, error)
    return {"sigma_star": _positive_numbers(task, "sigma_star", error)}


def validate_matrix_sensing(task: dict, error: Error) -> dict:
    """[task] of deep matrix sensing: `sigma_star` (the nonzero diagonal of W*, > 0), `d` (size,
    >= len(sigma_star)), `measurements` (m >= 0; 0 = the population loss), `init` (identity or
    gaussian)."""
    from dlsweep.models.matrix_sensing import INITS

    out = validate_target_values(task, error, ("sigma_star", "d", "measurements", "init", "top"))
    k = len(out["sigma_star"])
    out = out | {"d": _integer(task, "d", k, k, error, bound="len(sigma_star)")}
    return out | {"top": _top(task, k, out["d"], error),
                  "measurements": _integer(task, "measurements", 0, 0, error, note=" (0: the population loss)"),
                  "init": _choice(task, "init", INITS, error)}


def validate_quadratic(task: dict, error: Error) -> dict:
    """[task] of the quadratic network: `sigma_star` (the nonzero eigenvalues of W*^T W*, > 0),
    `d` (>= len(sigma_star)), `examples` (n >= 0; 0 = the population loss), `loss` (variance or
    squared), `bias` (a trainable global bias started at its optimum)."""
    from dlsweep.models.quadratic import LOSSES

    out = validate_target_values(task, error, ("sigma_star", "d", "examples", "loss", "bias", "top"))
    k = len(out["sigma_star"])
    bias = _flag(task, "bias", error)
    out = out | {"d": _integer(task, "d", k, k, error, bound="len(sigma_star)")}
    return out | {"top": _top(task, k, out["d"], error),
                  "examples": _integer(task, "examples", 0, 0, error, note=" (0: the population loss)"),
                  "loss": _choice(task, "loss", LOSSES, error), "bias": bias}


def _top(task: dict, k: int, d: int, error: Error) -> int:
    """`top`: how many of the largest values are observed, k = len(sigma_star) <= top <= d."""
    top = _integer(task, "top", k, k, error, bound="len(sigma_star)")
    if top > d:
        raise error("top", f"expected at most d = {d}, got {top}")
    return top


def targets_if_all_observed(task: dict) -> tuple | None:
    """sigma* are the targets of the observed values when exactly k = len(sigma*) are observed
    (more observed values have no targets)."""
    return task["sigma_star"] if task["top"] == len(task["sigma_star"]) else None


RANDOM_TARGET = "random"    # w_star drawn per seed with the `sparsity` axis's number of nonzeros
DEFAULT_TOP = 5


def validate_diagonal(task: dict, error: Error) -> dict:
    """[task] of the signed diagonal network: `w_star` (the first entries of the target /
    labelling vector, the rest 0; or "random": drawn per seed with `sparsity` nonzeros), `d`,
    `examples` (m; 0 = the population loss, squared only), `normalize` (unit-norm example
    columns), `loss` (squared, exponential or logistic), `top` (how many of the largest |sigma_i|
    are observed), `select` (the threshold on |sigma_i| that selects a feature; 0: none). A
    squared loss with a fixed w* has targets: sigma_star = the `top` largest |w*_i|."""
    from dlsweep.models.diagonal import LOSSES

    _reject_unknown(task, ("w_star", "d", "examples", "normalize", "loss", "top", "select"), error)
    loss = _choice(task, "loss", LOSSES, error)
    random = task.get("w_star") == RANDOM_TARGET
    if random:
        if loss != "squared":
            raise error("w_star", f'"{RANDOM_TARGET}" needs loss = "squared" (its labels would change with the sparsity)')
        if "d" not in task:
            raise error("d", "missing: a random w_star needs the dimension d")
        w_star, nonzero = RANDOM_TARGET, []
        d = _integer(task, "d", 1, 1, error)
    else:
        w_star = _signed_numbers(task, "w_star", error, also=f', or "{RANDOM_TARGET}"')
        nonzero = sorted((abs(v) for v in w_star if v != 0), reverse=True)
        d = _integer(task, "d", len(w_star), len(w_star), error, bound="len(w_star)")
    examples = _integer(task, "examples", 0, 0 if loss == "squared" else 1, error,
                        note=" (0: the population loss)" if loss == "squared" else " (a classification loss needs data)")
    normalize = _flag(task, "normalize", error)
    if normalize and examples < 2:
        raise error("normalize", f"unit-norm columns need examples >= 2, got examples = {examples}")
    top = _integer(task, "top", len(nonzero) or min(DEFAULT_TOP, d), 1, error)
    if top > d:
        raise error("top", f"expected at most d = {d} observed values, got {top}")
    select = task.get("select", 0.0)
    if isinstance(select, bool) or not isinstance(select, (int, float)) or not math.isfinite(select) or select < 0:
        raise error("select", f"expected a finite number >= 0 (0: no selection recorded), got {select!r}")
    out = {"w_star": w_star, "d": d, "examples": examples, "normalize": normalize, "loss": loss, "top": top,
           "select": float(select)}
    if loss == "squared" and not random and top <= len(nonzero):
        out["sigma_star"] = tuple(nonzero[:top])
    return out


def check_diagonal_axes(task: dict, axes: dict, error: Error) -> None:
    """A random w_star goes with a `sparsity` axis of values in 1..d, and only it."""
    random = task["w_star"] == RANDOM_TARGET
    if random and "sparsity" not in axes:
        raise error("task.w_star", f'"{RANDOM_TARGET}" needs an axis `sparsity` (the number of nonzeros of w*)')
    if "sparsity" in axes and not random:
        raise error("axes.sparsity", f'a sparsity axis needs task.w_star = "{RANDOM_TARGET}"')
    if random and axes["sparsity"].max() > task["d"]:
        raise error("axes.sparsity", f"expected values <= d = {task['d']}, got {int(axes['sparsity'].max())}")


def validate_conv(task: dict, error: Error) -> dict:
    """[task] of the circular-convolutional network: `frequencies` (the real DFT coefficients of
    the labelling vector at frequencies 0, 1, ..., the rest 0; >= 0), `d` (signal length),
    `examples` (m >= 1), `loss` (exponential or logistic), `top` (largest amplitudes observed)."""
    from dlsweep.models.conv import LOSSES

    _reject_unknown(task, ("frequencies", "d", "examples", "loss", "top"), error)
    values = _positive_numbers(task, "frequencies", error, allow_zero=True)
    d = _integer(task, "d", 2 * len(values), 2 * len(values) - 1, error, bound="2 len(frequencies) - 1")
    top = _integer(task, "top", min(5, d // 2 + 1), 1, error)
    if top > d // 2 + 1:
        raise error("top", f"expected at most d // 2 + 1 = {d // 2 + 1} observed amplitudes, got {top}")
    return {"frequencies": values, "d": d, "examples": _integer(task, "examples", 1, 1, error),
            "loss": _choice(task, "loss", LOSSES, error), "top": top}


def _signed_numbers(task: dict, key: str, error: Error, also: str = "") -> tuple[float, ...]:
    """A required non-empty list of finite numbers, not all 0 (`also`: the other accepted forms)."""
    values = task.get(key)
    if not isinstance(values, list) or not values or not all(
            not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) for v in values):
        raise error(key, f"expected a non-empty list of finite numbers{also}, got {values!r}")
    if not any(values):
        raise error(key, f"expected at least one nonzero entry, got {values!r}")
    return tuple(float(v) for v in values)


def make(sweep) -> dict:
    """The shared arrays of a sweep's task, in the sweep's dtype."""
    return _arrays(sweep, sweep.task)


def make_matrix_sensing(sweep) -> dict:
    """W* = diag(sigma*, 0, ...), d x d (the measurements are drawn in the program, per seed)."""
    task = sweep.task
    d, k = task["d"], len(task["sigma_star"])
    w_star = np.zeros((d, d))
    w_star[np.arange(k), np.arange(k)] = task["sigma_star"]
    return _arrays(sweep, {"sigma_star": task["sigma_star"], "w_star": w_star})


def _arrays(sweep, arrays: dict) -> dict:
    return {key: jnp.asarray(value, dtype=sweep.dtype) for key, value in arrays.items()}


def _switches(sweep, *names: str) -> dict:
    """The task's boolean switches `names` as boolean scalars: traced in the program, where the
    model selects with them (`models.layers.select`), so sweeps differing in them alone share one."""
    return {name: jnp.asarray(bool(sweep.task[name])) for name in names}


def make_quadratic(sweep) -> dict:
    """sigma*, the diagonal of W* = diag(sqrt(sigma*), 0, ...) (d entries) and the flag `bias`."""
    task = sweep.task
    root = np.zeros(task["d"])
    root[: len(task["sigma_star"])] = np.sqrt(task["sigma_star"])
    return _arrays(sweep, {"sigma_star": task["sigma_star"], "w_star_diagonal": root}) | _switches(sweep, "bias")


def make_diagonal(sweep) -> dict:
    """w* (d entries; unit norm for a classification loss, where only its direction labels) and
    the targets sigma*, if any; nothing for a random w* (drawn per seed in the program)."""
    task = sweep.task
    if task["w_star"] == RANDOM_TARGET:
        return {}
    w_star = np.zeros(task["d"])
    w_star[: len(task["w_star"])] = task["w_star"]
    if task["loss"] != "squared":
        w_star /= np.linalg.norm(w_star)
    arrays = {"w_star": w_star} | ({"sigma_star": task["sigma_star"]} if "sigma_star" in task else {})
    return _arrays(sweep, arrays)


def make_conv(sweep) -> dict:
    """The labelling vector w* = irfft(frequencies, d) / its norm (Gissin et al. App. G.3)."""
    task = sweep.task
    spectrum = np.zeros(task["d"] // 2 + 1)
    spectrum[: len(task["frequencies"])] = task["frequencies"]
    w_star = np.fft.irfft(spectrum, n=task["d"])
    return _arrays(sweep, {"w_star": w_star / np.linalg.norm(w_star)})


GIDEL_SPECTRUM = (4.0, 2.0, 1.0, 0.5, 0.25)     # Gidel et al. 2019, section 4: z ~ N(0, D)


def digits(examples: int = 1797) -> tuple[np.ndarray, np.ndarray]:
    """The first `examples` of scikit-learn's 8x8 digits (1797 images, bundled with the package: no
    download): pixels / 16, centred per pixel, and one-hot labels (10 classes)."""
    try:
        from sklearn.datasets import load_digits
    except ImportError as exc:
        raise ImportError("data = \"digits\" needs scikit-learn: pip install 'dlsweep[compare]'") from exc
    data = load_digits()
    x = data.data[:examples] / 16.0
    return x - x.mean(axis=0), np.eye(10)[data.target[:examples]]


def _spectrum(task: dict, error: Error, default: tuple | None) -> tuple[float, ...]:
    """`eigenvalues` (a list > 0) or `power_law` a with `d`: lambda_i = i^(-a), i = 1..d."""
    if "power_law" in task:
        if "eigenvalues" in task:
            raise error("power_law", "give either eigenvalues or power_law, not both")
        a = task["power_law"]
        if isinstance(a, bool) or not isinstance(a, (int, float)) or not math.isfinite(a) or a < 0:
            raise error("power_law", f"expected an exponent >= 0, got {a!r}")
        if "d" not in task:
            raise error("d", "missing: a power_law spectrum needs the dimension d")
        d = _integer(task, "d", 1, 1, error)
        return tuple(float(i) ** -a for i in range(1, d + 1))
    if "eigenvalues" not in task and default is not None:
        return default
    return _positive_numbers(task, "eigenvalues", error)


DIGITS_SHAPE = (64, 1797)     # pixels, images of scikit-learn's digits


def _fixed(task: dict, key: str, value: int, error: Error, what: str) -> None:
    """A key the data fix: allowed only with that value."""
    if key in task and task[key] != value:
        raise error(key, f"is fixed by the data: {what} = {value}, got {task[key]!r}")


def validate_diagonal_net(task: dict, error: Error) -> dict:
    """[task] of the deep diagonal network (models/diagonal_net.py): the sparse regression
    (`validate_sparse_regression`) and `form` (signed or plain)."""
    from dlsweep.models.diagonal_net import FORMS

    _reject_unknown(task, (*SPARSE_REGRESSION, "form"), error)
    return validate_sparse_regression(task, error) | {"form": _choice(task, "form", FORMS, error)}


def validate_neuron(task: dict, error: Error) -> dict:
    """[task] of the two-layer fully connected network (models/neuron.py): the sparse regression
    (`validate_sparse_regression`), `width`, its number of neurons (default 1), and `directions`:
    independent (default) or shared by every neuron (strictly balanced at shape 0)."""
    _reject_unknown(task, (*SPARSE_REGRESSION, "width", "directions"), error)
    return validate_sparse_regression(task, error) | {"width": _integer(task, "width", 1, 1, error),
                                                      "directions": _choice(task, "directions", NEURON_DIRECTIONS, error)}


NEURON_DIRECTIONS = ("independent", "shared")


SPARSE_REGRESSION = ("d", "examples", "sparsity", "noise", "top")


def validate_sparse_regression(task: dict, error: Error) -> dict:
    """Azulay et al.'s sparse regression: `d`, `examples` n, `sparsity` k <= d, label `noise` std,
    `top` <= d observed |beta_i|. The defaults are their section 9: d = 1000, n = 100, k = 5, noise
    0.1. No targets: what a network learns is judged against the interpolators of the theory
    (`compare`)."""
    d = _integer(task, "d", 1000, 1, error)
    out = {"d": d, "examples": _integer(task, "examples", 100, 1, error),
           "sparsity": _integer(task, "sparsity", 5, 1, error)}
    if out["sparsity"] > d:
        raise error("sparsity", f"expected at most d = {d} nonzeros, got {out['sparsity']}")
    out["noise"] = _noise(task, 0.1, error)
    out["top"] = _integer(task, "top", min(DEFAULT_TOP, d), 1, error)
    if out["top"] > d:
        raise error("top", f"expected at most d = {d}, got {out['top']}")
    return out


def validate_linear_net(task: dict, error: Error) -> dict:
    """[task] of the deep linear regression network (models/linear_net.py): `data` (spectrum,
    autoencoder or digits) and its keys, `width`, `init`, `whiten`, `shuffle`, `top`. Targets
    (sigma_star: the `top` largest singular values of the optimum W_opt = Sigma_x^+ Sigma_xy) where
    they are the same for every seed: population spectrum data, the unwhitened autoencoder (its r
    = len(eigenvalues) largest are 1; top <= r), and unshuffled digits."""
    from dlsweep.models.linear_net import DATA, INITS

    data = _choice(task, "data", DATA, error)
    known = {"spectrum": ("eigenvalues", "power_law", "d", "w_true", "examples", "noise"),
             "autoencoder": ("eigenvalues", "d", "examples", "noise"), "digits": ("d", "examples")}[data]
    _reject_unknown(task, ("data", *known, "width", "init", "whiten", "shuffle", "top"), error)
    noise = _noise(task, 1e-3 if data == "autoencoder" else 0.0, error)
    out = {"data": data, "whiten": _flag(task, "whiten", error), "shuffle": _flag(task, "shuffle", error)}
    if data != "digits":
        out["noise"] = noise
    if data == "spectrum":
        lam = _spectrum(task, error, None)
        _fixed(task, "d", len(lam), error, "len(eigenvalues)")
        w_true = _signed_numbers(task, "w_true", error) if "w_true" in task else (1.0,) * len(lam)
        if len(w_true) > len(lam):
            raise error("w_true", f"expected at most d = {len(lam)} entries (the diagonal of the d x p map), got {len(w_true)}")
        out |= {"eigenvalues": lam, "w_true": w_true, "d": len(lam), "p": len(w_true),
                "examples": _integer(task, "examples", 0, 0, error, note=" (0: the population statistics)")}
    elif data == "autoencoder":
        lam = _spectrum(task, error, GIDEL_SPECTRUM)
        d = _integer(task, "d", 20, len(lam), error, bound="len(eigenvalues)")
        out |= {"eigenvalues": lam, "d": d, "p": d, "examples": _integer(task, "examples", 1000, 2, error)}
    else:
        _fixed(task, "d", DIGITS_SHAPE[0], error, "the digits' pixels")
        examples = _integer(task, "examples", DIGITS_SHAPE[1], 2, error, note=" (the first n images)")
        if examples > DIGITS_SHAPE[1]:
            raise error("examples", f"expected at most the {DIGITS_SHAPE[1]} digits, got {examples}")
        out |= {"d": DIGITS_SHAPE[0], "p": 10, "examples": examples}
    if out["shuffle"] and out["data"] != "digits" and out["examples"] == 0:
        raise error("shuffle", "shuffled labels need examples >= 1 (the population statistics have no examples to shuffle)")
    out["width"] = _integer(task, "width", max(out["d"], out["p"]), 1, error)
    out["init"] = _choice(task, "init", INITS, error)
    rank = min(out["d"], out["p"], out["width"])
    out["top"] = _integer(task, "top", min(rank, DEFAULT_TOP), 1, error)
    if out["top"] > min(out["d"], out["p"]):
        raise error("top", f"expected at most min(d, p) = {min(out['d'], out['p'])} singular values, got {out['top']}")
    targets = _linear_net_targets(out)
    if targets is not None and out["top"] <= min(rank, len(targets)) and min(targets[: out["top"]]) > 0:
        out["sigma_star"] = tuple(targets[: out["top"]])
    return out


def _linear_net_targets(task: dict) -> tuple[float, ...] | None:
    """The singular values of W_opt, descending, where no seed changes them; else None."""
    if task["data"] == "autoencoder":    # W_opt: I, or the projector on B's span where the noise's
        # variances fall below the support cut; either way its r = len(eigenvalues) largest are 1
        return (1.0,) * len(task["eigenvalues"]) if not task["whiten"] else None
    if task["shuffle"] or (task["data"] == "spectrum" and task["examples"] > 0):
        return None
    if task["data"] == "spectrum":
        w_true = _true_map(task)
        w_opt = np.sqrt(task["eigenvalues"])[:, None] * w_true if task["whiten"] else w_true
    else:
        x, y = digits(task["examples"])
        w_opt = _least_squares(x, y, task["whiten"])
    return tuple(float(v) for v in np.linalg.svd(w_opt, compute_uv=False))


def _true_map(task: dict) -> np.ndarray:
    """W* of spectrum data: d x p with `w_true` on its diagonal."""
    w_true = np.zeros((task["d"], task["p"]))
    w_true[np.arange(task["p"]), np.arange(task["p"])] = task["w_true"]
    return w_true


def _least_squares(x: np.ndarray, y: np.ndarray, whiten: bool) -> np.ndarray:
    """Sigma_x^+ Sigma_xy (of ZCA-whitened x if asked), the support cut as in the model."""
    from dlsweep.models.linear_net import SUPPORT_RTOL

    lam, pcs = np.linalg.eigh(x.T @ x / len(x))
    support = lam > SUPPORT_RTOL * lam.max()
    inverse = np.where(support, 1.0 / np.where(support, lam, 1.0), 0.0)
    scale = np.sqrt(inverse) if whiten else inverse
    return pcs @ (scale[:, None] * (pcs.T @ (x.T @ y / len(x))))


def make_linear_net(sweep) -> dict:
    """The fixed data: the spectrum (`eigenvalues`) and W* (`w_true`, d x p diagonal), the
    autoencoder's latent variances and its basis B (d x r, entries U[0, 1] drawn from the sweep's
    seed), or the digits (`x`, `y`); plus the targets sigma*, if any, and the flags `whiten` and
    `shuffle` (boolean scalars). Samples, shuffles and whitening are per seed, in the program
    (`LinearNet.draw`)."""
    task = sweep.task
    flags = _switches(sweep, "whiten", "shuffle")
    arrays = {"sigma_star": task["sigma_star"]} if "sigma_star" in task else {}
    if task["data"] == "digits":
        x, y = digits(task["examples"])
        return _arrays(sweep, arrays | {"x": x, "y": y}) | flags
    arrays["eigenvalues"] = task["eigenvalues"]
    if task["data"] == "autoencoder":     # Gidel's fixed B, entries U[0, 1], from the sweep's seed
        arrays["basis"] = np.random.default_rng(sweep.seed).uniform(size=(task["d"], len(task["eigenvalues"])))
    if task["data"] == "spectrum":
        arrays["w_true"] = _true_map(task)
    return _arrays(sweep, arrays) | flags
