"""Transport throughput: dense float32 exchanges through Comm and the wire codec, against raw pyzmq.

`python -m bench.transport [--full]` prints, for 1M and 10M float32 parameters, without and
with --secure (CURVE), the payload throughput of two nodes exchanging through the project's
`Comm` over the real `ZmqTransport` (tcp loopback), beside raw pyzmq measured in the same run:
- raw DEALER->ROUTER with the same socket types and options as `ZmqTransport` (SNDHWM, RCVHWM,
  LINGER, SNDTIMEO, ROUTING_ID, MAXMSGSIZE; under --secure the same CURVE keys and ZAP handler),
  sending a header frame and the payload frame zero-copy, and receiving zero-copy: the ceiling
  a runtime on these sockets can reach. The figure is the ratio Comm / raw DEALER->ROUTER,
  with the goal >= 0.9 at 10M parameters;
- raw PUSH->PULL, printed beside it, to show what the socket pattern itself costs.

Why a gossip exchange and not a one-way stream: that is what every dense protocol does in a
round (d-psgd, dsgt, choco-sgd): both nodes send their parameters, then both receive the other's,
and the next round's send waits for this round's receive. Each repetition is `exchanges` such
rounds back to back; throughput counts the payload bytes of both directions over the wall time
of the repetition. The two nodes are two fresh processes per size and mode, each with its own
Comm, transport and ZeroMQ contexts and one torch thread, as the runtime runs them; the sockets
are real tcp loopback sockets.

Sides are measured in turn (`bench.figures.interleaved`), and each figure is the median over
repetitions, so the ratio holds on a noisy shared machine where absolute GB/s does not.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection

import numpy as np
import torch
import zmq

from bench.figures import Figure, compare, interleaved, median, module_main
from dfl_node.comm.channel import Comm
from dfl_node.ledgers.traffic import Ledger
from dfl_node.transports.encryption import Curve, ZapHandler
from dfl_node.transports.zeromq import ZmqTransport, routing_id
from dfl_node.wire.codec import WireLimits
from dfl_node.wire.tags import Tag

LOCAL = "tcp://127.0.0.1:0"
HWM = 1000
LINGER_MS = 5000
SEND_TIMEOUT_MS = 60_000
SIZES = {"1M": 1_000_000, "10M": 10_000_000}
GOALS = {"10M": 0.9}  # the goal; 1M is printed beside it
HEADER = b"\x00" * 120  # about the size of Comm's msgpack header for one tensor
SIDES = ("comm", "dealer", "push")

Addresses = dict[str, str]  # side -> the address this node's receiving socket is bound to


@dataclass(frozen=True)
class Setup:
    """How much to move per repetition, and how often."""

    reps: int
    exchanges: dict[str, int]  # per size label


QUICK = Setup(reps=7, exchanges={"1M": 10, "10M": 4})
FULL = Setup(reps=9, exchanges={"1M": 20, "10M": 6})


def figures(quick: bool) -> list[Figure]:
    """The transport figures: Comm / raw DEALER->ROUTER, per size, without and with CURVE."""
    setup = QUICK if quick else FULL
    out = []
    for secure in (False, True):
        for label, numel in SIZES.items():
            out.append(_measure(label, numel, secure, setup.exchanges[label], setup.reps))
    return out


def _measure(label: str, numel: int, secure: bool, exchanges: int, reps: int) -> Figure:
    """One size and mode, measured by two fresh processes (node 0 reports its samples), so that
    nothing of one measurement's sockets, contexts or threads is left in the next one's."""
    here, there = multiprocessing.get_context("spawn").Pipe()
    leader = multiprocessing.get_context("spawn").Process(
        target=_leader_main, args=(there, numel, secure, exchanges, reps))
    leader.start()
    mode = "secure (CURVE)" if secure else "plain"
    name = f"dense {label} float32 exchange, Comm+codec (zmq, {mode})"
    while not here.poll(1.0):
        if not leader.is_alive():  # the suite goes on; the table shows what failed
            return Figure("transport", name, float("nan"), "GB/s", goal=">= 0.9", met=False,
                          note=f"FAILED: node 0 exited {leader.exitcode} (its traceback is "
                               "on stderr)")
    samples, in_place = here.recv()
    leader.join(timeout=60)
    gbps = {side: median(values) for side, values in samples.items()}
    return compare("transport", name,
                   gbps["comm"], "GB/s", "raw pyzmq DEALER->ROUTER", gbps["dealer"],
                   goal_min=GOALS.get(label), reps=reps,
                   note=f"{exchanges} exchanges per rep, payload of both directions, "
                        "two processes",
                   extra={"raw PUSH->PULL GB/s": round(gbps["push"], 3),
                          "share of received bytes used in place": round(in_place, 3)})


def _leader_main(result: Connection, numel: int, secure: bool, exchanges: int,
                 reps: int) -> None:
    """Node 0, in its own process: starts node 1, times every side in turn, sends the samples."""
    torch.set_num_threads(1)
    keys = _keys() if secure else None
    limits = WireLimits(max_tensors=4, max_message_bytes=2 * 4 * numel)
    here, there = multiprocessing.get_context("spawn").Pipe()
    peer = multiprocessing.get_context("spawn").Process(
        target=_peer_main, args=(there, numel, limits, keys), daemon=True)
    peer.start()
    node = _Node(0, limits, keys)
    try:
        node.connect(here.recv())
        here.send(node.addresses())
        payload = np.arange(numel, dtype=np.float32)
        runs = {side: _timed(here, node, side, payload, exchanges) for side in SIDES}
        for run in runs.values():
            run()  # warm-up: connections, handshakes, first allocations
        result.send((interleaved(runs, reps), node.in_place_share()))
    finally:
        here.send(None)
        node.close()
        peer.join(timeout=30)


def _timed(peer: Connection, node: _Node, side: str, payload: np.ndarray,
           exchanges: int) -> Callable[[], float]:
    """A repetition: both nodes run `exchanges` rounds of `side`; payload GB/s of both ways."""
    counter = iter(range(1 << 30))

    def run() -> float:
        first = next(counter) * exchanges
        start = time.perf_counter()
        peer.send((side, first, exchanges))
        node.run(side, payload, first, exchanges)
        peer.recv()
        seconds = time.perf_counter() - start
        return 2 * exchanges * payload.nbytes / seconds / 1e9

    return run


def _peer_main(parent: Connection, numel: int, limits: WireLimits,
               keys: dict[int, Curve] | None) -> None:
    """Node 1, in its own process: runs what node 0 asks for until it sends None."""
    torch.set_num_threads(1)
    node = _Node(1, limits, keys)
    payload = np.arange(numel, dtype=np.float32)
    try:
        parent.send(node.addresses())
        node.connect(parent.recv())
        while (order := parent.recv()) is not None:
            side, first, exchanges = order
            node.run(side, payload, first, exchanges)
            parent.send(True)
    finally:
        node.close()


def _keys() -> dict[int, Curve]:
    pairs = {node: zmq.curve_keypair() for node in (0, 1)}
    publics = {node: public for node, (public, _) in pairs.items()}
    return {node: Curve(public, secret, publics, {}) for node, (public, secret) in pairs.items()}


class _Node:
    """One node's three ways to exchange: Comm over ZmqTransport, raw DEALER->ROUTER and raw
    PUSH->PULL, each bound on a free port and connected to the other node's."""

    def __init__(self, node: int, limits: WireLimits, keys: dict[int, Curve] | None) -> None:
        self.node = node
        self.limits = limits
        self.keys = keys
        self.transport = ZmqTransport(node, LOCAL, {}, max_message_bytes=limits.max_frame_bytes,
                                      hwm=HWM, linger_ms=LINGER_MS,
                                      send_timeout_s=SEND_TIMEOUT_MS / 1000,
                                      curve=keys[node] if keys else None,
                                      admit=(1 - node,))
        self.comm: Comm | None = None
        self.raw = {"dealer": _RawEnd(node, zmq.DEALER, limits, keys),
                    "push": _RawEnd(node, zmq.PUSH, limits, keys)}

    def addresses(self) -> Addresses:
        return {"comm": self.transport.bound_address,
                **{side: end.address for side, end in self.raw.items()}}

    def connect(self, theirs: Addresses) -> None:
        self.transport.add_peer(1 - self.node, theirs["comm"])
        self.comm = Comm(self.node, (1 - self.node,), self.transport, self.limits,
                         Ledger(self.node))
        for side, end in self.raw.items():
            end.connect(theirs[side])

    def run(self, side: str, payload: np.ndarray, first: int, exchanges: int) -> None:
        if side != "comm":
            self.raw[side].run(payload, exchanges)
            return
        assert self.comm is not None
        tensor = torch.from_numpy(payload)
        for r in range(first, first + exchanges):
            self.comm.round = r
            self.comm.exchange(Tag("data", r, "bench"), {"w": tensor})

    def in_place_share(self) -> float:
        """The share of the payload Comm received that became tensors with no copy."""
        assert self.comm is not None
        received = self.comm.received
        return received.in_place_bytes / (received.in_place_bytes + received.copied_bytes)

    def close(self) -> None:
        if self.comm is not None:
            self.comm.close()  # the closing barrier: both nodes close
        else:
            self.transport.close()
        for end in self.raw.values():
            end.close()


