"""A stranger floods a node with large frames while the node computes: the node takes in no
more than its plan's per-peer cap (dfl_node/runner/receive_caps.py), measured as the growth of
its peak resident memory, and the run ends as it would have without the flood.

Before the cap (frames of up to 1 GiB, 1,000 messages per connection), four 256 MB frames
from a stranger grew node 0 from 339 MB to 1.32 GB.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import zmq
from zmq.utils.monitor import recv_monitor_message

from dfl_node.learning.models import model_bytes
from dfl_node.plan import RunPlan
from dfl_node.runner.receive_caps import (
    FALLBACK_MESSAGE_BYTES,
    MIN_MESSAGE_BYTES,
    MODEL_COPIES,
    PEER_MESSAGES,
    peer_buffer_bytes,
    wire_limits,
)
from launcher.config.host_plan import resolve_host_plan
from launcher.config.run_spec import RunSpec
from tests.harness import start_stalled_ring4
from tests.proc_util import wait_for

FRAME = 256 << 20
FRAMES = 4
HOLD_S = 30  # node 0 computes this long at the start of round 1, its socket unread
MARGIN = 32 << 20  # what a node's own allocations may add meanwhile (its stall allocates none)


def status_bytes(pid: int, field: str) -> int:
    """A size field of /proc/PID/status (VmRSS: resident now; VmHWM: its peak)."""
    found = re.search(rf"^{field}:\s+(\d+) kB", Path(f"/proc/{pid}/status").read_text(),
                      re.MULTILINE)
    assert found is not None, field
    return int(found.group(1)) << 10


def refusals(monitor: zmq.Socket, count: int) -> None:
    """Wait for `count` disconnections of the flooding socket: ZeroMQ on the node drops the
    connection at the header of each frame over its MAXMSGSIZE, and the socket connects again
    and sends the next."""
    seen = 0
    while seen < count:
        assert monitor.poll(120_000), f"only {seen} of {count} frames were refused"
        if recv_monitor_message(monitor)["event"] == zmq.EVENT_DISCONNECTED:
            seen += 1


def host_plan(tmp_path: Path, *sets: str, protocol: str = "d-psgd",
              dataset: str = "synthetic") -> RunPlan:
    """A plan of two nodes on fixed ports (nothing is claimed or bound)."""
    path = tmp_path / "pair.yaml"
    path.write_text("nodes: [{id: 0, port: 7001}, {id: 1, port: 7002}]\nedges: [[0, 1]]\n")
    return resolve_host_plan(RunSpec(topology=str(path), protocol=protocol,
                                     options={"dataset": dataset},
                                     sets=("endpoints.collector=127.0.0.1:7003", *sets)))


def test_the_cap_is_the_plans_largest_legitimate_message(tmp_path: Path) -> None:
    """MODEL_COPIES times the model's bytes, at least MIN_MESSAGE_BYTES; the plan's own
    `wire.max_message_bytes` where it sets one; and the frame cap the node's socket gets."""
    small = host_plan(tmp_path, "model={name: mlp, hidden: [8]}")
    assert wire_limits(small).max_message_bytes == MIN_MESSAGE_BYTES
    large = host_plan(tmp_path, "model={name: mlp, hidden: [1024, 1024]}")
    size = model_bytes(large.model, large.data.shape, large.data.num_classes)
    assert size is not None and size > MIN_MESSAGE_BYTES
    assert wire_limits(large).max_message_bytes == MODEL_COPIES * size
    fixed = host_plan(tmp_path, "wire.max_message_bytes=12345")
    assert wire_limits(fixed).max_frame_bytes == 1 << 16  # the header cap is the larger
    assert peer_buffer_bytes(wire_limits(small)) == (PEER_MESSAGES + 1) * MIN_MESSAGE_BYTES
    own = host_plan(tmp_path, protocol="dsc", dataset="scenes")  # a model DSC builds itself
    assert wire_limits(own).max_message_bytes == FALLBACK_MESSAGE_BYTES


@pytest.mark.slow
def test_a_strangers_flood_stays_within_the_per_peer_cap(tmp_path: Path) -> None:
    run = tmp_path / "run"
    launcher = start_stalled_ring4(tmp_path, 3, HOLD_S)
    metrics = run / "metrics.jsonl"
    wait_for(lambda: metrics.exists() and metrics.read_text().count("\n") >= 4, 300, "round 1")
    plan = RunPlan.load(run / "plan.json")
    cap = peer_buffer_bytes(wire_limits(plan))
    found = re.search(r"node 0 pid (\d+) ", (run / "logs" / "node-0.log").read_text())
    assert found is not None
    pid = int(found.group(1))
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # the peak resident size restarts here
    before = status_bytes(pid, "VmRSS")
    ctx = zmq.Context()
    try:
        stranger = ctx.socket(zmq.DEALER)
        stranger.setsockopt(zmq.LINGER, 0)
        monitor = stranger.get_monitor_socket(zmq.EVENT_DISCONNECTED)
        stranger.connect(plan.node(0).address)
        frame = zmq.Frame(bytes(FRAME))
        for _ in range(FRAMES):
            stranger.send(frame, copy=False)
        refusals(monitor, FRAMES)
        peak = status_bytes(pid, "VmHWM")
        stranger.disable_monitor()
        monitor.close(0)
    finally:
        ctx.destroy(0)
    print(f"\nflood: node 0 RSS {before >> 20} MiB before, peak {peak >> 20} MiB during "
          f"{FRAMES} x {FRAME >> 20} MiB from a stranger; per-peer cap {cap >> 20} MiB")
    assert peak - before < cap + MARGIN
    _, err = launcher.communicate(timeout=600)
    assert launcher.returncode == 0, err
