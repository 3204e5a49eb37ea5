"""Deep linear regression networks (Gidel et al. 2019; Hacohen & Weinshall; THEORY.md 1.5, 1.6).

Examples x (rows of X, n x d) are mapped to predictions x W_1 W_2 ... W_L, with the end-to-end map
W = W_1 ... W_L (d x p): W_1 is d x h, W_2 .. W_{L-1} are h x h, W_L is h x p (h: the width), and
depth 1 is the linear model W itself. The loss is the mean squared error, computed from the data's
sufficient statistics so that its cost does not grow with n (Gidel's section 2):

    l(W) = 1/(2n) ||Y - X W||_F^2 = 1/2 tr(W^T Sigma_x W) - tr(W^T Sigma_xy) + 1/(2n) ||Y||_F^2,
    Sigma_x = X^T X / n,   Sigma_xy = X^T Y / n.

It is computed around the least-squares optimum W_opt = Sigma_x^+ Sigma_xy, the same function
rewritten exactly (any W_opt; R = Sigma_xy - Sigma_x W_opt is 0 up to the pseudo-inverse's cut):

    l(W) = 1/2 tr(D^T (Sigma_x D - 2 R)) + l(W_opt),   D = W - W_opt,
    l(W_opt) = 1/(2n) ||Y - X W_opt||_F^2  (p noise^2 / 2 for population data),

because the first form cancels the constant 1/(2n) ||Y||^2 against the rest: in float32 its loss
had a floor of ~1e-7 ||Y||^2 / n (gidel-fig2's losses, 2.5e-5 at ||Y||^2 / (2n) = 10, came in steps
of 1.9e-6), while D and the residuals keep their own relative precision.

(Hacohen writes the summed loss 1/2 ||W X - Y||^2: his step mu is lr / n and his eigenvalues d_j
are n times those of Sigma_x.) The statistics are made per value of the `seed` axis inside the
program (`draw`): sampled data, a label shuffle, and ZCA whitening X <- X Sigma_x^(-1/2) (on the
support of Sigma_x) all happen there.

Init (layer scales s_1 for W_1 and s for the others from sigma0 and the optional `shape` axis, 0 by
default: models/layers.py; the product's scale is sigma0 whatever the shape):
    aligned   W_1 = s_1 U E, W_l = s I, W_L = s E V^T with U, V the singular vectors of Sigma_xy
              and E the rectangular identity: W(0) = sigma0 U I V^T (Gidel's Theorem 1 init with
              Q = I, sigma0 = e^(-2 delta) at L = 2)
    gaussian  i.i.d. N(0, s_l^2 / fan-out) entries (each layer keeps a vector's norm on average)
    glorot    i.i.d. N(0, s_l^2 / h) entries (Hacohen's Definition 3 at sigma0 = 1: variance 1/m_1,
              2/(m_{l-1} + m_l) = 1/h and 1/m_{L-1}; depth 1: 1/p)
    glorot_uniform  i.i.d. uniform entries of variance s_l^2 2 / (fan-in + fan-out) (Glorot & Bengio's
              init at sigma0 = 1: U(-a, a), a = sqrt(6 / (fan-in + fan-out)); Hacohen's Figure 12
              sets it against Definition 3)

Observed: `sigma`, the k largest singular values of W; `nuclear_norm` (the sum of all of them);
`norm_squared`, ||W||_F^2 (Gidel's Figure 1 and Cor. 1); `excess_loss`, the loss above the
least-squares optimum's, l(W) - l(W_opt);
`reconstruction_error`, ||W - W_ref||_2 with W_ref the task's reference map (Gidel's eq. 28: B D
B^T for the autoencoder; else the least-squares optimum W_opt = Sigma_x^+ Sigma_xy); and
`pc_distance`, per principal direction u_j of the data (Sigma_x = U diag(lambda) U^T, descending),
the distance ||u_j^T (W - W_opt)|| of W's coordinates along u_j (Hacohen's w_j) to the optimum's;
`rank_distance`, ||W - W_k||_F for the reduced-rank solutions W_k, k = 1..top (Gidel's Cor. 2:
the two-layer network passes near each in turn). On labelled data (the digits, Gaussian classes)
also `accuracy`, the share of the n training examples (whitened where the task whitens) whose
largest output x W is at their (possibly shuffled) label (Hacohen's Figure 10), and with held-out
examples `test_accuracy`, the same share of those (mapped by the training examples' whitening;
Hacohen's Figure 9a, on examples whose highest or lowest principal directions may be amplified:
`amplified`). Where the task asks for them: `pc_weights`, the coordinates
w_j = u_j^T W (p values each) along the listed principal directions, flattened direction-major
(Hacohen's Figure 2, whose spread over networks is `analyses.pc_weight_spread`); and
`gradient_scales` (Hacohen's eq. 7 and Figure 3), per layer l = 1..max_depth (NaN past the run's
depth) of an i.i.d. init, with P_l = W_1 ... W_{l-1} (d x m_{l-1}) and S_l = W_{l+1} ... W_L
(m_l x p), the gradient scale matrices

    B_l = P_l P_l^T (d x d, I for l = 1),   A_l = S_l^T S_l (p x p, I for l = L),

whose expectations at the init are beta_l I and alpha_l I (his Theorem 3, eqs. 12-13, in this
orientation: beta_l = prod_{n<l} cols_n var_n, alpha_l = prod_{n>l} rows_n var_n over the layers'
entry variances var_n = s_n^2 / fan_n; 1 for Definition 3): observed as `a_diagonal_distance`,
mean_i |A_l,ii - alpha_l|, and `a_off_diagonal`, the mean of A_l's off-diagonal entries, and
`b_diagonal_distance`, `b_off_diagonal` alike.
"""

from __future__ import annotations

import functools
import gzip
import importlib.util
import math
from collections.abc import Mapping
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from dlsweep import schema
from dlsweep.errors import SpecError
from dlsweep.models import chain
from dlsweep.models.family import Family
from dlsweep.models.layers import layer_scales, select, singular_value_drift

