"""Fuzz `vitscale study validate` with mutations of every shipped study and search space."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from fuzz_support import assert_user_contract, fuzz_settings, run_cli
from hypothesis import given
from hypothesis import strategies as st
from mutations import mutated

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(p.relative_to(ROOT) for d in ("studies", "search_spaces") for p in (ROOT / d).glob("*.yaml"))
FILE_LEVEL = re.compile(
    r"^(line \d+, column \d+: )?invalid YAML: \S"
    r"|^a (study|search-space) file is a mapping"
    r"|^a study is a mapping"
    r"|^file not found$"
    r"|^cannot read: "
)
KEYED = re.compile(r"^[^\s:][^\n]*?: \S")  # dotted key, then the message


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """A copy of studies/ and search_spaces/ (relative extends and includes resolve), plus odd files."""
    root = tmp_path_factory.mktemp("fuzz")
    for name in ("studies", "search_spaces"):
        shutil.copytree(ROOT / name, root / name)
        (root / name / "binary.bin").write_bytes(bytes(range(256)))
        (root / name / "notyaml.yaml").write_bytes(b"\xff\xfe\x00not utf-8 \x80\x81")
        (root / name / "list.yaml").write_text("- a\n- b\n")
    return root


def check_problem_lines(lines: list[str], root: Path) -> None:
    """Each problem names a file of the tree, then a dotted key (or a line, or the whole file)."""
    named = re.compile(re.escape(str(root)) + r"/[^\s:]+: ")
    for line in lines:
        head = named.match(line)
        assert head, line
        rest = line[head.end() :]
        assert FILE_LEVEL.match(rest) or KEYED.match(rest), line


@pytest.mark.parametrize("shipped", SHIPPED, ids=str)
def test_shipped_file_is_valid(shipped, tree):
    """The starting points themselves validate (else every mutation below proves nothing)."""
    result = run_cli("study", "validate", str(tree / shipped))
    assert result.code == 0, result.describe()


@fuzz_settings(default=300)
@given(data=st.data())
def test_mutated_study_files_never_crash(tree, data):
    shipped = data.draw(st.sampled_from(SHIPPED), label="shipped")
    original = (tree / shipped).read_text(encoding="utf-8")
    text = data.draw(mutated(original, "fuzzed.yaml"), label="text")
    target = tree / shipped.parent / "fuzzed.yaml"
    target.write_text(text, encoding="utf-8", errors="surrogatepass")
    result = run_cli("study", "validate", str(target))
    lines = assert_user_contract(result)
    if result.code == 0:
        assert result.out.startswith(f"OK {target}: "), result.describe()
    check_problem_lines(lines, tree)
