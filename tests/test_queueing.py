"""Queueing math: Erlang B/C, Kimura's P99 wait and the minimum-GPU search.

What is checked, and against what:

- Erlang B and C for small ``c`` (<= 60) against the exact rational value
  ``B = (a^c / c!) / sum_{k=0..c} a^k / k!`` computed with ``Fraction`` from
  the float ``a`` (so the reference is exact), and ``C = cB / (c - a(1-B))``
  for ``a < c``, 1 otherwise.
- Erlang B for large ``c`` (1e3 .. 1e6) against the classic recursion
  ``B_0 = 1, B_k = a B_{k-1} / (k + a B_{k-1})`` (e.g. Cooper, *Introduction
  to Queueing Theory*, 2nd ed., section 3.3), run in float64 as
  ``1/B_k = 1 + (k/a) / B_{k-1}`` with power-of-two rescaling so that ``B``
  values far below the float64 range are compared as logarithms.
- Properties: ``0 <= B <= C <= 1``, ``C = 1`` for ``a >= c``, ``C`` falls
  with ``c``, ``B`` rises with ``a``, finite values up to ``c = 1e6`` and
  ``a/c = 0.999``, and broadcasting equals scalar calls.
- Kimura's quantile ``W_q = ln(C/(1-q)) (1+Cs^2) E[S] / (2(c-a))`` (Kimura
  1994, FleetOpt, Chen et al. 2026) on a hand-computed case, its zero and infinite
  branches, its monotonicity in ``c`` and the tail equation it inverts.
- ``min_instances`` against a brute-force linear scan of ``pool_is_feasible``,
  minimality, the ``-1`` / zero-load conventions, vectorisation, and extreme
  inputs.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optfleet.queueing import (
    INFEASIBLE,
    cap_lower_bound_gpus,
    erlang_b,
    erlang_c,
    log_erlang_b,
    min_instances,
    pool_is_feasible,
    wait_quantile_s,
)

pytestmark = pytest.mark.unit

_SMALLEST_NORMAL = np.finfo(np.float64).tiny


# ---------------------------------------------------------------- references


def exact_erlang_b(c: int, a: float) -> Fraction:
    """``(a^c / c!) / sum_{k=0..c} a^k / k!`` in exact rational arithmetic."""
    x = Fraction(a)
    term = total = Fraction(1)
    for k in range(1, c + 1):
        term = term * x / k
        total += term
    return term / total


def exact_erlang_c(c: int, a: float) -> Fraction:
    """``c B / (c - a (1 - B))`` for ``a < c``, else 1, exactly."""
    x = Fraction(a)
    if x >= c:
        return Fraction(1)
    b = exact_erlang_b(c, a)
    return c * b / (c - x * (1 - b))


def log_of_fraction(value: Fraction) -> float:
    """``ln value`` without rounding ``value`` to float64 first (no underflow)."""
    return math.log(value.numerator) - math.log(value.denominator)


def recursive_log_erlang_b(c: int, a: float) -> float:
    """``ln B(c, a)`` from the classic recursion, written on ``1/B`` and rescaled by ``2^-800``."""
    inv_b, one, log_scale = 1.0, 1.0, 0.0  # 1/B_k = inv_b * exp(log_scale); one = exp(-log_scale)
    for k in range(1, c + 1):
        inv_b = one + k / a * inv_b
        if inv_b > 2.0**800:
            inv_b *= 2.0**-800
            one *= 2.0**-800
            log_scale += 800 * math.log(2.0)
    return -(math.log(inv_b) + log_scale)


def min_gpus_by_scan(load, slots, mean_s, scv, budget_s, rho_max, limit=10**6, chunk=1024) -> int:
    """First ``n = 0, 1, 2, ...`` for which ``pool_is_feasible`` holds (the definition of ``min_instances``)."""
    for start in range(0, limit, chunk):
        ok = pool_is_feasible(np.arange(start, start + chunk), load, slots, mean_s, scv, budget_s, rho_max)
        if ok.any():
            return start + int(np.argmax(ok))
    raise AssertionError(f"no feasible n below {limit}")


def assert_minimal(n, load, slots, mean_s, scv, budget_s, rho_max) -> None:
    """``n`` is feasible and ``n - 1`` is not, unless ``n`` is already the cap's lower bound."""
    args = (load, slots, mean_s, scv, budget_s, rho_max)
    assert pool_is_feasible(n, *args)
    assert n == cap_lower_bound_gpus(load, slots, rho_max) or not pool_is_feasible(n - 1, *args)


