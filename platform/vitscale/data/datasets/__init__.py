"""Data set loaders, one file each, declared below in `vitscale.data.DATASETS`.

A new data set is one file here with a function `(DataConfig) -> Source`, plus one declaration
below: its name, where the loader lives (imported when a trial first loads the set, so validating
a study never imports torch), its recommended `recipe` of `train.*` values, if any, and the
`native_size` its images are stored at (what `vitscale train` trains at unless told), if fixed, and
for a set that can be streamed from disk (`data.loader: stream`), its `stream` reader: a function
`(DataConfig) -> samples.StreamSource` giving the index of its images.
"""

from vitscale.data.registry import declare_dataset

_HERE = __name__  # "vitscale.data.datasets": where each loader is imported from when first used

declare_dataset("cifar10", f"{_HERE}.cifar:load_cifar10", native_size=32)
declare_dataset("cifar100", f"{_HERE}.cifar:load_cifar100", native_size=32)
declare_dataset(
    "digits",
    f"{_HERE}.digits:load_digits",
    recipe={"epochs": 15, "batch_size": 32, "lr": 5e-3, "warmup_epochs": 1.0, "label_smoothing": 0.0},
)
declare_dataset(
    "imagefolder", f"{_HERE}.imagefolder:load_imagefolder", stream=f"{_HERE}.imagefolder:index_imagefolder"
)
# Fashion-MNIST's recipe, measured (issue 35): 1 epoch on 6,000 images gave 61 % (attention) and
# 64 % (SSoG) test with it, 29 % with the generic one (batch 128, warmup 1 epoch, timm's init).
declare_dataset(
    "fashion_mnist",
    f"{_HERE}.mnist:load_fashion_mnist",
    recipe={"epochs": 10, "batch_size": 64, "lr": 2e-3, "warmup_epochs": 0.1, "label_smoothing": 0.0},
    native_size=28,
)
declare_dataset("mnist", f"{_HERE}.mnist:load_mnist", native_size=28)
declare_dataset("shards", f"{_HERE}.shards:load_shards", stream=f"{_HERE}.shards:index_shards")
declare_dataset("synthetic", f"{_HERE}.synthetic:load_synthetic")
