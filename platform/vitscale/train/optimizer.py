"""The optimiser of a trial: AdamW with parameter groups the model declares."""

from __future__ import annotations

import torch
from torch import nn


def make_optimizer(model: nn.Module, config) -> torch.optim.AdamW:
    """AdamW with weight decay on weight matrices only: the model names what is exempt
    (`no_weight_decay()`: biases, norms, position embedding, cls token, mixer-declared
    parameters such as SSoG's kernels), so both arms of a comparison are regularised alike."""
    names = model.no_weight_decay() if hasattr(model, "no_weight_decay") else set()
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        (no_decay if param.ndim <= 1 or name in names else decay).append(param)
    groups = [
        {"params": decay, "weight_decay": config.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=config.lr, betas=tuple(config.betas))
