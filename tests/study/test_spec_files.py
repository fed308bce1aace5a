"""Every shipped study and search space validates, expands as documented and round-trips."""

from __future__ import annotations

from pathlib import Path

import pytest

from vitscale.study import (
    count_trials,
    dump_spec,
    grid_points,
    load_space,
    load_study,
    spec_hash,
    validate_study,
)
from vitscale.study.yamlio import parse

ROOT = Path(__file__).resolve().parents[2]
STUDIES = sorted((ROOT / "studies").glob("*.yaml"))
SPACES = sorted((ROOT / "search_spaces").glob("*.yaml"))

EXPECTED_TRIALS = {
    "quickstart.yaml": 18,  # 2 mixers x 3 regimes x 3 seeds (width 32)
    "tuned_quickstart.yaml": 28,  # 4 arms x (4 TPE samples x 1 seed + 3 final seeds)
    "tuned_quickstart_pbt.yaml": 28,  # 4 arms x (4 PBT members + 3 final seeds)
    "paper_cifar100_tuned.yaml": 162,  # 6 arms x (24 TPE samples + 3 final seeds)
    "scaling_quickstart.yaml": 30,  # 2 mixers x 5 widths x 3 seeds
    "paper_cifar100_discrete.yaml": 18,  # 2 mixers x 3 sizes x 3 seeds
    "paper_cifar100_looped.yaml": 18,
    "paper_cifar100_ode.yaml": 18,
    "ssog_search.yaml": 32,  # 32 TPE samples x 1 seed
    "throughput_resolution.yaml": 105,  # 3 regimes x 5 resolutions x (5 mixers + attention sdpa/math)
    "throughput_resolution_smoke.yaml": 42,  # 3 regimes x 2 resolutions x 7 series
    "mixer_zoo.yaml": 108,  # 18 arms x (3 tuning + 3 final)
    "mixers_by_regime.yaml": 18,  # 6 mixers x 3 regimes, one seed
    "paper_cifar100_zoo.yaml": 486,  # 18 arms x (24 tuning + 3 final)
    "ode_distill_teachers.yaml": 6,  # 2 mixers (discrete teachers) x 3 seeds
    "ode_distill_quickstart.yaml": 12,  # 2 mixers x (scratch, weight 0.3) x 3 seeds
    "paper_cifar100_ode_distill.yaml": 18,  # 2 mixers x 3 sizes x 3 seeds
    "load_1000.yaml": 1000,  # the load benchmark: 4 points x 250 seeds
    "fashion_tuned.yaml": 120,  # 6 arms x (12 TPE samples at low fidelity + top 3 confirmed + 5 final seeds)
    "fashion_tuned_14.yaml": 120,  # the same on a 14x14 token grid
    "fashion_converged.yaml": 66,  # 6 arms x (8 TPE samples at low fidelity + 3 final seeds); confirm top_k 0
    "fashion_resolution.yaml": 24,  # 8 arms (tuned_from fashion-tuned: no tuning) x 3 final seeds
    "fashion_resolution_bench.yaml": 16,  # 2 mixers x 2 regimes x 4 resolutions
    "fashion_scaling.yaml": 36,  # 36 arms (3 FLOP budgets x 6 widths x 2 mixers) x 1 final seed
    "fashion_scaling_lr.yaml": 48,  # 12 arms (6 widths x 2 mixers) x (3 lr + 1 final seed)
    "paper_imagenet_vit_ti.yaml": 6,  # 2 mixers x 3 seeds, 8 GPUs per trial
    "paper_imagenet_vit_s.yaml": 6,
    "searchers_digits.yaml": 60,  # at most 60 points, drawn until 16 trials' training FLOPs are spent
    "searchers_digits_pbt.yaml": 16,  # a population of 16 (the same compute)
    "searchers_fashion.yaml": 60,  # the same on Fashion-MNIST at low fidelity
    "searchers_fashion_pbt.yaml": 16,
}


def test_every_study_is_listed():
    assert {p.name for p in STUDIES} == set(EXPECTED_TRIALS)
    assert {p.name for p in SPACES} == {
        "mixer_width.yaml",
        "ssog_gaussians.yaml",
        "ode_solver.yaml",
        "resolution.yaml",
        "recipe.yaml",
        "arm_knobs.yaml",
    }


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.name)
def test_study_validates_and_counts(path):
    spec = load_study(path)
    assert count_trials(spec) == EXPECTED_TRIALS[path.name]
    text = path.read_text()
    assert text.startswith("#"), "each study starts with a comment header"


