"""The JSON Schema of config and topology files, from the same models that validate them.

An editor (VS Code's YAML extension, `# yaml-language-server: $schema=...`) or a CI step
(`check-jsonschema`) then refuses what dfl-launch would refuse, and docs/configuration.md's
reference is generated from it (docs/hooks/config_reference.py).
"""

from __future__ import annotations

from typing import Any

from launcher.errors import LaunchError
from protocols.registry import PROTOCOLS, unknown_protocol

DIALECT = "https://json-schema.org/draft/2020-12/schema"


def config_schema(protocol: str | None = None, topology: bool = False) -> dict[str, Any]:
    """The schema asked for; the models are imported once the request is known to be good: an
    unknown protocol is one line, and costs none of them (issue 45)."""
    if topology:
        if protocol is not None:
            raise LaunchError("--topology: topology files do not depend on --protocol; drop it")
        from launcher.config.run_settings import node_attributes_model
        from topologies.schema import topology_json_schema

        schema = topology_json_schema(node_attributes_model())
    else:
        if protocol is not None and protocol not in PROTOCOLS:
            raise LaunchError(f"--protocol: {unknown_protocol(protocol)}")
        from launcher.config.run_settings import run_config_model

        schema = any_of(run_config_model(protocol).model_json_schema())
    return {"$schema": DIALECT, **schema}


def any_of(node: Any) -> Any:
    """pydantic writes a union of sections as `oneOf`, but a section without its kind key is its
    default kind (dfl_config.section.tagged_union), so a mapping may fit several alternatives
    (`{ratio: 0.1}` is a valid topk and randk sparsifier): `anyOf` says what the models accept."""
    if isinstance(node, dict):
        return {("anyOf" if key == "oneOf" else key): any_of(value) for key, value in node.items()}
    if isinstance(node, list):
        return [any_of(item) for item in node]
    return node
