"""pareto_front against an O(n^2) brute force on many random point sets: ties, duplicates, NaN, directions."""

from __future__ import annotations

import warnings

import numpy as np
import pyarrow as pa
import pytest

from vitscale.analysis.statistics.fronts import ParetoNaNWarning, pareto_front, pareto_indices, pareto_mask


def brute_force(values: np.ndarray, senses: list[str]) -> np.ndarray:
    """Indices of rows no other row dominates (NaN rows excluded), straight from the definition."""
    sign = [-1.0 if s == "max" else 1.0 for s in senses]
    rows = [
        None if np.isnan(r).any() else [s * v for s, v in zip(sign, r, strict=True)] for r in values.tolist()
    ]
    keep = []
    for i, p in enumerate(rows):
        if p is None:
            continue
        dominated = any(
            q is not None
            and j != i
            and all(a <= b for a, b in zip(q, p, strict=True))
            and any(a < b for a, b in zip(q, p, strict=True))
            for j, q in enumerate(rows)
        )
        if not dominated:
            keep.append(i)
    return np.array(keep, dtype=int)


def random_set(rng: np.random.Generator, k: int) -> np.ndarray:
    """Small integer grids force ties and exact duplicates; some sets are continuous; some rows NaN."""
    n = int(rng.integers(0, 80))
    if rng.random() < 0.7:
        values = rng.integers(0, int(rng.integers(2, 8)), size=(n, k)).astype(float)
    else:
        values = rng.normal(size=(n, k))
    if n and rng.random() < 0.5:
        values[rng.random(n) < 0.15, int(rng.integers(0, k))] = np.nan
    if n > 3 and rng.random() < 0.5:  # explicit duplicates of existing rows
        values = np.vstack([values, values[rng.integers(0, n, size=3)]])
    return values


@pytest.mark.parametrize("k", [1, 2, 3])
def test_matches_brute_force_on_random_sets(k):
    rng = np.random.default_rng(1234 + k)
    for _ in range(300 if k == 2 else 120):
        values = random_set(rng, k)
        senses = [("max", "min")[int(b)] for b in rng.integers(0, 2, size=k)]
        objectives = [(j, s) for j, s in enumerate(senses)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ParetoNaNWarning)
            got = pareto_indices(values, objectives)
        np.testing.assert_array_equal(got, brute_force(values, senses), err_msg=f"{values}\n{senses}")


def test_duplicates_of_a_front_point_are_all_on_the_front():
    pts = np.array([[1.0, 5.0], [1.0, 5.0], [2.0, 3.0], [2.0, 3.0], [2.0, 4.0], [0.5, 9.0]])
    got = pareto_indices(pts, [(0, "min"), (1, "max")])  # cheap and accurate
    # (0.5, 9) dominates (1, 5): cheaper and better; (2, 3) is dominated by (1, 5); (2, 4) too.
    np.testing.assert_array_equal(got, [5])
    got = pareto_indices(pts, [(0, "max"), (1, "min")])
    np.testing.assert_array_equal(got, [2, 3])  # both copies of (2, 3)


def test_ties_on_one_axis_are_broken_by_the_other():
    pts = np.array([[1.0, 1.0], [1.0, 2.0], [3.0, 1.0]])
    np.testing.assert_array_equal(pareto_indices(pts, [(0, "min"), (1, "min")]), [0])
    np.testing.assert_array_equal(pareto_indices(pts, [(0, "max"), (1, "max")]), [1, 2])


def test_nan_rows_are_dropped_with_a_warning_for_every_container():
    acc = [0.9, np.nan, 0.8, 0.95]
    params = [10.0, 5.0, 4.0, np.nan]
    table = pa.table({"acc": pa.array([0.9, None, 0.8, 0.95]), "params": params, "id": ["a", "b", "c", "d"]})
    objectives = [("acc", "max"), ("params", "min")]
    with pytest.warns(ParetoNaNWarning, match="dropped 2 of 4 rows"):
        front = pareto_front(table, objectives)
    assert front.column("id").to_pylist() == ["a", "c"]
    with pytest.warns(ParetoNaNWarning):
        got = pareto_front({"acc": acc, "params": params, "id": ["a", "b", "c", "d"]}, objectives)
    assert list(got["id"]) == ["a", "c"]
    with pytest.warns(ParetoNaNWarning):
        arr = pareto_front(np.column_stack([acc, params]), [(0, "max"), (1, "min")])
    np.testing.assert_array_equal(arr, [[0.9, 10.0], [0.8, 4.0]])


def test_no_warning_without_nan_and_empty_input():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert pareto_indices(np.zeros((0, 2)), [(0, "max"), (1, "min")]).size == 0
        assert pareto_mask(np.array([[1.0, 2.0]]), [True, False]).tolist() == [True]


def test_bad_objectives_are_rejected():
    with pytest.raises(ValueError, match="'max' or 'min'"):
        pareto_indices(np.ones((2, 2)), [(0, "up"), (1, "min")])
    with pytest.raises(ValueError):
        pareto_indices(np.ones((2, 2)), [])
