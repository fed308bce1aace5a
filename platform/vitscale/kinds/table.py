"""One layer's behaviour per study kind, in a table keyed by the kind's name.

A study kind is plain data (`registry.StudyKind`); what a layer *does* for it (the trial function
tune runs, the checks the study format adds, the parent run's metrics) lives in that layer, in a
`KindTable` the layer owns, so no module switches on a flag or a name of the kind. Each layer
builds its table here and lists the modules that register its entries for the shipped kinds
(`builtin`): they are imported on the table's first lookup, not when the table is built, so a
layer's kind modules may import the modules that look the table up. A plugin kind registers an
entry in every table a layer it reaches needs; a kind missing one fails at the lookup, in one line
naming the table and how to register it, before anything of a run starts
(`check_complete`).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Generic, TypeVar

from vitscale.kinds.registry import KindError

Entry = TypeVar("Entry")

TABLES: list[KindTable] = []  # every table built so far: what `check_complete` asks


class KindTable(dict, Generic[Entry]):
    """kind name -> this layer's entry; `register` adds one, a lookup of a missing one is a KindError."""

    def __init__(self, what: str, register_with: str, builtin: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.what = what  # "tune's runner (TuneKind)": named in the error
        self.register_with = register_with  # "vitscale.tune.kinds.TUNE_KINDS.register(name, TuneKind(...))"
        self._builtin = builtin
        self._loaded = not builtin
        TABLES.append(self)

    # A table is itself, not its entries: two layers' tables never compare equal.
    __eq__ = object.__eq__
    __ne__ = object.__ne__
    __hash__ = object.__hash__

    def _load(self) -> None:
        if not self._loaded:
            self._loaded = True
            for module in self._builtin:
                importlib.import_module(module)

    def register(self, name: str, entry: Entry) -> Entry:
        """Add `entry` for the kind called `name`; a kind registers once per table. (The shipped
        entries load on the first lookup, not here: their modules register as they import.)"""
        if dict.__contains__(self, name):
            raise KindError(f"study kind {name!r}: {self.what} is registered twice")
        dict.__setitem__(self, name, entry)
        return entry

    def __getitem__(self, name: str) -> Entry:
        self._load()
        try:
            return dict.__getitem__(self, name)
        except KeyError:
            raise KindError(
                f"study kind {name!r} has no {self.what}; register one with {self.register_with}"
            ) from None

    def __contains__(self, name: object) -> bool:
        self._load()
        return dict.__contains__(self, name)

    def __iter__(self) -> Iterator[str]:
        self._load()
        return dict.__iter__(self)


def missing_entries(name: str) -> list[str]:
    """The tables built so far (the layers this process imported) that have no entry for `name`."""
    return [table.what for table in TABLES if name not in table]


def check_complete(name: str) -> None:
    """Refuse a kind that some imported layer cannot run, in one line, before a run starts."""
    missing = missing_entries(name)
    if missing:
        raise KindError(f"study kind {name!r} is registered incompletely: it has no {'; no '.join(missing)}")
