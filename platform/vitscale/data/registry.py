"""Name -> loader registry for data sets (one file per data set in vitscale/data/)."""

from vitscale.models.registry import _Registry

DATASETS = _Registry("vitscale.data.datasets")
register_dataset = DATASETS.register