@pytest.mark.parametrize("path", STUDIES, ids=lambda p: p.name)
def test_resolved_spec_round_trips(path):
    spec = load_study(path)
    again = validate_study(parse(dump_spec(spec)), "dump")
    assert spec_hash(again) == spec_hash(spec)
    assert again == spec


@pytest.mark.parametrize("path", SPACES, ids=lambda p: p.name)
def test_search_space_validates(path):
    assert load_space(path)
    assert path.read_text().startswith("#")


def test_paper_studies_share_their_base():
    discrete = load_study(ROOT / "studies/paper_cifar100_discrete.yaml")
    ode = load_study(ROOT / "studies/paper_cifar100_ode.yaml")
    looped = load_study(ROOT / "studies/paper_cifar100_looped.yaml")
    assert (discrete.trial.model.regime, looped.trial.model.regime, ode.trial.model.regime) == (
        "discrete",
        "looped",
        "ode",
    )
    assert ode.trial.data == discrete.trial.data and ode.space == discrete.space
    assert ode.tracking.experiment == "paper-cifar100-ode"
    sizes = {(p["model"]["width"], p["model"]["heads"]) for p in grid_points(discrete)}
    assert sizes == {(192, 3), (384, 6), (768, 12)}
    assert discrete.resources.gpu == 1 and discrete.search.seeds == [0, 1, 2]


def test_paper_imagenet_studies_take_a_whole_8_gpu_node_per_trial_and_the_deit_recipe():
    for name, width in (("paper_imagenet_vit_ti.yaml", 192), ("paper_imagenet_vit_s.yaml", 384)):
        spec = load_study(ROOT / "studies" / name)
        assert (spec.resources.workers, spec.resources.gpu) == (8, 1)
        assert spec.resources.per_trial()["gpu"] == 8 and spec.resources.per_trial()["cpu"] <= 96
        model, data, train = spec.trial.model, spec.trial.data, spec.trial.train
        assert (model.width, model.depth, model.patch_size, data.resolution) == (width, 12, 16, 224)
        assert train.lr == 1.0e-3 * train.batch_size / 1024
        assert (train.epochs, train.warmup_epochs, train.weight_decay, train.label_smoothing) == (
            300,
            5,
            0.05,
            0.1,
        )


def test_quickstart_is_small_and_local():
    spec = load_study(ROOT / "studies/quickstart.yaml")
    assert spec.trial.data.dataset == "digits" and spec.trial.data.resolution == 16
    assert spec.resources.gpu == 0 and spec.trial.train.device == "cpu"
    # FIFO: every mixer x regime cell finishes all its epochs, over 3 seeds (a paired delta)
    assert spec.scheduler.type == "fifo" and spec.objectives[0].metric == "val_top1"
    assert len(spec.search.seeds) >= 3
    points = grid_points(spec)
    assert {p["model.mixer"] for p in points} == {"attention", "ssog"}
    assert {p["model.regime"] for p in points} == {"discrete", "looped", "ode"}
    assert spec.trial.model.width <= 64


def test_ssog_search_conditions_ode_tolerances():
    spec = load_study(ROOT / "studies/ssog_search.yaml")
    assert spec.search.algorithm == "tpe" and [o.metric for o in spec.objectives] == ["val_top1", "params"]
    assert spec.space["model.ode.rtol"].conditions() == {"model.regime": ["ode"]}
    assert "model.ssog.num_gaussians" in spec.space  # from search_spaces/ssog_gaussians.yaml


def test_benchmark_study_points_are_configurations():
    spec = load_study(ROOT / "studies/throughput_resolution.yaml")
    points = grid_points(spec)
    assert len(points) == 105
    assert {p["resolution"] for p in points} == {224, 384, 512, 768, 1024}
    assert {p["attention_backend"] for p in points if p["mixer"] == "attention"} == {"sdpa", "math"}
    assert {p["attention_backend"] for p in points if p["mixer"] == "ssog"} == {None}


def test_scaling_quickstart_has_enough_sizes_for_a_fit():
    spec = load_study(ROOT / "studies/scaling_quickstart.yaml")
    points = grid_points(spec)
    assert len({p["model.width"] for p in points}) >= 5 and len(spec.search.seeds) >= 2
    assert {p["model.mixer"] for p in points} == {"attention", "ssog"}
    assert spec.resources.gpu == 0 and spec.scheduler.type == "fifo"


def test_tuned_studies_tune_every_arm_with_the_same_budget():
    for name in ("tuned_quickstart.yaml", "paper_cifar100_tuned.yaml"):
        spec = load_study(ROOT / "studies" / name)
        assert spec.kind == "comparison" and spec.reference == {"model.mixer": "attention"}
        assert len(spec.final.seeds) >= 2 and spec.objectives[0].metric.startswith("val_")
