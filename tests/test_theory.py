"""Tests of dlsweep.analysis.theory: the closed forms and bounds of Gissin et al. 2020 (toy model).

Every expected number either comes from ../shared/THEORY.md (sections 2.1-2.4 give the formulas,
4.1-4.3 the numbers, printed to about 6 significant digits) or is recomputed here independently
of theory.py:

* `_t_alpha_quad`: scipy quad of the original integral of App. A in v = ln sigma,
  t_alpha = int_{ln sigma0}^{ln(alpha s*)} e^(v (2/N - 1)) / (s* - e^v) dv, split into pieces
  (theory.py instead splits 1/(1-u) and integrates in y = u^(2/N));
* `_log_threshold_n2`: the root in ln x of the N = 2 threshold equation of THEORY 2.2, written in
  logs (theory.py root-finds the difference of two quadratures);
* `_reach_time_ode`: solve_ivp (DOP853, rtol 1e-12) of d ln sigma/dt = sigma^(1-2/N) (s* - sigma),
  the gradient flow of eq. 4 in log variables, with a terminal event at alpha s*.

"Matches to 6 significant digits" means |actual - expected| <= half a unit in the last printed
digit of the THEORY value (see `assert_digits`).
"""

from __future__ import annotations

import math
from decimal import Decimal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, optimize

import reference as ref
from dlsweep.analysis import theory as T

INF = math.inf
LN10 = math.log(10.0)


def assert_digits(actual, expected: str, what: str = "") -> None:
    """|actual - expected| <= half a unit in the last digit printed in `expected` (a THEORY.md
    value, e.g. "4.11100e-3" -> tolerance 5e-9). The difference is the printing's own rounding, up
    to that half unit by construction, so it can come close to the tolerance; what varies between
    machines is only the float64 rounding of `actual` (1e-15 to 1e-13 relative). The closest case
    measured (Q / ((1/2) ln(1/c)) = 1.71661 at c = 1e-16, THEORY 4.6) is 1.1e-9 relative inside
    the edge, 1e4 times that rounding."""
    exp_value = Decimal(expected)
    tol = 0.5 * 10.0 ** exp_value.as_tuple().exponent
    actual = float(actual)
    assert abs(actual - float(exp_value)) <= tol * (1 + 1e-9), (
        f"{what}: got {actual!r}, THEORY.md says {expected} (+- {tol:g})")


def assert_log_digits(log_actual: float, expected: str, what: str = "") -> None:
    """Like assert_digits for a value given by its natural log (below the float range):
    compares exponent and mantissa in base 10."""
    log10 = log_actual / LN10
    exponent = math.floor(log10)
    mantissa = 10.0 ** (log10 - exponent)
    m_text, e_text = expected.lower().split("e")
    assert exponent == int(e_text), f"{what}: got 10^{log10:.6f}, THEORY.md says {expected}"
    assert_digits(mantissa, m_text, what)


# ----------------------------------------------------------------------------- independent computations


def _t_alpha_quad(sigma_star: float, log_sigma0: float, alpha: float, depth: float, piece: float = 2.0) -> float:
    """t_alpha = int_{sigma0}^{alpha s*} d sigma / (sigma^(2-2/N) (s* - sigma)) (THEORY 2.1, App. A)
    as an integral in v = ln sigma, by scipy quad on pieces of length <= `piece`."""
    a = (2.0 / depth - 1.0) if math.isfinite(depth) else -1.0
    log_star = math.log(sigma_star)

    def integrand(v):   # e^(a v) / (s* - e^v), with s* - e^v = -s* expm1(v - ln s*)
        return math.exp(a * v) / (-sigma_star * math.expm1(v - log_star))

    top = math.log(alpha * sigma_star)
    n = max(1, math.ceil((top - log_sigma0) / piece))
    edges = np.linspace(log_sigma0, top, n + 1)
    total = 0.0
    for lo, hi in zip(edges[:-1], edges[1:]):
        value, _ = integrate.quad(integrand, lo, hi, epsabs=0.0, epsrel=1e-13, limit=200)
        total += value
    return total


