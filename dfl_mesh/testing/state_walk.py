"""What a protocol object holds, as values to compare between before and after a round, and
what its checkpoint covers.

The walk starts at the protocol instance and follows attributes, dict entries and list items
to the values a round can change: tensors, numpy arrays, numbers and flags, strings, torch and
numpy generators, modules and optimizers (whole). It does not enter the runtime's objects
(the context with comm, clock, ledgers, plan and data, which the runtime saves itself), the
settings, or functions. Objects of dfl-mesh's runtime and SDK (`dfl_node`, `protocols.sdk`)
declare their own state in `checkpoint_fields` (LocalSGD: its sampler and step count); the walk
enters those fields only, and nothing else of them: what else they hold (an Exchange's
schema, set on its first call) is rebuilt by a resumed node.

Coverage mirrors dfl_node/state/checkpoint_codec.py: the model's parameters and buffers, and
every path in `checkpoint_fields`, where an object that lists fields of its own is saved field
by field and anything else (a tensor, a module, a dict) whole.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import types
from collections import deque
from collections.abc import Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np
import torch
from pydantic import BaseModel
from torch import nn

TRUSTED_MODULES = ("dfl_node.", "protocols.sdk.")
SCALARS = (bool, int, float, complex, str, bytes, type(None), Enum)
NOT_STATE = (type, types.ModuleType, types.FunctionType, types.MethodType,
             types.BuiltinFunctionType, logging.Logger, BaseModel,
             type(threading.Lock()), type(threading.RLock()), threading.Event, threading.Thread)
MAX_DEPTH = 12


@dataclass(frozen=True)
class Leaf:
    """One value of the walk: its kind and digest, where it sits (owner object and key) and
    which objects lead to it."""

    kind: str
    digest: Hashable
    slot: tuple[int, str]
    ancestors: frozenset[int]
    ident: int | None  # the value's own id, for objects saved whole by identity (tensors)


@dataclass
class Coverage:
    """What a checkpoint saves: objects saved whole (by id) and attribute slots (owner, name)."""

    objects: set[int] = field(default_factory=set)
    slots: set[tuple[int, str]] = field(default_factory=set)

    def covers(self, leaf: Leaf) -> bool:
        return (leaf.slot in self.slots or (leaf.ident is not None and leaf.ident in self.objects)
                or not self.objects.isdisjoint(leaf.ancestors))


def snapshot(root: Any, skip: set[int]) -> dict[str, Leaf]:
    """path -> leaf for everything `root` holds, `skip` (ids) left out."""
    out: dict[str, Leaf] = {}
    seen = set(skip)
    for path, leaf in _walk(root, "", (id(root), "<root>"), frozenset(), seen, 0):
        out.setdefault(path, leaf)
    return out


def coverage(proto: Any, model: nn.Module, apart: Iterable[Any] = ()) -> Coverage:
    """What `proto`'s checkpoint (model plus checkpoint_fields) saves; `apart`: objects it
    saves beside them by their own `checkpoint_fields` (an adversary's state)."""
    cov = Coverage()
    cov.objects.add(id(model))
    cov.objects.update(id(m) for m in model.modules())
    cov.objects.update(id(t) for t in model.parameters())
    cov.objects.update(id(t) for t in model.buffers())
    _cover_fields(proto, cov, set())
    for obj in apart:
        _cover_fields(obj, cov, set())
    return cov


def _cover_fields(obj: Any, cov: Coverage, seen: set[int]) -> None:
    if id(obj) in seen:
        return
    seen.add(id(obj))
    for name in getattr(obj, "checkpoint_fields", ()):
        *parents, leaf = name.split(".")
        owner = obj
        for part in parents:
            owner = getattr(owner, part)
        cov.slots.add((id(owner), leaf))
        value = getattr(owner, leaf)
        if _saved_whole(value) or not hasattr(value, "checkpoint_fields"):
            cov.objects.add(id(value))
        else:
            _cover_fields(value, cov, seen)


def _saved_whole(value: Any) -> bool:
    return isinstance(value, nn.Module | torch.optim.Optimizer | torch.Generator | torch.Tensor
                      | np.ndarray | np.random.Generator)


def _walk(value: Any, path: str, slot: tuple[int, str], ancestors: frozenset[int],
          seen: set[int], depth: int) -> Iterator[tuple[str, Leaf]]:
    leaf = _leaf(value)
    if leaf is not None:
        kind, digest = leaf
        ident = None if isinstance(value, SCALARS) else id(value)
        yield path, Leaf(kind, digest, slot, ancestors, ident)
        return
    if isinstance(value, NOT_STATE) or (callable(value) and not hasattr(value, "__dict__")) \
            or id(value) in seen or depth > MAX_DEPTH:
        return
    seen.add(id(value))
    inside = ancestors | {id(value)}
    for key, item in _items(value):
        child = f"{path}.{key}" if path and not key.startswith("[") else f"{path}{key}"
        yield from _walk(item, child, (id(value), key.strip("[]")), inside, seen, depth + 1)


def _items(value: Any) -> Iterator[tuple[str, Any]]:
    """The named parts of a container or an object, in a stable order."""
    if isinstance(value, Mapping):
        for key in value:
            yield f"[{key!r}]", value[key]
    elif isinstance(value, list | tuple | deque):
        for index, item in enumerate(value):
            yield f"[{index}]", item
    elif isinstance(value, set | frozenset):
        return
    elif type(value).__module__.startswith(TRUSTED_MODULES):
        for name in getattr(value, "checkpoint_fields", ()):
            yield name, _get(value, name)
    else:
        yield from getattr(value, "__dict__", {}).items()
        for name in getattr(type(value), "__slots__", ()):
            if hasattr(value, name):
                yield name, getattr(value, name)


def _get(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def _leaf(value: Any) -> tuple[str, Hashable] | None:
    """(kind, digest) of a value compared whole, else None."""
    if isinstance(value, bool):
        return "flag", value
    if isinstance(value, int | float | complex):
        return type(value).__name__, repr(value)
    if isinstance(value, SCALARS):
        return type(value).__name__, repr(value)
    if isinstance(value, torch.Tensor):
        return "tensor", _tensor_digest(value)
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return "array", repr(value.tolist())
        return "array", (str(value.dtype), value.shape, _sha(value.tobytes()))
    if isinstance(value, np.random.Generator):
        return "numpy generator", repr(value.bit_generator.state)
    if isinstance(value, torch.Generator):
        return "torch generator", _sha(value.get_state().numpy().tobytes())
    if isinstance(value, nn.Module):
        return "module", tuple((k, _tensor_digest(t)) for k, t in value.state_dict().items())
    if isinstance(value, torch.optim.Optimizer):
        state = value.state_dict()["state"]
        return "optimizer", repr({i: {k: _tensor_digest(v) if isinstance(v, torch.Tensor) else v
                                      for k, v in s.items()} for i, s in state.items()})
    if isinstance(value, set | frozenset):
        return "set", repr(sorted(map(repr, value)))
    return None


def _tensor_digest(t: torch.Tensor) -> tuple[str, tuple[int, ...], str]:
    flat = t.detach().cpu().contiguous().reshape(-1)
    return str(t.dtype), tuple(t.shape), _sha(flat.view(torch.uint8).numpy().tobytes())


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
