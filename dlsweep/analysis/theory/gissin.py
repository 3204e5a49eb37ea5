"""Gissin et al. 2020: closed forms and bounds for the toy model of depth (THEORY.md sections
2.1-2.4).

Gradient flow on sigma_i = w_i^N obeys d sigma/dt = sigma^(2 - 2/N) (s* - sigma) (eq. 4). The
time to grow from sigma0 to alpha s* is (Appendix A)

    t_alpha = integral_{sigma0}^{alpha s*} d sigma / (sigma^(2-2/N) (s* - sigma))
            = s*^(-q) integral_{u0}^{alpha} du / (u^q (1 - u)),     q = 2 - 2/N,  u0 = sigma0 / s*.

Splitting 1/(1-u) = 1 + u/(1-u), the first part is a power (or log) integral in closed form and
the second, after y = u^(2-q), is (1/(2-q)) integral dy / (1 - y^(1/(2-q))): smooth, bounded, and
integrated by quadrature. Everything takes ln(sigma0), so sigma0 far below the float range
(1e-300 and smaller) costs nothing in accuracy, and N >= 1 need not be an integer.

The (s, f) threshold is the sigma0 where t_s(s*_j) = t_f(s*_i) (Definition 1), found by root
finding in ln sigma0.
"""


from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np
from scipy import integrate, optimize, special

SQRT2_BOUND = 2 * (math.sqrt(2) - 1)     # Theorem 3 needs c = eta s*_1 below this
LOG_SIGMA0_FLOOR = -1e5                  # N < 2: ln sigma0 below which no threshold is searched
LOG_FLOAT64_MAX = math.log(np.finfo(np.float64).max)


def _q(depth: float) -> float:
    if depth < 1:
        raise ValueError(f"depth N must be >= 1, got {depth}")
    return 2.0 if math.isinf(depth) else 2.0 - 2.0 / depth


