"""`vitscale train --set PATH=VALUE`: any trial key, applied after the flags; bad ones are one line, exit 2."""

from __future__ import annotations

import json

from vitscale.cli import main

TINY = ["--mixer", "ssog", "--width", "16", "--depth", "1", "--heads", "2", "--patch-size", "4"]
TINY += ["--resolution", "16", "--batch-size", "64", "--epochs", "1", "--no-track"]


def test_set_reaches_model_data_and_train_and_wins_over_the_flags(capsys, tmp_path):
    ckpt = tmp_path / "ckpt"
    sets = ["model.width=24", "model.ssog.num_gaussians=2", "train.lr=3e-3", "data.num_train=128"]
    main(["train", *TINY, "--json", "--checkpoint-dir", str(ckpt), *(a for s in sets for a in ("--set", s))])
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["epoch"] == 1
    trial = json.loads((ckpt / "trial.json").read_text())  # the config the run was trained with
    assert trial["model"]["width"] == 24  # --set beat --width 16
    assert trial["model"]["ssog"]["num_gaussians"] == 2
    assert trial["train"]["lr"] == 3e-3 and trial["data"]["num_train"] == 128
    assert trial["train"]["epochs"] == 1 and trial["data"]["resolution"] == 16  # the flags still count
