"""MkDocs hook: docs/configuration.md's reference is generated from the JSON Schema that
`dfl-launch schema` prints, so every key, type, default and description there is the one the
models enforce (a key added to a model appears here; a removed one disappears).

The page holds markers: `<!-- config:run -->` (every section of the run config, hyper
excepted) and `<!-- config:hyper -->` (one table per protocol's hyper, nested sections after).
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterator, Mapping
from typing import Any

from launcher.config.schema import config_schema
from protocols.registry import PROTOCOLS


def _deref(node: Mapping[str, Any], defs: Mapping[str, Any]) -> Mapping[str, Any]:
    while "$ref" in node:
        node = defs[node["$ref"].rsplit("/", 1)[-1]]
    return node


def _type(node: Mapping[str, Any], defs: Mapping[str, Any]) -> str:
    node = _deref(node, defs)
    for key in ("anyOf", "oneOf"):
        if key in node:
            return " or ".join(dict.fromkeys(_type(alt, defs) for alt in node[key]))
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    if "enum" in node:
        return " or ".join(f"`{json.dumps(v)}`" for v in node["enum"])
    if node.get("type") == "array":
        return f"list of {_type(node.get('items', {}), defs)}"
    if node.get("type") == "object" or "properties" in node:
        return "mapping"
    return str(node.get("type", "any"))


def _object(node: Mapping[str, Any], defs: Mapping[str, Any]) -> Mapping[str, Any] | None:
    node = _deref(node, defs)
    return node if "properties" in node else None


def _alternatives(node: Mapping[str, Any], defs: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The kinds a section may be (unions and optional sections flattened)."""
    node = _deref(node, defs)
    for key in ("anyOf", "oneOf"):
        if key in node:
            return [alt for sub in node[key] for alt in _alternatives(sub, defs)]
    return [node]


def table(node: Mapping[str, Any], defs: Mapping[str, Any]) -> list[str]:
    rows = ["| key | type | default | meaning |", "| --- | --- | --- | --- |"]
    for key, prop in node.get("properties", {}).items():
        default = f"`{json.dumps(prop['default'])}`" if "default" in prop else ""
        text = html.escape(" ".join(str(prop.get("description", "")).split()), quote=False)
        text = text.replace("|", "&#x7C;")
        rows.append(f"| `{key}` | {_type(prop, defs)} | {default} | {text} |")
    return rows


def sections(node: Mapping[str, Any], defs: Mapping[str, Any], path: str,
             skip: tuple[str, ...] = ()) -> Iterator[str]:
    """A table for `node`, then one per nested section (unions: one per alternative)."""
    yield f"#### `{path}`" if path else "#### top level"
    yield ""
    yield from table(node, defs)
    yield ""
    for key, prop in node.get("properties", {}).items():
        if key in skip:
            continue
        for alt in _alternatives(prop, defs):
            sub = _object(alt, defs)
            if sub is not None:
                tag = next((f" ({p['const']})" for p in sub["properties"].values()
                            if isinstance(p, Mapping) and "const" in p), "")
                yield from sections(sub, defs, f"{path}.{key}{tag}".lstrip("."))


def run_reference() -> str:
    schema = config_schema()
    return "\n".join(sections(schema, schema.get("$defs", {}), "", skip=("hyper",)))


def hyper_reference() -> str:
    out = []
    for protocol in PROTOCOLS:
        schema = config_schema(protocol)
        defs = schema.get("$defs", {})
        hyper = _object(schema["properties"]["hyper"], defs)
        assert hyper is not None
        out.append(f"### {protocol}\n")
        out += sections(hyper, defs, "hyper")
    return "\n".join(out)


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if "<!-- config:" not in markdown:
        return markdown
    return (markdown.replace("<!-- config:run -->", run_reference())
            .replace("<!-- config:hyper -->", hyper_reference()))
