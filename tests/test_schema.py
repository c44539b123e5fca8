"""`dfl-launch schema` prints the JSON Schema of config and topology files, made from the models
that validate them: it accepts every shipped file and refuses a misspelt key, so an editor or a
CI step refuses what dfl-launch would."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from launcher.config.schema import config_schema
from protocols.registry import PROTOCOLS
from tests.harness import ENV_ROOT, ROOT

CONFIGS = sorted((ROOT / "protocols" / "configs").glob("*.yaml"))
TOPOLOGIES = sorted((ROOT / "topologies").glob("*.yaml"))


def schema_cli(*args: str) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "launcher.cli", "schema", *args], cwd=ROOT,
                          env=ENV_ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def protocol_of(path: Path) -> str:
    """A shipped preset is named after its protocol (dmfl-sq-cifar10: dmfl-sq)."""
    return max((p for p in PROTOCOLS if path.stem.startswith(p)), key=len)


def test_every_shipped_config_file_satisfies_its_protocols_schema_and_the_general_one() -> None:
    general = schema_cli()
    for path in CONFIGS:
        data = yaml.safe_load(path.read_text()) or {}
        jsonschema.validate(data, general)
        jsonschema.validate(data, config_schema(protocol_of(path)))


def test_every_protocol_has_a_schema_that_knows_its_hyper_parameters() -> None:
    for protocol, cls in PROTOCOLS.items():
        schema = schema_cli("--protocol", protocol) if protocol == "d-psgd" else \
            config_schema(protocol)
        hyper = jsonschema.validators.validator_for(schema)(schema)
        fields = set(cls.Hyper.model_fields)
        assert {"torch_threads", "deterministic"} <= fields
        for field in fields:
            assert hyper.is_valid({"hyper": {field: cls.Hyper().model_dump(mode="json")[field]}}), \
                (protocol, field)


def test_every_shipped_topology_satisfies_the_topology_schema() -> None:
    schema = schema_cli("--topology")
    for path in TOPOLOGIES:
        jsonschema.validate(yaml.safe_load(path.read_text()), schema)


@pytest.mark.parametrize(("args", "path", "typo", "key", "value"), [
    (("--protocol", "d-psgd"), ("hyper",), "lcoal_steps", "local_steps", 5),
    (("--protocol", "dmfl-sq"), ("hyper", "compressor", "sparsifier"), "ratoi", "ratio", 0.1),
    ((), ("wire",), "hwmm", "hwm", 10),
    ((), (), "roudns", "rounds", 3),
])
def test_the_config_schema_refuses_a_misspelt_key(args: tuple[str, ...], path: tuple[str, ...],
                                                  typo: str, key: str, value: Any) -> None:
    schema = config_schema(args[1] if args else None)

    def document(name: str) -> dict[str, Any]:
        doc: dict[str, Any] = {name: value}
        for part in reversed(path):
            doc = {part: doc}
        return doc

    jsonschema.validate(document(key), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document(typo), schema)


@pytest.mark.parametrize(("node", "edge"), [
    ({"id": 0, "compute_sm": 1.0}, [0, 1]),
    ({"id": 0}, {"u": 0, "v": 1, "latncy_ms": 1.0}),
])
def test_the_topology_schema_refuses_a_misspelt_key(node: dict[str, Any], edge: Any) -> None:
    schema = config_schema(topology=True)
    right = {"nodes": [{"id": 0, "compute_ms": 1.0}, {"id": 1}], "edges": [[0, 1]]}
    jsonschema.validate(right, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"nodes": [node, {"id": 1}], "edges": [edge]}, schema)


def test_schema_of_an_unknown_protocol_is_exit_2() -> None:
    proc = subprocess.run([sys.executable, "-m", "launcher.cli", "schema", "--protocol", "nope"],
                          cwd=ROOT, env=ENV_ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "unknown protocol 'nope'" in proc.stderr


def test_the_configuration_reference_page_lists_every_setting() -> None:
    """docs/configuration.md's tables come from the schema (docs/hooks/config_reference.py)."""
    spec = importlib.util.spec_from_file_location(
        "config_reference", ROOT / "docs" / "hooks" / "config_reference.py")
    assert spec is not None and spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    page = hook.on_page_markdown((ROOT / "docs" / "configuration.md").read_text(), None)
    assert "<!-- config:" not in page
    for protocol, cls in PROTOCOLS.items():
        section = page.split(f"### {protocol}\n", 1)[1].split("\n### ", 1)[0]
        for field in cls.Hyper.model_fields:
            assert f"| `{field}` |" in section, (protocol, field)
    for field in ("rounds", "latency_ms", "deadline_s", "interference_range", "params_every"):
        assert f"| `{field}` |" in page
