"""The run's adversaries, resolved into the plan's `adversaries` section.

Declared in two places (docs/protocols/robust.md): per node in the topology (`adversary:`) and
in the config's `adversaries:` section, by id or by a fraction of the clients drawn from a seed.
Both become one map, node id -> its behaviours with every parameter set (ALIE's z computed from
the run's population), so that each process, and a resume, runs the same attackers. Whatever
cannot run is refused here with one line (exit 2), before any node starts. The `adversary`
attribute itself leaves the plan's topology, so that a run's topology hash does not depend on its
attackers and honest nodes cannot read them there.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pydantic import ValidationError

from launcher.errors import LaunchError
from protocols.registry import protocol_spec
from protocols.robust.adversary_settings import (
    DATA_KINDS,
    AdversariesSection,
    Alie,
    Backdoor,
    LabelFlip,
    PerNeighbour,
    behaviours_of,
    drawn,
    dumped,
)
from protocols.robust.alie_quantile import alie_z
from protocols.robust.errors import RobustnessError
from topologies.model import Topology

ATTRIBUTE = "adversary"


def without_adversaries(topology: Topology) -> Topology:
    """The topology without its `adversary` attributes (the plan keeps them apart)."""
    if not any(ATTRIBUTE in n.attrs for n in topology.nodes):
        return topology
    nodes = tuple(replace(n, attrs={k: v for k, v in n.attrs.items() if k != ATTRIBUTE})
                  for n in topology.nodes)
    return replace(topology, nodes=nodes)


def declared(topology: Topology, config: dict[str, Any],
             aggregator: int | None) -> dict[int, list[Any]]:
    """Node id -> its behaviour models, from both places; refuses a node named in both, the
    aggregator, and an id the topology does not have."""
    out: dict[int, list[Any]] = {}
    for node in topology.nodes:
        if ATTRIBUTE in node.attrs:
            out[node.id] = behaviours_of(node.attrs[ATTRIBUTE])
    try:
        section = AdversariesSection.model_validate(config.get("adversaries") or {})
    except ValidationError as exc:  # validated with the config already; kept for API callers
        raise LaunchError(f"adversaries: {exc.errors()[0]['msg']}") from None
    if section.nodes is not None:
        if aggregator in section.nodes:
            raise LaunchError(f"adversaries.nodes: node {aggregator} is {config['protocol']}'s "
                              "aggregator, which cannot be an adversary (only clients can)")
        unknown = sorted(set(section.nodes) - set(topology.ids))
        if unknown:
            raise LaunchError(f"adversaries.nodes: node {unknown[0]} is not in topology "
                              f"{topology.name} (nodes {min(topology.ids)}..{max(topology.ids)})")
        chosen = sorted(set(section.nodes))
    elif section.fraction is not None:
        placement = (section.placement_seed if section.placement_seed is not None
                     else config["seed"])
        chosen = drawn(topology.ids, section.fraction, placement)
    else:
        chosen = []
    both = sorted(set(chosen) & set(out))
    if both:
        raise LaunchError(f"adversaries: node {both[0]} has an `adversary:` attribute in "
                          f"topology {topology.name} and is chosen by the config's adversaries: "
                          "section too; declare each adversary in one place")
    for node_id in chosen:
        out[node_id] = list(section.behaviour)
    return dict(sorted(out.items()))


def resolve_adversaries(topology: Topology, config: dict[str, Any],
                        aggregator: int | None) -> dict[int, list[dict[str, Any]]]:
    """The plan's `adversaries` section (JSON data), or a LaunchError naming what cannot run."""
    chosen = declared(topology, config, aggregator)
    if not chosen:
        return {}
    protocol = config["protocol"]
    clients = len(topology.ids)
    out = {}
    for node_id, behaviours in chosen.items():
        for b in behaviours:
            if config["schedule"] == "tdma" and any(
                    getattr(a, "sees", None) == "this-round" for a in _attacks(b)):
                raise LaunchError(f"adversaries: node {node_id}'s {b.kind} with sees: "
                                  "this-round gathers its neighbours' messages before it sends, "
                                  "which a TDMA frame does not allow; use schedule: sync or "
                                  "sees: previous-round")
            if b.kind in DATA_KINDS and not protocol_spec(protocol).data_poisoning:
                raise LaunchError(f"adversaries: node {node_id}'s {b.kind} poisons training "
                                  f"data, which {protocol} does not support (it brings its own "
                                  "workload)")
            if isinstance(b, PerNeighbour):
                near = topology.neighbors(node_id)
                strangers = sorted(set(b.to) - set(near))
                if strangers:
                    raise LaunchError(f"adversaries: node {node_id}'s per-neighbour names node "
                                      f"{strangers[0]}, which is not its neighbour "
                                      f"(neighbours: {sorted(near)})")
        out[node_id] = dumped([_resolved(b, clients, len(chosen)) for b in behaviours])
    return out


def _attacks(behaviour: Any) -> list[Any]:
    """The behaviour, or a per-neighbour map's attacks."""
    return list(behaviour.to.values()) if isinstance(behaviour, PerNeighbour) else [behaviour]


def _resolved(behaviour: Any, clients: int, adversaries: int) -> Any:
    """The behaviour with every parameter the plan fixes: ALIE's z from the population."""
    if isinstance(behaviour, Alie) and behaviour.z is None:
        try:
            z = alie_z(clients, adversaries)
        except RobustnessError as exc:
            raise LaunchError(f"adversaries: {exc} (set alie's z)") from None
        return behaviour.model_copy(update={"z": z})
    if isinstance(behaviour, PerNeighbour):
        return behaviour.model_copy(update={"to": {
            j: _resolved(b, clients, adversaries) for j, b in behaviour.to.items()}})
    return behaviour


def check_data(adversaries: dict[int, list[dict[str, Any]]], classes: int,
               shape: tuple[int, ...]) -> None:
    """Label maps and backdoor targets within the data's classes; a backdoor's trigger on
    images (a sample of at least height x width) it fits in."""
    for node_id, data in adversaries.items():
        for b in behaviours_of(data):
            if isinstance(b, Backdoor) and (len(shape) < 2 or b.size > min(shape[-2:])):
                raise LaunchError(f"adversaries: node {node_id}'s backdoor stamps a {b.size}x"
                                  f"{b.size} trigger on images, but a sample has shape "
                                  f"{list(shape)}")
            named: list[int] = []
            if isinstance(b, LabelFlip) and b.mapping:
                named = [*b.mapping, *b.mapping.values()]
            elif isinstance(b, Backdoor):
                named = [b.target]
            outside = [c for c in named if c >= classes]
            if outside:
                raise LaunchError(f"adversaries: node {node_id}'s {b.kind} names class "
                                  f"{outside[0]}, but the data has classes 0..{classes - 1}")
