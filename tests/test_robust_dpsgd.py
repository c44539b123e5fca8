"""d-psgd with each robust aggregation rule (`hyper.aggregation`, docs/protocols/robust.md) on
the synthetic task: zmq and inproc runs end bit for bit alike (final files, metrics, ledgers),
a run killed and resumed ends as one that never stopped, a clipping rule's metrics show it
acting, parameters the graph cannot honour are refused before any node starts (one line, exit
2), and a node that loses the neighbours its rule needs (`--on-failure continue`) stops the
run naming itself. The rules themselves: tests/test_robust_aggregators.py; the SDK helper:
tests/test_robust_mixing.py."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from dfl_mesh.testing.compare import metrics_rows, results_difference
from tests.harness import Exited, assert_transports_identical
from tests.test_on_failure import HEX6, hit_after_evaluations, start, topology
from tests.test_resume import SYNTH, assert_resumed_equals_uninterrupted

# The complete graph of five without the edge 3-4: in-degrees 4, 4, 4, 3, 3, enough for BRIDGE
# with b = 1 and a trimmed mean with b = 1 at every node, and degrees that differ.
K5_LESS_ONE = """\
nodes: [{id: 0}, {id: 1}, {id: 2}, {id: 3}, {id: 4}]
edges: [[0, 1], [0, 2], [0, 3], [0, 4], [1, 2], [1, 3], [1, 4], [2, 3], [2, 4]]
"""
DIRECTED_RING4 = """\
directed: true
nodes: [{id: 0}, {id: 1}, {id: 2}, {id: 3}]
edges: [[0, 1], [1, 2], [2, 3], [3, 0]]
"""
# Round 0 the complete graph of four (three in-neighbours each), round 1 a ring (two), in turn.
CYCLE_K4_RING4 = """\
nodes: [{id: 0}, {id: 1}, {id: 2}, {id: 3}]
edges: [[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]]
schedule:
  kind: cycle
  graphs: [[[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]], [[0, 1], [1, 2], [2, 3], [3, 0]]]
