"""fashion_scaling's isoFLOP table (docs/results.md) from the MLflow record: test top-1 of every
size (width x depth) at every training budget, attention / SSoG, each mixer's best per budget bold.

The 1.6e12 column is fashion_scaling_lr's final runs (that study trains each size at 1.6e12 FLOPs to
choose its lr); the other budgets are fashion_scaling's. Every execution of either study is read
(a size added later runs as a second execution, e.g. `--set 'arms={..., model.depth: [2], ...}'`),
so the table is the store's, not one execution's. `vitscale analyze fashion-scaling` gives the
intervals, the isoFLOP minima and the fits; this is the one-glance grid beside them.

    python studies/scaling_table.py --tracking-uri sqlite:///mlflow.db
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from vitscale.analysis.load.runs import load_study_runs
from vitscale.errors import UserError

LR_STUDY, GRID_STUDY = "fashion-scaling-lr", "fashion-scaling"
LR_STUDY_BUDGET = 1.6e12  # fashion_scaling_lr.yaml's train.train_flops
MIXERS = ("attention", "ssog")


def final_cells(study: str, uri: str) -> dict[tuple[float, str, tuple[int, int]], tuple[float, float, int]]:
    """{(budget, mixer, (width, depth)): (test top-1 %, lr, parameters)} of a study's finished final
    runs (parameters as each run logged them)."""
    table = load_study_runs(study, uri).table.to_pylist()
    cells = {}
    for row in table:
        if row["phase"] != "final" or row["status"] != "FINISHED" or row.get("test_top1") is None:
            continue
        budget = row.get("train.train_flops") or LR_STUDY_BUDGET
        size = (int(row["model.width"]), int(row["model.depth"]))
        cells[(float(budget), row["model.mixer"], size)] = (
            100 * row["test_top1"],
            float(row["train.lr"]),
            int(row["params"]),
        )
    return cells


def markdown(cells: dict) -> str:
    budgets = sorted({b for b, _, _ in cells})
    sizes = sorted({s for _, _, s in cells})
    best = {
        (b, m): max(v[0] for (bb, mm, _), v in cells.items() if bb == b and mm == m)
        for b in budgets
        for m in MIXERS
        if any(bb == b and mm == m for bb, mm, _ in cells)
    }
    lines = [
        "| width · depth (params: attention / SSoG) | lr | "
        + " | ".join(f"{b:.3g} FLOPs: attention / SSoG" for b in budgets)
        + " |",
        "|---|---|" + "---|" * len(budgets),
    ]
    for size in sizes:
        row = []
        for b in budgets:
            parts = []
            for m in MIXERS:
                cell = cells.get((b, m, size))
                text = "–" if cell is None else f"{cell[0]:.1f}"
                if cell is not None and np.isclose(cell[0], best[(b, m)]):
                    text = f"**{text}**"
                parts.append(text)
            row.append(" / ".join(parts))
        lrs = [cells.get((LR_STUDY_BUDGET, m, size)) for m in MIXERS]
        lr = " / ".join(f"{c[1]:g}" for c in lrs) if all(lrs) else "–"
        counts = [
            next((v[2] for (_, mm, ss), v in cells.items() if mm == m and ss == size), None) for m in MIXERS
        ]
        params = " / ".join("–" if n is None else f"{n / 1e3:.1f}k" for n in counts)
        lines.append(f"| {size[0]} · {size[1]} ({params}) | {lr} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tracking-uri", default="sqlite:///mlflow.db")
    args = parser.parse_args(argv)
    try:
        cells = {**final_cells(LR_STUDY, args.tracking_uri), **final_cells(GRID_STUDY, args.tracking_uri)}
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(markdown(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
