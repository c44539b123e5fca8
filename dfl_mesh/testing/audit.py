"""The state audit: what `run_round` changes that a checkpoint would not save.

A resumed node is a freshly constructed protocol object with its checkpoint put back: the model
and the `checkpoint_fields`. Whatever else a round changed (a Push-Sum weight, a momentum
buffer, a counter, a sampler's position) restarts from its constructed value, and the run goes
on, exit 0, to other final files. The audit runs the protocol's real nodes (the inproc mesh,
the runtime's own `run_node`), records every value each node's protocol object holds before
and after each round (dfl_mesh/testing/state_walk.py) and names each value that changed and that
neither the model nor `checkpoint_fields` covers.
"""

from __future__ import annotations

import queue
import threading
import traceback
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dfl_mesh.testing.mesh import Mesh, mesh, workspace
from dfl_mesh.testing.state_walk import Leaf, coverage, snapshot
from dfl_node.learning.torch_settings import apply_runtime
from dfl_node.plan import RunPlan
from dfl_node.runner.prephase_client import InprocPrephaseHub
from dfl_node.runner.record_sink import QueueRecordSink
from dfl_node.runner.run_node import run_node
from dfl_node.transports.inproc import InprocHub, InprocTransport
from launcher.config.inputs import resolve
from launcher.config.ports import PortClaims
from launcher.run.prephase_coordinator import start_coordinator
from protocols.node_base import ProtocolNode
from protocols.registry import node_class


@dataclass(frozen=True)
class Change:
    """A value a round changed: its kind, and the first node and round that changed it."""

    kind: str
    node: int
    round: int
    covered: bool

    def describe(self, path: str) -> str:
        return f"{path} ({self.kind}; node {self.node}, round {self.round})"


@dataclass
class Audit:
    """What the audit saw: every path a round changed, covered by the checkpoint or not."""

    protocol: str
    changed: dict[str, Change] = field(default_factory=dict)

    @property
    def missing(self) -> dict[str, Change]:
        return {path: c for path, c in self.changed.items() if not c.covered}

    def record(self, path: str, change: Change) -> None:
        known = self.changed.get(path)
        if known is None or (change.round, change.node) < (known.round, known.node):
            self.changed[path] = change

    def reason(self) -> str:
        """The failure's one line (empty when nothing is missing)."""
        missing = self.missing
        if not missing:
            return ""
        listed = "; ".join(c.describe(p) for p, c in sorted(missing.items()))
        return (f"{self.protocol}: run_round changes what checkpoint_fields leaves out, so a "
                f"resumed node would restart it from its constructed value: {listed}. Add each "
                "to checkpoint_fields (a dotted path reaches inside an object)")


def audit_checkpoint_fields(protocol: str, *, topology: str | Path | None = None,
                            workdir: str | Path | None = None,
                            overrides: Mapping[str, Any] | None = None,
                            ignore: Iterable[str] = (), **settings: Any) -> Audit:
    """Run `protocol`'s nodes in this process for the run's rounds and raise an AssertionError
    naming every attribute (dotted path from the protocol object: `weight`, `sgd.batches`,
    `buffers['m']`) that some round changed and that the checkpoint does not save.

    `ignore`: paths the author knows a resumed node rebuilds (a cache filled each round); they
    and everything below them are left out. Returns the Audit (every changed path) when none is
    missing."""
    with workspace(workdir) as where:
        audit = audit_mesh(mesh(protocol, where, topology, overrides, settings), where / "audit",
                           tuple(ignore))
        if audit.missing:
            raise AssertionError(audit.reason())
        return audit


def audit_mesh(kit_mesh: Mesh, out: Path, ignore: tuple[str, ...] = ()) -> Audit:
    """The audit of one mesh's run into `out` (its final/ files and logs land there)."""
    plan = resolved_plan(kit_mesh)
    audit = Audit(kit_mesh.protocol)
    lock = threading.Lock()
    base = node_class(plan.protocol)

    def watched(proto: ProtocolNode, r: int) -> dict[str, float]:
        ctx = proto.ctx
        skip = {id(x) for x in (ctx, ctx.comm, ctx.clock, ctx.formula, ctx.plan, ctx.data)}
        before = snapshot(proto, skip)
        info = base.run_round(proto, r)
        after = snapshot(proto, skip)
        cov = coverage(proto, ctx.model, () if proto.adversary is None else (proto.adversary,))
        with lock:
            for path, leaf in after.items():
                if _ignored(path, ignore) or _same(before.get(path), leaf):
                    continue
                audit.record(path, Change(leaf.kind, ctx.node_id, r, cov.covers(leaf)))
        return info

    audited = type(base.__name__, (base,), {"run_round": watched,
                                            "__module__": base.__module__})
    run_inproc(plan, audited, out)
    return audit


def _same(before: Leaf | None, after: Leaf) -> bool:
    return before is not None and before.kind == after.kind and before.digest == after.digest


def _ignored(path: str, ignore: tuple[str, ...]) -> bool:
    return any(path == p or path.startswith((f"{p}.", f"{p}[")) for p in ignore)


def resolved_plan(kit_mesh: Mesh) -> RunPlan:
    """The plan `dfl-launch` would run for this mesh over the inproc transport (data prepared,
    as for a run)."""
    claims = PortClaims()
    try:
        return resolve(kit_mesh.spec(transport="inproc"), claims)[1]
    finally:
        claims.release()


def run_inproc(plan: RunPlan, algorithm: type[ProtocolNode], out: Path) -> None:
    """Every node of `plan` as a thread running `algorithm` through the runtime's `run_node`,
    as the inproc transport does; the first node's error, if any, as an AssertionError."""
    apply_runtime(plan.hyper)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    hub, prephase = InprocHub(plan.ids), InprocPrephaseHub(plan.ids)
    coordinator = start_coordinator(plan, out, prephase)
    records: queue.Queue[bytes] = queue.Queue()  # metrics records: the audit reads none
    failures: list[tuple[int, str]] = []  # the first is the cause, the rest were stopped

    def body(node_id: int) -> None:
        transport = InprocTransport(node_id, hub, set(plan.neighbors(node_id)))
        try:
            run_node(plan, node_id, algorithm, transport, QueueRecordSink(records), out,
                     prephase.channel(node_id) if plan.prephase else None)
        except Exception as exc:
            failures.append((node_id, f"{type(exc).__name__}: {exc}"))
            (out / "logs" / f"node-{node_id}.log").write_text(traceback.format_exc())
            hub.stop()  # the others would wait for this node's messages until they time out

    threads = [threading.Thread(target=body, args=(i,), name=f"audit-node-{i}", daemon=True)
               for i in plan.ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if coordinator is not None:
        coordinator.join()
    if failures:
        node_id, error = failures[0]
        raise AssertionError(f"{plan.protocol}: node {node_id} failed under the audit: "
                             f"{error} (traceback in {out}/logs)")
