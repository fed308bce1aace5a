"""Spearman's ρ of the confirmation phase: orders, ties (average ranks, as scipy), missing scores,
and n below 3 or a side that all ties: undefined, and said so."""

from __future__ import annotations

import pytest
from scipy import stats

from vitscale.analysis.statistics.rank_correlation import average_ranks, spearman


def test_the_same_order_is_one_and_the_reverse_minus_one():
    assert spearman([0.7, 0.8, 0.9], [0.71, 0.85, 0.86]).rho == pytest.approx(1.0)
    assert spearman([0.7, 0.8, 0.9], [0.9, 0.8, 0.7]).rho == pytest.approx(-1.0)
    got = spearman([0.1, 0.2, 0.3, 0.4], [0.1, 0.3, 0.2, 0.4])
    assert got.rho == pytest.approx(0.8) and got.n == 4 and got.note == ""


@pytest.mark.parametrize(
    ("xs", "ys"),
    [
        ([1, 1, 2], [1, 2, 3]),
        ([0.5, 0.5, 0.7, 0.7], [0.1, 0.3, 0.2, 0.2]),
        ([3, 1, 2, 2, 5], [2, 2, 2, 1, 9]),
    ],
)
def test_ties_take_their_average_rank_as_scipy_does(xs, ys):
    assert spearman(xs, ys).rho == pytest.approx(stats.spearmanr(xs, ys).statistic)


def test_average_ranks():
    assert average_ranks([0.3, 0.1, 0.3, 0.2]) == [3.5, 1.0, 3.5, 2.0]


def test_below_three_points_rho_is_undefined_and_says_so():
    got = spearman([0.8, 0.9], [0.9, 0.8])  # two points always correlate ±1
    assert got.rho is None and got.n == 2 and got.note == "n = 2 < 3"


def test_a_missing_score_leaves_its_pair_out():
    got = spearman([0.7, 0.8, 0.9], [0.7, float("nan"), 0.9])
    assert got.rho is None and got.n == 2
    got = spearman([0.6, 0.7, 0.8, 0.9], [0.6, None, 0.8, 0.9])
    assert got.rho == pytest.approx(1.0) and got.n == 3


def test_a_side_that_all_ties_has_no_rank_order():
    got = spearman([0.5, 0.5, 0.5], [0.1, 0.2, 0.3], names=("low-fidelity", "full-fidelity"))
    assert got.rho is None and got.n == 3 and got.note == "every low-fidelity score ties"
    assert spearman([0.1, 0.2, 0.3], [0.4, 0.4, 0.4]).note == "every second score ties"
