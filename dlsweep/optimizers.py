"""Optimizers: optax's, chosen by name in a sweep's `[optimizer]` table.

Every hyperparameter is a per-trajectory value: held fixed by the table or swept as an axis of
the grid like the learning rate (`axes.momentum = [0, 0.5, 0.9]`), all in one compiled program
through `optax.inject_hyperparams`. The semantics are optax's exactly:

    sgd        p <- p - eta g                                  (the papers' gradient descent)
    momentum   t <- g + beta t,  p <- p - eta t                (optax.sgd(eta, momentum=beta))
    nesterov   t <- g + beta t,  p <- p - eta (g + beta t)     (optax.sgd(eta, beta, nesterov=True))
    adam       m <- b1 m + (1 - b1) g,  v <- b2 v + (1 - b2) g^2,
               p <- p - eta m^ / (sqrt(v^) + eps),  m^ = m / (1 - b1^t), v^ = v / (1 - b2^t)
                                                               (optax.adam, eps_root = 0)

with t = 0 and m = v = 0 at initialization.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import jax.numpy as jnp
import optax


@dataclasses.dataclass(frozen=True)
class Kind:
    """One optimizer: its optax factory (called with `learning_rate` and the hyperparameters), the
    hyperparameters' defaults and ranges (low, high, whether low itself is allowed), and the
    factory's fixed settings; `flow_limit`: its small steps follow gradient flow's path (time
    rescaled), so gradient flow's thresholds are its small-step limit."""

    factory: Callable[..., optax.GradientTransformation]
    defaults: Mapping[str, float]
    ranges: Mapping[str, tuple[float, float, bool]]
    settings: Mapping[str, object] = dataclasses.field(default_factory=dict)
    summary: str = ""
    flow_limit: bool = True


_BETA = (0.0, 1.0, True)        # in [0, 1)
KINDS: dict[str, Kind] = {
    "sgd": Kind(optax.sgd, {}, {}, summary="gradient descent, p <- p - eta g"),
    "momentum": Kind(optax.sgd, {"momentum": 0.9}, {"momentum": _BETA}, {"nesterov": False},
                     summary="heavy ball: t <- g + momentum t, p <- p - eta t"),
    "nesterov": Kind(optax.sgd, {"momentum": 0.9}, {"momentum": _BETA}, {"nesterov": True},
                     summary="Nesterov: t <- g + momentum t, p <- p - eta (g + momentum t)"),
    "adam": Kind(optax.adam, {"b1": 0.9, "b2": 0.999, "eps": 1e-8},
                 {"b1": _BETA, "b2": _BETA, "eps": (0.0, float("inf"), False)}, {"eps_root": 0.0},
                 summary="Adam (optax.adam, eps_root 0)", flow_limit=False),
}
HYPERPARAMETERS = tuple(dict.fromkeys(name for kind in KINDS.values() for name in kind.defaults))
"""Every optimizer hyperparameter's name: each may be an axis of a sweep whose optimizer has it."""


@dataclasses.dataclass(frozen=True)
class Optimizer:
    """A sweep's optimizer: `name` (a key of KINDS) and its hyperparameters that are not swept,
    (name, value) pairs; a swept one is in the trajectory's `hp` instead."""

    name: str = "sgd"
    fixed: tuple[tuple[str, float], ...] = ()

    @property
    def kind(self) -> Kind:
        return KINDS[self.name]

    def transformation(self, hp: Mapping[str, jnp.ndarray], dtype) -> optax.GradientTransformation:
        """The optax transformation of one trajectory: learning rate `hp["lr"]`, each
        hyperparameter from `hp` where swept, else its fixed value in `dtype`. Plain `sgd` is
        `inject_hyperparams(optax.sgd)(learning_rate=lr)` exactly."""
        kind = self.kind
        fixed = dict(self.fixed)
        values = {name: hp[name] if name in hp else jnp.asarray(fixed.get(name, default), dtype)
                  for name, default in kind.defaults.items()}
        factory = optax.inject_hyperparams(kind.factory, static_args=tuple(kind.settings))
        return factory(learning_rate=hp["lr"], **values, **kind.settings)

    def to_dict(self) -> dict:
        """The `[optimizer]` table: the name and every hyperparameter not swept, defaults filled."""
        return {"name": self.name, **{name: value for name, value in self.fixed}}