class _RawEnd:
    """Raw pyzmq for one node: a bound receiving socket (ROUTER or PULL) and a sending one
    (DEALER or PUSH), with ZmqTransport's options and, under --secure, its CURVE set-up."""

    def __init__(self, node: int, kind: int, limits: WireLimits,
                 keys: dict[int, Curve] | None) -> None:
        self.node = node
        self.keys = keys
        self.context = zmq.Context()  # its own: one ZAP handler per context
        self.receiver = _socket(self.context, zmq.ROUTER if kind == zmq.DEALER else zmq.PULL)
        self.receiver.setsockopt(zmq.MAXMSGSIZE, limits.max_frame_bytes)
        self.zap: ZapHandler | None = None
        if keys:
            self.zap = keys[node].serve(self.receiver, {1 - node: keys[1 - node].public})
        self.receiver.bind(LOCAL)
        self.address = self.receiver.getsockopt_string(zmq.LAST_ENDPOINT)
        self.sender = _socket(self.context, kind)
        if kind == zmq.DEALER:
            self.sender.setsockopt(zmq.ROUTING_ID, routing_id(node))

    def connect(self, address: str) -> None:
        if self.keys:
            self.keys[self.node].client(self.sender, self.keys[1 - self.node].public)
        self.sender.connect(address)

    def run(self, payload: np.ndarray, exchanges: int) -> None:
        view = payload.view(np.uint8).data
        for _ in range(exchanges):
            self.sender.send_multipart([HEADER, view], copy=False)
            self.receiver.recv_multipart(copy=False)

    def close(self) -> None:
        self.sender.close(linger=LINGER_MS)
        self.receiver.close(linger=LINGER_MS)
        if self.zap is not None:
            self.zap.close()
        self.context.term()


def _socket(context: zmq.Context, kind: int) -> zmq.Socket:
    """A socket with the options ZmqTransport sets on each of its sockets."""
    socket = context.socket(kind)
    socket.setsockopt(zmq.SNDHWM, HWM)
    socket.setsockopt(zmq.RCVHWM, HWM)
    socket.setsockopt(zmq.LINGER, LINGER_MS)
    socket.setsockopt(zmq.SNDTIMEO, SEND_TIMEOUT_MS)
    return socket


def main() -> None:
    module_main(figures, __doc__, "more repetitions and exchanges")


if __name__ == "__main__":
    main()
