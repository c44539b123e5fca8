"""One node's life: connect, build model and data, run the protocol's rounds, report, save.

The same function runs in a launcher-spawned process, under `dfl-node` on another host, and as a
thread of the in-process transport; only the transport and the reporter differ.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from dfl_node.comm import Comm
from dfl_node.context import NodeContext
from dfl_node.formula import FormulaLedger
from dfl_node.ledger import Ledger
from dfl_node.linkmodel import LinkModel, VirtualClock
from dfl_node.models import build_model
from dfl_node.plan import RunPlan
from dfl_node.report import Reporter
from dfl_node.shards import load_node_data
from dfl_node.training import evaluate
from dfl_node.transport import Transport
from dfl_node.wire import WireLimits
from protocols.registry import protocol_class


def make_comm(plan: RunPlan, node_id: int, transport: Transport) -> Comm:
    wire = plan.wire
    limits = WireLimits(max_tensors=int(wire["max_tensors"]),
                        max_message_bytes=int(wire["max_message_bytes"]))
    return Comm(node_id, plan.neighbors(node_id), transport, limits, Ledger(node_id),
                recv_timeout_s=float(wire["recv_timeout_s"]))


def run_node(plan: RunPlan, node_id: int, transport: Transport, reporter: Reporter,
             out_dir: Path) -> None:
    """Run node `node_id` of `plan` to completion; its final model lands in `out_dir/final/`."""
    comm = make_comm(plan, node_id, transport)
    entry = plan.node(node_id)
    device = torch.device(entry.device)
    data = load_node_data(plan.data, plan.ids, node_id)
    model = build_model(plan.model, data.input_shape, data.classes, plan.seed).to(device)
    clock = VirtualClock(LinkModel.from_plan(plan.topology, plan.link))
    ctx = NodeContext(node_id, plan, comm, model, data, device, clock, FormulaLedger(node_id))
    proto = protocol_class(plan.protocol)(ctx)
    reporter.emit({"type": "ready", "node": node_id, "pid": os.getpid()})
    start_barrier(comm, plan.diameter())
    last: dict[str, Any] = {}
    for r in range(plan.rounds):
        comm.round = r
        info = proto.run_round(r)
        if (r + 1) % plan.eval_every == 0 or r + 1 == plan.rounds:
            acc, loss = evaluate(proto.eval_model(), data.x_eval, data.y_eval, device)
            last = {"type": "metrics", "round": r + 1, "node": node_id, "accuracy": acc,
                    "loss": loss, "wire_bytes": comm.ledger.wire_bytes(),
                    "virtual_seconds": clock.seconds, "eval_split": plan.data["eval_split"],
                    **info}
            reporter.emit(last)
    comm.close()
    final = out_dir / "final"
    save_tensors(proto.eval_model().state_dict(), final / f"node-{node_id}.safetensors")
    extra = proto.extra_state()
    if extra:
        save_tensors(extra, final / f"node-{node_id}-copies.safetensors")
    reporter.emit({"type": "done", "node": node_id, "pid": os.getpid(),
                   "host": socket.gethostname(), "device": entry.device,
                   "accuracy": last.get("accuracy"), "loss": last.get("loss"),
                   "virtual_seconds": clock.seconds, "ledger": comm.ledger.to_json(),
                   "formula": ctx.formula.to_json(), "protocol": proto.summary(),
                   "rejected": dict(comm.ledger.rejected)})


def start_barrier(comm: Comm, diameter: int) -> None:
    """Mesh-wide start: after `diameter` neighbourhood barriers every node has heard, hop by
    hop, from every other, so no node trains while others are still starting (on a shared
    machine early starters would otherwise slow the rest down)."""
    for _ in range(max(1, diameter)):
        comm.barrier()


def save_tensors(tensors: dict[str, torch.Tensor], path: Path) -> None:
    """Safetensors: a pickle-free format any peer tool can read."""
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, str(path))
