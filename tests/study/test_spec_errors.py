"""Malformed specs: each problem is one line naming the file and the dotted key, all reported at once."""

from __future__ import annotations

import pytest

from vitscale.study import SpecError, load_study, validate_study
from vitscale.study.yamlio import parse

# (yaml text after `name: x`, expected key, expected part of the message)
MALFORMED = [
    ("trial: {model: {width: 64, heads: 5}}", "trial.model.heads", "5 does not divide width 64"),
    ("trial: {model: {widht: 64}}", "trial.model.widht", "did you mean 'width'"),
    ("traial: {}", "traial", "unknown key"),
    ("tracking: {system_metrics: true}", "tracking.system_metrics", "unknown key"),
    ("search: {algorithm: tpe, num_sample: 3}", "search.num_sample", "unknown key"),
    ("trial: {train: {epochs: many}}", "trial.train.epochs", "valid integer"),
    ("trial: {train: {epochs: 0}}", "trial.train.epochs", "greater than or equal to 1"),
    ("search: {algorithm: bayes}", "search.algorithm", "'tpe'"),
    ("kind: eval", "kind", "'train', 'benchmark' or 'comparison'"),
    ("trial: {data: {resolution: 30}}", "trial.model.image_size", "not divisible by patch_size 4"),
    ("trial: {model: {mixer: transformer}}", "trial.model.mixer", "unknown mixer 'transformer'"),
    ("space: {model.widht: {choice: [32]}}", "space.model.widht", "did you mean model.width"),
    ("space: {trial.model.width: {choice: [32]}}", "space.trial.model.width", "relative to trial"),
    ("space: {model.image_size: {choice: [32]}}", "space.model.image_size", "set data.resolution"),
    ("space: {train.seed: {choice: [1, 2]}}", "space.train.seed", "search.seeds"),
    ("space: {model.heads: {choice: [3, 4]}}", "space.model.heads", "heads 3 does not divide width 64"),
    ("space: {model.width: {int: [32, 80]}}", "space.model.width", "heads 4 does not divide width 33"),
    (
        "space: {data.resolution: {choice: [32, 36]}, model.patch_size: {choice: [4, 8]}}",
        "space.model.patch_size",
        "resolution 36 is not divisible by patch_size 8",
    ),
    (
        "space: {model.patch_size: {choice: [4, 8]}}\ntrial: {train: {eval_resolutions: [32, 36]}}",
        "space.model.patch_size",
        "eval_resolutions [32, 36] are not all divisible by patch_size 8",
    ),
    (
        "space: {data.train_resolutions: {choice: [[16, 24], [16, 18]]}}",
        "space.data.train_resolutions",
        "train_resolutions [16, 18] are not all divisible by patch_size 4",
    ),
    ("space: {model: {grid: [{width: 192, heads: 5}]}}", "space.model", "heads 5 does not divide width 192"),
    ("space: {model: {grid: [{widht: 192}]}}", "space.model", "model.widht is not a field"),
    ("space: {model: {choice: [32]}}", "space.model", "is a section"),
    (
        "space: {model.ssog.num_gaussians: {choice: [2, 4]}}",
        "space.model.ssog.num_gaussians",
        "model.mixer is never ssog",
    ),
    ("space: {model.ode.rtol: {choice: [1.0e-3]}}", "space.model.ode.rtol", "model.regime is never ode"),
    (
        "space: {model.attention.backend: {choice: [sdpa, math]}}\ntrial: {model: {mixer: ssog}}",
        "space.model.attention.backend",
        "model.mixer is never attention",
    ),
    (
        "space: {train.lr: {loguniform: [1e-4, 1e-2]}}",
        "space.train.lr",
        "a grid study needs choice, grid or int",
    ),
    ("space: {model.width: {uniform: [32, 64]}}\nsearch: {algorithm: tpe}", "space.model.width", "integer"),
    ("space: {model.mixer: {int: [1, 2]}}\nsearch: {algorithm: tpe}", "space.model.mixer", "choice or grid"),
    ("space: {model.mixer: {choice: [attention, sog]}}", "space.model.mixer", "unknown mixer 'sog'"),
    ("space: {model.width: {choice: [32, 32]}}", "space.model.width.choice", "repeated"),
    ("space: {model.width: {choice: [32], grid: [64]}}", "space.model.width", "exactly one distribution"),
    ("space: {model.width: {int: [8, 1]}}", "space.model.width.int", "above high"),
    ("space: {model.depth: {int: [1, 8], step: 3}}", "space.model.depth.int", "not a multiple of step 3"),
    (
        "space: {train.warmup_epochs: {uniform: [0, 1], step: 0.3}}\nsearch: {algorithm: tpe}",
        "space.train.warmup_epochs.uniform",
        "not a multiple of step 0.3",
    ),
    ("space: {train.lr: {uniform: [0.1, 0.2], log: true}}", "space.train.lr.log", "use loguniform"),
    ("extends: base.yaml", "extends", "resolved when a file is read"),
    (
        "space: {train.lr: {loguniform: [0, 1.0e-2]}}\nsearch: {algorithm: tpe}",
        "space.train.lr.loguniform",
        "> 0",
    ),
    (
        "space: {model.width: {choice: [32], wehn: {model.mixer: ssog}}}",
        "space.model.width.wehn",
        "unknown key",
    ),
    (
        "space: {model.ssog.num_gaussians: {int: [1, 8], when: {model.mixr: ssog}}}",
        "space.model.ssog.num_gaussians.when",
        "model.mixr is neither a space parameter nor a field",
    ),
    (
        "space: {model.ssog.num_gaussians: {int: [1, 8], when: {model.mixer: sog}}}",
        "space.model.ssog.num_gaussians.when.model.mixer",
        "unknown mixer 'sog'",
    ),
    (
        "space: {model.mixer: {choice: [ssog]}, model.ssog.num_gaussians: {choice: [1], when: {model.mixer: attention}}}",
        "space.model.ssog.num_gaussians",
        "never active",
    ),
    (
        "space:\n  model.width: {choice: [32, 64], when: {model.depth: 4}}\n"
        "  model.depth: {choice: [2, 4], when: {model.width: 32}}",
        "space.model.width.when",
        "cycle",
    ),
    ("space: {model.width: {choice: [32], when: {model.width: 32}}}", "space.model.width.when", "itself"),
    (
        "space: {model: {grid: [{width: 32, heads: 2}]}, model.width: {grid: [64]}}",
        "space.model.width",
        "also set by space.model",
    ),
    ("search: {algorithm: tpe}", "space", "needs parameters to search"),
    (
        "space: {model.mixer: {grid: [attention]}}\nsearch: {algorithm: tpe}",
        "space.model.mixer",
        "use choice",
    ),
    ("search: {num_samples: 4}", "search.num_samples", "a grid runs every point"),
    ("search: {seeds: [0, 1, 1]}", "search.seeds", "more than once"),
    (
        "objectives: [{metric: val_top1}, {metric: params, mode: min}]\nscheduler: {type: asha}",
        "scheduler.type",
        "asha stops trials on one metric",
    ),
    ("objectives: [{metric: accuracy}]", "objectives[0].metric", "val_top1"),
    ("objectives: [{metric: val_top1, mode: maximum}]", "objectives[0].mode", "'max' or 'min'"),
    ("objectives: [{metric: val_top1}, {metric: val_top1, mode: min}]", "objectives[1].metric", "already"),
    (
        "scheduler: {type: asha, grace_period: 20}",
        "scheduler.grace_period",
        "exceeds max_t 15",
    ),  # digits recipe: 15 epochs
    ("resources: {cpu: -1}", "resources.cpu", "greater than or equal to 0"),
    ("resources: {gpu: -0.5}", "resources.gpu", "greater than or equal to 0"),
    ("resources: {gpu: 1.5}", "resources.gpu", "whole number"),
    ("trial: {train: {device: cuda}}", "trial.train.device", "resources.gpu > 0"),
    ("resources: {workers: 0}", "resources.workers", "greater than or equal to 1"),
    ("resources: {workers: 2, gpu: 0.5}", "resources.gpu", "a data-parallel worker drives one GPU"),
    ("resources: {workers: 2, gpu: 2}", "resources.gpu", "a data-parallel worker drives one GPU"),
    ("kind: benchmark\nbenchmark: {}\nresources: {workers: 2}", "resources.workers", "times one process"),
    (
        "resources: {workers: 2}\ntrial: {model: {regime: ode}, train: {distill: {teacher: t.pt}}}",
        "resources.workers",
        "distillation trains in one process",
    ),
    ("kind: benchmark", "benchmark", "required for kind: benchmark"),
    ("benchmark: {}", "benchmark", "only for kind: benchmark"),
    (
        "kind: benchmark\nbenchmark: {model: {heads: 5}}",
        "benchmark.model.heads",
        "5 does not divide width 192",
    ),
    ("kind: benchmark\nbenchmark: {heads: 5}", "benchmark.heads", "moved to benchmark.model.heads"),
    ("kind: benchmark\nbenchmark: {resolutions: [224, 100]}", "benchmark.resolutions", "patch_size 16"),
    ("kind: benchmark\nbenchmark: {mixers: [ssog, mamba]}", "benchmark.mixers", "'mamba'"),
    (
        "kind: benchmark\nbenchmark: {}\nobjectives: [{metric: val_top1}]",
        "objectives[0].metric",
        "images_per_second",
    ),
    ("kind: benchmark\nbenchmark: {}\nspace: {model.width: {choice: [32]}}", "space", "remove space"),
]


