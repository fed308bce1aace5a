"""Name -> loader registry for data sets (one file per data set in vitscale/data/datasets/).

A loader may carry a recommended training recipe (`recipe=`): the values of `train.*` that
apply wherever a trial leaves them unset (see `TrialConfig.resolved`), so a first run on a
small set like digits trains properly without the user knowing its recipe.
"""

from collections.abc import Callable
from typing import Any

from vitscale.models.registry import _Registry

DATASETS = _Registry("vitscale.data.datasets")


def register_dataset(name: str, recipe: dict[str, Any] | None = None) -> Callable:
    def decorate(loader: Callable) -> Callable:
        loader.recipe = dict(recipe or {})
        return DATASETS.register(name)(loader)

    return decorate


def recommended_recipe(dataset: str) -> dict[str, Any]:
    """The data set's recommended `train.*` values ({} when it has none)."""
    return dict(getattr(DATASETS[dataset], "recipe", {}))
