"""Every communication shape of a synchronous step, with the runtime's duties done for the
protocol.

A protocol names a phase once, `Exchange(ctx, phase, ...)`, and sends on it in the shape its
paper writes:

- `ex(r, payload)`: to every out-neighbour, theirs back from every in-neighbour;
- `ex.each(r, {j: payload_j})`: a payload of its own to each out-neighbour (DSC's w_{n,i});
- `ex.optional(r, payload or None)`: event-triggered, a silent node sends nothing (DMFL-SQ);
- `ex.post(r, payload, to=...)`, then `.gather()` on what it returns: to a subset, local work,
  then theirs (SSD-FL's weight rows);
- `ex.send(r, payload, to=...)`: to one node, a subset, or every out-neighbour (a broadcast);
- `ex.gather(r, frm=...)`: from a set of nodes, every in-neighbour by default.
`Star` (star.py) makes an aggregator's round of `send` and `gather`.

What every shape does that a protocol used to do by hand, and could forget without an error:
- the schema: the first payload sent on the phase fixes its tensors' names, dtypes and shapes
  for every message of the phase, sent or received; `validator=` instead where shapes vary per
  message, `schema=` where a node receives a phase it never sends. A gather on a phase that
  none of them declared fails before it waits.
- the formula ledger: every link a payload is sent on is charged the payload's bits; a payload
  with no bits is an error (`require_bits`). A silent optional send charges `silence` on every
  link (the trigger term; nothing by default).
- the clock: every call is one synchronous step and ends with the clock's advance, by the
  local steps `learner` counted since the previous step and the largest message this node sent
  in it (0 if none; `clock_bytes=` fixes the size for protocols whose paper times the worst
  case; `clock="formula"` takes the payload's formula bits / 8). Under TDMA the comm layer
  times the frame itself and only the compute is added.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

import torch

from dfl_node.comm.channel import Comm, Layout, Received, Validator
from dfl_node.ledgers.formula import FormulaLedger
from dfl_node.netsim.virtual_clock import VirtualClock
from dfl_node.wire.tags import Tag
from protocols.sdk.learning import LocalSGD
from protocols.sdk.payload import Payload, require_bits

ClockSize = Literal["wire", "formula"]


class StepContext(Protocol):
    """What the shapes use of a node's context (`NodeContext` has it): the node's Comm, its
    formula ledger and its virtual clock."""

    @property
    def comm(self) -> Comm: ...

    @property
    def formula(self) -> FormulaLedger: ...

    @property
    def clock(self) -> VirtualClock: ...


class Exchange:
    """One phase's messages in any shape; `exchange(r, payload)` is the neighbour exchange."""

    def __init__(self, ctx: StepContext, phase: str, *, learner: LocalSGD | None = None,
                 kind: str = "data", schema: Mapping[str, Layout] | None = None,
                 validator: Validator | None = None, clock_bytes: int | None = None,
                 clock: ClockSize = "wire", silence: Mapping[str, int] | None = None) -> None:
        """`learner`: whose counted steps are the compute of each step (none: no compute);
        `kind`: the tags' kind ("data", or "cons" for consensus sub-rounds);
        `schema` / `validator`: declared up front (comm.set_schema / set_validator);
        `clock_bytes`: the size the clock charges per step, instead of the messages' own;
        `silence`: the formula bits a silent optional send charges on every link."""
        self.ctx, self.phase, self.kind, self.learner = ctx, phase, kind, learner
        self.clock_bytes, self.clock = clock_bytes, clock
        self.silence = dict(silence or {})
        self._declared = schema is not None or validator is not None
        if schema is not None:
            ctx.comm.set_schema(phase, schema)
        if validator is not None:
            ctx.comm.set_validator(phase, validator)

    @property
    def out_neighbours(self) -> tuple[int, ...]:
        """Whom a message to every neighbour goes to this round: the round's out-neighbours
        (on a directed or time-varying topology the runtime sets them from the plan each
        round; else every neighbour)."""
        return tuple(self.ctx.comm.out_neighbors)

    def tag(self, r: int, step: int = 0) -> Tag:
        return Tag(self.kind, r, self.phase, step=step)

    # The shapes.

    def __call__(self, r: int, payload: Payload, *, step: int = 0,
                 compute_steps: int | None = None,
                 senders_bytes: Mapping[int, int] | None = None) -> dict[int, Received]:
        """To every out-neighbour, theirs back by ascending id. `senders_bytes`: under TDMA,
        the payload bytes each node of the mesh sends in this frame, where they differ by
        sender (the clock charges the links this node does not see with them)."""
        links = self._sending(payload)
        if senders_bytes is not None:
            self.ctx.clock.expect(senders_bytes)
        theirs = self.ctx.comm.exchange(self.tag(r, step), payload.tensors)
        self._charge(r, dict.fromkeys(links, payload))
        self._step(dict.fromkeys(links, payload), compute_steps)
        return theirs

    def each(self, r: int, payloads: Mapping[int, Payload], *, step: int = 0,
             compute_steps: int | None = None) -> dict[int, Received]:
        """A payload of its own to each out-neighbour (one per neighbour), theirs back."""
        for payload in payloads.values():
            self._sending(payload)
        theirs = self.ctx.comm.exchange_each(self.tag(r, step),
                                             {j: p.tensors for j, p in payloads.items()})
        self._charge(r, payloads)
        self._step(payloads, compute_steps)
        return theirs

    def optional(self, r: int, payload: Payload | None, *, step: int = 0,
                 compute_steps: int | None = None) -> dict[int, Received | None]:
        """The payload to every out-neighbour, or nothing (None); per in-neighbour, its
        tensors or None where it sent nothing. Every node of the phase calls it every step."""
        if payload is None:
            self._require_declared()
            links = self.out_neighbours
        else:
            links = self._sending(payload)
        theirs = self.ctx.comm.exchange_optional(
            self.tag(r, step), payload.tensors if payload is not None else None)
        if payload is None:
            for j in links:
                self.ctx.formula.charge_all(r, j, self.silence)
            self._step({}, compute_steps)
        else:
            self._charge(r, dict.fromkeys(links, payload))
            self._step(dict.fromkeys(links, payload), compute_steps)
        return theirs

    def post(self, r: int, payload: Payload, to: Iterable[int], *,
             step: int = 0) -> OpenStep:
        """Send to the nodes `to`, in that order, and leave the step open: the protocol works
        while the messages travel, then `.gather()` takes theirs and ends the step."""
        dsts = tuple(to)
        self._sending(payload)
        tag = self.tag(r, step)
        for j in dsts:
            self.ctx.comm.send(j, tag, payload.tensors)
        self._charge(r, dict.fromkeys(dsts, payload))
        return OpenStep(self, tag, dict.fromkeys(dsts, payload))

    def send(self, r: int, payload: Payload, to: int | Iterable[int] | None = None, *,
             step: int = 0, compute_steps: int | None = None) -> None:
        """To one node, the nodes `to`, or every out-neighbour (None: a broadcast); a step
        of its own, nothing back."""
        tag = self.tag(r, step)
        if to is None:
            dsts = self._sending(payload)
            self.ctx.comm.broadcast(tag, payload.tensors)
        else:
            dsts = (to,) if isinstance(to, int) else tuple(to)
            self._sending(payload)
            for j in dsts:
                self.ctx.comm.send(j, tag, payload.tensors)
        self._charge(r, dict.fromkeys(dsts, payload))
        self._step(dict.fromkeys(dsts, payload), compute_steps)

    def gather(self, r: int, frm: Iterable[int] | None = None, *, step: int = 0,
               compute_steps: int | None = None) -> dict[int, Received]:
        """The messages of the nodes `frm` (None: every in-neighbour) by ascending id; a step
        of its own, nothing sent."""
        theirs = self._gather(self.tag(r, step), frm)
        self._step({}, compute_steps)
        return theirs

    # The duties.

    def _sending(self, payload: Payload) -> tuple[int, ...]:
        """Check the payload and declare the phase's schema from it; the out-neighbours."""
        require_bits(payload, self.phase)
        if not self._declared:
            self.ctx.comm.set_schema(self.phase, schema_of(payload.tensors))
            self._declared = True
        return self.out_neighbours

    def _require_declared(self) -> None:
        if not self._declared:
            raise ValueError(f"phase {self.phase!r}: nothing declares the messages to receive: "
                             "send on the phase first, or give Exchange a schema or validator")

    def _gather(self, tag: Tag, frm: Iterable[int] | None) -> dict[int, Received]:
        self._require_declared()
        comm = self.ctx.comm
        return comm.gather_neighbors(tag) if frm is None else comm.gather(tuple(frm), tag)

    def _charge(self, r: int, sent: Mapping[int, Payload]) -> None:
        """The formula ledger: each link a payload was sent on, that payload's bits."""
        for j, payload in sent.items():
            self.ctx.formula.charge_all(r, j, payload.bits)

    def _step(self, sent: Mapping[int, Payload], compute_steps: int | None) -> None:
        """The clock at the step's boundary: the counted compute and the largest message."""
        if compute_steps is None:
            compute_steps = self.learner.take_steps() if self.learner is not None else 0
        if self.clock_bytes is not None:
            size = self.clock_bytes
        else:
            # one payload sent on every link (a broadcast) is sized once
            distinct = {id(p): p for p in sent.values()}.values()
            size = max((p.nbytes if self.clock == "wire" else p.total_bits // 8
                        for p in distinct), default=0)
        self.ctx.clock.sync_step(size, compute_steps)


@dataclass(frozen=True)
class OpenStep:
    """A step whose messages are sent (`Exchange.post`) and whose replies are not yet taken."""

    exchange: Exchange
    tag: Tag
    sent: Mapping[int, Payload]

    def gather(self, frm: Iterable[int] | None = None) -> dict[int, Received]:
        """The replies of the nodes `frm` (default: those sent to), by ascending id; the step
        ends here, with the compute counted since the previous one."""
        ex = self.exchange
        theirs = ex._gather(self.tag, tuple(self.sent) if frm is None else frm)
        ex._step(self.sent, None)
        return theirs


def schema_of(tensors: Mapping[str, torch.Tensor]) -> dict[str, Layout]:
    return {name: (str(t.dtype).removeprefix("torch."), tuple(t.shape))
            for name, t in tensors.items()}

