"""Linear attention (Katharopoulos et al. 2020): softmax replaced by the kernel φ(x) = elu(x) + 1.

    out_i = φ(q_i)^T (Σ_j φ(k_j) v_j^T) / (φ(q_i)^T Σ_j φ(k_j) + eps)

Associativity lets the d x d summary Σ_j φ(k_j) v_j^T be formed once per head, so no N x N
matrix exists: O(N·d²) per head, O(N·C·d) per layer — linear in tokens, the O(N) control a
reviewer asks SSoG to beat. Non-causal (a ViT sees every token). Parameters are attention's
exactly (qkv with bias, proj: 4·C² + 4·C per mixer), so the comparison isolates the kernel.
The cls token is a token like any other: a query over, and a source for, every token.
Lipschitz bound: none in closed form (the normaliser divides by a data-dependent sum): n/a.

It asks for LayerScale 0.1 where the regime builds none (the discrete ViT): φ(q)·φ(k) ≈ d + small
at initialisation, so every token receives nearly the mean of all values, and without a small
residual gain the discrete model sat at chance for 7 of 15 epochs on digits (0.54 / 0.69 val top-1,
seeds 0 / 1, lr 5e-3; 0.67 at lr 2e-3) against 0.95 with it (studies/mixers_by_regime.yaml). That
adds 2·C parameters per block; `model.layer_scale: 0` restores the plain block.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn

from vitscale.models.config import ModelConfig
from vitscale.models.mixers.linear_settings import LinearSettings  # noqa: F401 (resume: older pickles name it here)


def feature_map(x: Tensor) -> Tensor:
    """φ(x) = elu(x) + 1: positive, so the normaliser never vanishes."""
    return F.elu(x) + 1.0


class LinearAttention(nn.Module):
    """Multi-head kernelised attention over all tokens (prefix tokens included), O(N·d²) per head."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.width, self.build_grid = config.width, config.grid  # the mixer contract (measure)
        self.heads = config.heads
        self.head_dim = config.width // config.heads
        self.eps = config.settings("linear").eps
        self.qkv = nn.Linear(config.width, 3 * config.width)
        self.proj = nn.Linear(config.width, config.width)

    def no_weight_decay(self) -> tuple[str, ...]:
        """Nothing beyond the usual (biases): its weights are attention's and decay alike."""
        return ()

    def forward(self, x: Tensor, grid_hw: tuple[int, int]) -> Tensor:
        """x: (B, T, C) tokens; grid_hw is unused (the kernel ignores geometry)."""
        b, t, c = x.shape
        qkv = self.qkv(x).reshape(b, t, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = feature_map(qkv[0]), feature_map(qkv[1]), qkv[2]  # (B, heads, T, d)
        summary = k.transpose(-2, -1) @ v  # (B, heads, d, d): Σ_j φ(k_j) v_j^T
        k_sum = k.sum(-2, keepdim=True).transpose(-2, -1)  # (B, heads, d, 1)
        out = (q @ summary) / (q @ k_sum + self.eps)  # (B, heads, T, d)
        return self.proj(out.transpose(1, 2).reshape(b, t, c))

    def extra_repr(self) -> str:
        return f"heads={self.heads}, eps={self.eps:g}"
