"""A bad `--set PATH=VALUE` on `vitscale train` / `vitscale bench`: one line naming the key, exit 2."""

from __future__ import annotations

import pytest
from fuzz_support import assert_user_contract, run_cli

TRAIN = ["train", "--width", "16", "--depth", "1", "--heads", "2", "--patch-size", "4", "--no-track"]
BENCH = ["bench", "--width", "16", "--heads", "2", "--patch-size", "8", "--device", "cpu"]


@pytest.mark.parametrize(
    ("command", "text", "expected"),
    [
        (TRAIN, "model.widht=32", "--set model.widht: unknown key; did you mean 'width'?"),
        (TRAIN, "model.ssog.num_gausians=2", "--set model.ssog.num_gausians: unknown key; did you mean"),
        (TRAIN, "train.lr=-1", "--set train.lr: Input should be greater than 0 (got -1)"),
        (TRAIN, "data.dataset=[1, 2]", "--set data.dataset:"),
        (TRAIN, "train.lr", "--set train.lr: expected PATH=VALUE, e.g. --set model.ssog.num_gaussians=8"),
        (BENCH, "model.widht=24", "--set model.widht: unknown key; did you mean 'width'?"),
        (BENCH, "resolution=[16]", "--set resolution: unknown key; did you mean 'resolutions'?"),
        (BENCH, "mode=serve", "--set mode: Input should be 'inference' or 'train'"),
        (BENCH, "resolutions=[20]", "--set resolutions: [20] not divisible by patch_size 8"),
        (BENCH, "repeats", "--set repeats: expected PATH=VALUE, e.g. --set resolutions=[224,384]"),
    ],
)
def test_a_bad_set_is_one_line_naming_the_key(command, text, expected):
    result = run_cli(*command, "--set", text)
    assert result.code == 2, result.describe()
    [line] = assert_user_contract(result)
    assert line.startswith(expected), line
