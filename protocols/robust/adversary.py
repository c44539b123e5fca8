"""Running an adversary: the node's own protocol, with its data poisoned and its messages
rewritten on their way out (docs/design/adversaries.md, step 4).

An adversarial node runs its protocol's code unchanged. `ProtocolNode` (protocols/node_base.py)
installs what the plan says it does, in two places, so that its messages stay well formed (the
phase's schema), charged (the formula ledger by `Exchange`, the wire by the comm) and timed (the
virtual clock) like any other:

- `poisoned`: its training shard with flipped labels or a planted backdoor, a copy computed from
  the plan alone (the backdoor's samples from the stream (seed, node, "adversary/backdoor")), so
  a resumed node computes it again and no checkpoint holds it;
- `AdversarialComm`, around `ctx.comm`: control traffic and consensus sub-rounds pass through;
  the tensors of a data phase are flattened into one vector (its floating-point tensors, in the
  message's order), attacked, and put back into the same tensors, so a schema never changes. A
  per-neighbour attack (dissensus, `per-neighbour`) turns a broadcast into one message per
  out-neighbour; the omniscient attacker (`sees: this-round`) gathers its honest
  in-neighbours' messages of an exchange before it sends its own.

What an attack remembers (the messages it saw last round, silence's round-0 messages) and its
random streams, (seed, node, "adversary/<index>/<kind>"), are the `Adversary`'s
`checkpoint_fields`, which `ProtocolNode` saves under `adversary`, so a resumed adversary goes
on exactly (dfl_mesh.testing's state audit covers them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from dfl_node.comm.channel import Comm, Received, Tensors
from dfl_node.learning.arrays import ImageRows
from dfl_node.learning.seeds import torch_stream
from dfl_node.plan import AdversaryRole, RunPlan
from dfl_node.wire.tags import Tag
from protocols.robust import attacks, poisoning
from protocols.robust.adversary_settings import (
    DATA_KINDS,
    Alie,
    Backdoor,
    Dissensus,
    Gaussian,
    Ipm,
    LabelFlip,
    PerNeighbour,
    Scaled,
    SignFlip,
    behaviours_of,
)

BACKDOOR_STREAM = "adversary/backdoor"
DATA_KIND = "data"


def poisoned(data: Any, behaviours: Sequence[Mapping[str, Any]], seed: int, node_id: int) -> Any:
    """The node's data (shards.NodeData) with its training shard poisoned by the data
    behaviours, in order; a new object: the shared, read-only arrays are only read."""
    x, y = data.x_train, data.y_train
    backdoor_rng: torch.Generator | None = None
    for b in behaviours_of(behaviours):
        if isinstance(b, LabelFlip):
            y = poisoning.flip_labels(torch.from_numpy(np.array(y)), data.classes,
                                      b.mapping).numpy()
        elif isinstance(b, Backdoor):
            backdoor_rng = backdoor_rng or torch_stream(seed, node_id, BACKDOOR_STREAM)
            pixels = x.pixels if isinstance(x, ImageRows) else x
            images, labels = poisoning.backdoor(
                torch.from_numpy(np.array(pixels)), torch.from_numpy(np.array(y)), b.target,
                b.fraction, backdoor_rng, b.size)
            x = (dataclasses.replace(x, pixels=images.numpy()) if isinstance(x, ImageRows)
                 else images.numpy())
            y = labels.numpy()
    return dataclasses.replace(data, x_train=x, y_train=y)


class TensorStore:
    """Named tensors of any dtype and shape kept as one byte tensor and a JSON index, so that
    the checkpoint codec saves and restores them whole (a dict of it restores only the keys a
    freshly built object already has, and what an adversary remembers is keyed by what it saw)."""

    checkpoint_fields = ("index", "data")

    def __init__(self) -> None:
        self.index: list[list[Any]] = []  # [name, offset, dtype, shape], in insertion order
        self.data = torch.empty(0, dtype=torch.uint8)

    def get(self, name: str) -> torch.Tensor | None:
        for key, offset, dtype, shape in self.index:
            if key == name:
                size = int(np.prod(shape, dtype=np.int64)) * _itemsize(dtype)
                raw = self.data[offset:offset + size].clone()
                return raw.view(getattr(torch, dtype)).reshape(shape)
        return None

    def names(self) -> list[str]:
        return [entry[0] for entry in self.index]

    def put(self, items: Mapping[str, torch.Tensor]) -> None:
        """Set these names (replacing what they held), keeping the others."""
        kept = [(name, self.get(name)) for name in self.names() if name not in items]
        entries = [*((n, t) for n, t in kept if t is not None), *items.items()]
        index, chunks, offset = [], [], 0
        for name, tensor in entries:
            raw = tensor.detach().cpu().contiguous().reshape(-1).view(torch.uint8)
            index.append([name, offset, str(tensor.dtype).removeprefix("torch."),
                          list(tensor.shape)])
            chunks.append(raw)
            offset += raw.numel()
        self.index = index
        self.data = torch.cat(chunks) if chunks else torch.empty(0, dtype=torch.uint8)


def _itemsize(dtype: str) -> int:
    return torch.empty(0, dtype=getattr(torch, dtype)).element_size()


def flat_floats(tensors: Tensors) -> torch.Tensor:
    """The message's floating-point tensors as one float64 vector, in the message's order (the
    vector every attack acts on; float64 holds float32 and float16 values exactly)."""
    parts = [torch.as_tensor(t).detach().reshape(-1).to(torch.float64)
             for t in tensors.values() if _is_float(t)]
    return torch.cat(parts) if parts else torch.empty(0, dtype=torch.float64)


def with_floats(tensors: Tensors, vector: torch.Tensor) -> dict[str, Any]:
    """The message with its floating-point tensors taken from `vector` (each in its own dtype,
    shape and kind, torch or numpy), the others as they were."""
    out: dict[str, Any] = {}
    offset = 0
    for name, t in tensors.items():
        if not _is_float(t):
            out[name] = t
            continue
        n = int(np.prod(t.shape, dtype=np.int64))
        part = vector[offset:offset + n].reshape(tuple(t.shape))
        offset += n
        if isinstance(t, np.ndarray):
            out[name] = part.numpy().astype(t.dtype)
        else:
            out[name] = part.to(dtype=t.dtype, device=t.device)
    return out


def _is_float(t: Any) -> bool:
    if isinstance(t, np.ndarray):
        return bool(np.issubdtype(t.dtype, np.floating))
    return bool(torch.is_tensor(t) and t.is_floating_point())


def _step(tag: Tag) -> str:
    """A data step's name without its round: what `previous-round` compares across rounds."""
    return f"{tag.phase}/{tag.step}"


