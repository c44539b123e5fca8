"""What a run was handed as Python objects rather than names: their descriptions, and where
each goes in the config.

`dfl_mesh.run` turns a graph, a ProtocolNode class, a model factory and arrays into these
(launcher/api/objects.py) and puts the objects themselves where the nodes find them by fork
inheritance or shared memory (protocols/given.py, dfl_node/settings/model.py,
dfl_node/learning/given.py): nothing is imported by name or unpickled. Only the local
backends start nodes from this process; the others (hosts, compose, Slurm) start them from an
installed package and files, so a run with objects is refused there in one line.

A run records what it can of them (`described`, the `objects` key of inputs.json; the plan
holds the graph's nodes and edges, the protocol's qualified name, the model's architecture and
P, the arrays' fingerprint), but a record is not the objects: `--resume` of such a run is
refused (launcher/run/resume.py). Running it again with the same objects into the same
directory starts it afresh.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dfl_node.learning.given_names import GIVEN_DATASET
from dfl_node.settings.partition import GIVEN_PARTITION
from launcher.config.backend_catalog import LOCAL
from launcher.errors import LaunchError
from topologies.model import Topology

OBJECTS_KEY = "objects"
"""inputs.json's key for the description of a run's objects (absent when it had none)."""


@dataclass(frozen=True)
class GivenData:
    """Arrays handed over: their fingerprint, and each client's row count when every client
    was given its own (None: one training set, which `partition` splits)."""

    fingerprint: str
    node_sizes: tuple[int, ...] | None
    shape: tuple[int, ...]
    classes: int
    train: int
    test: int


class GivenObjects:
    """Which parts of a run were objects; each None was given by name. A plain class, not a
    dataclass: the RunSpec holding it checks only that it is one (a dataclass it would take
    apart field by field, down to the topology's)."""

    def __init__(self, topology: Topology | None = None, protocol: str | None = None,
                 model: dict[str, Any] | None = None, data: GivenData | None = None) -> None:
        self.topology = topology
        self.protocol = protocol
        self.model = model
        self.data = data

    def what(self) -> str:
        """The objects, named for a message."""
        parts = []
        if self.topology is not None:
            parts.append(f"the graph {self.topology.name}")
        if self.protocol is not None:
            parts.append(f"the protocol class {self.protocol}")
        if self.model is not None:
            parts.append(f"the model factory {self.model['factory']}")
        if self.data is not None:
            parts.append("the dataset's arrays")
        return ", ".join(parts)

    def described(self) -> dict[str, Any]:
        """What the run's inputs.json says of them."""
        out: dict[str, Any] = {}
        if self.topology is not None:
            topo = self.topology
            out["topology"] = {"name": topo.name, "directed": topo.directed,
                               "nodes": list(topo.ids),
                               "edges": [list(e.pair) for e in topo.edges]}
        if self.protocol is not None:
            out["protocol"] = self.protocol
        if self.model is not None:
            out["model"] = self.model
        if self.data is not None:
            data = self.data
            out["dataset"] = {"fingerprint": data.fingerprint, "shape": list(data.shape),
                              "classes": data.classes, "train": data.train, "test": data.test,
                              "node_sizes": None if data.node_sizes is None
                              else list(data.node_sizes)}
        return out

    def apply(self, config: dict[str, Any], partition_given: bool) -> dict[str, Any]:
        """The resolved `config` with the objects' sections in place of the named ones;
        a LaunchError where the run cannot take them (`partition_given`: the request set a
        partition)."""
        transport = config["transport"]
        if transport not in LOCAL:
            raise LaunchError(f"transport={transport}: {self.what()} were handed over as "
                              f"Python objects, which only nodes this process starts can "
                              f"reach ({' or '.join(LOCAL)}); {transport} starts nodes from "
                              "an installed package and files: give names and files instead")
        out = dict(config)
        if self.model is not None:
            out["model"] = self.model
        if self.data is not None:
            out["dataset"] = GIVEN_DATASET
            out[GIVEN_DATASET] = {"fingerprint": self.data.fingerprint,
                                  "node_sizes": None if self.data.node_sizes is None
                                  else list(self.data.node_sizes)}
            if self.data.node_sizes is not None:
                if partition_given:
                    raise LaunchError(f"partition={config['partition']}: the dataset gives "
                                      "every node its own arrays already")
                out["partition"] = GIVEN_PARTITION
        return out
