"""Ray Tune's own files in each trial folder: `result.json` always, TensorBoard's event files when
the study asks for them (`tracking.tensorboard: true`).

Why not Tune's defaults: Tune adds a JSON, a CSV and a TensorBoard logger by itself (the last
whenever tensorboardX is importable, and ray[tune] installs it), and runs them in the driver on
every reported epoch while the trial's worker waits for the driver to take its result. On the
quickstart (epochs of ~0.25 s) the TensorBoard logger took 6.6 ms and the CSV logger 2.0 ms of the
driver per result, against 0.3 ms for JSON (cProfile of the driver, 108 results). MLflow is the
record vitscale reads; `result.json` stays because it is the trial folder's own per-epoch record
(and what `ray.tune.ExperimentAnalysis` reads), progress.csv duplicated it. The driver turns
Tune's automatic loggers off (`tune.cluster.DRIVER_ENV`) and adds these.
"""

from __future__ import annotations

from ray.tune.logger import JsonLoggerCallback
from ray.tune.logger.tensorboardx import TBXLoggerCallback

AUTO_LOGGERS_OFF = {"TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1"}  # Ray 2.60 reads it from the environment


def tune_logger_callbacks(spec) -> list:
    """The Tune logger callbacks of a study: JSON, and TensorBoard when `tracking.tensorboard`."""
    return [JsonLoggerCallback(), *([TBXLoggerCallback()] if spec.tracking.tensorboard else [])]
