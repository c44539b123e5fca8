"""A pydantic ValidationError as the one line a user reads: where, what, and what they meant.

`SOURCE: dotted.path: reason (did you mean local_steps?)`: the source is the file or option the
value came from, the path is the key inside it, and the suggestion is the closest key the model
knows at that place (difflib), found in the model's JSON Schema so that it works the same inside
nested sections, lists and discriminated unions.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema


class ShapeOnly(GenerateJsonSchema):
    """A model's JSON Schema without its defaults: `walk` reads keys, nesting and tags alone,
    and encoding each default (a TypeAdapter apiece) was a quarter of the schema's cost at
    every refused key (issue 45)."""

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        return self.generate_inner(schema["schema"])


def dotted(loc: Iterable[int | str]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _resolve(schema: Mapping[str, Any], defs: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The alternatives a schema node stands for ($ref, anyOf, oneOf, allOf followed)."""
    if "$ref" in schema:
        return _resolve(defs[schema["$ref"].rsplit("/", 1)[-1]], defs)
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return [alt for sub in schema[key] for alt in _resolve(sub, defs)]
    return [schema]


def walk(schema: Mapping[str, Any],
         loc: Iterable[int | str]) -> tuple[list[int | str], list[str]]:
    """The user's path to `loc` (pydantic puts a union's tag in its locations; a user never
    wrote it) and every key an object there may hold, over all the alternatives it can be."""
    defs = schema.get("$defs", {})
    nodes = _resolve(schema, defs)
    path: list[int | str] = []
    for part in loc:
        nxt: list[Mapping[str, Any]] = []
        for node in nodes:
            if isinstance(part, int):
                for key in ("items", "additionalProperties"):
                    if isinstance(node.get(key), Mapping):
                        nxt += _resolve(node[key], defs)
            elif part in node.get("properties", {}):
                nxt += _resolve(node["properties"][part], defs)
            elif isinstance(node.get("additionalProperties"), Mapping):
                nxt += _resolve(node["additionalProperties"], defs)
        if nxt:
            path.append(part)
            nodes = nxt
        else:  # a union's tag: keep the alternatives it names
            nodes = [node for node in nodes if _tagged(node, part)] or nodes
    return path, sorted({key for node in nodes for key in node.get("properties", {})})


def _tagged(node: Mapping[str, Any], tag: int | str) -> bool:
    return any(prop.get("const") == tag or tag in prop.get("enum", ())
               for prop in node.get("properties", {}).values() if isinstance(prop, Mapping))


def suggestion(word: str, known: Iterable[str],
               key: Callable[[str], str] = lambda name: name) -> str:
    """` (did you mean X?)` for the closest of `known` (compared by `key(X)`), or ""."""
    names = {key(name): name for name in sorted(known, reverse=True)}
    close = difflib.get_close_matches(word, list(names), n=1, cutoff=0.6)
    return f" (did you mean {names[close[0]]}?)" if close else ""


# pydantic's bound constraints (`Field(gt=0)`, dfl_config.section's number types): its error
# type -> the constraint's name and how the line says it.
BOUNDS = {"greater_than": ("gt", ">"), "greater_than_equal": ("ge", ">="),
          "less_than": ("lt", "<"), "less_than_equal": ("le", "<=")}


def broken_bound(kind: str, ctx: Mapping[str, Any], given: Any) -> str:
    """`must be > 0, got -1`; an integer below 1 is `must be a positive integer, got 0`."""
    name, sign = BOUNDS[kind]
    limit = ctx[name]
    whole = isinstance(given, int) or (isinstance(given, float) and given.is_integer()
                                       and abs(given) < 1e15)
    if sign == ">=" and limit == 1 and isinstance(given, int):
        reason = "must be a positive integer"
    else:
        reason = f"must be {sign} {limit:g}"
    return f"{reason}, got {int(given) if whole else repr(given)}"


def one_line(error: ValidationError, model: type[BaseModel] | Mapping[str, Any],
             prefix: Iterable[int | str] = ()) -> str:
    """The first problem of `error` as `path: reason (did you mean ...?)`; `prefix` is the path
    of the validated mapping inside the user's file (e.g. `hyper`)."""
    schema = model if isinstance(model, Mapping) else model.model_json_schema(
        schema_generator=ShapeOnly)
    first = error.errors(include_url=False)[0]
    loc = tuple(first["loc"])
    if first["type"] == "extra_forbidden":
        path, keys = walk(schema, loc[:-1])
        where = dotted((*prefix, *path, loc[-1]))
        word = str(loc[-1])
        # A key of a section one level down, given without it (`lrr` for `hyper.lr`).
        hint = suggestion(word, keys) or suggestion(word, [
            f"{key}.{sub}" for key in keys for sub in walk(schema, (*loc[:-1], key))[1]],
            key=lambda qualified: qualified.rsplit(".", 1)[-1])
        return f"{where}: unknown key{hint}"
    path, _ = walk(schema, loc)
    where = dotted((*prefix, *path)) or "(top level)"
    if first["type"] == "union_tag_invalid":
        ctx = first.get("ctx", {})
        tag, expected = str(ctx.get("tag")), str(ctx.get("expected_tags"))
        key = str(ctx.get("discriminator", "")).strip("'").removesuffix("()")
        hint = suggestion(tag, re.findall(r"'([^']*)'", expected))
        return f"{where}.{key}: unknown {tag!r}{hint} (known: {expected})"
    given = first.get("input")
    if first["type"] in BOUNDS:
        return f"{where}: {broken_bound(first['type'], first.get('ctx', {}), given)}"
    reason = str(first["msg"]).removeprefix("Value error, ")
    if isinstance(given, str | int | float | bool) and "got" not in reason \
            and repr(given) not in reason:
        reason += f", got {given!r}"
    return f"{where}: {reason[:1].lower()}{reason[1:]}"
