"""A mesh made of this script's own objects: a protocol class defined here in `__main__`, a
networkx graph, a model factory and per-node arrays, run with `dfl_mesh.run` over each
transport named on the command line into OUT/<transport> (tests/test_given_objects.py).

A transport that refuses the objects prints its one line to stderr and the script goes on;
the script exits 2 if any did.

The protocol is adapt-then-combine diffusion (Sayed, 2014; D-PSGD's `atc` form, Lian et al.,
2017): each node takes an SGD step, w_i' = w_i - eta g_i(w_i), then mixes with its neighbours'
stepped models, w_i <- sum_j W_ij w_j' over the Metropolis row of the graph.
"""

from __future__ import annotations

import sys
from pathlib import Path

import networkx as nx
import numpy as np
import torch
from torch import nn

import dfl_mesh
from protocols.sdk import Exchange, LocalSGD, NodeContext, ProtocolNode, TrainingHyper, dense, mix

FEATURES, CLASSES, SAMPLES = 8, 3, 48


class Diffusion(ProtocolNode[TrainingHyper]):
    checkpoint_fields = ("sgd",)

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.weights = ctx.plan.weight_row(ctx.node_id)
        self.sgd = LocalSGD(ctx, self.hyper.batch_size)
        self.gossip = Exchange(ctx, "gossip", learner=self.sgd)

    def run_round(self, r: int) -> dict[str, float]:
        loss = self.sgd.step(self.hyper.lr)
        mine = {n: p.detach() for n, p in self.sgd.parameters().items()}
        mixed = mix(self.weights, self.ctx.node_id, mine, self.gossip(r, dense(mine)))
        with torch.no_grad():
            for name, p in self.sgd.parameters().items():
                p.copy_(mixed[name])
        return {"train_loss": loss}


def small_net() -> nn.Module:
    return nn.Sequential(nn.Linear(FEATURES, 16), nn.Tanh(), nn.Linear(16, CLASSES))


def node_arrays(nodes: int) -> dict[str, object]:
    """Labels by a fixed linear rule; each node's inputs shifted by its own offset."""
    rng = np.random.default_rng(7)
    rule = rng.normal(size=(FEATURES, CLASSES))

    def draw(shift: float) -> tuple[np.ndarray, np.ndarray]:
        x = rng.normal(loc=shift, size=(SAMPLES, FEATURES)).astype(np.float32)
        return x, np.argmax(x @ rule, axis=1)

    return {"train": [draw(0.2 * i) for i in range(nodes)], "test": draw(0.0)}


def main(out: Path, transports: list[str]) -> int:
    graph = nx.cycle_graph(4)
    graph.add_edge(0, 2)
    graph.name = "kite"
    data = node_arrays(graph.number_of_nodes())
    refused = False
    for transport in transports:
        try:
            dfl_mesh.run(graph, Diffusion, model=small_net, dataset=data, rounds=2,
                         transport=transport, lr=0.1, batch_size=16, out=out / transport,
                         progress=False, plots=False)
        except dfl_mesh.InputError as exc:
            print(exc, file=sys.stderr)
            refused = True
    return 2 if refused else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2:]))
