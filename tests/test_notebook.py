"""dfl_mesh in a real Jupyter kernel: the progress bar is a notebook widget, and the kernel's
interrupt stops the mesh with no node process left."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import start_new_kernel

from tests.harness import RING4
from tests.proc_util import node_pids, wait_for, wait_gone

WIDGET = "application/vnd.jupyter.widget-view+json"


@pytest.fixture
def kernel(tmp_path: Path) -> Iterator[BlockingKernelClient]:
    manager, client = start_new_kernel(kernel_name="python3", cwd=str(tmp_path))
    try:
        yield client
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def cell_output(client: BlockingKernelClient, msg_id: str) -> list[dict[str, Any]]:
    """The iopub messages of one cell, until the kernel is idle again."""
    out = []
    while True:
        msg = client.get_iopub_msg(timeout=300)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return out
        out.append(msg)


def run_code(ring: Path, run: Path, rounds: int) -> str:
    return (f"import dfl_mesh\nresult = dfl_mesh.run({str(ring)!r}, 'd-psgd', rounds={rounds}, "
            f"dataset='synthetic', eval_every=1, out={str(run)!r}, plots=False)\nresult")


def test_a_cell_shows_a_widget_bar_and_ends_with_the_result(
        tmp_path: Path, kernel: BlockingKernelClient) -> None:
    ring = tmp_path / "ring4.yaml"
    ring.write_text(RING4)
    msgs = cell_output(kernel, kernel.execute(run_code(ring, tmp_path / "run", 3)))
    kinds = [m["msg_type"] for m in msgs]
    assert "error" not in kinds, msgs
    assert any(WIDGET in m["content"].get("data", {}) for m in msgs)  # the live bar
    text = "".join(m["content"]["text"] for m in msgs if m["msg_type"] == "stream")
    assert f"run_dir: {tmp_path / 'run'}  avg_accuracy=" in text
    shown = [m["content"]["data"] for m in msgs if m["msg_type"] == "execute_result"]
    assert len(shown) == 1 and "avg_accuracy" in shown[0]["text/html"]


def test_the_kernel_interrupt_stops_every_node(tmp_path: Path,
                                               kernel: BlockingKernelClient) -> None:
    ring, run = tmp_path / "ring4.yaml", tmp_path / "run"
    ring.write_text(RING4)
    msg_id = kernel.execute(run_code(ring, run, 100_000))
    wait_for(lambda: (run / "metrics.jsonl").is_file()
             and (run / "metrics.jsonl").stat().st_size > 0, 300, "a first evaluation")
    pids = node_pids(run)
    assert len(pids) == 4
    manager = kernel.parent
    assert manager is not None
    manager.interrupt_kernel()
    errors = [m["content"] for m in cell_output(kernel, msg_id) if m["msg_type"] == "error"]
    assert [e["ename"] for e in errors] == ["RunInterrupted"]
    assert wait_gone(list(pids.values()), 30) == []
    assert json.loads((run / "summary.json").read_text())["status"] == "interrupted"
