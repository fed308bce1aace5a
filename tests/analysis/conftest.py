"""Fixtures of the analysis tests: one SQLite MLflow store holding two tiny studies (see analysis_stores)."""

from __future__ import annotations

import pytest
from analysis_stores import write_bench_study, write_comparison_study, write_train_study


@pytest.fixture(scope="session")
def stores(tmp_path_factory) -> dict[str, str]:
    """One SQLite MLflow store holding the tiny studies (created once: MLflow's schema setup is slow)."""
    root = tmp_path_factory.mktemp("mlflow")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    write_train_study(uri, root / "artifacts_train")
    write_bench_study(uri, root / "artifacts_bench")
    write_comparison_study(uri, root / "artifacts_comparison")
    return {"uri": uri, "root": str(root)}
