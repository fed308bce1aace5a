"""Tune's per-trial loggers are the study's choice: result.json always, TensorBoard on request, and
Tune's automatic ones (which ran in the driver on every reported epoch) off."""

from __future__ import annotations

from ray.tune.logger import JsonLoggerCallback
from ray.tune.logger.tensorboardx import TBXLoggerCallback
from tests.tune.study_helpers import write_study

from vitscale.study import load_study
from vitscale.tracking.tune_loggers import AUTO_LOGGERS_OFF, tune_logger_callbacks
from vitscale.tune import cluster


def test_json_always_tensorboard_on_request_and_tunes_automatic_loggers_off(tmp_path):
    default = load_study(write_study(tmp_path, "loggers"))
    assert [type(c) for c in tune_logger_callbacks(default)] == [JsonLoggerCallback]
    board = default.model_copy(update={"tracking": default.tracking.model_copy(update={"tensorboard": True})})
    assert [type(c) for c in tune_logger_callbacks(board)] == [JsonLoggerCallback, TBXLoggerCallback]
    assert AUTO_LOGGERS_OFF.items() <= cluster.DRIVER_ENV.items()
