"""A rich progress bar for `fit` that costs nothing when disabled (inside Ray trials)."""

from __future__ import annotations

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from vitscale.train.budget import TrainingPlan


class EpochProgress:
    """One bar per epoch over its steps (a FLOP budget's last epoch has fewer: the plan says how
    many); prints a line of metrics when an epoch ends."""

    def __init__(self, enabled: bool, plan: TrainingPlan, header: str = "") -> None:
        self.enabled = enabled
        self.header = header  # printed first: what the run runs on (device, threads)
        self.plan = plan
        self.epochs = plan.epochs
        self.steps = plan.steps_per_epoch  # of the epoch under way (set by `begin`)
        self._progress: Progress | None = None
        self._task = None

    def __enter__(self) -> EpochProgress:
        if self.enabled:
            self._progress = Progress(
                TextColumn("[bold]epoch {task.fields[epoch]}/{task.fields[epochs]}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("loss {task.fields[loss]}"),
                TimeElapsedColumn(),
                transient=False,
            )
            self._progress.__enter__()
            if self.header:
                self._progress.console.print(self.header)
        return self

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)

    def begin(self, epoch: int) -> None:
        self.steps = self.plan.steps_in(epoch)
        if self._progress is not None:
            self._task = self._progress.add_task(
                "", total=self.steps, epoch=epoch, epochs=self.epochs, loss="-"
            )

    def step(self, step: int, loss) -> None:
        if self._task is None:
            return
        if step % 10 == 0 or step == self.steps:
            self._progress.update(self._task, completed=step, loss=f"{loss.item():.3f}")

    def epoch_done(self, epoch: int, metrics: dict[str, float]) -> None:
        if self._progress is None:
            return
        if self._task is not None:
            self._progress.update(self._task, completed=self.steps)
            self._task = None
        self._progress.console.print(
            f"epoch {epoch}: train_loss {metrics['train_loss']:.3f}  val_loss {metrics['val_loss']:.3f}  "
            f"top1 {100 * metrics['val_top1']:.1f}%  {metrics['train_images_per_second']:.0f} img/s"
        )
