"""The plan's typed sections and the node's records: one model each, defaults declared there
only, and a plan file that reads back to the same bytes (runs in flight resume by comparing
section hashes)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from dfl_node.plan import TYPED_SECTIONS, PlanError, RunPlan
from dfl_node.runner.records import DoneRecord, MetricsRecord, ReadyRecord
from dfl_node.settings.partition import DirichletPartition
from dfl_node.state.checkpoint_layout import content_hashes
from tests.harness import SYNTHETIC_DATA
from tests.source_walk import literal_gets

ROOT = Path(__file__).resolve().parents[1]
READERS = ("dfl_node", "protocols", "launcher", "bench")
# Where the node's records are read (record keys such as `formula` or `links` name other
# things in summary.json, which report code reads elsewhere).
RECORD_READERS = ("dfl_node/runner", "launcher/run")
RECORDS: dict[str, type[BaseModel]] = {
    "ready record": ReadyRecord, "metrics record": MetricsRecord, "done record": DoneRecord}


def model_defaults(models: Mapping[str, type[BaseModel]]) -> dict[str, tuple[str, Any]]:
    """key -> (model name, its default) for every field of `models`."""
    out: dict[str, tuple[str, Any]] = {}
    for name, model in models.items():
        for key, info in model.model_fields.items():
            out[key] = (name, None if info.is_required() else info.default)
    return out


def repeated_defaults(path: Path, source: str,
                      models: Mapping[str, type[BaseModel]] = TYPED_SECTIONS) -> list[str]:
    fields = model_defaults(models)
    return [f"{path}:{line}: .get({key!r}, {default!r}); the {fields[key][0]} model declares "
            f"{key} (default {fields[key][1]!r}): read the model's field instead"
            for line, key, default in literal_gets(source) if key in fields]


def test_the_check_finds_a_default_repeated_at_a_reader() -> None:
    source = 'every = int(plan.cycle_metrics.get("params_every", 0))\nx = d.get("other", 1)\n'
    (found,) = repeated_defaults(Path("reader.py"), source)
    assert "params_every" in found and "default 0" in found
    source = 'split = plan["data"].get("eval_split", "global")\n'
    (found,) = repeated_defaults(Path("reader.py"), source)
    assert "data model declares eval_split" in found
    source = 'n = sum(int(rec.get("slot_mismatches", 0)) for rec in done.values())\n'
    (found,) = repeated_defaults(Path("reader.py"), source, RECORDS)
    assert "done record model declares slot_mismatches" in found


def test_no_reader_repeats_a_plan_section_default() -> None:
    found = [problem for package in READERS for path in sorted((ROOT / package).rglob("*.py"))
             for problem in repeated_defaults(path.relative_to(ROOT), path.read_text())]
    assert found == []


def test_no_reader_repeats_a_record_default() -> None:
    found = [problem for package in RECORD_READERS
             for path in sorted((ROOT / package).rglob("*.py"))
             for problem in repeated_defaults(path.relative_to(ROOT), path.read_text(), RECORDS)]
    assert found == []


def test_a_done_record_is_sent_with_the_keys_the_node_set_in_its_order() -> None:
    done = DoneRecord(type="done", node=2, pid=7, accuracy=0.5, ledger={"cells": []},
                      first_round_at=None)
    assert list(done.model_dump(exclude_unset=True)) == [
        "type", "node", "pid", "accuracy", "ledger", "first_round_at"]
    assert (done.rejected, done.slot_mismatches, done.dead) == ({}, 0, [])


def test_a_metrics_record_keeps_the_protocols_keys_and_refuses_a_bad_round() -> None:
    metrics = MetricsRecord.model_validate({"round": 3, "node": 1, "formula_bits": 64.0})
    assert metrics.extra("formula_bits") == 64.0 and metrics.wire_bytes == 0
    for bad in (True, -1, "3"):
        with pytest.raises(ValidationError):
            MetricsRecord.model_validate({"round": bad, "node": 1})
    with pytest.raises(ValidationError):  # the traffic ledger is the done record's point
        DoneRecord.model_validate({"node": 1})


def hand_made_plan() -> dict[str, Any]:
    """A plan file as an older launcher wrote it: sections hold only the keys set then."""
    return {
        "protocol": "d-psgd", "topology_name": "pair",
        "topology": {"nodes": [{"id": 0}, {"id": 1}], "edges": [[0, 1]]},
        "nodes": [{"id": i, "bind": f"tcp://*:{5000 + i}", "address": f"tcp://h:{5000 + i}",
                   "host": "h", "device": "cpu", "attrs": {}} for i in (0, 1)],
        "mixing": "metropolis", "weights": [[0, 0, 0.5], [0, 1, 0.5], [1, 0, 0.5], [1, 1, 0.5]],
        "rounds": 2, "seed": 3, "eval_every": 1, "data": SYNTHETIC_DATA, "model": {},
        "hyper": {}, "link": {"latency_ms": 5.0}, "wire": {"recv_timeout_s": 30.0},
        "transport": "zmq", "collector": "tcp://h:4999",
        "prephase": {"bind": "tcp://*:4998", "address": "tcp://h:4998", "timeout_s": 60.0,
                     "max_bytes": 1024},
        "schedule": {"mode": "tdma", "interference_range": None, "frame_length": 2,
                     "slots": [[[0, 1]], [[1, 0]]]},
        "cycle_metrics": {}, "schema_version": 1,
    }


def test_a_plan_file_reads_back_to_the_same_sections(tmp_path: Path) -> None:
    body = hand_made_plan()
    plan = RunPlan.from_dict(body)
    assert plan.link.latency_ms == 5.0 and plan.link.bandwidth_mbps == 100.0  # the model's
    assert plan.wire.rendezvous_seconds == 30.0
    assert plan.cycle_metrics.params_every == 0 and not plan.cycle_metrics.wanted
    assert plan.schedule.slots == (((0, 1),), ((1, 0),))
    written = plan.to_dict()
    for name in TYPED_SECTIONS.keys() & body.keys():
        assert json.dumps(written[name]) == json.dumps(body[name]), name
    assert written["discovery"] == {}  # a plan without one, written as before
    plan.dump(tmp_path / "plan.json")
    again = RunPlan.load(tmp_path / "plan.json")
    assert again.section_hashes() == plan.section_hashes()
    assert (tmp_path / "plan.json").read_text() == json.dumps(
        {**again.to_dict(), "hashes": again.section_hashes()}, indent=1, sort_keys=True) + "\n"


def test_a_plan_file_read_again_is_the_same_plan_until_its_bytes_change(tmp_path: Path) -> None:
    """A node forked from the zygote reads the plan the zygote read (launcher/backends/
    preload.py): the same bytes give the same object, hashes computed; other bytes, another."""
    path = tmp_path / "plan.json"
    RunPlan.from_dict(hand_made_plan()).dump(path)
    first = RunPlan.load(path)
    hashes = first.section_hashes()
    assert RunPlan.load(path) is first and RunPlan.load(tmp_path / "." / "plan.json") is first
    hashes["data"] = "changed by a caller"  # a copy: the plan's own stay as they are
    assert first.section_hashes()["data"] != "changed by a caller"
    RunPlan.from_dict({**hand_made_plan(), "rounds": 7}).dump(path)
    second = RunPlan.load(path)
    assert second is not first and second.rounds == 7
    assert second.section_hashes()["protocol"] != first.section_hashes()["protocol"]
    assert second.section_hashes()["data"] == first.section_hashes()["data"]



def test_a_plan_file_is_replaced_whole_and_private(tmp_path: Path) -> None:
    """A node or the kill helper polling plan.json never reads it half-written: the new file is
    written beside it and renamed over it, so the old inode (held open by a reader) keeps the
    old bytes; a temporary one left by a cut-short write is overwritten and never read."""
    path = tmp_path / "plan.json"
    RunPlan.from_dict(hand_made_plan()).dump(path)
    (tmp_path / "plan.tmp").write_text("a write cut short")
    with path.open() as reader:
        RunPlan.from_dict({**hand_made_plan(), "rounds": 7}).dump(path)
        assert json.loads(reader.read())["rounds"] == hand_made_plan()["rounds"]
    assert json.loads(path.read_text())["rounds"] == 7
    assert not (tmp_path / "plan.tmp").exists()
    assert path.stat().st_mode & 0o777 == 0o600

# content_hashes of hand_made_plan() with a directory, as cbff4f5 (before the typed sections)
# computed them (its code run on this very body): checkpoints of runs started then carry
# these, and must resume.
HASHES_BEFORE_TYPED_SECTIONS = {
    "data": "5c5005e586fd7b89", "prephase": "13c4bb6da5ebd143", "protocol": "796109d450a926dc",
    "runtime": "a1e4030786158ab0", "schedule": "92aba9113a29669f", "seeds": "4d687b6437462c4d",
    "topology": "04e0a5e935b12882",
}


def test_a_plan_with_a_prephase_hashes_without_its_addresses_as_before() -> None:
    """Resume hashes the plan with its addresses taken out: a pre-phase or directory section
    without them is no valid model, and the hashes must stay those checkpoints carry."""
    body = {**hand_made_plan(), "discovery": {"bind": "tcp://*:4997",
                                              "address": "tcp://h:4997"}}
    assert content_hashes(RunPlan.from_dict(body)) == HASHES_BEFORE_TYPED_SECTIONS
    moved = {**body, "prephase": {**body["prephase"], "bind": "tcp://*:6000",
                                  "address": "tcp://g:6000"}}
    assert content_hashes(RunPlan.from_dict(moved)) == HASHES_BEFORE_TYPED_SECTIONS


def test_a_plan_without_a_prephase_or_a_directory_holds_none() -> None:
    plan = RunPlan.from_dict({**hand_made_plan(), "prephase": {}, "discovery": {}})
    assert plan.prephase is None and plan.to_dict()["prephase"] == {}
    assert plan.discovery is None and plan.to_dict()["discovery"] == {}
    with pytest.raises(PlanError, match="no prephase section"):
        plan.required_prephase()


def test_the_data_section_keeps_the_partitions_spelling_and_the_datasets_options() -> None:
    """The partition is typed, written back as given; a protocol's dataset section rides
    along for its own model (the runtime reads it as a mapping)."""
    data = {**SYNTHETIC_DATA, "partition": "dirichlet:0.10:20",
            "scenes": {"size": 32, "portfolios": "uniform"}, "cache_dir": "/c/fmnist-0",
            "fingerprint": "f" * 64}
    plan = RunPlan.from_dict({**hand_made_plan(), "data": data})
    partition = plan.data.partition
    assert isinstance(partition, DirichletPartition) and (partition.alpha, partition.minimum) == (
        0.1, 20)
    assert str(partition) == "dirichlet:0.10:20"
    assert plan.data.options("scenes") == {"size": 32, "portfolios": "uniform"}
    assert plan.data.options() == {} and plan.data.prepared_entry() == ("/c/fmnist-0", "f" * 64)
    assert json.dumps(plan.to_dict()["data"], sort_keys=True) == json.dumps(data, sort_keys=True)


def test_a_secure_section_is_typed_and_an_empty_one_is_none() -> None:
    secure = {"keys_dir": "/k", "public_keys": {"node-0": "a" * 40, "node-1": "b" * 40}}
    plan = RunPlan.from_dict({**hand_made_plan(), "secure": secure})
    assert plan.secure is not None and plan.secure.public_keys["node-1"] == "b" * 40
    assert plan.to_dict()["secure"] == secure
    moved = RunPlan.from_dict({**hand_made_plan(), "secure": {**secure, "keys_dir": "/other"}})
    assert moved.section_hashes() == plan.section_hashes()  # where a host keeps its keys
    plain = RunPlan.from_dict({**hand_made_plan(), "secure": {}})
    assert plain.secure is None and plain.to_dict()["secure"] == {}


@pytest.mark.parametrize(("section", "value", "needle"), [
    ("link", {"latency": 1.0}, "link.latency"),
    ("schedule", {"mode": "csma"}, "schedule.mode"),
    ("cycle_metrics", {"params_every": -1}, "cycle_metrics.params_every"),
    ("data", {**SYNTHETIC_DATA, "partition": "halves"}, "data.partition: .*unknown partition"),
    ("data", {**SYNTHETIC_DATA, "eval_split": "all"}, "data.eval_split"),
    ("data", {**SYNTHETIC_DATA, "scenes": 3}, "scenes: a dataset's options section"),
    ("secure", {"keys_dir": "/k"}, "secure.public_keys"),
])
def test_a_bad_section_is_one_line(section: str, value: Any, needle: str) -> None:
    with pytest.raises(PlanError, match=needle) as err:
        RunPlan.from_dict({**hand_made_plan(), section: value})
    assert "\n" not in str(err.value)
    assert str(err.value).count("plan is malformed") == 1

