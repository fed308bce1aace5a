"""Low-fidelity tuning confirmed at full fidelity (`search.confirm`): the key and its checks, the
confirmation study and the planned trials, the choice from the confirmation runs with Spearman's ρ,
the record `study show` prints (each arm, its rank transfer, its tuned values at a range's edge),
and (slow) a tiny comparison on digits run through the real CLI, analysed and resumed."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
from study_helpers import TINY_TRIAL, child_runs, parent_runs, vitscale, write_study

from vitscale.cli import main
from vitscale.study import SpecError, count_trials, load_study
from vitscale.study.comparison import arm_list, arm_study, confirm_study, confirm_top_k, final_study
from vitscale.study.plan import planned_trials
from vitscale.study.schema import study_schema
from vitscale.tracking import layout
from vitscale.tune.comparison_record import record_lines
from vitscale.tune.confirmation import confirmed_choice, describe_confirmation, samples, top_points
from vitscale.tune.execution_files import LATEST_FILE, write_state
from vitscale.tune.selection import ArmChoice, choose

ROOT = Path(__file__).resolve().parents[2]
FIDELITY = {"data.num_train": 96, "train.epochs": 1}
COMPARISON = {
    "kind": "comparison",
    "arms": {"model.mixer": ["attention", "ssog"]},
    "reference": {"model.mixer": "attention"},
    "space": {"train.lr": {"loguniform": [1.0e-3, 1.0e-2]}},
    "search": {"algorithm": "random", "num_samples": 4, "seeds": [0, 1], "fidelity": FIDELITY},
    "final": {"seeds": [100]},
}


def _study(tmp_path, **search):
    data = {**COMPARISON, "search": {**COMPARISON["search"], **search}}
    return load_study(write_study(tmp_path, "cmp", **data))


# --- the key -------------------------------------------------------------------------------------


def test_a_fidelity_brings_a_confirmation_of_three_points_per_arm_by_default(tmp_path):
    spec = _study(tmp_path)
    assert spec.search.confirm.top_k == 3 and confirm_top_k(spec) == 3
    assert planned_trials(spec) == (2 * 4 * 2, 2 * 3, 2 * 1)
    assert count_trials(spec) == 16 + 6 + 2
    off = _study(tmp_path, confirm={"top_k": 0})
    assert confirm_top_k(off) == 0 and planned_trials(off).confirmation == 0
    full = _study(tmp_path, fidelity=None)  # no fidelity: nothing to confirm, as before
    assert full.search.confirm is None and confirm_top_k(full) == 0 and count_trials(full) == 16 + 2


def test_an_arm_with_fewer_points_than_top_k_plans_to_confirm_those(tmp_path):
    spec = _study(tmp_path, num_samples=2, confirm={"top_k": 5})
    assert planned_trials(spec).confirmation == 2 * 2


@pytest.mark.parametrize(
    ("search", "key", "words"),
    [
        ({"confirm": {"top_k": 2}}, "search.confirm.top_k", "give 0 (off) or 3 or more"),
        ({"confirm": {"top_k": -1}}, "search.confirm.top_k", "greater than or equal to 0"),
        ({"confirm": {"top": 3}}, "search.confirm.top", "did you mean 'top_k'"),
        ({"fidelity": None, "confirm": {"top_k": 3}}, "search.confirm", "set search.fidelity"),
    ],
)
def test_a_confirmation_that_cannot_work_is_one_line_naming_the_key(tmp_path, search, key, words):
    with pytest.raises(SpecError) as err:
        _study(tmp_path, **search)
    lines = [line for line in err.value.lines if f": {key}: " in line]
    assert len(lines) == 1 and words in lines[0], err.value.lines


def test_confirm_outside_a_comparison_is_refused(tmp_path):
    path = write_study(tmp_path, "plain", search={"algorithm": "random", "num_samples": 2, "confirm": {}})
    with pytest.raises(SpecError) as err:
        load_study(path)
    assert any(": search.confirm: only for kind: comparison" in line for line in err.value.lines)


def test_the_schema_documents_the_key():
    confirm = study_schema()["$defs"]["ConfirmConfig"]["properties"]["top_k"]
    assert confirm["default"] == 3 and "full fidelity" in confirm["description"]


def test_every_shipped_study_still_validates_and_the_fidelity_ones_confirm():
    """Confirmation is the default of a fidelity study; a shipped file turns it off only in so
    many words (`confirm: {top_k: 0}`, fashion_converged: it would double the study's time)."""
    for path in sorted((ROOT / "studies").glob("*.yaml")):
        spec = load_study(path)
        if spec.search.fidelity and not spec.tuned_from:
            opted_out = "confirm: {top_k: 0}" in path.read_text()
            assert confirm_top_k(spec) == (0 if opted_out else 3), path


# --- the confirmation study ------------------------------------------------------------------


def test_the_confirmation_study_is_the_arm_at_full_fidelity_on_the_first_tuning_seed(tmp_path):
    data = {**COMPARISON, "scheduler": {"type": "asha", "grace_period": 1}}
    spec = load_study(write_study(tmp_path, "cmp", **data))  # tuning stops poor trials early
    arm = arm_list(spec)[1]
    tuning, confirming = arm_study(spec, arm), confirm_study(spec, arm)
    assert tuning.trial.data.num_train == 96 and tuning.trial.train.epochs == 1
    assert tuning.scheduler.type == "asha"
    assert confirming.trial.data.num_train == final_study(spec).trial.data.num_train == 192
    assert confirming.trial.train.epochs == 2 and confirming.trial.model.mixer == "ssog"
    assert confirming.search.seeds == [0] and confirming.scheduler.type == "fifo"
    assert (
        confirming.kind == "train" and confirming.search.confirm is None and confirming.space == tuning.space
    )
    assert not set(confirming.search.seeds) & set(spec.final.seeds)


# --- the choice ------------------------------------------------------------------------------------


def _result(point, seed, value, *, sample=None, epoch=2, planned=2, reason=""):
    metrics = {"val_top1": value, "epoch": epoch, "planned_epochs": planned, "failure_reason": reason}
    config = {"point": point, "seed": seed, **({"sample": sample} if sample is not None else {})}
    return SimpleNamespace(config=config, metrics=metrics, error=None)


P = [{"train.lr": lr} for lr in (1e-3, 2e-3, 3e-3, 4e-3, 5e-3)]


def _low() -> ArmChoice:
    """Low fidelity ranks P[2] > P[0] > P[1] > P[3] (means over seeds 0, 1); P[4] failed."""
    means = {0: 0.60, 1: 0.55, 2: 0.70, 3: 0.40}
    results = [_result(P[i], s, m, sample=i) for i, m in means.items() for s in (0, 1)]
    results += [_result(P[4], 0, 0.99, sample=4, reason="diverged"), _result(P[4], 1, 0.99, sample=4)]
    return choose(results, "model.mixer=ssog", {"model.mixer": "ssog"}, [0, 1], "val_top1", "max")


def test_the_top_points_are_the_best_qualified_ones_in_order():
    low = _low()
    assert low.point == P[2] and low.qualified_points == 4
    top = top_points(low, 3, "max")
    assert [t["point"] for t in top] == [P[2], P[0], P[1]] and [t["sample"] for t in top] == [2, 0, 1]
    assert [t["point"] for t in top_points(low, 3, "min")] == [P[3], P[1], P[0]]


def test_the_choice_comes_from_full_fidelity_with_the_rank_correlation():
    low = _low()
    top = top_points(low, 3, "max")
    full = [_result(P[2], 0, 0.80), _result(P[0], 0, 0.90), _result(P[1], 0, 0.70)]
    choice = confirmed_choice(
        low, full, top=top, top_k=3, seed=0, metric="val_top1", mode="max", fidelity=FIDELITY
    )
    assert choice.point == P[0] and choice.score == pytest.approx(0.90)  # not the low-fidelity winner
    c = choice.confirmation
    assert c["changed"] and c["low_fidelity_point"] == P[2] and c["n"] == 3
    assert c["rho"] == pytest.approx(0.5)  # low ranks 1, 2, 3 -> full ranks 2, 1, 3
    assert [(p["low_rank"], p["full_score"], p["chosen"]) for p in c["points"]] == [
        (1, 0.80, False),
        (2, 0.90, True),
        (3, 0.70, False),
    ]
    assert choice.scores == low.scores and choice.tuning_trials == low.tuning_trials  # the tuning record
    assert ArmChoice.from_json(json.loads(json.dumps(choice.to_json()))) == choice


def test_a_failed_or_short_confirmation_run_does_not_qualify_and_rho_needs_three():
    low = _low()
    top = top_points(low, 3, "max")
    full = [
        _result(P[2], 0, 0.99, reason="diverged"),
        _result(P[0], 0, 0.95, epoch=1),  # stopped short of its planned epochs
        _result(P[1], 0, 0.70),
    ]
    choice = confirmed_choice(
        low, full, top=top, top_k=3, seed=0, metric="val_top1", mode="max", fidelity=FIDELITY
    )
    assert choice.point == P[1]
    c = choice.confirmation
    assert c["rho"] is None and c["n"] == 1 and c["rho_note"] == "n = 1 < 3"
    assert "2 of 3 confirmation runs did not qualify" in c["note"]


def test_fewer_qualified_points_than_top_k_are_confirmed_and_said_so():
    low = _low()
    top = top_points(low, 6, "max")
    assert len(top) == 4
    full = [_result(t["point"], 0, 0.5 + 0.1 * i) for i, t in enumerate(top)]
    choice = confirmed_choice(
        low, full, top=top, top_k=6, seed=0, metric="val_top1", mode="max", fidelity=FIDELITY
    )
    c = choice.confirmation
    assert c["confirmed"] == 4 and "only 4 of top_k 6 points qualified in tuning" in c["note"]
    assert c["rho"] == pytest.approx(-1.0) and choice.point == top[-1]["point"]


def test_nothing_qualifying_at_full_fidelity_leaves_the_arm_without_a_configuration():
    low = _low()
    top = top_points(low, 3, "max")
    full = [_result(t["point"], 0, 0.9, reason="out_of_memory") for t in top]
    choice = confirmed_choice(
        low, full, top=top, top_k=3, seed=0, metric="val_top1", mode="max", fidelity=FIDELITY
    )
    assert choice.point is None and not choice.confirmation["changed"]
    assert "no confirmation run qualified" in choice.confirmation["note"]


def test_a_confirmation_run_keeps_its_tuning_number_in_its_name(tmp_path):
    spec = _study(tmp_path)
    phase_spec = confirm_study(spec, arm_list(spec)[1])
    top = top_points(_low(), 3, "max")
    described = describe_confirmation({"point": P[2], "seed": 0}, phase_spec, samples(top))
    assert described.run_name == "#2 · s0"
    assert describe_confirmation({"point": P[0], "seed": 0}, phase_spec, {}).run_name.endswith("s0")


# --- what study show reads after a run ---------------------------------------------------------


def test_study_show_prints_each_arms_choice_transfer_and_edges(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    path = write_study(tmp_path, "cmp", **COMPARISON)
    folder = tmp_path / "ray_results" / "cmp" / "20260101-120000"
    folder.mkdir(parents=True)
    (folder.parent / LATEST_FILE).write_text(folder.name)
    low = _low()
    top = top_points(low, 3, "max")
    full = [_result(P[2], 0, 0.80), _result(P[0], 0, 0.90), _result(P[1], 0, 0.70)]
    ssog = confirmed_choice(low, full, top=top, top_k=3, seed=0, metric="val_top1", mode="max", fidelity=None)
    ssog.edges = [
        {"key": "train.lr", "value": 9.9e-3, "side": "upper", "bound": 1e-2, "text": "train.lr=9.9e-3 x"}
    ]
    attention = ArmChoice(
        "model.mixer=attention", {"model.mixer": "attention"}, {"train.lr": 3e-3}, 0.8, 8, 4
    )
    record = {"choices": {c.arm: c.to_json() for c in (attention, ssog)}, "final_done": True}
    write_state(folder / "comparison.json", record)
    lines = record_lines(load_study(path))
    assert lines[0].startswith(f"latest execution {folder}") and "final phase done" in lines[0]
    assert "tuned: ssog: lr=1e-3 (validation 0.9 at full fidelity; low → full fidelity ρ = 0.50, n = 3; " in (
        "\n".join(lines)
    )
    assert any("ρ = 0.50, n = 3; the choice changed" in line for line in lines), lines
    assert "edge: ssog train.lr=9.9e-3 x" in lines
    main(["study", "show", str(path)])
    out = capsys.readouterr().out
    assert "# edge: ssog train.lr=9.9e-3 x" in out and "# tuned: attention: lr=3e-3" in out


def test_study_show_of_a_comparison_that_never_ran_prints_no_record(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert record_lines(load_study(write_study(tmp_path, "cmp", **COMPARISON))) == []


# --- end to end --------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_tiny_comparison_confirms_its_top_points_at_full_fidelity_end_to_end(tmp_path):
    """digits, width 16: 2 arms x (3 tuning trials at 1 epoch + 3 confirmation runs + 1 final run at 3
    epochs)."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    results = tmp_path / "results"
    trial = json.loads(json.dumps(TINY_TRIAL))
    trial["train"]["epochs"] = 3  # full fidelity: enough to leave chance, so the scores differ
    study = write_study(
        tmp_path,
        "cmp-confirm",
        kind="comparison",
        trial=trial,
        arms={"model.mixer": ["attention", "ssog"]},
        reference={"model.mixer": "attention"},
        # batch_size has two values, both ends of its range: every arm's choice is at an edge
        space={"train.lr": {"loguniform": [1.0e-3, 3.0e-2]}, "train.batch_size": {"int": [63, 64]}},
        search={
            "algorithm": "random",
            "num_samples": 3,
            "seeds": [0],
            "max_concurrent_trials": 2,
            "fidelity": {"train.epochs": 1},
            "confirm": {"top_k": 3},
        },
        final={"seeds": [100]},
    )
    common = ["--tracking-uri", uri, "--storage", str(results), "--num-cpus", "2"]
    proc = vitscale("study", "run", str(study), *common, "--quiet", cwd=tmp_path, timeout=500)
    assert "confirm arm 1/2 attention" in proc.stdout and "confirm arm 2/2 ssog" in proc.stdout

    runs = child_runs(uri, "cmp-confirm")
    phases = Counter((r.data.tags[layout.PHASE], r.data.tags[layout.ARM]) for r in runs)
    assert phases == {
        (phase, f"model.mixer={mixer}"): n
        for mixer in ("attention", "ssog")
        for phase, n in (("tune", 3), ("confirm", 3), ("final", 1))
    }
    confirm_runs = [r for r in runs if r.data.tags[layout.PHASE] == "confirm"]
    tune_runs = [r for r in runs if r.data.tags[layout.PHASE] == "tune"]
    assert {r.data.params["train.epochs"] for r in tune_runs} == {"1"}  # low fidelity
    assert {r.data.params["train.epochs"] for r in confirm_runs} == {"3"}  # full fidelity
    assert {r.data.params["train.seed"] for r in confirm_runs} == {"0"}  # the first tuning seed
    assert all(r.info.run_name.startswith("confirm · ") and " · #" in r.info.run_name for r in confirm_runs)

    [parent] = parent_runs(uri, "cmp-confirm")
    transfer = json.loads(parent.data.tags[layout.RANK_TRANSFER])
    assert set(transfer) == {"model.mixer=attention", "model.mixer=ssog"}
    assert all(t["n"] == 3 and t["confirmed"] == 3 for t in transfer.values())
    assert "arm/ssog/rank_transfer_n" in parent.data.metrics
    execution = next(p for p in (results / "cmp-confirm").iterdir() if p.is_dir())
    record = json.loads((execution / "comparison.json").read_text())
    for key, choice in record["choices"].items():
        c = choice["confirmation"]
        chosen = next(p for p in c["points"] if p["chosen"])
        assert choice["point"] == chosen["point"] and choice["score"] == chosen["full_score"]
        assert chosen["full_score"] == max(p["full_score"] for p in c["points"])  # chosen at full fidelity
        assert c["n"] == 3 and (c["rho"] is not None and -1 <= c["rho"] <= 1 or c["rho_note"])
        assert "train.batch_size" in [e["key"] for e in choice["edges"]], key
        final = [r for r in runs if r.data.tags[layout.PHASE] == "final" and r.data.tags[layout.ARM] == key]
        assert float(final[0].data.params["train.lr"]) == pytest.approx(choice["point"]["train.lr"])

    show = vitscale("study", "show", str(study), "--set", f"storage={results}", cwd=tmp_path)
    assert (
        "# edge: attention train.batch_size=" in show.stdout
        and "# edge: ssog train.batch_size=" in show.stdout
    )
    assert "low → full fidelity ρ" in show.stdout

    report = tmp_path / "report"
    vitscale("analyze", "cmp-confirm", "--tracking-uri", uri, "--out", str(report), cwd=tmp_path)
    text = (report / "report.md").read_text()
    assert "## Does the low-fidelity ranking transfer?" in text, text
    assert "| low-fi rank | configuration | low-fi val_top1 | full-fi val_top1 | chosen |" in text
    assert "**attention** — ρ" in text and "**ssog** — ρ" in text and "✓" in text
    assert "(6 tuning, 6 confirmation, 2 final)" in text
    assert re.search(r"⚠ train\.batch_size=6[34] within 5% of (lower|upper) edge 6[34]", text)
    assert (report / "transfer.csv").is_file()

    # A driver killed after the confirmations: the record lost ssog's choice but kept its tuning.
    record["choices"].pop("model.mixer=ssog")
    record["final_done"] = False
    record["low_fidelity"] = {"model.mixer=ssog": {**record["low_fidelity"]["model.mixer=ssog"]}}
    (execution / "comparison.json").write_text(json.dumps(record))
    vitscale(
        "study",
        "resume",
        "cmp-confirm",
        "--storage",
        str(results),
        "--num-cpus",
        "2",
        "--quiet",
        cwd=tmp_path,
    )
    again = child_runs(uri, "cmp-confirm")
    assert len(again) == len(runs)  # tuning skipped, confirmation and final restored, nothing re-run
    resumed = json.loads((execution / "comparison.json").read_text())
    assert resumed["choices"]["model.mixer=ssog"]["confirmation"]["n"] == 3 and resumed["final_done"]
