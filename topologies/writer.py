"""Writing topology files that a person can read and diff.

PyYAML's block style spends several lines on every node and edge, which makes a 30-node file a
few hundred lines long. Here each node is one flow mapping and each edge one `[u, v]` pair per
line, while the generator metadata stays in block style. The output reloads to an equal
`Topology` (floats are written with `repr`, which round-trips exactly).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from topologies.model import Topology


def _flow(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=10**9).strip()


def _block(value: dict[str, Any]) -> str:
    """Block style for mappings, flow style for innermost lists (`added_edges: [[1, 2], ...]`)."""
    return yaml.safe_dump(value, default_flow_style=None, sort_keys=False, width=100).rstrip()


def dump_topology(topology: Topology, header: str | None = None) -> str:
    """The YAML text of `topology`, optionally preceded by `header` as comment lines."""
    data = topology.to_dict()
    lines = [f"# {line}".rstrip() for line in header.splitlines()] if header else []
    lines.append(yaml.safe_dump({"name": data["name"]}, default_flow_style=False).rstrip())
    if "generator" in data:
        lines.append(_block({"generator": data["generator"]}))
    if "directed" in data:
        lines.append("directed: true")
    if "schedule" in data:
        lines.append(_block({"schedule": data["schedule"]}))
    lines.append("nodes:")
    lines.extend(f"  - {_flow(node)}" for node in data["nodes"])
    lines.append("edges:" if data["edges"] else "edges: []")
    lines.extend(f"  - {_flow(edge)}" for edge in data["edges"])
    return "\n".join(lines) + "\n"


def write_topology(topology: Topology, path: str | Path, header: str | None = None) -> None:
    Path(path).write_text(dump_topology(topology, header), encoding="utf-8")