class Adversary:
    """One adversarial node's behaviours and everything they remember between rounds."""

    checkpoint_fields = ("generators", "memory")

    def __init__(self, role: AdversaryRole, plan: RunPlan, node_id: int,
                 model: torch.nn.Module) -> None:
        self.node_id = node_id
        self.plan = plan
        self.behaviours = [b for b in behaviours_of(role.behaviours) if b.kind not in DATA_KINDS]
        self.adversaries = frozenset((node_id, *role.colluders))
        self.silent = any(b.kind == "silent" for b in self.behaviours)
        # one stream per behaviour that draws (Gaussian noise), named by its place in the list
        self.generators: dict[str, torch.Generator] = {}
        for index, b in enumerate(self.behaviours):
            for name in _stream_names(index, b):
                self.generators[name] = torch_stream(plan.seed, node_id, name)
        self.memory = TensorStore()
        sees = {getattr(b, "sees", "own") for b in _flat(self.behaviours)}
        # what it saw last round: for previous-round, and for this-round in the steps where it
        # cannot wait for its neighbours first (a broadcast, a send, an optional step)
        self.remembers = bool(sees - {"own"})
        self.omniscient = "this-round" in sees
        # silence's frozen model: the node's round-0 model, put back after every round
        self.initial = {k: v.detach().clone() for k, v in model.state_dict().items()}

    @property
    def per_destination(self) -> bool:
        return any(isinstance(b, PerNeighbour | Dissensus) for b in self.behaviours)

    def freeze(self, model: torch.nn.Module) -> None:
        """Silence: the model back at round 0 (it never trains)."""
        model.load_state_dict(self.initial)

    # -- what it sees ------------------------------------------------------------------------

    def saw(self, tag: Tag, theirs: Mapping[int, Received | None]) -> None:
        """Remember the in-neighbours' messages of a data step, for next round's attacks."""
        if not self.remembers or tag.kind != DATA_KIND:
            return
        got = {f"seen/{_step(tag)}/{peer}": flat_floats(msg) for peer, msg in theirs.items()
               if msg is not None}
        if got:
            self.memory.put(got)

    def seen(self, tag: Tag) -> dict[int, torch.Tensor]:
        """The in-neighbours' last messages of this step (previous round), by ascending id."""
        prefix = f"seen/{_step(tag)}/"
        out = {int(name[len(prefix):]): self.memory.get(name) for name in self.memory.names()
               if name.startswith(prefix)}
        return {peer: v for peer, v in sorted(out.items()) if v is not None}

    # -- what it sends -----------------------------------------------------------------------

    def message(self, tag: Tag, tensors: Tensors, dst: int | None,
                now: Mapping[int, torch.Tensor] | None = None) -> dict[str, Any]:
        """What to send instead of `tensors`: to `dst` alone, or (None) to every destination
        (then no per-neighbour attack applies). `now`: the honest in-neighbours' messages of
        this step (flattened), for `sees: this-round`."""
        if self.silent:
            return self._frozen(tag, tensors, "*" if dst is None else str(dst))
        return with_floats(tensors, self._attacked(tag, flat_floats(tensors), dst, now))

    def _frozen(self, tag: Tag, tensors: Tensors, key: str) -> dict[str, Any]:
        """Silence: the node's first message of this step, every round."""
        prefix = f"frozen/{_step(tag)}/{key}/"
        names = [n for n in self.memory.names() if n.startswith(prefix)]
        if not names:
            self.memory.put({prefix + name: torch.as_tensor(t).detach().clone()
                             for name, t in tensors.items()})
            return dict(tensors)
        out: dict[str, Any] = {}
        for name, t in tensors.items():
            frozen = self.memory.get(prefix + name)
            out[name] = frozen.numpy() if isinstance(t, np.ndarray) and frozen is not None \
                else frozen
        return out

    def _attacked(self, tag: Tag, own: torch.Tensor, dst: int | None,
                  now: Mapping[int, torch.Tensor] | None) -> torch.Tensor:
        vector = own
        for index, b in enumerate(self.behaviours):
            if isinstance(b, PerNeighbour):
                if dst is not None and dst in b.to:
                    stream = f"adversary/{index}/per-neighbour/{dst}"
                    vector = self._apply(b.to[dst], stream, tag, own, vector, dst, now)
            else:
                vector = self._apply(b, f"adversary/{index}/{b.kind}", tag, own, vector, dst,
                                     now)
        return vector

    def _view(self, tag: Tag, sees: str,
              now: Mapping[int, torch.Tensor] | None) -> Mapping[int, torch.Tensor]:
        """The in-neighbours' messages an attack reads: this step's (this-round, where the
        comm gathered them first), else last round's."""
        return now if sees == "this-round" and now is not None else self.seen(tag)

    def _apply(self, b: Any, stream: str, tag: Tag, own: torch.Tensor, vector: torch.Tensor,
               dst: int | None, now: Mapping[int, torch.Tensor] | None) -> torch.Tensor:
        """One model attack on `vector` (what the behaviours before it made of `own`)."""
        if isinstance(b, SignFlip):
            return attacks.sign_flip(vector)
        if isinstance(b, Scaled):
            return attacks.scaled(vector, b.factor)
        if isinstance(b, Gaussian):
            centre = vector if b.centre == "sent" else torch.zeros_like(vector)
            return attacks.gaussian(centre, b.std, self.generators[stream])
        honest = self._honest(own, b.sees, self._view(tag, b.sees, now))
        if isinstance(b, Alie):
            if len(honest) < 2:  # nothing seen yet (round 0): the honest message
                return vector
            z = b.z if b.z is not None else attacks.alie_z(len(self.plan.clients),
                                                           len(self.adversaries))
            return attacks.alie(honest, z)
        if isinstance(b, Ipm):
            return attacks.ipm(honest, b.epsilon)
        if isinstance(b, Dissensus) and dst is not None:
            return self._dissensus(b, tag, dst, vector, self._view(tag, b.sees, now))
        return vector

    def _honest(self, own: torch.Tensor, sees: str,
                view: Mapping[int, torch.Tensor]) -> list[torch.Tensor]:
        """The honest models an attack estimates from: its own, then the non-adversarial
        in-neighbours' it sees, by ascending id."""
        if sees == "own":
            return [own]
        return [own, *(view[peer] for peer in sorted(view)
                       if peer not in self.adversaries and view[peer].shape == own.shape)]

    def _dissensus(self, b: Dissensus, tag: Tag, target: int, vector: torch.Tensor,
                   seen: Mapping[int, torch.Tensor]) -> torch.Tensor:
        """He et al.'s attack on `target` (i): x_i - eps sum_j W_ij (x_j - x_i) / delta_i over
        the honest j of i's row whose message this node sees; delta_i the weight of i's
        adversarial neighbours. Without i's model (round 0 of previous-round), the honest
        message."""
        x_i = seen.get(target)
        if x_i is None or x_i.shape != vector.shape:
            return vector
        plan = self.plan
        row = plan.weight_row(target) if plan.round_graphs is None else plan.weight_row(
            target, tag.round)
        delta = sum(w for j, w in row.items() if j in self.adversaries)
        honest = [(j, w) for j, w in row.items()
                  if j != target and j not in self.adversaries and j in seen]
        if delta <= 0:
            return vector
        return attacks.dissensus(x_i, [seen[j] for j, _ in honest], [w for _, w in honest],
                                 delta, b.epsilon)


