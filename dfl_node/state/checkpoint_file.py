"""Checkpoint files: one node's full state after a round, pickle-free, written atomically.

A checkpoint is one safetensors file, `RUN_DIR/checkpoints/node-<id>/round-<k>.safetensors`
(k = rounds completed): the tensors (model, optimizer buffers, copies, torch generator states)
as tensors, everything else (numpy generator states, ledgers, the virtual clock, counters) as
one JSON document in the file's metadata. One file means one rename, so a checkpoint either
exists whole or not at all: it is written to a temporary name beside it, fsync'ed, renamed
into place, and the directory is fsync'ed. A round is resumable when every node of the plan
has its file; a node prunes its own files older than that round (it reads its siblings'
directories, so on hosts that do not share the run directory nothing is pruned).

`content_hashes` are the plan's section hashes with the run's addresses blanked: a resumed run
claims fresh ports, yet must be the same run in everything else. (The mixing weights are left
out too: they follow from the topology and the mixing scheme, so a changed topology file is
named as such, not as a changed protocol.)
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import save

from dfl_node.plan import SECTIONS, RunPlan

META_KEY = "dfl_mesh_state"
RESUME_FILE = "resume.json"
_ROUND_FILE = re.compile(r"round-(\d+)\.safetensors")
_ADDRESS_KEYS = ("bind", "address")


@dataclass
class State:
    """Named tensors plus JSON data; nested parts share one namespace through `/` prefixes."""

    tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    def put(self, name: str, part: State) -> None:
        self.tensors.update({f"{name}/{k}": v for k, v in part.tensors.items()})
        self.meta[name] = part.meta

    def part(self, name: str) -> State:
        prefix = f"{name}/"
        return State({k[len(prefix):]: v for k, v in self.tensors.items() if k.startswith(prefix)},
                     dict(self.meta.get(name, {})))


def checkpoints_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "checkpoints"


def checkpoint_path(run_dir: Path, node_id: int, round_: int) -> Path:
    return checkpoints_dir(run_dir) / f"node-{node_id}" / f"round-{round_}.safetensors"


def due(every: int, rounds_done: int) -> bool:
    """Whether a node saves after `rounds_done` rounds (`checkpoint_every`: 0 never)."""
    return every > 0 and rounds_done % every == 0


def write(path: Path, state: State) -> None:
    """Write `state` to `path` atomically: temp file, fsync, rename, fsync of the directory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().cpu().contiguous() for k, v in state.tensors.items()}
    body = save(tensors, metadata={META_KEY: json.dumps(state.meta, sort_keys=True)})
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("wb") as handle:
        handle.write(body)
        handle.flush()
        os.fsync(handle.fileno())
    tmp.replace(path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def read(path: Path) -> State:
    with safe_open(str(path), framework="pt") as handle:
        meta = json.loads((handle.metadata() or {})[META_KEY])
        tensors = {k: handle.get_tensor(k) for k in handle.keys()}  # noqa: SIM118
    return State(tensors, meta)


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
