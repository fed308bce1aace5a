"""`--register` (on `study run` and `analyze`): each arm's best model registered, one line each."""

from __future__ import annotations

from vitscale.tracking import store
from vitscale.tracking.model_registry import register_best


def print_registrations(tracking_uri: str, study: str, experiment: str | None = None) -> None:
    """`--register`: each arm's best model in the Model Registry, one line each."""
    registrations = register_best(store.client_for(tracking_uri), study, experiment)
    for registration in registrations:
        print(registration.line())
    if not registrations:
        print(f"--register: no finished trial of {study} logged a model; nothing registered")
