"""summary.json and ledger.json from the nodes' final records.

A run's traffic is the sum over nodes of what each node *sent*, so every message counts once;
data (training) traffic and control traffic are kept apart.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dfl_node.plan import RunPlan
from dfl_node.runner.records import DoneRecord
from launcher.results.honest import backdoor_keys, final_consensus_distance, honest_clients
from launcher.run.directory import write_json
from launcher.run.fairness import fairness
from launcher.run.linkreport import radio_totals
from launcher.run.on_failure import failure_keys
from launcher.run.outcome import Outcome
from protocols.registry import protocol_spec

if TYPE_CHECKING:  # the collector brings ZeroMQ, which only a running launch needs
    from launcher.run.collector import Collector

SUMMARY_SCHEMA = 1
COUNTERS = ("messages", "payload_bytes", "framing_bytes")


Done = Mapping[int, DoneRecord]  # the collector's final records, by node


def sent_cells(done: Done, traffic: str) -> list[dict[str, Any]]:
    return [cell for node, rec in sorted(done.items()) for cell in rec.ledger["cells"]
            if cell["src"] == node and cell["traffic"] == traffic]


def add_cell(table: dict[str, dict[str, int]], key: str, cell: dict[str, Any]) -> None:
    row = table.setdefault(key, dict.fromkeys(COUNTERS, 0))
    for name in COUNTERS:
        row[name] += int(cell[name])


def traffic_tables(done: Done) -> dict[str, Any]:
    """Data traffic per round and per link, control traffic in total."""
    per_round: dict[str, dict[str, int]] = {}
    per_link: dict[str, dict[str, int]] = {}
    for cell in sorted(sent_cells(done, "data"), key=lambda c: (c["round"], c["src"], c["dst"])):
        add_cell(per_round, str(cell["round"]), cell)
        add_cell(per_link, f"{cell['src']}->{cell['dst']}", cell)
    control: dict[str, dict[str, int]] = {}
    for cell in sent_cells(done, "control"):
        add_cell(control, "total", cell)
    return {"per_round": per_round, "per_link": per_link,
            "control": control.get("total", dict.fromkeys(COUNTERS, 0))}


def formula_tables(done: Done, n: int) -> dict[str, Any]:
    """The paper's bits: network totals per round and component, and per client."""
    per_round: dict[str, dict[str, int]] = {}
    per_client: dict[str, int] = {}
    for node, rec in sorted(done.items()):
        for cell in rec.formula.get("cells", []):
            row = per_round.setdefault(str(cell["round"]), {})
            row[cell["component"]] = row.get(cell["component"], 0) + int(cell["bits"])
            per_client[str(node)] = per_client.get(str(node), 0) + int(cell["bits"])
    total = sum(per_client.values())
    return {"per_round": per_round, "per_client": per_client, "total_bits": total,
            "bits_per_client": total / n if n else 0.0}


def mean_over_nodes(reports: list[dict[str, Any]]) -> dict[str, Any]:
    """Protocol keys averaged over the nodes that report them (dicts elementwise)."""
    out: dict[str, Any] = {}
    for key in sorted({k for rep in reports for k in rep}):
        values = [rep[key] for rep in reports if key in rep]
        if all(isinstance(v, dict) for v in values):
            names = sorted({name for v in values for name in v})
            out[key] = {name: sum(v.get(name, 0) for v in values) / len(values)
                        for name in names}
        else:
            out[key] = sum(values) / len(values)
    return out


def round_seconds(done: Done, key: str = "round_seconds") -> dict[str, float]:
    """Per round, the mean over nodes of the wall seconds the round took them (the protocol's
    round and the failure agreement, not evaluation or checkpoints): a run's own account of
    its speed, free of start-up, so benchmarks need not time the launcher from outside. With
    `key="round_cpu_seconds"`, the CPU seconds instead (every thread of the node's process),
    which on a machine with fewer cores than nodes is what a round's overhead costs."""
    per_round: dict[str, list[float]] = {}
    for rec in done.values():
        seconds = rec.round_cpu_seconds if key == "round_cpu_seconds" else rec.round_seconds
        for r, value in seconds.items():
            if isinstance(value, float) and str(r).isdigit():
                per_round.setdefault(str(r), []).append(value)
    return {r: sum(v) / len(v) for r, v in sorted(per_round.items(), key=lambda kv: int(kv[0]))}


