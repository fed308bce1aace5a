"""`vitscale data info`: what a data set holds, and how fast its augmentation path runs."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.table import Table

from vitscale import data as vdata  # vdata.load / vdata.throughput import torch when first read
from vitscale.cli.app import app
from vitscale.cli.console import stdout_console
from vitscale.data import DataConfig
from vitscale.device import resolve_device

data_app = typer.Typer(help="Inspect data sets and measure the data path.", no_args_is_help=True)
app.add_typer(data_app, name="data")


@data_app.command("info")
def info(
    dataset: Annotated[
        str,
        typer.Option(help="digits | synthetic | fashion_mnist | mnist | cifar10 | cifar100 | imagefolder"),
    ] = "digits",
    root: Annotated[
        str | None,
        typer.Option(
            help="local path of the data (cifar*, imagefolder; fashion_mnist, mnist: the folder of the "
            "IDX files, unset: the first of $VITSCALE_DATA/F, ~/data/F, /usr/share/datasets/F, "
            "F = fashion-mnist or mnist)"
        ),
    ] = None,
    download: Annotated[
        bool, typer.Option(help="cifar*, fashion_mnist, mnist: fetch missing files into --root (network)")
    ] = False,
    resolution: Annotated[int, typer.Option("--resolution", "-r", help="side the model sees")] = 32,
    source_size: Annotated[int | None, typer.Option(help="synthetic, imagefolder: stored side")] = None,
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
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object")] = False,
) -> None:
    """Split sizes (train / val held out of train / test), classes, stored shape, normalisation;
    with --throughput, the augmentation rate."""
    config = DataConfig(
        dataset=dataset,
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
    bundle = vdata.load(config, resolve_device(device, "--device"))
    out = {**bundle.summary(), "resolution": resolution, "class_names": bundle.class_names}
    if measure:
        out["throughput"] = vdata.throughput(bundle, config, batch_size=batch_size, seconds=seconds)
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
    stdout_console().print(table)