INITS = ("gaussian", "aligned", "glorot", "glorot_uniform")
IID_INITS = ("gaussian", "glorot", "glorot_uniform")     # entries drawn i.i.d.: gradient scale expectations
GRADIENT_SCALES = ("a_diagonal_distance", "a_off_diagonal", "b_diagonal_distance", "b_off_diagonal")
DATA = ("spectrum", "autoencoder", "digits", "classes")
LABELLED = ("digits", "classes")     # fixed examples with class labels (one-hot targets): accuracies observed
AMPLIFY = ("none", "highest", "lowest")
SUPPORT_RTOL = 1e-6      # eigenvalues of Sigma_x below this times the largest count as 0 (pseudo-inverse)


@struct.dataclass
class LinearNet:
    """Static configuration: input size d, output size p, width h, observed values k, largest
    depth, init scheme, data kind, examples per seed (0: population statistics), label noise (std),
    float dtype, the principal directions whose coordinates are observed (0-based), whether the
    gradient scale matrices are observed, the held-out examples of labelled data (0: none).
    Whitening and label shuffling are the task's flags (`whiten`, `shuffle`), traced, so that
    sweeps differing in them alone share one compiled program."""

    d: int = struct.field(pytree_node=False)
    p: int = struct.field(pytree_node=False)
    width: int = struct.field(pytree_node=False)
    k: int = struct.field(pytree_node=False)
    max_depth: int = struct.field(pytree_node=False)
    init_kind: str = struct.field(pytree_node=False)
    data: str = struct.field(pytree_node=False)
    examples: int = struct.field(pytree_node=False)
    noise: float = struct.field(pytree_node=False)
    dtype: str = struct.field(pytree_node=False, default="float32")
    pc_weights: tuple[int, ...] = struct.field(pytree_node=False, default=())
    gradient_scales: bool = struct.field(pytree_node=False, default=False)
    test_examples: int = struct.field(pytree_node=False, default=0)

    # ------------------------------------------------------------------------- data per seed

    def _samples(self, key, task):
        """The examples X (n x d), targets Y (n x p) and reference map (or None) of one seed."""
        k_latent, k_noise = jax.random.split(key)
        dtype = self.dtype
        if self.data in LABELLED:
            return task["x"], task["y"], None
        if self.data == "autoencoder":        # Gidel's section 4: x = B z + eps, z ~ N(0, D), y = x, B fixed
            lam, basis = task["eigenvalues"], task["basis"]
            z = jax.random.normal(k_latent, (self.examples, lam.shape[0]), dtype) * jnp.sqrt(lam)
            x = z @ basis.T + self.noise * jax.random.normal(k_noise, (self.examples, self.d), dtype)
            return x, x, (basis * lam) @ basis.T
        x = jax.random.normal(k_latent, (self.examples, self.d), dtype) * jnp.sqrt(task["eigenvalues"])
        return x, x @ task["w_true"] + self.noise * jax.random.normal(k_noise, (self.examples, self.p), dtype), None

    def _statistics(self, key, task):
        """(Sigma_x, Sigma_xy, 1/(2n) ||Y||^2, W_ref or None, W -> l(W) without cancellation, Y) of
        one seed, before whitening: l(W) = 1/(2n) ||Y - X W||^2 from the samples, and for population
        data 1/2 tr((W - W*)^T diag(lambda) (W - W*)) + p noise^2 / 2 (Y None)."""
        if self.data == "spectrum" and self.examples == 0:     # population: x ~ N(0, diag(lambda)), y = x W + noise
            lam, w_true = task["eigenvalues"], task["w_true"]
            offset = 0.5 * jnp.sum(lam[:, None] * w_true * w_true) + 0.5 * self.p * self.noise**2
            loss_at = lambda w: 0.5 * jnp.sum(lam[:, None] * (w - w_true) ** 2) + 0.5 * self.p * self.noise**2  # noqa: E731
            return jnp.diag(lam), lam[:, None] * w_true, offset, None, loss_at, None
        k_data, k_shuffle = jax.random.split(key)
        x, y, reference = self._samples(k_data, task)
        y = select(task["shuffle"], jax.random.permutation(k_shuffle, y), y)
        n = x.shape[0]
        loss_at = lambda w: 0.5 * jnp.sum((y - x @ w) ** 2) / n      # noqa: E731
        return x.T @ x / n, x.T @ y / n, 0.5 * jnp.sum(y * y) / n, reference, loss_at, y

    def draw(self, key, task):
        """The statistics of one seed and what init, loss and observe need of them: `sigma_x`,
        `sigma_xy`, `offset` (1/(2n) ||Y||^2, the loss at W = 0), `pcs` (U, descending eigenvalues
        of the unwhitened Sigma_x), `w_opt` (Sigma_x^+ Sigma_xy), `loss_opt` (l(W_opt)), `residual`
        (R = Sigma_xy - Sigma_x W_opt), `w_ref` (the reconstruction reference) and `xy_left`,
        `xy_right` (singular vectors of Sigma_xy, for the aligned init); for labelled data `labels`
        (each example's class, after the shuffle), `whitening` (the map Z with whitened X = X Z:
        Sigma_x^(-1/2) on its support, or I) and, with held-out examples, `test_labels` (never
        shuffled)."""
        sigma_x, sigma_xy, offset, reference, loss_at, y = self._statistics(key, task)
        lam, pcs = jnp.linalg.eigh(sigma_x)
        lam, pcs = lam[::-1], pcs[:, ::-1]
        support = lam > SUPPORT_RTOL * lam[0]
        inverse = jnp.where(support, 1.0 / jnp.where(support, lam, 1.0), 0.0)
        w_opt = pcs @ (inverse[:, None] * (pcs.T @ sigma_xy))
        # whitening maps X W_opt to itself, so the optimum's loss is the same either way
        loss_opt = loss_at(w_opt)
        whiten = task["whiten"]             # X <- X Sigma_x^(-1/2): Sigma_x -> the projector on its support
        sigma_xy = select(whiten, pcs @ (jnp.sqrt(inverse)[:, None] * (pcs.T @ sigma_xy)), sigma_xy)
        sigma_x = select(whiten, (pcs * support) @ pcs.T, sigma_x)
        inverse = select(whiten, support.astype(lam.dtype), inverse)
        w_opt = select(whiten, pcs @ (inverse[:, None] * (pcs.T @ sigma_xy)), w_opt)
        left, _, right = jnp.linalg.svd(sigma_xy)
        drawn = {"sigma_x": sigma_x, "sigma_xy": sigma_xy, "offset": offset, "pcs": pcs, "w_opt": w_opt,
                 "loss_opt": loss_opt, "residual": sigma_xy - sigma_x @ w_opt,
                 "w_ref": w_opt if reference is None else reference, "xy_left": left, "xy_right": right.T,
                 "reduced_rank": self._reduced_rank(pcs, inverse, sigma_xy)}
        if self.data in LABELLED:
            zca = (pcs * jnp.sqrt(jnp.where(support, 1.0 / jnp.where(support, lam, 1.0), 0.0))) @ pcs.T
            drawn |= {"labels": jnp.argmax(y, axis=1).astype(jnp.int32),
                      "whitening": select(whiten, zca, jnp.eye(self.d, dtype=zca.dtype))}
            if self.test_examples:
                drawn["test_labels"] = jnp.argmax(task["y_test"], axis=1).astype(jnp.int32)
        return drawn

    def _reduced_rank(self, pcs, inverse, sigma_xy):
        """W_k, k = 1..top: the minimum-norm minimizers of the loss over rank(W) <= k (reduced-rank
        regression, Gidel's Cor. 2): W_k = S P_k(S Sigma_xy) with S = Sigma_x^(+1/2) and P_k the best
        rank-k approximation (Eckart-Young), so W_k = sum_{i<=k} s_i S a_i b_i^T from the SVD of
        S Sigma_xy."""
        root = (pcs * jnp.sqrt(inverse)) @ pcs.T
        a, s, b = jnp.linalg.svd(root @ sigma_xy, full_matrices=False)
        terms = s[: self.k, None, None] * (root @ a[:, : self.k]).T[:, :, None] * b[: self.k, None, :]
        return jnp.cumsum(terms, axis=0)

    # ------------------------------------------------------------------------- the network

    def init(self, key, hp, task):
        """`single` (d x p, the depth-1 map) and, for depth >= 2 grids, `first` (d x h), `hidden`
        (max_depth - 2 x h x h; the unused ones stay the identity) and `last` (h x p)."""
        dtype, h, hidden = hp["sigma0"].dtype, self.width, max(self.max_depth - 2, 0)
        first_scale, scale = layer_scales(hp["sigma0"], hp["depth"], hp.get("shape", 0.0))
        sigma0 = hp["sigma0"]
        if self.init_kind == "aligned":
            left, right = task["xy_left"].astype(dtype), task["xy_right"].astype(dtype)
            params = {"single": sigma0 * left @ jnp.eye(self.d, self.p, dtype=dtype) @ right.T,
                      "first": first_scale * left @ jnp.eye(self.d, h, dtype=dtype),
                      "hidden": scale * jnp.broadcast_to(jnp.eye(h, dtype=dtype), (hidden, h, h)),
                      "last": scale * jnp.eye(h, self.p, dtype=dtype) @ right.T}
        else:           # one draw for all layers (four draws measured 2x the compile time)
            shapes = {"single": (self.d, self.p), "first": (self.d, h), "hidden": (hidden, h, h), "last": (h, self.p)}
            sizes = np.cumsum([int(np.prod(shape)) for shape in shapes.values()])
            if self.init_kind == "glorot_uniform":      # U(-sqrt 3, sqrt 3): unit variance
                draw = jax.random.uniform(key, (int(sizes[-1]),), dtype, -np.sqrt(3.0), np.sqrt(3.0))
            else:
                draw = jax.random.normal(key, (int(sizes[-1]),), dtype)
            unit = {name: part.reshape(shape) for (name, shape), part in zip(shapes.items(), jnp.split(draw, sizes[:-1]))}
            fan = self.init_fans()
            params = {"single": sigma0 * unit["single"] / np.sqrt(fan["single"]),
                      "first": first_scale * unit["first"] / np.sqrt(fan["first"]),
                      "hidden": scale * unit["hidden"] / np.sqrt(fan["hidden"]),
                      "last": scale * unit["last"] / np.sqrt(fan["last"])}
        if self.max_depth == 1:
            return {"single": params["single"]}
        layer = jnp.arange(self.max_depth - 2)[:, None, None]
        params["hidden"] = jnp.where(layer < hp["depth"] - 2, params["hidden"], jnp.eye(h, dtype=dtype))
        return params

    def init_fans(self) -> dict[str, float]:
        """Each layer role's entry variance at sigma0 = 1 is 1 / this (module docstring): the fan-out
        (gaussian; glorot with h for W_L too), (fan-in + fan-out) / 2 (glorot_uniform)."""
        d, p, h = self.d, self.p, self.width
        if self.init_kind == "glorot_uniform":
            return {"single": (d + p) / 2, "first": (d + h) / 2, "hidden": h, "last": (h + p) / 2}
        return {"single": p, "first": h, "hidden": h, "last": h if self.init_kind == "glorot" else p}

    def product(self, params, depth):
        """W = W_1 ... W_L; depth 1 is `single`, unused hidden layers enter as the identity (so get
        no gradient). A Python-integer depth (compiled in) multiplies only the layers it uses. Small
        layers on CPU are multiplied by `chain.chain`, others in the order of fewest multiplies
        (`chain.cheapest`)."""
        if self.max_depth == 1:
            return params["single"]
        if isinstance(depth, (int, np.integer)):
            if int(depth) == 1:
                return params["single"]
            return self._chain(params["first"], *params["hidden"][: int(depth) - 2], params["last"])
        eye = jnp.eye(self.width, dtype=params["first"].dtype)
        used = jnp.where(jnp.arange(self.max_depth - 2)[:, None, None] < depth - 2, params["hidden"], eye)
        return jnp.where(depth == 1, params["single"], self._chain(params["first"], *used, params["last"]))

    def _chain(self, *factors):
        if chain.fits(self.d, self.p, self.width):
            return chain.chain(*factors)
        return chain.cheapest(*factors)

    def loss(self, params, hp, task):
        """1/2 tr(W^T Sigma_x W) - tr(W^T Sigma_xy) + 1/(2n) ||Y||^2 (module docstring)."""
        return _loss_of(self.product(params, hp["depth"]), task)

    def observe(self, params, hp, task):
        """The k largest singular values of W, its nuclear norm, its reconstruction error, its
        distance to the optimum along each principal direction, and what the data and task add
        (module docstring)."""
        w = self.product(params, hp["depth"])
        singular = jnp.linalg.svd(w, compute_uv=False)
        along = task["pcs"].T @ (w - task["w_opt"])
        observed = {"sigma": singular[: self.k], "nuclear_norm": jnp.sum(singular), "norm_squared": jnp.sum(w * w),
                    "excess_loss": _excess_loss(w, task),
                    "reconstruction_error": jnp.linalg.norm(w - task["w_ref"], ord=2),
                    "pc_distance": jnp.sqrt(jnp.sum(along * along, axis=1)),
                    "rank_distance": jnp.sqrt(jnp.sum((w - task["reduced_rank"]) ** 2, axis=(1, 2)))}
        if self.data in LABELLED:
            classifier = task["whitening"] @ w
            observed["accuracy"] = _share_correct(task["x"] @ classifier, task["labels"])
            if self.test_examples:
                observed["test_accuracy"] = _share_correct(task["x_test"] @ classifier, task["test_labels"])
        if self.pc_weights:
            observed["pc_weights"] = (task["pcs"][:, np.asarray(self.pc_weights)].T @ w).reshape(-1)
        if self.gradient_scales:
            observed |= self._gradient_scales(params, hp)
        return observed

    def drift_from(self, anchor, hp, task):
        """How far the observed singular values of W can be from those at `anchor` (Weyl's
        inequality, `layers.singular_value_drift`): where the layout is `engine.anchored` (not a
        one-by-one sweep under the small-work bound) the engine then observes W, an SVD, once every
        `engine.ANCHOR_EVERY` steps instead of after every step. One core of a 2-core Xeon,
        linear-net-phase (d = p = 3, width 8, one by one): two of its Gaussian sweep's eight seeds
        (270 runs, anchored) 8.5 -> 4.4 us a step; its aligned sweep (135 runs, under the bound, so
        not anchored by the layout) forced anchored 6.0 -> 2.6 us a step, executed / needed
        trajectory-steps 1.00 -> 1.03 (the replays); the same first-hitting steps."""
        return singular_value_drift(lambda params: self.product(params, hp["depth"]), anchor)

    def _gradient_scales(self, params, hp):
        """The module docstring's `GRADIENT_SCALES`, one value per layer l = 1..max_depth: layer l <
        depth is chain slot l - 1 of (W_1, hidden..., W_L), the last layer the last slot (the
        unused hidden layers between are the identity and enter no product), NaN past the depth."""
        depth, dtype = hp["depth"], params["first"].dtype
        slots = [params["first"], *[params["hidden"][i] for i in range(self.max_depth - 2)], params["last"]]
        first_scale, scale = layer_scales(hp["sigma0"], depth, hp.get("shape", 0.0))
        fan = self.init_fans()
        variance = [first_scale**2 / fan["first"], *[scale**2 / fan["hidden"]] * (self.max_depth - 2),
                    scale**2 / fan["last"]]
        rows = [self.d] + [self.width] * (self.max_depth - 1)
        cols = [self.width] * (self.max_depth - 1) + [self.p]
        used = [jnp.asarray(True)] + [slot <= depth - 2 for slot in range(1, self.max_depth - 1)] + [jnp.asarray(True)]
        grow = lambda factor, k: jnp.where(used[k], factor, 1.0)  # noqa: E731  (an unused layer: I, variance 1)
        prefixes, beta = [jnp.eye(self.d, dtype=dtype)], [jnp.ones((), dtype)]
        for k, slot in enumerate(slots[:-1]):
            prefixes.append(prefixes[-1] @ slot)
            beta.append(beta[-1] * grow(cols[k] * variance[k], k))
        suffixes, alpha = [jnp.eye(self.p, dtype=dtype)], [jnp.ones((), dtype)]
        for k in range(len(slots) - 1, 0, -1):
            suffixes.insert(0, slots[k] @ suffixes[0])
            alpha.insert(0, alpha[0] * grow(rows[k] * variance[k], k))
        a = [_diagonal_and_off(s.T @ s, expected) for s, expected in zip(suffixes, alpha)]
        b = [_diagonal_and_off(p @ p.T, expected) for p, expected in zip(prefixes, beta)]
        layer = jnp.arange(1, self.max_depth + 1)
        slot_of = jnp.where(layer < depth, layer - 1, self.max_depth - 1)
        beyond, alone = layer > depth, (layer == 1) & (depth == 1)      # depth 1 (`single`): A_1 = B_1 = I
        def pick(values):
            return jnp.where(beyond, jnp.nan, jnp.where(alone, 0.0, jnp.stack(values)[slot_of]))

        return dict(zip(GRADIENT_SCALES, (pick([v[0] for v in a]), pick([v[1] for v in a]),
                                          pick([v[0] for v in b]), pick([v[1] for v in b]))))


