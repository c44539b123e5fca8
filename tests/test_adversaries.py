"""Adversarial nodes in a mesh (docs/protocols/robust.md, docs/design/adversaries.md steps 3 and
4): declared in the topology or the config, refused with one line where they cannot run, and
run by the protocol's own code with their data poisoned and their messages rewritten.

The runs are d-psgd on the synthetic task over a ring of five (node 0 the adversary unless a
case says otherwise), a few rounds each: each attack must change what an honest node ends with,
and adversaries must leave the run as exact as any other (zmq = inproc bit for bit, a killed
and resumed run equal to one that never stopped, every round-to-round value in the checkpoint).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from dfl_mesh.testing import assert_resume_exact, assert_transports_agree, audit_checkpoint_fields
from dfl_mesh.testing.mesh import mesh
from dfl_node.learning.arrays import ImageRows
from dfl_node.learning.shards import NodeData
from dfl_node.plan import RunPlan
from protocols.robust.adversary import TensorStore, flat_floats, poisoned, with_floats
from protocols.robust.adversary_settings import drawn
from tests.harness import Exited

RING5 = "nodes: [{id: 0}, {id: 1}, {id: 2}, {id: 3}, {id: 4}]\n" \
        "edges: [[0, 1], [1, 2], [2, 3], [3, 4], [4, 0]]\n"
HONEST = 2  # two hops from node 0: what it ends with has passed through a neighbour (three
# rounds: an attack that needs last round's messages acts from round 1 on, and reaches it in 2)

ATTACKS: dict[str, list[dict[str, Any]]] = {
    "sign-flip": [{"kind": "sign-flip"}],
    "scaled": [{"kind": "scaled", "factor": -2}],
    "gaussian": [{"kind": "gaussian", "std": 0.5}],
    "alie": [{"kind": "alie", "z": 1.0}],
    "ipm": [{"kind": "ipm", "epsilon": 0.5}],
    "dissensus": [{"kind": "dissensus", "epsilon": 2.0}],
    "ipm-this-round": [{"kind": "ipm", "epsilon": 0.5, "sees": "this-round"}],
    "silent": [{"kind": "silent"}],
    "per-neighbour": [{"kind": "per-neighbour", "to": {1: {"kind": "scaled", "factor": -4}}}],
    "label-flip": [{"kind": "label-flip"}],
}


def adversaries(nodes: list[int], behaviour: list[dict[str, Any]]) -> dict[str, Any]:
    return {"adversaries": {"nodes": nodes, "behaviour": behaviour}}


def final(run_dir: Path, node: int) -> dict[str, torch.Tensor]:
    return load_file(str(run_dir / "final" / f"node-{node}.safetensors"))


@pytest.fixture(scope="module")
def ring(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("ring")
    (where / "ring.yaml").write_text(RING5)
    return where


@pytest.fixture(scope="module")
def honest_run(ring: Path) -> dict[str, torch.Tensor]:
    mesh("d-psgd", ring, ring / "ring.yaml", {}, {"rounds": 3}).run(ring / "honest",
                                                                     transport="inproc")
    return final(ring / "honest", HONEST)


@pytest.mark.parametrize("attack", list(ATTACKS))
def test_each_attack_changes_what_an_honest_node_ends_with(
        attack: str, ring: Path, honest_run: dict[str, torch.Tensor]) -> None:
    out = ring / attack
    result = mesh("d-psgd", ring, ring / "ring.yaml", adversaries([0], ATTACKS[attack]),
                  {"rounds": 3}).run(out, transport="inproc")
    attacked = final(out, HONEST)
    assert any(not torch.equal(attacked[k], honest_run[k]) for k in honest_run), attack
    plan = RunPlan.load(out / "plan.json")
    assert list(plan.adversaries) == [0] and plan.adversaries[0][0]["kind"] == ATTACKS[attack][0][
        "kind"]
    assert result.ok


def test_a_silent_adversary_never_trains(ring: Path) -> None:
    """Its model after one round and after three is the one it started with."""
    kit = mesh("d-psgd", ring, ring / "ring.yaml", adversaries([0], ATTACKS["silent"]), {})
    kit.run(ring / "silent-1", transport="inproc", rounds=1)
    kit.run(ring / "silent-3", transport="inproc", rounds=3)
    one, three = final(ring / "silent-1", 0), final(ring / "silent-3", 0)
    assert all(torch.equal(one[k], three[k]) for k in one)
    assert any(not torch.equal(a, b) for a, b in zip(final(ring / "silent-1", 1).values(),
                                                     final(ring / "silent-3", 1).values(),
                                                     strict=True))


ZMQ_CASES = {
    # previous-round memory, random streams, per-destination messages, composed behaviours
    "mixed": {"adversaries": {"nodes": [1, 3], "behaviour": [
        {"kind": "label-flip"}, {"kind": "alie", "z": 0.5}, {"kind": "gaussian", "std": 0.1}]}},
    "per-destination": {"adversaries": {"nodes": [3], "behaviour": [
        {"kind": "per-neighbour", "to": {0: {"kind": "ipm"},
                                         2: {"kind": "gaussian", "centre": "zero"}}}]}},
    "silent": {"adversaries": {"nodes": [2], "behaviour": [{"kind": "silent"}]}},
    # two adjacent omniscient adversaries: each waits for its honest neighbours only
    "this-round": {"adversaries": {"nodes": [0, 1], "behaviour": [
        {"kind": "alie", "z": 1.0, "sees": "this-round"},
        {"kind": "dissensus", "sees": "this-round"}]}},
}


@pytest.mark.parametrize("case", list(ZMQ_CASES))
def test_zmq_and_inproc_agree_bit_for_bit_with_adversaries(case: str, tmp_path: Path) -> None:
    assert_transports_agree("d-psgd", workdir=tmp_path, overrides=ZMQ_CASES[case])


def test_a_killed_and_resumed_run_with_adversaries_is_exact(tmp_path: Path) -> None:
    """Two drawn adversaries remember last round's messages (dissensus, one message per
    neighbour) and draw noise; the kill lands after round 1."""
    overrides = {"adversaries": {"fraction": 0.5, "placement_seed": 3, "behaviour": [
        {"kind": "dissensus"}, {"kind": "gaussian", "std": 0.05}]}}
    assert_resume_exact("d-psgd", kill_after_round=1, rounds=3, workdir=tmp_path,
                        overrides=overrides)


# The backdoor needs images: Fashion-MNIST on the ring of five, against the trimmed mean, the
# one attack tests/test_robust_dpsgd.py's synthetic runs cannot put against a rule.
BACKDOOR = {"dataset": "fmnist", "partition": "iid", "model": {"name": "mlp"},
            "aggregation": {"rule": "trimmed-mean", "b": 1},
            "adversaries": {"nodes": [0], "behaviour": [
                {"kind": "backdoor", "target": 0, "fraction": 0.5}]}}


def test_a_backdoor_against_a_rule_is_exact_over_zmq_and_through_a_kill(
        ring: Path, tmp_path: Path) -> None:
    assert_transports_agree("d-psgd", topology=ring / "ring.yaml", workdir=tmp_path / "zmq",
                            overrides=BACKDOOR, rounds=2)
    assert_resume_exact("d-psgd", topology=ring / "ring.yaml", workdir=tmp_path / "resume",
                        kill_after_round=1, rounds=2, overrides=BACKDOOR)
    summary = json.loads((tmp_path / "resume" / "full" / "summary.json").read_text())
    assert summary["honest"]["backdoor_asr"] is not None  # the probe ran on the honest nodes


def test_the_state_audit_covers_what_adversaries_remember(tmp_path: Path) -> None:
    audit = audit_checkpoint_fields("d-psgd", workdir=tmp_path, overrides={"adversaries": {
        "nodes": [1], "behaviour": [{"kind": "ipm"}, {"kind": "gaussian", "std": 0.1}]}})
    assert any(path.startswith("adversary.") for path in audit.changed), sorted(audit.changed)


def test_the_plan_holds_the_adversaries_apart_and_a_protocol_sees_only_its_own_role(
        tmp_path: Path, entry: Callable[..., Exited]) -> None:
    """Declared in the topology and resolved into the plan's own section (ALIE's z fixed from
    the population); gone from the plan's topology and node attributes; a node's protocol
    reads a plan without them, and only its own role."""
    (tmp_path / "t.yaml").write_text(
        "nodes: [{id: 0, adversary: [{kind: alie}]}, {id: 1}, {id: 2},\n"
        "        {id: 3, adversary: [{kind: sign-flip}]}, {id: 4}]\n"
        "edges: [[0, 1], [1, 2], [2, 3], [3, 4], [4, 0]]\n")
    done = entry("dfl-launch", "plan", "--topology", str(tmp_path / "t.yaml"), "--protocol",
                 "d-psgd", "--dataset", "synthetic", "-o", str(tmp_path / "plan.json"))
    assert done.code == 0, done.err
    plan = RunPlan.load(tmp_path / "plan.json")
    assert sorted(plan.adversaries) == [0, 3]
    assert plan.adversaries[0] == [{"kind": "alie", "sees": "previous-round",
                                    "z": pytest.approx(0.8416, abs=1e-4)}]
    assert "adversary" not in json.dumps(plan.topology)
    assert all("adversary" not in n.attrs for n in plan.nodes)
    assert plan.seen_by_protocol().adversaries == {} and plan.adversary_role(2) is None
    role = plan.adversary_role(0)
    assert role is not None and role.colluders == (3,)
    assert "adversaries" in plan.section_hashes()
    assert RunPlan.from_dict(plan.to_dict()).section_hashes() == plan.section_hashes()


def test_a_plan_without_adversaries_hashes_as_before() -> None:
    """No `adversaries` section at all, so the plan agreement's message keeps its size."""
    from dfl_node.plan import section_hashes_of

    data = {"topology_name": "t", "topology": {}, "nodes": [], "protocol": "p", "hyper": {},
            "model": {}, "mixing": "m", "weights": [], "rounds": 1, "eval_every": 1,
            "aggregator": None, "eval_at_start": False, "data": {}, "seed": 0, "link": {},
            "wire": {}, "transport": "inproc", "cycle_metrics": {}, "checkpoint_every": 0,
            "secure": {}, "discovery": {}, "prephase": {}, "schedule": {}, "adversaries": {}}
    assert "adversaries" not in section_hashes_of(data)
    assert "adversaries" in section_hashes_of({**data, "adversaries": {"1": [{"kind": "x"}]}})


