"""schedule.json and links.json: the TDMA slots a run used and what each radio link cost.

The slots come from the plan (every node checked that it computes the same ones); the per-link
rows come from each link's sender, which alone knows what it really sent: messages, payload
bytes, packets, transmissions, retransmissions and the virtual seconds the link was busy.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from dfl_node.plan import RunPlan, section_json
from dfl_node.runner.records import DoneRecord
from launcher.run.directory import write_json


def link_rows(done: Mapping[int, DoneRecord]) -> dict[str, dict[str, float]]:
    """"a->b" -> the sender's totals for that link, links in sender order."""
    return {link: row for _, rec in sorted(done.items()) for link, row in rec.links.items()}


def radio_totals(done: Mapping[int, DoneRecord]) -> dict[str, float]:
    """Summary keys: slot mismatches seen by all receivers, retransmissions on all links."""
    return {"slot_mismatches": sum(rec.slot_mismatches for rec in done.values()),
            "retransmissions": sum(row["retransmissions"] for row in link_rows(done).values())}


def write_link_report(run_dir: Path, plan: RunPlan, done: Mapping[int, DoneRecord]) -> None:
    write_json(run_dir / "schedule.json", section_json(plan.schedule))
    write_json(run_dir / "links.json", {"link": section_json(plan.link), "links": link_rows(done)})
