"""The formula ledger against the author's own count.

Each payload a protocol sends declares its formula bits (protocols/sdk/payload.py), and the SDK
charges them on the links it crossed. Two things can go wrong without any error: a payload
that declares the wrong bits (it sends {x, w} and declares the bits of x alone), and a charge
on the wrong links or rounds. This check runs the protocol once (inproc) and compares, on
every directed link and round, the ledger's bits with `hand_count(run, round, src, dst)`, the
author's count from the paper; and, with no count at all, that bits were charged exactly where
the wire ledger shows a data message.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from safetensors.numpy import load_file

from dfl_mesh.testing.compare import metrics_rows
from dfl_mesh.testing.mesh import mesh, workspace
from dfl_node.plan import RunPlan

Link = tuple[int, int, int]  # round, src, dst


@dataclass(frozen=True)
class FinishedRun:
    """What a hand count may read of the run: its plan (neighbours, hyper-parameters, seed),
    its models' sizes and its metrics rows (a trigger's decisions, a compressor's k)."""

    run_dir: Path

    @cached_property
    def plan(self) -> RunPlan:
        return RunPlan.load(self.run_dir / "plan.json")

    @property
    def hyper(self) -> dict[str, Any]:
        return self.plan.hyper

    def model_values(self, node: int) -> int:
        """The number of values in node `node`'s final model (P of the papers)."""
        tensors = load_file(str(self.run_dir / "final" / f"node-{node}.safetensors"))
        return sum(t.size for t in tensors.values())

    @cached_property
    def metrics(self) -> list[dict[str, Any]]:
        return metrics_rows(self.run_dir)

    @cached_property
    def charged(self) -> dict[Link, dict[str, int]]:
        """(round, src, dst) -> component -> bits, from ledger.json's formula cells."""
        out: defaultdict[Link, dict[str, int]] = defaultdict(dict)
        for book in self._ledger.values():
            for cell in book.get("formula_cells", []):
                link = (cell["round"], cell["src"], cell["dst"])
                out[link][cell["component"]] = out[link].get(cell["component"], 0) + cell["bits"]
        return dict(out)

    @cached_property
    def sent(self) -> set[Link]:
        """(round, src, dst) of every data message, as its sender recorded it."""
        return {(c["round"], c["src"], c["dst"]) for node, book in self._ledger.items()
                for c in book.get("cells", []) if c["traffic"] == "data"
                and c["src"] == int(node) and c["messages"] > 0}

    @cached_property
    def _ledger(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.run_dir / "ledger.json").read_text())
        return data


HandCount = Callable[[FinishedRun, int, int, int], int]


def assert_formula_bits(protocol: str, hand_count: HandCount | None = None, *,
                        topology: str | Path | None = None, workdir: str | Path | None = None,
                        overrides: Mapping[str, Any] | None = None,
                        **settings: Any) -> FinishedRun:
    """Run `protocol` (inproc) and raise an AssertionError naming the round and link where the
    formula ledger disagrees: with the wire ledger (bits charged where no data message went,
    or a data message charged nothing), or with `hand_count(run, r, src, dst)` on any directed
    arc of the plan's round graph (both directions of each edge, on one
    undirected graph), in every round. Returns the run, for checks of its own."""
    with workspace(workdir) as where:
        kit_mesh = mesh(protocol, where, topology, overrides, settings)
        kit_mesh.run(where / "run", transport="inproc")
        run = FinishedRun(where / "run")
        reason = formula_disagreement(run, hand_count)
        if reason is not None:
            raise AssertionError(f"{protocol}: {reason}")
        return run


def formula_disagreement(run: FinishedRun, hand_count: HandCount | None) -> str | None:
    charged, sent = run.charged, run.sent
    idle = sorted(set(charged) - sent)
    if idle:
        r, src, dst = idle[0]
        return (f"round {r}, link {src}->{dst}: {_bits(charged[idle[0]])} charged, but no data "
                "message went on it")
    free = sorted(sent - set(charged))
    if free:
        r, src, dst = free[0]
        return (f"round {r}, link {src}->{dst}: a data message went, and no formula bits were "
                "charged")
    if hand_count is None:
        return None
    links = sorted({(r, a, b) for r in range(run.plan.rounds) for a in run.plan.ids
                    for b in run.plan.out_neighbors(a, r)} | set(charged))
    for r, src, dst in links:
        mine = int(hand_count(run, r, src, dst))
        got = charged.get((r, src, dst), {})
        if sum(got.values()) != mine:
            return (f"round {r}, link {src}->{dst}: the payloads declared {_bits(got)}, the hand "
                    f"count says {mine}")
    return None


def _bits(components: Mapping[str, int]) -> str:
    total = sum(components.values())
    parts = ", ".join(f"{k} {v}" for k, v in sorted(components.items()))
    return f"{total} bits ({parts})" if components else "0 bits"
