"""Run a notebook's code cells in a fresh Jupyter kernel, as nbclient would, with only
jupyter_client (already what tests/test_notebook.py uses): the cells' outputs in the
notebook's own format, an error stopping the run.

    .venv/bin/python -m tests.notebook_exec docs/examples/own-protocol.ipynb

writes the notebook back with fresh outputs (run from a scratch directory, the notebook's
runs landing there), which the docs site then shows (docs/hooks/notebooks.py).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from jupyter_client.manager import start_new_kernel

CELL_TIMEOUT_S = 300


class CellError(RuntimeError):
    """A cell raised: its exception's name and value, and the cell's source."""


def execute(notebook: dict[str, Any], cwd: Path) -> dict[str, Any]:
    """The notebook with every code cell run in order, its outputs and counts replaced."""
    manager, client = start_new_kernel(kernel_name="python3", cwd=str(cwd))
    try:
        count = 0
        for cell in notebook["cells"]:
            if cell["cell_type"] != "code":
                continue
            count += 1
            source = "".join(cell["source"])
            cell["outputs"] = run_cell(client, source, count)
            cell["execution_count"] = count
            errors = [o for o in cell["outputs"] if o["output_type"] == "error"]
            if errors:
                raise CellError(f"{errors[0]['ename']}: {errors[0]['evalue']}\nin:\n{source}")
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    return notebook


def run_cell(client: Any, source: str, count: int) -> list[dict[str, Any]]:
    msg_id = client.execute(source)
    outputs: list[dict[str, Any]] = []
    while True:
        msg = client.get_iopub_msg(timeout=CELL_TIMEOUT_S)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "status" and content["execution_state"] == "idle":
            return outputs
        if kind == "stream":
            if outputs and outputs[-1]["output_type"] == "stream" and \
                    outputs[-1]["name"] == content["name"]:
                outputs[-1]["text"] += content["text"]
            else:
                outputs.append({"output_type": "stream", "name": content["name"],
                                "text": content["text"]})
        elif kind in ("display_data", "execute_result"):
            output = {"output_type": kind, "data": content["data"],
                      "metadata": content.get("metadata", {})}
            if kind == "execute_result":
                output["execution_count"] = count
            outputs.append(output)
        elif kind == "error":
            outputs.append({"output_type": "error", "ename": content["ename"],
                            "evalue": content["evalue"], "traceback": content["traceback"]})


def as_lines(text: str) -> list[str]:
    """Text as the notebook format stores it: lines, each with its newline."""
    return text.splitlines(keepends=True)


def main(path: Path) -> None:
    notebook = json.loads(path.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory() as scratch:
        done = execute(notebook, Path(scratch))
    for cell in done["cells"]:
        for output in cell.get("outputs", []):
            if "text" in output:
                output["text"] = as_lines(output["text"])
            for mime, value in output.get("data", {}).items():
                if mime.startswith("text/") and isinstance(value, str):
                    output["data"][mime] = as_lines(value)
    path.write_text(json.dumps(done, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
