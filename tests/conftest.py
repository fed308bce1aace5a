"""Suite-wide fixtures: the real local Ray cluster and MLflow server live in fixtures_cluster."""

pytest_plugins = ["fixtures_cluster"]
