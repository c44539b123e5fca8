"""A live dfl-launch mesh under fire from a raw ZeroMQ socket: every bad message is counted and
dropped, and the run's result is bit-identical to an undisturbed in-process run."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import zmq

from dfl_node.tags import Tag
from dfl_node.transport_zmq import routing_id
from dfl_node.wire import encode
from tests.harness import ENV_ROOT, final_files, launch_ok
from tests.proc_util import wait_for

HEX6 = """\
nodes: [{id: 0}, {id: 1}, {id: 2}, {id: 3}, {id: 4}, {id: 5}]
edges: [[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 0]]
"""
ARGS = ("--dataset", "synthetic", "--partition", "iid", "--rounds", "150",
        "--set", "model={name: mlp, hidden: [16]}")


def attack(address: str, stop: subprocess.Popen) -> int:
    """Keep sending bad traffic to node 0 until the run ends; returns messages sent."""
    ctx = zmq.Context()
    anonymous = ctx.socket(zmq.DEALER)
    stranger = ctx.socket(zmq.DEALER)  # node 3 is not a neighbour of node 0 on the hexagon
    stranger.setsockopt(zmq.ROUTING_ID, routing_id(3))
    for sock in (anonymous, stranger):
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.SNDTIMEO, 0)  # never block: the node may be gone already
        sock.connect(address)
    weights = {"0.weight": np.zeros((16, 32), np.float32)}
    sent = 0
    while stop.poll() is None:
        for r in range(3):
            for sock, frames in ((anonymous, [b"\x81\xa1v\x01", b"garbage"]),
                                 (stranger, encode(3, Tag("data", r, "gossip"), weights)),
                                 (stranger, encode(1, Tag("data", r, "gossip"), weights)),
                                 (stranger, [b"\xff" * 64])):
                with contextlib.suppress(zmq.Again):
                    sock.send_multipart(frames)
                    sent += 1
        time.sleep(0.02)
    ctx.destroy(0)
    return sent


def test_hostile_traffic_is_counted_dropped_and_changes_nothing(tmp_path: Path) -> None:
    topo = tmp_path / "hex6.yaml"
    topo.write_text(HEX6)
    run = tmp_path / "zmq"
    cmd = [sys.executable, "-m", "launcher.cli", "--topology", str(topo), "--protocol", "d-psgd",
           "--out", str(run), *ARGS]
    proc = subprocess.Popen(cmd, env=ENV_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    wait_for(lambda: (run / "plan.json").exists(), 60, "plan.json")
    plan = json.loads((run / "plan.json").read_text())
    sent = attack(plan["nodes"][0]["address"], proc)
    assert proc.wait(60) == 0, proc.stderr.read().decode()
    summary = json.loads((run / "summary.json").read_text())
    rejected = summary["rejected_messages"]
    assert sent > 0
    # Neither connection is a graph neighbour of node 0, so each message is refused on its
    # connection identity before a byte of it is parsed (tests/test_comm.py covers bad headers,
    # lying sources and wrong shapes over a neighbour's own connection).
    assert set(rejected) == {"not_neighbour"} and 0 < rejected["not_neighbour"] <= sent
    reference = launch_ok(tmp_path / "inproc", str(topo), "d-psgd", "--transport", "inproc", *ARGS)
    assert reference["rejected_messages"] == {}
    assert final_files(run) == final_files(tmp_path / "inproc")
    assert summary["ledger"]["per_round"] == reference["ledger"]["per_round"]
