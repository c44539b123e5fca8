"""The plugin's own tests: dfl-mesh's exactness kit on Push-Sum over a directed graph whose
out-degrees differ (so the weights leave 1), run from this package (`pytest tests/` with the
package and dfl-mesh installed)."""

from __future__ import annotations

import json
from pathlib import Path

from dfl_mesh.testing import (
    FinishedRun,
    assert_formula_bits,
    assert_resume_exact,
    assert_transports_agree,
    audit_checkpoint_fields,
)

# four nodes on a directed ring with one chord: node 0 pushes to two, the others to one
ARCS = [[0, 1], [1, 2], [2, 3], [3, 0], [0, 2]]


def directed(folder: Path) -> Path:
    path = folder / "ring4-directed.yaml"
    path.write_text(json.dumps({"name": "ring4-directed", "directed": True,
                                "nodes": [{"id": i} for i in range(4)], "edges": ARCS}))
    return path


def paper_bits(run: FinishedRun, r: int, src: int, dst: int) -> int:
    """(P + 1) 32 bits on each arc in each round: the scaled model and the weight."""
    return (run.model_values(src) + 1) * 32


def test_every_value_a_round_changes_is_checkpointed(tmp_path: Path) -> None:
    audit = audit_checkpoint_fields("push-sum", topology=directed(tmp_path), workdir=tmp_path)
    assert "weight" in audit.changed


def test_zmq_equals_inproc(tmp_path: Path) -> None:
    assert_transports_agree("push-sum", topology=directed(tmp_path), workdir=tmp_path)


def test_formula_bits_are_the_papers(tmp_path: Path) -> None:
    assert_formula_bits("push-sum", paper_bits, topology=directed(tmp_path), workdir=tmp_path)


def test_killed_and_resumed_equals_uninterrupted(tmp_path: Path) -> None:
    assert_resume_exact("push-sum", kill_after_round=1, topology=directed(tmp_path),
                        workdir=tmp_path)