def log_time_to_reach_unit(log_u0: float, alpha: float, depth: float) -> float:
    """integral_{u0}^{alpha} du / (u^q (1 - u)) with u0 = exp(log_u0), q = 2 - 2/N: the time
    to reach alpha for a target of 1 (THEORY.md 2.1). Accurate for any log_u0 < ln(alpha)."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    log_alpha = math.log(alpha)
    if log_u0 >= log_alpha:
        return 0.0
    q = _q(depth)
    if q == 1.0:
        power_part = log_alpha - log_u0
    elif (1 - q) * log_u0 > LOG_FLOAT64_MAX:    # u0^(1-q) beyond the float range: so is the time
        return math.inf
    else:   # (alpha^(1-q) - u0^(1-q)) / (1-q), u0^(1-q) = exp((1-q) log_u0) (large for q > 1)
        power_part = (math.exp((1 - q) * log_alpha) - math.exp((1 - q) * log_u0)) / (1 - q)
    e = 2.0 - q                                   # y = u^e; e in (0, 1]; e = 0 only at N = inf
    if e == 0.0:                                  # N = inf: integral du / (u (1 - u)) in closed form
        rest = (log_alpha - log_u0) - math.log1p(-alpha) + math.log1p(-math.exp(log_u0))
    else:
        y0, y1 = math.exp(e * log_u0), math.exp(e * log_alpha)
        rest = (_bounded_part(0.0, y1, e) - _bounded_part(0.0, y0, e) if y0 < y1 / 2 else _bounded_part(y0, y1, e)) / e
    return power_part + rest


@functools.lru_cache(maxsize=4096)
def _bounded_part(y0: float, y1: float, e: float) -> float:
    """integral_{y0}^{y1} dy / (1 - y^(1/e)) (relative error 1e-13), the smooth part of the time
    to reach. `log_time_to_reach_unit` takes it from 0 to y1, less from 0 to y0, when y0 < y1 / 2:
    a threshold's root search asks for one (alpha, N), so one y1, at many sigma0, and the first
    part is computed once (cached); the second is a short interval near 0, where the integrand is
    about 1."""
    value, _ = integrate.quad(lambda y: 1.0 / -math.expm1(math.log(y) / e) if y > 0 else 1.0,
                              y0, y1, epsabs=0.0, epsrel=1e-13, limit=200)
    return value


def time_to_reach(sigma_star: float, sigma0: float | None = None, alpha: float = 0.5, depth: float = 2.0,
                  log_sigma0: float | None = None) -> float:
    """t_alpha(s*, sigma0): gradient-flow time for sigma to grow from sigma0 to alpha s* (Gissin
    et al. App. A). Give sigma0 or its natural log (for values below the float range)."""
    if log_sigma0 is None:
        if sigma0 is None or sigma0 <= 0:
            raise ValueError(f"sigma0 must be > 0, got {sigma0}")
        log_sigma0 = math.log(sigma0)
    q = _q(depth)
    return sigma_star ** (-q) * log_time_to_reach_unit(log_sigma0 - math.log(sigma_star), alpha, depth)


# ----------------------------------------------------------------------------- Theorem 1


def sigma_gf(t, sigma_star: float, sigma0: float, depth: float):
    """sigma(t) under gradient flow in closed form (Theorem 1): N = 1 exponential, N = 2 logistic
    (stable form sigma0 s* / ((s* - sigma0) e^(-s* t) + sigma0))."""
    t = np.asarray(t, dtype=float)
    if depth == 1:
        return sigma_star + (sigma0 - sigma_star) * np.exp(-t)
    if depth == 2:
        return sigma0 * sigma_star / ((sigma_star - sigma0) * np.exp(-sigma_star * t) + sigma0)
    raise ValueError(f"Theorem 1 gives sigma(t) in closed form for N = 1 and N = 2 only, not N = {depth}")


def time_gf_infinite_depth(sigma, sigma_star: float, sigma0: float):
    """t(sigma) for N -> infinity (Theorem 1): (1/s*^2) ln(sigma (s* - sigma0) / (sigma0 (s* - sigma)))
    - (1/s*)(1/sigma - 1/sigma0)."""
    sigma = np.asarray(sigma, dtype=float)
    return (np.log(sigma * (sigma_star - sigma0) / (sigma0 * (sigma_star - sigma))) / sigma_star**2
            - (1 / sigma - 1 / sigma0) / sigma_star)


def time_to_reach_closed_form(sigma_star: float, sigma0: float, alpha: float, depth: float) -> float:
    """t_alpha in closed form (THEORY.md 2.1): N = 1 and N = 2 logarithms, N >= 3 (and non-integer
    N != 2) through the hypergeometric function 2F1(a, 1; a + 1; u), a = 2/N - 1."""
    u0 = sigma0 / sigma_star
    if depth == 1:
        return math.log((sigma_star - sigma0) / ((1 - alpha) * sigma_star))
    if depth == 2:
        return math.log(alpha * (sigma_star - sigma0) / ((1 - alpha) * sigma0)) / sigma_star
    a = 2 / depth - 1

    def antiderivative(u):
        return u**a / a * special.hyp2f1(a, 1, a + 1, u)

    return sigma_star ** (2 / depth - 2) * (antiderivative(alpha) - antiderivative(u0))


# ----------------------------------------------------------------------------- exact GF threshold


def log_gf_threshold(sigma_star_i: float, sigma_star_j: float, s: float, f: float, depth: float) -> float:
    """ln of the exact gradient-flow (s, f) threshold: the root in ln sigma0 of
    t_s(s*_j) - t_f(s*_i) (Definition 1; incremental below it).

    For N >= 2 the margin grows without bound as sigma0 -> 0, so a root always exists and is
    searched however far down it lies. For N < 2 both times stay finite as sigma0 -> 0; -inf means
    no sigma0 above e^-100000 is incremental (N = 1: none at all)."""
    if not sigma_star_i > sigma_star_j > 0:
        raise ValueError(f"need sigma*_i > sigma*_j > 0, got {sigma_star_i}, {sigma_star_j}")

    def margin(log_sigma0):
        return (time_to_reach(sigma_star_j, alpha=s, depth=depth, log_sigma0=log_sigma0)
                - time_to_reach(sigma_star_i, alpha=f, depth=depth, log_sigma0=log_sigma0))

    high = math.log(s * sigma_star_j)          # at sigma0 = s s*_j, t_s = 0 < t_f: not incremental
    low, step = high - 1.0, 1.0
    while margin(low) <= 0:
        if depth < 2 and low <= LOG_SIGMA0_FLOOR:
            return -math.inf
        step *= 2
        low = high - step if depth >= 2 else max(high - step, LOG_SIGMA0_FLOOR)
    if math.isnan(margin(low)):
        raise ArithmeticError(f"gradient-flow times overflow float64 at ln sigma0 = {low:g} (N = {depth}) "
                              "before the threshold is bracketed")
    return optimize.brentq(margin, low, high, xtol=1e-13, rtol=4 * np.finfo(float).eps, maxiter=500)


# ----------------------------------------------------------------------------- Theorem 2 (GF)


def log_thm2_bounds(r: float, s: float, f: float, depth: float, sigma_star_j: float = 1.0) -> tuple[float, float, float]:
    """ln of Theorem 2's bounds on sigma0_th (THEORY.md 2.3): (printed lower, printed upper, valid
    upper). In logs because at N = 2 and r near 1 they fall far below the float range.

    N = 2:   s s*_j (s/(f r))^(1/((1-f)(r-1)))  <=  sigma0_th  <=  s s*_j (s/(f r))^((1-s)/(r-1))
    N >= 3:  s s*_j ((1-f)(r-1)/(1+(1-f)(r-1)))^(N/(N-2))  <=  sigma0_th  <=  s s*_j ((r-1)/(r-s))^(N/(N-2))
    The printed N >= 3 upper bound is not valid in general; the one Appendix A proves is
    s s*_j [1 + ((1-s)/(r-1)) (1 - (s/(f r))^p)]^(-1/p), p = 1 - 2/N (N = 2: the printed one).
    NaN below N = 2."""
    base = math.log(s * sigma_star_j)
    if depth == 2:
        lower = base + math.log(s / (f * r)) / ((1 - f) * (r - 1))
        upper = base + math.log(s / (f * r)) * (1 - s) / (r - 1)
        return lower, upper, upper
    if depth < 3:
        return math.nan, math.nan, math.nan
    power = 1.0 if math.isinf(depth) else depth / (depth - 2)
    lower = base + power * math.log((1 - f) * (r - 1) / (1 + (1 - f) * (r - 1)))
    upper = base + power * math.log((r - 1) / (r - s))
    p = 1.0 if math.isinf(depth) else 1 - 2 / depth
    valid = base - math.log(1 + (1 - s) / (r - 1) * (1 - (s / (f * r)) ** p)) / p
    return lower, upper, valid


def thm2_bounds_printed(r: float, s: float, f: float, depth: float, sigma_star_j: float = 1.0) -> tuple[float, float]:
    """Theorem 2 of Gissin et al. exactly as printed: (lower, upper) on sigma0_th (see log_thm2_bounds)."""
    lower, upper, _ = log_thm2_bounds(r, s, f, depth, sigma_star_j)
    return math.exp(lower), math.exp(upper)


def thm2_upper_valid(r: float, s: float, f: float, depth: float, sigma_star_j: float = 1.0) -> float:
    """The upper bound on sigma0_th that Appendix A's argument proves (see log_thm2_bounds)."""
    return math.exp(log_thm2_bounds(r, s, f, depth, sigma_star_j)[2])


