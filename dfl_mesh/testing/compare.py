"""Two run directories that must hold the same results, compared so that a difference is one
line naming the file and the field: final models tensor by tensor, summary keys, metrics rows,
each node's ledgers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from safetensors.numpy import load_file

# summary keys that neither the transport nor a kill-and-resume may change
LEDGER_KEYS = ("wire_bytes", "payload_bytes", "framing_bytes", "control_bytes", "prephase_bytes",
               "virtual_seconds", "ledger", "bits_per_client", "formula", "rejected_messages",
               "avg_accuracy", "worst_accuracy", "nodes_accuracy")
# what each node's ledger records that must repeat exactly; liveness heartbeats depend on
# timing and are left out
NODE_LEDGER_KEYS = ("cells", "rejected", "formula_cells", "per_link")


def final_files(run_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((run_dir / "final").glob("*.safetensors"))}


def final_difference(a: Path, b: Path) -> str | None:
    """Where `a`'s final/ files differ from `b`'s (the first difference), or None."""
    files_a, files_b = final_files(a), final_files(b)
    if sorted(files_a) != sorted(files_b):
        return f"final/ holds {sorted(files_a)} against {sorted(files_b)}"
    for name in files_a:
        ta, tb = (load_file(str(run / "final" / name)) for run in (a, b))
        if ta.keys() != tb.keys():
            return f"final/{name}: tensors {sorted(ta)} against {sorted(tb)}"
        for key in ta:
            if ta[key].dtype != tb[key].dtype or ta[key].shape != tb[key].shape:
                return (f"final/{name}: tensor {key!r} is {ta[key].dtype}{list(ta[key].shape)} "
                        f"against {tb[key].dtype}{list(tb[key].shape)}")
            if ta[key].tobytes() != tb[key].tobytes():
                return f"final/{name}: tensor {key!r} differs"
        if files_a[name] != files_b[name]:
            return f"final/{name}: the same tensors, but the files' bytes differ"
    return None


def summary(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "summary.json").read_text())
    return data


def ledger_view(raw: dict[str, Any]) -> dict[str, Any]:
    view = {k: raw.get(k) for k in LEDGER_KEYS}
    view["nodes_accuracy"] = [(n["id"], n["accuracy"], n["loss"]) for n in raw["nodes"]]
    return view


def metrics_rows(run_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def node_ledgers(run_dir: Path) -> dict[str, Any]:
    """Every node's cells (per link, round and kind), rejections and formula bits."""
    ledger = json.loads((run_dir / "ledger.json").read_text())
    return {node: {k: rec.get(k) for k in NODE_LEDGER_KEYS} for node, rec in ledger.items()}


def results_difference(a: Path, b: Path) -> str | None:
    """Where run `a` ended otherwise than run `b`: final files, the summary's ledger keys,
    metrics.jsonl, ledger.json; None where they agree."""
    final = final_difference(a, b)
    if final is not None:
        return final
    view_a, view_b = ledger_view(summary(a)), ledger_view(summary(b))
    for key in LEDGER_KEYS:
        if view_a[key] != view_b[key]:
            return f"summary.json: {key!r} is {_short(view_a[key])} against {_short(view_b[key])}"
    rows = _by_key(metrics_rows(a), "metrics.jsonl")
    reference = _by_key(metrics_rows(b), "metrics.jsonl")
    if isinstance(rows, str) or isinstance(reference, str):
        return rows if isinstance(rows, str) else str(reference)
    if sorted(rows) != sorted(reference):
        missing, extra = sorted(set(reference) - set(rows)), sorted(set(rows) - set(reference))
        return f"metrics.jsonl: (round, node) rows missing {missing}, extra {extra}"
    for where in sorted(rows):
        for key in sorted(set(rows[where]) | set(reference[where])):
            if rows[where].get(key) != reference[where].get(key):
                return (f"metrics.jsonl: round {where[0]}, node {where[1]}: {key!r} is "
                        f"{rows[where].get(key)!r} against {reference[where].get(key)!r}")
    books_a, books_b = node_ledgers(a), node_ledgers(b)
    for node in sorted(set(books_a) | set(books_b), key=str):
        for key in NODE_LEDGER_KEYS:
            if books_a.get(node, {}).get(key) != books_b.get(node, {}).get(key):
                return f"ledger.json: node {node}'s {key!r} differ"
    return None


def _by_key(rows: list[dict[str, Any]], name: str) -> dict[tuple[int, int], dict[str, Any]] | str:
    out: dict[tuple[int, int], dict[str, Any]] = {}
    for row in rows:
        key = (row["round"], row["node"])
        if key in out:
            return f"{name}: the row of round {key[0]}, node {key[1]} is there twice"
        out[key] = row
    return out


def _short(value: Any, width: int = 120) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= width else text[:width] + "..."