"""
RULES = {
    "median": "{rule: median}",
    "trimmed-mean": "{rule: trimmed-mean, b: 1}",
    "krum": "{rule: krum, f: 0}",
    "multi-krum": "{rule: multi-krum, f: 0, m: 3}",
    "bridge": "{rule: bridge, b: 1}",
    "clipped-gossip": "{rule: clipped-gossip, delta: 0.3}",
    "clipped-gossip-tau": "{rule: clipped-gossip, tau: 0.05}",
    "self-centred-clipping": "{rule: self-centred-clipping, tau: 0.05, iterations: 2}",
}
# Each rule runs against node 0 as an adversary, each with other behaviours, so that together
# the runs below (and the backdoor's, which needs images: tests/test_adversaries.py) put every
# attack against a defence over both transports and through a kill and resume.
ATTACKED = {
    "median": "[{kind: silent}]",
    "trimmed-mean": "[{kind: label-flip}, {kind: sign-flip}]",
    "krum": "[{kind: scaled, factor: -2}, {kind: gaussian, std: 0.5}]",
    "multi-krum": "[{kind: alie, z: 1.0}]",
    "bridge": "[{kind: ipm, epsilon: 0.5}]",
    "clipped-gossip": "[{kind: dissensus, epsilon: 2.0}]",
    "clipped-gossip-tau": "[{kind: per-neighbour, to: {1: {kind: scaled, factor: -4}}}]",
    "self-centred-clipping": "[{kind: alie, z: 1.0, sees: this-round}]",
}
CLIPPING = {"clipped-gossip", "clipped-gossip-tau", "self-centred-clipping"}
RUN = (*SYNTH, "--rounds", "3", "--eval-every", "1", "--set", "local_steps=2", "--quiet")


def with_rule(name: str) -> tuple[str, ...]:
    return (*RUN, "--set", f"aggregation={RULES[name]}")


def attacked(name: str) -> tuple[str, ...]:
    """Rule `name` with node 0 attacking as ATTACKED says."""
    return ("--set", f"aggregation={RULES[name]}",
            "--set", f"adversaries={{nodes: [0], behaviour: {ATTACKED[name]}}}")


def test_every_attack_but_the_backdoor_meets_a_rule() -> None:
    def kinds(behaviour: dict[str, Any]) -> list[str]:
        inner = behaviour.get("to", {}).values()
        return [behaviour["kind"], *(k for b in inner for k in kinds(b))]

    met = {k for attacks in ATTACKED.values() for b in yaml.safe_load(attacks) for k in kinds(b)}
    assert met == {"silent", "label-flip", "sign-flip", "scaled", "gaussian", "alie", "ipm",
                     "dissensus", "per-neighbour"}
    assert set(ATTACKED) == set(RULES)


@pytest.mark.parametrize("name", sorted(RULES))
def test_each_rule_under_attack_runs_bit_identically_over_zmq_and_inproc(
        tmp_path: Path, name: str) -> None:
    topo = topology(tmp_path, "k5", K5_LESS_ONE)
    assert_transports_identical(tmp_path, topo, "d-psgd", *RUN, *attacked(name))
    differ = results_difference(tmp_path / "zmq", tmp_path / "inproc")
    assert differ is None, differ  # metrics rows and ledgers too
    rows = metrics_rows(tmp_path / "inproc")
    assert len(rows) == 5 * 3 and all(r["dropped_nonfinite"] == 0 for r in rows)
    if name in CLIPPING:  # the defence acted, and the metrics say where
        assert all(r["radius"] >= 0 for r in rows)
        assert sum(r["clipped_neighbours"] for r in rows) > 0, rows
    else:
        assert not any("clipped_neighbours" in r for r in rows)


def test_a_rule_on_a_time_varying_graph_mixes_each_rounds_row_bit_identically(
        tmp_path: Path) -> None:
    """The row is round r's (`plan.weight_row(i, r)`): three neighbours, then two, in turn."""
    topo = topology(tmp_path, "cycle", CYCLE_K4_RING4)
    assert_transports_identical(tmp_path, topo, "d-psgd", *with_rule("trimmed-mean"))
    differ = results_difference(tmp_path / "zmq", tmp_path / "inproc")
    assert differ is None, differ


def test_the_rules_change_the_result_and_the_mean_is_plain_d_psgd(tmp_path: Path) -> None:
    """A robust rule mixes otherwise than the mean (so the runs above test a rule, not d-psgd),
    and `{rule: mean}` spelt out is the default run, bit for bit."""
    topo = topology(tmp_path, "k5", K5_LESS_ONE)
    assert_transports_identical(tmp_path / "median", topo, "d-psgd", *with_rule("median"))
    assert_transports_identical(tmp_path / "default", topo, "d-psgd", *RUN)
    assert_transports_identical(tmp_path / "mean", topo, "d-psgd", *RUN,
                                "--set", "aggregation={rule: mean}")
    assert results_difference(tmp_path / "mean" / "zmq", tmp_path / "default" / "inproc") is None
    assert results_difference(tmp_path / "median" / "inproc",
                              tmp_path / "default" / "inproc") is not None
    assert not any("dropped_nonfinite" in r for r in metrics_rows(tmp_path / "default" / "zmq"))


RESUMED = ("clipped-gossip",)  # the adaptive radius, recomputed every round from the models


@pytest.mark.parametrize("name", [*RESUMED, *(pytest.param(n, marks=pytest.mark.slow)
                                               for n in sorted(RULES) if n not in RESUMED)])
def test_a_run_with_a_rule_under_attack_killed_and_resumed_ends_as_an_uninterrupted_one(
        tmp_path: Path, name: str) -> None:
    """The rules keep no state between rounds (nothing to checkpoint, nothing forgotten); the
    adversary's random streams and remembered messages are checkpointed."""
    topo = topology(tmp_path, "k5", K5_LESS_ONE)
    assert_resumed_equals_uninterrupted(
        tmp_path, topo, "d-psgd", 2, *SYNTH, "--rounds", "4", "--eval-every", "2",
        "--checkpoint-every", "2", *attacked(name))