def _log_threshold_n2(r: float, s: float, f: float, sigma_star_j: float = 1.0) -> float:
    """ln sigma0_th at N = 2 from THEORY 2.2: the root in L = ln x, x = sigma0 / s*_j, of
    (1/r) ln(f (r - x) / ((1-f) x)) = ln(s (1 - x) / ((1-s) x)), every term in logs."""

    def g(L):
        x = math.exp(L)
        left = (math.log(f) + math.log(r - x) - math.log1p(-f) - L) / r
        right = math.log(s) + math.log1p(-x) - math.log1p(-s) - L
        return left - right

    high = math.log(s)                  # x = s: right side 0, left side > 0
    assert g(high) > 0
    low = high - 1.0
    while g(low) >= 0:
        low = high - 2 * (high - low)
    root = optimize.brentq(g, low, high, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=500)
    return math.log(sigma_star_j) + root


def _reach_time_ode(sigma_star: float, sigma0: float, alpha: float, depth: float) -> float:
    """First time sigma(t) = alpha s* under eq. 4, by solve_ivp on y = ln sigma:
    dy/dt = e^(y (1 - 2/N)) (s* - e^y) (N = inf: exponent 1)."""
    k = 1.0 - 2.0 / depth if math.isfinite(depth) else 1.0
    target = math.log(alpha * sigma_star)

    def rhs(_, y):
        return [math.exp(k * y[0]) * (sigma_star - math.exp(y[0]))]

    def hit(_, y):
        return y[0] - target

    hit.terminal, hit.direction = True, 1
    sol = integrate.solve_ivp(rhs, (0.0, 1e6), [math.log(sigma0)], method="DOP853", events=hit,
                              rtol=1e-12, atol=1e-12)
    assert sol.status == 1 and len(sol.t_events[0]) == 1, sol.message
    return float(sol.t_events[0][0])


def _log_bounds_n2(r, s, f):
    """ln of THEORY 2.3's N = 2 bounds (s*_j = 1), in logs so they never underflow."""
    base = math.log(s / (f * r))
    return math.log(s) + base / ((1 - f) * (r - 1)), math.log(s) + base * (1 - s) / (r - 1)


def _safe_log(x: float) -> float:
    return -INF if x == 0 else math.log(x)


# ----------------------------------------------------------------------------- 1. THEORY 4.1


def test_theorem1_sigma_values():
    """THEORY 4.1, sigma(t) by Theorem 1 (sigma_gf)."""
    assert_digits(T.sigma_gf(1.0, 12.0, 0.1, 1), "7.62223", "N=1 s*=12 sigma0=.1 t=1")
    for s_star, expected in ((12.0, "9.26661"), (6.0, "1.52383"), (4.0, "0.637138"), (3.0, "0.401565")):
        assert_digits(T.sigma_gf(0.5, s_star, 0.1, 2), expected, f"N=2 s*={s_star} sigma0=.1 t=.5")
    assert_digits(T.sigma_gf(0.5, 12.0, 1e-3, 2), "0.390339", "N=2 s*=12 sigma0=1e-3 t=.5")


def test_theorem1_matches_ode():
    """THEORY 2.1 ("checked by ODE to 1e-12"): sigma_gf equals the DOP853 solution of eq. 4
    (tests/reference.py, rtol 1e-12) to 1e-9 relative, N = 1 and 2; arrays broadcast."""
    t = np.linspace(0.05, 3.0, 12)
    for depth in (1, 2):
        for s_star, sigma0 in ((12.0, 0.1), (3.0, 1e-3), (0.5, 1e-6)):
            got = T.sigma_gf(t, s_star, sigma0, depth)
            ode = ref.sigma_gf_ode(t, s_star, sigma0, depth, atol=1e-22)
            np.testing.assert_allclose(got, ode, rtol=1e-9, err_msg=f"N={depth} s*={s_star} sigma0={sigma0}")
    with pytest.raises(ValueError):
        T.sigma_gf(1.0, 12.0, 0.1, 3)


def test_t_half_values():
    """THEORY 4.1: t_{1/2}, s*=12, sigma0=0.1, N=1..4; and s* = 12, 6, 4, 3 at sigma0=1e-3."""
    for depth, expected in ((1, "0.684779"), (2, "0.398260"), (3, "0.443512"), (4, "0.497006")):
        assert_digits(T.time_to_reach(12.0, 0.1, 0.5, depth), expected, f"t_1/2 N={depth}")
    table = {2: ("0.782715", "1.44989", "2.07345", "2.66868"), 4: ("5.24439", "10.4667", "15.6742", "20.8697")}
    for depth, row in table.items():
        for s_star, expected in zip((12.0, 6.0, 4.0, 3.0), row):
            assert_digits(T.time_to_reach(s_star, 1e-3, 0.5, depth), expected, f"t_1/2 N={depth} s*={s_star}")
    # "N=1 all about 0.69", and exactly ln((s* - sigma0)/(s*/2)) (Theorem 1 at N = 1) to 1e-11:
    # the quadrature's epsrel 1e-13 with 100x room for its error estimate (measured 3e-13)
    for s_star in (12.0, 6.0, 4.0, 3.0):
        t_half = T.time_to_reach(s_star, 1e-3, 0.5, 1)
        assert_digits(t_half, "0.69", f"t_1/2 N=1 s*={s_star}")
        assert t_half == pytest.approx(math.log((s_star - 1e-3) / (s_star / 2)), rel=1e-11)


