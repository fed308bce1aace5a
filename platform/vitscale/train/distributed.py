"""`Distributed`: where one process stands in a data-parallel trial, and what `fit` asks of it.

`fit` runs unchanged in one process (`ONE_PROCESS`: no process group, nothing wrapped, no
collective call) and in each worker of a multi-worker trial (a Ray Train `TorchTrainer`,
`tune.distributed_trial`), which passes its rank, world size and device. What differs between
the two is here, so the loop names no backend:

- data: every worker shuffles with the same seeded generator and takes rows `rank::world_size`
  of each global batch (`shard`), so the shards are disjoint, the epoch covers the set once and
  the global batch is the spec's `train.batch_size`, the batches one process would draw;
- gradients: the model is wrapped in DistributedDataParallel (gloo on CPU, NCCL on CUDA; Ray
  Train set the process group up), and each worker's loss is weighted by its share of the
  global batch (`loss_weight`), so the averaged gradient is the global batch's mean, equal
  shards or not;
- metrics: sums are all-reduced (`sum`), per-image predictions gathered in split order
  (`gather`), so every worker reports the same numbers;
- files: only rank 0 (`is_main`) writes checkpoints and predictions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist


@dataclass(frozen=True)
class Distributed:
    """One worker of `world_size`; `device` overrides `train.device` (the GPU Ray Train gave it)."""

    rank: int = 0
    world_size: int = 1
    device: torch.device | None = None

    @property
    def is_main(self) -> bool:
        """The worker that writes files (checkpoints, predictions) and whose report Tune keeps."""
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world_size > 1

    @property
    def batch_rows(self) -> slice:
        """This worker's rows of each global batch: every world_size-th from its rank."""
        return slice(self.rank, None, self.world_size) if self.active else slice(None)

    def span(self, n: int) -> slice:
        """This worker's contiguous block of n items in order (evaluation: blocks keep split order)."""
        if not self.active:
            return slice(0, n)
        return slice(n * self.rank // self.world_size, n * (self.rank + 1) // self.world_size)

    def loss_weight(self, local: int, total: int) -> float:
        """Factor on this worker's mean loss so that DDP's average over workers is the mean over
        the `total` images of the global batch (1.0 for equal shards)."""
        return local * self.world_size / total if self.active else 1.0

    def wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        """DistributedDataParallel around `model` (its gradients all-reduced in backward)."""
        if not self.active:
            return model
        from torch.nn.parallel import DistributedDataParallel

        ids = [self.device.index] if self.device is not None and self.device.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=ids)

    def sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """The tensor summed over workers (in place; itself in one process)."""
        if self.active:
            dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor

    def gather(self, array: np.ndarray) -> np.ndarray:
        """Every worker's array, concatenated in rank order (with `span`: the split's order)."""
        if not self.active:
            return array
        parts: list[np.ndarray | None] = [None] * self.world_size
        dist.all_gather_object(parts, array)
        return np.concatenate(parts)


ONE_PROCESS = Distributed()