def _share_correct(outputs, labels):
    """The share of examples whose largest output is at their label."""
    return jnp.mean((jnp.argmax(outputs, axis=1) == labels).astype(outputs.dtype))


def _diagonal_and_off(matrix, expected):
    """(mean_i |M_ii - expected|, the mean of M's off-diagonal entries) of a square M."""
    n = matrix.shape[0]
    diagonal = jnp.diagonal(matrix)
    off = (jnp.sum(matrix) - jnp.sum(diagonal)) / max(n * (n - 1), 1)
    return jnp.mean(jnp.abs(diagonal - expected)), off


def toy_lr(task: dict, cell: Mapping[str, float]) -> float | None:
    """The toy model's step (models/toy.py) that this network's GD equals on a cell of axis values,
    or None where it follows other dynamics. With population spectrum data, Sigma_x = lambda I (equal
    eigenvalues; lambda = 1 once whitened), Sigma_xy = lambda W* and the aligned init at shape 0 (balanced),
    every layer keeps the form a_i (mode i of W = U diag(a^N) V^T) and each mode is a scalar
    network on the loss lambda/2 (a^N - w*_i)^2: a <- a - eta lambda a^(N-1) (a^N - w*_i). That is the
    toy's eq. 9 at step eta_toy = N lambda eta (its loss carries 1/N^2), so its thresholds are the
    toy's (Gissin et al. Theorems 2 and 3) at that step."""
    if (task["data"] != "spectrum" or task["examples"] > 0 or task["init"] != "aligned"
            or task["width"] < task["p"] or cell.get("shape", 0.0) != 0.0):
        return None
    eigenvalues = task["eigenvalues"]
    if not task["whiten"] and max(eigenvalues) != min(eigenvalues):
        return None
    return float(cell["depth"]) * (1.0 if task["whiten"] else float(eigenvalues[0])) * float(cell["lr"])