def test_a_fraction_is_drawn_from_its_own_stream_and_sorted() -> None:
    clients = list(range(20))
    chosen = drawn(clients, 0.1, 0)
    assert chosen == sorted(chosen) and len(chosen) == 2 and chosen == drawn(clients, 0.1, 0)
    assert drawn(clients, 0.0, 0) == []


def test_poisoning_copies_the_shard_and_leaves_the_shared_arrays_alone() -> None:
    pixels = np.zeros((10, 1, 8, 8), dtype=np.uint8)
    pixels.setflags(write=False)
    labels = np.arange(10, dtype=np.int64) % 3
    labels.setflags(write=False)
    rows = ImageRows(pixels, np.zeros(1, np.float32), np.ones(1, np.float32))
    data = NodeData(rows, labels, np.zeros((2, 1, 8, 8), np.float32), np.zeros(2, np.int64), 3)
    out = poisoned(data, [{"kind": "label-flip"},
                          {"kind": "backdoor", "target": 1, "fraction": 0.5, "size": 2}], 0, 4)
    again = poisoned(data, [{"kind": "label-flip"},
                            {"kind": "backdoor", "target": 1, "fraction": 0.5, "size": 2}], 0, 4)
    stamped = out.x_train.pixels[:, 0, -2:, -2:].reshape(10, -1).min(axis=1) == 255
    assert stamped.sum() == 5 and (out.y_train[stamped] == 1).all()
    assert (out.y_train[~stamped] == 2 - labels[~stamped]).all()
    assert np.array_equal(out.x_train.pixels, again.x_train.pixels)  # from the plan alone
    assert not pixels.any() and (labels == np.arange(10) % 3).all()


