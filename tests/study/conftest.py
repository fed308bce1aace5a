"""Fixtures of the spec tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def write(tmp_path):
    """write('name.yaml', text) -> path of the file in a fresh directory."""

    def _write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    return _write
