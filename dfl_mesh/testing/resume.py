"""Kill and resume against an uninterrupted run: a run SIGKILLed after a round (a real run, its
launcher and every node killed at once) and resumed with `dfl_mesh.resume` ends with what the
same run without the kill ends with: final files, ledgers, formula bits, virtual time, every
metrics row once.

A protocol that leaves state out of its checkpoint (`checkpoint_fields`) resumes with exit 0
and other results; where it does, the failure also names what the state audit finds missing.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dfl_mesh.testing.audit import audit_mesh
from dfl_mesh.testing.compare import results_difference
from dfl_mesh.testing.kill import kill_after_checkpoint, node_ids
from dfl_mesh.testing.mesh import Mesh, check_ok, mesh, workspace
from dfl_node.state import checkpoint_layout as layout
from launcher.api.running import resume


def assert_resume_exact(protocol: str, *, kill_after_round: int = 1,
                        topology: str | Path | None = None, workdir: str | Path | None = None,
                        overrides: Mapping[str, Any] | None = None, **settings: Any) -> None:
    """Run `protocol` through once (inproc), once over zmq killed after `kill_after_round`
    rounds and resumed; raise an AssertionError naming the first file and field where the
    resumed run ends otherwise. Checkpoints are taken every `kill_after_round` rounds unless
    `checkpoint_every` (a divisor of it) is given."""
    with workspace(workdir) as where:
        kit_mesh = mesh(protocol, where, topology, overrides,
                        {"checkpoint_every": kill_after_round, **settings})
        every = int(kit_mesh.settings["checkpoint_every"])
        if not 0 < kill_after_round < kit_mesh.rounds or kill_after_round % every:
            raise ValueError(f"kill_after_round={kill_after_round}: needs 0 < it < rounds="
                             f"{kit_mesh.rounds} and a checkpoint then (checkpoint_every="
                             f"{every})")
        kit_mesh.run(where / "full", transport="inproc")
        cut = where / "cut"
        kill_after_checkpoint(cut, kill_after_round, kit_mesh.argv(transport="zmq"))
        resumed_from = layout.last_complete_round(cut, node_ids(cut))
        check_ok(resume(cut, progress=False, plots=False), f"{protocol} resumed")
        differ = results_difference(cut, where / "full")
        if differ is not None:
            raise AssertionError(f"{protocol}: killed after round {resumed_from} and resumed, "
                                 f"the run ends otherwise than uninterrupted: {differ}"
                                 + audit_hint(kit_mesh, where / "audit"))


def audit_hint(kit_mesh: Mesh, out: Path) -> str:
    """What the state audit finds missing from the checkpoint, as the end of a reason."""
    try:
        missing = audit_mesh(kit_mesh, out).missing
    except AssertionError as exc:  # the audit's own run failed: say so, keep the main reason
        print(f"dfl_mesh.testing: the state audit could not run: {exc}", file=sys.stderr)
        return ""
    if not missing:
        return ""
    return "; checkpoint_fields leaves out " + ", ".join(
        c.describe(p) for p, c in sorted(missing.items()))