# ----------------------------------------------------------------------------- Theorem 3 (GD, N = 2)


class Theorem3Bounds(NamedTuple):
    """Theorem 3's bounds on sigma0_th (NaN where its conditions fail; `reason` says which)."""

    chain_lower: float      # what the proof's chain of inequalities gives
    stated_lower: float     # the lower bound as the theorem states it: chain_lower 2^(1/(A-1))
    upper: float
    reason: str


def thm3_bounds(sigma_star_i: float, sigma_star_j: float, sigma_star_max: float, lr: float, s: float,
                f: float) -> Theorem3Bounds:
    """Theorem 3 of Gissin et al. for gradient descent at N = 2 (THEORY.md 2.4), with eta = c / s*_1,
    R = s* / s*_1 and r = s*_i / s*_j:

        chain_lower   s*_j [(1-f)/(r f) (s/(2(1-s)))^A]^(1/(A-1))     (Appendix B's sufficient condition)
        stated_lower  (1/2) s*_j [(1-f)/(r f) (s/(1-s))^A]^(1/(A-1))  (the theorem's statement)
        upper         s*_j [(1-f)/f (s/(1-s))^B]^(1/(B-1))            (both: the necessary condition)

    The proof replaces (s*_j - sigma0)^(A-1) by (s*_j/2)^(A-1) using s*_j >= 2 sigma0; the statement
    moves only one factor 1/2 out of the bracket, so it exceeds the chain's bound by 2^(1/(A-1)) and
    is not implied by the proof (it held in every GD check of THEORY.md 4.3). A bound is NaN where the
    theorem's conditions fail: c >= 2(sqrt 2 - 1), A <= 1 (lower), B <= 1 (upper), or a bound above
    s*_j / 2 (outside sigma0 <= s*_j / 2)."""
    c = lr * sigma_star_max
    if c >= SQRT2_BOUND:
        return Theorem3Bounds(math.nan, math.nan, math.nan, f"c = eta s*_1 = {c:.4g} >= 2(sqrt2 - 1)")
    r = sigma_star_i / sigma_star_j
    ri, rj = sigma_star_i / sigma_star_max, sigma_star_j / sigma_star_max
    a = math.log(1 - c * ri + c**2 * ri**2) / math.log(1 - c * rj - c**2 / 4 * rj**2)
    b = math.log(1 - c * ri - c**2 / 4 * ri**2) / math.log(1 - c * rj + c**2 * rj**2)
    reasons = []
    bounds = dict.fromkeys(("chain lower", "stated lower", "upper"), math.nan)
    if a > 1:
        bounds["chain lower"] = sigma_star_j * ((1 - f) / (r * f) * (s / (2 * (1 - s))) ** a) ** (1 / (a - 1))
        bounds["stated lower"] = sigma_star_j / 2 * ((1 - f) / (r * f) * (s / (1 - s)) ** a) ** (1 / (a - 1))
    else:
        reasons.append(f"A = {a:.4g} <= 1 (no lower bound)")
    if b > 1:
        bounds["upper"] = sigma_star_j * ((1 - f) / f * (s / (1 - s)) ** b) ** (1 / (b - 1))
    else:
        reasons.append(f"B = {b:.4g} <= 1 (no upper bound)")
    for name, value in bounds.items():
        if value > sigma_star_j / 2:
            reasons.append(f"{name} bound {value:.4g} > s*_j/2, outside the theorem's range")
            bounds[name] = math.nan
    return Theorem3Bounds(bounds["chain lower"], bounds["stated lower"], bounds["upper"], "; ".join(reasons))


# ============================================================================= deep linear regression
