"""The optimiser of a trial: AdamW with parameter groups the model declares."""

from __future__ import annotations

import torch
from torch import nn

from vitscale.device import adamw_kwargs


def make_optimizer(model: nn.Module, config) -> torch.optim.AdamW:
    """AdamW with weight decay on weight matrices only and per-parameter learning-rate scales.

    The model names what is exempt from decay (`no_weight_decay()`: biases, norms, position
    embedding, cls token, mixer-declared parameters such as SSoG's kernels), so both arms of a
    comparison are regularised alike, and what trains at a multiple of the lr (`lr_scales()`:
    SSoG's kernel widths and offsets, `model.ssog.kernel_lr_scale`). A group's `lr` is the
    recipe's lr times its scale; the schedule multiplies every group alike (LambdaLR). Fused
    where the device has the kernel (`device.adamw_kwargs`): the same update, one kernel.
    """
    names = model.no_weight_decay() if hasattr(model, "no_weight_decay") else set()
    scales = model.lr_scales() if hasattr(model, "lr_scales") else {}
    groups: dict[tuple[bool, float], list[nn.Parameter]] = {}
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        decays = not (param.ndim <= 1 or name in names)
        groups.setdefault((decays, scales.get(name, 1.0)), []).append(param)
    # the recipe's own group first: `param_groups[0]['lr']` is the lr the loop reports
    ordered = sorted(groups.items(), key=lambda item: (not item[0][0], item[0][1] != 1.0, item[0][1]))
    return torch.optim.AdamW(
        [
            {
                "params": params,
                "weight_decay": config.weight_decay if decays else 0.0,
                "lr": config.lr * scale,
                # kept on the group: a new lr or weight decay mid-training (train.hyper_schedule)
                "lr_scale": scale,
                "decays": decays,
            }
            for (decays, scale), params in ordered
        ],
        lr=config.lr,
        betas=tuple(config.betas),
        **adamw_kwargs(next(model.parameters()).device),
    )