# ---------------------------------------------------------------- strategies


@st.composite
def servers_and_load(draw, max_servers: int, max_utilisation: float):
    """``(c, a)`` with ``1 <= c <= max_servers`` and ``0 < a <= max_utilisation * c``."""
    c = draw(st.integers(1, max_servers))
    a = draw(st.floats(0.0, max_utilisation * c, exclude_min=True))
    return c, a


def loads(max_erlangs: float):
    """Offered loads: exactly zero, or in ``[1e-6, max_erlangs]``.

    Loads near 1e-308 are left out: there ``pool_is_feasible(0, a, ...)``, which the scan evaluates, is
    right (False) but numpy warns of an overflow in ``E[S] / (c - a)`` inside ``wait_quantile_s``.
    """
    return st.one_of(st.just(0.0), st.floats(1e-6, max_erlangs))


def pool_params(budget_s=st.floats(0.01, 5.0), load=loads(2000.0)):
    """``(load, slots_per_instance, mean_service_s, service_scv, wait_budget_s)`` of one pool."""
    return st.tuples(load, st.integers(1, 300), st.floats(0.05, 50.0), st.floats(0.0, 4.0), budget_s)


rho_maxes = st.floats(0.5, 0.95)


# ---------------------------------------------------------------- Erlang B / C


@settings(max_examples=200, deadline=None)
@given(servers_and_load(max_servers=60, max_utilisation=1.5))
def test_erlang_b_and_c_match_exact_rationals(case: tuple[int, float]) -> None:
    c, a = case
    b_exact, c_exact = exact_erlang_b(c, a), exact_erlang_c(c, a)
    # Compared as logs too: B underflows float64 for tiny a.
    assert float(log_erlang_b(c, a)) == pytest.approx(log_of_fraction(b_exact), rel=0, abs=1e-10)
    assert float(erlang_b(c, a)) == pytest.approx(float(b_exact), rel=1e-10, abs=_SMALLEST_NORMAL)
    assert float(erlang_c(c, a)) == pytest.approx(float(c_exact), rel=1e-10, abs=_SMALLEST_NORMAL)


@pytest.mark.parametrize("utilisation", [0.5, 0.9, 0.99, 0.999])
@pytest.mark.parametrize("c", [10**3, 10**4, 10**5, 10**6])
def test_erlang_b_matches_recursion_for_large_c(c: int, utilisation: float) -> None:
    a = utilisation * c
    log_b = recursive_log_erlang_b(c, a)
    b = math.exp(log_b)  # 0.0 where B is below the float64 range, on both sides
    assert float(log_erlang_b(c, a)) == pytest.approx(log_b, rel=0, abs=1e-8)
    assert float(erlang_b(c, a)) == pytest.approx(b, rel=1e-8, abs=_SMALLEST_NORMAL)
    assert float(erlang_c(c, a)) == pytest.approx(c * b / (c - a * (1 - b)), rel=1e-8, abs=_SMALLEST_NORMAL)


@pytest.mark.parametrize(("c", "a"), [(1, 1000.0), (60, 1000.0), (137_237, 153_687.0)])
def test_erlang_b_heavily_overloaded(c: int, a: float) -> None:
    assert float(erlang_b(c, a)) == pytest.approx(math.exp(recursive_log_erlang_b(c, a)), rel=1e-8)


