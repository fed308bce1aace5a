"""Operators a mixer derives from a few small parameters, kept between no-grad forwards.

SSoG's GEMM operands (its Gaussian kernels) depend only on the grid, the dtype and device, and
a few hundred kernel parameters, yet cost a dozen small ops per call. Without autograd (eval,
`torch.no_grad`, `torch.inference_mode`) a `KernelCache` keeps them from one model forward to the
next. An entry is valid while the parameters hold the values it was built from: it keeps a copy
of them and compares values, never `Tensor._version`, because fused AdamW (and writes through
`.data`) change a parameter without bumping its version. So an optimiser step, an EMA update or
`load_state_dict` between two forwards rebuilds the kernels, and nothing else does.

The comparison runs once per model forward, not once per call (a looped or ODE model calls its
one mixer depth or NFE times): `kernel_cache_scope`, which `VisionTransformer` opens around each
forward, marks an entry checked for the rest of that forward. A mixer called alone, outside any
scope, checks on every call. With autograd on the cache is never read (each call builds its own
kernels, so every graph owns its tensors), and a grad-enabled forward drops what the cache holds:
training would leave it stale after the next step anyway, and it should not hold memory there.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import Tensor, nn


class KernelCache:
    """One entry: (key, copies of the parameters it was built from, the built tensors)."""

    def __init__(self) -> None:
        self._key: Hashable = None
        self._values: tuple[Tensor, ...] = ()
        self._built: tuple[Tensor, ...] | None = None
        self._in_scope = False  # inside kernel_cache_scope (one model forward)
        self._checked = False  # the entry was compared with the parameters in this forward

    def get(self, key: Hashable, params: Sequence[Tensor], build: Callable[[], tuple[Tensor, ...]]):
        """`build()`'s tensors for `key` while `params` hold the values they were built from."""
        if self._built is None or self._key != key or not (self._checked or self._holds(params)):
            self._key, self._built = key, build()
            self._values = tuple(p.detach().clone() for p in params)
        self._checked = self._in_scope
        return self._built

    def _holds(self, params: Sequence[Tensor]) -> bool:
        """Whether `params` equal the stored copies (same shape, dtype, device and values)."""
        return len(params) == len(self._values) and all(
            p.shape == v.shape and p.dtype == v.dtype and p.device == v.device and torch.equal(p, v)
            for p, v in zip(params, self._values, strict=True)
        )

    def clear(self) -> None:
        self._key, self._values, self._built, self._checked = None, (), None, False

    def open(self) -> None:
        """Start of a model forward: check the entry once; drop it if autograd is on (training)."""
        if torch.is_grad_enabled():
            self.clear()
        self._in_scope, self._checked = True, False

    def close(self) -> None:
        self._in_scope, self._checked = False, False

    @property
    def holds_entry(self) -> bool:
        return self._built is not None


@contextmanager
def kernel_cache_scope(model: nn.Module) -> Iterator[None]:
    """One model forward for every `kernel_cache` attribute (a `KernelCache`) of `model`'s modules."""
    caches = [c for m in model.modules() if isinstance(c := vars(m).get("kernel_cache"), KernelCache)]
    for cache in caches:
        cache.open()
    try:
        yield
    finally:
        for cache in caches:
            cache.close()