def first_round_seconds(done: Done, started_at: float,
                        key: str = "first_round_at") -> float | None:
    """Seconds from the nodes' start (`started_at`, Unix time) to the last node finishing its
    first round: start-up as a user waits for it (spawn, data, model, sockets, the start
    barrier and one round), from the nodes' own clocks (one host's: other hosts' clocks may
    differ). With `key="first_round_began_at"`, to the last node beginning it: start-up alone,
    the whole mesh training."""
    ends = [end for rec in done.values() if (end := (
        rec.first_round_began_at if key == "first_round_began_at" else rec.first_round_at))
        is not None]
    return max(ends) - started_at if ends else None


def node_rows(plan: RunPlan, done: Done, outcome: Outcome,
              ids: list[int]) -> list[dict[str, Any]]:
    """A node without a final record: the launcher's pid and the plan's host for it."""
    rows = []
    for node_id in ids:
        entry = plan.node(node_id)
        rec = done.get(node_id) or DoneRecord(node=node_id, pid=outcome.pids.get(node_id),
                                              host=entry.host, ledger={})
        rows.append({"id": node_id, "pid": rec.pid, "host": rec.host, "device": entry.device,
                     "accuracy": rec.accuracy, "loss": rec.loss})
    return rows


def summarize(plan: RunPlan, config: dict[str, Any], collector: Collector, outcome: Outcome,
              wall_seconds: float) -> dict[str, Any]:
    # In node order, not arrival order: float means over nodes must not depend on which
    # node finished first.
    done = dict(sorted(collector.done.items()))
    nodes = node_rows(plan, done, outcome, plan.clients)
    finished = [n for n in nodes if n["accuracy"] is not None]
    accs = [n["accuracy"] for n in finished]
    formula = formula_tables(done, len(plan.clients))
    tables = traffic_tables(done)
    rejected: Counter[str] = Counter(collector.rejected)
    for rec in done.values():
        rejected.update(rec.rejected)
    data_sent = list(tables["per_round"].values())
    return {
        "schema_version": SUMMARY_SCHEMA, "protocol": plan.protocol,
        "topology": plan.topology_name, "rounds": plan.rounds, "seed": plan.seed,
        "transport": plan.transport, "dataset": plan.data.dataset,
        "partition": str(plan.data.partition), "eval_split": plan.data.eval_split,
        "status": outcome.status, "cause": outcome.cause_record(),
        "failed_node": outcome.failed_node,
        **failure_keys(outcome, done),
        "nodes": nodes,
        "aggregators": node_rows(plan, done, outcome,
                                 [i for i in plan.ids if i not in plan.clients]),
        "avg_accuracy": sum(accs) / len(accs) if accs else None,
        "worst_accuracy": min(accs) if accs else None,
        "wire_bytes": sum(r["payload_bytes"] + r["framing_bytes"] for r in data_sent),
        "payload_bytes": sum(r["payload_bytes"] for r in data_sent),
        "framing_bytes": sum(r["framing_bytes"] for r in data_sent),
        "control_bytes": tables["control"]["payload_bytes"] + tables["control"]["framing_bytes"],
        "heartbeat_bytes": sum(beats["bytes"] for rec in done.values()
                               for beats in rec.ledger.get("heartbeats", {}).values()),
        "prephase_bytes": sum(rec.prephase.get("sent_bytes", 0)
                              + rec.prephase.get("received_bytes", 0)
                              for rec in done.values()),
        "virtual_seconds": max((rec.virtual_seconds for rec in done.values()), default=0.0),
        "wall_seconds": wall_seconds,
        "round_seconds": round_seconds(done),
        "round_cpu_seconds": round_seconds(done, "round_cpu_seconds"),
        "startup_seconds": max(collector.ready_at.values(), default=None),
        "started_at": collector.opened_at,
        "first_round_seconds": first_round_seconds(done, collector.opened_at),
        "first_round_start_seconds": first_round_seconds(done, collector.opened_at,
                                                         "first_round_began_at"),
        "rejected_messages": dict(sorted(rejected.items())),
        "rejected_records": dict(sorted(collector.rejected_records.items())),
        "schedule": plan.schedule.mode, **radio_totals(done),
        "ledger": {"per_round": tables["per_round"], "control": tables["control"]},
        "bits_per_client": formula["bits_per_client"],
        "formula": {"per_round": formula["per_round"], "total_bits": formula["total_bits"]},
        **(fairness(accs, [n["loss"] for n in finished]) if finished else {}),
        **global_eval_keys(done, plan.clients),
        **mean_over_nodes([rec.protocol for node, rec in done.items()
                           if node in plan.clients]),
        **run_keys(plan, {node: rec.report for node, rec in done.items()
                          if node in plan.clients}),
        **(collector.cycles.summary_keys() if collector.cycles else {}),
        "config": {"mixing": plan.mixing, "model": plan.model, "hyper": config["hyper"]},
        **honest_keys(plan, nodes, collector.run_dir),
    }


