"""`--register` (on `study run` and `analyze`): each arm's best model registered, one line each."""

from __future__ import annotations

from vitscale.tracking import store
from vitscale.tracking.model_registry import register_best


def print_registrations(tracking_uri: str, study: str, experiment: str | None = None) -> None:
    """`--register`: each arm's best model in the Model Registry, one line each."""
    registrations = register_best(store.client_for(tracking_uri), study, experiment)
    for line in registrations.lines():
        print(line)
    if not registrations.done and not registrations.without_model:
        print(f"--register: {study} has no finished trial; nothing registered")
