"""`vitscale data info`: what a data set holds, how fast its data path runs and the host memory it
takes; `vitscale data generate`: a JPEG data set on disk to measure and test streaming with."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from vitscale import data as vdata  # vdata.load / vdata.throughput import torch when first read
from vitscale.cli.app import app
from vitscale.cli.console import stdout_console
from vitscale.data import DataConfig, fake_images
from vitscale.data.host_memory import HostMemory
from vitscale.device import resolve_device
from vitscale.errors import UserError

data_app = typer.Typer(help="Inspect data sets and measure the data path.", no_args_is_help=True)
app.add_typer(data_app, name="data")


@data_app.command("info")
def info(
    dataset: Annotated[
        str,
        typer.Option(
            help="digits | synthetic | fashion_mnist | mnist | cifar10 | cifar100 | imagefolder | shards"
        ),
    ] = "digits",
    root: Annotated[
        str | None,
        typer.Option(
            help="local path of the data (cifar*, imagefolder, shards; fashion_mnist, mnist: the folder of the "
            "IDX files, unset: the first of $VITSCALE_DATA/F, ~/data/F, /usr/share/datasets/F, "
            "F = fashion-mnist or mnist)"
        ),
    ] = None,
    download: Annotated[
        bool, typer.Option(help="cifar*, fashion_mnist, mnist: fetch missing files into --root (network)")
    ] = False,
    resolution: Annotated[int, typer.Option("--resolution", "-r", help="side the model sees")] = 32,
    loader: Annotated[
        str, typer.Option(help="memory (one uint8 tensor) | stream (read from disk per batch)")
    ] = "memory",
    num_workers: Annotated[int, typer.Option(help="stream: DataLoader worker processes")] = 2,
    source_size: Annotated[
        int | None, typer.Option(help="synthetic, imagefolder, shards: decoded side")
    ] = None,
    num_train: Annotated[int | None, typer.Option(help="cap (synthetic: size) of the training set")] = None,
    num_val: Annotated[int | None, typer.Option(help="cap (synthetic: size) of the validation set")] = None,
    num_test: Annotated[int | None, typer.Option(help="cap (synthetic: size) of the test set")] = None,
    val_fraction: Annotated[float, typer.Option(help="share of train held out for validation")] = 0.1,
    num_classes: Annotated[int, typer.Option(help="synthetic: number of classes")] = 10,
    split_seed: Annotated[int, typer.Option(help="seed of split, caps and synthetic generation")] = 0,
    device: Annotated[str, typer.Option(help="auto | cpu | cuda | cuda:N (auto: as the trainer)")] = "auto",
    measure: Annotated[bool, typer.Option("--throughput", help="measure augmented train images/s")] = False,
    batch_size: Annotated[int, typer.Option(help="batch size of the throughput measurement")] = 128,
    seconds: Annotated[float, typer.Option(help="duration of the throughput measurement")] = 2.0,
    epochs: Annotated[
        int | None, typer.Option(help="measure over this many whole epochs instead of --seconds")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
) -> None:
    """Split sizes (train / val held out of train / test), classes, stored shape, normalisation;
    with --throughput, the rate of augmented training images and the peak host memory (PSS of
    this process and its DataLoader workers, load included)."""
    config = DataConfig(
        dataset=dataset,
        loader=loader,
        num_workers=num_workers,
        root=root,
        download=download,
        resolution=resolution,
        source_size=source_size,
        num_train=num_train,
        num_val=num_val,
        num_test=num_test,
        val_fraction=val_fraction,
        num_classes=num_classes,
        split_seed=split_seed,
    )
    with HostMemory() as memory:
        bundle = vdata.load(config, resolve_device(device, "--device"))
        out = {**bundle.summary(), "resolution": resolution, "class_names": bundle.class_names}
        if measure:
            rate = vdata.throughput(bundle, config, batch_size=batch_size, seconds=seconds, epochs=epochs)
            out["throughput"] = rate
    if measure:
        out["throughput"].update(memory.figures())
    if as_json:
        print(json.dumps(out))
        return
    table = Table(title=f"data set {dataset}", show_header=False)
    table.add_column("key", style="bold")
    table.add_column("value")
    for key in ("num_train", "num_val", "num_test", "num_classes", "in_chans", "source_size", "resolution"):
        table.add_row(key, str(out[key]))
    names = bundle.class_names
    table.add_row("classes", ", ".join(names[:12]) + (f", ... ({len(names)})" if len(names) > 12 else ""))
    for key in ("mean", "std", "hflip", "crop_padding", "device"):
        table.add_row(key, str(out[key]))
    if measure:
        rate = out["throughput"]
        table.add_row("throughput", f"{rate['images_per_second']:,.0f} images/s (batch {rate['batch_size']})")
        if "peak_host_pss_mb" in rate:
            table.add_row("peak host memory", f"{rate['peak_host_pss_mb']:,.0f} MB (PSS, workers included)")
    stdout_console().print(table)


@data_app.command("generate")
def generate(
    root: Annotated[Path, typer.Argument(help="folder to write (train/ and val/ below it)")],
    layout: Annotated[
        str, typer.Option(help="folder (train/<class>/*.JPEG) | shards (train/shard-*.tar)")
    ] = "folder",
    train: Annotated[int, typer.Option(help="training images")] = 10_000,
    test: Annotated[int, typer.Option(help="images of val/ (vitscale's test split)")] = 1_000,
    classes: Annotated[int, typer.Option(help="number of classes")] = 10,
    size: Annotated[int, typer.Option(help="side of the square JPEGs")] = 64,
) -> None:
    """Write a generated JPEG data set in ImageNet's folder layout or as WebDataset-style tar
    shards (data set imagefolder or shards, --root ROOT): to measure and test streaming."""
    if layout not in fake_images.LAYOUTS:
        raise UserError(f"--layout: unknown layout {layout!r}; choose one of {sorted(fake_images.LAYOUTS)}")
    for flag, value, least in (
        ("--train", train, 1),
        ("--test", test, 1),
        ("--classes", classes, 2),
        ("--size", size, 4),
    ):
        if value < least:
            raise UserError(f"{flag}: {value} is below {least}")
    fake_images.generate(root, layout, train, test, classes, size)
    dataset = "imagefolder" if layout == "folder" else "shards"
    typer.echo(f"wrote {train} + {test} images to {root} (--dataset {dataset} --root {root})")