def test_hyp2f1_form_values():
    """THEORY 4.1: hyp2f1 form, alpha=0.99, s*=3, sigma0=1e-3: N=3 10.5375, N=4 21.8401 (both the
    closed form and the quadrature)."""
    for depth, expected in ((3, "10.5375"), (4, "21.8401")):
        assert_digits(T.time_to_reach_closed_form(3.0, 1e-3, 0.99, depth), expected, f"closed form N={depth}")
        assert_digits(T.time_to_reach(3.0, 1e-3, 0.99, depth), expected, f"quadrature N={depth}")


def test_infinite_depth_time():
    """THEORY 4.1: N=inf, s*=12, sigma0=0.1, time to reach 6 is 0.852633 (Theorem 1 formula and
    the quadrature at depth=inf, which must agree to 1e-12)."""
    closed = float(T.time_gf_infinite_depth(6.0, 12.0, 0.1))
    assert_digits(closed, "0.852633", "N=inf")
    assert T.time_to_reach(12.0, 0.1, 0.5, INF) == pytest.approx(closed, rel=1e-12)
    # and the independent ODE: 1e-9
    assert _reach_time_ode(12.0, 0.1, 0.5, INF) == pytest.approx(closed, rel=1e-9)


def test_reach_time_inverts_theorem1():
    """sigma_gf(t_alpha) = alpha s* (N = 1, 2) to 1e-11 relative: time_to_reach and Theorem 1
    describe the same flow."""
    for depth in (1, 2):
        for s_star, sigma0, alpha in ((12.0, 0.1, 0.5), (3.0, 1e-6, 0.9), (6.0, 1e-3, 0.1)):
            t = T.time_to_reach(s_star, sigma0, alpha, depth)
            assert float(T.sigma_gf(t, s_star, sigma0, depth)) == pytest.approx(alpha * s_star, rel=1e-11)


# ----------------------------------------------------------------------------- 2. quadrature vs closed forms

_GRID = [(depth, s_star, alpha, 10.0 ** -e)
         for depth in (1, 1.5, 2, 3, 4, 7.5, 20)
         for s_star in (1.0, 3.0, 12.0)
         for alpha in (0.01, 0.1, 0.5, 0.9, 0.99)
         for e in range(1, 13)
         if 10.0 ** -e <= alpha * s_star / 10]


def test_quadrature_matches_closed_forms():
    """THEORY 2.1 ("closed forms match quadrature to 12 digits"): time_to_reach (quadrature)
    equals time_to_reach_closed_form (logs at N=1,2; hyp2f1 otherwise) to 1e-10 relative over
    N in {1, 1.5, 2, 3, 4, 7.5, 20}, alpha in {.01,.1,.5,.9,.99}, sigma0 in 1e-1..1e-12, s* in
    {1,3,12}; and the N = inf formula of Theorem 1."""
    assert len(_GRID) > 500
    worst = 0.0
    for depth, s_star, alpha, sigma0 in _GRID:
        quad = T.time_to_reach(s_star, sigma0, alpha, depth)
        closed = T.time_to_reach_closed_form(s_star, sigma0, alpha, depth)
        worst = max(worst, abs(quad - closed) / abs(closed))
        assert quad == pytest.approx(closed, rel=1e-10), (depth, s_star, alpha, sigma0)
    for s_star in (1.0, 12.0):
        for alpha in (0.1, 0.5, 0.99):
            for e in range(2, 13, 2):
                sigma0 = 10.0 ** -e
                closed = float(T.time_gf_infinite_depth(alpha * s_star, s_star, sigma0))
                assert T.time_to_reach(s_star, sigma0, alpha, INF) == pytest.approx(closed, rel=1e-10)


