"""The resolved run configuration: defaults file, then --config, then CLI options and --set.

Every layer is plain YAML data; the merge is recursive for mappings. Unknown keys are errors, so
a typo in a config never silently does nothing.
"""

from __future__ import annotations

import copy
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from dfl_node.learning.shards import DEFAULT_EVAL_SIZE
from launcher.config.backend_catalog import DEFAULT_LOCAL
from launcher.errors import LaunchError

# Keys every run has, beside the protocol's own defaults file.
BASE: dict[str, Any] = {
    "seed": 0,
    "transport": DEFAULT_LOCAL,
    "rounds": 20,
    "eval_every": 1,
    "checkpoint_every": 10,  # every node saves its full state every k rounds (0: never)
    "dataset": "synthetic",
    "data_root": None,
    "partition": "iid",
    "eval_split": "global",
    "eval_size": DEFAULT_EVAL_SIZE,
    "mixing": "metropolis",
    "model": {"name": "auto"},
    "hyper": {"torch_threads": 1},
    "synthetic": {},
    # per-cycle metrics (launcher/results/cycle_metrics.py): parameters to the collector every
    # k rounds (0: never), accuracy thresholds for cycles-to-threshold
    "cycle_metrics": {"params_every": 0, "thresholds": []},
    "scenes": {},  # dataset scenes: its options, read by the protocol that brings it
    "link": {"latency_ms": 1.0, "bandwidth_mbps": 100.0, "compute_ms": 10.0,
             # the radio model (dfl_node/netsim/radio.py): packets, loss, retransmissions
             "packet_bytes": 1500, "loss_model": "fixed", "loss": 0.0, "snr0_db": 20.0,
             "d0": None, "path_loss_exponent": 3.0, "spectral_efficiency": 2.0,
             "retransmissions": "expected"},
    # | tdma: exchanges follow the link-colouring slots (dfl_node/netsim/tdma.py)
    "schedule": "sync",
    "tdma": {"interference_range": None, "interference_factor": 1.0},  # None: factor x r_c
    "wire": {"hwm": 1000, "recv_timeout_s": 300.0, "max_tensors": 4096,
             "max_message_bytes": 1 << 30,
             # how long a node waits for the rest of the mesh to start (None: recv_timeout_s)
             "rendezvous_s": None,
             # liveness (dfl_node/transports/liveness.py): a neighbour silent this long is dead;
             # then the run stops, or (continue) the survivors go on without it
             # (dfl_node/runner/membership.py)
             "deadline_s": 10.0, "on_failure": "stop"},
    # host:port of the run's services when nodes run on several hosts (None: a local port)
    "endpoints": {"collector": None, "coordinator": None, "aggregator": None},
    # --secure: CURVE on every socket of the run; `keys`: the directory of its key files
    # (launcher/config/keys.py; a local launch uses RUN_DIR/keys when None)
    "secure": False,
    "keys": None,
}


# `model: {name: auto}` picks the dataset's default model.
DEFAULT_MODELS = {"synthetic": "mlp", "fmnist": "cnn", "cifar10": "cnn"}

# Mappings whose keys belong to a protocol or model and are checked there, not here.
FREE_FORM = frozenset({"model", "synthetic", "scenes", "hyper"})


def same_kind(current: dict[str, Any], layer: dict[str, Any]) -> bool:
    """A layer naming another model starts from scratch: one model's options mean nothing to
    another."""
    return layer.get("name", current.get("name")) == current.get("name")


def defaults_file(protocol: str) -> Path:
    return Path(str(resources.files("protocols") / "configs" / f"{protocol}.yaml"))


def read_yaml_mapping(path: Path, what: str) -> dict[str, Any]:
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise LaunchError(f"{path}: {what} not found") from None
    except OSError as exc:
        raise LaunchError(f"{path}: {what} cannot be read: {exc.strerror}") from None
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise LaunchError(f"{path}: {what} is not valid YAML: {reason}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise LaunchError(f"{path}: {what} must be a mapping")
    return data


def merge(base: dict[str, Any], layer: dict[str, Any], source: str) -> dict[str, Any]:
    """`layer` over `base`; a key unknown to `base` is an error naming `source`."""
    out = copy.deepcopy(base)
    for key, value in layer.items():
        if key not in out:
            raise LaunchError(f"{source}: unknown config key {key!r}")
        if not isinstance(out[key], dict):
            out[key] = value
        elif not isinstance(value, dict):
            raise LaunchError(f"{source}: {key} must be a mapping")
        elif key in FREE_FORM:
            out[key] = {**out[key], **value} if same_kind(out[key], value) else dict(value)
        else:
            out[key] = merge(out[key], value, f"{source}: {key}")
    return out


def parse_set(item: str, config: dict[str, Any]) -> dict[str, Any]:
    """`key=value` or `a.b=value` (value parsed as YAML) as a config layer.

    A bare key that is not top-level but is a protocol hyper-parameter sets `hyper.key`, so
    `--set lr=0.05` works as a researcher expects.
    """
    if "=" not in item:
        raise LaunchError(f"--set {item!r}: expected key=value")
    key, raw = item.split("=", 1)
    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError:
        value = raw
    path = key.split(".")
    if len(path) == 1 and key not in config and key in config.get("hyper", {}):
        path = ["hyper", key]
    layer: dict[str, Any] = {path[-1]: value}
    for part in reversed(path[:-1]):
        layer = {part: layer}
    return layer


def resolve_config(protocol: str, config_file: Path | None, options: dict[str, Any],
                   sets: tuple[str, ...]) -> dict[str, Any]:
    defaults = defaults_file(protocol)
    if not defaults.exists():
        raise LaunchError(f"--protocol: no defaults file for {protocol!r} ({defaults})")
    config = merge(BASE, read_yaml_mapping(defaults, "protocol defaults"), str(defaults))
    if config_file is not None:
        config = merge(config, read_yaml_mapping(config_file, "config"), str(config_file))
    config = merge(config, {k: v for k, v in options.items() if v is not None}, "option")
    for item in sets:
        config = merge(config, parse_set(item, config), f"--set {item}")
    config["protocol"] = protocol
    if config["model"].get("name") == "auto":
        config["model"] = {**config["model"], "name": DEFAULT_MODELS.get(config["dataset"], "mlp")}
    return config
