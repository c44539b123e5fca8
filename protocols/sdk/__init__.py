"""The protocol SDK: what a protocol is written with, so that it reads like its paper.

A protocol declares itself in a `ProtocolSpec` (its settings, `Hyper`, a typed model, and its
capabilities, parts from protocols/capabilities.py), names it as its node class's `spec`, lists
its state (`checkpoint_fields`) and writes `run_round` with these building blocks, which do
the runtime's duties for it:

- `LocalSGD`: the node's mini-batch stream and SGD steps, counted for the virtual clock;
- `Exchange`: every communication shape of a synchronous step on one phase: to all
  neighbours, to one or a subset, per-neighbour payloads, optional (silent) sends, gathers
  from a set, broadcasts. The message schema comes from the payload, the formula ledger is
  charged on every link the payload is sent on, and the clock advances at the step's end;
- `Star`: clients to an aggregator and back (q-FFL);
- `ComputeStep`: local computation timed as a step of its own;
- `Payload` / `dense`: tensors with their formula bits (a send without bits is an error);
- `mix`: sum_j W_ij x_j over the node's row, in ascending j, for every gossip protocol.

It is also the one door from the protocol families to the runtime: the runtime's types and
helpers a protocol needs (`NodeContext`, `RunPlan`, `Received`, `grad_of`, `flatten`, ...)
are imported from here, never from `dfl_node` (tests/test_sdk_surface.py). Every name is
loaded on first use, so that a protocol's spec, which the launcher imports without torch, can
import `ProtocolSpec`, its capabilities and `RunPlan` from here too.

docs/extending/protocol.md walks through a protocol written with them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dfl_node.comm.channel import Layout, Received
    from dfl_node.learning.flat import flatten, unflatten_into
    from dfl_node.learning.models import on_cpu, reset_parameters
    from dfl_node.learning.seeds import numpy_stream, torch_stream
    from dfl_node.learning.training import BatchSampler, evaluate, grad_of
    from dfl_node.netsim.tdma import Link
    from dfl_node.netsim.virtual_clock import LinkModel, LinkStats
    from dfl_node.plan import RunPlan
    from dfl_node.runner.context import NodeContext
    from dfl_node.runner.membership import SurvivingGraph
    from dfl_node.runner.prephase_client import Coordination
    from dfl_node.settings.model import ModelSpec
    from protocols.base import Protocol
    from protocols.capabilities import (
        DynamicGraphs,
        PrePhase,
        RunReport,
        ServerBased,
        SurvivesFailures,
    )
    from protocols.hyper import DenseAccounting, ProtocolHyper, TrainingHyper
    from protocols.sdk.compute import ComputeStep
    from protocols.sdk.exchange import Exchange, OpenStep
    from protocols.sdk.learning import LocalSGD
    from protocols.sdk.mixing import mix, push_row, uniform_row
    from protocols.sdk.payload import Payload, dense
    from protocols.sdk.star import Star
    from protocols.spec import ProtocolSpec

# name -> the module it is defined in
_HOMES = {
    "Layout": "dfl_node.comm.channel", "Received": "dfl_node.comm.channel",
    "flatten": "dfl_node.learning.flat", "unflatten_into": "dfl_node.learning.flat",
    "on_cpu": "dfl_node.learning.models", "reset_parameters": "dfl_node.learning.models",
    "numpy_stream": "dfl_node.learning.seeds", "torch_stream": "dfl_node.learning.seeds",
    "BatchSampler": "dfl_node.learning.training", "evaluate": "dfl_node.learning.training",
    "grad_of": "dfl_node.learning.training",
    "Link": "dfl_node.netsim.tdma",
    "LinkModel": "dfl_node.netsim.virtual_clock", "LinkStats": "dfl_node.netsim.virtual_clock",
    "RunPlan": "dfl_node.plan",
    "NodeContext": "dfl_node.runner.context",
    "SurvivingGraph": "dfl_node.runner.membership",
    "Coordination": "dfl_node.runner.prephase_client",
    "ModelSpec": "dfl_node.settings.model",
    "Protocol": "protocols.base",
    "DynamicGraphs": "protocols.capabilities",
    "PrePhase": "protocols.capabilities", "RunReport": "protocols.capabilities",
    "ServerBased": "protocols.capabilities", "SurvivesFailures": "protocols.capabilities",
    "DenseAccounting": "protocols.hyper", "ProtocolHyper": "protocols.hyper",
    "TrainingHyper": "protocols.hyper",
    "ComputeStep": "protocols.sdk.compute",
    "Exchange": "protocols.sdk.exchange", "OpenStep": "protocols.sdk.exchange",
    "LocalSGD": "protocols.sdk.learning",
    "mix": "protocols.sdk.mixing", "push_row": "protocols.sdk.mixing",
    "uniform_row": "protocols.sdk.mixing",
    "Payload": "protocols.sdk.payload", "dense": "protocols.sdk.payload",
    "Star": "protocols.sdk.star",
    "ProtocolSpec": "protocols.spec",
}

__all__ = [
    "BatchSampler",
    "ComputeStep",
    "Coordination",
    "DenseAccounting",
    "DynamicGraphs",
    "Exchange",
    "Layout",
    "Link",
    "LinkModel",
    "LinkStats",
    "LocalSGD",
    "ModelSpec",
    "NodeContext",
    "OpenStep",
    "Payload",
    "PrePhase",
    "Protocol",
    "ProtocolHyper",
    "ProtocolSpec",
    "Received",
    "RunPlan",
    "RunReport",
    "ServerBased",
    "Star",
    "SurvivesFailures",
    "SurvivingGraph",
    "TrainingHyper",
    "dense",
    "evaluate",
    "flatten",
    "grad_of",
    "mix",
    "numpy_stream",
    "on_cpu",
    "push_row",
    "reset_parameters",
    "torch_stream",
    "unflatten_into",
    "uniform_row",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'protocols.sdk' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