@pytest.mark.parametrize("sigma_star_j", [1.0, 6.0, 0.3])
def test_n2_threshold_matches_closed_form_equation(sigma_star_j):
    """THEORY 2.2: at N = 2 the exact GF threshold (root of the difference of two quadratures)
    equals the root of (1/r) ln(f (r-x)/((1-f) x)) = ln(s (1-x)/((1-s) x)), x = sigma0/s*_j, to
    1e-8 relative in ln sigma0, including r close to 1 (thresholds ~1e-120 and far below the
    float range at r = 1.001)."""
    for r in (1.001, 1.01, 1.05, 1.5, 2.0, 4.0, 20.0):
        for s in (0.01, 0.1, 0.2, 0.24):
            for f in (0.76, 0.8, 0.9, 0.99):
                got = T.log_gf_threshold(r * sigma_star_j, sigma_star_j, s, f, 2)
                expected = _log_threshold_n2(r, s, f, sigma_star_j)
                assert got == pytest.approx(expected, rel=1e-8), (r, s, f, sigma_star_j)
    # the r close to 1 case of THEORY 4.2: ~ 1e-121.4
    assert _log_threshold_n2(1.01, 0.2, 0.8) / LN10 == pytest.approx(-121.446, abs=1e-3)


# ----------------------------------------------------------------------------- 3. accuracy far down


def test_t_alpha_far_below_float_range_n2():
    """t_alpha at N = 2 for sigma0 = 1e-300 and ln sigma0 = -1000 (below float range) equals
    THEORY 2.1's (1/s*) ln(alpha (s* - sigma0)/((1-alpha) sigma0)), evaluated in logs, to 1e-12."""
    for s_star in (0.5, 3.0, 12.0):
        for alpha in (0.1, 0.5, 0.9, 0.99):
            for log_sigma0 in (math.log(1e-300), -1000.0, -1e4):
                log_star_minus = math.log(s_star) + math.log1p(-math.exp(log_sigma0 - math.log(s_star)))
                expected = (math.log(alpha) + log_star_minus - math.log1p(-alpha) - log_sigma0) / s_star
                got = T.time_to_reach(s_star, alpha=alpha, depth=2, log_sigma0=log_sigma0)
                assert got == pytest.approx(expected, rel=1e-12), (s_star, alpha, log_sigma0)
            assert T.time_to_reach(s_star, 1e-300, alpha, 2) == pytest.approx(
                T.time_to_reach(s_star, alpha=alpha, depth=2, log_sigma0=math.log(1e-300)), rel=1e-14)


@pytest.mark.parametrize("depth", [1.5, 2.5, 3.7])
def test_t_alpha_non_integer_depth_vs_independent_quadrature(depth):
    """Non-integer N: time_to_reach equals the piecewise quad of the original integral in
    ln sigma (`_t_alpha_quad`) to 1e-10 relative, at moderate sigma0 and at sigma0 = 1e-300 /
    ln sigma0 = -1000 (the latter only where t_alpha stays representable)."""
    for s_star in (1.0, 12.0):
        for alpha in (0.1, 0.5, 0.95):
            for log_sigma0 in (math.log(1e-2 * alpha * s_star), math.log(1e-3), math.log(1e-8)):
                got = T.time_to_reach(s_star, alpha=alpha, depth=depth, log_sigma0=log_sigma0)
                assert got == pytest.approx(_t_alpha_quad(s_star, log_sigma0, alpha, depth), rel=1e-10)
            far = [math.log(1e-300)] + ([-1000.0] if depth < 2 else [])
            for log_sigma0 in far:
                got = T.time_to_reach(s_star, alpha=alpha, depth=depth, log_sigma0=log_sigma0)
                assert got == pytest.approx(_t_alpha_quad(s_star, log_sigma0, alpha, depth, piece=5.0),
                                            rel=1e-10), (s_star, alpha, log_sigma0)


# ----------------------------------------------------------------------------- 4. THEORY 4.2

_THM2_TABLE = {   # N: (printed lower, exact, printed upper, valid upper), r=2, s=.1, f=.9, s*_j=1
    2: ("2.80075e-14", "6.85166e-4", "7.41745e-3", "7.41745e-3"),
    3: ("7.51315e-5", "1.44763e-2", "1.45794e-2", "2.65143e-2"),
    4: ("8.26446e-4", "2.40737e-2", "2.77008e-2", "3.51013e-2"),
    INF: ("9.09091e-3", "4.80382e-2", "5.26316e-2", "5.40541e-2"),
}


