"""What every fuzz test shares: the CLI run in-process, the user-error contract, YAML value strategies.

The contract (docs: DESIGN.md, "Conventions"): a user's mistake ends in exit 2 with one line per
problem, each `error: <where>: <what>`, and never a traceback or a hang.
"""

from __future__ import annotations

import contextlib
import io
import os
import time
from dataclasses import dataclass

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from vitscale.cli import main

# CI runs a few hundred examples per door; VITSCALE_FUZZ_EXAMPLES=10000 for a long run.
EXAMPLES = int(os.environ.get("VITSCALE_FUZZ_EXAMPLES", "0") or 0)
TIME_LIMIT_S = 30.0  # per command; generous because CI shares its cores


def fuzz_settings(default: int) -> settings:
    """Settings for one fuzz test: `default` examples unless VITSCALE_FUZZ_EXAMPLES says otherwise."""
    return settings(
        max_examples=EXAMPLES or default,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
        derandomize=not EXAMPLES,  # CI: the same examples every run; long runs explore
        print_blob=True,
    )


@dataclass
class Result:
    code: int
    out: str
    err: str
    seconds: float

    def describe(self) -> str:
        return f"exit {self.code} after {self.seconds:.1f}s\n--- stdout\n{self.out}\n--- stderr\n{self.err}"


def run_cli(*argv: str) -> Result:
    """`vitscale ARGV` through the console entry point, in this process. A bug raises out of here."""
    out, err = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(argv))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return Result(code, out.getvalue(), err.getvalue(), time.perf_counter() - start)


def assert_user_contract(result: Result, allowed: tuple[int, ...] = (0, 2)) -> list[str]:
    """Exit 0 or 2, no traceback, in time; on exit 2 every stderr line is one `error: ...` problem.

    Returns the problem lines (without the `error: ` prefix).
    """
    what = result.describe()
    assert result.code in allowed, what
    assert "Traceback" not in result.out + result.err, what
    assert result.seconds < TIME_LIMIT_S, what
    if result.code != 2:
        return []
    lines = result.err.splitlines()
    assert lines, what
    assert all(line.startswith("error: ") and line.strip() != "error:" for line in lines), what
    return [line.removeprefix("error: ") for line in lines]


# --- YAML values of every type ------------------------------------------------------------------

KEY_CHARS = st.characters(blacklist_categories=("Cs", "Zs"), blacklist_characters=":#,[]{}&*!|>'\"%@`?-")
keys = st.text(KEY_CHARS, min_size=1, max_size=12)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**6), max_value=10**6),
    st.sampled_from([0, -1, 2**31, 2**63, -(2**63), 10**30, 10**400]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.sampled_from(["", "abc", "1e-3", "yes", "null", "~", "attention", "ssog", "ode", "cpu", "cuda"]),
)
yaml_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys | st.integers(-3, 3), inner, max_size=4),
    max_leaves=12,
)
