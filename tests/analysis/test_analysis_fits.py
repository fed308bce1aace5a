"""Scaling-law fits recover known exponents; cost slopes recover 1.5 / 2.0; CIs and crossovers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from vitscale.analysis.aggregate import mean_ci
from vitscale.analysis.crossover import crossover_point
from vitscale.analysis.exponents import loglog_slope
from vitscale.analysis.fits import fit_power_law


@pytest.mark.parametrize("a,b,c", [(8.0, 0.30, 0.05), (40.0, 0.45, 0.12), (2.0, 0.2, 0.0)])
def test_power_law_recovers_known_exponents(a, b, c):
    rng = np.random.default_rng(7)
    p = np.repeat(np.geomspace(5e4, 2e7, 6), 3)  # 6 sizes x 3 seeds
    err = a * p**-b + c + rng.normal(0, 0.002, p.size)
    fit = fit_power_law(p, err, n_boot=100, seed=0)
    assert fit.status == "ok" and fit.bootstrap == "stratified" and fit.n_boot_ok == 100
    assert fit.at_bound == (["c=0 (lower bound)"] if c == 0 else []) and fit.n_starts == 15
    assert fit.b == pytest.approx(b, abs=0.06)
    assert fit.c == pytest.approx(c, abs=0.02)
    pred = fit.predict(np.array([1e5, 1e6, 1e7]))
    np.testing.assert_allclose(pred, a * np.array([1e5, 1e6, 1e7]) ** -b + c, atol=0.006)
    lo, hi = fit.ci["b"]
    assert lo <= fit.b <= hi and lo - 0.03 <= b <= hi + 0.03


def test_bootstrap_is_seeded():
    rng = np.random.default_rng(0)
    p = np.repeat(np.geomspace(1e5, 1e7, 4), 2)
    err = 5 * p**-0.3 + 0.1 + rng.normal(0, 0.003, p.size)
    one, two = fit_power_law(p, err, n_boot=50, seed=3), fit_power_law(p, err, n_boot=50, seed=3)
    assert one.ci == two.ci


@pytest.mark.parametrize("sizes", [2, 3])
def test_fits_refuse_fewer_than_four_sizes(sizes):
    """A 3-parameter law through 3 sizes is exactly determined: no fit, no interval, a reason."""
    p = np.repeat(np.geomspace(1e5, 1e7, sizes), 3)
    err = 5 * p**-0.3 + 0.1 + np.random.default_rng(0).normal(0, 0.003, p.size)
    fit = fit_power_law(p, err, n_boot=50)
    assert fit.status == "not_fitted" and fit.a is None and fit.b is None and fit.ci == {}
    assert fit.reason.startswith(f"not fitted: {sizes} sizes") and fit.n_boot == 0


def test_a_parameter_pinned_at_its_bound_is_flagged():
    """Error rising with size drives b to 0 (its lower bound): the fit says so instead of hiding it."""
    p = np.repeat(np.geomspace(1e5, 1e7, 5), 2)
    err = 0.2 + 0.01 * np.log10(p) + np.random.default_rng(1).normal(0, 0.001, p.size)
    fit = fit_power_law(p, err, n_boot=20)
    assert fit.status == "ok" and any(flag.startswith("b=0") for flag in fit.at_bound)


def test_failed_bootstrap_resamples_are_counted():
    """Case resampling of 4 unreplicated sizes mostly keeps < 4 sizes: those count as failed."""
    p = np.geomspace(1e5, 1e7, 4)
    fit = fit_power_law(p, 5 * p**-0.3 + 0.1, n_boot=200, seed=0)
    rng = np.random.default_rng(0)  # the same draws: a resample with all 4 sizes is a permutation
    complete = sum(np.unique(rng.integers(0, 4, 4)).size == 4 for _ in range(200))
    assert fit.bootstrap == "cases" and fit.n_boot == 200
    assert fit.n_boot_ok == complete and 0 < complete < 40
    if complete < 10:
        assert fit.ci == {} and f"{complete} of 200 bootstrap resamples succeeded" in fit.reason


def test_unreplicated_sizes_bootstrap_whole_cases():
    p = np.geomspace(1e5, 1e7, 8)
    err = 5 * p**-0.3 + 0.1
    fit = fit_power_law(p, err, n_boot=100, seed=0)
    assert fit.bootstrap == "cases" and 0 < fit.n_boot_ok <= 100
    assert fit.b == pytest.approx(0.3, abs=1e-3)


@pytest.mark.parametrize("exponent", [1.5, 2.0])
def test_cost_slope_recovers_the_exponent(exponent):
    rng = np.random.default_rng(11)
    tokens = np.array([196, 576, 1024, 2304, 4096], dtype=float)
    seconds = 3e-7 * tokens**exponent * np.exp(rng.normal(0, 0.03, tokens.size))
    fit = loglog_slope(tokens, seconds)
    assert fit["slope"] == pytest.approx(exponent, abs=0.06)
    assert fit["ci"][0] < exponent < fit["ci"][1]
    assert fit["r2"] > 0.99 and fit["n"] == 5


def test_slope_needs_two_distinct_x_and_three_points_for_a_ci():
    assert loglog_slope([10, 10], [1, 2])["slope"] is None
    two = loglog_slope([10, 100], [1, 100])
    assert two["slope"] == pytest.approx(2.0) and two["ci"] is None


def test_mean_ci_is_the_student_t_interval():
    v = np.array([0.70, 0.72, 0.75, np.nan])
    mean, std, half, n = mean_ci(v)
    assert n == 3 and mean == pytest.approx(0.7233333)
    assert half == pytest.approx(stats.t.ppf(0.975, 2) * np.std(v[:3], ddof=1) / math.sqrt(3))
    assert math.isnan(mean_ci(np.array([0.5]))[2]) and mean_ci(np.array([np.nan]))[3] == 0


def test_crossover_is_interpolated_in_log_space():
    res = np.array([224.0, 384.0, 512.0])
    adv = np.array([-0.2, 0.2, 0.5])  # symmetric around the sign change: the log-midpoint
    status, x, lo, hi = crossover_point(res, adv)
    assert status == "crosses" and (lo, hi) == (224, 384)
    assert x == pytest.approx(math.sqrt(224 * 384))
    assert crossover_point(res, np.array([-1.0, -0.5, -0.1]))[:2] == ("never", None)
    assert crossover_point(res, np.array([0.1, 0.2, 0.3]))[0] == "ahead_throughout"
    assert crossover_point(res, np.array([-0.1, 0.0, 0.3]))[1] == pytest.approx(384.0)
