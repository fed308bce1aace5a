"""A study on Ray Tune (see docs/architecture.md). The package itself imports nothing heavy:
`study status` reads progress records without Ray or MLflow, and reaches MLflow's reading of an
execution without one (`study_status_from_mlflow`) only on first use (see vitscale.lazy)."""

from vitscale.lazy import lazy_exports

# name -> the module that defines it, imported when the name is first read (MLflow, Ray: seconds)
_HEAVY = {"study_status_from_mlflow": "vitscale.tune.status_from_mlflow"}

__getattr__ = lazy_exports(__name__, _HEAVY)
