"""`dfl_mesh.run`'s arguments that are Python objects, made into what a run takes.

A graph (networkx, or a `Topology`) becomes the run's topology, validated as a topology file
is; a ProtocolNode class, a model factory and arrays are put where the nodes find them
(protocols/given.py, dfl_node/settings/model.py, dfl_node/learning/given.py) and described for
the run's record (launcher/config/given.py). They are put there before the launch starts its
nodes, so a forked node inherits them and a node thread shares them: nothing is pickled,
nothing imported by name. Flower's `run_simulation`, which takes the user's own client and
server objects, is the model; its objects also reach only the processes it starts.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dfl_node.settings.model import GIVEN_MODEL, give_factory
from launcher.config.given import GivenData, GivenObjects
from launcher.config.run_settings import node_attributes_model, run_config_model
from launcher.errors import LaunchError
from protocols.given import give, given_class, qualified_name
from protocols.registry import node_problem
from topologies.errors import TopologyError
from topologies.loader import parse_topology
from topologies.model import Topology

if TYPE_CHECKING:  # imported where arrays are handed over: `import dfl_mesh` needs no numpy
    import numpy as np

NAMED = (str, os.PathLike)


def given_objects(topology: Any, protocol: Any, model: Any,
                  dataset: Any) -> tuple[str, str, GivenObjects | None]:
    """The topology's and the protocol's names, and the objects among the four (None where
    each is given by name); a LaunchError (one line) for an object that cannot serve."""
    objects = GivenObjects(
        topology=None if isinstance(topology, NAMED) else graph_topology(topology),
        protocol=None if isinstance(protocol, str) else protocol_name(protocol),
        model=model_section(model) if model is not None else None,
        data=given_data(dataset) if dataset is not None else None)
    topology_name = objects.topology.name if objects.topology else os.fspath(topology)
    protocol_name_ = objects.protocol or protocol
    given = any(part is not None for part in (objects.topology, objects.protocol,
                                              objects.model, objects.data))
    return topology_name, protocol_name_, objects if given else None


def graph_topology(graph: Any) -> Topology:
    """A networkx graph (directed too) or a Topology, checked as a topology file is: node ids
    are integers, the graph connected, node and edge attributes ones a topology file may have
    (networkx's `pos` is the file's `position`)."""
    if isinstance(graph, Topology):
        data, name = graph.to_dict(), graph.name
    else:
        import networkx as nx

        if not isinstance(graph, nx.Graph) or graph.is_multigraph():
            raise LaunchError(f"topology=: a file, a shipped name, a networkx Graph or DiGraph, "
                              f"or a Topology; got {type(graph).__name__}")
        name = str(graph.name or "graph")
        data = {"name": name, "nodes": [{"id": plain(v), **node_fields(attrs)}
                                        for v, attrs in graph.nodes(data=True)],
                "edges": [{"u": plain(u), "v": plain(v), **attrs}
                          for u, v, attrs in graph.edges(data=True)]}
        if graph.is_directed():
            data["directed"] = True
    try:
        return parse_topology(data, f"topology={name}", node_attributes_model())
    except TopologyError as exc:
        raise LaunchError(str(exc)) from None


def plain(value: Any) -> Any:
    """A node id as the topology file holds it (numpy's integers as int)."""
    return int(value) if isinstance(value, numbers.Integral) and not isinstance(value, bool) \
        else value


def node_fields(attrs: Mapping[str, Any]) -> dict[str, Any]:
    out = {key: value for key, value in attrs.items() if key != "pos"}
    if "pos" in attrs:
        out["position"] = [float(x) for x in attrs["pos"]]
    return out


def protocol_name(cls: Any) -> str:
    """A ProtocolNode class's qualified name, under which the nodes find it; a class given anew
    under a name (a notebook cell run again) replaces the one before, settings included."""
    from protocols.node_base import ProtocolNode  # torch: a ProtocolNode's module has it

    if not (isinstance(cls, type) and issubclass(cls, ProtocolNode)):
        raise LaunchError(f"protocol=: a protocol's name or a protocols.sdk.ProtocolNode subclass; "
                          f"got {cls!r}")
    if getattr(cls, "spec", None) is None:
        raise LaunchError(f"protocol={cls.__name__}: it declares no spec (subclass "
                          "ProtocolNode[Hyper], or name one as `spec`)")
    problem = node_problem(cls, cls.spec)
    if problem:
        raise LaunchError(f"protocol={cls.__name__}: {problem}")
    before = given_class(qualified_name(cls))
    if before is not None and before is not cls:
        run_config_model.cache_clear()  # the config model of the name is the new class's
    return give(cls)


def model_section(factory: Any) -> dict[str, Any]:
    """The model section of a factory's module: its name, architecture and P (the module is
    built once here to tell them; nodes build their own from the run's seed)."""
    import torch

    if not callable(factory):
        raise LaunchError(f"model=: a model's section (a mapping) or a function returning a "
                          f"torch.nn.Module; got {type(factory).__name__}")
    name = qualified_name(factory)
    with torch.random.fork_rng(devices=[]):
        module = factory()
    if not isinstance(module, torch.nn.Module):
        raise LaunchError(f"model={name}: returned an object of type "
                          f"{type(module).__name__}, not a torch.nn.Module")
    give_factory(name, factory)
    return {"name": GIVEN_MODEL, "factory": name, "architecture": repr(module),
            "parameters": sum(p.numel() for p in module.parameters())}


def given_data(dataset: Any) -> GivenData:
    """`{"train": TRAIN, "test": (x, y) or a Dataset}`, TRAIN being one training set (x, y)
    or a torch Dataset, which the run's `partition` splits, or a list of them, one per client
    in sorted id order. Arrays or tensors; labels are class indices."""
    import numpy as np

    from dfl_node.learning.arrays import DatasetArrays
    from dfl_node.learning.given import give_arrays

    if not (isinstance(dataset, Mapping) and set(dataset) == {"train", "test"}):
        raise LaunchError("dataset=: a dataset's name, or {'train': ..., 'test': ...} of "
                          "(x, y) arrays or torch Datasets (train may be a list, one per node)")
    train = dataset["train"]
    parts = ([samples(part, f"train[{i}]") for i, part in enumerate(train)]
             if isinstance(train, list) else [samples(train, "train")])
    x_test, y_test = samples(dataset["test"], "test")
    shapes = {x.shape[1:] for x, _ in parts} | {x_test.shape[1:]}
    if len(shapes) > 1:
        raise LaunchError(f"dataset=: samples of different shapes {sorted(shapes)}")
    x_train = np.concatenate([x for x, _ in parts])
    y_train = np.concatenate([y for _, y in parts])
    classes = int(max(y_train.max(), y_test.max())) + 1
    sizes = tuple(len(y) for _, y in parts) if isinstance(train, list) else None
    arrays = DatasetArrays(x_train, y_train, x_test, y_test, classes)
    return GivenData(give_arrays(arrays, sizes), sizes, tuple(x_train.shape[1:]), classes,
                     len(y_train), len(y_test))


def samples(part: Any, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Inputs as float32 and labels as int64 of an (x, y) pair or a torch Dataset."""
    import numpy as np

    if isinstance(part, tuple) and len(part) == 2:
        x, y = array(part[0]), array(part[1])
    elif hasattr(part, "__getitem__") and hasattr(part, "__len__") and \
            not isinstance(part, np.ndarray | list) and not hasattr(part, "detach"):
        items = [part[i] for i in range(len(part))]
        if not items:
            raise LaunchError(f"dataset={what}: empty")
        x = np.stack([array(item[0]) for item in items])
        y = np.asarray([array(item[1]) for item in items])
    else:
        raise LaunchError(f"dataset={what}: an (x, y) pair of arrays or tensors, or a torch "
                          f"Dataset; got {type(part).__name__}")
    if y.ndim != 1 or len(y) != len(x) or len(y) == 0:
        raise LaunchError(f"dataset={what}: {len(x)} inputs and labels of shape {y.shape} "
                          "(give one class index per input)")
    if not np.issubdtype(y.dtype, np.integer) or y.min() < 0:
        raise LaunchError(f"dataset={what}: labels must be class indices (integers from 0)")
    return np.ascontiguousarray(x, dtype=np.float32), y.astype(np.int64)


def array(value: Any) -> np.ndarray:
    """A numpy array of an array, a tensor (detached, on the CPU) or a number."""
    import numpy as np

    if hasattr(value, "detach"):
        return np.asarray(value.detach().cpu().numpy())
    return np.asarray(value)