@settings(max_examples=200, deadline=None)
@given(servers_and_load(max_servers=10**6, max_utilisation=1.0))
def test_erlang_b_c_ordering_and_monotonicity(case: tuple[int, float]) -> None:
    c, a = case
    b, p_wait = float(erlang_b(c, a)), float(erlang_c(c, a))
    assert 0.0 <= b <= p_wait <= 1.0
    assert float(erlang_c(c + 1, a)) <= p_wait
    assert float(erlang_b(c, 1.01 * a)) >= b


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 10**6), st.floats(1.0, 2.0))
def test_erlang_c_is_one_when_unstable(c: int, overload: float) -> None:
    assert erlang_c(c, overload * c) == 1.0


def test_erlang_finite_up_to_a_million_servers() -> None:
    c = np.logspace(0, 6, 25).round()[:, None]
    a = c * np.array([1e-6, 0.1, 0.5, 0.9, 0.99, 0.999])
    b, p_wait = erlang_b(c, a), erlang_c(c, a)
    assert np.isfinite(log_erlang_b(c, a)).all()
    assert ((0.0 <= b) & (b <= p_wait) & (p_wait <= 1.0)).all()


def test_erlang_broadcasting_equals_scalar_calls() -> None:
    c = np.array([1.0, 7.0, 60.0, 1e4, 1e6])[:, None]
    a = np.array([1e-3, 0.5, 5.0, 59.0, 9.9e3, 9.99e5])
    for f in (log_erlang_b, erlang_b, erlang_c):
        grid = f(c, a)
        assert grid.shape == (5, 6)
        scalars = [[float(f(ci, aj)) for aj in a] for ci in c[:, 0]]
        np.testing.assert_array_equal(grid, scalars)


# ---------------------------------------------------------------- Kimura


def test_kimura_hand_computed_case() -> None:
    # c = 2, a = 1: B = (1/2) / (1 + 1 + 1/2) = 1/5, C = 2 (1/5) / (2 - 4/5) = 1/3.
    assert float(erlang_c(2, 1.0)) == pytest.approx(1 / 3, rel=1e-14)
    expected = math.log((1 / 3) / 0.01) * (1 + 0.5) * 2.0 / (2 * (2 - 1))
    assert float(wait_quantile_s(2, 1.0, 2.0, 0.5)) == pytest.approx(expected, rel=1e-14)


def test_kimura_zero_when_wait_probability_below_tail() -> None:
    assert float(erlang_c(10, 1.0)) < 0.01
    assert wait_quantile_s(10, 1.0, 2.0, 0.5) == 0.0


@pytest.mark.parametrize(("c", "a"), [(4, 4.0), (4, 5.0), (10**6, 10**6 + 1.0)])
def test_kimura_infinite_when_unstable(c: int, a: float) -> None:
    assert wait_quantile_s(c, a, 1.0, 1.0) == math.inf


@settings(max_examples=100, deadline=None)
@given(st.floats(0.01, 5000.0), st.floats(0.05, 50.0), st.floats(0.0, 4.0), st.floats(0.5, 0.999))
def test_kimura_non_increasing_in_servers(a: float, mean_s: float, scv: float, q: float) -> None:
    c = np.arange(1, math.ceil(a) + 200)
    w = wait_quantile_s(c, a, mean_s, scv, quantile=q)
    assert (w >= 0).all()
    assert (w[1:] <= w[:-1]).all()


@settings(max_examples=100, deadline=None)
@given(servers_and_load(max_servers=10**5, max_utilisation=0.999), st.floats(0.05, 50.0), st.floats(0.0, 4.0))
def test_kimura_solves_its_tail_equation(case: tuple[int, float], mean_s: float, scv: float) -> None:
    # P[W > t] = C exp(-2 (c - a) t / ((1 + Cs^2) E[S])) equals 1 - q at t = W_q when C > 1 - q.
    c, a = case
    p_wait = float(erlang_c(c, a))
    w = float(wait_quantile_s(c, a, mean_s, scv))
    if p_wait > 0.01:
        assert p_wait * math.exp(-2 * (c - a) * w / ((1 + scv) * mean_s)) == pytest.approx(0.01, rel=1e-9)
    else:
        assert w == 0.0


