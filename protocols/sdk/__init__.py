"""The protocol SDK: what a protocol is written with, so that it reads like its paper.

A protocol declares its settings (`Hyper`, a typed model), its state (`checkpoint_fields`) and
its capabilities (mix-ins from protocols/capabilities.py), and writes `run_round` with these
building blocks, which do the runtime's duties for it:

- `LocalSGD`: the node's mini-batch stream and SGD steps, counted for the virtual clock;
- `Exchange`: one message to every neighbour and theirs back; the message schema is set from
  the first payload, the formula ledger is charged what the payload says it costs (the
  compressor's or the dense count), and the clock advances by the schedule;
- `Payload` / `dense`: tensors with their formula bits;
- `mix`: sum_j W_ij x_j over the node's row, in ascending j, for every gossip protocol.

docs/extending/protocol.md walks through a protocol written with them.
"""

from dfl_node.runner.context import NodeContext
from protocols.base import Protocol
from protocols.capabilities import PrePhase, RunReport, ServerBased, SurvivesFailures
from protocols.hyper import DenseAccounting, ProtocolHyper, TrainingHyper
from protocols.sdk.exchange import Exchange
from protocols.sdk.learning import LocalSGD
from protocols.sdk.mixing import mix
from protocols.sdk.payload import Payload, dense

__all__ = [
    "DenseAccounting",
    "Exchange",
    "LocalSGD",
    "NodeContext",
    "Payload",
    "PrePhase",
    "Protocol",
    "ProtocolHyper",
    "RunReport",
    "ServerBased",
    "SurvivesFailures",
    "TrainingHyper",
    "dense",
    "mix",
]