def _excess_loss(w, task):
    """l(W) - l(W_opt) = 1/2 tr(D^T (Sigma_x D - 2 R)), D = W - W_opt (module docstring)."""
    d = w - task["w_opt"]
    return 0.5 * jnp.sum(d * (task["sigma_x"] @ d - 2.0 * task["residual"]))


def _loss_of(w, task):
    """The loss of the end-to-end map W, l(W_opt) plus the excess (module docstring)."""
    return _excess_loss(w, task) + task["loss_opt"]


GIDEL_SPECTRUM = (4.0, 2.0, 1.0, 0.5, 0.25)     # Gidel et al. 2019, section 4: z ~ N(0, D)
DIGITS_SHAPE = (64, 1797)     # pixels, images of scikit-learn's digits


def digits(examples: int = 1797, test_examples: int = 0) -> dict[str, np.ndarray]:
    """The first `examples` of scikit-learn's 8x8 digits (1797 images, bundled with the package: no
    download) as `x` (pixels / 16, centred per pixel) and `y` (one-hot labels, 10 classes), and the
    next `test_examples` as `x_test`, `y_test` (centred by the training examples' mean)."""
    pixels, targets = _digits_table()
    x, labels = pixels[: examples + test_examples] / 16.0, targets[: examples + test_examples]
    return _labelled(x - x[:examples].mean(axis=0), labels, examples, 10)


