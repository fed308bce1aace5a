"""`python -m vitscale.bench.worker`: measure one configuration in a fresh process.

Reads one JSON object on stdin — {"config": BenchmarkConfig, "point": {...}, "device": "cpu",
"timed": bool} (its memory, then, if timed, its timing) or {"config": ..., "cell": [points...],
"device": ...} (time them round-robin, see `measure.measure_interleaved`) — and writes a line
`RECORD_PREFIX <json>` on stdout; the last such line is the answer. An untimed inference
configuration writes one more first, once its inference memory is in: if its training step meets
the OOM killer, that much survives (`isolate`).
A fresh process per configuration makes its peak RSS that configuration's own: the fixed cost of
Python and torch is its peak before the model is built, subtracted (`measure`).
"""

from __future__ import annotations

import json
import sys

from vitscale.bench import measure
from vitscale.bench.config import BenchmarkConfig

RECORD_PREFIX = "VITSCALE-BENCH-RECORD "


def main() -> None:
    request = json.loads(sys.stdin.read())
    if "cell" in request:
        config = BenchmarkConfig.model_validate(request["config"])
        out = measure.measure_interleaved(
            config, request["cell"], device=request.get("device"), count_flops=False
        )
    else:
        config = BenchmarkConfig.model_validate(request["config"])
        out = measure.measure_configuration(
            config,
            request["point"],
            device=request.get("device"),
            process_rss=True,
            timed=request.get("timed", True),
            on_partial=write,
        )
    write(out)


def write(record) -> None:
    sys.stdout.write(RECORD_PREFIX + json.dumps(record) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
