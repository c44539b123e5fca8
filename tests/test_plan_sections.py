"""The plan's typed sections: one model per section, defaults declared there only, and a plan
file that reads back to the same bytes (runs in flight resume by comparing section hashes)."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from dfl_node.plan import TYPED_SECTIONS, PlanError, RunPlan

ROOT = Path(__file__).resolve().parents[1]
READERS = ("dfl_node", "protocols", "launcher", "bench")


def literal_gets(source: str) -> list[tuple[int, str, Any]]:
    """Every `<x>.get("key", <literal>)` of `source`: (line, key, the literal's value)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "get" and len(node.args) == 2
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            try:
                default = ast.literal_eval(node.args[1])
            except ValueError:
                continue  # a name or an expression: not a literal repeated here
            out.append((node.lineno, node.args[0].value, default))
    return out


def model_defaults() -> dict[str, tuple[str, Any]]:
    """key -> (section, its model's default) for every field of a typed plan section."""
    out: dict[str, tuple[str, Any]] = {}
    for name, model in TYPED_SECTIONS.items():
        for key, info in model.model_fields.items():
            out[key] = (name, None if info.is_required() else info.default)
    return out


def repeated_defaults(path: Path, source: str) -> list[str]:
    models = model_defaults()
    return [f"{path}:{line}: .get({key!r}, {default!r}); the plan's {models[key][0]} model "
            f"declares {key} (default {models[key][1]!r}): read the model's field instead"
            for line, key, default in literal_gets(source) if key in models]


def test_the_check_finds_a_default_repeated_at_a_reader() -> None:
    source = 'every = int(plan.cycle_metrics.get("params_every", 0))\nx = d.get("other", 1)\n'
    (found,) = repeated_defaults(Path("reader.py"), source)
    assert "params_every" in found and "default 0" in found


def test_no_reader_repeats_a_plan_section_default() -> None:
    found = [problem for package in READERS for path in sorted((ROOT / package).rglob("*.py"))
             for problem in repeated_defaults(path.relative_to(ROOT), path.read_text())]
    assert found == []


def hand_made_plan() -> dict[str, Any]:
    """A plan file as an older launcher wrote it: sections hold only the keys set then."""
    return {
        "protocol": "d-psgd", "topology_name": "pair",
        "topology": {"nodes": [{"id": 0}, {"id": 1}], "edges": [[0, 1]]},
        "nodes": [{"id": i, "bind": f"tcp://*:{5000 + i}", "address": f"tcp://h:{5000 + i}",
                   "host": "h", "device": "cpu", "attrs": {}} for i in (0, 1)],
        "mixing": "metropolis", "weights": [[0, 0, 0.5], [0, 1, 0.5], [1, 0, 0.5], [1, 1, 0.5]],
        "rounds": 2, "seed": 3, "eval_every": 1, "data": {"dataset": "synthetic"}, "model": {},
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


def test_a_plan_without_a_prephase_or_a_directory_holds_none() -> None:
    plan = RunPlan.from_dict({**hand_made_plan(), "prephase": {}, "discovery": {}})
    assert plan.prephase is None and plan.to_dict()["prephase"] == {}
    assert plan.discovery is None and plan.to_dict()["discovery"] == {}
    with pytest.raises(PlanError, match="no prephase section"):
        plan.required_prephase()


@pytest.mark.parametrize(("section", "value", "needle"), [
    ("link", {"latency": 1.0}, "link.latency"),
    ("schedule", {"mode": "csma"}, "schedule.mode"),
    ("cycle_metrics", {"params_every": -1}, "cycle_metrics.params_every"),
])
def test_a_bad_section_is_one_line(section: str, value: Any, needle: str) -> None:
    with pytest.raises(PlanError, match=needle) as err:
        RunPlan.from_dict({**hand_made_plan(), section: value})
    assert "\n" not in str(err.value)

