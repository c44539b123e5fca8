"""The plugin's own tests: dfl-mesh's exactness kit on robust gossip with a clipping rule and
an order-statistics rule, run from this package (`pytest tests/` with the package and dfl-mesh
installed)."""

from __future__ import annotations

from pathlib import Path

from dfl_mesh.testing import assert_resume_exact, assert_transports_agree

ADAPTIVE_CLIPPING = {"rule": "clipped-gossip", "delta": 0.3}
TRIMMED = {"rule": "trimmed-mean", "b": 1}  # the kit's graph: every node has 2 or 3 neighbours


def test_zmq_equals_inproc_with_clipping(tmp_path: Path) -> None:
    assert_transports_agree("robust-gossip", workdir=tmp_path, aggregation=ADAPTIVE_CLIPPING)


def test_killed_and_resumed_equals_uninterrupted_with_a_trimmed_mean(tmp_path: Path) -> None:
    assert_resume_exact("robust-gossip", kill_after_round=1, workdir=tmp_path,
                        aggregation=TRIMMED)