def honest_keys(plan: RunPlan, nodes: list[dict[str, Any]], run_dir: Path) -> dict[str, Any]:
    """With adversaries in the plan: `adversaries` (id -> behaviours, as the plan holds them)
    and `honest`, the figures of the honest clients alone (launcher/results/honest.py); {}
    without (every client is honest, and the keys above say so)."""
    if not plan.adversaries:
        return {}
    honest = honest_clients(plan)
    finished = [n for n in nodes if n["id"] in honest and n["accuracy"] is not None]
    accs = [n["accuracy"] for n in finished]
    return {
        "adversaries": {str(i): b for i, b in sorted(plan.adversaries.items())},
        "honest": {
            "nodes": honest,
            "avg_accuracy": sum(accs) / len(accs) if accs else None,
            "worst_accuracy": min(accs) if accs else None,
            **(fairness(accs, [n["loss"] for n in finished]) if finished else {}),
            "consensus_distance": final_consensus_distance(run_dir, [n["id"] for n in finished]),
            **backdoor_keys(run_dir / "metrics.jsonl", honest),
        },
    }


def global_eval_keys(done: Done, clients: list[int]) -> dict[str, Any]:
    """Under `eval_split: both`, the same accuracy and tail keys on the global subset, under
    `global_eval` (the top-level keys are the nodes' own splits)."""
    pairs = [(rec.global_accuracy, rec.global_loss) for n in clients
             if (rec := done.get(n)) is not None]
    evaluated = [(float(acc), float(loss)) for acc, loss in pairs
                 if acc is not None and loss is not None]
    if not evaluated:
        return {}
    accs = [acc for acc, _ in evaluated]
    return {"global_eval": {"avg_accuracy": sum(accs) / len(accs), "worst_accuracy": min(accs),
                            **fairness(accs, [loss for _, loss in evaluated])}}


def write_ledger(run_dir: Path, done: Done) -> None:
    """ledger.json: every node's own per-link, per-round cells and what it rejected."""
    out = {}
    for node, rec in sorted(done.items()):
        per_link: dict[str, dict[str, int]] = {}
        for cell in rec.ledger["cells"]:
            if cell["traffic"] == "data":
                add_cell(per_link, f"{cell['src']}->{cell['dst']}", cell)
        out[str(node)] = {"per_link": per_link, "cells": rec.ledger["cells"],
                          "rejected": rec.ledger["rejected"],
                          "formula_cells": rec.formula.get("cells", []),
                          "heartbeats": rec.ledger.get("heartbeats", {})}
    write_json(run_dir / "ledger.json", out)


def run_keys(plan: RunPlan, reports: dict[int, Any]) -> dict[str, Any]:
    """The protocol's run-level keys, if it reports any (protocols/capabilities.py)."""
    report = protocol_spec(plan.protocol).run_report
    return report.run_keys(plan, reports) if report is not None else {}
