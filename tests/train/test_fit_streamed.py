"""`fit` on a set streamed from disk (`data.loader: stream`): it trains, reports and checkpoints as on
a resident set, the same numbers for a seed, and resumes exactly after a stop."""

from __future__ import annotations

import pytest

from vitscale.data.fake_images import generate
from vitscale.train import fit
from vitscale.train.checkpoint import find_checkpoint


class Stop(Exception):
    """Stands in for a killed worker after an epoch's checkpoint is written."""


@pytest.fixture(scope="module")
def jpeg_folder(tmp_path_factory):
    return generate(
        tmp_path_factory.mktemp("jpegs") / "set", "folder", train=120, test=30, classes=3, size=16
    )


def _trial(tiny_trial, root, loader: str, **train):
    data = {"dataset": "imagefolder", "root": str(root), "loader": loader, "num_workers": 1}
    return tiny_trial(data=data, train={"epochs": 2, "batch_size": 32, **train})


def test_a_streamed_trial_trains_as_the_resident_one(tiny_trial, jpeg_folder, tmp_path):
    resident = fit(_trial(tiny_trial, jpeg_folder, "memory"))
    streamed = fit(_trial(tiny_trial, jpeg_folder, "stream"), checkpoint_dir=tmp_path / "ckpt")
    keys = ("epoch", "train_loss", "val_loss", "val_top1", "images_seen")
    assert [[m[k] for k in keys] for m in streamed.history] == [
        [m[k] for k in keys] for m in resident.history
    ]
    assert streamed.metrics["test_top1"] == resident.metrics["test_top1"]
    assert streamed.metrics["images_seen"] == 2 * 96  # 108 training images (12 held out) in batches of 32
    assert streamed.model_config.in_chans == 3 and streamed.model_config.num_classes == 3
    assert (tmp_path / "ckpt" / "served" / "input_example.npy").is_file()  # read from disk like any batch


def test_a_streamed_trial_resumes_exactly(tiny_trial, jpeg_folder, tmp_path):
    config = _trial(tiny_trial, jpeg_folder, "stream", epochs=3)
    whole = fit(config)

    def stop_after_first(metrics, _folder):
        if metrics["epoch"] == 1:
            raise Stop

    with pytest.raises(Stop):
        fit(config, report=stop_after_first, checkpoint_dir=tmp_path)
    assert find_checkpoint(tmp_path) is not None
    resumed = fit(config, checkpoint_dir=tmp_path)
    assert [m["train_loss"] for m in resumed.history] == [m["train_loss"] for m in whole.history]
    assert resumed.metrics["val_top1"] == whole.metrics["val_top1"]
