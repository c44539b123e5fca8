"""Reading the packages' source for the defaults tests (test_defaults, test_plan_sections)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import Any


def literal_gets(source: str) -> Iterator[tuple[int, str, Any]]:
    """Every `<x>.get("key", <literal>)` of `source`: (line, key, the literal's value)."""
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "get" and len(node.args) == 2
                and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            try:
                default = ast.literal_eval(node.args[1])
            except ValueError:
                continue  # a name or an expression: not a literal said again here
            yield node.lineno, node.args[0].value, default
