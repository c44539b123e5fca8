"""Which round a run can resume from, each node's file of it checked before any node starts.

A resumed run must end exactly as a run that never stopped, so a checkpoint is used only if
it is what its name says: its bytes match the digest it carries (sealed_file.py: no flipped
bit, changed generator state, cut or unreadable file), and its metadata holds the node and the
round its path names (not an intact file of another round or node copied under this name) and
the run's plan. A file that fails is refused with one line naming the node, the round, the
file and the reason.

The newest round every node has a file of is checked first; where a file of it is refused,
the next older such round, and so on: the answer is the newest round every node holds intact
(0: none, the run starts over) with each node's digest, and the files refused on the way. What
`--resume` then does, fall back to that round or stop, is the run's `on_corrupt` policy
(launcher/run/resume.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from dfl_node.state import sealed_file
from dfl_node.state.checkpoint_layout import (
    ResumePoint,
    checkpoint_path,
    complete_rounds,
    runtime_in,
)
from dfl_node.state.sealed_file import CorruptFile

OnCorrupt = Literal["fallback", "stop"]  # what --resume does when it refuses a file
ON_CORRUPT: tuple[str, ...] = get_args(OnCorrupt)
REFUSED_SUFFIX = ".refused"  # a refused file set aside: kept for a look, never resumed from


@dataclass(frozen=True)
class Refused:
    """One checkpoint file that failed its check."""

    node: int
    round: int
    path: Path
    reason: str

    def __str__(self) -> str:
        return (f"node {self.node}'s checkpoint of round {self.round} ({self.path}) is refused: "
                f"{self.reason}")


@dataclass(frozen=True)
class Checked:
    """The newest round every node holds intact, and the files of newer rounds refused."""

    point: ResumePoint
    refused: tuple[Refused, ...] = ()


def check_rounds(run_dir: Path, ids: list[int], plan_hashes: dict[str, str]) -> Checked:
    """Check every node's file of the newest complete round, then of older ones while one is
    refused. `plan_hashes`: the run's content hashes (checkpoint_layout.content_hashes)."""
    refused: list[Refused] = []
    for round_ in reversed(complete_rounds(run_dir, ids)):
        digests: dict[int, str] = {}
        for node in ids:
            path = checkpoint_path(run_dir, node, round_)
            try:
                digests[node] = check_file(path, node, round_, plan_hashes)
            except CorruptFile as exc:
                refused.append(Refused(node, round_, path, exc.reason))
        if len(digests) == len(ids):
            return Checked(ResumePoint(round_, digests), tuple(refused))
    return Checked(ResumePoint(), tuple(refused))


def check_file(path: Path, node: int, round_: int, plan_hashes: dict[str, str]) -> str:
    """The digest of node `node`'s checkpoint of round `round_` at `path`; CorruptFile if its
    bytes, its node, its round or its plan are not what they must be."""
    sealed = sealed_file.verify(path)
    try:
        runtime = runtime_in(sealed.metadata)
    except ValueError:
        raise CorruptFile(path, "its state is not JSON") from None
    if runtime.get("node") != node:
        raise CorruptFile(path, f"it holds the state of node {runtime.get('node')}, not of "
                                f"node {node} (a file of another node under this name)")
    if runtime.get("round") != round_:
        raise CorruptFile(path, f"it holds round {runtime.get('round')}, not round {round_} "
                                "(a file of another round under this name)")
    saved = runtime.get("plan")
    differ = sorted(k for k, v in plan_hashes.items() if not isinstance(saved, dict)
                    or saved.get(k) != v)
    if differ:
        raise CorruptFile(path, f"it was made under a plan that differs in {', '.join(differ)}")
    return sealed.digest


def set_aside(refused: Refused) -> Path:
    """Rename a refused file out of the way (`round-<k>.safetensors.refused`): no later resume
    counts it as a round that node holds, and nothing is deleted."""
    target = refused.path.with_name(refused.path.name + REFUSED_SUFFIX)
    refused.path.replace(target)
    return target