@pytest.mark.parametrize(("graph", "args", "said"), ids=[
    "krum", "trimmed-mean", "multi-krum", "bridge", "directed-krum", "time-varying-bridge",
    "no-radius", "sgp"],
    argvalues=[
    (K5_LESS_ONE, ("--set", "aggregation={rule: krum, f: 1}"),
     "d-psgd: hyper.aggregation: node 3 has the fewest in-neighbours, 3: Krum: f = 1 Byzantine "
     "neighbours assumed among 4 vectors (the node and 3 neighbours); it needs n > 2f + 2, so "
     "f in 0..0"),
    (K5_LESS_ONE, ("--set", "hyper.aggregation={rule: trimmed-mean, b: 2}"),
     "node 3 has the fewest in-neighbours, 3: trimmed mean: b = 2 per side of 4 values"),
    (K5_LESS_ONE, ("--set", "aggregation={rule: multi-krum, f: 0, m: 5}"),
     "node 3 has the fewest in-neighbours, 3: Multi-Krum: m = 5 selected of 4 vectors"),
    (K5_LESS_ONE, ("--set", "aggregation={rule: bridge, b: 2}"),
     "node 3 has the fewest in-neighbours, 3: BRIDGE screening: b = 2 per side of 3 neighbours"),
    (DIRECTED_RING4, ("--set", "aggregation={rule: krum, f: 0}"),
     "node 0 has the fewest in-neighbours, 1 in round 0: Krum: f = 0"),
    (CYCLE_K4_RING4, ("--set", "aggregation={rule: bridge, b: 1}"),
     "node 0 has the fewest in-neighbours, 2 in round 1: BRIDGE screening: b = 1"),
    (K5_LESS_ONE, ("--set", "aggregation={rule: clipped-gossip}"),
     "--set aggregation={rule: clipped-gossip}: hyper.aggregation: clipped-gossip takes tau"),
    (K5_LESS_ONE, ("--set", "aggregation.rule=median", "--protocol", "sgp"),
     "--set aggregation.rule=median: hyper.aggregation: sgp does not mix with a choice of rule "
     "(protocols with robust aggregation: d-psgd)"),
])
def test_parameters_the_graph_cannot_honour_are_refused_before_any_node_starts(
        tmp_path: Path, entry: Callable[..., Exited], graph: str, args: tuple[str, ...],
        said: str) -> None:
    done = entry("dfl-launch", "--topology", topology(tmp_path, "graph", graph),
                 "--protocol", "d-psgd", *SYNTH, *args, "--out", str(tmp_path / "r"))
    assert done.code == 2 and done.out == ""
    assert done.err.count("\n") == 1 and said in done.err, done.err
    assert not (tmp_path / "r" / "final").exists()


def test_a_node_left_with_too_few_neighbours_stops_the_run_naming_itself(tmp_path: Path) -> None:
    """Krum with f = 0 needs three vectors: on a ring of six every node has them, until node 2
    dies under --on-failure continue and nodes 1 and 3 are left with one neighbour each."""
    run = tmp_path / "r"
    proc = start(run, topology(tmp_path, "hex6", HEX6), "d-psgd", "--rounds", "100000",
                 "--deadline", "3", "--on-failure", "continue",
                 "--set", "aggregation={rule: krum, f: 0}")
    err = hit_after_evaluations(proc, run, 6, 2, signal.SIGKILL)
    assert proc.returncode == 1, err
    assert ("aggregation krum: Krum: f = 0 Byzantine neighbours assumed among 2 vectors (the "
            "node and 1 neighbours)") in err, err
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "failed" and summary["failed_node"] in (1, 3), summary
    assert f"node {summary['failed_node']}: aggregation krum" in err, err
