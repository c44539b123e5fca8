"""A node thread of the in-process mesh that raises ends the run at once, and the run names it.

Threads of one process have no heartbeats to miss, so before this the node's neighbours waited
for its messages until wire.recv_timeout_s (300 s by default), then failed too, and the summary
named the smallest id among them instead of the node that broke."""

from __future__ import annotations

from pathlib import Path

import networkx as nx
import pytest

import dfl_mesh
from protocols.sdk import (
    Exchange,
    LocalSGD,
    NodeContext,
    ProtocolNode,
    SurvivesFailures,
    TrainingHyper,
    dense,
)

BROKEN = 3


class BreaksAtNodeThree(ProtocolNode[TrainingHyper], capabilities=(SurvivesFailures(),)):
    """Gossip whose node 3 raises in round 1, after one round of exchanges; it declares rules
    for losing a node, so that `--on-failure continue` may be asked of it too."""

    checkpoint_fields = ("sgd",)

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        self.sgd = LocalSGD(ctx, self.hyper.batch_size)
        self.gossip = Exchange(ctx, "breaks", learner=self.sgd)

    def run_round(self, r: int) -> dict[str, float]:
        if self.ctx.node_id == BROKEN and r == 1:
            raise RuntimeError("node 3 breaks on purpose")
        loss = self.sgd.step(self.hyper.lr)
        self.gossip(r, dense({n: p.detach() for n, p in self.sgd.parameters().items()}))
        return {"train_loss": loss}

    def on_graph_change(self, graph: object) -> None:
        """Never reached: a raising thread ends an in-process run under either policy."""


@pytest.mark.parametrize("on_failure", ["stop", "continue"])
def test_a_node_thread_that_raises_ends_the_run_and_is_named(tmp_path: Path,
                                                             on_failure: str) -> None:
    # recv_timeout_s short enough that the old wait ended inside the test, naming node 0
    result = dfl_mesh.run(nx.cycle_graph(6), BreaksAtNodeThree, dataset="synthetic", rounds=4,
                          transport="inproc", on_failure=on_failure,
                          overrides={"wire.recv_timeout_s": 20.0}, out=tmp_path / "run",
                          progress=False, plots=False)
    assert not result.ok and result.summary.status == "failed"
    assert result.summary.failed_node == BROKEN
    assert [f["node"] for f in result.summary.failures] == [BROKEN]
    assert "node 3 breaks on purpose" in result.summary.failures[0]["reason"]
