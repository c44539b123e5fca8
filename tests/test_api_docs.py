"""The Python API page's ten-line example runs as written: a real mesh, its metrics as a
DataFrame, accuracy plotted against formula bits."""

from __future__ import annotations

import json
import re
from pathlib import Path

import matplotlib
import pytest

from tests.harness import ROOT

PAGE = ROOT / "docs" / "python-api.md"
MARKER = "<!-- executed by tests/test_api_docs.py, exactly as written here -->"


def example() -> str:
    text = PAGE.read_text()
    found = re.search(re.escape(MARKER) + r"\n```python\n(.*?)```", text, re.S)
    assert found, f"{PAGE}: the marked python block is gone"
    return found.group(1)


def test_the_example_is_ten_lines() -> None:
    lines = [line for line in example().splitlines() if line.strip()]
    assert len(lines) <= 10


def test_the_docs_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    matplotlib.use("Agg")
    monkeypatch.chdir(tmp_path)
    exec(compile(example(), str(PAGE), "exec"), {"__name__": "__docs__"})
    summary = json.loads((tmp_path / "runs" / "first" / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["protocol"] == "dmfl-sq"
    png = (tmp_path / "accuracy-vs-bits.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