def _problems(text: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        validate_study(parse(text, "x.yaml"), "x.yaml")
    return info.value.lines


@pytest.mark.parametrize(("body", "key", "message"), MALFORMED, ids=[m[1] + ":" + m[2] for m in MALFORMED])
def test_malformed_spec_names_its_key(body, key, message):
    lines = _problems("name: x\n" + body)
    assert all("\n" not in line for line in lines)
    hits = [line for line in lines if line.startswith(f"x.yaml: {key}: ")]
    assert hits, f"no line for {key}: {lines}"
    assert any(message in line for line in hits), lines


def test_bad_name():
    assert _problems("name: My Study") == [
        "x.yaml: name: 'My Study': use lowercase letters, digits, '-' and '_', starting with a letter or digit"
    ]
    assert _problems("trial: {}") == ["x.yaml: name: required key is missing"]


def test_every_problem_is_reported_together():
    lines = _problems(
        "name: x\n"
        "trial: {train: {epochs: 0}}\n"
        "space: {model.widht: {choice: [32]}, model.heads: {choice: [3]}}\n"
        "objectives: [{metric: accuracy}]\n"
        "resources: {cpu: -1}\n"
        "colour: blue\n"
    )
    keys = [line.split(": ")[1] for line in lines]
    assert keys == [
        "trial.train.epochs",
        "resources.cpu",
        "colour",
        "objectives[0].metric",
        "space.model.widht",
    ], lines


def test_rules_that_do_not_read_a_broken_trial_still_run():
    lines = _problems(
        "name: x\ntrial: {model: {heads: 5}}\n"
        "space: {train.lr: {uniform: [0.1, 0.2]}, model.ssog.num_gaussians: {choice: [2]}}\n"
        "objectives: [{metric: val_top1}, {metric: params, mode: min}]\nscheduler: {type: asha}\n"
    )
    # The num_gaussians guard needs the base trial (which mixer?): skipped, not guessed.
    assert [line.split(": ")[1] for line in lines] == [
        "trial.model.heads",
        "scheduler.type",
        "space.train.lr",
    ]


def test_rules_reading_a_broken_parameter_are_skipped():
    # width is unknown (broken), so heads 3 is not judged against the base width 64.
    lines = _problems("name: x\nspace: {model.width: {int: [8, 1]}, model.heads: {choice: [3]}}")
    assert [line.split(": ")[1] for line in lines] == ["space.model.width.int"]


def test_valid_parameters_are_still_checked_beside_broken_ones():
    lines = _problems("name: x\nspace: {model.width: {choice: [30]}, model.depth: {int: [3, 1]}}")
    assert [line.split(": ")[1] for line in lines] == ["space.model.depth.int", "space.model.width"]


# Problems found while reading files: YAML syntax, extends, include.
def test_malformed_yaml_reports_line_and_column(write):
    path = write("bad.yaml", "name: x\ntrial:\n  model: {width: 64\n  data: {}\n")
    with pytest.raises(SpecError) as info:
        load_study(path)
    (line,) = info.value.lines
    assert line.startswith(f"{path}: line 4, column 7: invalid YAML")


def test_duplicate_key_is_an_error(write):
    path = write("dup.yaml", "name: x\ntrial:\n  model:\n    width: 64\n    width: 32\n")
    with pytest.raises(
        SpecError, match=r"line 5, column 5: invalid YAML: duplicate key 'width' \(first at line 4\)"
    ):
        load_study(path)


def test_a_study_must_be_a_mapping(write):
    with pytest.raises(SpecError, match="a study file is a mapping of keys, not a list"):
        load_study(write("list.yaml", "- a\n- b\n"))


def test_extends_cycle(write):
    write("a.yaml", "name: a\nextends: b.yaml\n")
    path = write("b.yaml", "name: b\nextends: a.yaml\n")
    with pytest.raises(SpecError) as info:
        load_study(path)
    (line,) = info.value.lines
    assert "extends: cycle" in line and line.endswith("b.yaml")


def test_extends_missing_file(write):
    with pytest.raises(SpecError, match=r"c.yaml: extends: file not found: .*nope.yaml"):
        load_study(write("c.yaml", "name: c\nextends: nope.yaml\n"))


def test_extending_study_needs_its_own_name(write):
    write("base.yaml", "name: base\n")
    with pytest.raises(SpecError, match="name: required: a study that extends another needs its own name"):
        load_study(write("child.yaml", "extends: base.yaml\n"))


def test_include_missing_file_and_cycle(write):
    with pytest.raises(SpecError, match=r"space.include: file not found"):
        load_study(write("s.yaml", "name: s\nspace: {include: nope.yaml}\n"))
    write("p.yaml", "include: q.yaml\nmodel.width: {choice: [32]}\n")
    write("q.yaml", "include: p.yaml\n")
    with pytest.raises(SpecError, match=r"include cycle"):
        load_study(write("t.yaml", "name: t\nspace: {include: p.yaml}\n"))


def test_errors_in_a_base_are_reported_for_the_loaded_file(write):
    write("base.yaml", "name: base\ntrial: {model: {heads: 3}}\n")
    with pytest.raises(SpecError) as info:
        load_study(write("child.yaml", "name: child\nextends: base.yaml\n"))
    assert info.value.lines == [
        f"{info.value.lines[0].split(':')[0]}: trial.model.heads: 3 does not divide width 64"
    ]
