"""`SpecError`: every problem of a study file, one line each, raised together."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from vitscale.errors import UserError


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a spec: the dotted key it is about and what to do."""

    key: str
    message: str

    def line(self, source: str = "") -> str:
        return ": ".join(part for part in (source, self.key, self.message) if part)


class SpecError(UserError):
    """A spec (or several) the user must fix. `lines` has one line per problem; the CLI prints each."""

    def __init__(self, lines: Iterable[str]) -> None:
        self.lines = list(lines)
        super().__init__("\n".join(self.lines))

    @classmethod
    def from_problems(cls, problems: Iterable[Problem], source: str = "") -> SpecError:
        return cls(p.line(source) for p in problems)
