"""A comparison execution's record, `comparison.json`, as `study show` prints it after a run.

The driver (`tune.comparison`) writes the record into the execution folder as each phase ends:
each arm's choice (its point, the validation score it was chosen on, the confirmation at full
fidelity with Spearman's ρ, and the tuned values at a range's edge). `study show FILE` finds the
study's newest execution (`<storage>/<name>/latest`) and prints one line per arm and one per
flagged value; read without Ray or MLflow, so it stays a command that only reads files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vitscale.errors import UserError
from vitscale.range_edge import number
from vitscale.tracking.layout import arm_display
from vitscale.tune.execution_files import LATEST_FILE, read_state, resolve

RECORD_FILE = "comparison.json"  # in an execution folder of a comparison study


def latest_record(spec) -> tuple[Path, dict] | None:
    """(the newest execution folder, its comparison record) of `spec`'s study; None when it has
    not run here (or its storage is not a local path)."""
    try:
        root = resolve(spec.storage)
    except UserError:  # a bucket URI: its records are not on this machine
        return None
    latest = root / spec.name / LATEST_FILE
    if not latest.is_file():
        return None
    folder = root / spec.name / latest.read_text().strip()
    record = folder / RECORD_FILE
    return (folder, read_state(record)) if record.is_file() else None


def arm_line(choice: dict[str, Any]) -> str:
    """'attention · ode: lr=3.2e-3, qk_norm=True (validation 0.912 at full fidelity; low → full
    fidelity ρ = 0.50, n = 3; the choice changed)'."""
    point = choice.get("point")
    if point is None:
        return f"{arm_display(choice['arm'])}: no configuration qualified"
    values = ", ".join(f"{k.rsplit('.', 1)[-1]}={number(v)}" for k, v in point.items()) or "the base trial"
    confirmation, score = choice.get("confirmation"), choice.get("score")
    facts = []
    if score is not None:
        facts.append(f"validation {number(score)}" + (" at full fidelity" if confirmation else ""))
    if confirmation:
        facts.append(transfer_text(confirmation))
    return f"{arm_display(choice['arm'])}: {values}" + (f" ({'; '.join(facts)})" if facts else "")


def transfer_text(confirmation: dict[str, Any]) -> str:
    """'low → full fidelity ρ = 0.50, n = 3; the choice changed' (or why ρ is undefined)."""
    rho = confirmation.get("rho")
    text = (
        f"low → full fidelity ρ = {rho:.2f}, n = {confirmation['n']}"
        if rho is not None
        else f"low → full fidelity ρ undefined ({confirmation.get('rho_note') or 'n = ' + str(confirmation['n'])})"
    )
    return text + ("; the choice changed" if confirmation.get("changed") else "")


def record_lines(spec) -> list[str]:
    """What `study show` adds after a run: the execution, each arm's choice, each edge flag."""
    found = latest_record(spec)
    if found is None:
        return []
    folder, record = found
    choices = list(record.get("choices", {}).values())
    state = "final phase done" if record.get("final_done") else "not finished"
    lines = [f"latest execution {folder} ({len(choices)} arm(s) chosen, {state}):"]
    lines += [f"tuned: {arm_line(c)}" for c in choices]
    edges = [(c["arm"], e) for c in choices for e in c.get("edges") or []]
    lines += [f"edge: {arm_display(arm)} {e['text']}" for arm, e in edges]
    if choices and not edges and not record.get("tuned_from"):
        lines.append("edge: none (no tuned value within 5% of its range's edge)")
    return lines


def record_json(spec) -> dict[str, Any] | None:
    """The same for `study show --json`: {folder, final_done, arms: {arm: {point, score,
    rank_transfer, edges}}}; None when the study has not run here."""
    found = latest_record(spec)
    if found is None:
        return None
    folder, record = found
    arms = {}
    for key, c in record.get("choices", {}).items():
        confirmation = c.get("confirmation") or {}
        transfer = {k: confirmation.get(k) for k in ("rho", "n", "changed")} if confirmation else None
        arms[key] = {"point": c.get("point"), "score": c.get("score"), "rank_transfer": transfer}
        arms[key]["edges"] = c.get("edges") or []
    return {"folder": str(folder), "final_done": bool(record.get("final_done")), "arms": arms}
