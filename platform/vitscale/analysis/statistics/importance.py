"""Which searched hyperparameters mattered, per arm: Optuna's fANOVA importance of the space's
parameters for the validation objective (`importance.csv`, `figures/hyperparameter_importance`),
and a parallel-coordinates figure of the same runs (`figures/parallel_coordinates`).

Never pooled across arms or phases: pooled, a parameter whose range differs between arms takes the
credit for the arm difference (a comparison gave `train.lr` 0.61 for what was mixer x regime).
Comparison studies: one fANOVA per arm (`vitscale.arm`) over that arm's tuning runs (phase "tune")
only; the final phase re-runs one configuration over seeds and has nothing to attribute. Other
studies: one per mixer x regime cell that holds more than one configuration. The parameters of a
group are the space's entries whose `when:` holds for all its runs and that vary among them (what
that arm's own search varied). A group with fewer than MIN_CONFIGS distinct configurations, or fewer than
CONFIGS_PER_PARAMETER per varied parameter, gets "too few runs (n)" instead of numbers. Importances are shares of that group's explained variance
(they sum to 1 within a group, however small the group's spread of the objective, which is shown
beside them). Test metrics are never read.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pyarrow as pa

from vitscale.analysis.figures.canvas import axes, save
from vitscale.analysis.figures.parallel import parallel_coordinates
from vitscale.analysis.figures.style import SPARE_COLORS, legend
from vitscale.distribution_facts import DISTRIBUTION_FACTS
from vitscale.models.registry import mixer_order, regime_order
from vitscale.tracking.layout import arm_display, arm_key

MIN_CONFIGS = 4  # fewer distinct configurations in a group: no numbers
CONFIGS_PER_PARAMETER = 2  # and at least this many per varied parameter: a forest on fewer says nothing
CSV_FILE = "importance.csv"
CSV_HEADER = ["arm", "phase", "parameter", "importance", "metric", "evaluator", "runs", "configs", "note"]


def _groups(runs: pa.Table, comparison: bool) -> list[tuple[str, str, list[int]]]:
    """(arm tag, phase, row indices): comparison arms over their tuning runs, else mixer x regime cells."""
    if comparison:
        rows: dict[str, list[int]] = {}
        phase, arm = runs.column("phase").to_pylist(), runs.column("arm").to_pylist()
        for i, (p, a) in enumerate(zip(phase, arm, strict=True)):
            if p == "tune" and a:
                rows.setdefault(a, []).append(i)
        return [(a, "tune", r) for a, r in rows.items()]
    mixers, regimes = runs.column("mixer").to_pylist(), runs.column("regime").to_pylist()
    out = []
    for regime in regime_order([r for r in regimes if r is not None]):
        for mixer in mixer_order([m for m in mixers if m is not None]):
            cell = [i for i in range(runs.num_rows) if mixers[i] == mixer and regimes[i] == regime]
            if cell:
                out.append((arm_key({"model.mixer": mixer, "model.regime": regime}), "all", cell))
    return out


def _rows(runs: pa.Table, keys: list[str], metric: str, rows: list[int]) -> list[dict]:
    """The finished runs among `rows` with a finite objective: {row, params, value}."""
    if metric not in runs.column_names or "used" not in runs.column_names:
        return []
    cols = {k: runs.column(k).to_pylist() for k in keys}
    values, used = runs.column(metric).to_pylist(), runs.column("used").to_pylist()
    out = []
    for i in rows:
        value = values[i]
        if used[i] and value is not None and math.isfinite(value):
            out.append({"row": i, "params": {k: cols[k][i] for k in keys}, "value": float(value)})
    return out


def _scalar(value) -> bool:
    return value is not None and not isinstance(value, dict | list)


def _searched(runs: pa.Table, space: dict, rows: list[int]) -> list[str]:
    """The space's entries present in the table whose `when:` holds for every one of `rows`."""
    out = []
    for k, dist in space.items():
        if not isinstance(dist, dict) or k not in runs.column_names:
            continue
        when = dist.get("when") if isinstance(dist.get("when"), dict) else {}
        held = (
            ck in runs.column_names and {str(v) for v in runs.column(ck).take(rows).to_pylist()} <= {str(cv)}
            for ck, cv in when.items()
        )
        if all(held):
            out.append(k)
    return out


def _distribution(dist: dict, observed: list):
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in observed)
    for key, bounds in dist.items():
        facts = DISTRIBUTION_FACTS.get(key)  # None for `step`, `log`, `when`
        if facts is not None and not facts.listed and numeric and isinstance(bounds, list):
            lo, hi = min(float(bounds[0]), *observed), max(float(bounds[1]), *observed)
            if facts.integer:
                return IntDistribution(int(lo), int(hi))
            return FloatDistribution(lo, hi, log=facts.log_scale and lo > 0)
    return CategoricalDistribution(sorted(set(observed), key=str))


def fanova(rows: list[dict], space: dict, keys: list[str]) -> dict[str, float]:
    """Normalised fANOVA importance of `keys` over `rows` (one Optuna trial each), most important first."""
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    dists = {k: _distribution(space[k], [r["params"][k] for r in rows]) for k in keys}
    study = optuna.create_study(direction="maximize")
    for r in rows:
        params = {k: r["params"][k] for k in keys}
        study.add_trial(optuna.trial.create_trial(params=params, distributions=dists, value=r["value"]))
    evaluator = optuna.importance.FanovaImportanceEvaluator(seed=0)
    found = optuna.importance.get_param_importances(study, evaluator=evaluator, normalize=True)
    return {k: float(v) for k, v in found.items()}


