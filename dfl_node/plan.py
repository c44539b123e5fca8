"""The RunPlan: everything a node needs to run, resolved once by the launcher.

The plan is plain JSON (no pickle, nothing executable). Every process of a run computes the same
schedule, weights and random streams from it, so it is the single source of truth shared by the
launcher, `dfl-node` started by hand, and the in-process transport. Per-section hashes let two
processes say which part of their plans differs.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from dfl_config.errors import DflMeshError
from dfl_config.problems import one_line
from dfl_config.section import Section
from dfl_node.settings.cycle_metrics import CycleMetricsSettings
from dfl_node.settings.data_section import DataSection
from dfl_node.settings.discovery import DiscoverySection
from dfl_node.settings.link import LinkSettings
from dfl_node.settings.prephase import PrephaseSection
from dfl_node.settings.schedule import ScheduleSection
from dfl_node.settings.secure import SecureSection
from dfl_node.settings.wire import WireSettings
from topologies.schedules import RoundGraphs

SCHEMA_VERSION = 1

# Which plan fields make up each hashed section.
SECTIONS: dict[str, tuple[str, ...]] = {
    "topology": ("topology_name", "topology", "nodes"),
    "protocol": ("protocol", "hyper", "model", "mixing", "weights", "rounds", "eval_every",
                 "aggregator", "eval_at_start"),
    "data": ("data",),
    "seeds": ("seed",),
    "runtime": ("link", "wire", "transport", "cycle_metrics", "checkpoint_every",
                "secure", "discovery"),
    "prephase": ("prephase",),
    "schedule": ("schedule",),  # the TDMA slot lists themselves, not only their options
    # who attacks and how: two runs that differ only in their attackers share every other
    # hash; a plan without adversaries has no such section (its hashes are as before)
    "adversaries": ("adversaries",),
}
# Sections a plan has only when set: without them its hashes are those of a plan written
# before the section existed (the plan agreement's control message keeps its size).
OPTIONAL_SECTIONS = ("adversaries",)
# Data keys that say where one host keeps the dataset, not what it is (the content fingerprint
# says that): hosts that keep it in other places still hold the same plan.
HOST_LOCAL_DATA = ("data_root", "cache_dir")
# Likewise where a host keeps the key files of a --secure run (the public keys are the plan's).
HOST_LOCAL_SECURE = ("keys_dir",)


class PlanError(ValueError, DflMeshError):
    """A plan file that cannot be used; the message is one line."""


@dataclass(frozen=True)
class NodeEntry:
    id: int
    bind: str
    address: str
    host: str
    device: str
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AdversaryRole:
    """What an adversarial node knows of its role: its behaviours (the plan's JSON data) and
    the ids of the other adversaries, its colluders."""

    behaviours: tuple[dict[str, Any], ...]
    colluders: tuple[int, ...]


@dataclass(frozen=True)
class RunPlan:
    protocol: str
    topology_name: str
    topology: dict[str, Any]
    nodes: tuple[NodeEntry, ...]
    mixing: str
    weights: tuple[tuple[int, int, float], ...]
    rounds: int
    seed: int
    eval_every: int
    data: DataSection
    model: dict[str, Any]
    hyper: dict[str, Any]
    link: LinkSettings
    wire: WireSettings
    transport: str
    collector: str
    # the one-time pre-phase (coordinator address, caps); None when the protocol has none
    prephase: PrephaseSection | None = None
    schedule: ScheduleSection = field(default_factory=lambda: ScheduleSection(mode="sync"))
    # A server-based protocol's hub (q-FFL): a node of the plan that is not a client. When set,
    # the communication graph is the star hub <-> clients, not the topology's edges.
    aggregator: int | None = None
    # per-cycle metrics: `params_every` (0: nodes never send their parameters) and `thresholds`
    cycle_metrics: CycleMetricsSettings = field(default_factory=CycleMetricsSettings)
    # every node saves its full state every k rounds (0: never); dfl_node/state/checkpoint_file.py
    checkpoint_every: int = 10
    # --secure (dfl_node/transports/encryption.py): the public keys and this host's key
    # directory; None when the run's sockets are not CURVE-secured
    secure: SecureSection | None = None
    # nodes whose addresses are not known in advance (`endpoints.nodes: discover`): the
    # directory's `bind` and `address`, where every node reports its own and learns the others'
    # (dfl_node/runner/discovery.py); None when `nodes` holds every address
    discovery: DiscoverySection | None = None
    # a metrics row of round 0 too, before any training (launcher/config/run_settings.py)
    eval_at_start: bool = False
    # the secret every record to the collector is sealed with (dfl_node/runner/results_seal.py),
    # drawn per run; in no section hash, which neighbours exchange in the clear
    results_key: str = ""
    # Adversarial nodes (docs/design/adversaries.md): node id -> its behaviours, JSON data that
    # the runtime only carries (protocols/robust reads them), resolved by the launcher from the
    # topology's `adversary` attributes and the config's `adversaries:` section. A node's
    # protocol sees none of it (`seen_by_protocol`), only its own role (`NodeContext.adversary`).
    adversaries: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION

    @property
    def ids(self) -> list[int]:
        return [n.id for n in self.nodes]

    @property
    def clients(self) -> list[int]:
        """The learning nodes: every node but the aggregator (data shards, fairness, bits)."""
        return [i for i in self.ids if i != self.aggregator]

    def required_prephase(self) -> PrephaseSection:
        """The pre-phase section, for code that runs only when the protocol has one."""
        if self.prephase is None:
            raise PlanError(f"the plan of {self.protocol} has no prephase section")
        return self.prephase

    def node(self, node_id: int) -> NodeEntry:
        for entry in self.nodes:
            if entry.id == node_id:
                return entry
        raise PlanError(f"node {node_id} is not in the plan (nodes: {self.ids})")

    def neighbors(self, node_id: int) -> list[int]:
        """Sorted neighbour ids: the order every neighbour sum runs in."""
        if self.aggregator is not None:
            return self.clients if node_id == self.aggregator else [self.aggregator]
        out = set()
        for u, v in self.edges():
            if u == node_id:
                out.add(v)
            elif v == node_id:
                out.add(u)
        return sorted(out)

    def edges(self) -> list[tuple[int, int]]:
        return [_edge_pair(e) for e in self.topology["edges"]]

    def adjacency(self) -> dict[int, list[int]]:
        """Every node's sorted neighbours from one pass over the edges: `neighbors` for each
        node in turn passes over all edges once per node, which every process of a 200-node
        ring paid at start-up (40,000 edge visits, about 0.1 s of CPU in each process)."""
        if self.aggregator is not None:
            return {i: self.neighbors(i) for i in self.ids}
        out: dict[int, set[int]] = {i: set() for i in self.ids}
        for u, v in self.edges():
            out.setdefault(u, set()).add(v)
            out.setdefault(v, set()).add(u)
        return {i: sorted(peers) for i, peers in out.items()}

    def diameter(self) -> int:
        """Longest shortest path (hops) of the topology."""
        return self._diameter

    @cached_property
    def _diameter(self) -> int:
        """By breadth-first search from every node: O(nodes x edges), 2 ms of CPU on a ring of
        100, once per plan object (a node's start barrier asks; so do the launcher's checks)."""
        adjacency = self.adjacency()
        return max((max(hop_depths(adjacency, i).values()) for i in self.ids), default=0)

    def weight_row(self, node_id: int, round_: int | None = None) -> dict[int, float]:
        """Row i of the mixing matrix, self included, keyed by node id in sorted order; on a
        directed or time-varying topology, of round `round_`'s graph (topologies/schedules.py),
        which such a topology cannot do without."""
        if self.round_graphs is not None:
            if round_ is None:
                raise PlanError(f"topology {self.topology_name} is directed or time-varying: "
                                "its mixing weights are per round (weight_row(node, round))")
            return self.round_graphs.weight_row(node_id, round_, self.seed)
        return dict(sorted((j, w) for i, j, w in self.weights if i == node_id))

    @cached_property
    def round_graphs(self) -> RoundGraphs | None:
        """The arcs of every round of a directed or time-varying topology; None for one
        undirected graph, whose arcs are both directions of every edge in every round."""
        if not (self.topology.get("directed") or self.topology.get("schedule")):
            return None
        return RoundGraphs.from_topology(self.topology)

    def out_neighbors(self, node_id: int, round_: int) -> list[int]:
        """Whom `node_id` sends to in round `round_`, ascending."""
        if self.round_graphs is None:
            return self.neighbors(node_id)
        return self.round_graphs.out_neighbors(node_id, round_, self.seed)

    def in_neighbors(self, node_id: int, round_: int) -> list[int]:
        """From whom `node_id` receives in round `round_`, ascending."""
        if self.round_graphs is None:
            return self.neighbors(node_id)
        return self.round_graphs.in_neighbors(node_id, round_, self.seed)

    def adversary_role(self, node_id: int) -> AdversaryRole | None:
        """Node `node_id`'s behaviours and the other adversaries' ids (None: it is honest)."""
        behaviours = self.adversaries.get(node_id)
        if behaviours is None:
            return None
        return AdversaryRole(tuple(behaviours),
                             tuple(sorted(i for i in self.adversaries if i != node_id)))

    def seen_by_protocol(self) -> RunPlan:
        """The plan a protocol object reads: without the adversaries, so that no defence can
        learn who attacks from the plan (the plan itself, a plan without any)."""
        return replace(self, adversaries={}) if self.adversaries else self

    def with_addresses(self, table: Mapping[int, tuple[str, str]]) -> RunPlan:
        """This plan with every node's (address, host) from a discovery's `table`."""
        return replace(self, nodes=tuple(replace(n, address=table[n.id][0], host=table[n.id][1])
                                         for n in self.nodes))

    def section_hashes(self) -> dict[str, str]:
        return dict(self._section_hashes)

    @cached_property
    def _section_hashes(self) -> dict[str, str]:
        """Once per plan object: the digest walks the whole plan (`to_dict` copies every node,
        edge and weight, 3 ms on a ring of 100), and a node sends it twice on its way to
        round 1 (its HELLO to the collector, its plan agreement with its neighbours)."""
        return section_hashes_of(self.to_dict())

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data; a typed section holds the keys its writer set, no more (a plan
        written before a key existed hashes as it did)."""
        out = asdict(self)
        out["weights"] = [list(w) for w in self.weights]
        # JSON keys are text; written so, the hash is the same before and after a round trip
        out["adversaries"] = {str(i): list(b) for i, b in sorted(self.adversaries.items())}
        for name in TYPED_SECTIONS:
            out[name] = section_json(getattr(self, name))
        return out

    def dump(self, path: Path) -> None:
        """plan.json, readable by its owner only: it holds the run's results key. Written under
        `<stem>.tmp` and renamed, so a reader (a node, a resume, the kill helper of
        dfl_mesh.testing) never sees it half-written, and a cut-short write leaves a name the
        run directory knows as temporary."""
        body = self.to_dict()
        body["hashes"] = self.section_hashes()
        tmp = path.with_name(f"{path.stem}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            os.fchmod(out.fileno(), 0o600)  # a file that existed keeps its mode otherwise
            out.write(json.dumps(body, indent=1, sort_keys=True) + "\n")
        tmp.replace(path)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunPlan:
        data = dict(data)
        data.pop("hashes", None)
        if data.get("schema_version") != SCHEMA_VERSION:
            raise PlanError(f"plan schema_version {data.get('schema_version')!r} is not "
                            f"{SCHEMA_VERSION}")
        try:
            data["nodes"] = tuple(NodeEntry(**n) for n in data["nodes"])
            data["weights"] = tuple((int(i), int(j), float(w)) for i, j, w in data["weights"])
            data["adversaries"] = {int(i): list(b)
                                   for i, b in data.get("adversaries", {}).items()}
            for name, kind in TYPED_SECTIONS.items():
                if name in data:
                    data[name] = _section(kind, name, data[name])
            return cls(**data)
        except PlanError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise PlanError(f"plan is malformed: {exc}") from None

    @classmethod
    def load(cls, path: Path) -> RunPlan:
        """The plan in the file at `path`. A file that holds the very bytes this process read
        from the same path last time gives that same plan object back, its section hashes and
        diameter computed already: the processes backend's zygote reads the plan before it
        forks the nodes (launcher/backends/preload.py), so that each of them, reading it
        again, neither parses nor hashes it."""
        global _last_read
        try:
            raw = Path(path).read_bytes()
            key = os.path.abspath(path)
            if _last_read is not None and _last_read[:2] == (key, raw):
                return _last_read[2]
            data = json.loads(raw.decode())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise PlanError(f"{path}: cannot read plan: {exc}") from None
        if not isinstance(data, dict):
            raise PlanError(f"{path}: plan must be a JSON object")
        plan = cls.from_dict(data)
        _last_read = (key, raw, plan)
        return plan


# The plan RunPlan.load read last in this process: (absolute path, the file's bytes, the plan).
_last_read: tuple[str, bytes, RunPlan] | None = None


def section_hashes_of(data: dict[str, Any]) -> dict[str, str]:
    """Each section's digest from a plan's JSON data (`RunPlan.to_dict`). Apart from the model
    because resume hashes a plan with its addresses taken out (checkpoint_layout.content_hashes),
    which no longer makes a valid pre-phase or discovery section."""
    data = dict(data)
    data["data"] = {k: v for k, v in data["data"].items() if k not in HOST_LOCAL_DATA}
    data["secure"] = {k: v for k, v in data["secure"].items() if k not in HOST_LOCAL_SECURE}
    for key in ("discovery", "eval_at_start", "adversaries"):  # unset: hashed as before the
        if not data.get(key):                                    # key existed
            data.pop(key, None)
    return {name: _digest({key: data[key] for key in keys if key in data})
            for name, keys in SECTIONS.items() if name not in OPTIONAL_SECTIONS
            or any(key in data for key in keys)}


# The sections the node reads as models (dfl_node/settings): their defaults live there only.
TYPED_SECTIONS: dict[str, type[Section]] = {
    "link": LinkSettings, "wire": WireSettings, "schedule": ScheduleSection,
    "cycle_metrics": CycleMetricsSettings, "prephase": PrephaseSection,
    "discovery": DiscoverySection, "data": DataSection, "secure": SecureSection,
}
# Sections a plan may lack: written {} and read back as None.
ABSENT_WHEN_EMPTY = (PrephaseSection, DiscoverySection, SecureSection)


def section_json(section: Section | None) -> dict[str, Any]:
    """A typed section as the plan writes it: the keys its writer set ({} for none)."""
    return {} if section is None else section.model_dump(mode="json", exclude_unset=True)


def _section(kind: type[Section], name: str, value: Any) -> Section | None:
    """The plan's `name` section as its model; an empty pre-phase, discovery or secure
    section is none."""
    if kind in ABSENT_WHEN_EMPTY and value == {}:
        return None
    try:
        return kind.model_validate(value)
    except ValidationError as exc:
        raise PlanError(f"plan is malformed: {one_line(exc, kind, (name,))}") from None


def _edge_pair(edge: Any) -> tuple[int, int]:
    if isinstance(edge, dict):
        return int(edge["u"]), int(edge["v"])
    return int(edge[0]), int(edge[1])


def _digest(obj: Any) -> str:
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def hop_depths(adjacency: Mapping[int, Iterable[int]], source: int) -> dict[int, int]:
    """Hops from `source` to every node it reaches (breadth-first search)."""
    depth = {source: 0}
    frontier = [source]
    while frontier:
        nxt = []
        for i in frontier:
            for j in adjacency[i]:
                if j not in depth:
                    depth[j] = depth[i] + 1
                    nxt.append(j)
        frontier = nxt
    return depth
