"""A failed trial's reason reaches MLflow when the callback runs: Tune has written the error into the
driver's staging folder but not yet copied it to storage, where `trial.get_error()` looks."""

from __future__ import annotations

from types import SimpleNamespace

from vitscale.tracking.tune_callback import error_text


def test_the_error_is_read_from_the_drivers_staging_copy_before_storage_has_it(tmp_path):
    staged = tmp_path / "error.txt"
    staged.write_text(
        "Failure # 1\nUserError: trial.train.device: 'cuda' requested but CUDA is not available\n"
    )
    trial = SimpleNamespace(error_file=str(staged), get_error=lambda: None)
    assert error_text(trial).strip().splitlines()[-1].endswith("CUDA is not available")


def test_without_a_staging_copy_the_stored_error_is_used(tmp_path):
    trial = SimpleNamespace(error_file=str(tmp_path / "absent.txt"), get_error=lambda: "stored")
    assert error_text(trial) == "stored"
    assert error_text(SimpleNamespace(error_file=None, get_error=lambda: None)) is None