@pytest.mark.parametrize("depth", list(_THM2_TABLE))
def test_theorem2_table(depth):
    """THEORY 4.2: the Theorem 2 table at r=2, s=0.1, f=0.9; values scale with s*_j."""
    lower, exact, upper, valid = _THM2_TABLE[depth]
    got_lower, got_upper = T.thm2_bounds_printed(2.0, 0.1, 0.9, depth)
    assert_digits(got_lower, lower, f"printed lower N={depth}")
    assert_digits(math.exp(T.log_gf_threshold(2.0, 1.0, 0.1, 0.9, depth)), exact, f"exact N={depth}")
    assert_digits(got_upper, upper, f"printed upper N={depth}")
    assert_digits(T.thm2_upper_valid(2.0, 0.1, 0.9, depth), valid, f"valid upper N={depth}")
    # "scale by s*_j" (THEORY 2.1): every threshold and bound is s*_j g(r, s, f, N)
    scaled = T.thm2_bounds_printed(2.0, 0.1, 0.9, depth, sigma_star_j=6.0)
    assert scaled == pytest.approx((6 * got_lower, 6 * got_upper), rel=1e-13)
    assert T.thm2_upper_valid(2.0, 0.1, 0.9, depth, 6.0) == pytest.approx(
        6 * T.thm2_upper_valid(2.0, 0.1, 0.9, depth), rel=1e-13)
    assert T.log_gf_threshold(12.0, 6.0, 0.1, 0.9, depth) == pytest.approx(
        math.log(6.0) + T.log_gf_threshold(2.0, 1.0, 0.1, 0.9, depth), rel=1e-10)


def test_adjacent_target_thresholds():
    """THEORY 4.2: exact GF thresholds, s=.1, f=.9, for (12,6), (6,4), (4,3) at N=2,3,4; and
    the 2.2 approximation for (12,6) at N=2 is 4.11523e-3, 0.1% off the exact value.

    One THEORY entry is off by one in its last digit: N=2 (6,4) is printed 3.01065e-5, but both
    theory.py and the independent root of the 2.2 closed-form equation (`_log_threshold_n2`) give
    3.0106445e-5, i.e. 3.01064e-5 (THEORY's value looks double-rounded, 3.0106445 -> 3.010645 ->
    3.01065). The test uses 3.01064e-5 and pins the independent value too."""
    assert_digits(math.exp(_log_threshold_n2(1.5, 0.1, 0.9, 4.0)), "3.0106445e-5", "2.2 equation, (6,4)")
    table = {2: ("4.11100e-3", "3.01064e-5", "2.64611e-7"),
             3: ("8.68580e-2", "1.76948e-2", "5.66039e-3"),
             4: ("1.44442e-1", "4.06365e-2", "1.65699e-2")}
    for depth, row in table.items():
        for (si, sj), expected in zip(((12.0, 6.0), (6.0, 4.0), (4.0, 3.0)), row):
            assert_digits(math.exp(T.log_gf_threshold(si, sj, 0.1, 0.9, depth)), expected, f"N={depth} ({si},{sj})")
    r, s, f = 2.0, 0.1, 0.9
    approx = 6.0 * ((s / (1 - s)) ** r * (1 - f) / (f * r)) ** (1 / (r - 1))
    assert_digits(approx, "4.11523e-3", "2.2 approximation")
    assert approx / math.exp(T.log_gf_threshold(12.0, 6.0, s, f, 2)) - 1 == pytest.approx(1e-3, abs=1e-4)


def test_printed_upper_bound_violations():
    """THEORY 2.3 / 4.2: the printed N>=3 upper bound fails at (r,s,f,N) = (2,.2,.8,3): exact
    4.15878e-2 > printed 3.42936e-2; and (4,.1,.9,3): 4.56813e-2 > 4.55166e-2. The valid upper
    bound holds in both."""
    for (r, s, f), exact, printed in (((2.0, 0.2, 0.8), "4.15878e-2", "3.42936e-2"),
                                      ((4.0, 0.1, 0.9), "4.56813e-2", "4.55166e-2")):
        got = math.exp(T.log_gf_threshold(r, 1.0, s, f, 3))
        upper = T.thm2_bounds_printed(r, s, f, 3)[1]
        assert_digits(got, exact, f"exact {(r, s, f)}")
        assert_digits(upper, printed, f"printed upper {(r, s, f)}")
        assert got > upper
        assert got < T.thm2_upper_valid(r, s, f, 3)


