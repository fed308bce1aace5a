"""Data sets as uint8 tensors on the trial's device, augmented per batch on that device.

How the trainer uses it:

    bundle = load(config.data, device)              # uint8 on the device
    gen = make_generator(bundle, seed)              # checkpoint gen.get_state() for exact resume
    for images, labels in train_batches(bundle, config.data, batch_size, gen): ...
    for images, labels in eval_batches(bundle, config.data, eval_batch_size): ...

`DataConfig` and the registry import without torch; the loading and batching names load on
first use, so validating a study never imports torch (issue 30).
"""

from vitscale.data.config import DataConfig
from vitscale.data.registry import DATASETS, register_dataset
from vitscale.lazy import lazy_exports

# name -> the module that defines it, imported when the name is first read (see vitscale.lazy)
_TORCH_BACKED = {
    "DataBundle": "vitscale.data.bundle",
    "load": "vitscale.data.bundle",
    "eval_batches": "vitscale.data.batches",
    "make_generator": "vitscale.data.batches",
    "num_train_batches": "vitscale.data.batches",
    "train_batches": "vitscale.data.batches",
    "throughput": "vitscale.data.throughput",
}

__getattr__ = lazy_exports(__name__, _TORCH_BACKED)


__all__ = [
    "DATASETS",
    "DataBundle",
    "DataConfig",
    "eval_batches",
    "load",
    "make_generator",
    "num_train_batches",
    "register_dataset",
    "throughput",
    "train_batches",
]
