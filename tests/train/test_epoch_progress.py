"""The progress bar of `vitscale train`: each epoch's bar ends at that epoch's own step count."""

from __future__ import annotations

from vitscale.train.budget import budget_plan
from vitscale.train.progress import EpochProgress


def test_a_flop_budgets_partial_last_epoch_has_a_bar_of_its_own_length():
    plan = budget_plan(train_flops=23 * 8 * 1e6, flops_per_image=1e6, batch_size=8, steps_per_epoch=10)
    assert (plan.epochs, plan.last_epoch_steps) == (3, 3)
    totals = []
    with EpochProgress(enabled=True, plan=plan) as bar:
        for epoch in range(1, plan.epochs + 1):
            bar.begin(epoch)
            totals.append(bar._progress.tasks[-1].total)
            bar._progress.update(bar._task, completed=plan.steps_in(epoch))
            bar._task = None
    assert totals == [10, 10, 3]
