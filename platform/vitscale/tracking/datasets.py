"""A trial's data sets as MLflow dataset inputs (the UI's Dataset column).

One input per split the trial uses: `train`, `validation` (held out of train) and `test`, each
named after the data set (`digits`, `cifar100`, ...) with its size and a digest. They are derived
from the trial's resolved data parameters on the driver, which never loads the data itself: the
size is the configured cap (`data.num_train` / `num_val` / `num_test`; profile `num_rows: null`
when the whole split is used) and the digest is a hash of every `data.*` parameter, so two runs
share a digest exactly when they read the same data the same way.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

SPLITS = (("train", "data.num_train"), ("validation", "data.num_val"), ("test", "data.num_test"))


def dataset_inputs(params: Mapping[str, Any]) -> list[dict[str, Any]]:
    """JSON-able descriptions of the trial's dataset inputs (see `to_entities`)."""
    data = {k: params[k] for k in sorted(params) if k.startswith("data.")}
    name = str(data.get("data.dataset", "unknown"))
    root = data.get("data.root")
    source = str(root) if root not in (None, "None", "") else f"vitscale:{name}"
    digest = hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]
    inputs = []
    for split, key in SPLITS:
        size = data.get(key)
        size = None if size in (None, "None") else int(size)
        inputs.append(
            {
                "name": f"{name}-{split}",
                "digest": digest,
                "source_type": "local",
                "source": json.dumps({"uri": source, "split": split}),
                "profile": json.dumps({"num_rows": size, "resolution": data.get("data.resolution")}),
                "context": split,
            }
        )
    return inputs


def to_entities(inputs: list[dict[str, Any]]) -> list:
    from mlflow.entities import Dataset, DatasetInput, InputTag
    from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

    return [
        DatasetInput(
            Dataset(d["name"], d["digest"], d["source_type"], d["source"], profile=d["profile"]),
            tags=[InputTag(MLFLOW_DATASET_CONTEXT, d["context"])],
        )
        for d in inputs
    ]
