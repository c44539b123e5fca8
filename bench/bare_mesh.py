"""The bare mesh: D-PSGD's rounds with no framework, the reference of every round figure.

`python -m bench.bare_mesh PLAN.json` (a plan that `write_plan` made) runs one process per node
of the plan's graph and prints, as JSON, the mean over nodes of each round's wall and CPU
seconds (`round_seconds`, `round_cpu_seconds`, keyed by round as in a run's `summary.json`), so
the bench summarises both systems alike, and the Unix time at which the last node was past its
first exchange (`first_exchange_at`): with one round, the command is the bare mesh's start
(import torch, fork, connect, one exchange), bench/startup.py's reference.

Why a mesh and not only a floor timed in one process: a round on few shared cores also pays
what the operating system charges many processes taking turns (context switches, a wake-up per
message, caches refilled after each), and no framework can avoid that. A mesh that does the
same work with nothing else measures it, and what dfl-mesh needs beyond that mesh is what the
framework costs.

What a node does, and nothing more: it is forked from this process after `import torch, zmq`
(as dfl-mesh's nodes are forked from its zygote), sets torch to one thread, and each round takes
one bare SGD step (index a batch of 8 of 1024 random samples, forward, cross-entropy, backward,
w -= lr g) on parameters that are views of one flat float32 vector; sends that vector in
place (zero-copy) as one frame with an 8-byte header (round, sender) to each neighbour over a
pyzmq PUSH socket on loopback; keeps each neighbour's frame from its PULL socket, in place, in
an inbox keyed by round (a neighbour is at most one round ahead: it needs this node's message
to end its round); and mixes sum_j W_ij w_j over its row of the plan's Metropolis weights, j
ascending from zeros, as protocols/sdk/mixing.py does, into the vector in one copy. The
weights are the ones dfl-mesh's D-PSGD mixes with on the same graph
(topologies/mixing.py, what the launcher's planner writes). It has no real data, evaluation,
checkpoints, message validation, ledgers, heartbeats or failure handling.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import signal
import statistics
import struct
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

import torch
import zmq
from torch.nn import functional as F

from dfl_node.learning.models import build_model

INPUT = (1, 28, 28)  # one Fashion-MNIST sample
CLASSES = 10
BATCH = 8
LR = 0.1
SAMPLES = 1024  # random samples a node draws its batches from
TIMEOUT_S = 600.0  # a whole run, start to stop
HEADER = struct.Struct("<II")  # round, sender


def sgd_step(model: torch.nn.Module, seed: int,
             device: torch.device | None = None) -> Callable[[], None]:
    """One bare SGD step (index the batch, forward, cross-entropy, backward, w -= lr g) on
    random data: the bare mesh's round work, and the floor's step in bench/round_cost.py. On a
    `device` (bench/device_mesh.py) the data lives there and the batch indices are drawn on the
    CPU from the same generator, so every device takes the same batches."""
    data = torch.rand(SAMPLES, *INPUT)
    labels = torch.randint(0, CLASSES, (SAMPLES,))
    if device is not None:
        data, labels = data.to(device), labels.to(device)
    params = list(model.parameters())
    gen = torch.Generator().manual_seed(seed)

    def step() -> None:
        idx = torch.randint(0, SAMPLES, (BATCH,), generator=gen)
        if device is not None:
            idx = idx.to(device)
        model.zero_grad(set_to_none=False)
        F.cross_entropy(model(data[idx]), labels[idx]).backward()
        with torch.no_grad():
            for p in params:
                p.sub_(p.grad, alpha=LR)  # type: ignore[arg-type]

    return step


def flat_parameters(model: torch.nn.Module) -> torch.Tensor:
    """The model's parameters copied into one flat tensor and made views of it, so a step
    updates the vector that is sent and the mix writes the parameters in one copy."""
    params = list(model.parameters())
    flat = torch.cat([p.detach().reshape(-1) for p in params])
    offset = 0
    for p in params:
        p.data = flat[offset:offset + p.numel()].view_as(p)
        offset += p.numel()
    return flat


# --- the plan: who mixes with whom, with which weights ----------------------------------------

def write_plan(path: Path, model: dict[str, Any], topology: Path, rounds: int) -> Path:
    """The bare mesh's plan for `topology` (a topology file): each node's Metropolis row, from
    the same function the launcher's planner takes D-PSGD's weights from. Computed here, in the
    bench's process, so the bare mesh imports no more than torch, pyzmq and the model."""
    from topologies.loader import load_topology
    from topologies.mixing import mixing_matrix

    graph = load_topology(topology)
    matrix = mixing_matrix(graph, "metropolis")
    ids = list(graph.ids)
    rows = {str(i): {str(ids[k]): float(w) for k, w in enumerate(matrix[n]) if w != 0.0}
            for n, i in enumerate(ids)}
    path.write_text(json.dumps({"model": model, "rounds": rounds, "rows": rows}))
    return path


