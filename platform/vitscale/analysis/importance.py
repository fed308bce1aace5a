"""Which searched hyperparameters mattered: Optuna's fANOVA importance of the space's parameters for
the validation objective over the finished runs (`importance.csv`, `figures/hyperparameter_importance`),
and a parallel-coordinates figure of every finished run (`figures/parallel_coordinates`).

Each finished run (every seed) is one Optuna trial, with the distributions of `spec.yaml`'s space
(choices as observed; numeric ranges widened to what ran). A parameter set only under a `when:`
condition is left out (fANOVA needs it in every trial). Test metrics are never read.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pyarrow as pa

from vitscale.analysis.canvas import axes, save

MIN_RUNS = 4
CSV_FILE = "importance.csv"


def _rows(runs: pa.Table, keys: list[str], metric: str) -> list[dict]:
    if metric not in runs.column_names or "used" not in runs.column_names:
        return []
    cols = {k: runs.column(k).to_pylist() for k in keys}
    values, used = runs.column(metric).to_pylist(), runs.column("used").to_pylist()
    out = []
    for i, ok in enumerate(used):
        value = values[i]
        if ok and value is not None and math.isfinite(value):
            out.append({"params": {k: cols[k][i] for k in keys}, "value": float(value)})
    return out


def _distribution(dist: dict, observed: list):
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in observed)
    for kind, bounds in dist.items():
        if kind in ("int", "uniform", "loguniform") and numeric and isinstance(bounds, list):
            lo, hi = min(float(bounds[0]), *observed), max(float(bounds[1]), *observed)
            if kind == "int":
                return IntDistribution(int(lo), int(hi))
            return FloatDistribution(lo, hi, log=kind == "loguniform" and lo > 0)
    return CategoricalDistribution(sorted(set(observed), key=str))


def importances(runs: pa.Table, space: dict | None, metric: str = "val_top1") -> list[dict]:
    """[{parameter, importance}] by fANOVA, most important first; [] when it cannot be measured
    (fewer than MIN_RUNS finished runs, no varied parameter present in every run)."""
    if not isinstance(space, dict):
        return []
    keys = [k for k, d in space.items() if isinstance(d, dict) and k in runs.column_names]
    rows = _rows(runs, keys, metric)
    keys = [
        k
        for k in keys
        if all(r["params"][k] is not None and not isinstance(r["params"][k], dict | list) for r in rows)
        and len({str(r["params"][k]) for r in rows}) > 1
    ]
    if len(rows) < MIN_RUNS or not keys:
        return []
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    dists = {k: _distribution(space[k], [r["params"][k] for r in rows]) for k in keys}
    study = optuna.create_study(direction="maximize")
    for r in rows:
        params = {k: r["params"][k] for k in keys}
        study.add_trial(optuna.trial.create_trial(params=params, distributions=dists, value=r["value"]))
    evaluator = optuna.importance.FanovaImportanceEvaluator(seed=0)
    found = optuna.importance.get_param_importances(study, evaluator=evaluator, normalize=True)
    return [{"parameter": k, "importance": float(v), "runs": len(rows)} for k, v in found.items()]


def write_importance(rows: list[dict], out_dir: Path, metric: str) -> Path:
    path = out_dir / CSV_FILE
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["parameter", "importance", "metric", "evaluator", "runs"])
        for r in rows:
            writer.writerow([r["parameter"], f"{r['importance']:.4f}", metric, "fanova", r["runs"]])
    return path


def importance_figure(rows: list[dict], out_dir: Path, metric: str) -> list[Path]:
    fig, ax = axes(f"Hyperparameter importance for {metric} (fANOVA)", "importance", "")
    names = [r["parameter"] for r in rows][::-1]
    ax.barh(names, [r["importance"] for r in rows][::-1], color="#4c72b0")
    ax.set_xlim(0, 1)
    return save(fig, out_dir, "hyperparameter_importance")


def parallel_figure(runs: pa.Table, keys: list[str], out_dir: Path, metric: str) -> list[Path]:
    """One line per finished run across the searched parameters (each axis scaled to [0, 1];
    categories at even spacing), coloured by the validation objective."""
    from matplotlib import colormaps

    rows = _rows(runs, keys, metric)
    if not rows or not keys:
        return []
    axes_values = []
    for k in keys:
        raw = [r["params"][k] for r in rows]
        if all(isinstance(v, int | float) and not isinstance(v, bool) for v in raw if v is not None):
            nums = np.array([np.nan if v is None else float(v) for v in raw])
            if np.nanmin(nums) > 0 and np.nanmax(nums) / np.nanmin(nums) > 20:
                nums = np.log10(nums)
            lo, hi = np.nanmin(nums), np.nanmax(nums)
            axes_values.append((nums - lo) / (hi - lo) if hi > lo else np.full(len(nums), 0.5))
        else:
            cats = sorted({str(v) for v in raw}, key=str)
            pos = {c: i / max(len(cats) - 1, 1) for i, c in enumerate(cats)}
            axes_values.append(np.array([pos[str(v)] for v in raw]))
    values = np.array([r["value"] for r in rows])
    norm = (values - values.min()) / (np.ptp(values) or 1.0)
    fig, ax = axes(f"Parallel coordinates, coloured by {metric}", "", "scaled value")
    cmap = colormaps["viridis"]
    xs = np.arange(len(keys) + 1)
    for i in np.argsort(norm):
        ys = [a[i] for a in axes_values] + [norm[i]]
        ax.plot(xs, ys, color=cmap(norm[i]), alpha=0.7, lw=1)
    ax.set_xticks(xs, [*keys, metric], rotation=20, ha="right")
    return save(fig, out_dir, "parallel_coordinates")


def analyse_importance(runs: pa.Table, space: dict | None, out_dir: Path, metric: str = "val_top1"):
    """(importance rows, csv path or None, figure paths)."""
    rows = importances(runs, space, metric)
    paths: list[Path] = []
    csv_path = None
    if rows:
        csv_path = write_importance(rows, out_dir, metric)
        paths += importance_figure(rows, out_dir / "figures", metric)
        paths += parallel_figure(runs, [r["parameter"] for r in rows], out_dir / "figures", metric)
    return rows, csv_path, paths