@functools.lru_cache(maxsize=1)
def _digits_table() -> tuple[np.ndarray, np.ndarray]:
    """(pixels 1797 x 64, labels) of scikit-learn's digits, read from the file it ships
    (`load_digits` reads the same) without importing scikit-learn, which takes a second; through
    `load_digits` where that file is not where this version keeps it."""
    found = importlib.util.find_spec("sklearn")
    if found is None or found.origin is None:
        raise ImportError("data = \"digits\" needs scikit-learn: pip install 'dlsweep[compare]'")
    path = Path(found.origin).parent / "datasets" / "data" / "digits.csv.gz"
    if path.is_file():
        with gzip.open(path, "rt") as table:
            data = np.loadtxt(table, delimiter=",")
        pixels, labels = data[:, :-1], data[:, -1].astype(int)
    else:
        from sklearn.datasets import load_digits

        loaded = load_digits()
        pixels, labels = loaded.data, loaded.target
    pixels.setflags(write=False)        # shared by every caller
    labels.setflags(write=False)
    return pixels, labels


def classes(task: dict, seed: int) -> dict[str, np.ndarray]:
    """Gaussian classes with a power-law spectrum, drawn once from `seed` (Hacohen's section 6.1
    premise on a synthetic dataset: the labels live in the leading principal directions, the
    trailing ones are noise): each example x = mu_c + z of a class c uniform on the `classes`,
    z ~ N(0, diag(lambda)) with lambda the task's eigenvalues (descending), and the class means mu_c
    ~ separation N(0, diag(lambda)) on the first `signal` coordinates, 0 on the others. `examples`
    training and `test_examples` held-out examples, both centred by the training mean (as
    `digits`)."""
    rng = np.random.default_rng(seed)
    lam, count = np.asarray(task["eigenvalues"]), task["classes"]
    scale = np.sqrt(lam)
    means = task["separation"] * rng.standard_normal((count, len(lam))) * scale * (np.arange(len(lam)) < task["signal"])

    def sample(n):      # the training examples first: the same whatever the number held out
        labels = rng.integers(0, count, n)
        return means[labels] + rng.standard_normal((n, len(lam))) * scale, labels

    (x, labels), (x_test, test_labels) = sample(task["examples"]), sample(task["test_examples"])
    return _labelled(np.concatenate([x, x_test]) - x.mean(axis=0), np.concatenate([labels, test_labels]),
                     task["examples"], count)


def _labelled(x: np.ndarray, labels: np.ndarray, examples: int, count: int) -> dict[str, np.ndarray]:
    """The first `examples` rows as training `x`, one-hot `y`; the rest as `x_test`, `y_test`."""
    onehot = np.eye(count)[labels]
    return {"x": x[:examples], "y": onehot[:examples], "x_test": x[examples:], "y_test": onehot[examples:]}


def amplified(data: dict[str, np.ndarray], task: dict, error: schema.Error) -> dict[str, np.ndarray]:
    """Hacohen's section 6.1 and Appendix D.1: the training examples' `amplify_pcs` highest or
    lowest principal directions (of Sigma_x = X^T X / n) amplified by `amplify_factor`, X <- c X
    (I + (f - 1) U_k U_k^T), and the held-out examples alike, with c renormalizing the training
    examples' total variance ||X||_F^2 to its value before (the paper renormalizes to std 1). The
    directions are among those of nonzero variance (eigenvalues above the support cut: the digits'
    constant pixels have none; `error` names `amplify_pcs` where it asks for more, as a steep
    spectrum may); the data unchanged for amplify = "none"."""
    if task.get("amplify", "none") == "none":
        return data
    x, k = data["x"], task["amplify_pcs"]
    lam, pcs = np.linalg.eigh(x.T @ x / len(x))        # ascending eigenvalues
    pcs = pcs[:, lam > SUPPORT_RTOL * lam[-1]]
    if k >= pcs.shape[1]:
        raise error("amplify_pcs", f"expected fewer than the {pcs.shape[1]} principal directions of the training "
                                   f"examples above the support cut ({SUPPORT_RTOL:g} of the largest eigenvalue), "
                                   f"got {k}")
    chosen = pcs[:, -k:] if task["amplify"] == "highest" else pcs[:, :k]
    amplify = np.eye(x.shape[1]) + (task["amplify_factor"] - 1.0) * chosen @ chosen.T
    scale = np.linalg.norm(x) / np.linalg.norm(x @ amplify)
    return data | {"x": scale * x @ amplify, "x_test": scale * data["x_test"] @ amplify}


