"""The resolved run configuration: the protocol's run defaults, then --config, options, --set.

Every layer is plain data (a file's YAML, a RunSpec's options and overrides), merged recursively
over the ones before it; after each layer the merged config is validated against the run's
typed model (launcher/config/run_settings.py), so a mistake is reported with the layer it came from:
`SOURCE: dotted.path: reason (did you mean X?)`. Defaults live in the models, not here; a protocol's
run defaults (`ProtocolDeclaration.run_defaults`) are its declaration's overrides of them, and the
YAML files under protocols/configs are presets for `--config` (the papers' settings) that hold only
what differs from those (docs/defaults.md).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from dfl_config.limits import oversized_file
from dfl_config.problems import one_line
from launcher.config.checks import check_aggregation_declared
from launcher.config.run_settings import AUTO, DEFAULT_MODELS, RunSettings, run_config_model
from launcher.config.run_spec import Override
from launcher.errors import LaunchError
from protocols.registry import protocol_spec

# CLI options that set a key of another name (the rest are `--` + the key, dashed).
OPTION_FLAGS = {("wire", "deadline_s"): "--deadline", ("wire", "on_failure"): "--on-failure"}


# The keys that pick one kind of a section among several (a model's name, a compressor's type,
# a channel's kind, an aggregation rule): dfl_config.section.tagged_union.
KIND_KEYS = ("name", "type", "kind", "rule")


def same_kind(current: dict[str, Any], layer: dict[str, Any]) -> bool:
    """A layer naming another kind of a section (another model, another sparsifier) starts it
    from scratch: one kind's options mean nothing to another."""
    return all(layer.get(key, current.get(key)) == current.get(key) for key in KIND_KEYS)


def preset_file(name: str) -> Path:
    """A shipped preset, `protocols/configs/<name>.yaml` (for `--config`)."""
    return Path(str(resources.files("protocols") / "configs" / f"{name}.yaml"))


def run_default(protocol: str, key: str) -> Any:
    """A top-level run key's default for `protocol` (`rounds`, `eval_every`, ...): its
    declaration's where it says one, else the run config model's."""
    declared = protocol_spec(protocol).run_defaults
    return declared[key] if key in declared else RunSettings.model_fields[key].default


def read_yaml_mapping(path: Path, what: str) -> dict[str, Any]:
    too_large = oversized_file(path, f"a {what} file")
    if too_large:
        raise LaunchError(too_large)
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


def merge(base: dict[str, Any], layer: dict[str, Any]) -> dict[str, Any]:
    """`layer` over `base`, mappings merged key by key (the model checks the keys)."""
    out = copy.deepcopy(base)
    for key, value in layer.items():
        current = out.get(key)
        if isinstance(current, dict) and isinstance(value, dict) and same_kind(current, value):
            out[key] = merge(current, value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def override_layer(override: Override, top_keys: set[str],
                   hyper_keys: set[str]) -> dict[str, Any]:
    """`key=value` or `a.b=value` as a config layer.

    A key whose first part is not top-level but is a protocol hyper-parameter is under `hyper`,
    so `--set lr=0.05` and `--set accounting.b_hdr=32` work as a researcher expects.
    """
    path = override.key.split(".")
    if path[0] not in top_keys and path[0] in hyper_keys:
        path = ["hyper", *path]
    layer: dict[str, Any] = {path[-1]: override.value}
    for part in reversed(path[:-1]):
        layer = {part: layer}
    return layer


def with_model(config: dict[str, Any]) -> dict[str, Any]:
    """`model: {name: auto}` (or no model) as the dataset's default model."""
    model = dict(config.get("model") or {})
    if model.get("name", AUTO) == AUTO:
        dataset = config.get("dataset", RunSettings.model_fields["dataset"].default)
        model["name"] = DEFAULT_MODELS.get(dataset, "mlp")
    return {**config, "model": model}


def option_layers(options: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Each CLI option as a layer of its own, named by its flag."""
    out = []
    for key, value in options.items():
        if isinstance(value, dict):
            out += [(OPTION_FLAGS.get((key, sub), f"--{sub.replace('_', '-')}"),
                     {key: {sub: v}}) for sub, v in value.items() if v is not None]
        elif value is not None:
            out.append((f"--{key.replace('_', '-')}", {key: value}))
    return out


def resolve_config(protocol: str, config_file: Path | None, options: dict[str, Any],
                   sets: Sequence[Override]) -> dict[str, Any]:
    model = run_config_model(protocol)
    hyper_keys = set(model.model_fields["hyper"].annotation.model_fields)  # type: ignore[union-attr]
    layers = [(f"{protocol}'s run defaults", dict(protocol_spec(protocol).run_defaults))]
    if config_file is not None:
        layers.append((str(config_file), read_yaml_mapping(config_file, "config")))
    layers += option_layers(options)
    layers += [(f"--set {o.item}", override_layer(o, set(model.model_fields), hyper_keys))
               for o in sets]
    merged: dict[str, Any] = {}
    validated = model.model_validate(with_model(merged))
    robust = protocol_spec(protocol).robust_aggregation
    for source, layer in layers:
        check_aggregation_declared(source, layer, protocol, robust)
        merged = merge(merged, layer)
        try:
            validated = model.model_validate(with_model(merged))
        except ValidationError as exc:
            raise LaunchError(f"{source}: {one_line(exc, model)}") from None
    config = validated.model_dump(mode="json")
    config["protocol"] = protocol
    return config
