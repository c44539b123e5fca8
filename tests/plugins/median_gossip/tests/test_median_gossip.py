"""The plugin's own tests: dfl-mesh's exactness kit on median gossip, run from this package
(`pytest tests/` with the package and dfl-mesh installed)."""

from __future__ import annotations

from pathlib import Path

from dfl_mesh.testing import (
    FinishedRun,
    assert_formula_bits,
    assert_resume_exact,
    assert_transports_agree,
    audit_checkpoint_fields,
)


def paper_bits(run: FinishedRun, r: int, src: int, dst: int) -> int:
    """One dense float32 model per neighbour and round: P 32 bits on each link (deg_i P 32 per
    node and round)."""
    return run.model_values(src) * 32


def test_every_value_a_round_changes_is_checkpointed(tmp_path: Path) -> None:
    audit = audit_checkpoint_fields("median-gossip", workdir=tmp_path)
    assert "sgd.batches._order" in audit.changed  # the audit saw the sampler move


def test_zmq_equals_inproc(tmp_path: Path) -> None:
    assert_transports_agree("median-gossip", workdir=tmp_path, local_steps=2)


def test_formula_bits_are_the_papers(tmp_path: Path) -> None:
    assert_formula_bits("median-gossip", paper_bits, workdir=tmp_path)


def test_killed_and_resumed_equals_uninterrupted(tmp_path: Path) -> None:
    assert_resume_exact("median-gossip", kill_after_round=2, workdir=tmp_path, rounds=4)
