"""Recorded runs: evidence that a restructuring left every protocol's results bit for bit alone.

`record OUT.json` runs each shipped protocol on tiny configs that exercise its communication
shapes (gossip exchanges, compressed and event-triggered sends, max-consensus, the aggregator
star, SSD-FL's pre-phase and row subsets, DSC's per-neighbour messages and TDMA frames; zmq
beside inproc for a few) and writes, per run, the SHA-256 of every file in `final/`, of the
wire ledger's data and control cells and of the formula ledger per node, of `metrics.jsonl`
without its wall-clock keys, and the summary's virtual seconds, bytes and bits. `compare A B`
lists what differs and counts what is identical; exit 1 if anything differs.

    python -m bench.recorded_runs record /tmp/before.json     # on the old code
    python -m bench.recorded_runs record /tmp/after.json      # on the new code
    python -m bench.recorded_runs compare /tmp/before.json /tmp/after.json

`--only NAME ...` records a subset (names as in `RUNS`). 6 to 12 minutes on 2 busy cores.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

SYNTH = ("--dataset", "synthetic", "--partition", "iid", "--set", "model={name: mlp}")
DSC_TINY = ("--set", "scenes={size: 16, train_size: 100, test_size: 16, min_size: 12}",
            "--set", "hyper.depth=2", "--set", "hyper.epochs=1",
            "--set", "tdma.interference_range=1")
SSD = ("--set", "tau_a=2", "--set", "tau_r=1")

# name -> (topology nodes in a ring, protocol, arguments)
RUNS: dict[str, tuple[int, str, tuple[str, ...]]] = {
    "d-psgd": (4, "d-psgd", (*SYNTH, "--rounds", "3", "--set", "local_steps=2")),
    "d-psgd-zmq": (4, "d-psgd", (*SYNTH, "--rounds", "3", "--transport", "zmq")),
    "d-psgd-tdma": (4, "d-psgd", (*SYNTH, "--rounds", "3", "--set", "schedule=tdma")),
    "d-psgd-atc": (4, "d-psgd", (*SYNTH, "--rounds", "2", "--set", "form=atc")),
    "choco-sgd": (4, "choco-sgd", (*SYNTH, "--rounds", "3")),
    "dsgt": (4, "dsgt", (*SYNTH, "--rounds", "3")),
    "qffl": (4, "qffl", (*SYNTH, "--rounds", "3")),
    "qffl-zmq": (4, "qffl", (*SYNTH, "--rounds", "3", "--transport", "zmq")),
    # theta_0 = 0.3: every client silent in round 0, some in round 1; silence costs b_trig
    "dmfl-sq": (6, "dmfl-sq", (*SYNTH, "--rounds", "4", "--set", "trigger=constant",
                               "--set", "theta0=0.3", "--set", "hyper.accounting.b_trig=1")),
    "dmfl-sq-zmq": (6, "dmfl-sq", (*SYNTH, "--rounds", "3", "--transport", "zmq",
                                   "--on-failure", "continue")),
    "dmfl-sq-tdma": (4, "dmfl-sq", (*SYNTH, "--rounds", "2", "--set", "schedule=tdma")),
    "ssd-fl": (6, "ssd-fl", (*SYNTH, "--rounds", "2", *SSD)),
    "ssd-fl-zmq": (6, "ssd-fl", (*SYNTH, "--rounds", "2", "--transport", "zmq", *SSD)),
    "sdfl": (6, "sdfl", (*SYNTH, "--rounds", "2", *SSD)),
    "pdfl": (6, "pdfl", (*SYNTH, "--rounds", "2", *SSD)),
    "stc": (6, "stc", (*SYNTH, "--rounds", "2", *SSD)),
    "cstc": (6, "cstc", (*SYNTH, "--rounds", "2", *SSD)),
    "dsc": (4, "dsc", (*DSC_TINY, "--rounds", "2")),
    "dsc-zmq": (4, "dsc", (*DSC_TINY, "--rounds", "2", "--transport", "zmq")),
    "dsc-push-sum-task": (4, "dsc", (*DSC_TINY, "--rounds", "2", "--set", "hyper.mixing=push_sum",
                                     "--set", "hyper.policy_scope=task")),
    "dsc-row-sync": (4, "dsc", (*DSC_TINY, "--rounds", "2", "--set", "hyper.mixing=row_softmax",
                                "--set", "schedule=sync", "--set", "hyper.payload_bytes=100000")),
    "dsc-noagg": (4, "dsc-noagg", (*DSC_TINY, "--rounds", "2")),
    "dsc-fedavg": (4, "dsc-fedavg", (*DSC_TINY, "--rounds", "2")),
    "dsc-max": (4, "dsc-max", (*DSC_TINY, "--rounds", "2")),
    "dsc-fedamp": (4, "dsc-fedamp", (*DSC_TINY, "--rounds", "2")),
    "sgp": (4, "sgp", (*SYNTH, "--rounds", "3")),
    "epidemic-zmq": (4, "epidemic", (*SYNTH, "--rounds", "3", "--transport", "zmq")),
}

SUMMARY_KEYS = ("virtual_seconds", "bits_per_client", "formula", "wire_bytes", "payload_bytes",
                "framing_bytes", "control_bytes", "prephase_bytes", "rejected_messages",
                "retransmissions", "slot_mismatches", "avg_accuracy", "worst_accuracy")


def wall_clock(key: str) -> bool:
    """Keys that measure the host, not the run: they differ between any two runs."""
    return key != "virtual_seconds" and (key.endswith("_seconds") or key.endswith("_at")
                                         or "wall" in key or "cpu" in key)


def digest(value: Any) -> str:
    data = value if isinstance(value, bytes) else json.dumps(value, sort_keys=True).encode()
    return hashlib.sha256(data).hexdigest()


def ring(path: Path, n: int) -> Path:
    nodes = "\n".join(f"  - {{id: {i}}}" for i in range(n))
    edges = "\n".join(f"  - [{i}, {(i + 1) % n}]" for i in range(n))
    path.write_text(f"nodes:\n{nodes}\nedges:\n{edges}\n")
    return path


def fingerprint(run_dir: Path) -> dict[str, str]:
    """name -> SHA-256 (or the value itself, for the summary's numbers) of what a run left."""
    out = {f"final/{p.name}": digest(p.read_bytes())
           for p in sorted((run_dir / "final").iterdir())}
    for node, ledger in json.loads((run_dir / "ledger.json").read_text()).items():
        for traffic in ("data", "control"):
            out[f"ledger/{node}/{traffic}"] = digest(
                [c for c in ledger["cells"] if c["traffic"] == traffic])
        for key in ("formula_cells", "per_link", "rejected"):
            out[f"ledger/{node}/{key}"] = digest(ledger[key])
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rows = [{k: v for k, v in row.items() if not wall_clock(k)} for row in rows]
    out["metrics.jsonl"] = digest(sorted(rows, key=lambda r: (r.get("round", -1),
                                                              r.get("node", -1))))
    summary = json.loads((run_dir / "summary.json").read_text())
    for key in SUMMARY_KEYS:
        if key in summary:
            out[f"summary/{key}"] = json.dumps(summary[key], sort_keys=True)
    return out


def record(out: Path, only: Sequence[str]) -> None:
    unknown = set(only) - set(RUNS)
    if unknown:
        raise SystemExit(f"recorded_runs: unknown runs {sorted(unknown)}; known: {list(RUNS)}")
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="recorded-runs-") as tmp:
        for name, (n, protocol, args) in RUNS.items():
            if only and name not in only:
                continue
            run_dir = Path(tmp) / name
            topo = ring(Path(tmp) / f"ring{n}.yaml", n)
            cmd = [sys.executable, "-m", "launcher.cli", "--topology", str(topo), "--protocol",
                   protocol, "--out", str(run_dir), "--no-plots", "--quiet", *args]
            start = time.monotonic()
            proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                raise SystemExit(f"recorded_runs: {name} failed ({proc.returncode}):\n"
                                 f"{proc.stderr[-3000:]}")
            results[name] = fingerprint(run_dir)
            print(f"{name}: {len(results[name])} items, {time.monotonic() - start:.0f} s",
                  flush=True)
    out.write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")