# --- one node ---------------------------------------------------------------------------------

def wired(ctx: zmq.Context[zmq.Socket[bytes]], link: Connection,
          peers: list[int]) -> tuple[zmq.Socket[bytes], list[zmq.Socket[bytes]]]:
    """This node's PULL socket, bound and its endpoint traded for every node's with `drive`,
    and a PUSH socket connected to each of `peers`, in their order."""
    pull = ctx.socket(zmq.PULL)
    pull.bind("tcp://127.0.0.1:*")
    link.send(("ok", pull.getsockopt_string(zmq.LAST_ENDPOINT)))
    endpoints: dict[int, str] = link.recv()
    pushes = []
    for peer in peers:
        push = ctx.socket(zmq.PUSH)
        push.connect(endpoints[peer])
        pushes.append(push)
    return pull, pushes


def _node(node: int, row: dict[int, float], spec: dict[str, Any], rounds: int,
          link: Connection) -> None:
    """One node: bind, trade endpoints with the parent, run the rounds, send the per-round
    seconds and CPU, and wait for the parent's stop before closing, so that no neighbour still
    waits for a message in flight. Each message to the parent is ("ok", value) or ("failed",
    traceback)."""
    for signum in (signal.SIGTERM, signal.SIGHUP):  # the parent's handlers are the parent's
        signal.signal(signum, signal.SIG_DFL)
    torch.set_num_threads(1)
    ctx = zmq.Context()
    try:
        pull, pushes = wired(ctx, link, [peer for peer in sorted(row) if peer != node])
        link.send(("ok", rounds_of(node, row, spec, rounds, pull, pushes)))
        link.recv()
    except Exception:
        link.send(("failed", traceback.format_exc()))
    finally:
        ctx.destroy(linger=0)


def rounds_of(node: int, row: dict[int, float], spec: dict[str, Any], rounds: int,
              pull: zmq.Socket[bytes], pushes: list[zmq.Socket[bytes]],
              ) -> tuple[list[float], list[float], float]:
    """The node's rounds: wall and CPU seconds (every thread of the process) of each, and the
    Unix time at which its first round ended. The
    vector is sent in place (ZeroMQ reads it; the mix waits until it has, before writing it)
    and a received frame is mixed in place, so no byte is copied in Python: a reference that
    copied would lose to dfl-mesh's zero-copy exchange on the CNN."""
    model = build_model(spec, INPUT, CLASSES, seed=0)
    flat = flat_parameters(model)
    step = sgd_step(model, node)
    peers = [j for j in sorted(row) if j != node]
    inbox: dict[tuple[int, int], torch.Tensor] = {}  # (round, sender) -> its vector
    size = flat.numel() * flat.element_size()
    seconds, cpu = [], []
    first_exchange_at = float("nan")
    for r in range(rounds):
        began, cpu_began = time.perf_counter(), time.process_time()
        step()
        sent = [push.send_multipart([HEADER.pack(r, node), flat.numpy().data], copy=False,
                                    track=True) for push in pushes]
        while any((r, j) not in inbox for j in peers):
            header, body = pull.recv_multipart(copy=False)
            sent_round, sender = HEADER.unpack(header.bytes)
            if sender not in row or sender == node or sent_round not in (r, r + 1) \
                    or (sent_round, sender) in inbox:
                raise RuntimeError(f"node {node} in round {r}: unexpected message of round "
                                   f"{sent_round} from {sender}")
            if len(body) != size:
                raise RuntimeError(f"node {node}: a message from {sender} is not {size} bytes")
            inbox[(sent_round, sender)] = torch.frombuffer(body, dtype=flat.dtype)
        with torch.no_grad():
            acc = torch.zeros_like(flat)
            for j in sorted(row):
                acc.add_(flat if j == node else inbox.pop((r, j)), alpha=row[j])
            for tracker in sent:
                assert tracker is not None  # track=True gives one
                tracker.wait()
            flat.copy_(acc)
        seconds.append(time.perf_counter() - began)
        cpu.append(time.process_time() - cpu_began)
        if r == 0:
            first_exchange_at = time.time()
    return seconds, cpu, first_exchange_at


