"""How the runtime's stateful objects become a checkpoint `State` (tensors + JSON) and back.

A resumed node must continue exactly where it stopped, so everything the next round reads is
captured: modules (parameters and buffers), torch optimizers (their buffers), torch and numpy
generators (their exact bit-generator states), tensors and arrays, plain JSON values, and any
object that lists its own state in `checkpoint_fields` (captured field by field, recursively).
Restoring works in place where it can (module parameters, generators, tensors of the right
shape), because other objects hold references to them. Dicts are stored as key/value pairs, so
integer keys (node ids) come back as integers.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

import numpy as np
import torch
from torch import nn

from dfl_node.state.checkpoint_file import State

_PAIRS = "__pairs__"
_NUMPY_RNG = "__numpy_generator__"
_JSON_SCALARS = (bool, int, float, str, type(None))


def capture(value: Any) -> State:
    """The state of `value`, as a `State` of its own."""
    if isinstance(value, nn.Module):
        return State({k: v.detach().clone() for k, v in value.state_dict().items()})
    if isinstance(value, torch.optim.Optimizer):
        return _optimizer_state(value)
    if isinstance(value, torch.Generator):
        return State({"": value.get_state()})
    if isinstance(value, torch.Tensor):
        return State({"": value.detach().clone()})
    if isinstance(value, np.ndarray):
        return State({"": torch.from_numpy(value.copy())})
    if isinstance(value, np.random.Generator):
        return State(meta={_NUMPY_RNG: value.bit_generator.state})
    if hasattr(value, "checkpoint_fields"):
        return capture_fields(value)
    if _is_json(value):
        return State(meta={"json": _to_json(value)})
    if isinstance(value, Mapping):
        return _container({str(k): v for k, v in value.items()})
    if isinstance(value, list | tuple):
        return _container({str(i): v for i, v in enumerate(value)})
    raise TypeError(f"cannot checkpoint a {type(value).__name__}")


def restore(value: Any, state: State) -> Any:
    """`value` with `state` put back: the same object where it is mutable, else a new one."""
    if isinstance(value, nn.Module):
        value.load_state_dict(state.tensors, strict=True)
        return value
    if isinstance(value, torch.optim.Optimizer):
        _load_optimizer(value, state)
        return value
    if isinstance(value, torch.Generator):
        value.set_state(state.tensors[""])
        return value
    if isinstance(value, torch.Tensor):
        saved = state.tensors[""]
        if saved.shape == value.shape and saved.dtype == value.dtype:
            with torch.no_grad():
                value.copy_(saved)
            return value
        return saved.to(value.device)
    if isinstance(value, np.ndarray):
        return state.tensors[""].numpy().copy()
    if isinstance(value, np.random.Generator):
        value.bit_generator.state = state.meta[_NUMPY_RNG]
        return value
    if hasattr(value, "checkpoint_fields"):
        restore_fields(value, state)
        return value
    if "json" in state.meta:
        return _from_json(state.meta["json"], type(value))
    if isinstance(value, MutableMapping):
        for key in value:
            value[key] = restore(value[key], state.part(str(key)))
        return value
    if isinstance(value, list):
        return [restore(v, state.part(str(i))) for i, v in enumerate(value)]
    raise TypeError(f"cannot restore a {type(value).__name__}")


def capture_fields(obj: Any) -> State:
    """Every attribute named in `obj.checkpoint_fields` (a dotted path reaches inside)."""
    out = State()
    for name in getattr(obj, "checkpoint_fields", ()):
        out.put(name, capture(_get(obj, name)))
    return out


def restore_fields(obj: Any, state: State) -> None:
    for name in getattr(obj, "checkpoint_fields", ()):
        parent, _, leaf = name.rpartition(".")
        owner = _get(obj, parent) if parent else obj
        setattr(owner, leaf, restore(getattr(owner, leaf), state.part(name)))


def _get(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def _container(items: dict[str, Any]) -> State:
    out = State()
    for key, item in items.items():
        out.put(key, capture(item))
    return out


def _is_json(value: Any) -> bool:
    if isinstance(value, _JSON_SCALARS):
        return True
    if isinstance(value, Mapping):
        return all(isinstance(k, int | str) and _is_json(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return all(_is_json(v) for v in value)
    return False


def _to_json(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {_PAIRS: [[k, _to_json(v)] for k, v in value.items()]}
    if isinstance(value, list | tuple):
        return [_to_json(v) for v in value]
    return value


def _from_json(data: Any, kind: type = object) -> Any:
    if isinstance(data, dict) and _PAIRS in data:
        pairs = {k: _from_json(v) for k, v in data[_PAIRS]}
        return kind(pairs) if isinstance(kind, type) and issubclass(kind, dict) else pairs
    if isinstance(data, list):
        items = [_from_json(v) for v in data]
        return tuple(items) if kind is tuple else items
    return data


def _optimizer_state(opt: torch.optim.Optimizer) -> State:
    """Per-parameter buffers as tensors (`<index>/<key>`), scalars as JSON; the param groups
    are rebuilt by the protocol's constructor and are not saved."""
    out = State(meta={"scalars": {}})
    for index, buffers in opt.state_dict()["state"].items():
        for key, item in buffers.items():
            if isinstance(item, torch.Tensor):
                out.tensors[f"{index}/{key}"] = item.detach().clone()
            else:
                out.meta["scalars"][f"{index}/{key}"] = item
    return out


def _load_optimizer(opt: torch.optim.Optimizer, state: State) -> None:
    buffers: dict[int, dict[str, Any]] = {}
    items = {**state.tensors, **state.meta.get("scalars", {})}
    for name, item in items.items():
        index, key = name.split("/", 1)
        buffers.setdefault(int(index), {})[key] = item
    opt.load_state_dict({"state": buffers, "param_groups": opt.state_dict()["param_groups"]})
