"""`DataConfig`: which data set a trial reads, at what resolution, with which augmentation."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

from vitscale.data.registry import DATASETS, LOADERS, loadable


class DataConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dataset: str = Field(
        "digits",
        description="digits | synthetic | fashion_mnist | mnist | cifar10 | cifar100 | imagefolder | shards",
    )
    loader: str = Field(
        "memory",
        description="memory: the whole set decoded once into one uint8 tensor on the trial's device "
        "(small sets); stream: read from disk batch by batch by data.num_workers DataLoader "
        "workers, decoded on CPU, augmented on the device, host memory bounded by the batch, not "
        "the set (sets larger than memory; imagefolder, shards)",
    )
    num_workers: int = Field(
        2,
        ge=0,
        description="loader stream: DataLoader worker processes reading and decoding images; 0 = in the trial's process",
    )
    root: str | None = Field(
        None,
        description="local path of the data (cifar*, imagefolder, shards; fashion_mnist, mnist: the folder of "
        "the four IDX files, unset: the first of $VITSCALE_DATA/F, ~/data/F, /usr/share/datasets/F "
        "holding them, F = fashion-mnist or mnist)",
    )
    download: bool = Field(
        False,
        description="cifar*, fashion_mnist, mnist: fetch missing files into root (network); "
        "fashion_mnist, mnist with root unset: into the first place searched",
    )
    resolution: int = Field(32, ge=4, description="side of the square images the model sees")
    train_resolutions: list[Annotated[int, Field(ge=4)]] | None = Field(
        None,
        min_length=1,
        description="train across resolutions: each training batch is resampled to one side drawn from "
        "this list (multiples of model.patch_size; the model is built, validated and tested at "
        "resolution); null = every batch at resolution",
    )
    source_size: int | None = Field(
        None,
        ge=4,
        description="synthetic, imagefolder, shards: side of the images as decoded; default: resolution",
    )
    val_fraction: float = Field(
        0.1,
        gt=0,
        lt=1,
        description="share of the training split held out (seeded, stratified) for validation; "
        "synthetic draws its own validation set instead",
    )
    num_train: int | None = Field(
        None, ge=1, description="cap on training images (a smaller run); synthetic: its size (default 4096)"
    )
    num_val: int | None = Field(
        None, ge=1, description="cap on validation images; synthetic: its size (default 1024)"
    )
    num_test: int | None = Field(
        None, ge=1, description="cap on test images; synthetic: its size (default 2048)"
    )
    num_classes: int = Field(10, ge=2, description="synthetic: number of classes")
    crop_padding: int | None = Field(
        None,
        ge=0,
        description="random crop with this zero padding (in source pixels); 0 = off; "
        "default: the data set's own (cifar 4, mnist 2, fashion_mnist 0, digits 0, imagefolder size/8, "
        "synthetic size/16)",
    )
    hflip: bool | None = Field(None, description="random horizontal flip; default: the data set's own choice")
    split_seed: int = Field(
        0,
        ge=0,
        lt=2**30,
        description="seed of the train/val split, caps and synthetic generation (not of test)",
    )

    @model_validator(mode="after")
    def _check_dataset(self) -> DataConfig:
        if self.dataset not in DATASETS:
            raise ValueError(f"dataset: unknown data set {self.dataset!r}; choose one of {sorted(DATASETS)}")
        if self.loader not in LOADERS:
            raise ValueError(f"loader: unknown loader {self.loader!r}; choose one of {sorted(LOADERS)}")
        if not loadable(self.dataset, self.loader):
            can = sorted(name for name in DATASETS if loadable(name, self.loader))
            raise ValueError(
                f"loader: data set {self.dataset!r} cannot be read with loader {self.loader!r} "
                f"(only {', '.join(can)} can); set data.loader: memory"
            )
        return self