def _flat(behaviours: Sequence[Any]) -> list[Any]:
    """The behaviours with a per-neighbour map's attacks in its place."""
    out: list[Any] = []
    for b in behaviours:
        out += [b.to[j] for j in sorted(b.to)] if isinstance(b, PerNeighbour) else [b]
    return out


def _stream_names(index: int, b: Any) -> list[str]:
    if isinstance(b, Gaussian):
        return [f"adversary/{index}/{b.kind}"]
    if isinstance(b, PerNeighbour):
        return [f"adversary/{index}/per-neighbour/{j}" for j in sorted(b.to)
                if isinstance(b.to[j], Gaussian)]
    return []


class AdversarialComm:
    """`ctx.comm` of an adversarial node: the node's own Comm, whose data-phase sends carry
    the adversary's messages. Everything else (control traffic, consensus sub-rounds, the
    ledger, the round, the links) is the wrapped comm's."""

    def __init__(self, inner: Comm, adversary: Adversary) -> None:
        object.__setattr__(self, "_inner", inner)
        object.__setattr__(self, "_adversary", adversary)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._inner, name, value)  # the runtime restores counters through ctx.comm

    def _each(self) -> bool:
        """Whether a data step sends one message per out-neighbour."""
        return self._adversary.per_destination and not self._adversary.silent

    def exchange(self, tag: Tag, tensors: Tensors) -> dict[int, Received]:
        if tag.kind != DATA_KIND:
            return self._inner.exchange(tag, tensors)
        if self._adversary.omniscient and not self._adversary.silent:
            return self._omniscient(tag, tensors)
        if self._each():
            theirs = self._inner.exchange_each(tag, {
                dst: self._adversary.message(tag, tensors, dst)
                for dst in self._inner.out_neighbors})
        else:
            theirs = self._inner.exchange(tag, self._adversary.message(tag, tensors, None))
        self._adversary.saw(tag, theirs)
        return theirs

    def exchange_each(self, tag: Tag, per_neighbor: Mapping[int, Tensors]) -> dict[int, Received]:
        if tag.kind != DATA_KIND:
            return self._inner.exchange_each(tag, per_neighbor)
        if self._adversary.omniscient and not self._adversary.silent:
            return self._omniscient(tag, {}, per_neighbor)
        theirs = self._inner.exchange_each(tag, {
            dst: self._adversary.message(tag, msg, dst) for dst, msg in per_neighbor.items()})
        self._adversary.saw(tag, theirs)
        return theirs

    def _omniscient(self, tag: Tag, tensors: Tensors,
                    per_neighbor: Mapping[int, Tensors] | None = None) -> dict[int, Received]:
        """`sees: this-round`: gather the honest in-neighbours' messages of this step first
        (honest nodes send before they gather, so they do not wait on this node), send what
        they make of them, then gather the other adversaries' (which do the same, so two
        adjacent omniscient adversaries wait only on honest nodes). What it computes depends on
        the set of messages, never on their arrival order. `per_neighbor`: the protocol's own
        message per out-neighbour (an exchange_each), else `tensors` for every one."""
        inner, adversary = self._inner, self._adversary
        honest = [j for j in inner.in_neighbors if j not in adversary.adversaries]
        first = inner.gather(honest, tag)
        now = {j: flat_floats(msg) for j, msg in first.items()}
        if per_neighbor is None and not self._each():
            shared = adversary.message(tag, tensors, None, now)
            out = dict.fromkeys(inner.out_neighbors, shared)
        else:
            out = {dst: adversary.message(tag, tensors if per_neighbor is None
                                          else per_neighbor[dst], dst, now)
                   for dst in inner.out_neighbors}
        for dst, message in out.items():
            inner.send(dst, tag, message)
        rest = inner.gather([j for j in inner.in_neighbors if j in adversary.adversaries], tag)
        theirs = dict(sorted({**first, **rest}.items()))
        adversary.saw(tag, theirs)
        return theirs

    def exchange_optional(self, tag: Tag,
                          tensors: Tensors | None) -> dict[int, Received | None]:
        if tag.kind != DATA_KIND or tensors is None:
            theirs = self._inner.exchange_optional(tag, tensors)
        elif self._adversary.silent:
            theirs = self._inner.exchange_optional(tag, None)  # an optional step: true silence
        elif self._each():
            for dst in self._inner.out_neighbors:
                self._inner.send(dst, tag, self._adversary.message(tag, tensors, dst))
            theirs = self._inner.exchange_optional(tag, None)
        else:
            theirs = self._inner.exchange_optional(
                tag, self._adversary.message(tag, tensors, None))
        self._adversary.saw(tag, theirs)
        return theirs

    def broadcast(self, tag: Tag, tensors: Tensors) -> None:
        if tag.kind != DATA_KIND:
            self._inner.broadcast(tag, tensors)
        elif self._each():
            for dst in self._inner.out_neighbors:
                self._inner.send(dst, tag, self._adversary.message(tag, tensors, dst))
        else:
            self._inner.broadcast(tag, self._adversary.message(tag, tensors, None))

    def send(self, dst: int, tag: Tag, tensors: Tensors) -> None:
        self._inner.send(dst, tag, self._adversary.message(tag, tensors, dst)
                         if tag.kind == DATA_KIND else tensors)

    def recv(self, src: int, tag: Tag) -> Received:
        got = self._inner.recv(src, tag)
        self._adversary.saw(tag, {src: got})
        return got

    def gather(self, sources: Sequence[int], tag: Tag) -> dict[int, Received]:
        theirs = self._inner.gather(sources, tag)
        self._adversary.saw(tag, theirs)
        return theirs

    def gather_neighbors(self, tag: Tag) -> dict[int, Received]:
        theirs = self._inner.gather_neighbors(tag)
        self._adversary.saw(tag, theirs)
        return theirs
