"""Data sets as uint8 tensors on the trial's device, augmented per batch on that device.

How the trainer uses it:

    bundle = load(config.data, device)              # uint8 on the device
    gen = make_generator(bundle, seed)              # checkpoint gen.get_state() for exact resume
    for images, labels in train_batches(bundle, config.data, batch_size, gen): ...
    for images, labels in eval_batches(bundle, config.data, eval_batch_size): ...
"""

from vitscale.data.batches import eval_batches, make_generator, num_train_batches, train_batches
from vitscale.data.bundle import DataBundle, load
from vitscale.data.config import DataConfig
from vitscale.data.registry import DATASETS, register_dataset
from vitscale.data.throughput import throughput

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
