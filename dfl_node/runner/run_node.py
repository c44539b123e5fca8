"""One node's life: connect, build model and data, run the protocol's rounds, report, save.

The same function runs in a launcher-spawned process, under `dfl-node` on another host, and as a
thread of the in-process transport; only the transport and the sink of its records differ.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dfl_node.comm.channel import HELLO_PHASE, Comm
from dfl_node.comm.rendezvous import deadline_after, patience
from dfl_node.ledgers.formula import FormulaLedger
from dfl_node.ledgers.traffic import Ledger
from dfl_node.netsim.tdma import schedule_from_plan
from dfl_node.netsim.virtual_clock import LinkModel, VirtualClock
from dfl_node.plan import PlanError, RunPlan
from dfl_node.runner import node_state as node_checkpoint
from dfl_node.runner.algorithm import AlgorithmClass, FailureAware, NodeAlgorithm, Reporting
from dfl_node.runner.context import NodeContext
from dfl_node.runner.membership import FailureHandling, SurvivingGraph
from dfl_node.runner.node_state import Resumed
from dfl_node.runner.prephase_client import PrephaseChannel, run_prephase
from dfl_node.runner.process_memory import release_free_heap
from dfl_node.runner.profiling import profiled
from dfl_node.runner.receive_caps import wire_limits
from dfl_node.runner.record_sink import RecordSink, params_due, params_record
from dfl_node.runner.records import DoneRecord, MetricsRecord, ReadyRecord
from dfl_node.state import checkpoint_layout as checkpoint
from dfl_node.state.checkpoint_file import write_tensors
from dfl_node.transports.base import Transport
from dfl_node.transports.liveness import stall_for_test
from dfl_node.wire.tags import Tag

PLAN_PHASE = "plan"  # the control message that carries a node's plan hashes


def make_comm(plan: RunPlan, node_id: int, transport: Transport, clock: VirtualClock) -> Comm:
    return Comm(node_id, plan.neighbors(node_id), transport, wire_limits(plan), Ledger(node_id),
                recv_timeout_s=plan.wire.recv_timeout_s, schedule=clock.schedule,
                on_frame=clock.tdma_frame, resume_every=plan.checkpoint_every)


def node_clock(plan: RunPlan, node_id: int) -> VirtualClock:
    """The node's virtual clock with the TDMA schedule this node computes itself from the plan
    (PlanError if it is not the plan's)."""
    try:
        schedule = schedule_from_plan(plan.topology, plan.schedule)
        model = LinkModel.from_plan(plan.topology, plan.link, plan.seed)
    except ValueError as exc:
        raise PlanError(f"node {node_id}: {exc}") from None
    return VirtualClock(model, schedule, node_id)


def run_node(plan: RunPlan, node_id: int, algorithm: AlgorithmClass, transport: Transport,
             sink: RecordSink, out_dir: Path, prephase: PrephaseChannel | None = None) -> None:
    """Run node `node_id` of `plan` to completion; its final model lands in `out_dir/final/`.

    `algorithm` is the plan's protocol class, looked up by the caller: the runtime knows none."""
    clock = node_clock(plan, node_id)
    comm = make_comm(plan, node_id, transport, clock)
    entry = plan.node(node_id)
    # A container given only its GPU sees it as cuda:0 (launcher/backends/compose.py says so here);
    # the plan and every report keep the plan's name for it.
    device = torch.device(os.environ.get("DFL_MESH_DEVICE") or entry.device)
    cls = algorithm
    model, data = cls.build_workload(plan, node_id)
    ctx = NodeContext(node_id, plan.seen_by_protocol(), comm, model.to(device), data, device,
                      clock, FormulaLedger(node_id), adversary=plan.adversary_role(node_id))
    proto = cls(ctx)
    saved = node_checkpoint.load(out_dir, plan, node_id)
    resumed = node_checkpoint.restore(saved, ctx, proto) if saved is not None else None
    sink.emit(ReadyRecord(type="ready", node=node_id, pid=os.getpid()).model_dump())
    meet_mesh(comm, plan, resumed.round if resumed else None)
    prephase_traffic = (resumed.prephase if resumed
                        else run_prephase(plan.prephase, node_id, proto, prephase))
    last: dict[str, Any] = resumed.last if resumed else {}
    failures = FailureHandling(comm, transport.liveness, plan.wire.on_failure,
                               plan.ids, plan.edges())
    round_seconds: dict[str, float] = {}  # wall time of each round's own work, for the summary
    round_cpu_seconds: dict[str, float] = {}  # ... and its CPU time (all the process's threads)
    first_round_at: float | None = None  # Unix time this node finished its first round
    first_round_began_at: float | None = None  # ... and began it (start-up ends here)
    learns = node_id in plan.clients  # (asked once: the plan's lists are built per call)
    on_graph_change = graph_change(proto)

    def metrics(round_: int, info: dict[str, float]) -> dict[str, Any]:
        """The metrics record of the models as they stand after `round_` rounds, in the key
        order metrics.jsonl keeps (the protocol's keys amid the runtime's), checked against
        the model every reader parses it with. The heap's free pages go back to the system
        before and after the evaluation (dfl_node/runner/process_memory.py)."""
        release_free_heap()
        evaluated = proto.evaluate()
        release_free_heap()
        record = {"type": "metrics", "round": round_, "node": node_id, **evaluated,
                  "wire_bytes": comm.ledger.wire_bytes(),
                  "virtual_seconds": clock.seconds, "eval_split": plan.data.eval_split,
                  "slot_mismatches": comm.slot_mismatches,
                  "retransmissions": clock.retransmissions(), **info}
        MetricsRecord.model_validate(record)
        return record

    if learns and plan.eval_at_start and resumed is None:
        last = metrics(0, {})
        sink.emit(last)
    with profiled(node_id, out_dir):
        for r in range(resumed.round if resumed else 0, plan.rounds):
            comm.round = r
            if plan.round_graphs is not None:  # a directed or time-varying graph: r's arcs
                comm.set_round_links(plan.out_neighbors(node_id, r), plan.in_neighbors(node_id, r))
            if stalled := stall_for_test(node_id, r):
                ctx.log.info(stalled)
            began, cpu_began = time.perf_counter(), time.process_time()
            first_round_began_at = first_round_began_at or time.time()
            info = proto.run_round(r)
            failures.after_round(r, on_graph_change)
            if plan.round_graphs is not None:
                keep_in_step(comm)
            round_seconds[str(r)] = time.perf_counter() - began
            round_cpu_seconds[str(r)] = time.process_time() - cpu_began
            first_round_at = first_round_at or time.time()
            if learns and ((r + 1) % plan.eval_every == 0 or r + 1 == plan.rounds):
                last = metrics(r + 1, info)
                sink.emit(last)
                if params_due(plan.cycle_metrics.params_every, plan.eval_every,
                              plan.rounds, r + 1):
                    sink.emit(params_record(node_id, r + 1, proto.eval_model().state_dict()))
            if checkpoint.due(plan.checkpoint_every, r + 1):
                node_checkpoint.save(out_dir, plan, ctx, proto,
                                     Resumed(r + 1, last, prephase_traffic))
    comm.close()
    survival = failures.report()
    final = out_dir / "final"
    # sealed like a checkpoint: a reader checks a final model (dfl_mesh.load(...).verify())
    write_tensors(final / f"node-{node_id}.safetensors", proto.eval_model().state_dict())
    extra = proto.extra_state()
    if extra:
        write_tensors(final / f"node-{node_id}-copies.safetensors", extra)
    done = DoneRecord(
        type="done", node=node_id, pid=os.getpid(), host=socket.gethostname(),
        device=entry.device, accuracy=last.get("accuracy"), loss=last.get("loss"),
        **{k: last[k] for k in ("global_accuracy", "global_loss") if k in last},
        virtual_seconds=clock.seconds, ledger=comm.ledger.to_json(),
        formula=ctx.formula.to_json(), protocol=proto.summary(),
        rejected=dict(comm.ledger.rejected), slot_mismatches=comm.slot_mismatches,
        links=clock.link_report(), prephase=prephase_traffic,
        report=proto.node_report() if isinstance(proto, Reporting) else {},
        round_seconds=round_seconds, round_cpu_seconds=round_cpu_seconds,
        first_round_at=first_round_at, first_round_began_at=first_round_began_at, **survival)
    sink.emit(done.model_dump(exclude_unset=True))


def agree_on_plan(comm: Comm, plan: RunPlan) -> None:
    """Refuse to start beside a neighbour whose plan differs (another TDMA schedule, other
    seeds, ...): the first message to each neighbour carries this node's section hashes, and
    the error names the sections that differ."""
    hashes = plan.section_hashes()
    names = sorted(hashes)
    mine = np.frombuffer("".join(hashes[n] for n in names).encode(), dtype=np.uint8)
    theirs = comm.exchange(Tag("ctrl", comm.round, PLAN_PHASE), {"hashes": mine})
    width = len(mine) // len(names)
    for peer, tensors in theirs.items():
        got = tensors["hashes"].numpy().tobytes()
        differ = [n for i, n in enumerate(names)
                  if got[i * width:(i + 1) * width] != hashes[n].encode()]
        if differ or len(got) != len(mine):
            raise PlanError(f"node {comm.node_id}: node {peer}'s plan differs in "
                            f"{differ or 'its sections'}; refusing to start")


def meet_mesh(comm: Comm, plan: RunPlan, resumed_at: int | None = None) -> None:
    """The start-up: plan agreement with every neighbour, then the mesh-wide start barrier,
    all under one rendezvous deadline (nodes may start minutes apart; dfl_node/comm/rendezvous.py).
    After `diameter` neighbourhood barriers every node has heard, hop by hop, from every
    other, so no node trains while others are still starting (on a shared machine early
    starters would otherwise slow the rest down). A node resumed after round `resumed_at`
    meets at that round (fast neighbours' next messages are then in its window) and leaves
    this start-up out of its ledger, which holds the first one already."""
    if resumed_at is not None:
        comm.round = resumed_at
        comm.ledger.quiet_phases = frozenset({PLAN_PHASE, HELLO_PHASE})
    seconds = plan.wire.rendezvous_seconds
    deadline = deadline_after(seconds)
    try:
        with patience(comm, deadline, seconds):
            agree_on_plan(comm, plan)
        for _ in range(max(1, plan.diameter())):
            with patience(comm, deadline, seconds):
                comm.barrier()
    finally:
        comm.ledger.quiet_phases = frozenset()


def keep_in_step(comm: Comm) -> None:
    """End a round of a directed or time-varying graph with a barrier over every link. An arc
    carries no answer, so a node that receives nothing in a round (a random-peers draw, an
    isolated node of a cycle's graph) would not wait for anyone and could run rounds ahead of
    the nodes it sends to, whose window (DEFAULT_WINDOW rounds) then refuses its messages as
    stale_or_future; on one undirected graph every exchange is such a barrier already. The
    cost is one empty control message per link and round, in the ledger's control traffic."""
    comm.end_round()


def graph_change(proto: NodeAlgorithm) -> Callable[[SurvivingGraph], None]:
    """The protocol's rule for a smaller graph; one without rules (the launcher refuses
    `--on-failure continue` for it) never gets here with a changed graph."""
    if isinstance(proto, FailureAware):
        return proto.on_graph_change

    def refuse(graph: SurvivingGraph) -> None:
        raise RuntimeError(f"{type(proto).__name__} has no rules for losing a node")
    return refuse