def group_importance(runs: pa.Table, space: dict, rows: list[int], metric: str = "val_top1") -> dict:
    """One group's {runs, configs, spread, importance: [{parameter, importance}], reason}."""
    keys = _searched(runs, space, rows)
    found = _rows(runs, keys, metric, rows)
    keys = [k for k in keys if all(_scalar(r["params"][k]) for r in found)]
    configs = len({tuple(str(r["params"][k]) for k in keys) for r in found})
    values = [r["value"] for r in found]
    out = {
        "runs": len(found),
        "configs": configs,
        "spread": max(values) - min(values) if values else None,
        "importance": [],
        "reason": None,
    }
    varied = [k for k in keys if len({str(r["params"][k]) for r in found}) > 1]
    need = max(MIN_CONFIGS, CONFIGS_PER_PARAMETER * len(varied))
    if configs < need or not varied:
        out["reason"] = (
            f"too few runs ({len(found)} finished, {configs} configurations; "
            f"{need} needed for {len(varied)} varied parameters)"
        )
        return out
    if out["spread"] == 0:  # fANOVA has no variance to share out (it raises): e.g. every run at chance
        out["reason"] = f"every run scored the same {metric}: nothing to attribute"
        return out
    imp = fanova(found, space, varied)
    out["importance"] = [{"parameter": k, "importance": v} for k, v in imp.items()]
    return out


def importances(
    runs: pa.Table, space: dict | None, metric: str = "val_top1", comparison: bool = False
) -> list[dict]:
    """Per arm (comparison: tuning runs only) or mixer x regime cell: {arm, phase, runs, configs,
    spread, importance, reason}; [] when the study has no space. Non-comparison cells with a single
    configuration are left out (nothing was searched there)."""
    if not isinstance(space, dict):
        return []
    out = []
    for arm, phase, rows in _groups(runs, comparison):
        got = {"arm": arm, "phase": phase, **group_importance(runs, space, rows, metric)}
        if comparison or got["configs"] > 1:
            out.append(got)
    return out


def write_importance(groups: list[dict], out_dir: Path, metric: str) -> Path:
    """One row per arm and parameter; an arm without numbers gets one row with its reason."""
    path = out_dir / CSV_FILE
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(CSV_HEADER)
        for g in groups:
            head, tail = [g["arm"], g["phase"]], [metric, "fanova", g["runs"], g["configs"]]
            if not g["importance"]:
                writer.writerow([*head, "", "", *tail, g["reason"]])
            for r in g["importance"]:
                writer.writerow([*head, r["parameter"], f"{r['importance']:.4f}", *tail, ""])
    return path


def importance_figure(groups: list[dict], out_dir: Path, metric: str) -> list[Path]:
    """Grouped horizontal bars: one bar per arm for each parameter that arm searched."""
    shown = [g for g in groups if g["importance"]]
    names = list(dict.fromkeys(r["parameter"] for g in shown for r in g["importance"]))
    fig, ax = axes(f"Hyperparameter importance for {metric} per arm (fANOVA)", "importance", "")
    height = 0.8 / len(shown)
    for j, g in enumerate(shown):
        imp = {r["parameter"]: r["importance"] for r in g["importance"]}
        ys = [i - 0.4 + (j + 0.5) * height for i in range(len(names)) if names[i] in imp]
        ax.barh(
            ys,
            [imp[n] for n in names if n in imp],
            height=height,
            color=SPARE_COLORS[j % len(SPARE_COLORS)],
            label=arm_display(g["arm"]),
        )
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    legend(ax, beside=len(shown) > 4)
    return save(fig, out_dir, "hyperparameter_importance")


def parallel_figure(
    runs: pa.Table, keys: list[str], members: dict[int, str], out_dir: Path, metric: str
) -> list[Path]:
    """One line per finished run of `members` (row -> arm) across the searched parameters, coloured
    by the objective (`analysis.figures.parallel`: labelled axes, a colour bar). With several arms the arm
    is the first axis, so a difference between arms shows as the arm's."""
    found = _rows(runs, keys, metric, list(members))
    if not found or not keys:
        return []
    columns = {}
    if len(set(members.values())) > 1:
        columns["arm"] = [arm_display(members[r["row"]]) for r in found]
    columns.update({k: [r["params"][k] for r in found] for k in keys})
    fig = parallel_coordinates(columns, [r["value"] for r in found], metric)
    return save(fig, out_dir, "parallel_coordinates")


def analyse_importance(
    runs: pa.Table, space: dict | None, out_dir: Path, metric: str = "val_top1", comparison: bool = False
):
    """(per-arm importance groups, csv path or None, figure paths)."""
    groups = importances(runs, space, metric, comparison)
    paths: list[Path] = []
    csv_path = write_importance(groups, out_dir, metric) if groups else None
    shown = [g for g in groups if g["importance"]]
    if shown:
        paths += importance_figure(groups, out_dir / "figures", metric)
        keys = list(dict.fromkeys(r["parameter"] for g in shown for r in g["importance"]))
        arms = {g["arm"] for g in shown}
        members = {i: arm for arm, _, rows in _groups(runs, comparison) if arm in arms for i in rows}
        paths += parallel_figure(runs, keys, members, out_dir / "figures", metric)
    return groups, csv_path, paths