# ---------------------------------------------------------------- sizing


@pytest.mark.parametrize(
    ("load", "slots", "rho_max", "expected"),
    [(0.0, 4, 0.85, 0), (1e-9, 4, 0.85, 1), (34.0, 4, 0.85, 10), (34.001, 4, 0.85, 11), (1e6, 1, 0.5, 2 * 10**6)],
)
def test_cap_lower_bound(load: float, slots: int, rho_max: float, expected: int) -> None:
    assert cap_lower_bound_gpus(load, slots, rho_max) == expected


@settings(max_examples=100, deadline=None)
@given(pool_params(), rho_maxes)
def test_min_gpus_equals_linear_scan(pool: tuple, rho_max: float) -> None:
    assert min_instances(*pool, rho_max) == min_gpus_by_scan(*pool, rho_max)


@settings(max_examples=200, deadline=None)
@given(pool_params(load=loads(1e5)), rho_maxes)
def test_min_gpus_is_minimal(pool: tuple, rho_max: float) -> None:
    assert_minimal(int(min_instances(*pool, rho_max)), *pool, rho_max)


@pytest.mark.parametrize("budget_s", [0.0, -1.0, -math.inf])
@pytest.mark.parametrize("load", [1e-9, 3.0, 1e6])
def test_min_gpus_infeasible_without_budget(load: float, budget_s: float) -> None:
    assert min_instances(load, 8, 1.0, 1.0, budget_s, 0.85) == INFEASIBLE


@pytest.mark.parametrize("budget_s", [0.0, -1.0, 1e-6, 5.0])
def test_min_gpus_zero_load_needs_no_gpus(budget_s: float) -> None:
    assert min_instances(0.0, 8, 1.0, 1.0, budget_s, 0.85) == 0


@settings(max_examples=50, deadline=None)
@given(st.lists(pool_params(budget_s=st.floats(-1.0, 5.0)), min_size=1, max_size=8), rho_maxes)
def test_min_gpus_vectorised_equals_scalar_calls(pools: list[tuple], rho_max: float) -> None:
    columns = [np.array(column) for column in zip(*pools)]
    expected = [int(min_instances(*pool, rho_max)) for pool in pools]
    np.testing.assert_array_equal(min_instances(*columns, rho_max), expected)


def test_min_gpus_broadcasts_over_a_grid() -> None:
    load = np.array([0.0, 0.3, 7.5, 120.0, 4e3])[:, None, None, None]
    slots = np.array([1, 8, 256])[:, None, None]
    mean_s = np.array([0.05, 2.0, 40.0])[:, None]
    budget_s = np.array([-1.0, 0.0, 0.01, 0.5, 5.0])
    grid = min_instances(load, slots, mean_s, 1.5, budget_s, 0.85)
    assert grid.shape == (5, 3, 3, 5)
    for index in np.ndindex(grid.shape):
        i, j, k, m = index
        assert grid[index] == min_instances(load[i, 0, 0, 0], slots[j, 0, 0], mean_s[k, 0], 1.5, budget_s[m], 0.85)


@pytest.mark.parametrize(
    ("load", "slots", "mean_s", "scv", "budget_s", "rho_max"),
    [
        (1e6, 1, 50.0, 4.0, 1e-6, 0.85),
        (1e6, 1, 0.05, 0.0, 1e-6, 0.95),
        (1e6, 300, 50.0, 4.0, 1e-6, 0.5),
        (1e6, 1, 50.0, 4.0, 1e6, 0.85),
        (1e-9, 300, 50.0, 4.0, 1e-6, 0.85),
    ],
)
def test_min_gpus_extreme_inputs(load, slots, mean_s, scv, budget_s, rho_max) -> None:
    n = int(min_instances(load, slots, mean_s, scv, budget_s, rho_max))
    assert n >= 1
    assert_minimal(n, load, slots, mean_s, scv, budget_s, rho_max)
