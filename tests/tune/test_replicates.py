"""ReplicatedSearcher: one sampled point per seed group; the sampler hears the seed mean once."""

from __future__ import annotations

import math

from ray.tune.search import Searcher

from vitscale.tune.replicates import ReplicatedSearcher


class RecordingSearcher(Searcher):
    def __init__(self) -> None:
        super().__init__(metric="val_top1", mode="max")
        self.asked = 0
        self.told: list[tuple[str, dict | None, bool]] = []

    def suggest(self, trial_id):
        self.asked += 1
        return {"point": {"model.width": 16 * self.asked}}

    def on_trial_complete(self, trial_id, result=None, error=False):
        self.told.append((trial_id, result, error))


def test_each_point_runs_once_per_seed_and_the_mean_is_told_once(tmp_path):
    inner = RecordingSearcher()
    searcher = ReplicatedSearcher(inner, seeds=[0, 1, 2], metrics=["val_top1"], modes=["max"])
    configs = [searcher.suggest(f"t{i}") for i in range(6)]
    assert [c["seed"] for c in configs] == [0, 1, 2, 0, 1, 2]
    assert [c["point"]["model.width"] for c in configs] == [16, 16, 16, 32, 32, 32]
    assert inner.asked == 2
    searcher.on_trial_complete("t0", {"val_top1": 0.5, "failure_reason": ""})
    searcher.on_trial_complete("t1", {"val_top1": 0.7, "failure_reason": ""})
    assert inner.told == []  # the third replicate is still running
    searcher.on_trial_complete("t2", {"val_top1": 0.9, "failure_reason": ""})
    [(trial_id, result, error)] = inner.told
    assert trial_id == "t0" and not error and math.isclose(result["val_top1"], 0.7)


def test_failed_replicates_are_left_out_and_an_all_failed_point_is_an_error(tmp_path):
    inner = RecordingSearcher()
    searcher = ReplicatedSearcher(inner, seeds=[0, 1], metrics=["val_top1"], modes=["max"])
    for i in range(4):
        searcher.suggest(f"t{i}")
    searcher.on_trial_complete("t0", {"val_top1": math.nan, "failure_reason": "diverged"})
    searcher.on_trial_complete("t1", {"val_top1": 0.8, "failure_reason": ""})
    searcher.on_trial_complete("t2", None, error=True)
    searcher.on_trial_complete("t3", {"val_top1": math.nan, "failure_reason": "solver_error"})
    assert inner.told[0][1]["val_top1"] == 0.8 and inner.told[0][2] is False
    assert inner.told[1] == ("t2", None, True)


def test_state_survives_save_and_restore(tmp_path):
    searcher = ReplicatedSearcher(RecordingSearcher(), seeds=[0, 1], metrics=["val_top1"], modes=["max"])
    searcher.suggest("t0")
    searcher.save(str(tmp_path / "s.pkl"))
    restored = ReplicatedSearcher(RecordingSearcher(), seeds=[0, 1], metrics=["val_top1"], modes=["max"])
    restored.restore(str(tmp_path / "s.pkl"))
    assert restored.suggest("t1") == {"point": {"model.width": 16}, "seed": 1}  # the open group goes on
