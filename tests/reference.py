"""Independent NumPy float64 reference for the toy model of depth (Gissin et al. 2020, sec. 2).

Written from the paper's equations, not from dlsweep's code (no JAX, no autodiff, no optax):

    sigma_i = w_i^N, w_i(0) = sigma0^(1/N)                        (eq. 3: every sigma_i(0) = sigma0)
    loss    = 1/(2N^2) sum_i (w_i^N - sigma*_i)^2                 (eq. 2)
    GF      d sigma_i/dt = sigma_i^(2 - 2/N) (sigma*_i - sigma_i)  (eq. 4)
    GD      w <- w + (eta/N) w^(N-1) (sigma* - w^N)               (eq. 9)

plus the closed forms of Theorem 1 (N = 1, N = 2 logistic in its overflow-free form, N = inf as
t(sigma)). See ../shared/THEORY.md sections 1.1 and 2.1 for the reconstruction of eqs. 3 and 9
(the OCR of the paper drops the N-th root in eq. 3 and prints N for 1/N in the GF equation).
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass(frozen=True)
class Reference:
    """Result of :func:`toy_gd` for B trajectories and k values.

    sigma:  (B, R, k) sigma_i at the record steps
    loss:   (B, R)    loss (eq. 2) at the record steps
    hit:    (B, k, L) first step t in 0..steps with sigma_i(t) >= level_l * sigma*_i, else -1
    margin: (B, k, L) |sigma_i / (level_l sigma*_i) - 1| at the hitting step and at the step
            before it (the smaller of the two; inf where never hit): how far from the threshold
            the decisive comparison was, i.e. how much rounding the hitting step can tolerate.
    """

    sigma: np.ndarray
    loss: np.ndarray
    hit: np.ndarray
    margin: np.ndarray


def toy_loss(sigma, sigma_star, depth):
    """l_N = 1/(2N^2) sum_i (sigma_i - sigma*_i)^2 (Gissin et al. 2020 eq. 2), over the last axis."""
    residual = np.asarray(sigma, np.float64) - np.asarray(sigma_star, np.float64)
    return np.sum(residual * residual, axis=-1) / (2.0 * np.asarray(depth, np.float64) ** 2)


def toy_gd(sigma_star, depth, sigma0, lr, steps, record_steps, levels) -> Reference:
    """Plain gradient descent on the weight-shared toy model, in float64.

    Init (Gissin et al. 2020 eq. 3): w_i(0) = sigma0^(1/N). Step (eq. 9, the GD discretization
    of the GF of eq. 4 in w): w <- w + (eta/N) w^(N-1) (sigma* - w^N), i.e. gradient descent
    with step eta on l_N of eq. 2 (d l_N / d w_i = (1/N) w_i^(N-1) (w_i^N - sigma*_i)).

    `depth`, `sigma0`, `lr` are scalars or 1-D arrays of one length B (one trajectory each);
    `sigma_star` (k,) is shared. Trajectories are iterated side by side but never interact.
    First-hitting steps are decided by testing sigma_i(t) >= level * sigma*_i at every
    t = 0, 1, ..., steps (t = 0 is the initialization). Overflow is allowed (inf / nan
    propagate silently), so divergent learning rates can be followed too.
    """
    s_star = np.asarray(sigma_star, np.float64)[None, :]                 # (1, k)
    depth, sigma0, lr = np.broadcast_arrays(np.atleast_1d(depth), np.atleast_1d(sigma0), np.atleast_1d(lr))
    n = depth.astype(np.int64)[:, None]                                   # (B, 1)
    eta = lr.astype(np.float64)[:, None]
    levels = np.asarray(levels, np.float64)
    thresholds = levels[None, :] * s_star[0][:, None]                     # (k, L)
    record = np.asarray(record_steps, np.int64)
    if record.min() < 0 or record.max() > steps:
        raise ValueError("record steps must lie in 0..steps")
    batch, k, n_levels = len(depth), s_star.shape[1], len(levels)

    sigma_rec = np.full((batch, len(record), k), np.nan)
    hit = np.full((batch, k, n_levels), -1, np.int64)
    margin = np.full((batch, k, n_levels), np.inf)
    previous_gap = np.full((batch, k, n_levels), np.inf)

    w = np.repeat(sigma0.astype(np.float64)[:, None] ** (1.0 / n), k, axis=1)   # eq. 3
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(steps + 1):
            sigma = w**n
            gap = np.abs(sigma[:, :, None] / thresholds[None] - 1.0)
            new = (hit < 0) & (sigma[:, :, None] >= thresholds[None])
            hit[new] = t
            margin[new] = np.minimum(gap, previous_gap)[new]
            previous_gap = gap
            where = np.nonzero(record == t)[0]
            if len(where):
                sigma_rec[:, where, :] = sigma[:, None, :]
            if t < steps:
                w = w + (eta / n) * w ** (n - 1) * (s_star - sigma)        # eq. 9
    with np.errstate(over="ignore", invalid="ignore"):
        loss = toy_loss(sigma_rec, s_star[0], depth[:, None])
    return Reference(sigma_rec, loss, hit, margin)


# ----------------------------------------------------------------------------- gradient flow


def sigma_gf_n1(t, sigma_star, sigma0):
    """Theorem 1, N = 1 (Gissin et al. 2020): sigma(t) = s* + (sigma0 - s*) e^(-t), the solution
    of eq. 4 at N = 1, d sigma/dt = s* - sigma."""
    t, s, s0 = np.broadcast_arrays(*(np.asarray(x, np.float64) for x in (t, sigma_star, sigma0)))
    return s + (s0 - s) * np.exp(-t)


def sigma_gf_n2(t, sigma_star, sigma0):
    """Theorem 1, N = 2 (Gissin et al. 2020): the logistic solution of eq. 4 at N = 2,
    d sigma/dt = sigma (s* - sigma):

        sigma(t) = sigma0 s* e^(s* t) / (sigma0 (e^(s* t) - 1) + s*)

    evaluated in the equivalent form sigma0 s* / ((s* - sigma0) e^(-s* t) + sigma0), which does
    not overflow for large s* t (THEORY.md 2.1, "stable N=2 form")."""
    t, s, s0 = np.broadcast_arrays(*(np.asarray(x, np.float64) for x in (t, sigma_star, sigma0)))
    return s0 * s / ((s - s0) * np.exp(-s * t) + s0)


def time_gf_ninf(sigma, sigma_star, sigma0):
    """Theorem 1, N -> inf (Gissin et al. 2020): the time at which the GF of eq. 4 in the limit
    d sigma/dt = sigma^2 (s* - sigma) reaches `sigma`:

        t(sigma) = (1/s*^2) ln(sigma (s* - sigma0) / (sigma0 (s* - sigma))) - (1/s*)(1/sigma - 1/sigma0)
    """
    sigma, s, s0 = (np.asarray(x, np.float64) for x in (sigma, sigma_star, sigma0))
    return np.log(sigma * (s - s0) / (s0 * (s - sigma))) / s**2 - (1.0 / sigma - 1.0 / s0) / s


def sigma_gf_ode(t, sigma_star, sigma0, depth, rtol=1e-12, atol=1e-14):
    """Numerical solution of eq. 4 (Gissin et al. 2020), d sigma/dt = sigma^(2-2/N) (s* - sigma),
    at the times `t` (increasing), by scipy's DOP853; an independent check of the closed forms."""
    from scipy.integrate import solve_ivp

    t = np.atleast_1d(np.asarray(t, np.float64))
    exponent = 2.0 - 2.0 / depth if np.isfinite(depth) else 2.0

    def rhs(_, y):
        return y**exponent * (sigma_star - y)

    sol = solve_ivp(rhs, (0.0, float(t[-1])), [float(sigma0)], method="DOP853", t_eval=t, rtol=rtol, atol=atol)
    return sol.y[0]


