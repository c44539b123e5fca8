"""Topology files that tests write: here, not in a test module, so that a test that must not
import torch (tests/test_refusal_imports.py replays tests/test_config_typos.py's cases) can
write one too."""

from __future__ import annotations

from pathlib import Path


def ring_file(tmp_path: Path, n: int = 6) -> str:
    path = tmp_path / f"ring{n}.yaml"
    nodes = "\n".join(f"  - {{id: {i}}}" for i in range(n))
    edges = "\n".join(f"  - [{i}, {(i + 1) % n}]" for i in range(n))
    path.write_text(f"nodes:\n{nodes}\nedges:\n{edges}\n")
    return str(path)
