"""Study kinds: importing a file registers its StudyKind in `STUDY_KINDS` (see `registry`).

A new kind is one file here that calls `register_kind(StudyKind(...))`, plus its name on the
import line below (the order is the order `kind:` lists its values in the JSON Schema and errors).
"""

# isort: off
from vitscale.kinds import train, benchmark, comparison  # noqa: F401
from vitscale.kinds.registry import STUDY_KINDS, StudyKind, register_kind, study_kind

# isort: on

__all__ = ["STUDY_KINDS", "StudyKind", "register_kind", "study_kind"]