# ----------------------------------------------------------------------------- GD against GF


def sigma_gd_n1(k, sigma_star, sigma0, lr):
    """Exact GD iterate at N = 1: eq. 9 is then linear, w <- w + eta (s* - w), so
    sigma(k) = s* + (sigma0 - s*) (1 - eta)^k (derived here from Gissin et al. 2020 eq. 9).
    Against Theorem 1 (N = 1) at t = eta k: (1 - eta)^k = e^(-t) e^(-x) with
    0 <= x = -k (ln(1 - eta) + eta) <= k eta^2 / (2 (1 - eta)), so
    |sigma_GD - sigma_GF| = |sigma0 - s*| e^(-t) (1 - e^(-x)) <= |sigma0 - s*| t e^(-t) eta / (2 (1 - eta))
                         <= |sigma0 - s*| eta / (2 e (1 - eta))."""
    k, s, s0, eta = np.broadcast_arrays(*(np.asarray(x, np.float64) for x in (k, sigma_star, sigma0, lr)))
    return s + (s0 - s) * (1.0 - eta) ** k


def gd_gf_n2_first_order(t, sigma_star, sigma0, lr):
    """First-order (in h = eta s*) relative gap ln(sigma_GD(k) / sigma_GF(eta k)) at N = 2.

    Derived here, not in the paper. With x = sigma / s*, tau = s* t, eq. 9 at N = 2 reads
    x(k+1) = x(k) (1 + (h/2)(1 - x))^2, so one GD step adds h(1-x) - (h^2/4)(1-x)^2 + O(h^3) to
    ln x, while the logistic flow of Theorem 1 adds h(1-x) - (h^2/2) x(1-x) + O(h^3): a local
    error (h^2/4)(1-x)(3x-1) in ln x. Errors in ln x decay at rate x (d ln(1-x)/d tau = -x), so
    summing the local errors (h of them per unit tau) gives

        e(tau) = (h/4) (1 - x) (3 ln((1 - x0)/(1 - x)) - tau) + O(h^2)
               = (h/4) (1 - x) (2 tau + 3 ln((1 - x0) e^(-tau) + x0)) + O(h^2)   (no 0 * inf at x -> 1)

    and |e| <= (h/4)(ln(s*/sigma0) + 2) for sigma0 < s*: tau (1-x) <= ln(1/x0) + 1 and
    (1-x) ln(1/(1-x)) <= 1/e.
    """
    t, s, s0, eta = np.broadcast_arrays(*(np.asarray(x, np.float64) for x in (t, sigma_star, sigma0, lr)))
    h, tau, x0 = eta * s, s * t, s0 / s
    one_minus_x = (1.0 - x0) * np.exp(-tau) / ((1.0 - x0) * np.exp(-tau) + x0)
    return (h / 4.0) * one_minus_x * (2.0 * tau + 3.0 * np.log((1.0 - x0) * np.exp(-tau) + x0))
