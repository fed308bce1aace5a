"""The MLflow contract of a child run: its name, the metrics it logs and the constants it keeps as params."""

from __future__ import annotations

from vitscale.tracking import layout
from vitscale.tracking.tune_callback import result_metrics


def test_run_names_start_with_what_differs_and_end_with_the_seed():
    point = {"model.mixer": "ssog", "model.regime": "ode", "model.width": 64}
    assert layout.run_name(point, 1) == "ssog · ode · w64 · s1"
    assert layout.run_name({"data.resolution": 32, "model.ssog.num_gaussians": 4}, 0) == "r32 · K4 · s0"
    assert (
        layout.run_name({"train.lr": 3e-3, "model.attention.qk_norm": True}, 2)
        == "lr=0.003 · qk_norm=True · s2"
    )
    assert layout.run_name({"data.train_resolutions": [28, 44]}) == "train_resolutions=28+44"
    # A flag read back from MLflow (params are strings) keeps its key: a bare 'False' says nothing.
    assert layout.run_name({"model.mixer": "attention", "model.attention.qk_norm": "False"}) == (
        "attention · qk_norm=False"
    )
    assert layout.run_name({"model.mixer": "ssog"}, 0, phase="tune", sample=7) == "tune · ssog · #7 · s0"
    assert layout.run_name({}) == "base"


def test_constants_move_to_params_and_read_back_as_values():
    result = {"epoch": 3.0, "val_top1": 0.5, "params": 3298.0, "flops_per_image": 1.5e5, "did_not_train": 0.0}
    assert result_metrics(result) == {"val_top1": 0.5}  # epoch is the step, did_not_train a tag
    assert layout.constant_params(result) == {"params": 3298, "flops_per_image": 150000}
    assert layout.constant_params({"val_top1": 0.5}) == {}
    # New runs: constants among the params; older runs: among the metrics (the metric wins).
    new = layout.run_values({"val_top1": 0.5}, {"params": "3298", "model.width": "16"})
    assert new == {"val_top1": 0.5, "params": 3298.0}
    assert layout.run_values({"params": 10.0}, {"params": "3298"}) == {"params": 10.0}
    assert layout.run_values({}, {"params": "n/a"}) == {}


def test_an_arm_reads_for_people_with_its_numbers_short():
    """The ARM tag keeps the value as written (resume matches on it); its display shortens a float."""
    tag = layout.arm_key({"train.train_flops": 1.28e13, "model.width": 16, "model.mixer": "ssog"})
    assert tag == "train.train_flops=12800000000000.0,model.width=16,model.mixer=ssog"
    assert layout.arm_display(tag) == "1.28e+13 · 16 · ssog"
    assert layout.arm_display("train.lr=0.002,data.train_resolutions=28+44", "/") == "0.002/28+44"
