"""`vitscale data info`: JSON summary, throughput, and one-line errors with exit code 2."""

from __future__ import annotations

import json
import pickle

import pytest

from vitscale.cli import main


def test_info_json_with_throughput(capsys):
    main(["data", "info", "--dataset", "synthetic", "--num-train", "64", "--num-val", "16", "--resolution", "16",
          "--throughput", "--seconds", "0.05", "--batch-size", "32", "--json"])  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert out["num_train"] == 64 and out["num_val"] == 16 and out["source_size"] == [16, 16]
    assert out["throughput"]["images_per_second"] > 0 and out["throughput"]["batch_size"] == 32


def test_info_table(capsys):
    main(["data", "info"])
    out = capsys.readouterr().out
    assert "num_train" in out and "1295" in out and "num_test" in out and "359" in out


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["data", "info", "--dataset", "cifar10", "--root", "/no/such/dir"], "/no/such/dir"),
        (["data", "info", "--dataset", "nope"], "dataset: unknown data set"),
        (["data", "info", "--resolution", "2"], "resolution"),
    ],
)
def test_user_errors_are_one_line_exit_2(capsys, argv, needle):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("kind, classes", [("cifar10", 10), ("cifar100", 100)])
def test_info_reports_three_splits_of_an_official_archive(tmp_path, capsys, cifar, kind, classes):
    """train + val = the official training size, test = the official test size."""
    files = cifar.files(kind, per_batch=40)
    root = cifar.write_archive(tmp_path, kind, files)
    main(["data", "info", "--dataset", kind, "--root", str(root), "--json"])
    out = json.loads(capsys.readouterr().out)

    def rows(name: str) -> int:
        return len(pickle.loads(files[name], encoding="bytes")[b"data"])

    official_train = sum(rows(n) for n in files if n.startswith(("data_batch", "train")))
    assert out["num_train"] + out["num_val"] == official_train
    assert out["num_test"] == rows("test_batch" if kind == "cifar10" else "test")
    assert 0 < out["num_val"] < official_train // 2


def test_throughput_measures_twice_in_one_process(capsys):
    """The lazy `vitscale.data.throughput` stays the function after its module of the same name
    is imported (it once became the module: 'module' object is not callable)."""
    argv = ["data", "info", "--dataset", "synthetic", "--num-train", "32", "--num-val", "8", "--resolution", "8",
            "--throughput", "--seconds", "0.01", "--batch-size", "16", "--json"]  # fmt: skip
    for _ in range(2):
        main(argv)
        assert json.loads(capsys.readouterr().out)["throughput"]["images_per_second"] > 0
