"""bench/round_cost.py's reference, the bare mesh: it mixes with the weights dfl-mesh's D-PSGD
mixes with, it runs its rounds on any graph and its nodes' PSS is read; and each round figure
carries the issue's goals on ring20 only, checked against dfl-mesh minus the bare mesh."""

from __future__ import annotations

import json
import marshal
import subprocess
import sys
from pathlib import Path

from bench import bare_mesh
from bench.figures import Mode
from bench.round_cost import (
    DISPATCH,
    FRAMEWORK_CPU_GOALS_MS,
    PROFILED_MS,
    ROUND_GOALS,
    Floor,
    Pair,
    Raw,
    Side,
    framework_figure,
    profile_buckets,
    round_figure,
)
from bench.startup import Memory, Tree
from launcher.config.planner import mixing_weights
from topologies.generators import erdos_renyi, ring
from topologies.loader import load_topology
from topologies.writer import write_topology

MLP = {"name": "mlp", "hidden": [64]}


def test_the_bare_mesh_mixes_with_the_weights_the_planner_gives_d_psgd(tmp_path: Path) -> None:
    graph = tmp_path / "er12.yaml"
    write_topology(erdos_renyi(12, 0.3, seed=3, repair="resample"), graph)
    plan = json.loads(bare_mesh.write_plan(tmp_path / "plan.json", MLP, graph, 5).read_text())
    bare = {(int(i), int(j)): w for i, row in plan["rows"].items() for j, w in row.items()}
    planned = {(i, j): w for i, j, w in mixing_weights(load_topology(graph), "metropolis")}
    assert bare == planned
    assert len({len(row) for row in plan["rows"].values()}) > 1  # not a regular graph


def test_a_bare_mesh_runs_its_rounds_on_the_graph(tmp_path: Path) -> None:
    graph = tmp_path / "ring4.yaml"
    write_topology(ring(4), graph)
    pair = Pair.of("MLP", graph, 3, tmp_path)
    seconds = pair.bare()
    out = json.loads((tmp_path / "MLP-ring4-bare-0.json").read_text())
    assert sorted(out) == ["first_exchange_at", "round_cpu_seconds", "round_seconds"]
    assert list(out["round_seconds"]) == ["0", "1", "2"]
    assert seconds > 0 and pair.bare_side.cpu[0] > 0


def test_the_nodes_forked_from_one_parent_are_read_as_a_mesh() -> None:
    code = ("import subprocess, sys\n"
            "kids = [subprocess.Popen([sys.executable, '-c', 'import sys; sys.stdin.read()'],"
            " stdin=subprocess.PIPE) for _ in range(3)]\n"
            "print('up', flush=True)\n"
            "sys.stdin.read()\n"
            "for k in kids:\n    k.stdin.close()\n    k.wait()\n")
    parent = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None and parent.stdout.readline() == "up\n"
        tree = Tree.flat(parent.pid)
        memory = Memory(3, Tree.flat, per_sample=3, side=False)
        memory.sample(parent.pid)
    finally:
        assert parent.stdin is not None
        parent.stdin.close()
        parent.wait()
    assert (len(tree.nodes), tree.helpers) == (3, {})
    assert sorted(memory.node_peak_mb) == tree.nodes
    assert all(mb > 0 for mb in memory.node_peak_mb.values())
    assert memory.parts_mb == {}  # the parent's side is not read


def side(seconds: float, cpu_ms: float, pss: float) -> Side:
    return Side([seconds], [cpu_ms / 1e3], [pss], [4])


def test_the_goals_hold_on_ring20_against_the_bare_mesh(tmp_path: Path) -> None:
    floor = Floor(step=4e-4, mix={2: 5e-5, 3: 6e-5}, message_bytes=203_560)
    raw = Raw(throughput=1e9, cpu_per_byte=1e-9)
    rows = {str(i): {str(i): 0.5, str((i + 1) % 20): 0.25, str((i - 1) % 20): 0.25}
            for i in range(20)}
    ring20 = Pair("MLP", Path("ring20.yaml"), 60, tmp_path, rows,
                  dfl=side(0.036, 2.7, 46.0), bare_side=side(0.030, 2.2, 45.0))
    other = Pair("MLP", Path("er50.yaml"), 60, tmp_path, rows,
                 dfl=side(0.036, 2.7, 46.0), bare_side=side(0.030, 2.2, 45.0))
    mode = Mode(1, 0, "test")
    on_ring = round_figure(ring20, floor, raw, mode, {})
    assert (on_ring.value, on_ring.reference_value) == (0.036, 0.030)
    assert on_ring.goal == f"<= {ROUND_GOALS['MLP']:g}" and on_ring.met is False  # 1.2x
    assert "dfl-mesh | bare: 27.8 | 33.3 rounds/s, CPU 2.7 | 2.2 ms" in on_ring.note
    framework = framework_figure(ring20, on_ring)
    assert framework.value is not None and abs(framework.value - 0.5) < 1e-9
    assert framework.goal == f"<= {FRAMEWORK_CPU_GOALS_MS['MLP']:g}" and framework.met is False
    elsewhere = round_figure(other, floor, raw, mode, {})
    assert (elsewhere.goal, elsewhere.met) == ("", None)
    assert (framework_figure(other, elsewhere).goal, framework_figure(other, elsewhere).met) \
        == ("", None)


def test_the_profile_counts_local_sgd_step_once_with_the_gradients_it_takes(
        tmp_path: Path) -> None:
    """LocalSGD.step (gradient and update) is the local step, and a gradient a protocol takes
    itself counts too, but the gradient inside step is not counted twice; the buckets' calls
    are disjoint, so the rest of run_round is what they leave. A profile in cProfile's own
    file format (a marshalled pstats dict: func -> (cc, nc, tt, ct, callers))."""
    run_round = ("/x/protocols/gossip/dpsgd.py", 56, "run_round")
    step = ("/x/protocols/sdk/learning.py", 38, "step")
    gradient = ("/x/protocols/sdk/learning.py", 32, "gradient")
    mix = ("/x/protocols/sdk/mixing.py", 16, "mix")
    stats = {
        run_round: (10, 10, 1.0, 10.0, {}),
        step: (10, 10, 0.5, 4.0, {run_round: (10, 10, 0.5, 4.0)}),
        gradient: (20, 20, 3.0, 4.0, {step: (10, 10, 2.0, 3.0), run_round: (10, 10, 1.0, 1.0)}),
        mix: (10, 10, 2.0, 2.0, {run_round: (10, 10, 2.0, 2.0)}),
    }
    prof = tmp_path / "node-0.prof"
    prof.write_bytes(marshal.dumps(stats))
    shares = profile_buckets(prof, rounds=10)
    assert shares["local step (LocalSGD)"] == 0.5  # step 4 s + the bare gradient's 1 s of 10
    assert shares["mixing (sdk.mix)"] == 0.2
    assert abs(shares[DISPATCH] - 0.3) < 1e-12
    assert shares[PROFILED_MS] == 1000.0
