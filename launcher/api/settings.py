"""Keyword settings of `dfl_mesh.run` as a RunSpec, built from the Python values themselves.

A setting named like a `dfl-launch` run option (`rounds=5`, `data_root=...`, `on_failure=...`)
is that option; any other keyword is a config key (`lr=0.05`, a top-level key or a protocol
hyper-parameter), exactly as `--set key=value` is, and keeps its value as given:
`model={"name": "mlp"}` reaches the config as the mapping it is. The spec is validated as the
command line's is (launcher/config/run_spec.py), so the same run asked either way is one spec.

Four arguments may be objects instead (launcher/api/objects.py): the topology a networkx graph
or a Topology, the protocol a ProtocolNode class, `model=` a function returning a torch module,
`dataset=` arrays or torch Datasets.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from launcher.api.objects import given_objects
from launcher.config.options import parse_seeds
from launcher.config.run_spec import OPTION_NAMES, Override, RunSpec, options_of
from launcher.errors import LaunchError

NOT_SETTINGS = {"topology", "protocol", "config_file", "sets"}
FLAGS = {"secure"}  # given or not: False is not given, as an absent `--secure`


def keyword_spec(topology: Any, protocol: Any, config: str | Path | None,
                 settings: Mapping[str, Any], overrides: Mapping[str, Any]) -> RunSpec:
    """The RunSpec of `dfl_mesh.run(topology, protocol, config=..., overrides=..., **settings)`;
    a LaunchError (one line) where the command line exits 2."""
    model, dataset = settings.get("model"), settings.get("dataset")
    model = model if callable(model) else None  # a factory; a section is a config value
    dataset = dataset if dataset is not None and not isinstance(dataset, str) else None
    objects_given = {"model": model, "dataset": dataset}
    settings = {k: v for k, v in settings.items() if objects_given.get(k) is None}
    topology, protocol, objects = given_objects(topology, protocol, model, dataset)
    named: dict[str, Any] = {}
    values: dict[str, Any] = {}
    for name, value in settings.items():
        if name in NOT_SETTINGS:
            raise LaunchError(f"{name}=: pass it as run()'s own argument")
        if value is None or (name in FLAGS and value is False):
            continue
        if name == "seeds":  # `seeds="0-4"` as `--seeds 0-4`
            named[name] = parse_seeds(str(value))
        elif name in OPTION_NAMES:
            named[name] = value
        else:
            values[name] = value
    sets = tuple(config_value(key, value) for key, value in {**values, **overrides}.items())
    seeds = {"seeds": named["seeds"]} if "seeds" in named else {}  # else RunSpec's default
    return RunSpec.of(topology=topology, protocol=protocol,
                      config_file=Path(config) if config is not None else None,
                      options=options_of(named), sets=sets, objects=objects, **seeds)


def config_value(key: str, value: Any) -> Override:
    """A config key's value, which the run records as JSON (inputs.json)."""
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        raise LaunchError(f"{key}=: {type(value).__name__} is no config value (give "
                          "numbers, strings, booleans, lists and mappings of them)") from None
    return Override(key, value)

