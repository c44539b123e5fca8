"""Which runs are seeds of one experiment, and which experiments share a table.

Runs are one group when their resolved configs are equal once the seed is set aside, and the
keys that say where things are rather than what runs: `data_root` and `endpoints` (host paths
and addresses) and the hyper-parameter naming a multi-task protocol's baseline run (one per
seed by design). Groups share a table when their protocols are of one paper's family (its
table has the columns; each protocol names its `report_family`) and they were evaluated on the
same split. A group is labelled by its protocol, plus
the settings that tell it apart from other groups of the same protocol in its table.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from launcher.errors import LaunchError
from launcher.results.report_runs import Run
from protocols.registry import multitask_baselines, report_families

FAMILIES = {name: family.members for name, family in report_families().items()}
PROTOCOL_ORDER = [p for members in FAMILIES.values() for p in members]
NOT_THE_EXPERIMENT = ("seed", "data_root", "endpoints",
                      *(f"hyper.{key}" for key in multitask_baselines()))


@dataclass(frozen=True)
class Group:
    """Runs of one configuration, one per seed, in seed order."""

    label: str
    protocol: str
    runs: list[Run]

    @property
    def seeds(self) -> list[int]:
        return [run.seed for run in self.runs]


@dataclass(frozen=True)
class TableGroups:
    family: str
    eval_split: str
    groups: list[Group]


def family_of(run: Run) -> str:
    for family, members in FAMILIES.items():
        if run.protocol in members:
            return family
    raise LaunchError(f"{run.path / 'summary.json'}: protocol {run.protocol!r} has no report "
                      f"family (known: {', '.join(PROTOCOL_ORDER)})")


def without(config: dict[str, Any], dotted: str) -> dict[str, Any]:
    head, _, rest = dotted.partition(".")
    if head not in config:
        return config
    if not rest:
        return {k: v for k, v in config.items() if k != head}
    inner = config[head]
    return {**config, head: without(inner, rest)} if isinstance(inner, dict) else config


def experiment(run: Run) -> dict[str, Any]:
    """The resolved config less what does not change the experiment."""
    config = run.config
    for dotted in NOT_THE_EXPERIMENT:
        config = without(config, dotted)
    return config


def seed_groups(runs: list[Run]) -> list[list[Run]]:
    """Runs with equal experiments together; two runs of one experiment and seed are an error
    (the interval would count one seed twice)."""
    by_key: dict[str, list[Run]] = {}
    for run in runs:
        by_key.setdefault(json.dumps(experiment(run), sort_keys=True, default=str), []).append(run)
    for members in by_key.values():
        members.sort(key=lambda run: run.seed)
        for a, b in pairwise(members):
            if a.seed == b.seed:
                raise LaunchError(f"{a.path} and {b.path}: the same configuration and seed "
                                  f"{a.seed}; pass one of them")
    return list(by_key.values())


MISSING = "-"


def show(value: Any) -> str:
    return json.dumps(value, default=str) if isinstance(value, list | dict) else str(value)


def differing_paths(configs: list[dict[str, Any]], prefix: str = "") -> dict[str, list[str]]:
    """Dotted path -> each config's value there, shown, for every place the configs differ;
    where all of them hold a mapping, the difference is looked for inside it."""
    out: dict[str, list[str]] = {}
    for key in sorted({k for c in configs for k in c}):
        values = [c.get(key, MISSING) for c in configs]
        if all(isinstance(v, dict) for v in values):
            out |= differing_paths(values, f"{prefix}{key}.")
        elif len({show(v) for v in values}) > 1:
            out[f"{prefix}{key}"] = [show(v) for v in values]
    return out


def usual(values: list[str]) -> str | None:
    """The value most groups hold, if one value is the most common alone."""
    counts = Counter(values).most_common()
    return counts[0][0] if len(counts) == 1 or counts[0][1] > counts[1][1] else None


def label_groups(members: list[list[Run]]) -> list[Group]:
    """Label = protocol, plus `key=value` where the group departs from what most groups of its
    protocol in the table hold (every value when no value is the usual one); hyper-parameters
    by their bare name, as `--set` takes them."""
    settings = [experiment(runs[0]) for runs in members]
    labels = [runs[0].protocol for runs in members]
    for protocol in {runs[0].protocol for runs in members}:
        peers = [k for k, runs in enumerate(members) if runs[0].protocol == protocol]
        for path, values in differing_paths([settings[k] for k in peers]).items():
            common = usual(values)
            for k, value in zip(peers, values, strict=True):
                if value != common:
                    labels[k] += f" {path.removeprefix('hyper.')}={value}"
    return [Group(label, runs[0].protocol, runs)
            for label, runs in zip(labels, members, strict=True)]


def table_groups(runs: list[Run]) -> list[TableGroups]:
    """One table per (family, eval split), groups in the families' protocol order."""
    tables: dict[tuple[str, str], list[list[Run]]] = {}
    for members in seed_groups(runs):
        first = members[0]
        key = (family_of(first), str(first.summary.get("eval_split") or "-"))  # "-": none
        tables.setdefault(key, []).append(members)
    out = []
    for (family, split), seed_sets in sorted(
            tables.items(), key=lambda item: (list(FAMILIES).index(item[0][0]), item[0][1])):
        groups = sorted(label_groups(seed_sets),
                        key=lambda g: (PROTOCOL_ORDER.index(g.protocol), g.label))
        out.append(TableGroups(family, split, groups))
    return out