def compare(a: Mapping[str, Mapping[str, str]], b: Mapping[str, Mapping[str, str]]) -> int:
    """Print every difference; the number of differing items."""
    same = differ = 0
    for name in sorted(set(a) | set(b)):
        if name not in a or name not in b:
            print(f"{name}: only in {'the first' if name in a else 'the second'}")
            differ += 1
            continue
        for key in sorted(set(a[name]) | set(b[name])):
            if a[name].get(key) == b[name].get(key):
                same += 1
            else:
                differ += 1
                print(f"{name}: {key} differs: {a[name].get(key)} -> {b[name].get(key)}")
    print(f"{same} items identical, {differ} differ, over {len(set(a) | set(b))} runs")
    return differ


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.recorded_runs", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="run every recorded run, write their fingerprints")
    rec.add_argument("out", type=Path)
    rec.add_argument("--only", nargs="*", default=[], help="run names (default: all)")
    cmp = sub.add_parser("compare", help="what differs between two records")
    cmp.add_argument("a", type=Path)
    cmp.add_argument("b", type=Path)
    args = parser.parse_args(argv)
    if args.command == "record":
        record(args.out, args.only)
        return
    differ = compare(json.loads(args.a.read_text()), json.loads(args.b.read_text()))
    raise SystemExit(1 if differ else 0)


if __name__ == "__main__":
    main()