def test_a_message_keeps_its_schema_through_an_attack() -> None:
    msg = {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3),
           "idx": torch.arange(4, dtype=torch.int64), "h": np.ones(1, dtype=np.float64)}
    out = with_floats(msg, flat_floats(msg).neg())
    assert out["w"].dtype == torch.float32 and out["w"].shape == (2, 3)
    assert torch.equal(out["w"], -msg["w"]) and out["idx"] is msg["idx"]
    assert isinstance(out["h"], np.ndarray) and out["h"].tolist() == [-1.0]


def test_the_tensor_store_round_trips_any_dtype() -> None:
    store = TensorStore()
    store.put({"a": torch.arange(3, dtype=torch.int64), "b": torch.ones(2, 2)})
    store.put({"a": torch.tensor([1.5], dtype=torch.float64)})
    assert store.names() == ["b", "a"]
    a, b = store.get("a"), store.get("b")
    assert a is not None and b is not None and a.tolist() == [1.5] and torch.equal(b,
                                                                                 torch.ones(2, 2))


TRI = "nodes: [{id: 0}, {id: 1}, {id: 2}]\nedges: [[0, 1], [1, 2], [2, 0]]\n"
SIGN = "behaviour: [{kind: sign-flip}]"
REFUSALS = {
    "both-places": ("nodes: [{id: 0, adversary: [{kind: silent}]}, {id: 1}, {id: 2}]\n"
                    "edges: [[0, 1], [1, 2], [2, 0]]\n",
                    f"adversaries={{nodes: [0], {SIGN}}}", "d-psgd", "in one place"),
    "fraction-and-nodes": (TRI, f"adversaries={{nodes: [0], fraction: 0.5, {SIGN}}}", "d-psgd",
                           "nodes or fraction, not both"),
    "unknown-kind": (TRI, "adversaries={nodes: [0], behaviour: [{kind: flip}]}", "d-psgd",
                     "unknown 'flip'"),
    "unknown-kind-in-topology": ("nodes: [{id: 0, adversary: [{kind: flip}]}, {id: 1}]\n"
                                 "edges: [[0, 1]]\n", None, "d-psgd", "flip"),
    "unknown-node": (TRI, f"adversaries={{nodes: [7], {SIGN}}}", "d-psgd", "node 7 is not in"),
    "aggregator": (TRI, f"adversaries={{nodes: [3], {SIGN}}}", "qffl", "aggregator"),
    "data-poisoning-unsupported": (TRI, "adversaries={nodes: [0], behaviour: [{kind: label-flip}]}",
                                   "dsc", "does not support"),
    "omniscient-tdma": (TRI, "adversaries={nodes: [0], behaviour: [{kind: ipm, sees: "
                        "this-round}]}", "d-psgd", "TDMA frame"),
    "silent-and-more": (TRI, "adversaries={nodes: [0], behaviour: [{kind: silent}, "
                        "{kind: scaled}]}", "d-psgd", "cannot be combined"),
    "per-neighbour-stranger": ("nodes: [{id: 0, adversary: [{kind: per-neighbour, to: {5: "
                               "{kind: sign-flip}}}]}, {id: 1}, {id: 5}]\n"
                               "edges: [[0, 1], [1, 5]]\n",
                               None, "d-psgd", "not its neighbour"),
    "backdoor-on-vectors": (TRI, "adversaries={nodes: [0], behaviour: [{kind: backdoor}]}",
                            "d-psgd", "trigger on images"),
    "no-behaviour": (TRI, "adversaries={nodes: [0]}", "d-psgd", "at least one behaviour"),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_a_declaration_that_cannot_run_is_one_line_and_exit_2(
        case: str, tmp_path: Path, entry: Callable[..., Exited]) -> None:
    topology, setting, protocol, fragment = REFUSALS[case]
    (tmp_path / "t.yaml").write_text(topology)
    extra = ("--set", setting) if setting else ()
    if case == "omniscient-tdma":
        extra += ("--set", "schedule=tdma")
    done = entry("dfl-launch", "plan", "--topology", str(tmp_path / "t.yaml"), "--protocol",
                 protocol, "--dataset", "synthetic", "--rounds", "1", *extra,
                 "-o", str(tmp_path / "plan.json"))
    assert (done.code, done.out) == (2, ""), done.err
    assert done.err.count("\n") == 1 and fragment in done.err, done.err
    assert not (tmp_path / "plan.json").exists()
