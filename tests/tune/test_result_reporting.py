"""A trial of a study whose scheduler never acts on a result trains on while the driver takes it;
with a scheduler (or a pruning searcher, or a population) it waits at each epoch, as Tune's own
reports do. Checked on real Ray: a driver slow to take results (a callback sleeping 1 s) and a
trial that notes when each of its reports returned."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TESTS / "tune")]

from study_helpers import cli_env, write_study  # noqa: E402

from vitscale.study import load_study  # noqa: E402
from vitscale.tune.result_reporting import waits_for_driver  # noqa: E402


@pytest.mark.parametrize(
    "scheduler, search, waits",
    [
        ({"type": "fifo"}, {"algorithm": "tpe"}, False),
        ({"type": "fifo"}, {"algorithm": "grid"}, False),
        ({"type": "asha"}, {"algorithm": "tpe"}, True),
        ({"type": "median"}, {"algorithm": "tpe"}, True),
        ({"type": "hyperband"}, {"algorithm": "bohb"}, True),
        ({"type": "pbt"}, {"algorithm": "random", "num_samples": 2}, True),
    ],
)
def test_only_a_study_nothing_acts_on_trains_on(tmp_path, scheduler, search, waits):
    lrs = [1.0e-3, 1.0e-2]
    space = {"train.lr": {"grid": lrs} if search["algorithm"] == "grid" else {"loguniform": lrs}}
    spec = load_study(write_study(tmp_path, "r", scheduler=scheduler, search=search, space=space))
    assert waits_for_driver(spec) is waits


PROBE = textwrap.dedent(
    """
    import json, sys, time, ray
    from ray import tune
    from vitscale.tune.result_reporting import report_without_waiting

    OUT, TRAIN_ON = sys.argv[1], sys.argv[2] == "1"

    def trial(config):
        if TRAIN_ON:
            report_without_waiting()
        for epoch in range(1, 4):
            tune.report({"epoch": epoch})
            with open(OUT + ".trial", "a") as f:
                f.write(json.dumps([epoch, time.time()]) + "\\n")

    class SlowDriver(tune.Callback):
        def on_trial_result(self, iteration, trials, trial, result, **info):
            time.sleep(1.0)
            with open(OUT + ".driver", "a") as f:
                f.write(json.dumps([result["epoch"], time.time()]) + "\\n")

    ray.init(num_cpus=1, logging_level="ERROR", log_to_driver=False)
    tune.Tuner(trial, run_config=tune.RunConfig(storage_path=OUT + ".store", callbacks=[SlowDriver()])).fit()
    """
)


def _returned_before_taken(tmp_path: Path, train_on: bool) -> list[bool]:
    out = str(tmp_path / ("on" if train_on else "wait"))
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, out, "1" if train_on else "0"],
        capture_output=True, text=True, timeout=300, env=cli_env(), cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    returned = dict(json.loads(line) for line in Path(out + ".trial").read_text().splitlines())
    taken = dict(json.loads(line) for line in Path(out + ".driver").read_text().splitlines())
    return [returned[epoch] < taken[epoch] for epoch in (1, 2)]  # the last epoch ends the trial


@pytest.mark.slow
def test_a_trial_trains_on_while_a_slow_driver_takes_its_result_and_waits_without_the_switch(tmp_path):
    assert _returned_before_taken(tmp_path, train_on=True) == [True, True]
    assert _returned_before_taken(tmp_path, train_on=False) == [False, False]
