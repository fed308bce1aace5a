"""`tracking/layout.py` is the one place an MLflow tag of vitscale is spelled, and MLflow itself is
imported only under tracking/ (readers catch its errors as `store.mlflow_exception()`): a reader or
writer elsewhere that spells `"vitscale.status"`, or imports `mlflow`, fails here with its line."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from vitscale.tracking import layout

PACKAGE = Path(__file__).resolve().parents[2] / "platform" / "vitscale"
LAYOUT = PACKAGE / "tracking" / "layout.py"
TRACKING = PACKAGE / "tracking"


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _names_a_module(dotted: str) -> bool:
    """`vitscale.tune.run`, `vitscale.train.from_mlflow.resolve_source`: some prefix of it is a
    module or package of vitscale (a logger's name, a lazy export's module, a "module:attribute")."""
    parts = dotted.split(":")[0].split(".")[1:]
    for n in range(len(parts), 0, -1):
        path = PACKAGE.joinpath(*parts[:n])
        if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file():
            return True
    return False


# layout's tag names (TAG_PREFIX itself aside: it only builds names, as `version.<package>`)
TAGS = {
    value
    for name, value in vars(layout).items()
    if name.isupper()
    and isinstance(value, str)
    and value.startswith(layout.TAG_PREFIX)
    and value != layout.TAG_PREFIX
}


NAME = re.compile(r"(?<![\w.])vitscale\.[\w.:]*\w")  # a dotted vitscale name inside any text


def tag_strings(source: str) -> list[tuple[int, str]]:
    """(line, name) of each vitscale tag spelled in a string constant, docstrings aside: one of
    layout's tags (or a name under one), or any `vitscale.`-prefixed name that is not a module path;
    found anywhere in the text (an MLflow filter: "tags.`vitscale.role` = 'trial'")."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in docs:
            continue
        for name in NAME.findall(node.value):
            module = _names_a_module(name)  # vitscale.study.kinds: a module under the tag vitscale.study
            is_tag = name in TAGS or (not module and any(name.startswith(f"{tag}.") for tag in TAGS))
            if is_tag or not module:
                out.append((node.lineno, name))
    return sorted(out)


def mlflow_imports(source: str) -> list[int]:
    """Lines that import mlflow (anything under it), at any depth."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "mlflow" for a in node.names):
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "mlflow":
            lines.append(node.lineno)
    return sorted(lines)


def test_no_vitscale_tag_is_spelled_outside_layout() -> None:
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {text!r} (use its tracking.layout constant)"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != LAYOUT
        for line, text in tag_strings(path.read_text())
    ]
    assert not found, "\n".join(found)


def test_nothing_outside_tracking_imports_mlflow() -> None:
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: imports mlflow (go through vitscale.tracking)"
        for path in sorted(PACKAGE.rglob("*.py"))
        if TRACKING not in path.parents
        for line in mlflow_imports(path.read_text())
    ]
    assert not found, "\n".join(found)


def test_the_checks_find_what_they_look_for() -> None:
    source = (
        '"""Tags such as vitscale.status are documented here."""\n'
        "import logging\n"
        'log = logging.getLogger("vitscale.tracking")\n'
        'a = run.data.tags.get("vitscale.status")\n'
        "f = \"tags.`vitscale.role` = 'trial' (see vitscale.tune.run)\"\n"
        'b = {"vitscale.checkpoint_reason": 1}\n'
        'c = "vitscale.version.torch"\n'
        "def f():\n"
        "    from mlflow.exceptions import MlflowException\n"
        "    import mlflow\n"
    )
    assert tag_strings(source) == [
        (4, "vitscale.status"),
        (5, "vitscale.role"),
        (6, "vitscale.checkpoint_reason"),
        (7, "vitscale.version.torch"),
    ]
    assert mlflow_imports(source) == [9, 10]
