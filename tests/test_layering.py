"""The package's layering, enforced: which part of vitscale may import which.

A package imports only packages of a lower layer (never one of its own layer, never upward), so
there is no cycle between packages and each layer can be read (and tested) without the ones above.
The check is static (every `import vitscale...` of every module, at module level or inside a
function), plus a fresh-interpreter import of each package, where a cycle inside a package shows
up as a partially initialised module. Imports inside functions hide the architecture; their number
may only go down (see MAX_NESTED_IMPORTS).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

# Bottom to top. A module of layer i may import modules of layers < i only.
LAYERS: tuple[tuple[frozenset[str], str], ...] = (
    (
        frozenset({"vitscale", "errors", "validation", "pareto", "dotted", "lazy", "distribution_facts"}),
        "the shared vocabulary: exceptions, pydantic helpers, Pareto masks, dotted keys, lazy exports, "
        "the facts of the search-space distributions; no torch, nothing of vitscale",
    ),
    (
        frozenset(
            {
                "models",
                "device",
                "openmp",
                "precision",
                "kinds",
                "sqlite_files",
                "storage_errors",
                "range_edge",
            }
        ),
        "a ViT from one ModelConfig, which torch device to use and in which precision, how worker "
        "processes' OpenMP threads wait, the study kinds (plain data), SQLite checks, storage failures as "
        "one line, a tuned value at the edge of its searched range",
    ),
    (frozenset({"data", "tracking"}), "data sets (registered like mixers) and the MLflow layout and store"),
    (frozenset({"train", "bench"}), "one trial (fit) and one benchmark sweep, each with its config"),
    (
        frozenset({"study", "analysis"}),
        "a study file composes the trial and benchmark configs; the analysis reads what runs logged",
    ),
    (
        frozenset({"tune"}),
        "runs a study: Ray Tune, Optuna, the MLflow parent run, `vitscale bench` as a study",
    ),
    (frozenset({"doctor"}), "the GPU self-check script: runs trials and sweeps end to end"),
    (frozenset({"cli"}), "parses flags, calls one library function, prints"),
    (frozenset({"__main__"}), "`python -m vitscale`"),
)
RANK = {name: i for i, (names, _) in enumerate(LAYERS) for name in names}

# Package-internal imports not at a module's top level. Lower this when you remove one; never raise it.
MAX_NESTED_IMPORTS = 14

ROOT = Path(__file__).resolve().parents[1] / "platform" / "vitscale"


def _package_of(path: Path) -> str:
    """platform/vitscale/tune/run.py -> "tune"; platform/vitscale/errors.py -> "errors"."""
    rel = path.relative_to(ROOT).with_suffix("").parts
    return "vitscale" if rel == ("__init__",) else rel[0]


def _is_module(name: str) -> bool:
    return (ROOT / name).is_dir() or (ROOT / f"{name}.py").is_file()


def _imports(tree: ast.Module):
    """(line, imported package, nested) for every `vitscale` import of a module."""
    top = {id(node) for node in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "vitscale":  # from vitscale import data -> the data package
                # ... but `from vitscale import __version__` reads the package's own __init__
                targets = [
                    f"vitscale.{alias.name}" if _is_module(alias.name) else "vitscale" for alias in node.names
                ]
            else:
                targets = [node.module]
        else:
            continue
        for target in targets:
            parts = target.split(".")
            if parts[0] == "vitscale":
                yield node.lineno, parts[1] if len(parts) > 1 else "vitscale", id(node) not in top


def _scan() -> tuple[list[str], list[str], list[str]]:
    forbidden, nested, unknown = [], [], []
    for path in sorted(ROOT.rglob("*.py")):
        source = _package_of(path)
        where = path.relative_to(ROOT.parent)
        for line, target, is_nested in _imports(ast.parse(path.read_text(), str(path))):
            if is_nested:
                nested.append(f"{where}:{line} imports vitscale.{target}")
            if target == source:
                continue
            if source not in RANK or target not in RANK:
                unknown.append(f"{where}:{line}: {source} -> {target} (add the package to LAYERS)")
            elif RANK[target] >= RANK[source]:
                forbidden.append(
                    f"{where}:{line}: {source} -> {target} "
                    f"(layer {RANK[source]} may not import layer {RANK[target]})"
                )
    return forbidden, nested, unknown


def test_every_import_goes_down_the_layers():
    forbidden, _, unknown = _scan()
    assert not unknown, "packages missing from LAYERS:\n" + "\n".join(unknown)
    assert not forbidden, "imports against the layering (see LAYERS):\n" + "\n".join(forbidden)


def test_imports_inside_functions_do_not_creep_back():
    _, nested, _ = _scan()
    assert len(nested) <= MAX_NESTED_IMPORTS, (
        f"{len(nested)} package-internal imports below module level (at most {MAX_NESTED_IMPORTS}); "
        "move them to the top, or break the cycle that needs them:\n" + "\n".join(nested)
    )


def test_every_layer_is_listed_once():
    names = [name for names, _ in LAYERS for name in names]
    assert len(names) == len(set(names))
    on_disk = {_package_of(p) for p in ROOT.rglob("*.py")}
    assert on_disk <= set(names), f"add to LAYERS: {sorted(on_disk - set(names))}"


PACKAGES = sorted(
    f"vitscale.{p.name}" if p.is_dir() else f"vitscale.{p.stem}"
    for p in ROOT.iterdir()
    if (p.is_dir() and (p / "__init__.py").is_file()) or (p.suffix == ".py" and p.stem != "__main__")
)
# analysis/__init__.py imports lazily, so importing the package alone loads none of its rooms (load,
# statistics, figures, report); its orchestrator imports every one of them, so a cycle between
# rooms fails there.
PACKAGES.append("vitscale.analysis.pipeline")


@pytest.mark.parametrize("module", PACKAGES)
def test_each_package_imports_alone(module):
    """A fresh interpreter: an import cycle fails here as a partially initialised module."""
    name = "vitscale" if module == "vitscale.__init__" else module
    proc = subprocess.run(
        [sys.executable, "-c", f"import {name}"], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, f"import {name} failed:\n{proc.stderr[-3000:]}"