def labelled_data(task: dict, seed: int, error: schema.Error) -> dict[str, np.ndarray]:
    """The fixed examples of labelled data (`digits` or `classes`), amplified where the task says."""
    if task["data"] == "digits":
        return amplified(digits(task["examples"], task.get("test_examples", 0)), task, error)
    return amplified(classes(task, seed), task, error)


def _spectrum(task: dict, error: schema.Error, default: tuple | None) -> tuple[float, ...]:
    """`eigenvalues` (a list > 0) or `power_law` a with `d`: lambda_i = i^(-a), i = 1..d."""
    if "power_law" in task:
        if "eigenvalues" in task:
            raise error("power_law", "give either eigenvalues or power_law, not both")
        a = task["power_law"]
        if not schema.is_number(a) or not math.isfinite(a) or a < 0:
            raise error("power_law", f"expected an exponent >= 0, got {a!r}")
        if "d" not in task:
            raise error("d", "missing: a power_law spectrum needs the dimension d")
        d = schema.integer(task, "d", 1, 1, error)
        return tuple(float(i) ** -a for i in range(1, d + 1))
    if "eigenvalues" not in task and default is not None:
        return default
    return schema.positive_numbers(task, "eigenvalues", error)


def validate_task(task: dict, error: schema.Error) -> dict:
    """[task] of the deep linear regression network: `data` (spectrum, autoencoder, digits or
    classes) and its keys, `width`, `init`, `whiten`, `shuffle`, `top`, the observables asked for
    and, for labelled data, the amplification. Targets (sigma_star: the `top` largest singular
    values of the optimum W_opt = Sigma_x^+ Sigma_xy) where they are the same for every seed:
    population spectrum data, the unwhitened autoencoder (its r = len(eigenvalues) largest are 1;
    top <= r), and unshuffled digits."""
    data = schema.choice(task, "data", DATA, error)
    labelled = ("test_examples", "amplify", "amplify_pcs", "amplify_factor")
    known = {"spectrum": ("eigenvalues", "power_law", "d", "w_true", "examples", "noise"),
             "autoencoder": ("eigenvalues", "d", "examples", "noise"), "digits": ("d", "examples", *labelled),
             "classes": ("eigenvalues", "power_law", "d", "classes", "signal", "separation", "examples",
                         *labelled)}[data]
    schema.reject_unknown(task, ("data", *known, "width", "init", "whiten", "shuffle", "top", "pc_weights",
                                 "gradient_scales"), error)
    noise = schema.noise(task, 1e-3 if data == "autoencoder" else 0.0, error)
    out = {"data": data, "whiten": schema.flag(task, "whiten", error), "shuffle": schema.flag(task, "shuffle", error)}
    if data not in LABELLED:
        out["noise"] = noise
    if data == "spectrum":
        lam = _spectrum(task, error, None)
        schema.fixed(task, "d", len(lam), error, "len(eigenvalues)")
        w_true = schema.signed_numbers(task, "w_true", error) if "w_true" in task else (1.0,) * len(lam)
        if len(w_true) > len(lam):
            raise error("w_true", f"expected at most d = {len(lam)} entries (the diagonal of the d x p map), got {len(w_true)}")
        out |= {"eigenvalues": lam, "w_true": w_true, "d": len(lam), "p": len(w_true),
                "examples": schema.integer(task, "examples", 0, 0, error, note=" (0: the population statistics)")}
    elif data == "autoencoder":
        lam = _spectrum(task, error, GIDEL_SPECTRUM)
        d = schema.integer(task, "d", 20, len(lam), error, bound="len(eigenvalues)")
        out |= {"eigenvalues": lam, "d": d, "p": d, "examples": schema.integer(task, "examples", 1000, 2, error)}
    elif data == "digits":
        schema.fixed(task, "d", DIGITS_SHAPE[0], error, "the digits' pixels")
        examples = schema.integer(task, "examples", DIGITS_SHAPE[1], 2, error, note=" (the first n images)")
        if examples > DIGITS_SHAPE[1]:
            raise error("examples", f"expected at most the {DIGITS_SHAPE[1]} digits, got {examples}")
        held_out = schema.integer(task, "test_examples", 0, 0, error, note=" (the images after the first n)")
        if examples + held_out > DIGITS_SHAPE[1]:
            raise error("test_examples", f"expected at most the {DIGITS_SHAPE[1] - examples} digits after the first "
                                         f"examples = {examples}, got {held_out}")
        out |= {"d": DIGITS_SHAPE[0], "p": 10, "examples": examples} | ({"test_examples": held_out} if held_out else {})
    else:
        out |= _classes(task, error)
    if data in LABELLED:
        out |= _amplification(task, out, error)
    if out["shuffle"] and out["data"] not in LABELLED and out["examples"] == 0:
        raise error("shuffle", "shuffled labels need examples >= 1 (the population statistics have no examples to shuffle)")
    out["width"] = schema.integer(task, "width", max(out["d"], out["p"]), 1, error)
    out["init"] = schema.choice(task, "init", INITS, error)
    rank = min(out["d"], out["p"], out["width"])
    out["top"] = schema.integer(task, "top", min(rank, schema.DEFAULT_TOP), 1, error)
    if out["top"] > min(out["d"], out["p"]):
        raise error("top", f"expected at most min(d, p) = {min(out['d'], out['p'])} singular values, got {out['top']}")
    directions, scales = _directions(task, out["d"], error), schema.flag(task, "gradient_scales", error)
    out |= {"pc_weights": directions} if directions else {}     # only where asked: captions list the task
    out |= {"gradient_scales": True} if scales else {}
    if scales and out["init"] not in IID_INITS:
        raise error("gradient_scales", f"their expectations alpha_l, beta_l are those of an init drawn i.i.d. "
                                       f"({', '.join(IID_INITS)}), got init = {out['init']!r}")
    targets = _targets(out, error)
    if targets is not None and out["top"] <= min(rank, len(targets)) and min(targets[: out["top"]]) > 0:
        out["sigma_star"] = tuple(targets[: out["top"]])
    return out


