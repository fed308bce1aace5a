"""Reading a study: MLflow runs or runs.parquet -> one Arrow table, its columns normalised, each run's outcome."""
