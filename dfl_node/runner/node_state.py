"""A node's checkpoint: the protocol's state plus the runtime's (ledgers, virtual clock, comm).

What a round reads is not only the model: the wire and formula ledgers and the virtual clock
go into summary.json, the slot-mismatch counter into metrics, and the last evaluation and the
pre-phase's traffic into the node's final record. A resumed node restores all of them before
it meets the mesh again, so its results equal those of a run that never stopped. Its second
start-up (plan agreement and start barriers) is not counted: the first one is in the
checkpoint's ledger.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from dfl_node.netsim.virtual_clock import LinkStats, VirtualClock
from dfl_node.plan import PlanError, RunPlan
from dfl_node.runner.context import NodeContext
from dfl_node.state import checkpoint_file as checkpoint
from dfl_node.state import checkpoint_layout as layout
from dfl_node.state.checkpoint_file import State
from dfl_node.state.checkpoint_layout import content_hashes
from dfl_node.state.sealed_file import CorruptFile


class Checkpointable(Protocol):
    """What the runtime needs of a protocol object (protocols/node_base.py implements it)."""

    def checkpoint_state(self) -> State: ...

    def restore_state(self, state: State) -> None: ...


@dataclass
class Resumed:
    """Where a resumed node picks up: after `round` rounds, with these final-record inputs."""

    round: int = 0
    last: dict[str, Any] = field(default_factory=dict)  # the last evaluation (accuracy, loss)
    prephase: dict[str, int] = field(default_factory=dict)


def save(out_dir: Path, plan: RunPlan, ctx: NodeContext, proto: Checkpointable,
         progress: Resumed) -> None:
    """Checkpoint after `progress.round` rounds, then drop this node's outdated ones. `plan`
    is the whole plan, which `load` compares with (`ctx.plan` is the protocol's view of it)."""
    state = proto.checkpoint_state()
    state.meta["runtime"] = {
        # which node and round the file holds: --resume refuses it under another name
        "node": ctx.node_id, "round": progress.round, "plan": content_hashes(plan),
        # the last metrics record sent; if it is this round's, a kill may have kept it from
        # the launcher, and `--resume` writes it from here (launcher/run/resume.py)
        "last": progress.last,
        "prephase": progress.prephase,
        "ledger": ctx.comm.ledger.state(progress.round),
        "formula": ctx.formula.state(),
        "clock": clock_state(ctx.clock),
        "slot_mismatches": ctx.comm.slot_mismatches,
    }
    checkpoint.write(layout.checkpoint_path(out_dir, ctx.node_id, progress.round), state)
    layout.prune(out_dir, ctx.node_id, plan.ids)


def load(out_dir: Path, plan: RunPlan, node_id: int) -> State | None:
    """This node's checkpoint to resume from (None: a fresh start); PlanError if it is
    missing, fails its digest or the one `--resume` checked it against, or was made under
    another plan."""
    point = layout.resume_point(out_dir)
    round_ = point.round
    if round_ == 0:
        return None
    path = layout.checkpoint_path(out_dir, node_id, round_)
    if not path.is_file():
        raise PlanError(f"node {node_id}: no checkpoint of round {round_} ({path})")
    try:
        state = checkpoint.read(path, point.digests.get(node_id))
    except CorruptFile as exc:
        raise PlanError(f"node {node_id}: checkpoint of round {round_}: {exc}") from None
    saved = state.meta["runtime"]["plan"]
    differ = sorted(k for k, v in content_hashes(plan).items() if saved.get(k) != v)
    if differ:
        raise PlanError(f"node {node_id}: the checkpoint of round {round_} was made under a "
                        f"plan that differs in {differ}")
    return state


def restore(state: State, ctx: NodeContext, proto: Checkpointable) -> Resumed:
    proto.restore_state(state)
    runtime = state.meta["runtime"]
    ctx.comm.ledger.load_state(runtime["ledger"])
    ctx.formula.load_state(runtime["formula"])
    load_clock(ctx.clock, runtime["clock"])
    ctx.comm.slot_mismatches = int(runtime["slot_mismatches"])
    last = {k: runtime["last"].get(k) for k in ("accuracy", "loss")}  # for the `done` record
    return Resumed(int(runtime["round"]), last, dict(runtime["prephase"]))


def clock_state(clock: VirtualClock) -> dict[str, Any]:
    return {"seconds": clock.seconds, "frames": clock.frames,
            "links": [[a, b, vars(stats)] for (a, b), stats in sorted(clock.link_stats.items())]}


def load_clock(clock: VirtualClock, state: dict[str, Any]) -> None:
    clock.seconds = float(state["seconds"])
    clock.frames = int(state["frames"])
    clock.link_stats = {(int(a), int(b)): LinkStats(**stats) for a, b, stats in state["links"]}