CLASSES = {"d": 64, "power_law": 2.0, "classes": 10, "signal": 16, "separation": 1.0, "examples": 80,
           "test_examples": 2000}       # data = "classes" by default: Hacohen's Figure 9a on synthetic data


def _classes(task: dict, error: schema.Error) -> dict:
    """The keys of `classes` data (`classes` in the module's functions), defaults `CLASSES`."""
    if "eigenvalues" in task:
        if "power_law" in task:
            raise error("power_law", "give either eigenvalues or power_law, not both")
        lam = schema.positive_numbers(task, "eigenvalues", error)
        schema.fixed(task, "d", len(lam), error, "len(eigenvalues)")
        if list(lam) != sorted(lam, reverse=True):
            raise error("eigenvalues", f"expected descending eigenvalues (the signal lives in the leading ones), "
                                       f"got {list(lam)}")
    else:
        lam = _spectrum({"power_law": CLASSES["power_law"], "d": CLASSES["d"]} | task, error, None)
    d = len(lam)
    count = schema.integer(task, "classes", CLASSES["classes"], 2, error)
    signal = schema.integer(task, "signal", min(CLASSES["signal"], d), 1, error,
                            note=" (the leading coordinates that carry the class means)")
    if signal > d:
        raise error("signal", f"expected at most d = {d} coordinates, got {signal}")
    return {"eigenvalues": lam, "d": d, "p": count, "classes": count, "signal": signal,
            "separation": schema.number(task, "separation", CLASSES["separation"], 0.0, error),
            "examples": schema.integer(task, "examples", CLASSES["examples"], 2, error),
            "test_examples": schema.integer(task, "test_examples", CLASSES["test_examples"], 0, error)}


AMPLIFIED_SHARE = 0.015     # Hacohen's section 6.1: the highest or lowest 1.5% of the principal components
AMPLIFY_FACTOR = 10.0       # ... amplified by a factor 10 (Appendix D.1)


def _amplification(task: dict, data: dict, error: schema.Error) -> dict:
    """`amplify` (none, highest or lowest), `amplify_pcs` (default 1.5% of d, at least 1, at most
    the training examples' directions of nonzero variance) and `amplify_factor` (default 10); the
    last two only with an amplification."""
    kind = schema.choice(task, "amplify", AMPLIFY, error)
    if kind == "none":
        for key in ("amplify_pcs", "amplify_factor"):
            if key in task:
                raise error(key, 'applies only with amplify = "highest" or "lowest"')
        return {}
    if data["whiten"]:
        raise error("amplify", "whitening undoes an amplification (the whitened examples are the same up to a "
                               "rotation); use one or the other")
    count = schema.integer(task, "amplify_pcs", max(1, round(AMPLIFIED_SHARE * data["d"])), 1, error)
    if data["data"] == "digits":
        x = digits(data["examples"])["x"]
        lam = np.linalg.eigvalsh(x.T @ x / len(x))
        directions, where = int(np.sum(lam > SUPPORT_RTOL * lam[-1])), "of the digits' nonzero variance"
    else:       # centred Gaussian examples span min(d, n - 1) directions
        directions, where = min(data["d"], data["examples"] - 1), "that the training examples span"
    if count >= directions:
        raise error("amplify_pcs", f"expected fewer than the {directions} principal directions {where}, got {count}")
    # classes: the directions above the support cut are known only once drawn (`amplified` checks)
    return {"amplify": kind, "amplify_pcs": count,
            "amplify_factor": schema.number(task, "amplify_factor", AMPLIFY_FACTOR, 0.0, error)}


ALL_DIRECTIONS = "all"


def _directions(task: dict, d: int, error: schema.Error) -> tuple[int, ...] | str:
    """`pc_weights`: distinct principal directions j in 1..d (by decreasing eigenvalue), or "all"
    (W itself, in the basis of the principal directions); default none."""
    values = task.get("pc_weights", [])
    if values == ALL_DIRECTIONS:
        return values
    if not isinstance(values, list) or not all(schema.is_int(j) and 1 <= j <= d for j in values):
        raise error("pc_weights", f'expected a list of principal directions j in 1..d = {d}, or "{ALL_DIRECTIONS}", '
                                  f"got {values!r}")
    if len(set(values)) < len(values):
        raise error("pc_weights", f"expected distinct directions, got {values!r}")
    return tuple(values)


def recorded_directions(task: dict) -> tuple[int, ...]:
    """The principal directions (1-based) whose coordinates a validated task records (`pc_weights`)."""
    values = task.get("pc_weights", ())
    return tuple(range(1, task["d"] + 1)) if values == ALL_DIRECTIONS else tuple(values)


def check_axes(task: dict, axes: dict, error: schema.Error) -> None:
    """Gradient scale matrices need layers: some depth >= 2."""
    if task.get("gradient_scales") and max(axes["depth"]) < 2:
        raise error("task.gradient_scales", f"the gradient scale matrices of a one-layer model are I; "
                                            f"expected some depth >= 2, got depths {list(map(int, axes['depth']))}")


def _targets(task: dict, error: schema.Error) -> tuple[float, ...] | None:
    """The singular values of W_opt, descending, where no seed changes them; else None (`classes`
    data is drawn from the sweep's seed, not known here)."""
    if task["data"] == "autoencoder":    # W_opt: I, or the projector on B's span where the noise's
        # variances fall below the support cut; either way its r = len(eigenvalues) largest are 1
        return (1.0,) * len(task["eigenvalues"]) if not task["whiten"] else None
    if task["shuffle"] or (task["data"] == "spectrum" and task["examples"] > 0) or task["data"] == "classes":
        return None
    if task["data"] == "spectrum":
        w_true = _true_map(task)
        w_opt = np.sqrt(task["eigenvalues"])[:, None] * w_true if task["whiten"] else w_true
    else:
        data = labelled_data(task, 0, error)
        w_opt = _least_squares(data["x"], data["y"], task["whiten"])
    return tuple(float(v) for v in np.linalg.svd(w_opt, compute_uv=False))


