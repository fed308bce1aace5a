"""Fuzz the flags of `vitscale train`, `bench`, `model info` and `study validate --set`.

Nothing long ever runs: `fit` and the benchmark runner are replaced by stubs (the flags' parsing
and validation are what is fuzzed), and `model info` gets sizes that build in milliseconds.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from unittest import mock

from fuzz_support import assert_user_contract, fuzz_settings, run_cli
from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
SMALL = st.sampled_from(["-1", "0", "1", "2", "3", "4", "8", "16", "32"])
HUGE = st.sampled_from(["99999999999999999999999", "1e400", "-1e400", "inf", "nan", "-0", "9" * 400])
WORDS = st.sampled_from(["", "abc", "attention", "ssog", "ode", "cpu", "cuda:99", "1,2", ",", "x,,y"])
TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=8)
ANY = SMALL | HUGE | WORDS | TEXT
MODEL_SIZES = ["--width", "--depth", "--heads", "--patch-size", "--num-classes", "--in-chans"]
MODEL_SIZES += ["--mlp-ratio", "--num-gaussians", "--ode-max-num-steps"]
MODEL_OTHER = ["--mixer", "--regime", "--attention-backend", "--ode-solver", "--ode-rtol", "--ode-atol"]
MODEL_OTHER += ["--ode-step-size", "--ode-t-end"]
TRAIN = ["--dataset", "--root", "--resolution", "--epochs", "--batch-size", "--lr", "--weight-decay"]
TRAIN += ["--seed", "--device", "--experiment", "--set"]
BENCH = ["--mixers", "--regimes", "--resolutions", "--width", "--depth", "--heads", "--patch-size"]
BENCH += ["--batch-size", "--num-gaussians", "--num-classes", "--mode", "--dtype", "--device"]
BENCH += ["--attention-backend", "--compile-mode", "--warmup", "--repeats", "--seed", "--threads"]
BENCH += ["--ode-solver", "--ode-step-size", "--ode-rtol", "--ode-atol", "--name", "--set"]
SET_PATHS = ["trial.train.epochs", "trial.model", "trial.data.resolution", "space.model.width", "search"]
SET_PATHS += ["objectives[0].mode", "objectives.5", "name", "trial", "space", "space.x", "extends", ""]
SET_PATHS += ["trial.model.ode.rtol", "search.seeds[0]", "a..b", "[0]", "space.include"]


def flags(names: list[str], values: st.SearchStrategy[str]) -> st.SearchStrategy[list[str]]:
    """A few of `names`, each with a value (`--flag=value`, so a value may start with '-')."""
    pair = st.tuples(st.sampled_from(names), values).map(lambda p: f"{p[0]}={p[1]}")
    return st.lists(pair, min_size=1, max_size=4)


def _fake_fit(config, **_):
    return SimpleNamespace(metrics={"epoch": 0}, checkpoint=None)


@fuzz_settings(default=150)
@given(argv=flags(TRAIN + MODEL_SIZES + MODEL_OTHER, ANY))
def test_train_flags(argv, tmp_path_factory):
    with mock.patch("vitscale.train.resume.fit", _fake_fit):
        assert_user_contract(run_cli("train", "--no-track", "--json", *argv))


@fuzz_settings(default=150)
@given(argv=flags(BENCH, ANY))
def test_bench_flags(argv):
    with mock.patch("vitscale.bench.runner.run_benchmark", lambda *a, **k: []):
        assert_user_contract(run_cli("bench", "--json", *argv))


@fuzz_settings(default=100)
@given(
    argv=flags(MODEL_SIZES, SMALL | HUGE | WORDS) | flags(MODEL_OTHER, ANY), resolution=SMALL | HUGE | WORDS
)
def test_model_info_flags(argv, resolution):
    """Huge sizes are refused by ModelConfig's bounds; in-bounds sizes stay small (a width-65536
    model is a real allocation, answered as out of memory but slow to reach)."""
    assert_user_contract(run_cli("model", "info", "--json", f"--resolution={resolution}", *argv))


@fuzz_settings(default=150)
@given(path=st.sampled_from(SET_PATHS) | TEXT, value=ANY | st.sampled_from(["{", "[1, x]", "{a: 1}", "null"]))
def test_set_overrides(path, value):
    result = run_cli("study", "validate", str(ROOT / "studies/quickstart.yaml"), "--set", f"{path}={value}")
    assert_user_contract(result)
