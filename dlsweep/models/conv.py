"""The linear circular-convolutional network (Gissin et al. 2020, section 4.3, Appendix G.3).

N - 1 circular convolution layers h_n[i] = sum_k w_n[k] h_{n-1}[(i + k) mod d] and a final fully
connected layer w_N: f(x) = <beta, x> with the induced predictor beta = w_1 (*) ... (*) w_N (the
circular convolution of all N vectors, so rfft(beta) = prod_n rfft(w_n); Gunasekar et al. 2018).
Binary labels y_j = sign <w*, x_j> of m examples with N(0, I) entries, drawn per seed; losses
normalized by 1/N for untied layers (THEORY.md 1.1):

    exponential  l = 1/N (1/m) sum_j exp(-y_j <beta, x_j>)
    logistic     l = 1/N (1/m) sum_j log(1 + exp(-y_j <beta, x_j>))

Init: every layer N(0, sigma0^(2/N) / d), so every Fourier amplitude |beta_hat_f| of the
product is sigma0 in root mean square. Observed: the `k` largest amplitudes |rfft(beta)|,
descending; summarized: the correlation <beta, w*> / (||beta|| ||w*||) of the final predictor
with the labelling vector (by Parseval the same in the frequency domain).

Depth is an axis: layers n >= N are the unit impulse e_0 (rfft = 1) and get no gradient.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dlsweep import compare, schema
from dlsweep.models.diagonal import classification_loss, cosine, gaussian_examples, sign_labels
from dlsweep.models.family import Family
from dlsweep.models.layers import layer_scales

LOSSES = ("exponential", "logistic")


@struct.dataclass
class Conv:
    """Static configuration: signal length d, observed amplitudes k, largest depth, loss, m."""

    d: int = struct.field(pytree_node=False)
    k: int = struct.field(pytree_node=False)
    max_depth: int = struct.field(pytree_node=False)
    loss_kind: str = struct.field(pytree_node=False)
    examples: int = struct.field(pytree_node=False)

    def draw(self, key, task):
        """One seed's dataset: x_j with N(0, 1) entries (m x d), y_j = sign <w*, x_j>."""
        x = gaussian_examples(key, self.examples, self.d, task["w_star"].dtype)
        return {"x": x, "y": sign_labels(x, task["w_star"])}

    def init(self, key, hp, task):
        """N(0, a_l^2 / d) filters, a_1 for the first layer and a for the others (models/layers.py;
        shape 0 by default: every layer at sigma0^(1/N)); padded layers are the unit impulse."""
        dtype = hp["sigma0"].dtype
        first, other = layer_scales(hp["sigma0"], hp["depth"], hp.get("shape", 0.0))
        layer = jnp.arange(self.max_depth)[:, None]
        scale = jnp.where(layer == 0, first, other) / np.sqrt(self.d)
        active = jax.random.normal(key, (self.max_depth, self.d), dtype) * scale
        impulse = jnp.zeros((self.d,), dtype).at[0].set(1.0)
        return {"layers": jnp.where(layer < hp["depth"], active, impulse)}

    def spectrum(self, params, hp):
        """rfft(beta) = prod_n rfft(w_n) over the N active layers."""
        layers = params["layers"]
        depth = hp["depth"]
        if isinstance(depth, (int, np.integer)):
            used = layers[: int(depth)]
        else:
            impulse = jnp.zeros((self.d,), layers.dtype).at[0].set(1.0)
            used = jnp.where(jnp.arange(self.max_depth)[:, None] < depth, layers, impulse)
        return jnp.prod(jnp.fft.rfft(used, axis=-1), axis=0)

    def predictor(self, params, hp):
        """beta = w_1 (*) ... (*) w_N."""
        return jnp.fft.irfft(self.spectrum(params, hp), n=self.d)

    def loss(self, params, hp, task):
        beta = self.predictor(params, hp)
        margin = task["y"] * (task["x"] @ beta)
        return classification_loss(self.loss_kind, margin) / jnp.asarray(hp["depth"], beta.dtype)

    def observe(self, params, hp, task):
        """The k largest Fourier amplitudes |rfft(beta)_f|."""
        return {"sigma": jax.lax.top_k(jnp.abs(self.spectrum(params, hp)), self.k)[0]}

    def summarize(self, params, hp, task):
        return {"correlation": cosine(self.predictor(params, hp), task["w_star"])}


def validate_task(task: dict, error: schema.Error) -> dict:
    """[task] of the circular-convolutional network: `frequencies` (the real DFT coefficients of
    the labelling vector at frequencies 0, 1, ..., the rest 0; >= 0), `d` (signal length),
    `examples` (m >= 1), `loss` (exponential or logistic), `top` (largest amplitudes observed)."""
    schema.reject_unknown(task, ("frequencies", "d", "examples", "loss", "top"), error)
    values = schema.positive_numbers(task, "frequencies", error, allow_zero=True)
    d = schema.integer(task, "d", 2 * len(values), 2 * len(values) - 1, error, bound="2 len(frequencies) - 1")
    top = schema.integer(task, "top", min(5, d // 2 + 1), 1, error)
    if top > d // 2 + 1:
        raise error("top", f"expected at most d // 2 + 1 = {d // 2 + 1} observed amplitudes, got {top}")
    return {"frequencies": values, "d": d, "examples": schema.integer(task, "examples", 1, 1, error),
            "loss": schema.choice(task, "loss", LOSSES, error), "top": top}


def make_task(sweep) -> dict:
    """The labelling vector w* = irfft(frequencies, d) / its norm (Gissin et al. App. G.3)."""
    task = sweep.task
    spectrum = np.zeros(task["d"] // 2 + 1)
    spectrum[: len(task["frequencies"])] = task["frequencies"]
    w_star = np.fft.irfft(spectrum, n=task["d"])
    return schema.arrays(sweep, {"w_star": w_star / np.linalg.norm(w_star)})


FAMILY = Family(
    name="conv",
    summary="Gissin et al. 2020 App. G.3: N-1 circular convolutions + a dense layer, top Fourier amplitudes",
    axes=("depth", "sigma0", "lr"),
    task_keys={"frequencies": "real DFT coefficients of the labelling vector at frequencies 0, 1, ... (the rest 0)",
               "d": "signal length (default 2 len(frequencies))",
               "examples": "number of Gaussian examples per seed (>= 1)",
               "loss": "exponential (default) or logistic",
               "top": "how many of the largest Fourier amplitudes are observed (default 5)"},
    validate_task=validate_task,
    build=lambda sweep: Conv(
        d=sweep.task["d"], k=sweep.task["top"], max_depth=int(max(sweep.axes["depth"])),
        loss_kind=sweep.task["loss"], examples=sweep.task["examples"]),
    make_task=make_task,
    observed=r"Fourier amplitudes $|\hat\beta_f|$",
    baseline=lambda task: compare.SVM,
    optional_axes=("shape",),
)
