"""Attackers for tests/test_hostile_run.py, each keeping an exact tally of what it sent.

- Outsiders (`attack_node`, `attack_collector`): ZeroMQ sockets of the test process aimed at a
  listening socket of a running mesh (the collector's also with records sealed with the run's
  key, as a thief of plan.json could). What a compatible socket delivers reaches the application
  and must be counted there under one reason; what ZeroMQ itself refuses (an incompatible socket
  type, a frame over the socket's MAXMSGSIZE) never reaches it and is tallied apart.
- An insider (`python -m tests.hostile COUNTS.json <dfl-node args>`): a real node of the mesh
  that runs the protocol faithfully, but whose transport follows every data message it sends
  with a batch of hostile ones over the same connection, i.e. under a neighbour's own identity:
  garbage, truncated frames, malformed headers, another sender's id, replays of old rounds,
  future rounds, exact duplicates, wrong shapes. Because a connection keeps its order and the
  neighbour's closing "bye" comes last, the receiver reads every one of them, and the reason it
  must give is fixed by construction (a receiver of round r's message is within one round of r).
"""

from __future__ import annotations

import contextlib
import json
import random
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import zmq

from dfl_node.comm.channel import DEFAULT_WINDOW
from dfl_node.plan import RunPlan
from dfl_node.runner.results_seal import MAX_RECORD_BYTES, RECORD, results_key, seal
from dfl_node.transports.zeromq import ZmqTransport, routing_id
from dfl_node.wire.codec import Layouts, WireError, WireLimits, decode, encode
from dfl_node.wire.tags import Tag

SEND_TIMEOUT_MS = 5000
REPLAY_AGE = DEFAULT_WINDOW + 2  # old enough to be stale for a receiver within one round
Batch = list[tuple[str, list[bytes], str]]  # (category, frames, the reason it must get)


def plan_limits(plan: RunPlan) -> WireLimits:
    """The limits a node of `plan` decodes with (as dfl_node.runner.run_node.make_comm builds
    them)."""
    assert plan.wire.max_message_bytes is not None
    return WireLimits(max_tensors=plan.wire.max_tensors,
                      max_message_bytes=plan.wire.max_message_bytes)


def wire_reason(frames: list[bytes], limits: WireLimits, held: Layouts | None = None
                ) -> str | None:
    """The codec's refusal reason for `frames`, None if they decode, on a connection whose
    sender has defined the layouts `held` (left unchanged)."""
    try:
        decode(frames, limits, held.copy() if held is not None else None)
    except WireError as err:
        return err.reason
    return None


def random_value(rng: random.Random) -> Any:
    return rng.choice([None, True, -1, 2**40, 1.5, "", "float32", "x" * 70, [1, [2]], {"a": 1}])


def garbled(rng: random.Random, frames: list[bytes], limits: WireLimits,
            held: Layouts | None = None) -> list[bytes]:
    """Random bytes, a truncated header, or the real header with one field made wrong (of a
    message in the self-describing form), each kept only in a form the codec refuses on a
    connection that holds `held` (so no forged-but-valid message slips in)."""
    while True:
        kind = rng.randrange(3)
        if kind == 0:
            out = [rng.randbytes(rng.randrange(1, 64)) for _ in range(rng.randint(1, 3))]
        elif kind == 1:
            out = [frames[0][: rng.randrange(len(frames[0]))], *frames[1:]]
        else:
            header = msgpack.unpackb(frames[0]) | {rng.choice(sorted(msgpack.unpackb(frames[0]))):
                                                   random_value(rng)}
            out = [msgpack.packb(header), *frames[1:]]
        if wire_reason(out, limits, held) is not None:
            return out


# ----------------------------------------------------------------------------- the insider


