"""Models: a ViT is mixer x regime x size, built from one `ModelConfig`.

>>> model = build(ModelConfig(mixer="ssog", regime="ode", width=192, depth=12, heads=3))
>>> logits = model(images)  # any H, W divisible by patch_size
>>> model.last_nfe  # ODE: function evaluations of that forward; None for other regimes
"""

from vitscale.errors import SolverError
from vitscale.models.config import ModelConfig
from vitscale.models.measure import (
    count_params,
    flops_per_image,
    lipschitz_bound,
    mixing_flops,
    regime_flops_split,
)
from vitscale.models.regimes.ode import OdeConfig, solver_errors
from vitscale.models.registry import MIXERS, REGIMES
from vitscale.models.vit import Block, VisionTransformer, build

__all__ = [
    "MIXERS",
    "REGIMES",
    "Block",
    "ModelConfig",
    "OdeConfig",
    "SolverError",
    "VisionTransformer",
    "build",
    "count_params",
    "flops_per_image",
    "lipschitz_bound",
    "mixing_flops",
    "regime_flops_split",
    "solver_errors",
]
