"""Study kinds: importing a file registers its StudyKind in `STUDY_KINDS` (see `registry`).

A new kind is one file here that calls `register_kind(KindData(...))`, plus its name on the
import line below (the order is the order `kind:` lists its values in the JSON Schema and errors),
plus its entry in the `KindTable` of every layer that runs it (`table`; docs/architecture.md,
"How to add a study kind").
"""

# isort: off
from vitscale.kinds import train, benchmark, comparison  # noqa: F401
from vitscale.kinds.registry import STUDY_KINDS, KindData, KindError, StudyKind, register_kind, study_kind
from vitscale.kinds.table import KindTable, check_complete

# isort: on

__all__ = [
    "STUDY_KINDS",
    "KindData",
    "KindError",
    "KindTable",
    "StudyKind",
    "check_complete",
    "register_kind",
    "study_kind",
]
