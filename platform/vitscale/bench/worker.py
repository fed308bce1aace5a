"""`python -m vitscale.bench.worker`: measure one configuration in a fresh process.

Reads one JSON object on stdin — {"config": BenchmarkConfig, "point": {...}, "device": "cpu"},
{"config": ..., "cell": [points...], "device": ...} (time them round-robin, see
`measure.measure_interleaved`) or {"idle": true, "threads": N} — and writes one line
`RECORD_PREFIX <json>` on stdout.
A fresh process per configuration makes its peak RSS that configuration's own (plus the
fixed cost of Python and torch, which the idle mode measures). The idle mode imports exactly
what a measuring worker imports and then stops.
"""

from __future__ import annotations

import json
import sys

import torch

from vitscale.bench import measure
from vitscale.bench.config import BenchmarkConfig
from vitscale.bench.memory import own_peak_rss_mb

RECORD_PREFIX = "VITSCALE-BENCH-RECORD "


def main() -> None:
    request = json.loads(sys.stdin.read())
    if request.get("idle"):
        if request.get("threads"):
            torch.set_num_threads(int(request["threads"]))
        out = {"peak_rss_mb": own_peak_rss_mb()}
    elif "cell" in request:
        config = BenchmarkConfig.model_validate(request["config"])
        out = measure.measure_interleaved(
            config, request["cell"], device=request.get("device"), count_flops=False
        )
    else:
        config = BenchmarkConfig.model_validate(request["config"])
        out = measure.measure_configuration(
            config, request["point"], device=request.get("device"), process_rss=True
        )
    sys.stdout.write(RECORD_PREFIX + json.dumps(out) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
