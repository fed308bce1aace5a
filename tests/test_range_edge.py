"""A tuned value at the edge of its searched range (vitscale.range_edge): linear, log, int (with a
step, on a log scale), exactly at the 5 % line, in the middle, and listed values."""

from __future__ import annotations

import pytest

from vitscale.range_edge import RangeEdge, number, point_edges, range_edge, space_edge


def side(value, entry) -> str | None:
    edge = space_edge(value, entry)
    return None if edge is None else edge.side


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0.0, "lower"),
        (0.05, "lower"),
        (0.0501, None),
        (0.5, None),
        (0.9499, None),
        (0.95, "upper"),
        (1.0, "upper"),
    ],
)
def test_a_linear_range_flags_the_outer_5_percent_of_its_width(value, expected):
    assert side(value, {"uniform": [0.0, 1.0]}) == expected


def test_a_log_range_is_judged_on_the_log_scale():
    entry = {"loguniform": [1e-4, 1e-2]}  # two decades: 5 % is 0.1 decade, a factor 1.259
    assert side(1e-2, entry) == "upper" and side(1.2e-4, entry) == "lower"
    assert side(1e-4 * 10**0.1, entry) == "lower"  # exactly at the line
    assert side(1.3e-4, entry) is None and side(1e-3, entry) is None  # linearly, 1.3e-4 would be an edge
    assert side(7.9e-3, {"loguniform": [5e-4, 8e-3]}) == "upper"


def test_int_ranges_with_and_without_a_step_or_a_log_scale():
    assert side(1, {"int": [1, 8]}) == "lower" and side(8, {"int": [1, 8]}) == "upper"
    assert side(2, {"int": [1, 8]}) is None and side(4, {"int": [1, 8]}) is None
    assert side(40, {"int": [16, 512], "step": 8}) == "lower"  # 16 + 5 % of 496 = 40.8
    assert side(48, {"int": [16, 512], "step": 8}) is None
    assert (
        side(1, {"int": [1, 64], "log": True}) == "lower" and side(2, {"int": [1, 64], "log": True}) is None
    )
    assert side(8, {"int": [1, 64]}) is None and side(56, {"int": [1, 64], "log": True}) == "upper"


def test_a_stepped_uniform_range_is_judged_like_any_range():
    entry = {"uniform": [0.0, 5.0], "step": 0.5}
    assert side(0.0, entry) == "lower" and side(0.5, entry) is None and side(5.0, entry) == "upper"


def test_categorical_choices_have_no_edge_and_ordered_numbers_only_with_an_interior():
    assert side("ssog", {"choice": ["attention", "ssog"]}) is None
    assert side(True, {"choice": [True, False]}) is None
    assert side(64, {"choice": [32, 64]}) is None  # no interior
    assert side(64, {"choice": [128, 32, 64]}) is None
    assert side(128, {"grid": [128, 32, 64]}) == "upper" and side(32, {"grid": [128, 32, 64]}) == "lower"


def test_what_is_not_a_numeric_range_is_never_an_edge():
    assert side(None, {"uniform": [0.0, 1.0]}) is None
    assert side(0.0, {"when": {"model.mixer": "ssog"}}) is None
    assert side(0.0, None) is None
    assert range_edge(3, 3, 3) is None  # an empty range: nothing was chosen
    assert range_edge(float("nan"), 0, 1) is None


def test_the_text_names_the_key_the_value_and_the_edge():
    edge = space_edge(7.9e-3, {"loguniform": [5e-4, 8e-3]})
    assert edge == RangeEdge("upper", 8e-3)
    assert edge.describe("train.lr", 7.9e-3) == "train.lr=7.9e-3 within 5% of upper edge 8e-3"
    listed = space_edge(32, {"grid": [32, 64, 128]})
    assert listed.describe("model.width", 32) == "model.width=32 at the smallest listed value"
    assert [number(v) for v in (0.5, 0.0123, 7.91e-3, 12, 2.5e4)] == [
        "0.5",
        "0.0123",
        "7.91e-3",
        "12",
        "2.5e4",
    ]


def test_point_edges_records_every_flagged_value_of_a_point_in_its_order():
    space = {
        "train.lr": {"loguniform": [1e-3, 1e-2]},
        "train.warmup_epochs": {"uniform": [0.0, 1.0], "step": 0.5},
        "model.attention.qk_norm": {"choice": [True, False]},
    }
    point = {"train.lr": 9.9e-3, "train.warmup_epochs": 0.5, "model.attention.qk_norm": True, "other": 1}
    assert point_edges(point, space) == [
        {
            "key": "train.lr",
            "value": 9.9e-3,
            "side": "upper",
            "bound": 1e-2,
            "text": "train.lr=9.9e-3 within 5% of upper edge 0.01",
        }
    ]
    assert point_edges(None, space) == []
