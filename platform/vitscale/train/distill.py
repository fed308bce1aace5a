"""ODE-ViT trajectory distillation: a trained (discrete) teacher guides the continuous student.

The teacher's token states after block k are read as the solution of the student's ODE at
t_k = k · t_end / depth, and the student is trained to pass through them:

    loss = CE(student) + λ(t) · mean_k mse(x(t_k), h_k)  [+ μ · T² · KL(p_teacher^T ‖ p_student^T)]

`mse` is normalised per token by the teacher token's energy: ‖x_i − h_i‖² / (‖h_i‖² + 1e-6·C) for
token i, averaged over every token (cls included), every image and the chosen k — a relative
error, 1 for a student state at 0, so λ means the same at every width and depth (a discrete
teacher's residual stream grows to ~10² per channel on digits; an absolute error swamped CE).
Both states are taken before the final norm, on the same augmented batch. The x(t_k) come from
the one forward solve (the t_k join odeint's output times; `NeuralOde.trajectory`), so NFE is
unchanged. With `model.ode.adjoint` the intermediate states are still those of the forward
solve; the adjoint backward runs one segment per interval [t_{k-1}, t_k] and adds each state's
gradient at its t_k: the same NFE for fixed-grid solvers at aligned t_k, a fresh initial step
per segment (more NFE) for adaptive ones.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from vitscale.errors import TeacherMismatch
from vitscale.models.config import ModelConfig
from vitscale.train.config import DistillConfig
from vitscale.train.teacher import check_compatible, load_teacher

RELATIVE_EPS = 1e-6  # per channel: keeps a near-zero teacher token from dividing by zero


class Distiller:
    """The teacher and the extra loss terms of one trial."""

    def __init__(self, config: DistillConfig, teacher: nn.Module, depth: int, total_steps: int) -> None:
        self.config = config
        self.teacher = teacher
        self.layers = config.layer_list(depth)
        self.total_steps = max(total_steps, 1)

    def weight(self, step: int) -> float:
        """λ at global step `step` (0-based): constant, or linear from λ to 0 over training."""
        if self.config.schedule == "linear_decay":
            return self.config.weight * (1.0 - step / self.total_steps)
        return self.config.weight

    def forward(self, model, images: Tensor, step: int) -> tuple[Tensor, Tensor, dict[str, Tensor]]:
        """(student logits, the added loss, its parts: `distill_loss` (unweighted trajectory
        term), `per_layer` (K,), `distill_logit_loss` when on), all as tensors."""
        with torch.no_grad():
            teacher_logits, teacher_states = self.teacher.forward_states(images, self.layers)
        logits, states = model.forward_states(images, self.layers)
        target = teacher_states.float()
        energy = target.pow(2).sum(-1) + RELATIVE_EPS * target.shape[-1]
        per_layer = ((states.float() - target).pow(2).sum(-1) / energy).mean(dim=(1, 2))
        trajectory = per_layer.mean()
        extra = self.weight(step) * trajectory
        parts = {"distill_loss": trajectory, "per_layer": per_layer}
        if self.config.logit_weight > 0:
            t = self.config.temperature
            kl = F.kl_div(
                F.log_softmax(logits.float() / t, dim=-1),
                F.log_softmax(teacher_logits.float() / t, dim=-1),
                log_target=True,
                reduction="batchmean",
            )
            extra = extra + self.config.logit_weight * t * t * kl
            parts["distill_logit_loss"] = kl
        return logits, extra, parts


def make_distiller(
    config: DistillConfig | None,
    student: ModelConfig,
    resolution: int,
    device: torch.device,
    total_steps: int,
) -> Distiller | None:
    """None when distillation is off (no config, or both weights 0: the teacher is not loaded)."""
    if config is None or not config.active:
        return None
    if config.teacher is None or not isinstance(config.teacher, str):
        raise TeacherMismatch(
            "train.distill.teacher: not set (or a best_of reference not resolved: best_of works in studies)"
        )
    teacher, teacher_config = load_teacher(config.teacher, device)
    layers = config.layer_list(student.depth)
    check_compatible(teacher_config, student, layers, resolution, logits=config.logit_weight > 0)
    return Distiller(config, teacher, student.depth, total_steps)


class EpochDistillStats:
    """Per-epoch sums on the device (no sync per step): `distill_loss`, `distill_err_k<k>`."""

    def __init__(self, distiller: Distiller | None, device: torch.device) -> None:
        self.distiller = distiller
        self.steps = 0
        self.loss = torch.zeros((), device=device)
        self.logit = torch.zeros((), device=device)
        self.per_layer = torch.zeros(len(distiller.layers) if distiller else 0, device=device)

    def add(self, parts: dict[str, Tensor]) -> None:
        self.steps += 1
        self.loss += parts["distill_loss"].detach()
        self.per_layer += parts["per_layer"].detach()
        if "distill_logit_loss" in parts:
            self.logit += parts["distill_logit_loss"].detach()

    def metrics(self, step: int) -> dict[str, float]:
        if self.distiller is None or not self.steps:
            return {}
        out = {
            "distill_loss": (self.loss / self.steps).item(),
            "distill_weight": self.distiller.weight(step),
        }
        for k, value in zip(self.distiller.layers, (self.per_layer / self.steps).tolist(), strict=True):
            out[f"distill_err_k{k}"] = value
        if self.distiller.config.logit_weight > 0:
            out["distill_logit_loss"] = (self.logit / self.steps).item()
        return out
