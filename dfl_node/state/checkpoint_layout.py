"""Where a run's checkpoints are and which rounds they make resumable: files and names only,
no tensors (checkpoint_file.py reads and writes those), so the launcher finds the round to
resume from without importing torch.

A node's checkpoints are `RUN_DIR/checkpoints/node-<id>/round-<k>.safetensors` (k = rounds
completed). A round is resumable when every node of the plan has its file; a node prunes its
own files older than that round (it reads its siblings' directories, so on hosts that do not
share the run directory nothing is pruned).

`content_hashes` are the plan's section hashes with the run's addresses blanked: a resumed run
claims fresh ports, yet must be the same run in everything else. (The mixing weights are left
out too: they follow from the topology and the mixing scheme, so a changed topology file is
named as such, not as a changed protocol.)
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from safetensors import safe_open

from dfl_node.plan import SECTIONS, RunPlan

META_KEY = "dfl_mesh_state"  # the safetensors metadata key of a checkpoint's JSON part
RESUME_FILE = "resume.json"
_ROUND_FILE = re.compile(r"round-(\d+)\.safetensors")
_ADDRESS_KEYS = ("bind", "address")


def runtime_of(path: Path) -> dict[str, Any]:
    """The runtime part of a checkpoint's JSON (its round, the plan's hashes, the last record
    the node sent: node_state.py), read without its tensors and without torch."""
    with safe_open(str(path), framework="numpy") as handle:
        meta = json.loads((handle.metadata() or {})[META_KEY])
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


def last_complete_round(run_dir: Path, ids: list[int]) -> int:
    """The latest round every node of `ids` has a checkpoint of; 0 if there is none."""
    common: set[int] | None = None
    for node_id in ids:
        rounds = set(saved_rounds(run_dir, node_id))
        common = rounds if common is None else common & rounds
    return max(common or {0})


def prune(run_dir: Path, node_id: int, ids: list[int]) -> None:
    """Delete this node's checkpoints older than the last round all nodes completed."""
    keep_from = last_complete_round(run_dir, ids)
    for round_ in saved_rounds(run_dir, node_id):
        if round_ < keep_from:
            checkpoint_path(run_dir, node_id, round_).unlink(missing_ok=True)


def clear(run_dir: Path) -> None:
    """A fresh run in an old directory must not resume from that directory's checkpoints."""
    shutil.rmtree(checkpoints_dir(run_dir), ignore_errors=True)


def set_resume_round(run_dir: Path, round_: int) -> None:
    """Tell the nodes started next in `run_dir` to start after round `round_` (0: fresh)."""
    path = checkpoints_dir(run_dir) / RESUME_FILE
    if round_ == 0:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"round": round_}) + "\n")


def resume_round(run_dir: Path) -> int:
    """The round a node started in `run_dir` resumes after (0: a fresh start)."""
    path = checkpoints_dir(run_dir) / RESUME_FILE
    return int(json.loads(path.read_text())["round"]) if path.is_file() else 0


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
    plain = RunPlan.from_dict(data)
    return {name: plain.section_hashes()[name] for name in SECTIONS}
