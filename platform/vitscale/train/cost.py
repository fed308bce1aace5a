"""What a trial costs: FLOPs per image as trained, and the images and training FLOPs so far.

Scaling laws read error against training compute at every epoch, so each epoch reports the
running totals. The regime says how its NFE enters the sum (`forward_flops`,
`training_flops`), so this file names no regime.
"""

from __future__ import annotations

from collections.abc import Sequence

from vitscale.models import VisionTransformer
from vitscale.models.measure import regime_flops_split


class CostMeter:
    """`flops(val_nfe_mean)`: forward FLOPs per image at data.resolution (ODE: at the NFE measured
    on validation this epoch). `add_batch`: one training batch's images and its forward + backward
    FLOPs, at the batch's own side and NFE; `images_seen` and `train_flops` are the running totals.

    FLOPs per image are counted once per side (`regime_flops_split`, one forward of one image)
    and cached: only the NFE changes from batch to batch.
    """

    def __init__(
        self, model: VisionTransformer, resolution: int, train_resolutions: Sequence[int] | None = None
    ) -> None:
        self.model = model
        self.regime = model.blocks
        self.resolution = (resolution, resolution)
        self._splits: dict[tuple[int, int], tuple[int, int]] = {}
        self._split(self.resolution)
        self.measured_nfe = model.last_nfe  # of that counting forward: the NFE before any validation
        for side in train_resolutions or ():
            self._split((side, side))
        self.images_seen = 0
        self.train_flops = 0
        self.known = True

    def _split(self, hw: tuple[int, int]) -> tuple[int, int]:
        """(outside, unit) FLOPs at input size `hw`; a size not met before is counted now (one
        forward that resets `last_nfe`: call it only after a batch's NFE was read)."""
        if hw not in self._splits:
            self._splits[hw] = regime_flops_split(self.model, hw)
        return self._splits[hw]

    def flops(self, val_nfe_mean: float | None) -> float:
        """`flops_per_image`: forward FLOPs of one image at data.resolution."""
        outside, unit = self._splits[self.resolution]
        return float(self.regime.forward_flops(outside, unit, val_nfe_mean or self.measured_nfe))

    def training_flops_per_image(self) -> float:
        """Forward + backward FLOPs of one training image at data.resolution, at the NFE of the
        counting forward (ODE: the untrained model's; `train.train_flops` turns a budget into
        images with it)."""
        outside, unit = self._splits[self.resolution]
        nfe = self.measured_nfe
        return float(self.regime.training_flops(outside, unit, nfe, nfe))

    def add_batch(
        self, hw: Sequence[int], images: int, forward_nfe: int | None, backward_nfe: int | None
    ) -> None:
        """Count one training batch of `images` images of size `hw`, at the NFE its forward and
        backward took (None outside the regimes that count evaluations)."""
        outside, unit = self._split((int(hw[0]), int(hw[1])))
        self.images_seen += images
        self.train_flops += images * self.regime.training_flops(outside, unit, forward_nfe, backward_nfe)

    def resume(self, history: Sequence[dict[str, float]]) -> None:
        """Continue a resumed trial's totals from its last epoch. A checkpoint written before the
        totals were reported has none: they stay unreported rather than restart from 0."""
        if not history:
            return
        last = history[-1]
        if "train_flops" in last and "images_seen" in last:
            self.images_seen, self.train_flops = int(last["images_seen"]), int(last["train_flops"])
        else:
            self.known = False

    def totals(self) -> dict[str, float]:
        """`images_seen` and `train_flops` by the end of the epoch just trained (empty if unknown)."""
        if not self.known:
            return {}
        return {"images_seen": float(self.images_seen), "train_flops": float(self.train_flops)}
