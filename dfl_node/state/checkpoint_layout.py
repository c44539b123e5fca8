"""Where a run's checkpoints are and which rounds they make resumable: files and names only,
no tensors (checkpoint_file.py reads and writes those), so the launcher finds the round to
resume from without importing torch.

A node's checkpoints are `RUN_DIR/checkpoints/node-<id>/round-<k>.safetensors` (k = rounds
completed). A round is complete when every node of the plan has its file; a node prunes its
own files older than the last two complete rounds: the newest is where a resume starts, the one
before is where it falls back to when a file of the newest is refused (checkpoint_check.py). It
reads its siblings' directories for that, so on hosts that do not share the run directory
nothing is pruned. `checkpoints/resume.json` tells the nodes started next where they resume:
the round, and each node's file with the digest `--resume` checked it against.

`content_hashes` are the plan's section hashes with the run's addresses blanked: a resumed run
claims fresh ports, yet must be the same run in everything else. (The mixing weights are left
out too: they follow from the topology and the mixing scheme, so a changed topology file is
named as such, not as a changed protocol.)
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dfl_node.plan import RunPlan, section_hashes_of
from dfl_node.state import sealed_file

META_KEY = "dfl_mesh_state"  # the safetensors metadata key of a checkpoint's JSON part
RESUME_FILE = "resume.json"
KEPT_ROUNDS = 2  # complete rounds a node keeps: where a resume starts, and its fall-back
_ROUND_FILE = re.compile(r"round-(\d+)\.safetensors")
_ADDRESS_KEYS = ("bind", "address")


@dataclass(frozen=True)
class ResumePoint:
    """Where the nodes started next in a run directory begin."""

    round: int = 0  # rounds done; 0: a fresh start
    digests: dict[int, str] = field(default_factory=dict)  # node -> its checked file's digest


def runtime_of(path: Path) -> dict[str, Any]:
    """The runtime part of a checkpoint's JSON (its node and round, the plan's hashes, the last
    record the node sent: node_state.py), from the checked file, without torch."""
    return runtime_in(sealed_file.verify(path).metadata)


def runtime_in(metadata: Mapping[str, str]) -> dict[str, Any]:
    """The runtime part of a checkpoint's JSON from its file's metadata ({} if it has none);
    ValueError if the JSON is not JSON."""
    meta = json.loads(metadata.get(META_KEY, "{}"))
    runtime = meta.get("runtime") if isinstance(meta, dict) else None
    return runtime if isinstance(runtime, dict) else {}


def checkpoints_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "checkpoints"


def checkpoint_path(run_dir: Path, node_id: int, round_: int) -> Path:
    return checkpoints_dir(run_dir) / f"node-{node_id}" / f"round-{round_}.safetensors"


def due(every: int, rounds_done: int) -> bool:
    """Whether a node saves after `rounds_done` rounds (`checkpoint_every`: 0 never)."""
    return every > 0 and rounds_done % every == 0


def saved_rounds(run_dir: Path, node_id: int) -> list[int]:
    folder = checkpoints_dir(run_dir) / f"node-{node_id}"
    if not folder.is_dir():
        return []
    return sorted(int(m.group(1)) for p in folder.iterdir()
                  if (m := _ROUND_FILE.fullmatch(p.name)))


def complete_rounds(run_dir: Path, ids: list[int]) -> list[int]:
    """The rounds every node of `ids` has a checkpoint file of, oldest first."""
    common: set[int] | None = None
    for node_id in ids:
        rounds = set(saved_rounds(run_dir, node_id))
        common = rounds if common is None else common & rounds
    return sorted(common or ())


def last_complete_round(run_dir: Path, ids: list[int]) -> int:
    """The latest round every node of `ids` has a checkpoint of; 0 if there is none."""
    return max(complete_rounds(run_dir, ids), default=0)


def prune(run_dir: Path, node_id: int, ids: list[int]) -> None:
    """Delete this node's checkpoints older than the last KEPT_ROUNDS rounds all nodes
    completed."""
    kept = complete_rounds(run_dir, ids)[-KEPT_ROUNDS:]
    for round_ in saved_rounds(run_dir, node_id):
        if kept and round_ < kept[0]:
            checkpoint_path(run_dir, node_id, round_).unlink(missing_ok=True)


def clear(run_dir: Path) -> None:
    """A fresh run in an old directory must not resume from that directory's checkpoints."""
    shutil.rmtree(checkpoints_dir(run_dir), ignore_errors=True)


def set_resume_point(run_dir: Path, point: ResumePoint) -> None:
    """Tell the nodes started next in `run_dir` where they start (round 0: fresh)."""
    path = checkpoints_dir(run_dir) / RESUME_FILE
    if point.round == 0:
        path.unlink(missing_ok=True)
        return
    files = {str(node): {"file": str(checkpoint_path(Path(), node, point.round)),
                         "sha256": digest} for node, digest in sorted(point.digests.items())}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"round": point.round, "files": files}, indent=1) + "\n")


def resume_point(run_dir: Path) -> ResumePoint:
    """Where a node started in `run_dir` begins (round 0: a fresh start)."""
    path = checkpoints_dir(run_dir) / RESUME_FILE
    if not path.is_file():
        return ResumePoint()
    body = json.loads(path.read_text())
    return ResumePoint(int(body["round"]), {int(node): str(entry["sha256"])
                                            for node, entry in body.get("files", {}).items()})


def content_hashes(plan: RunPlan) -> dict[str, str]:
    """The plan's section hashes without its addresses (ports differ between launches)."""
    data = plan.to_dict()
    # a discovered node's host is where the scheduler put it this time, an address as well
    blank = (*_ADDRESS_KEYS, "host") if plan.discovery else _ADDRESS_KEYS
    data["nodes"] = [{**n, **dict.fromkeys(blank, "")} for n in data["nodes"]]
    data["prephase"] = {k: v for k, v in data["prephase"].items() if k not in _ADDRESS_KEYS}
    data["discovery"] = {k: v for k, v in data["discovery"].items() if k not in _ADDRESS_KEYS}
    data["collector"] = ""
    data["weights"] = []  # a function of the topology and `mixing`, both compared already
    return section_hashes_of(data)
