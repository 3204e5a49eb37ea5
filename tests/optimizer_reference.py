"""Independent NumPy float64 references for momentum, Nesterov and Adam on the toy model of depth
(Gissin et al. 2020, sec. 2), written from the optimizers' update rules, not from optax:

    gradient   g_i = (1/N) w_i^(N-1) (w_i^N - sigma*_i)        (d/dw of eq. 2's 1/(2N^2) ||w^N - sigma*||^2)
    momentum   t <- g + beta t,  w <- w - eta t                  (heavy ball, t(0) = 0)
    nesterov   t <- g + beta t,  w <- w - eta (g + beta t)       (with the new t)
    adam       m <- b1 m + (1 - b1) g,  v <- b2 v + (1 - b2) g^2   (m(0) = v(0) = 0; step count c from 1)
               w <- w - eta (m / (1 - b1^c)) / (sqrt(v / (1 - b2^c)) + eps)

w_i(0) = sigma0^(1/N) (eq. 3). One trajectory per row of the 1-D arrays; rows never interact.
"""

from __future__ import annotations

import numpy as np


def toy_optimizer(name, sigma_star, depth, sigma0, lr, hyperparameters, steps, record_steps):
    """sigma_i = w_i^N at `record_steps` (B, R, k), float64, under optimizer `name`;
    `hyperparameters` maps each of its hyperparameters to a scalar or a (B,) array."""
    s_star = np.asarray(sigma_star, np.float64)[None, :]
    depth, sigma0, lr = np.broadcast_arrays(np.atleast_1d(depth), np.atleast_1d(sigma0), np.atleast_1d(lr))
    n = depth.astype(np.int64)[:, None]
    eta = lr.astype(np.float64)[:, None]
    h = {key: np.broadcast_to(np.asarray(value, np.float64), depth.shape)[:, None]
         for key, value in hyperparameters.items()}
    record = np.asarray(record_steps, np.int64)
    w = np.repeat(sigma0.astype(np.float64)[:, None] ** (1.0 / n), s_star.shape[1], axis=1)
    first = np.zeros_like(w)                       # t (momentum, nesterov) or m (adam)
    second = np.zeros_like(w)                      # v (adam)
    out = np.full((len(depth), len(record), s_star.shape[1]), np.nan)
    for step in range(steps + 1):
        where = np.nonzero(record == step)[0]
        if len(where):
            out[:, where, :] = (w**n)[:, None, :]
        if step == steps:
            break
        g = w ** (n - 1) * (w**n - s_star) / n
        if name == "momentum":
            first = g + h["momentum"] * first
            w = w - eta * first
        elif name == "nesterov":
            first = g + h["momentum"] * first
            w = w - eta * (g + h["momentum"] * first)
        elif name == "adam":
            count = step + 1
            first = h["b1"] * first + (1 - h["b1"]) * g
            second = h["b2"] * second + (1 - h["b2"]) * g * g
            m_hat = first / (1 - h["b1"] ** count)
            v_hat = second / (1 - h["b2"] ** count)
            w = w - eta * m_hat / (np.sqrt(v_hat) + h["eps"])
        else:
            raise ValueError(f"no reference for optimizer {name!r}")
    return out