def test_underflow_threshold_in_log_space():
    """THEORY 4.2: (r,s,f,N) = (1.01,.2,.8,2) has sigma0_th = 3.57935e-122, only reachable in log
    space (float underflow is not the issue here, but the value is the ln)."""
    assert_log_digits(T.log_gf_threshold(1.01, 1.0, 0.2, 0.8, 2), "3.57935e-122", "underflow case")
    # and with s*_j = 1e-5 the threshold ~3.6e-127 still comes back as a finite log
    assert_log_digits(T.log_gf_threshold(1.01e-5, 1e-5, 0.2, 0.8, 2), "3.57935e-127", "underflow case scaled")


def test_never_incremental_returns_minus_inf():
    """theory.py docstring: -inf when no sigma0 > 0 is incremental. At N = 1, t_alpha is
    ln((s*-sigma0)/((1-alpha) s*)) (no s* dependence for sigma0 -> 0), so t_f = ln 10 > t_s ~ ln(1/.9):
    never incremental. The same at N = 1.5, r = 2 (the limit sigma0 -> 0 of the margin,
    computed by `_t_alpha_quad` from ln sigma0 = -200, is negative)."""
    assert T.log_gf_threshold(2.0, 1.0, 0.1, 0.9, 1) == -INF
    margin = _t_alpha_quad(1.0, -200.0, 0.1, 1.5) - _t_alpha_quad(2.0, -200.0, 0.9, 1.5)
    assert margin < 0
    assert T.log_gf_threshold(2.0, 1.0, 0.1, 0.9, 1.5) == -INF
    with pytest.raises(ValueError):
        T.log_gf_threshold(1.0, 2.0, 0.1, 0.9, 2)


# ----------------------------------------------------------------------------- 5. bounds hold everywhere

_DEPTHS = [2, 3, 4, 5, 6, 7, 8, 9, 10, INF]


def _check_sandwich(r, s, f, depth):
    """Checks THEORY 2.3 at one point; returns whether the printed N>=3 upper bound is violated."""
    log_exact = T.log_gf_threshold(r, 1.0, s, f, depth)
    assert math.isfinite(log_exact), (r, s, f, depth)
    assert log_exact < math.log(s)                      # only satisfiable if sigma0 < s s*_j (2.2)
    slack = 1e-9 * (1 + abs(log_exact))
    lower, upper = T.thm2_bounds_printed(r, s, f, depth)
    valid = T.thm2_upper_valid(r, s, f, depth)
    if depth == 2:
        log_lower, log_upper = _log_bounds_n2(r, s, f)  # in logs: the printed lower underflows
        # below float64's normal range (tiny = 2.2e-308) exp() keeps fewer than 53 bits, down to 0
        assert _safe_log(lower) == pytest.approx(log_lower, rel=1e-12) or lower < np.finfo(float).tiny
        assert math.log(upper) == pytest.approx(log_upper, rel=1e-12)
        assert valid == upper
        assert log_lower - slack <= log_exact <= log_upper + slack, (r, s, f, depth)
        return False
    p = 1.0 if depth == INF else 1 - 2 / depth
    tight_lower = s * (1 + (1 - (s / (f * r)) ** p) / ((1 - f) * (r - 1))) ** (-1 / p)
    assert _safe_log(lower) <= math.log(tight_lower) + slack       # tighter than the printed lower
    assert math.log(tight_lower) - slack <= log_exact <= math.log(valid) + slack, (r, s, f, depth)
    return log_exact > math.log(upper) + slack


def test_theorem2_bounds_hold_on_dense_grid():
    """THEORY 2.3: on 700 points (70 per N for N in 2..10 and inf; seeded uniform r in [1.02,20],
    s in [.01,.25), f in (.75,.99], plus the 8 corners of the box), every exact threshold lies
    between the printed lower bound (and the tighter valid lower bound) and the valid upper bound;
    the N = 2 bounds hold. The printed N>=3 upper bound fails for some points, mostly at N = 3
    (THEORY: 368/600 at N=3, 7 at N=4, none at N=5, 6, 10, inf)."""
    rng = np.random.default_rng(20200101)
    violations = {d: 0 for d in _DEPTHS}
    corners = [(r, s, f) for r in (1.02, 20.0) for s in (0.01, 0.2499) for f in (0.7501, 0.99)]
    n_random = 62
    for depth in _DEPTHS:
        points = corners + list(zip(rng.uniform(1.02, 20.0, n_random), rng.uniform(0.01, 0.25, n_random),
                                    0.99 - rng.uniform(0.0, 0.24, n_random)))
        for r, s, f in points:
            violations[depth] += _check_sandwich(float(r), float(s), float(f), depth)
    n = len(corners) + n_random
    assert violations[3] >= n // 3, violations
    assert violations[3] == max(violations.values()), violations
    assert violations[2] == 0
    assert all(violations[d] == 0 for d in (5, 6, 10, INF)), violations


