"""Comm: the only interface a protocol sees (tagged send, receive, exchange, barrier).

Why results cannot depend on arrival order: every message is addressed by (source, Tag) and a
receive asks for one exact (source, tag). Whatever arrives first is buffered under its own key
until asked for, and every multi-neighbour result (`exchange`, `gather_neighbors`) is a dict in
ascending neighbour id. Protocols must run neighbour sums over that order (or `sorted(...)`), so
floating-point sums are the same on every run and under every transport.

Why a received message can never hurt the protocol: it is taken apart and checked first (wire
limits, then the rules below) and refused messages are dropped and counted in
`ledger.rejected[reason]`, never raised. Reasons added to the wire codec's:
- not_neighbour: the connection is not one of this node's neighbours;
- src_mismatch: the header's `src` differs from the connection's peer id;
- curve_sender_mismatch: under --secure, the connection claims a node id whose CURVE key it does
  not hold (the transport reports it as FORGED_PEER; with --secure the peer id is the key's, so
  a header that names another sender is a src_mismatch);
- stale_or_future: the tag's round is more than `window` rounds from `comm.round`;
- schema_mismatch: names, dtypes or shapes differ from the schema set for the tag's phase, or
  the validator set for the phase (`set_validator`) refused the tensors;
- duplicate: the same (source, tag) is already buffered or was already consumed;
- expired: buffered but never asked for before `comm.round` moved `window` rounds past it;
- unconsumed: still buffered when `close()` ran;
- dead_peer: buffered from a neighbour the mesh has since dropped (`drop_neighbors`).

Copies: none on send, none on receive for large tensors from ZeroMQ. `send` encodes views of
the caller's tensors (a copy only where a tensor is not on the CPU or not contiguous), the
transport sends them zero-copy, and every call that sends (`send`, `broadcast`, the exchanges,
the barriers) returns only once the transport has released them (`Transport.flush`), so the
caller may update its tensors in place as soon as the call returns. One encoding serves every
neighbour (each gets the compact header it can read, dfl_node/wire/session.py; tensors of a few
KiB in all ride in the header's frame, one copy that ZeroMQ would make anyway). An accepted
message becomes torch tensors that are writable and owned by the protocol
(dfl_node/comm/received.py): a large one is ZeroMQ's received frame itself where that frame
sits at the offset every transport gives large tensors, and a copy at that offset otherwise,
so that BLAS, which rounds by alignment, computes the same under every transport. Comm's own
work per message is a few steps per tensor whatever its size: no Python loop over elements.

Optional sends (event triggers): in `exchange_optional` a node may send nothing on the data
plane. Silence must not be confused with delay, and waiting for a timeout would make every silent
step cost the timeout, so every node ends the step with an empty end-of-step marker (kind
"ctrl", phase f"{phase}/end") to each neighbour. Each connection keeps its order, so a
neighbour's data message, if it sent one, is already buffered when its marker arrives. Markers
are control traffic in the ledger: they are the runtime's, not the algorithm's (the paper's
b_trig = 0, "silence indicates an inactive trigger").

TDMA (`schedule` given): the runtime owns the tag's slot field of data-plane messages ("data"
and "cons"; control traffic is not scheduled). A node sends on its outgoing links in slot order,
each message stamped with its link's colour; a receiver checks every message's slot against the
colour of that link in its own schedule, counts a difference in `slot_mismatches`, and files the
message under the protocol's tag (slot 0). An exchange returns only once every neighbour's
message is here, so no node sends step j+1 before it holds all of step j. After each exchange,
`on_frame` gets the payload bytes that crossed each of this node's links (the virtual clock).

Directed and time-varying graphs: `neighbors` are every node this one may ever exchange with
(the union of a graph schedule's arcs, topologies/schedules.py), the links it connects and
admits messages on. The runtime sets each round's arcs with `set_round_links` before the round:
from then on the data plane's `broadcast`, `exchange`, `exchange_each` and `exchange_optional`
send to the round's out-neighbours and gather from its in-neighbours (for one undirected graph
both are `neighbors`, the default); `barrier`, `end_round` and `close` stay over every link.

Timeouts: every receive (one neighbour or all) has one deadline, `recv_timeout_s` after the call;
messages that are refused or meant for other tags do not extend it. `PeerTimeout` names the
missing neighbours. A Comm and its transport are used by one thread only.

Failures: once the runtime sets `liveness` (dfl_node/transports/liveness.py), a wait also ends
when a neighbour it waits for stops answering heartbeats past the deadline: `PeerDead` names it, or,
with `tolerate_deaths`, the neighbour joins `suspects` and every wait of this node skips it from
then on (an exchange returns without it; `exchange_optional` reports it as silent). Which
suspects the mesh drops, and from which round, the runtime agrees on (dfl_node/runner/membership.py)
and applies with `drop_neighbors`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch

from dfl_config.errors import DflMeshError
from dfl_node.comm.received import ReceivedTensors
from dfl_node.ledgers.traffic import Ledger
from dfl_node.netsim.tdma import Link, TdmaSchedule
from dfl_node.transports.base import FORGED_PEER, Transport, TransportError
from dfl_node.transports.liveness import PeerDead, PeerLiveness
from dfl_node.wire.codec import DTYPES, Frame, Message, WireError, WireLimits
from dfl_node.wire.compact import Outgoing
from dfl_node.wire.session import Session
from dfl_node.wire.tags import Tag

DEFAULT_WINDOW = 2
# numpy's `dtype.name` is Python code (microseconds a call); every message checks each tensor's
_DTYPE_NAMES = {np.dtype(name): name for name in DTYPES}
HELLO_PHASE = "hello"
BYE_PHASE = "bye"
ROUND_END_PHASE = "round-end"  # `end_round`'s barrier
END_OF_STEP = "end"  # exchange_optional's marker phase is f"{phase}/{END_OF_STEP}"
LIVENESS_POLL_S = 0.2  # how often a wait looks at the liveness of the neighbours it waits for

Tensors = Mapping[str, torch.Tensor | np.ndarray]
Received = dict[str, torch.Tensor]
Layout = tuple[str, tuple[int, ...]]
Validator = Callable[[Mapping[str, np.ndarray]], None]
FrameHook = Callable[[Mapping[Link, int]], None]


class PeerTimeout(TimeoutError, DflMeshError):
    """Expected messages did not arrive within the receive timeout."""

    def __init__(self, src: int, tag: Tag, missing: tuple[int, ...] = ()) -> None:
        self.src = src
        self.tag = tag
        self.missing = missing or (src,)
        super().__init__(f"no message {tag} from node(s) {list(self.missing)} before timeout")


@dataclass(frozen=True)
class _Outgoing:
    prepared: Outgoing  # the message in every form a destination may need (wire/compact.py)
    message: Message  # as a receiver will decode it (sizes for the ledger)


class Comm:
    def __init__(
        self,
        node_id: int,
        neighbors: Sequence[int],
        transport: Transport,
        limits: WireLimits,
        ledger: Ledger,
        recv_timeout_s: float = 60.0,
        schemas: Mapping[str, Mapping[str, Layout]] | None = None,
        *,
        window: int = DEFAULT_WINDOW,
        schedule: TdmaSchedule | None = None,
        on_frame: FrameHook | None = None,
        resume_every: int = 0,
    ) -> None:
        if node_id in neighbors:
            raise ValueError(f"node {node_id} cannot be its own neighbour")
        self.node_id = node_id
        self.neighbors = tuple(sorted(set(neighbors)))
        self.out_neighbors = self.neighbors  # the round's (set_round_links)
        self.in_neighbors = self.neighbors
        self.transport = transport
        self.limits = limits
        self.ledger = ledger
        self.recv_timeout_s = recv_timeout_s
        self.window = window
        self._round = 0
        self._inbox: dict[tuple[int, Tag], Received] = {}
        self.received = ReceivedTensors()
        self._consumed: set[tuple[int, Tag]] = set()
        self._barriers = 0
        self._closed = False
        self._schemas: dict[str, dict[str, Layout]] = {}
        self._validators: dict[str, Validator] = {}
        self.schedule = schedule
        self._on_frame = on_frame
        # The wire's layout definitions start afresh at every round a run may resume from, so
        # a resumed node sends exactly the bytes an uninterrupted one does (wire/session.py).
        self._wire = Session(limits)
        self.resume_every = resume_every
        self._send_order = schedule.send_order(node_id) if schedule else []
        self._receive_slots = schedule.receive_slots(node_id) if schedule else {}
        if schedule and sorted(dst for _, dst in self._send_order) != list(self.neighbors):
            raise ValueError(f"node {node_id}: the TDMA schedule's links are not its neighbours")
        self.slot_mismatches = 0
        self.liveness: PeerLiveness | None = None
        self.tolerate_deaths = False
        self.suspects: set[int] = set()
        for phase, schema in (schemas or {}).items():
            self.set_schema(phase, schema)

    @property
    def round(self) -> int:
        """The node's current round; the caller sets it at the start of every round."""
        return self._round

    @round.setter
    def round(self, value: int) -> None:
        self._round = value
        if self.resume_every and value % self.resume_every == 0:
            self._wire.restart()
        floor = value - self.window
        for key in [key for key in self._inbox if key[1].round < floor]:
            del self._inbox[key]
            self.ledger.record_rejected("expired")
        # Older tags are refused as stale anyway, so their duplicate record can go.
        self._consumed = {key for key in self._consumed if key[1].round >= floor}

    def set_schema(self, phase: str, schema: Mapping[str, Layout]) -> None:
        """Require messages of `phase` to hold exactly these tensors: name -> (dtype, shape)."""
        layouts = {name: (dtype, tuple(shape)) for name, (dtype, shape) in schema.items()}
        unknown = {dtype for dtype, _ in layouts.values()} - DTYPES
        if unknown:
            raise ValueError(f"schema {phase!r}: unknown dtypes {sorted(unknown)}")
        self._schemas[phase] = layouts
        self._recheck_buffered(phase)

    def set_validator(self, phase: str, validator: Validator) -> None:
        """Check every message of `phase` with `validator` (after the schema, if any).

        For payloads whose shapes vary per message (compressed tensors), which an exact-shape
        schema cannot describe. The validator gets the decoded arrays (and must not modify
        them); it raises ValueError to refuse them: the message is dropped and counted as
        "schema_mismatch". Outgoing messages of the phase are checked the same way, at the
        sender, and messages of the phase buffered before the call are checked at once.
        """
        self._validators[phase] = validator
        self._recheck_buffered(phase)

    def set_round_links(self, out_neighbors: Sequence[int], in_neighbors: Sequence[int]) -> None:
        """Whom the data plane sends to and gathers from until the next call (this round's
        arcs, from the plan: both ends know them without a message)."""
        out, into = tuple(sorted(set(out_neighbors))), tuple(sorted(set(in_neighbors)))
        strangers = sorted(set(out + into) - set(self.neighbors))
        if strangers:
            raise ValueError(f"node {self.node_id}: {strangers} are not among its links")
        if self.schedule is not None and (out, into) != (self.neighbors, self.neighbors):
            raise ValueError(f"node {self.node_id}: a TDMA schedule sends on every link")
        self.out_neighbors, self.in_neighbors = out, into

    def send(self, dst: int, tag: Tag, tensors: Tensors) -> None:
        self._check_neighbor(dst)
        if self.schedule is not None and self._scheduled(tag):
            tag = replace(tag, slot=self.schedule.colour((self.node_id, dst)))
        self._post(dst, self._outgoing(tag, tensors))
        self._settle()

    def broadcast(self, tag: Tag, tensors: Tensors) -> None:
        """Send the same tensors to every neighbour (one encoding; under TDMA one encoding per
        slot, in slot order)."""
        self._broadcast(tag, tensors)
        self._settle()

    def _broadcast(self, tag: Tag, tensors: Tensors, to: Sequence[int] | None = None) -> int:
        """Send to the round's out-neighbours (or `to`); the payload bytes of the message."""
        if not self._scheduled(tag):
            outgoing = self._outgoing(tag, tensors)
            for dst in self.out_neighbors if to is None else to:
                self._post(dst, outgoing)
            return outgoing.message.payload_bytes
        if tag.slot != 0:
            raise ValueError(f"node {self.node_id}: under TDMA the runtime sets the slot of {tag}")
        by_slot: dict[int, _Outgoing] = {}
        for slot, dst in self._send_order:
            if slot not in by_slot:
                by_slot[slot] = self._outgoing(replace(tag, slot=slot), tensors)
            self._post(dst, by_slot[slot])
        return next(iter(by_slot.values())).message.payload_bytes if by_slot else 0

    def recv(self, src: int, tag: Tag) -> Received:
        """Block until neighbour `src`'s message `tag` is here; PeerTimeout after the timeout."""
        self._check_neighbor(src)
        got = self._await((src,), tag)
        if src not in got:
            raise PeerDead(self.node_id, (src,), self._deadline_s())
        return got[src]

    def gather_neighbors(self, tag: Tag) -> dict[int, Received]:
        """Every in-neighbour's message `tag`, keyed and ordered by ascending neighbour id."""
        return self._await(self.in_neighbors, tag)

    def gather(self, sources: Sequence[int], tag: Tag) -> dict[int, Received]:
        """The message `tag` of each of the neighbours `sources`, by ascending id (a subset:
        a weight row's neighbours, or the aggregator of a star)."""
        for src in sources:
            self._check_neighbor(src)
        return self._await(tuple(sorted(set(sources))), tag)

    def exchange(self, tag: Tag, tensors: Tensors) -> dict[int, Received]:
        """Send mine to every out-neighbour, then gather the in-neighbours' (by id)."""
        sent = self._broadcast(tag, tensors)
        theirs = self.gather_neighbors(tag)
        self._settle()
        self._frame_done(tag, sent, theirs)
        return theirs

    def _exchange_every_link(self, tag: Tag, tensors: Tensors) -> dict[int, Received]:
        """A control step with every neighbour, whatever the round's arcs (barrier, close)."""
        self._broadcast(tag, tensors, to=self.neighbors)
        theirs = self._await(self.neighbors, tag)
        self._settle()
        return theirs

    def exchange_each(self, tag: Tag, per_neighbor: Mapping[int, Tensors]) -> dict[int, Received]:
        """Send each neighbour its own tensors, then gather theirs (ordered by neighbour id).

        For messages that differ per link (DSC attaches the weight w_{n,i} meant for receiver n);
        under TDMA the sends go out in slot order like a broadcast, and the step is one frame.
        """
        if sorted(per_neighbor) != list(self.out_neighbors):
            raise ValueError(f"node {self.node_id}: exchange_each needs one message per "
                             f"neighbour {list(self.out_neighbors)}, got {sorted(per_neighbor)}")
        order = self._send_order or [(0, dst) for dst in self.out_neighbors]
        sent = {}
        for slot, dst in order:
            outgoing = self._outgoing(replace(tag, slot=slot) if self._scheduled(tag) else tag,
                                      per_neighbor[dst])
            self._post(dst, outgoing)
            sent[dst] = outgoing.message.payload_bytes
        theirs = self.gather_neighbors(tag)
        self._settle()
        self._frame_done(tag, sent, theirs)
        return theirs

    def exchange_optional(self, tag: Tag, tensors: Tensors | None) -> dict[int, Received | None]:
        """Send mine (or nothing, if None) to every neighbour, then end the step with a marker.

        Returns, per neighbour in ascending id, its tensors, or None if it sent nothing (or
        what it sent was refused). Every node of the neighbourhood must call it for `tag`, also
        the silent ones: the markers are what lets a receiver stop waiting without a timeout.
        """
        sent = self._broadcast(tag, tensors) if tensors is not None else 0
        marker = Tag("ctrl", tag.round, f"{tag.phase}/{END_OF_STEP}", tag.step, tag.slot)
        self.exchange(marker, {})
        theirs = {
            src: self._take((src, tag)) if (src, tag) in self._inbox else None
            for src in self.in_neighbors
        }
        self._frame_done(tag, sent, theirs)
        return theirs

    def barrier(self, tag_round: int = -1) -> None:
        """Neighbourhood barrier: returns once every neighbour has reached the same barrier.

        `tag_round` < 0 means the current round. Barriers are numbered in call order, so every
        node must call them in the same sequence (as the shared schedule does).
        """
        round_ = self._round if tag_round < 0 else tag_round
        tag = Tag("ctrl", round_, HELLO_PHASE, step=self._barriers)
        self._barriers += 1
        self._exchange_every_link(tag, {})

    def end_round(self) -> None:
        """A barrier over every link, tagged by the round alone: its messages are the same
        bytes in a run resumed at any round (`barrier`'s count of earlier barriers is not)."""
        self._exchange_every_link(Tag("ctrl", self._round, ROUND_END_PHASE), {})

    def close(self) -> None:
        """Closing barrier, then transport close.

        A neighbour's "bye" is the last message it sends us and each connection keeps its
        order, so once every bye is here nothing addressed to this node is still in flight.
        Like `barrier`, it is collective: neighbours close at the same `comm.round`.
        """
        if self._closed:
            return
        self._closed = True
        try:
            self._exchange_every_link(Tag("ctrl", self._round, BYE_PHASE), {})
        finally:
            if self._inbox:
                self.ledger.record_rejected("unconsumed", len(self._inbox))
            self._inbox.clear()
            self.transport.close()

    def drop_neighbors(self, dead: set[int]) -> None:
        """Leave `dead` out of every later exchange (the mesh agreed they are gone); their
        buffered messages are discarded and counted as "dead_peer"."""
        self.neighbors = tuple(j for j in self.neighbors if j not in dead)
        self.out_neighbors = tuple(j for j in self.out_neighbors if j not in dead)
        self.in_neighbors = tuple(j for j in self.in_neighbors if j not in dead)
        self._send_order = [(slot, dst) for slot, dst in self._send_order if dst not in dead]
        self.suspects -= dead
        for key in [key for key in self._inbox if key[0] in dead]:
            del self._inbox[key]
            self.ledger.record_rejected("dead_peer")
        for peer in sorted(dead):
            self.transport.drop_peer(peer)
            self._wire.drop(peer)

    def _scheduled(self, tag: Tag) -> bool:
        return self.schedule is not None and not tag.is_control

    def _frame_done(self, tag: Tag, sent: int | Mapping[int, int],
                    theirs: Mapping[int, Received | None]) -> None:
        """Tell the clock what crossed this node's links in a scheduled exchange (`sent`: the
        payload bytes of the one broadcast message, or per neighbour)."""
        if self._on_frame is None or not self._scheduled(tag):
            return
        sizes = {(self.node_id, dst): sent if isinstance(sent, int) else sent[dst]
                 for dst in self.neighbors}
        for src, tensors in theirs.items():
            received = sum(t.numel() * t.element_size() for t in (tensors or {}).values())
            sizes[(src, self.node_id)] = received
        self._on_frame(sizes)

    def _check_neighbor(self, peer: int) -> None:
        if peer not in self.neighbors:
            raise ValueError(f"node {self.node_id}: {peer} is not a neighbour")

    def _outgoing(self, tag: Tag, tensors: Tensors) -> _Outgoing:
        """Encode views of the tensors, then check the frames exactly as a receiver will."""
        if abs(tag.round - self._round) > self.window:
            raise ValueError(
                f"node {self.node_id}: {tag} is outside the window of round {self._round}"
                "; set comm.round first"
            )
        views = {name: _wire_view(t) for name, t in tensors.items()}
        try:
            prepared, message = self._wire.encode(self.node_id, tag, views)
            self._check_payload(tag.phase, message.tensors)
        except WireError as err:
            raise ValueError(f"node {self.node_id}: peers would refuse {tag}: {err}") from err
        return _Outgoing(prepared, message)

    def _post(self, dst: int, outgoing: _Outgoing) -> None:
        frames, framing_bytes = self._wire.frames(dst, outgoing.prepared)
        self.transport.send(dst, frames)
        message = outgoing.message
        self.ledger.record_send(dst, message.tag, message.payload_bytes, framing_bytes)

    def _await(self, sources: Sequence[int], tag: Tag) -> dict[int, Received]:
        """Every source's message `tag`; suspects (tolerate_deaths) only if already here."""
        deadline = time.monotonic() + self.recv_timeout_s
        while missing := tuple(src for src in sources
                               if (src, tag) not in self._inbox and src not in self.suspects):
            if time.monotonic() >= deadline:
                raise PeerTimeout(missing[0], tag, missing)
            arrival = self.transport.recv(self._poll_s(deadline))
            if arrival is not None:
                self._admit(*arrival)
            self._check_alive(missing)
        return {src: self._take((src, tag)) for src in sources if (src, tag) in self._inbox}

    def _settle(self) -> None:
        """Return once the transport reads none of the tensors sent, so that the caller may
        change them. A neighbour that stops answering meanwhile ends it like a receive does
        (PeerDead, or, with tolerate_deaths, a suspect whose queue is discarded); one that
        answers but does not take the data within the receive timeout is a TransportError."""
        deadline = time.monotonic() + self.recv_timeout_s
        while pending := self.transport.flush(self._poll_s(deadline)):
            self._check_alive(pending)
            for peer in self.suspects.intersection(pending):
                self.transport.discard(peer)
                self._wire.lost(peer)
            if time.monotonic() >= deadline:
                raise TransportError(f"node {self.node_id}: neighbours {list(pending)} took no "
                                     f"data for {self.recv_timeout_s} s")

    def _poll_s(self, deadline: float) -> float:
        """How long one wait may block: until the deadline, or the next liveness look."""
        remaining = max(deadline - time.monotonic(), 0.0)
        return remaining if self.liveness is None else min(remaining, LIVENESS_POLL_S)

    def _check_alive(self, waited_for: Sequence[int]) -> None:
        """PeerDead for neighbours waited for that stopped answering, or, with
        tolerate_deaths, make them suspects."""
        liveness = self.liveness
        if liveness is None:
            return
        dead = tuple(src for src in waited_for if liveness.dead(src))
        if not dead:
            return
        if not self.tolerate_deaths:
            raise PeerDead(self.node_id, dead, self._deadline_s(),
                           max(liveness.silent_intervals(src) for src in dead))
        self.suspects.update(dead)

    def _deadline_s(self) -> float:
        return self.liveness.deadline_s if self.liveness is not None else self.recv_timeout_s

    def _take(self, key: tuple[int, Tag]) -> Received:
        self._consumed.add(key)
        return self._inbox.pop(key)

    def _admit(self, peer: int, frames: list[Frame]) -> None:
        try:
            message = self._accepted(peer, frames)
        except WireError as err:
            self.ledger.record_rejected(err.reason)
            return
        self.ledger.record_recv(
            message.src, message.tag, message.payload_bytes, message.framing_bytes
        )
        self._inbox[(message.src, message.tag)] = self.received.tensors(message.tensors,
                                                                        message.tensor_frames)

    def _accepted(self, peer: int, frames: list[Frame]) -> Message:
        """The decoded message if it passes every check; WireError(reason) otherwise."""
        if peer == FORGED_PEER:
            raise WireError("curve_sender_mismatch", "routing id is not the key's node")
        if peer not in self.neighbors:
            raise WireError("not_neighbour", str(peer))
        message = self._wire.decode(peer, frames)
        if message.src != peer:
            raise WireError("src_mismatch", f"header {message.src}, connection {peer}")
        if abs(message.tag.round - self._round) > self.window:
            raise WireError("stale_or_future", f"round {message.tag.round} at {self._round}")
        self._check_payload(message.tag.phase, message.tensors)
        if self._scheduled(message.tag):
            if message.tag.slot != self._receive_slots.get(peer):
                self.slot_mismatches += 1
            message = replace(message, tag=replace(message.tag, slot=0))
        if (peer, message.tag) in self._inbox or (peer, message.tag) in self._consumed:
            raise WireError("duplicate", str(message.tag))
        return message

    def _check_payload(self, phase: str, tensors: Mapping[str, np.ndarray]) -> None:
        """The phase's schema and validator, if set; WireError("schema_mismatch") otherwise."""
        schema = self._schemas.get(phase)
        layouts = {name: (_DTYPE_NAMES.get(a.dtype) or a.dtype.name, a.shape)
                   for name, a in tensors.items()}
        if schema is not None and layouts != schema:
            raise WireError("schema_mismatch", phase)
        validator = self._validators.get(phase)
        if validator is not None:
            try:
                validator(tensors)
            except ValueError as err:
                raise WireError("schema_mismatch", f"{phase}: {err}") from err

    def _recheck_buffered(self, phase: str) -> None:
        """Apply a phase's new rules to messages admitted before they were set, so that a fast
        (or hostile) neighbour cannot slip a message past a schema set just before it is read.
        A message dropped here was counted as received and is now counted as rejected too."""
        for key in [key for key in self._inbox if key[1].phase == phase]:
            try:
                self._check_payload(phase, {n: t.numpy() for n, t in self._inbox[key].items()})
            except WireError:
                del self._inbox[key]
                self.ledger.record_rejected("schema_mismatch")


def _wire_view(value: torch.Tensor | np.ndarray) -> np.ndarray:
    """The tensor's bytes as a C-contiguous CPU array: a view when it already is one (the
    usual case), a copy otherwise (another device, a strided view)."""
    if isinstance(value, torch.Tensor):
        if value.device.type == "cpu" and value.is_contiguous():
            return (value.detach() if value.requires_grad else value).numpy()
        return value.detach().to("cpu", memory_format=torch.contiguous_format).numpy()
    if isinstance(value, np.ndarray):
        return np.ascontiguousarray(value)
    raise TypeError(f"tensors must be torch.Tensor or numpy.ndarray, got {type(value).__name__}")