# --- the mesh -----------------------------------------------------------------------------------

def node_answer(node: int, link: Connection, proc: multiprocessing.process.BaseProcess,
               deadline: float) -> Any:
    """The node's next message; an error if it sent one, died or the run's time ran out."""
    wait([link, proc.sentinel], max(deadline - time.monotonic(), 0.0))
    if link.poll():
        outcome, value = link.recv()
        if outcome != "ok":
            raise RuntimeError(f"bare mesh node {node} failed:\n{value}")
        return value
    if not proc.is_alive():
        raise RuntimeError(f"bare mesh node {node} died (exit code {proc.exitcode})")
    raise TimeoutError(f"bare mesh node {node}: no answer within {TIMEOUT_S:g} s")


def drive(context: multiprocessing.context.BaseContext, target: Callable[..., None],
          args: dict[int, tuple[Any, ...]], timeout_s: float) -> list[Any]:
    """One process per node, `target(*args[node], link)`: each sends its endpoint, receives
    every node's (node -> endpoint), runs and sends its result, then waits for "stop". The
    results in node order; every process has ended, stopped or killed, on every path out."""
    deadline = time.monotonic() + timeout_s
    links: dict[int, Connection] = {}
    procs: dict[int, multiprocessing.process.BaseProcess] = {}
    stopped = False
    try:
        for node, node_args in args.items():
            here, there = context.Pipe()
            links[node] = here
            procs[node] = context.Process(  # type: ignore[attr-defined]
                target=target, daemon=True, args=(*node_args, there))
            procs[node].start()
            there.close()
        endpoints = {i: node_answer(i, links[i], procs[i], deadline) for i in args}
        for link in links.values():
            link.send(endpoints)
        results = [node_answer(i, links[i], procs[i], deadline) for i in args]
        for link in links.values():
            link.send("stop")
        stopped = True
    finally:
        for proc in procs.values():
            if stopped:
                proc.join(10)
            if proc.is_alive():
                proc.terminate()
                proc.join(5)
            if proc.is_alive():
                proc.kill()
                proc.join()
        for link in links.values():
            link.close()
    return results


def run(plan: dict[str, Any]) -> dict[str, Any]:
    """The plan's mesh to its end: per round, the mean over nodes of its wall and CPU seconds;
    when the last node ended its first round."""
    rows = {int(i): {int(j): w for j, w in row.items()} for i, row in plan["rows"].items()}
    rounds = int(plan["rounds"])
    results = drive(multiprocessing.get_context("fork"), _node,
                    {node: (node, row, plan["model"], rounds) for node, row in rows.items()},
                    TIMEOUT_S)
    return {**{key: {str(r): statistics.mean(node[k][r] for node in results)
                     for r in range(rounds)}
               for k, key in enumerate(("round_seconds", "round_cpu_seconds"))},
            "first_exchange_at": max(node[2] for node in results)}


def _stop(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds `run`, which stops the nodes


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.bare_mesh",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("plan", type=Path, help="a plan written by bench.bare_mesh.write_plan")
    plan = json.loads(parser.parse_args(argv).plan.read_text())
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _stop)
    print(json.dumps(run(plan)))


if __name__ == "__main__":
    main()