def _true_map(task: dict) -> np.ndarray:
    """W* of spectrum data: d x p with `w_true` on its diagonal."""
    w_true = np.zeros((task["d"], task["p"]))
    w_true[np.arange(task["p"]), np.arange(task["p"])] = task["w_true"]
    return w_true


def _least_squares(x: np.ndarray, y: np.ndarray, whiten: bool) -> np.ndarray:
    """Sigma_x^+ Sigma_xy (of ZCA-whitened x if asked), the support cut as in the model."""
    lam, pcs = np.linalg.eigh(x.T @ x / len(x))
    support = lam > SUPPORT_RTOL * lam.max()
    inverse = np.where(support, 1.0 / np.where(support, lam, 1.0), 0.0)
    scale = np.sqrt(inverse) if whiten else inverse
    return pcs @ (scale[:, None] * (pcs.T @ (x.T @ y / len(x))))


def make_task(sweep) -> dict:
    """The fixed data: the spectrum (`eigenvalues`) and W* (`w_true`, d x p diagonal), the
    autoencoder's latent variances and its basis B (d x r, entries U[0, 1] drawn from the sweep's
    seed), or labelled examples (`x`, `y`, and held-out `x_test`, `y_test` where asked: the digits,
    or classes drawn from the sweep's seed; amplified where asked); plus the targets sigma*, if any,
    and the flags `whiten` and `shuffle` (boolean scalars). Samples, shuffles and whitening are per
    seed, in the program (`LinearNet.draw`)."""
    task = sweep.task
    flags = schema.switches(sweep, "whiten", "shuffle")
    values = {"sigma_star": task["sigma_star"]} if "sigma_star" in task else {}
    if task["data"] in LABELLED:
        def error(key: str, message: str) -> SpecError:       # as the spec's own errors name a key
            return SpecError(f"{sweep.source}: key 'task.{key}': {message}")

        data = labelled_data(task, sweep.seed, error)
        if not task.get("test_examples", 0):
            data = {name: data[name] for name in ("x", "y")}
        return schema.arrays(sweep, values | data) | flags
    values["eigenvalues"] = task["eigenvalues"]
    if task["data"] == "autoencoder":     # Gidel's fixed B, entries U[0, 1], from the sweep's seed
        values["basis"] = np.random.default_rng(sweep.seed).uniform(size=(task["d"], len(task["eigenvalues"])))
    if task["data"] == "spectrum":
        values["w_true"] = _true_map(task)
    return schema.arrays(sweep, values) | flags


FAMILY = Family(
    name="linear_net",
    summary="Gidel et al. 2019 / Hacohen & Weinshall: x -> x W_1...W_L, least squares from Sigma_x, Sigma_xy; "
            "singular values, per-PC distance to the optimum",
    axes=("depth", "sigma0", "lr"),
    task_keys={"data": "spectrum (default: x ~ N(0, diag(eigenvalues)), y = x W* + noise), autoencoder (Gidel's "
                       "x = B z + noise, y = x), digits (scikit-learn's 8x8 digits, one-hot labels) or classes "
                       "(Gaussian classes x = mu_c + N(0, diag(eigenvalues)), one-hot labels, drawn from the seed)",
               "eigenvalues": "spectrum: eigenvalues of Sigma_x (d numbers > 0); autoencoder: the latent "
                              "variances D (default 4, 2, 1, 1/2, 1/4); classes: the noise's (descending)",
               "power_law": "spectrum, classes: lambda_i = i^(-a), i = 1..d, instead of eigenvalues (classes: "
                            "default 2)",
               "d": "input size (spectrum: len(eigenvalues); autoencoder: default 20; classes: 64)",
               "classes": "classes: how many (default 10)",
               "signal": "classes: the leading coordinates that carry the class means (default 16)",
               "separation": "classes: the class means' scale relative to the noise's (default 1)",
               "test_examples": "digits, classes: held-out examples whose accuracy is observed (digits: the "
                                "images after the first n, default 0; classes: default 2000)",
               "amplify": "digits, classes: amplify the training examples' highest or lowest principal "
                          "directions above the support cut (Hacohen's section 6.1; default none; not with whiten)",
               "amplify_pcs": "how many directions are amplified (default 1.5% of d, at least 1)",
               "amplify_factor": "by how much (default 10; the total variance is kept)",
               "w_true": "spectrum: the diagonal of the true d x p map W* (p = its length; default: d ones)",
               "examples": "examples per seed (spectrum: default 0, the population statistics; autoencoder: 1000; "
                           "digits: the first n images, default all 1797; classes: 80)",
               "noise": "spectrum: label noise std (default 0); autoencoder: input noise std (default 1e-3)",
               "width": "hidden width h (default max(d, p))",
               "init": "gaussian (default), aligned (Gidel: W(0) = sigma0 U V^T), glorot (Hacohen's Def. 3) or "
                       "glorot_uniform (Glorot & Bengio's uniform init)",
               "whiten": "ZCA-whiten the inputs of each seed (default false)",
               "shuffle": "shuffle the labels of each seed (default false)",
               "top": "how many of the largest singular values of W are observed (default min(d, p, h, 5))",
               "pc_weights": "principal directions j (1-based) whose coordinates w_j = u_j^T W are observed, "
                             'or "all" (default none)',
               "gradient_scales": "observe the gradient scale matrices A_l, B_l of every layer (Hacohen's Figure "
                                  "3; an i.i.d. init; default false)"},
    validate_task=validate_task,
    build=lambda sweep: LinearNet(
        d=sweep.task["d"], p=sweep.task["p"], width=sweep.task["width"], k=sweep.task["top"],
        max_depth=int(max(sweep.axes["depth"])), init_kind=sweep.task["init"], data=sweep.task["data"],
        examples=sweep.task["examples"], noise=sweep.task.get("noise", 0.0), dtype=sweep.dtype,
        pc_weights=tuple(j - 1 for j in recorded_directions(sweep.task)),
        gradient_scales=sweep.task.get("gradient_scales", False), test_examples=sweep.task.get("test_examples", 0)),
    make_task=make_task,
    observed=r"singular values $\sigma_i(W)$",
    optional_axes=("shape",),
    check_axes=check_axes,
    toy_lr=toy_lr,
)
