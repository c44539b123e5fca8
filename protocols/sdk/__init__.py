"""The protocol SDK: what a protocol is written with, so that it reads like its paper.

A protocol declares itself in a `ProtocolDeclaration` (its settings, `Hyper`, a typed model, and its
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
- `mix`: sum_j W_ij x_j over the node's row, in ascending j, for every gossip protocol;
- `robust_mix`: the same row aggregated by the rule a run chose (`aggregation: Aggregation =
  DEFAULT_AGGREGATION` on the protocol's `Hyper`, capability `RobustAggregation`): the mean is
  `mix` itself, the others are protocols/robust/'s median, trimmed mean, Krum, BRIDGE and
  clipping rules.

It is also the one door from the protocol families to the runtime: the runtime's types and
helpers a protocol needs (`NodeContext`, `RunPlan`, `Received`, `grad_of`, `flatten`, ...)
are imported from here, never from `dfl_node` (tests/test_sdk_surface.py). The names are
loaded on first use, in two groups: what a protocol's spec may need (`ProtocolDeclaration`,
`RunPlan`, `ModelConfig`, the capabilities, the settings models), which imports no torch, so
that the launcher can read a spec without it; and the node side, torch and all. Both by
plain imports: nothing here is imported by a name computed at run time
(tests/test_no_unsafe_loading.py).

docs/extending/protocol.md walks through a protocol written with them.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from dfl_config.renamed import renamed_names

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
    from dfl_node.runner.coordination import Coordination
    from dfl_node.runner.membership import SurvivingGraph
    from dfl_node.settings.model import ModelConfig
    from protocols.capabilities import (
        DynamicGraphs,
        PrePhase,
        RobustAggregation,
        RunReport,
        ServerBased,
        SurvivesFailures,
    )
    from protocols.declaration import ProtocolDeclaration
    from protocols.hyper import DenseAccounting, ProtocolHyper, TrainingHyper
    from protocols.node_base import ProtocolNode
    from protocols.robust.aggregation_settings import DEFAULT_AGGREGATION, Aggregation
    from protocols.sdk.compute import ComputeStep
    from protocols.sdk.exchange import Exchange, OpenStep
    from protocols.sdk.learning import LocalSGD
    from protocols.sdk.mixing import mix, push_row, uniform_row
    from protocols.sdk.payload import Payload, dense
    from protocols.sdk.robust_mixing import robust_mix
    from protocols.sdk.star import Star


def _spec_side() -> dict[str, Any]:
    """The names a spec may import: nothing behind them imports torch."""
    from dfl_node import plan
    from dfl_node.learning import seeds
    from dfl_node.netsim import tdma, virtual_clock
    from dfl_node.runner import coordination
    from dfl_node.settings import model
    from protocols import capabilities, declaration, hyper
    from protocols.robust import aggregation_settings

    return {
        "numpy_stream": seeds.numpy_stream, "torch_stream": seeds.torch_stream,
        "Link": tdma.Link, "LinkModel": virtual_clock.LinkModel,
        "LinkStats": virtual_clock.LinkStats, "RunPlan": plan.RunPlan,
        "Coordination": coordination.Coordination, "ModelConfig": model.ModelConfig,
        "DynamicGraphs": capabilities.DynamicGraphs, "PrePhase": capabilities.PrePhase,
        "RunReport": capabilities.RunReport, "ServerBased": capabilities.ServerBased,
        "SurvivesFailures": capabilities.SurvivesFailures,
        "RobustAggregation": capabilities.RobustAggregation,
        "Aggregation": aggregation_settings.Aggregation,
        "DEFAULT_AGGREGATION": aggregation_settings.DEFAULT_AGGREGATION,
        "DenseAccounting": hyper.DenseAccounting, "ProtocolHyper": hyper.ProtocolHyper,
        "TrainingHyper": hyper.TrainingHyper,
        "ProtocolDeclaration": declaration.ProtocolDeclaration,
    }


def _node_side() -> dict[str, Any]:
    """The rest: the building blocks of a round and the runtime's node-side types."""
    from dfl_node.comm import channel
    from dfl_node.learning import flat, models, training
    from dfl_node.runner import context, membership
    from protocols import node_base
    from protocols.sdk import compute, exchange, learning, mixing, payload, robust_mixing, star

    return {
        "Layout": channel.Layout, "Received": channel.Received, "flatten": flat.flatten,
        "unflatten_into": flat.unflatten_into, "on_cpu": models.on_cpu,
        "reset_parameters": models.reset_parameters, "BatchSampler": training.BatchSampler,
        "evaluate": training.evaluate, "grad_of": training.grad_of,
        "NodeContext": context.NodeContext, "SurvivingGraph": membership.SurvivingGraph,
        "ProtocolNode": node_base.ProtocolNode, "ComputeStep": compute.ComputeStep,
        "Exchange": exchange.Exchange, "OpenStep": exchange.OpenStep,
        "LocalSGD": learning.LocalSGD, "mix": mixing.mix, "push_row": mixing.push_row,
        "uniform_row": mixing.uniform_row, "robust_mix": robust_mixing.robust_mix,
        "Payload": payload.Payload, "dense": payload.dense,
        "Star": star.Star,
    }


__all__ = [
    "DEFAULT_AGGREGATION",
    "Aggregation",
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
    "ModelConfig",
    "NodeContext",
    "OpenStep",
    "Payload",
    "PrePhase",
    "ProtocolDeclaration",
    "ProtocolHyper",
    "ProtocolNode",
    "Received",
    "RobustAggregation",
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
    "robust_mix",
    "torch_stream",
    "unflatten_into",
    "uniform_row",
]


# The names plugins written before the rename import (`from protocols.sdk import Protocol,
# ProtocolSpec, ModelSpec`): still resolved, with a DeprecationWarning on every import, never
# cached.
DEPRECATED = {"Protocol": "ProtocolNode", "ProtocolSpec": "ProtocolDeclaration",
              "ModelSpec": "ModelConfig"}


def _current(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module 'protocols.sdk' has no attribute {name!r}")
    names = _spec_side()
    if name not in names:
        names |= _node_side()
    globals().update(names)
    return names[name]


__getattr__ = renamed_names(__name__, {old: (f"{__name__}.{new}", partial(_current, new))
                                       for old, new in DEPRECATED.items()},
                            otherwise=_current)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
