"""Pydantic errors -> one line per problem, naming the dotted key."""

from __future__ import annotations

from pydantic import ValidationError


def dotted(loc: tuple) -> str:
    """('trial', 'model', 'width') -> 'trial.model.width'; list indices as [i]."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def error_lines(exc: ValidationError, prefix: str = "") -> list[str]:
    """One readable line per error: `prefix: key.path: message`."""
    lines = []
    for err in exc.errors():
        key = dotted(tuple(p for p in err["loc"] if p not in ("function-after",)))
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key (check the spelling; `vitscale spec schema` lists the keys)"
        head = ": ".join(p for p in (prefix, key) if p)
        # A validator that names its own field ("heads: ...") would repeat it: keep one.
        lines.append(f"{head}: {msg}" if head else msg)
    return lines
