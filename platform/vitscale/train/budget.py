"""How long a trial trains: its epochs, or the epochs and steps a FLOP budget buys.

An isoFLOP study (Hoffmann et al. 2022, approach 2) trains every model size at the same training
compute C, so a size costing f FLOPs per training image sees C / f images: the small ones pass
over the data many times, the large ones perhaps not once. `train.train_flops` says C; this file
turns it into whole batches, then into passes over the training set (the last one partial), and
the lr schedule spans exactly those steps, so each size ends its schedule at its own budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class TrainingPlan:
    """`epochs` passes over the training set, of `steps_per_epoch` batches each but the last,
    which has `last_epoch_steps` (all of them unless a budget ends it early)."""

    epochs: int
    steps_per_epoch: int
    last_epoch_steps: int

    @property
    def total_steps(self) -> int:
        return (self.epochs - 1) * self.steps_per_epoch + self.last_epoch_steps

    def steps_in(self, epoch: int) -> int:
        """The batches epoch `epoch` (1-based) trains on."""
        return self.last_epoch_steps if epoch == self.epochs else self.steps_per_epoch


def epochs_plan(epochs: int, steps_per_epoch: int) -> TrainingPlan:
    """`train.epochs` whole passes."""
    return TrainingPlan(epochs=epochs, steps_per_epoch=steps_per_epoch, last_epoch_steps=steps_per_epoch)


def budget_plan(
    train_flops: float, flops_per_image: float, batch_size: int, steps_per_epoch: int
) -> TrainingPlan:
    """The whole batches that spend `train_flops` at `flops_per_image` (rounded to the nearest
    batch, at least one), laid out as passes of `steps_per_epoch` batches."""
    steps = max(1, round(train_flops / (flops_per_image * batch_size)))
    epochs = math.ceil(steps / steps_per_epoch)
    return TrainingPlan(
        epochs=epochs,
        steps_per_epoch=steps_per_epoch,
        last_epoch_steps=steps - (epochs - 1) * steps_per_epoch,
    )
