"""Wire efficiency: the payload ZeroMQ carried against the bits the paper's formula counts.

`python -m bench.wire_efficiency [--full]` runs dmfl-sq and choco-sgd with their defaults
(Fashion-MNIST, the default CNN, Q8 o Top-k) on a ring over real sockets, and reads both
accounts from the run's own records (`summary.json`, docs/run-directory.md): the wire
ledger (what each node sent, payload and framing apart, training and control traffic apart)
and the formula ledger (bits as DMFL-SQ eqs. 18-20 and the baselines' accounting charge them,
per link and round). The figure is training payload bits over formula bits (goal <= 1: the
wire carries no more than the paper claims); the framing (each message's compact header,
docs/concepts.md#the-wire-format) is reported apart, as is control traffic (barriers and the
end-of-step markers that signal silence, which the paper does not charge: b_trig = 0). A
second figure for dmfl-sq puts all of it over the formula: payload, framing, control and
heartbeat bytes (goal <= 1.1). ZeroMQ's 2-9 bytes per frame and TCP/IP headers are not in the
ledger and not here.

Both accounts are deterministic for a seed, so one run per protocol is the measurement.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.figures import Figure, compare, module_main
from bench.launch import launch, require_data
from topologies.generators import ring
from topologies.writer import write_topology

PROTOCOLS = ("dmfl-sq", "choco-sgd")


@dataclass(frozen=True)
class Mode:
    nodes: int
    rounds: int


QUICK = Mode(nodes=20, rounds=10)
FULL = Mode(nodes=20, rounds=40)
ALL_BYTES_GOAL = 1.1  # dmfl-sq: everything it puts on the wire / the paper's formula bits


def run(protocol: str, topology: Path, rounds: int, run_dir: Path) -> dict[str, Any]:
    """A run with the protocol's defaults, evaluated once at the end, no checkpoints."""
    options = ["--topology", str(topology), "--protocol", protocol, "--rounds", str(rounds),
               "--eval-every", str(rounds), "--set", "checkpoint_every=0"]
    return launch(options, run_dir, f"bench.wire_efficiency: {protocol}")


def wire_figure(protocol: str, summary: dict[str, Any], mode: Mode) -> Figure:
    formula_bits = summary["formula"]["total_bits"]
    payload, framing = summary["payload_bytes"], summary["framing_bytes"]
    messages = sum(row["messages"] for row in summary["ledger"]["per_round"].values())
    components: dict[str, int] = {}
    for row in summary["formula"]["per_round"].values():
        for name, bits in row.items():
            components[name] = components.get(name, 0) + bits
    per_formula_bit = 8 / formula_bits if formula_bits else float("nan")  # bytes -> ratio
    per_message = framing / messages if messages else 0.0
    extra: dict[str, float | str] = {
        "payload_bytes": payload, "framing_bytes": framing, "data_messages": messages,
        "framing_bytes_per_message": per_message,
        "framing_over_formula": framing * per_formula_bit,
        "wire_over_formula": (payload + framing) * per_formula_bit,
        "control_bytes": summary["control_bytes"],
        **{f"formula bits: {name}": bits for name, bits in sorted(components.items())},
    }
    note = (f"framing (compact headers) {framing * per_formula_bit:.2f} x "
            f"the formula, {per_message:.0f} B per message; payload + framing "
            f"{(payload + framing) * per_formula_bit:.2f} x; control traffic apart "
            f"({summary['control_bytes']} B); ZMTP frame bytes not counted; one run (both "
            "ledgers are deterministic for a seed)")
    return compare("wire", f"{protocol} payload/formula, ring{mode.nodes}, "
                   f"{mode.rounds} rounds, zmq", 8 * payload, "bits",
                   "formula bits (the paper's count)", formula_bits, goal_max=1.0,
                   note=note, extra=extra)


def figures(quick: bool) -> list[Figure]:
    require_data("fmnist", None)  # a SKIPPED row, not minutes of runs, without it
    mode = QUICK if quick else FULL
    with tempfile.TemporaryDirectory(prefix="dfl-bench-wire-") as tmp:
        topology = Path(tmp) / f"ring{mode.nodes}.yaml"
        write_topology(ring(mode.nodes), topology)
        found = []
        for protocol in PROTOCOLS:
            summary = run(protocol, topology, mode.rounds, Path(tmp) / protocol)
            found.append(wire_figure(protocol, summary, mode))
            if protocol == "dmfl-sq":
                found.append(all_bytes_figure(protocol, summary, mode))
        return found


def all_bytes_figure(protocol: str, summary: dict[str, Any], mode: Mode) -> Figure:
    """Everything the run put on the wire (payload, framing, control, heartbeats) over the
    formula: the small max-consensus messages are where headers used to outweigh the data."""
    parts = {key: summary[key] for key in
             ("payload_bytes", "framing_bytes", "control_bytes", "heartbeat_bytes")}
    return compare("wire", f"{protocol} all wire bytes/formula, ring{mode.nodes}, "
                   f"{mode.rounds} rounds, zmq", 8 * sum(parts.values()), "bits",
                   "formula bits (the paper's count)", summary["formula"]["total_bits"],
                   goal_max=ALL_BYTES_GOAL, note="payload + framing + control + heartbeats",
                   extra={k: float(v) for k, v in parts.items()})


def main() -> None:
    module_main(figures, __doc__, "ring20, 40 rounds")


if __name__ == "__main__":
    main()
