"""Models: a ViT is mixer x regime x size, built from one `ModelConfig`.

>>> model = build(ModelConfig(mixer="ssog", regime="ode", width=192, depth=12, heads=3))
>>> logits = model(images)  # any H, W divisible by patch_size
>>> model.last_nfe  # ODE: function evaluations of that forward; None for other regimes

The configs and registries import without torch; the names backed by torch (`build`, `measure`'s
counts, the ODE's solver errors) load on first use, so `vitscale --help` and `study validate`
never import torch (issue 30).
"""

from vitscale.errors import SolverError
from vitscale.lazy import lazy_exports
from vitscale.models.config import ModelConfig
from vitscale.models.regimes.ode_settings import OdeConfig
from vitscale.models.registry import MIXERS, REGIMES

# name -> the module that defines it, imported when the name is first read (see vitscale.lazy)
_TORCH_BACKED = {
    "Block": "vitscale.models.vit",
    "VisionTransformer": "vitscale.models.vit",
    "build": "vitscale.models.vit",
    "count_params": "vitscale.models.measure",
    "describe_model": "vitscale.models.measure",
    "flops_per_image": "vitscale.models.measure",
    "lipschitz_bound": "vitscale.models.measure",
    "mixing_flops": "vitscale.models.measure",
    "regime_flops_split": "vitscale.models.measure",
    "solver_errors": "vitscale.models.regimes.ode",
}

__getattr__ = lazy_exports(__name__, _TORCH_BACKED)


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
    "describe_model",
    "flops_per_image",
    "lipschitz_bound",
    "mixing_flops",
    "regime_flops_split",
    "solver_errors",
]
