"""Hyperparameters that change between epochs: which may, and the schedule a trial lived.

Population-based training (PBT, PB2) changes a member's values while it trains: a member that
exploits another continues from that member's checkpoint with new values. Only values a trained
model can carry on with may change: the peak learning rate (the warmup-cosine factor goes on, the
peak moves), weight decay, label smoothing and gradient clipping (`SCHEDULABLE`); the model, data
and length of a trial cannot.

A schedule is a list of steps `{epoch, values, cloned_from?}`: from `epoch` on, `values` hold.
`train.schedule` replays one from epoch 1 (the final phase re-runs a member's schedule at fresh
seeds); the trainer records the schedule it lived in every checkpoint, so a member that exploited
another carries that member's past (its steps) and adds its own from the epoch it continued at.
No torch here: the study format reads these names without it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

# dotted trial path -> the TrainConfig field it sets
SCHEDULABLE: dict[str, str] = {
    "train.lr": "lr",
    "train.weight_decay": "weight_decay",
    "train.label_smoothing": "label_smoothing",
    "train.grad_clip": "grad_clip",
}


class ScheduleStep(BaseModel):
    """From `epoch` on (1-based), the trial trains with `values`."""

    model_config = ConfigDict(extra="forbid")

    epoch: int = Field(ge=1, description="the first epoch these values hold for")
    values: dict[str, float | None] = Field(
        description=f"values from this epoch on, keyed by dotted trial path ({', '.join(SCHEDULABLE)})"
    )
    cloned_from: str | None = Field(
        None, description="recorded only: the member (trial id) whose checkpoint training continued from"
    )

    @field_validator("values")
    @classmethod
    def _schedulable(cls, values: dict[str, float | None]) -> dict[str, float | None]:
        unknown = sorted(set(values) - set(SCHEDULABLE))
        if unknown:
            raise ValueError(
                f"{', '.join(unknown)}: cannot change while a trial trains; give {', '.join(SCHEDULABLE)}"
            )
        return values


def values_of(train_config) -> dict[str, Any]:
    """The SCHEDULABLE values of a (resolved) TrainConfig."""
    return {key: getattr(train_config, field) for key, field in SCHEDULABLE.items()}


def values_at(base: dict[str, Any], steps: list[ScheduleStep] | None, epoch: int) -> dict[str, Any]:
    """The values in force at `epoch`: `base`, then every step that began by then, in order."""
    values = dict(base)
    for step in sorted(steps or (), key=lambda s: s.epoch):
        if step.epoch <= epoch:
            values.update(step.values)
    return values


def record_step(
    lived: list[dict[str, Any]], epoch: int, values: dict[str, Any], cloned_from: str | None = None
) -> bool:
    """Append a step to the schedule `lived` (plain dicts, as checkpoints hold it) when `values`
    differ from the last step's, or training continued from another member's checkpoint
    (`cloned_from`); True when one was appended."""
    if lived and lived[-1]["values"] == values and cloned_from is None:
        return False
    step: dict[str, Any] = {"epoch": epoch, "values": dict(values)}
    if cloned_from is not None:
        step["cloned_from"] = cloned_from
    lived.append(step)
    return True


def apply_values(optimizer, scheduler, values: dict[str, Any]) -> None:
    """Set a running optimiser to `values`: each parameter group's peak lr is `train.lr` times the
    group's scale (`train.optimizer`), the schedule's factor at its current step kept; weight decay
    on the groups that decay. Label smoothing and clipping are read by the loop each step."""
    lr, decay = values["train.lr"], values["train.weight_decay"]
    for i, group in enumerate(optimizer.param_groups):
        base = lr * group["lr_scale"]
        group["initial_lr"] = base
        scheduler.base_lrs[i] = base
        group["lr"] = base * scheduler.lr_lambdas[i](scheduler.last_epoch)
        if group["decays"]:
            group["weight_decay"] = decay
