"""The manual's page of every shipped protocol's run defaults and where each comes from
(docs/defaults.md), made from the models, the declarations and the presets:

    python -m launcher.config.defaults_page [--write]

A default is said once: in a model's field (the run config's keys, launcher/config/run_settings.py;
a protocol's `hyper`, its Hyper model), or in the protocol's declaration where its runs start
elsewhere (`ProtocolDeclaration.run_defaults`); a preset under protocols/configs (a paper's setting,
for `--config`) holds only what differs from those. The page is made, not written, so it cannot fall
behind them (tests/test_defaults.py checks it).
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from collections.abc import Iterator, Mapping
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from dfl_node.learning.generated import generated_datasets
from launcher.config.layers import resolve_config, with_model
from launcher.config.run_settings import AUTO, DEFAULT_MODELS, run_config_model
from launcher.errors import LaunchError
from protocols.registry import GROUP, PROTOCOLS

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "defaults.md"
PRESETS = ROOT / "protocols" / "configs"
# Sections every protocol's runs share, whatever their protocol (the runtime's and the
# launcher's own; docs/configuration.md and `dfl-launch schema`): not repeated per protocol.
SHARED = ("link", "tdma", "wire", "endpoints")
NOT_DEFAULTS = ("protocol", "data_root", "keys")


def flat(data: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key, value) of every leaf; a list is a leaf."""
    for key, value in data.items():
        if isinstance(value, Mapping) and value:
            yield from flat(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def shipped() -> dict[str, str]:
    """Each shipped protocol (registered from this package) with its spec's name."""
    found = {ep.name: ep for ep in entry_points(group=GROUP)}
    return {name: found[name].attr for name in PROTOCOLS
            if name in found and found[name].module.startswith("protocols.")}


def presets() -> list[Path]:
    return sorted(PRESETS.glob("*.yaml"))


def model_defaults(protocol: str) -> dict[str, Any]:
    """The config a protocol would run with if it declared no run defaults."""
    model = run_config_model(protocol)
    return model.model_validate(with_model({})).model_dump(mode="json")


def declared_in(model: type[BaseModel], name: str) -> str:
    """The class of `model`'s bases that declares field `name` (inherited fields too)."""
    return next((cls.__name__ for cls in model.__mro__ if name in inspect.get_annotations(cls)),
                model.__name__)


def states(default: Any, path: list[str]) -> bool:
    """Whether a field's default instance sets the value at `path` itself (Q8 o Top_0.01 in
    `DMFLSQHyper.compressor`), rather than leaving it to its own model's default."""
    if not path or not isinstance(default, BaseModel) or path[0] not in default.model_fields_set:
        return False
    child = getattr(default, path[0])
    return len(path) == 1 or not isinstance(child, BaseModel) or states(child, path[1:])


def declaring_class(settings: BaseModel, key: str) -> str:
    """The model that says the default at a dotted key: the field's, or an enclosing field's
    whose default instance sets it."""
    node: Any = settings
    parts = key.split(".")
    owner = type(settings).__name__
    for at, part in enumerate(parts):
        if not isinstance(node, BaseModel) or part not in type(node).model_fields:
            break
        owner = declared_in(type(node), part)
        if states(type(node).model_fields[part].default, parts[at + 1:]):
            return owner
        node = getattr(node, part)
    return owner


def source(settings: BaseModel, spec: str, key: str, declared: Mapping[str, Any]) -> str:
    if key in declared or (key == "model.name" and any(k.startswith("model.") for k in declared)):
        return f"declaration (`{spec}`)"
    if key == "model.name":
        return f"the dataset's model (`{AUTO}`)"
    return f"model (`{declaring_class(settings, key)}`)"


def shown(key: str, value: Any) -> bool:
    head = key.split(".")[0]
    return (head not in (*SHARED, *generated_datasets()) and key not in NOT_DEFAULTS
            and value != {})


def value(text: Any) -> str:
    return f"`{json.dumps(text, separators=(', ', ': '))}`"


def protocol_table(protocol: str, spec: str) -> list[str]:
    declared = dict(flat(PROTOCOLS[protocol].run_defaults))
    config = resolve_config(protocol, None, {}, ())
    settings = run_config_model(protocol).model_validate(
        {k: v for k, v in config.items() if k != "protocol"})
    rows = [f"| `{key}` | {value(v)} | {source(settings, spec, key, declared)} |"
            for key, v in flat(config) if shown(key, v)]
    return [f"## {protocol}", "", "| key | default | from |", "|---|---|---|", *rows, ""]


def preset_section(path: Path) -> list[str]:
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    usable = []
    for protocol in shipped():
        try:
            resolve_config(protocol, path, {}, ())
        except LaunchError:
            continue
        usable.append(protocol)
    rows = [f"| `{key}` | {value(v)} |" for key, v in flat(data)]
    return [f"### `{path.relative_to(ROOT)}`", "",
            f"With: {', '.join(f'`{p}`' for p in usable)}.", "",
            "| key | value |", "|---|---|", *rows, ""]


def render() -> str:
    lines = [
        "# Run defaults",
        "",
        "<!-- Made by `python -m launcher.config.defaults_page --write` from the models, the",
        "     protocols' declarations and the presets; tests/test_defaults.py checks it. -->",
        "",
        "Every default is said once. A run key's default is its field's in the run config model",
        "(`launcher/config/run_settings.py`, its sections in `dfl_node/settings/`), a `hyper`",
        "key's the field's in the protocol's Hyper model (`dfl-launch schema --protocol NAME`).",
        "Where a protocol's runs start elsewhere (a dataset, a partition, more rounds), its",
        "declaration says so (`ProtocolDeclaration.run_defaults`; a baseline inherits its lead's),",
        "and that is the first layer of every run's config",
        "([Configuration](configuration.md#layers)). The presets under `protocols/configs/` are",
        "the papers' settings for `--config`: they hold only what differs from these defaults.",
        "",
        f"The `{'`, `'.join((*SHARED, *generated_datasets()))}` sections are the same for every",
        "protocol (their fields:",
        "[Configuration](configuration.md), `dfl-launch schema`); `model.name: auto` picks",
        f"the dataset's model ({', '.join(f'{d}: `{m}`' for d, m in DEFAULT_MODELS.items())}).",
        "",
    ]
    for protocol, spec in shipped().items():
        lines += protocol_table(protocol, spec)
    lines += ["## Presets", ""]
    for path in presets():
        lines += preset_section(path)
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m launcher.config.defaults_page")
    ap.add_argument("--write", action="store_true", help="write docs/defaults.md")
    opts = ap.parse_args(argv)
    page = render()
    if opts.write:
        PAGE.write_text(page)
    else:
        sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
