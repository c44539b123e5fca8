"""Epidemic Learning (de Vos, Farhadkhani, Guerraoui, Kermarrec, Pires and Sharma, NeurIPS
2023, "Epidemic Learning: Boosting Decentralized Learning with Randomized Communication"),
Algorithm 1 (EL-Local): in every round each node trains, sends its model to s peers drawn at
random, and averages what it received with its own:

    x_i^(t+1/2) = H local SGD steps from x_i^(t)                         (local training)
    x_i^(t+1)   = (x_i^(t+1/2) + sum_{j in S_i^(t)} x_j^(t+1/2)) / (|S_i^(t)| + 1)

S_i^(t), the nodes that sent to i in round t, are i's in-neighbours of round t. The draw of the
s peers is the topology's `random-peers` schedule (topologies/schedules.py): seeded by the run's
seed and the round, so every node knows who sends to it without a message, and a resumed run
draws the same peers. On any other topology the node pushes to the round's out-neighbours and
averages the same way (on one undirected graph: uniform gossip).

Formula bits (docs/protocols/epidemic.md#formula-bits): P b_fp per out-arc and round (s P b_fp
per node under random-peers), plus `accounting.b_hdr` per message.
"""

from __future__ import annotations

import torch

from protocols.dynamic.declarations import EPIDEMIC_SPEC, EpidemicHyper
from protocols.sdk import Exchange, LocalSGD, NodeContext, ProtocolNode, dense, mix
from protocols.sdk.mixing import uniform_row


class Epidemic(ProtocolNode[EpidemicHyper]):
    spec = EPIDEMIC_SPEC
    checkpoint_fields = ("sgd",)

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.sgd = LocalSGD(ctx, self.hyper.batch_size)
        self.push = Exchange(ctx, "push", learner=self.sgd)

    def run_round(self, r: int) -> dict[str, float]:
        me = self.ctx.node_id
        loss = 0.0
        for _ in range(self.hyper.local_steps):
            loss = self.sgd.step(self.hyper.lr)
        mine = {n: p.detach() for n, p in self.sgd.parameters().items()}
        theirs = self.push(r, dense(mine, self.hyper.accounting))
        mixed = mix(uniform_row(me, self.ctx.comm.in_neighbors), me, mine, theirs)
        with torch.no_grad():
            for name, p in self.sgd.parameters().items():
                p.copy_(mixed[name])
        return {"train_loss": loss, "received": float(len(theirs))}
