"""What the runtime hands a protocol: its comm, model, data, clock and settings."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from dfl_node.comm.channel import Comm
from dfl_node.learning.seeds import numpy_stream, torch_stream
from dfl_node.learning.shards import NodeData
from dfl_node.ledgers.formula import FormulaLedger
from dfl_node.netsim.virtual_clock import VirtualClock
from dfl_node.plan import AdversaryRole, RunPlan

NODE_LOGGERS = "dfl_mesh.node"


def node_logger(node_id: int) -> logging.Logger:
    """Node `node_id`'s logger, `dfl_mesh.node.<id>`: where its warnings go is the program's
    choice (a launched node's land in its logs/node-<id>.log)."""
    return logging.getLogger(f"{NODE_LOGGERS}.{node_id}")


@dataclass
class NodeContext:
    node_id: int
    plan: RunPlan
    comm: Comm
    model: nn.Module
    data: NodeData | Any  # NodeData unless the protocol's build_workload brings other data
    device: torch.device
    clock: VirtualClock
    formula: FormulaLedger
    # This node's role when it is an adversary (its behaviours, its colluders' ids), None for
    # an honest node; `plan` then holds no adversaries (RunPlan.seen_by_protocol), so honest
    # code has no way to learn who attacks.
    adversary: AdversaryRole | None = None

    @property
    def hyper(self) -> dict[str, Any]:
        return self.plan.hyper

    @property
    def log(self) -> logging.Logger:
        return node_logger(self.node_id)

    def rng(self, name: str) -> np.random.Generator:
        return numpy_stream(self.plan.seed, self.node_id, name)

    def torch_rng(self, name: str) -> torch.Generator:
        return torch_stream(self.plan.seed, self.node_id, name)
