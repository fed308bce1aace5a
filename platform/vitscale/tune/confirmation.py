"""Low-fidelity tuning confirmed at full fidelity: the phase `confirm-<i>` of a comparison arm.

An arm tuned at `search.fidelity` (fewer images or epochs) ranks its points on a cheaper trial
than the one its final runs train, and that ranking need not hold: a learning rate that wins in
3 epochs can lose in 30. So its `search.confirm.top_k` best qualified points (validation means,
`tune.selection`) are re-run at full fidelity on the first tuning seed — a seed selection has
seen, never a final one — and the arm's configuration is chosen among those runs on validation,
by the same rules (a failed, errored or short run does not qualify). An arm with fewer qualified
points confirms those it has, and its record says so.

The record (`ArmChoice.confirmation`, in comparison.json) keeps, per confirmed point in its
low-fidelity order, both scores and which was chosen, and Spearman's ρ between the two scores
with its n (`analysis.statistics.rank_correlation`; undefined below 3 points): the evidence the
report shows that the cheap ranking transferred, or that it did not and the choice changed.
"""

from __future__ import annotations

import json
from typing import Any

from ray import tune

from vitscale.analysis.statistics.rank_correlation import spearman
from vitscale.tracking.tune_callback import TrialDescription
from vitscale.tune.selection import ArmChoice, choose
from vitscale.tune.tuner import describe_trial


def _key(point: dict[str, Any]) -> str:
    return json.dumps(point, sort_keys=True, default=str)


def top_points(low: ArmChoice, top_k: int, mode: str) -> list[dict[str, Any]]:
    """The arm's `top_k` best qualified tuning points (score records), best first."""
    return low.ranked(mode)[:top_k]


def phase_search(top: list[dict[str, Any]], seed: int):
    """(search_alg, param_space, num_samples) of a confirmation phase: a grid over the points (in
    their low-fidelity order) on one seed."""
    space = {"point": tune.grid_search([dict(s["point"]) for s in top]), "seed": tune.grid_search([seed])}
    return None, space, 1


def samples(top: list[dict[str, Any]]) -> dict[str, int]:
    """{point: its Optuna trial number in tuning} for the points that have one (sampled, not grid)."""
    return {_key(s["point"]): s["sample"] for s in top if s.get("sample") is not None}


def describe_confirmation(config: dict, spec, samples: dict[str, int]) -> TrialDescription:
    """A confirmation run described like the tuning run of its point: a sampled point keeps its
    tuning number ('confirm · ssog · ode · #7 · s0' beside 'tune · ssog · ode · #7 · s0')."""
    sample = samples.get(_key(config["point"]))
    return describe_trial({**config, "sample": sample} if sample is not None else config, spec=spec)


def confirmed_choice(
    low: ArmChoice,
    results,
    *,
    top: list[dict[str, Any]],
    top_k: int,
    seed: int,
    metric: str,
    mode: str,
    fidelity: dict[str, Any] | None,
) -> ArmChoice:
    """The arm's choice from its confirmation `results` (Tune results over the `top` points on `seed`),
    with the confirmation record; the tuning record (`scores`, counts) stays the low-fidelity one."""
    full = choose(results, low.arm, low.values, [seed], metric, mode)
    full_scores = {_key(s["point"]): s["mean"] for s in full.scores}
    chosen = _key(full.point) if full.point is not None else None
    rows = [
        {
            "point": dict(s["point"]),
            "sample": s.get("sample"),
            "low_rank": rank,
            "low_score": s["mean"],
            "full_score": full_scores.get(_key(s["point"])),
            "chosen": _key(s["point"]) == chosen,
        }
        for rank, s in enumerate(top, start=1)
    ]
    rank_correlation = spearman(
        [r["low_score"] for r in rows],
        [_missing(r["full_score"]) for r in rows],
        names=("low-fidelity", "full-fidelity"),
    )
    notes = []
    if len(top) < top_k:
        notes.append(f"only {len(top)} of top_k {top_k} points qualified in tuning: confirmed those")
    failed = sum(r["full_score"] is None for r in rows)
    if failed:
        notes.append(f"{failed} of {len(rows)} confirmation runs did not qualify (failed or short)")
    if full.point is None:
        notes.append("no confirmation run qualified: the arm has no configuration")
    confirmation = {
        "top_k": top_k,
        "confirmed": len(rows),
        "seed": seed,
        "metric": metric,
        "mode": mode,
        "fidelity": dict(fidelity or {}),
        "points": rows,
        "rho": rank_correlation.rho,
        "n": rank_correlation.n,
        "rho_note": rank_correlation.note,
        "low_fidelity_point": low.point,
        "low_fidelity_score": low.score,
        "changed": full.point is not None and full.point != low.point,
        "note": "; ".join(notes),
    }
    return ArmChoice(
        arm=low.arm,
        values=dict(low.values),
        point=full.point,
        score=full.score,
        tuning_trials=low.tuning_trials,
        qualified_points=low.qualified_points,
        scores=low.scores,
        confirmation=confirmation,
    )


def _missing(value: float | None) -> float:
    return float("nan") if value is None else value