@settings(max_examples=150, deadline=None)
@given(depth=st.sampled_from(_DEPTHS), r=st.floats(1.02, 20.0), s=st.floats(0.01, 0.25, exclude_max=True),
       f=st.floats(0.75, 0.99, exclude_min=True))
def test_theorem2_bounds_hold_property(depth, r, s, f):
    """Same as the grid test (THEORY 2.3), on hypothesis-drawn points."""
    _check_sandwich(r, s, f, depth)


# ----------------------------------------------------------------------------- 6. THEORY 4.3


def _a_b(c, ri, rj):
    """A and B of Theorem 3 (THEORY 2.4)."""
    a = math.log(1 - c * ri + c**2 * ri**2) / math.log(1 - c * rj - c**2 / 4 * rj**2)
    b = math.log(1 - c * ri - c**2 / 4 * ri**2) / math.log(1 - c * rj + c**2 * rj**2)
    return a, b


def test_theorem3_table():
    """THEORY 4.3: s* = (12, 6), s*_1 = 12, s = .1, f = .9, eta = c/12. The lower bound of the
    proof's chain ("derived"), the stated one ("printed"), which is the chain's times 2^(1/(A-1)),
    and the upper bound; A and B recomputed here from 2.4; the GD thresholds of the table lie
    between the bounds, the stated lower included. At c = 0.5, A < 1: NaN lowers, with a reason."""
    rows = {0.01: ("1.98240", "2.02020", "9.27608e-4", "1.87839e-3", 4.10651e-3, "8.97874e-3"),
            0.1: ("1.81536", "2.22217", "2.77861e-4", "6.50168e-4", 4.10051e-3, "1.82958e-2")}
    for c, (a_text, b_text, lower_text, printed_text, gd, upper_text) in rows.items():
        bounds = T.thm3_bounds(12.0, 6.0, 12.0, c / 12, 0.1, 0.9)
        a, b = _a_b(c, 1.0, 0.5)
        assert_digits(a, a_text, f"A c={c}")
        assert_digits(b, b_text, f"B c={c}")
        assert_digits(bounds.chain_lower, lower_text, f"chain lower c={c}")
        assert_digits(bounds.stated_lower, printed_text, f"stated lower c={c}")
        # the two lowers differ by 2^(1/(A-1)) exactly (THEORY 2.4): float64 rounding only
        assert bounds.stated_lower == pytest.approx(bounds.chain_lower * 2 ** (1 / (a - 1)), rel=1e-12)
        assert_digits(bounds.upper, upper_text, f"upper c={c}")
        assert bounds.reason == ""
        assert bounds.chain_lower < bounds.stated_lower < gd < bounds.upper
    bounds = T.thm3_bounds(12.0, 6.0, 12.0, 0.5 / 12, 0.1, 0.9)
    a, b = _a_b(0.5, 1.0, 0.5)
    assert_digits(a, "0.931808", "A c=.5")
    assert_digits(b, "3.98132", "B c=.5")
    assert math.isnan(bounds.chain_lower) and math.isnan(bounds.stated_lower)
    assert "A = 0.9318 <= 1" in bounds.reason
    assert_digits(bounds.upper, "1.52673e-1", "upper c=.5")
    assert bounds.upper > 4.65278e-3                                   # the GD threshold of the table


def test_theorem3_pair_12_3():
    """THEORY 4.3: pair (12,3), c=0.1: A=3.70164, B=4.38231, bounds [1.51760e-2, 9.09125e-2]
    containing the GD threshold 4.71685e-2."""
    lower, _, upper, reason = T.thm3_bounds(12.0, 3.0, 12.0, 0.1 / 12, 0.1, 0.9)
    a, b = _a_b(0.1, 1.0, 0.25)
    assert_digits(a, "3.70164", "A")
    assert_digits(b, "4.38231", "B")
    assert_digits(lower, "1.51760e-2", "lower (12,3)")
    assert_digits(upper, "9.09125e-2", "upper (12,3)")
    assert reason == "" and lower < 4.71685e-2 < upper


