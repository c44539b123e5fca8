"""The example notebook of the docs (docs/examples/own-protocol.ipynb) runs as committed in a
fresh Jupyter kernel: a protocol defined in a cell, on a networkx graph, with its own model
and arrays, plotted from the DataFrame. The site renders it (docs/hooks/notebooks.py; the
strict build is tests/test_docs.py's)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.harness import ROOT
from tests.notebook_exec import execute

NOTEBOOK = ROOT / "docs" / "examples" / "own-protocol.ipynb"


def test_the_example_notebook_runs_and_plots(tmp_path: Path) -> None:
    done = execute(json.loads(NOTEBOOK.read_text(encoding="utf-8")), tmp_path)
    outputs = [o for cell in done["cells"] if cell["cell_type"] == "code"
               for o in cell["outputs"]]
    assert any("image/png" in o.get("data", {}) for o in outputs)  # the plot
    summary = json.loads((tmp_path / "runs" / "own-protocol" / "summary.json").read_text())
    assert (summary["status"], summary["protocol"], summary["rounds"]) == \
        ("ok", "__main__.Diffusion", 30)
    assert summary["avg_accuracy"] > 0.8


def test_the_committed_notebook_shows_its_outputs() -> None:
    """What the site shows is an executed notebook: every code cell has run, in order."""
    cells = [c for c in json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
             if c["cell_type"] == "code"]
    assert [c["execution_count"] for c in cells] == list(range(1, len(cells) + 1))
    assert any("image/png" in o.get("data", {}) for o in cells[-1]["outputs"])