@dataclass
class Insider:
    """Builds the hostile batch that follows each data message and tallies what it sent."""

    node_id: int
    limits: WireLimits
    rng: random.Random = field(default_factory=lambda: random.Random(14))
    history: dict[int, dict[int, list[bytes]]] = field(default_factory=lambda: defaultdict(dict))
    # per neighbour, the layouts it holds from this node (its messages are in the compact form)
    held: dict[int, Layouts] = field(default_factory=lambda: defaultdict(Layouts))
    expected: dict[int, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    categories: Counter[str] = field(default_factory=Counter)

    def batch(self, dst: int, frames: list[bytes]) -> Batch:
        """The attacks that follow the node's own message `frames` to `dst`; the malformed ones
        are made of the message in the self-describing form, `full`."""
        held = self.held[dst]
        message = decode(frames, self.limits, held)  # as `dst` reads it, holding what it holds
        tag, r = message.tag, message.tag.round
        if tag.kind != "data":
            return []
        tensors = {name: np.array(t) for name, t in message.tensors.items()}
        full = self._encode(self.node_id, tag, tensors)
        self.history[dst][r] = full
        self.history[dst].pop(r - REPLAY_AGE - 1, None)
        if r - REPLAY_AGE not in self.history[dst]:
            return []
        first = next(iter(tensors))
        wrong = {**tensors, first: tensors[first].reshape(-1)[:-1].copy()}
        header_only = [full[0]]
        out: Batch = [
            ("garbage", garbled(self.rng, full, self.limits, held), ""),
            ("truncated_frame", [full[0], full[1][:-4], *full[2:]], ""),
            ("extra_frame", [*full, b"\x00"], ""),
            ("missing_frames", header_only, ""),
            ("claims_another_sender", self._encode(self.node_id + 100, tag, tensors),
             "src_mismatch"),
            ("replayed_old_round", self.history[dst][r - REPLAY_AGE], "stale_or_future"),
            ("future_round", self._encode(self.node_id, replace(tag, round=r + REPLAY_AGE),
                                          tensors), "stale_or_future"),
            ("duplicate", frames, "duplicate"),
            ("wrong_shape", self._encode(self.node_id, tag, wrong), "schema_mismatch"),
        ]
        return [(name, f, reason or str(wire_reason(f, self.limits, held)))
                for name, f, reason in out]

    def _encode(self, src: int, tag: Tag, tensors: dict[str, np.ndarray]) -> list[bytes]:
        return [bytes(f) for f in encode(src, tag, tensors)]

    def record(self, dst: int, batch: Batch) -> None:
        for category, _, reason in batch:
            self.categories[category] += 1
            self.expected[dst][reason] += 1

    def dump(self, path: Path) -> None:
        path.write_text(json.dumps({"expected": {str(d): dict(c) for d, c in
                                                 self.expected.items()},
                                    "categories": dict(self.categories)}))


class HostileTransport(ZmqTransport):
    """The node's real transport; every data message it sends is followed by a hostile batch."""

    insider: Insider

    def send(self, dst: int, frames: Any) -> None:
        own = [bytes(f) for f in frames]
        super().send(dst, own)
        batch = self.insider.batch(dst, own)
        for _, hostile, _ in batch:
            super().send(dst, hostile)
        self.insider.record(dst, batch)


def run_insider(argv: list[str]) -> None:
    """`COUNTS.json --plan P --node-id I [...]`: dfl-node with the hostile transport."""
    import launcher.node_cli as node_cli

    counts, args = Path(argv[0]), argv[1:]
    plan = RunPlan.load(Path(args[args.index("--plan") + 1]))
    node_id = int(args[args.index("--node-id") + 1])
    HostileTransport.insider = Insider(node_id, plan_limits(plan))
    node_cli.ZmqTransport = HostileTransport  # type: ignore[misc]  # the attacker's own node
    sys.argv = ["dfl-node", *args]
    try:
        node_cli.main()
    finally:
        HostileTransport.insider.dump(counts)


# ----------------------------------------------------------------------------- outsiders


@dataclass
class Tally:
    """What one attack sent: per category, and per reason the application must count, apart
    from what ZeroMQ refused below the application."""

    sent: Counter[str] = field(default_factory=Counter)
    delivered: Counter[str] = field(default_factory=Counter)
    below: Counter[str] = field(default_factory=Counter)

    def add(self, other: Tally) -> None:
        self.sent.update(other.sent)
        self.delivered.update(other.delivered)
        self.below.update(other.below)


@contextlib.contextmanager
def sockets(ctx: zmq.Context, address: str, kinds: dict[str, tuple[int, bytes | None]]
            ) -> Iterator[dict[str, zmq.Socket]]:
    """Connected sockets by name. Those the listener accepts ("ok" in the name) wait for
    room to send; the others never wait: ZeroMQ takes what it can queue and drops it later."""
    out = {}
    try:
        for name, (kind, identity) in kinds.items():
            sock = out[name] = ctx.socket(kind)
            sock.setsockopt(zmq.LINGER, 2000)
            sock.setsockopt(zmq.SNDTIMEO, SEND_TIMEOUT_MS if "ok" in name else 0)
            if identity is not None:
                sock.setsockopt(zmq.ROUTING_ID, identity)
            sock.connect(address)
        yield out
    finally:
        for sock in out.values():
            sock.close()


def send_all(sock: zmq.Socket, messages: list[list[bytes]]) -> int:
    """Messages ZeroMQ took (an incompatible or full socket refuses some at once)."""
    taken = 0
    for frames in messages:
        with contextlib.suppress(zmq.Again):
            sock.send_multipart(frames)
            taken += 1
    return taken


def attack_node(ctx: zmq.Context, plan: RunPlan, node_id: int, per_category: int,
                rng: random.Random) -> Tally:
    """Everything an outsider can send a node's ROUTER; every delivered message arrives on a
    connection that is not a neighbour's, so each must be refused as `not_neighbour`."""
    limits, address = plan_limits(plan), plan.node(node_id).address
    neighbour = plan.neighbors(node_id)[0]
    stranger = next(i for i in plan.ids if i != node_id and i not in plan.neighbors(node_id))
    weights = {"w": np.zeros(8, np.float32)}
    valid = [bytes(f) for f in encode(neighbour, Tag("data", 0, "gossip"), weights)]
    oversize = [b"\x00" * (limits.max_frame_bytes + 1)]
    tally = Tally()
    kinds = {"anonymous_ok": (zmq.DEALER, None),
             "stranger_ok": (zmq.DEALER, routing_id(stranger)),
             "push": (zmq.PUSH, None), "oversize": (zmq.DEALER, None)}
    categories: dict[str, Callable[[], list[bytes]]] = {
        "garbage": lambda: garbled(rng, valid, limits),
        "truncated_frame": lambda: [valid[0], valid[1][: rng.randrange(len(valid[1]))]],
        "claims_a_neighbour": lambda: valid,
        "replayed_old_round": lambda: [bytes(f) for f in encode(
            neighbour, Tag("data", rng.randrange(4), "gossip"), weights)],
    }
    with sockets(ctx, address, kinds) as socks:
        for name, make in categories.items():
            taken = send_all(socks["anonymous_ok"], [make() for _ in range(per_category)])
            tally.sent[name] += taken
            tally.delivered["not_neighbour"] += taken
        stranger_msgs = [[bytes(f) for f in encode(stranger, Tag("data", r, "gossip"), weights)]
                         for r in range(per_category)]
        taken = send_all(socks["stranger_ok"], stranger_msgs)
        tally.sent["non_neighbour_identity"] += taken
        tally.delivered["not_neighbour"] += taken
        for name, sock, messages in (("wrong_socket_type", socks["push"], [valid] * per_category),
                                     ("oversize_frame", socks["oversize"], [oversize] * 3)):
            taken = send_all(sock, messages)
            tally.sent[name] += taken
            tally.below[name] += taken
    return tally


def attack_collector(ctx: zmq.Context, plan: RunPlan, per_category: int,
                     rng: random.Random) -> Tally:
    """An outsider's records to the collector's ROUTER, each compatible one counted by reason:
    without the run's results key nothing is `unauthenticated`; with it (a thief of plan.json),
    a record of a node outside the plan or of a sequence number already passed is still
    refused."""
    key = results_key(plan)
    record = msgpack.packb({"type": "metrics", "node": 0, "round": 1, "accuracy": 0.5})
    forged_error = msgpack.packb({"type": "error", "node": 0, "message": "forged"})
    categories: dict[str, tuple[Callable[[], list[bytes]], str]] = {
        "garbage": (lambda: [rng.randbytes(rng.randrange(1, 64))], "unauthenticated"),
        "unsealed_record": (lambda: [record], "unauthenticated"),
        "unsealed_error": (lambda: [forged_error], "unauthenticated"),
        "wrong_seal": (lambda: [seal(key, 0, time.time_ns(), RECORD, forged_error)[:-32]
                                + rng.randbytes(32)], "unauthenticated"),
        "extra_frame": (lambda: [seal(key, 0, time.time_ns(), RECORD, record), b""],
                        "unauthenticated"),
        "claims_another_node": (lambda: [seal(key, 999, time.time_ns(), RECORD, record)],
                                "unknown_node"),
        "replayed_sequence": (lambda: [seal(key, 0, 1, RECORD, forged_error)], "replayed"),
    }
    tally = Tally()
    kinds = {"dealer_ok": (zmq.DEALER, None), "pub": (zmq.PUB, None),
             "oversize": (zmq.DEALER, None)}
    with sockets(ctx, plan.collector, kinds) as socks:
        for name, (make, reason) in categories.items():
            taken = send_all(socks["dealer_ok"], [make() for _ in range(per_category)])
            tally.sent[name] += taken
            tally.delivered[reason] += taken
        for name, sock, messages in (
                ("wrong_socket_type", socks["pub"], [[record]] * per_category),
                ("oversize_frame", socks["oversize"], [[b"\x00" * (MAX_RECORD_BYTES + 1)]] * 2)):
            taken = send_all(sock, messages)
            tally.sent[name] += taken
            tally.below[name] += taken
    return tally


if __name__ == "__main__":
    run_insider(sys.argv[1:])
