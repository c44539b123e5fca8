"""The bare pyzmq+torch mesh of bench.bare_mesh with its model on a device: the reference a
dfl-mesh round on a GPU is measured against (bench/gpu.py).

Each node is a process of its own (spawned, not forked: a child forked from a process that has
touched CUDA cannot use it), on a ring, and each round does what bench.bare_mesh's node does,
with the model's flat parameter vector on `device`: one SGD step of batch 8 on random data
already on the device, the vector copied to a host buffer and sent to both ring neighbours over
PUSH/PULL (zero-copy: ZeroMQ reads the host buffer in place), theirs received into host
buffers, copied to the device and mixed there, self first, then the neighbours in a fixed order.

The host buffers are pageable, or, with `pinned`, page-locked (`pin_memory`): a copy between
the device and pinned memory is one DMA the device runs asynchronously, where a copy into
pageable memory is staged by the driver through a pinned buffer of its own and blocks. Both
are measured, so the figure says what pinning buys; dfl-mesh's runtime has no such switch (its
wire path copies a device tensor into a fresh pageable host tensor, dfl_node/comm/channel.py
`_wire_view`). On the CPU there is nothing to copy but the step's vector, once, into the send
buffer (bench.bare_mesh sends it in place instead), and the mix reads the receive buffers.

A send buffer is reused two rounds later (one per round parity), when every neighbour has
received its message: a neighbour finishes round r only with this node's round-r message, and
this node starts round r + 2 only after the neighbours' round-(r + 1) messages.
"""

from __future__ import annotations

import multiprocessing
import statistics
import time
import traceback
from multiprocessing.connection import Connection
from typing import Any

import torch
import zmq

from bench.bare_mesh import CLASSES, HEADER, INPUT, drive, flat_parameters, sgd_step, wired
from dfl_node.learning.models import build_model


class Staging:
    """The host buffers between the device and ZeroMQ: two send buffers and a two-round inbox,
    by round parity, and on a device one tensor there per neighbour to mix from."""

    def __init__(self, flat: torch.Tensor, degree: int, pinned: bool) -> None:
        def host() -> torch.Tensor:
            return torch.empty(flat.numel(), dtype=flat.dtype, pin_memory=pinned)

        self.device = flat.device
        self.pinned = pinned
        self.out = [host(), host()]
        self.inbox = [[host() for _ in range(degree)] for _ in range(2)]
        self.theirs = [torch.empty_like(flat) for _ in range(degree)] \
            if flat.device.type != "cpu" else []

    def outgoing(self, flat: torch.Tensor, r: int) -> torch.Tensor:
        """`flat` in this round's send buffer, whole before ZeroMQ reads it."""
        out = self.out[r % 2]
        out.copy_(flat, non_blocking=self.pinned)
        if self.pinned:
            torch.cuda.current_stream(self.device).synchronize()
        return out

    def received(self, r: int) -> list[torch.Tensor]:
        """Round r's neighbour vectors where the mix reads them."""
        if not self.theirs:
            return self.inbox[r % 2]
        for there, here in zip(self.theirs, self.inbox[r % 2], strict=True):
            there.copy_(here, non_blocking=self.pinned)
        return self.theirs


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def device_rounds(node: int, neighbours: list[int], spec: dict[str, Any], rounds: int,
                  pull: zmq.Socket[bytes], pushes: list[zmq.Socket[bytes]],
                  device: torch.device, pinned: bool) -> tuple[list[float], list[float]]:
    """The node's rounds: wall and CPU seconds of each, the device synchronised at the end of
    every round (so a round's time holds its kernels, and the inbox half it read is free)."""
    model = build_model(spec, INPUT, CLASSES, seed=0).to(device)
    flat = flat_parameters(model)
    step = sgd_step(model, node, device)
    slots = {peer: slot for slot, peer in enumerate(neighbours)}
    staging = Staging(flat, len(neighbours), pinned)
    arrived: set[tuple[int, int]] = set()
    size = flat.numel() * flat.element_size()
    weight = 1.0 / (len(neighbours) + 1)
    seconds, cpu = [], []
    for r in range(rounds):
        began, cpu_began = time.perf_counter(), time.process_time()
        step()
        payload = staging.outgoing(flat, r).numpy().data
        for push in pushes:
            push.send_multipart([HEADER.pack(r, node), payload], copy=False)
        while any((r, slot) not in arrived for slot in slots.values()):
            sent_round, sender = HEADER.unpack(pull.recv())
            slot = slots[sender]
            if sent_round not in (r, r + 1) or (sent_round, slot) in arrived \
                    or not pull.getsockopt(zmq.RCVMORE):
                raise RuntimeError(f"node {node} in round {r}: unexpected message of round "
                                   f"{sent_round} from {sender}")
            if pull.recv_into(staging.inbox[sent_round % 2][slot].numpy()) != size:
                raise RuntimeError(f"node {node}: a message from {sender} is not {size} bytes")
            arrived.add((sent_round, slot))
        theirs = staging.received(r)
        with torch.no_grad():
            acc = torch.zeros_like(flat)
            acc.add_(flat, alpha=weight)
            for slot in range(len(neighbours)):
                acc.add_(theirs[slot], alpha=weight)
                arrived.remove((r, slot))
            flat.copy_(acc)
        sync(device)
        seconds.append(time.perf_counter() - began)
        cpu.append(time.process_time() - cpu_began)
    return seconds, cpu


def _device_node(node: int, nodes: int, spec: dict[str, Any], rounds: int, device: str,
                 pinned: bool, link: Connection) -> None:
    """One spawned node: bind, trade endpoints with the parent, run the rounds, send them, and
    close only on the parent's word, when no neighbour waits for a message in flight. Each
    message to the parent is ("ok", value) or ("failed", traceback), as bench.bare_mesh's are."""
    torch.set_num_threads(1)
    ctx = zmq.Context()
    try:
        neighbours = [(node - 1) % nodes, (node + 1) % nodes]
        pull, pushes = wired(ctx, link, neighbours)
        link.send(("ok", device_rounds(node, neighbours, spec, rounds, pull, pushes,
                                       torch.device(device), pinned)))
        link.recv()
    except Exception:
        link.send(("failed", traceback.format_exc()))
    finally:
        ctx.destroy(linger=0)


def device_mesh(spec: dict[str, Any], nodes: int, rounds: int, device: str, pinned: bool,
                timeout_s: float) -> tuple[float, float]:
    """A ring of `nodes` spawned processes for `rounds` rounds on `device`: (seconds per round,
    CPU seconds per node-round), the mean over nodes of each round, then the median over
    rounds after the first, as bench.round_cost summarises the bare mesh and dfl-mesh's nodes."""
    if nodes < 3 or rounds < 2:
        raise ValueError(f"a device mesh needs 3 nodes and 2 rounds or more, not {nodes} and "
                         f"{rounds}")
    results = drive(multiprocessing.get_context("spawn"), _device_node,
                    {node: (node, nodes, spec, rounds, device, pinned) for node in range(nodes)},
                    timeout_s)
    per_round = [statistics.mean(run[0][r] for run in results) for r in range(1, rounds)]
    cpu = [statistics.mean(run[1][r] for run in results) for r in range(1, rounds)]
    return statistics.median(per_round), statistics.median(cpu)