def test_theorem3_step_size_condition():
    """THEORY 2.4: Theorem 3 needs c = eta s*_1 < 2(sqrt 2 - 1) = 0.828427; at or above it both
    bounds are NaN and the reason says why."""
    assert T.SQRT2_BOUND == pytest.approx(0.828427, abs=5e-7)
    for lr in (T.SQRT2_BOUND / 12, 0.83 / 12, 1.0 / 12, 5.0 / 12):
        bounds = T.thm3_bounds(12.0, 6.0, 12.0, lr, 0.1, 0.9)
        assert math.isnan(bounds.chain_lower) and math.isnan(bounds.stated_lower) and math.isnan(bounds.upper)
        assert "2(sqrt2 - 1)" in bounds.reason


def test_theorem3_reasons_and_gf_limit():
    """Across c in (0, 0.8284) and several pairs: a NaN bound always comes with a reason, finite
    bounds lie in [0, s*_j/2] with chain lower < stated lower and lower < upper; and as c -> 0
    (A, B -> r, THEORY 2.4) both lowers and the upper bracket the exact N = 2 GF threshold."""
    for si, sj in ((12.0, 6.0), (12.0, 3.0), (12.0, 11.0), (6.0, 3.0), (12.0, 1.0)):
        for c in np.linspace(1e-4, 0.828, 40):
            bounds = T.thm3_bounds(si, sj, 12.0, c / 12, 0.1, 0.9)
            values = (bounds.chain_lower, bounds.stated_lower, bounds.upper)
            assert any(math.isnan(v) for v in values) == (bounds.reason != ""), (si, sj, c, bounds)
            for value in values:
                assert math.isnan(value) or 0 <= value <= sj / 2
            for lower, upper in zip(values, values[1:]):
                assert not lower >= upper, (si, sj, c, bounds)          # NaN compares False
        bounds = T.thm3_bounds(si, sj, 12.0, 1e-7 / 12, 0.1, 0.9)
        gf = math.exp(T.log_gf_threshold(si, sj, 0.1, 0.9, 2))
        assert bounds.chain_lower < bounds.stated_lower < gf < bounds.upper, (si, sj)


# ----------------------------------------------------------------------------- 7. threshold by ODE

_ODE_CASES = [   # (N, s*_i, s*_j, s, f)
    (2, 2.0, 1.0, 0.1, 0.9),
    (2, 12.0, 6.0, 0.1, 0.9),
    (3, 2.0, 1.0, 0.2, 0.8),        # the printed-bound counterexample of THEORY 2.3
    (4, 12.0, 6.0, 0.1, 0.9),
    (2.5, 3.0, 1.0, 0.15, 0.85),
    (1.9, 2.0, 1.0, 0.1, 0.9),
    (INF, 2.0, 1.0, 0.1, 0.9),
]


@pytest.mark.parametrize("depth, si, sj, s, f", _ODE_CASES)
def test_threshold_by_ode(depth, si, sj, s, f):
    """Definition 1 (THEORY 2.2) checked on the ODE itself: at 0.99 x the threshold, sigma_i
    reaches f s*_i before sigma_j reaches s s*_j ((s,f)-incremental); at 1.01 x it does not."""
    threshold = math.exp(T.log_gf_threshold(si, sj, s, f, depth))
    for factor, incremental in ((0.99, True), (1.01, False)):
        sigma0 = factor * threshold
        t_f_i = _reach_time_ode(si, sigma0, f, depth)
        t_s_j = _reach_time_ode(sj, sigma0, s, depth)
        assert (t_f_i <= t_s_j) == incremental, (factor, t_f_i, t_s_j)
        # and the quadrature agrees with the ODE on those times
        assert T.time_to_reach(si, sigma0, f, depth) == pytest.approx(t_f_i, rel=1e-9)
        assert T.time_to_reach(sj, sigma0, s, depth) == pytest.approx(t_s_j, rel=1e-9)


def test_counterexample_sigma0_040_is_incremental():
    """THEORY 2.3: at r=2, s=.2, f=.8, N=3, sigma0 = 0.040 (above the printed upper bound
    0.0342936) is still incremental, by the ODE."""
    assert 0.040 > T.thm2_bounds_printed(2.0, 0.2, 0.8, 3)[1]
    assert _reach_time_ode(2.0, 0.040, 0.8, 3) < _reach_time_ode(1.0, 0.040, 0.2, 3)
