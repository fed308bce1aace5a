"""`fit`: one trial's training loop, usable alone (`vitscale train`) or inside a Ray Tune trial.

Data stays on the device as uint8 and is augmented there per batch (vitscale.data), so the loop
has no DataLoader. Each epoch ends with an evaluation, an atomic checkpoint and one `report`
call; resuming from a checkpoint continues bit-for-bit on CPU.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from vitscale import data as vdata
from vitscale import openmp
from vitscale.device import resolve_device
from vitscale.errors import TrialDiverged, TrialOutOfMemory, UserError
from vitscale.models import build
from vitscale.models.config import ModelConfig
from vitscale.models.measure import count_params
from vitscale.models.regions import compile_regions
from vitscale.precision import autocast as precision_autocast
from vitscale.tracking.layout import CURVE_TEST_TOP1, RESULT_PLANNED_EPOCHS, RESULT_SCHEDULE
from vitscale.tracking.predictions import PREDICTIONS_ARTIFACT, write_predictions
from vitscale.train.budget import budget_plan, epochs_plan
from vitscale.train.checkpoint import (
    TrainState,
    capture_rng,
    find_checkpoint,
    load_checkpoint,
    restore_rng,
    save_checkpoint,
)
from vitscale.train.config import TrialConfig
from vitscale.train.cost import CostMeter
from vitscale.train.distill import EpochDistillStats, make_distiller
from vitscale.train.distributed import ONE_PROCESS, Distributed
from vitscale.train.evaluate import did_not_train, evaluate, split_predictions
from vitscale.train.hyper_schedule import apply_values, record_step, values_at, values_of
from vitscale.train.optimizer import make_optimizer
from vitscale.train.progress import EpochProgress
from vitscale.train.resolution_eval import evaluate_at_resolutions
from vitscale.train.schedule import warmup_cosine
from vitscale.train.served_model import save_served_model

ReportFn = Callable[[dict[str, float], Path | None], None]
FINITE_CHECK_EVERY = 25  # steps between checks that the loss stayed finite


@dataclass
class FitResult:
    """The final epoch's metrics, every epoch's metrics, and the model as it was built."""

    metrics: dict[str, float]
    history: list[dict[str, float]] = field(default_factory=list)
    model_config: ModelConfig | None = None
    checkpoint: Path | None = None
    predictions: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)  # "test", "test@56" -> arrays


def with_threads(config: TrialConfig, threads: int | None = None) -> TrialConfig:
    """`train.threads` decided, as a run uses and logs it: as set, else `threads`, else torch's
    count in this process (`OMP_NUM_THREADS` where set, else its cores). A study trial's is already
    set: its CPUs (`study.resolve.run_trial`)."""
    chosen = config.train.threads or threads or torch.get_num_threads()
    return config.model_copy(update={"train": config.train.model_copy(update={"threads": chosen})})


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def trial_model_config(config: TrialConfig, bundle: vdata.DataBundle) -> ModelConfig:
    """The model as the data dictates it: classes, channels and resolution come from the data set."""
    return ModelConfig.model_validate(
        {
            **config.model.model_dump(),
            "num_classes": bundle.num_classes,
            "in_chans": bundle.in_chans,
            "image_size": config.data.resolution,
        }
    )


def fit(
    config: TrialConfig,
    report: ReportFn | None = None,
    checkpoint_dir: str | Path | None = None,
    resume_from: str | Path | None = None,
    show_progress: bool = False,
    distributed: Distributed = ONE_PROCESS,
    on_start: Callable[[], None] | None = None,
    continued_from: str | None = None,
) -> FitResult:
    """Train one trial. Raises TrialDiverged / SolverError / TrialOutOfMemory (all TrialFailure).

    `checkpoint_dir`: where each epoch's checkpoint is written (and, if it already holds one and
    `resume_from` is not given, where training resumes from). `report(metrics, checkpoint_dir)`
    is called after every epoch, once the checkpoint is safely on disk. `distributed`: this
    process's place in a data-parallel trial (train.distributed): every worker calls `fit` with
    the same config and resumes from the same checkpoint; rank 0 alone writes files, and its
    `report` gets the checkpoint folder (the others get None).
    `on_start()` is called once the data is loaded and the model, optimiser and checkpoint are
    ready, before anything is reported: a caller that records the trial (`vitscale train`'s MLflow
    run) starts it there, so a trial its data or teacher refuses leaves no record behind.
    `continued_from`: `resume_from` is another trial's checkpoint (a PBT member exploiting that
    one, named so): this trial goes on from its weights with its own values (`train.lr`, ...),
    and the schedule it reports (`RESULT_SCHEDULE`) says so.
    """
    device = distributed.device or resolve_device(config.train.device, "train.device")
    config = config.resolved().with_precision(device.type)  # as the checkpoint records it
    train_cfg = config.train
    threads = with_threads(config).train.threads
    torch.set_num_threads(threads)
    seed_everything(train_cfg.seed)

    bundle = vdata.load(config.data, device)
    model_config = trial_model_config(config, bundle)
    model = build(model_config).to(device)
    params = count_params(model)
    cost = CostMeter(model, config.data.resolution, config.data.train_resolutions)
    wrapped = distributed.wrap(model)  # DDP in a data-parallel trial, else the model itself
    # regional compile (`models.regions`): the regime's stack, or one ODE field evaluation
    runner = compile_regions(wrapped) if train_cfg.compile else wrapped

    batch_size = min(train_cfg.batch_size, len(bundle.train_labels))  # global: every worker's shard together
    if batch_size < distributed.world_size:
        raise UserError(
            f"train.batch_size: {batch_size} images per step cannot be shared by {distributed.world_size} "
            "workers; raise it or lower resources.workers"
        )
    steps_per_epoch = vdata.num_train_batches(bundle, batch_size)
    plan = (  # train.epochs, or the steps train.train_flops buys
        epochs_plan(train_cfg.epochs, steps_per_epoch)
        if train_cfg.train_flops is None
        else budget_plan(train_cfg.train_flops, cost.training_flops_per_image(), batch_size, steps_per_epoch)
    )
    optimizer = make_optimizer(model, train_cfg)
    scheduler = warmup_cosine(
        optimizer,
        total_steps=plan.total_steps,
        warmup_steps=round(steps_per_epoch * train_cfg.warmup_epochs),
        min_lr_ratio=train_cfg.min_lr_ratio,
    )
    generator = vdata.make_generator(bundle, train_cfg.seed)
    distiller = make_distiller(
        train_cfg.distill, model_config, config.data.resolution, device, plan.total_steps
    )
    if distiller is not None and distributed.active:  # it runs the bare model, past DDP's gradient sync
        raise UserError("train.distill: distillation trains in one process; set resources.workers: 1")

    history: list[dict[str, float]] = []
    # the SCHEDULABLE values this trial trained with, as steps (train.hyper_schedule): its own,
    # or those of the member whose checkpoint it continues, then its own from there
    lived: list[dict] = []
    base_values = values_of(train_cfg)
    group_roles = [(g["lr_scale"], g["decays"]) for g in optimizer.param_groups]
    predictions: dict[str, dict[str, np.ndarray]] = {}
    start = find_checkpoint(checkpoint_dir) if resume_from is None else Path(resume_from)
    if start is not None and start.is_dir():
        start = find_checkpoint(start)
    if start is not None:
        state = load_checkpoint(start, map_location=device)
        model.load_state_dict(state.model)
        optimizer.load_state_dict(state.optimizer)
        scheduler.load_state_dict(state.scheduler)
        restore_rng(state.rng, generator)
        history = list(state.history)
        cost.resume(history)
        lived = [dict(step) for step in state.schedule or ()]
        for group, (scale, decays) in zip(optimizer.param_groups, group_roles, strict=True):
            group.update(lr_scale=scale, decays=decays)  # a checkpoint written before they were kept
    if not lived and history:  # a checkpoint written before schedules were kept: its own values
        lived = [{"epoch": 1, "values": base_values}]
    epoch_values = values_at(base_values, train_cfg.schedule, len(history) + 1)
    stepped = record_step(lived, len(history) + 1, epoch_values, continued_from)
    if (stepped and history) or epoch_values != base_values:  # not the optimiser's values (yet)
        apply_values(optimizer, scheduler, epoch_values)

    if on_start is not None:
        on_start()
    # train.precision (auto resolved for this device): the forward of training and every evaluation
    autocast = precision_autocast(train_cfg.precision, device)
    progress = EpochProgress(
        enabled=show_progress,
        plan=plan,
        header=f"train on {device}: {openmp.describe(threads)}",  # how its threads wait: vitscale.openmp
    )
    checkpoint = find_checkpoint(checkpoint_dir)
    if history and len(history) >= plan.epochs and report is not None:
        # Resumed at the very end (e.g. a study restarted after this trial's last checkpoint):
        # report the final epoch again, with the checkpoint it was loaded from.
        report(history[-1], start.parent if distributed.is_main else None)

    def train_epoch(epoch: int) -> dict[str, float]:
        """One epoch of training steps: the mean loss, NFE means and distillation terms."""
        runner.train()
        distill_stats = EpochDistillStats(distiller, device)
        first_step = (epoch - 1) * steps_per_epoch
        loss_sum = torch.zeros((), device=device)
        window_start = 1  # first step whose loss is in loss_sum but not yet checked
        forward_nfe = backward_nfe = 0
        steps = 0
        progress.begin(epoch)
        try:
            batches = vdata.train_batches(bundle, config.data, batch_size, generator, distributed.batch_rows)
            for step, (images, labels) in enumerate(islice(batches, plan.steps_in(epoch)), start=1):
                with autocast:
                    if distiller is None:
                        logits, extra = runner(images), None
                    else:  # one solve gives the logits and x(t_k) (train.distill)
                        logits, extra, parts = distiller.forward(model, images, first_step + step - 1)
                        distill_stats.add(parts)
                    loss = F.cross_entropy(
                        logits.float(), labels, label_smoothing=epoch_values["train.label_smoothing"]
                    )
                    if extra is not None:
                        loss = loss + extra
                    if distributed.active:  # DDP averages over workers: make that the global batch's mean
                        loss = loss * distributed.loss_weight(labels.shape[0], batch_size)
                after_forward, step_nfe = model.nfe_count, model.last_nfe
                optimizer.zero_grad(set_to_none=True)
                with model.blocks.backward_guard():  # the regime's: what backward can fail with
                    loss.backward()
                if epoch_values["train.grad_clip"] is not None:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), epoch_values["train.grad_clip"])
                optimizer.step()
                scheduler.step()
                loss_sum += loss.detach()
                steps += 1
                step_backward_nfe = None if after_forward is None else model.nfe_count - after_forward
                if after_forward is not None:
                    forward_nfe += step_nfe or 0
                    backward_nfe += step_backward_nfe  # adjoint solves; 0 otherwise
                step_images = batch_size if distributed.active else labels.shape[0]  # every worker's
                cost.add_batch(images.shape[-2:], step_images, step_nfe, step_backward_nfe)
                if step % FINITE_CHECK_EVERY == 0:  # one device sync per window, not per step
                    _check_finite(loss_sum, epoch, window_start, step, distributed)
                    window_start = step + 1
                progress.step(step, loss)
            _check_finite(loss_sum, epoch, window_start, steps, distributed)
        except torch.OutOfMemoryError as exc:
            raise TrialOutOfMemory(f"out of memory at epoch {epoch}: {str(exc).splitlines()[0]}") from exc
        if distributed.active:  # the weighted losses of the workers add up to world_size x the mean
            loss_sum = distributed.sum(loss_sum) / distributed.world_size
        stats = {"train_loss": (loss_sum / max(steps, 1)).item()}
        stats.update(distill_stats.metrics(first_step + steps - 1))
        if model.nfe_count is not None and steps:
            stats["nfe_mean"] = forward_nfe / steps
            if backward_nfe:
                stats["nfe_backward_mean"] = backward_nfe / steps
        return stats

    with progress:
        for epoch in range(len(history) + 1, plan.epochs + 1):
            t0 = time.perf_counter()
            scheduled = values_at(base_values, train_cfg.schedule, epoch)
            if scheduled != epoch_values:  # train.schedule changes them from this epoch on
                epoch_values = scheduled
                record_step(lived, epoch, epoch_values)
                apply_values(optimizer, scheduler, epoch_values)
            if device.type == "cuda":  # peak_memory_mb: this epoch's peak (CPU: the process's, ever)
                torch.cuda.reset_peak_memory_stats(device)
            train_stats = train_epoch(epoch)
            train_seconds = time.perf_counter() - t0
            last = epoch == plan.epochs
            if last:  # finished: per-image predictions of val and test, for paired comparisons
                val_stats, predictions["val"] = split_predictions(
                    runner, bundle, config, autocast, "val", distributed
                )
            else:
                val_stats = evaluate(runner, bundle, config, autocast, distributed=distributed)
            metrics = {
                "epoch": float(epoch),
                **train_stats,
                **val_stats,
                "lr": optimizer.param_groups[0]["lr"],
                "epoch_seconds": time.perf_counter() - t0,
                "train_images_per_second": plan.steps_in(epoch) * batch_size / max(train_seconds, 1e-9),
                RESULT_PLANNED_EPOCHS: float(plan.epochs),
                **cost.totals(),
                "params": float(params),
                "flops_per_image": cost.flops(val_stats.get("val_nfe_mean")),
                "peak_memory_mb": peak_memory_mb(device),
                "world_size": float(distributed.world_size),
            }
            if last:
                metrics["did_not_train"] = float(did_not_train(metrics["val_top1"], bundle.num_classes))
                if len(lived) > 1:  # the values changed while it trained: the schedule it lived
                    metrics[RESULT_SCHEDULE] = json.dumps(lived, sort_keys=True)
            if last and train_cfg.evaluate_test:  # finished: test with per-image predictions, reported only
                test_stats, predictions["test"] = split_predictions(
                    runner, bundle, config, autocast, "test", distributed
                )
                metrics.update(test_stats)
                if train_cfg.test_curve:
                    metrics[CURVE_TEST_TOP1] = test_stats["test_top1"]
                if train_cfg.eval_resolutions:  # accuracy at other input sizes: reported only, like test
                    at_metrics, at_predictions = evaluate_at_resolutions(
                        runner,
                        bundle,
                        config,
                        train_cfg.eval_resolutions,
                        autocast=autocast,
                        distributed=distributed,
                    )
                    metrics.update(at_metrics)
                    predictions.update(at_predictions)
            elif train_cfg.test_curve:  # the learning curve on test: reported only, like test_top1
                test_curve = evaluate(runner, bundle, config, autocast, "test", distributed=distributed)
                metrics[CURVE_TEST_TOP1] = test_curve["test_top1"]
            history.append(metrics)
            if checkpoint_dir is not None and distributed.is_main:
                if last:  # beside the checkpoint, so a Tune trial's copy in storage carries them
                    save_predictions(Path(checkpoint_dir), predictions)
                    save_served_model(
                        Path(checkpoint_dir), model, bundle, config.data.resolution, train_cfg.precision
                    )
                checkpoint = save_checkpoint(
                    checkpoint_dir,
                    TrainState(
                        epoch=epoch,
                        model=model.state_dict(),
                        optimizer=optimizer.state_dict(),
                        scheduler=scheduler.state_dict(),
                        rng=capture_rng(generator),
                        history=history,
                        schedule=lived,
                        model_config=model_config.model_dump(mode="json"),
                        trial_config=config.model_dump(mode="json"),
                    ),
                )
            progress.epoch_done(epoch, metrics)
            if report is not None:
                report(metrics, Path(checkpoint_dir) if checkpoint_dir and distributed.is_main else None)
    return FitResult(
        metrics=history[-1],
        history=history,
        model_config=model_config,
        checkpoint=checkpoint,
        predictions=predictions,
    )


def save_predictions(directory: Path, predictions: dict[str, dict[str, np.ndarray]]) -> list[Path]:
    """`directory/predictions/{name}.parquet` for each entry: `test`, or `test@56` at another
    resolution (tracking.predictions' contract)."""
    return [
        write_predictions(directory / PREDICTIONS_ARTIFACT / f"{name}.parquet", **arrays)
        for name, arrays in predictions.items()
    ]


def peak_memory_mb(device: torch.device) -> float:
    """CUDA: the peak allocated since the epoch began; CPU: the process's peak RSS (ru_maxrss, KiB on Linux)."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _check_finite(
    loss_sum: torch.Tensor, epoch: int, first: int, last: int, distributed: Distributed = ONE_PROCESS
) -> None:
    """The running loss sum is finite iff every loss so far was: check it once per window. The
    workers of a data-parallel trial check the sum over all of them, so they stop together."""
    if distributed.active:
        loss_sum = distributed.sum(loss_sum.clone())
    if not torch.isfinite(loss_sum):
        raise TrialDiverged(f"loss became non-finite at epoch {epoch}, within steps {first}-{last}")
