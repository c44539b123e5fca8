"""zmq against inproc: the same plan run as processes over real sockets and as threads of one
process must end with the same final/ files, byte for byte, and the same formula ledger.

What differs between the two is only the order in which messages arrive; a protocol whose
results depend on it (a sum over neighbours in arrival order, a dict iterated as messages came
in) fails here."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dfl_mesh.testing.compare import final_difference, summary
from dfl_mesh.testing.mesh import mesh, workspace


def assert_transports_agree(protocol: str, *, topology: str | Path | None = None,
                            workdir: str | Path | None = None,
                            overrides: Mapping[str, Any] | None = None, **settings: Any) -> None:
    """Run `protocol` over zmq and over inproc (the kit's small mesh unless `topology` and
    `settings` say otherwise: `dfl_mesh.run`'s keywords) and raise an AssertionError naming the
    first final file and tensor that differ."""
    with workspace(workdir) as where:
        kit_mesh = mesh(protocol, where, topology, overrides, settings)
        kit_mesh.run(where / "zmq", transport="zmq")
        kit_mesh.run(where / "inproc", transport="inproc")
        assert_runs_agree(where / "zmq", where / "inproc", protocol)


def assert_runs_agree(zmq: Path, inproc: Path, protocol: str) -> None:
    """The two runs' final files and formula bits are the same (the reason names the first
    difference)."""
    differ = final_difference(zmq, inproc)
    if differ is not None:
        raise AssertionError(f"{protocol}: zmq and inproc differ: {differ}")
    a, b = summary(zmq), summary(inproc)
    nodes = len(a["nodes"]) + len(a.get("aggregators", []))
    models = [p for p in (zmq / "final").glob("node-*.safetensors")
              if not p.name.endswith("-copies.safetensors")]
    if len(models) != nodes:
        raise AssertionError(f"{protocol}: final/ holds {len(models)} models for {nodes} nodes")
    if a.get("formula") != b.get("formula"):
        raise AssertionError(f"{protocol}: zmq and inproc differ: summary.json's 'formula'")
