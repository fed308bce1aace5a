"""Data set loaders; importing a file registers it in `vitscale.data.DATASETS`.

A new data set is one file here with `@register_dataset("name")` on a function
`(DataConfig) -> Source`, plus one import line below.
"""

from vitscale.data.datasets import cifar, digits, imagefolder, mnist, synthetic  # noqa: F401
