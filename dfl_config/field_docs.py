"""A config field's description: the docstring written under it, read from its module's source.

    class LinkSettings(Section):
        loss: UnitInterval = 0.0
        \"\"\"The chance that a frame is lost.\"\"\"   <- the description of `loss`

The descriptions feed `dfl-launch schema` and the configuration reference generated from it.
pydantic's own `use_attribute_docstrings` finds the same strings, but on Python < 3.13 it looks
for each model's source by walking the interpreter's stack and tokenizing the class's lines, a
few milliseconds per model, paid on import by every model of every protocol: a refusal of bad
input, which loads them all, spent about a third of its CPU time there (issue 45). Here each
module's source is parsed once (`ast`, in C) and a class is found in it by its qualified name.
"""

from __future__ import annotations

import ast
import inspect
import linecache
import sys
from functools import cache
from itertools import pairwise


def field_docstrings(cls: type) -> dict[str, str]:
    """Field name -> the string literal right below its annotated assignment in `cls`'s own
    class statement (cleaned like a docstring); {} for a class without one, as a model made by
    `create_model` or a class whose source is not at hand."""
    own = set(inspect.get_annotations(cls))
    candidates = [body for body in _class_bodies(cls.__module__).get(cls.__qualname__, [])
                  if _annotated(body) == own]
    if len(candidates) != 1:  # not a class statement of these fields, or not one alone
        return {}
    body = candidates[0]
    return {
        first.target.id: inspect.cleandoc(second.value.value)
        for first, second in pairwise(body)
        if isinstance(first, ast.AnnAssign) and isinstance(first.target, ast.Name)
        and isinstance(second, ast.Expr) and isinstance(second.value, ast.Constant)
        and isinstance(second.value.value, str)
    }


def _annotated(body: list[ast.stmt]) -> set[str]:
    return {stmt.target.id for stmt in body
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)}


@cache
def _class_bodies(module_name: str) -> dict[str, list[list[ast.stmt]]]:
    """The body of every class statement in a module's source, by qualified name (several
    where a name is bound twice, as in the branches of an `if`)."""
    module = sys.modules.get(module_name)
    filename = getattr(module, "__file__", None)
    lines = linecache.getlines(filename, module.__dict__) if module and filename else []
    if not lines:
        return {}
    found: dict[str, list[list[ast.stmt]]] = {}

    def visit(statements: list[ast.stmt], prefix: str) -> None:
        for stmt in statements:
            if isinstance(stmt, ast.ClassDef):
                name = prefix + stmt.name
                found.setdefault(name, []).append(stmt.body)
                visit(stmt.body, f"{name}.")
            elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(stmt.body, f"{prefix}{stmt.name}.<locals>.")
            else:  # if, for, while, with, try, match: their blocks bind in this scope
                for block in ("body", "orelse", "finalbody"):
                    visit(getattr(stmt, block, []), prefix)
                for part in (*getattr(stmt, "handlers", ()), *getattr(stmt, "cases", ())):
                    visit(part.body, prefix)

    visit(ast.parse("".join(lines), str(filename)).body, "")
    return found
