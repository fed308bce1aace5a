"""FLOPs per image of a model as trained (ODE models: at the NFE measured each epoch)."""

from __future__ import annotations

from vitscale.models import VisionTransformer
from vitscale.models.measure import flops_per_image, ode_flops_split


class CostMeter:
    """`flops_per_image` as trained: fixed for discrete/looped models; for ODE models the FLOPs
    outside the ODE plus one field evaluation x the NFE measured on validation this epoch."""

    def __init__(self, model: VisionTransformer, resolution: int) -> None:
        self.ode = model.config.regime == "ode"
        if self.ode:
            self.outside, self.per_eval = ode_flops_split(model, resolution)
            self.static = self.outside + self.per_eval * (model.last_nfe or 0)
        else:
            self.static = flops_per_image(model, resolution)

    def flops(self, val_nfe_mean: float | None) -> float:
        if self.ode and val_nfe_mean:
            return float(self.outside + self.per_eval * val_nfe_mean)
        return float(self.static)
