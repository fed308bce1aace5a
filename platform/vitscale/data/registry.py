"""Name -> loader registry for data sets (one file per data set in vitscale/data/datasets/, each
declared in that package's `__init__.py` and imported when first loaded).

A loader may carry a recommended training recipe (`recipe=`): the values of `train.*` that
apply wherever a trial leaves them unset (see `TrialConfig.resolved`), so a first run on a
small set like digits trains properly without the user knowing its recipe.
"""

from collections.abc import Callable
from typing import Any

from vitscale.models.registry import _Registry

DATASETS = _Registry("vitscale.data.datasets")


def declare_dataset(
    name: str,
    loader: str,
    recipe: dict[str, Any] | None = None,
    native_size: int | None = None,
    stream: str | None = None,
) -> None:
    """Register the loader "module:function" under `name`, imported when the set is first loaded;
    `native_size`: the side its images are stored at, what `vitscale train` trains at by default;
    `stream`: "module:function" giving its index of images (`data.loader: stream`), if it has one."""
    DATASETS.declare(name, loader, recipe=dict(recipe or {}), native_size=native_size, stream=stream)


def register_dataset(name: str, recipe: dict[str, Any] | None = None) -> Callable:
    """Decorator: register a loader already at hand (a plugin's, a test's)."""

    def decorate(loader: Callable) -> Callable:
        loader.recipe = dict(recipe or {})
        return DATASETS.register(name)(loader)

    return decorate


def native_size(dataset: str, default: int) -> int:
    """The side a data set's images are stored at, where it declares one, else `default` (an
    unknown name too: validation then names it, with the choices)."""
    if dataset not in DATASETS:
        return default
    return DATASETS.fact(dataset, "native_size") or default


def recommended_recipe(dataset: str) -> dict[str, Any]:
    """The data set's recommended `train.*` values ({} when it has none)."""
    return dict(DATASETS.fact(dataset, "recipe") or {})


# How a trial holds its data (`data.loader`): "module:function" of (DataConfig, device) -> the
# trial's data (what `vitscale.data.batches` reads), and `needs`, the data set declaration it
# takes (`stream`: a reader of the set's index), None where every data set has it.
LOADERS = _Registry("vitscale.data.registry", "loader")
LOADERS.declare("memory", "vitscale.data.bundle:load_resident", needs=None)
LOADERS.declare("stream", "vitscale.data.stream_bundle:load_stream", needs="stream")


def loadable(dataset: str, loader: str) -> bool:
    """Whether `dataset` can be held by `loader` (a streamed set needs a reader of its index)."""
    needs = LOADERS.fact(loader, "needs")
    return needs is None or DATASETS.fact(dataset, needs) is not None
