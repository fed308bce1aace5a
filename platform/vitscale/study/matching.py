"""Parameter-matched arms (`match: {params: model.width | model.mlp_ratio}` in a comparison).

"SSoG has fewer parameters at equal width" and "SSoG is better at equal parameters" are different
claims. With `match`, every non-reference arm gets the value of the matched key that brings its
parameter count within `match.tolerance` of its reference arm's (the arm with the `reference`
values and the arm's other values), counted on the base trial's model as built (`trial.model`,
before any searched value: a searched knob that adds parameters, such as a position embedding,
moves both phases alike). `model.mlp_ratio` can always match (one hidden unit is a fraction of a
percent); `model.width` moves in steps of `heads` and is refused where no step is close enough.
The matched value is part of the arm in both phases; the arm's tag stays its `arms:` values.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from vitscale import models  # models.build / models.count_params import torch when first read
from vitscale.study.spec import StudySpec
from vitscale.train.config import TrialConfig

WIDEST = 8  # width candidates reach this many times the base width


class MatchError(ValueError):
    """No value of the matched key brings the arm within tolerance (the message says how close)."""


@lru_cache(maxsize=4096)
def _params(model_json: str) -> int:
    import torch  # import time matters: only a parameter-matched comparison counts, not `study validate`

    with torch.device("meta"):  # no memory, no init cost: only shapes are needed
        return models.count_params(models.build(json.loads(model_json)))


def model_params(model: dict[str, Any]) -> int:
    """Parameters of the model a (dumped) model config builds."""
    return _params(
        json.dumps({k: v for k, v in model.items() if k != "image_size"}, sort_keys=True, default=str)
    )


def matched_values(
    spec: StudySpec, arm: Mapping[str, Any], trial_of: Callable[[Mapping[str, Any]], TrialConfig]
) -> dict[str, Any]:
    """{matched key: value} for `arm` ({} without `match`, or for a reference arm). `trial_of(values)`
    builds the base trial with those values set (`study.comparison`)."""
    if spec.match is None or spec.reference is None:
        return {}
    reference = {**arm, **spec.reference}
    if dict(reference) == dict(arm):
        return {}
    target = model_params(trial_of(reference).model.model_dump(mode="json"))
    model = trial_of(arm).model.model_dump(mode="json")
    solve = _solve_width if spec.match.params == "model.width" else _solve_mlp_ratio
    value, got = solve(model, target)
    error = abs(got - target) / target
    if error > spec.match.tolerance:
        raise MatchError(
            f"{spec.match.params}: the closest value, {value}, gives {got:,} parameters against the "
            f"reference's {target:,} ({error:.1%} > tolerance {spec.match.tolerance:.0%}); match on "
            "model.mlp_ratio, or raise match.tolerance"
        )
    return {spec.match.params: value}


def _solve_width(model: dict[str, Any], target: int) -> tuple[int, int]:
    """The multiple of `heads` whose parameter count is closest to `target`."""
    heads, base = model["heads"], model["width"]
    candidates = range(heads, WIDEST * max(base, heads) + 1, heads)
    counts = {w: model_params({**model, "width": w}) for w in candidates}
    best = min(counts, key=lambda w: (abs(counts[w] - target), w))
    return best, counts[best]


def _solve_mlp_ratio(model: dict[str, Any], target: int) -> tuple[float, int]:
    """The MLP hidden width (parameters are linear in it) closest to `target`, as a ratio that
    `int(width * ratio)` turns back into exactly that hidden width."""
    width = model["width"]

    def at(hidden: int) -> tuple[float, int]:
        ratio = (hidden + 0.5) / width
        return ratio, model_params({**model, "mlp_ratio": ratio})

    (_, one), (_, two) = at(1), at(2)
    hidden = max(1, round(1 + (target - one) / (two - one)))
    return min((at(h) for h in (hidden - 1, hidden, hidden + 1) if h >= 1), key=lambda r: abs(r[1] - target))
