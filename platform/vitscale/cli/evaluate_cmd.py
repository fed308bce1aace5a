"""`vitscale evaluate`: a finished trial's accuracy at other input resolutions (fixed patch size)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from vitscale.cli.app import app
from vitscale.errors import UserError
from vitscale.tracking.layout import DEFAULT_TRACKING_URI

SPLITS = {"val": ("val",), "test": ("test",), "both": ("val", "test")}


@app.command("evaluate")
def evaluate(
    source: Annotated[
        str,
        typer.Argument(
            metavar="RUN_ID_OR_CHECKPOINT", help="MLflow run id, or checkpoint.pt (or its folder)"
        ),
    ],
    resolutions: Annotated[
        str, typer.Option(help="comma list of image sides, multiples of the patch size: 28,42,56,84")
    ],
    split: Annotated[str, typer.Option(help="val | test | both")] = "both",
    device: Annotated[str, typer.Option(help="auto | cpu | cuda | cuda:N")] = "auto",
    tracking_uri: Annotated[str, typer.Option(help="MLflow tracking URI")] = DEFAULT_TRACKING_URI,
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object per resolution")] = False,
) -> None:
    """Evaluate a finished trial on images resampled to each resolution (more tokens, same patch
    size; the position embedding resampled bicubically, as timm does).

    A run gets metrics `val_top1_at56`, `test_top1_at56`, `test_loss_at56`, ... (MLflow refuses
    '@' in metric names) at its last epoch's step and artifacts `predictions/test@56.parquet`; a
    local checkpoint gets the predictions beside it. Nothing selects on these numbers."""
    if split not in SPLITS:
        raise UserError(f"--split: {split!r} is not val, test or both")
    from vitscale.train.evaluate_trial import evaluate_trial  # lazy: torch, MLflow

    result = evaluate_trial(
        source, parse_resolutions(resolutions), SPLITS[split], tracking_uri=tracking_uri, device=device
    )
    if as_json:
        for row in result.rows:
            print(
                json.dumps({**row, "run_id": result.run_id, "trained_resolution": result.trained_resolution})
            )
        return
    columns = [k for k in ("val_top1", "val_loss", "test_top1", "test_loss") if k in result.rows[0]]
    print(f"trained at {result.trained_resolution} (patch {result.patch_size}), epoch {result.epoch}")
    print("  ".join(["resolution", "tokens", *columns]))
    for row in result.rows:
        cells = [
            f"{row['resolution']:>10}",
            f"{row['tokens']:>6}",
            *(f"{row[k]:>{len(k)}.4f}" for k in columns),
        ]
        print("  ".join(cells))
    where = f"run {result.run_id}" if result.run_id else str(result.checkpoint.parent)
    print(f"predictions: {', '.join(result.predictions)} ({where})")


def parse_resolutions(text: str) -> list[int]:
    """--resolutions: `28,42,56` -> [28, 42, 56]; positive integers, each once."""
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        values = []
    if not values or any(v <= 0 for v in values) or len(set(values)) != len(values):
        raise UserError(
            f"--resolutions: {text!r} is not a comma list of distinct positive integers like 28,42,56"
        )
    return values
