"""A config field's description: the docstring written under it, read from its module's source.

    class LinkSettings(Section):
        loss: UnitInterval = 0.0
        \"\"\"The chance that a frame is lost.\"\"\"   <- the description of `loss`

The descriptions feed `dfl-launch schema` and the configuration reference generated from it.
pydantic's own `use_attribute_docstrings` finds the same strings, but on Python < 3.13 it looks
for each model's source by walking the interpreter's stack and tokenizing the class's lines, a
few milliseconds per model, paid on import by every model of every protocol: a refusal of bad
input, which loads them all, spent about a third of its CPU time there (issue 45). Here a class
is found by its qualified name in its module's source, parsed once (`ast`, in C); a class of a
module's top level, the common case, by its own lines alone (the syntax trees of whole
modules, function bodies and all, were a tenth of the CPU time of a refusal that loads every
protocol).
"""

from __future__ import annotations

import ast
import inspect
import linecache
import re
import sys
from functools import cache
from itertools import pairwise


def field_docstrings(cls: type) -> dict[str, str]:
    """Field name -> the string literal right below its annotated assignment in `cls`'s own
    class statement (cleaned like a docstring); {} for a class without one, as a model made by
    `create_model` or a class whose source is not at hand."""
    own = set(inspect.get_annotations(cls))
    top_level, named = _top_level_bodies(cls.__module__)
    bodies = top_level.get(cls.__qualname__)
    if bodies is None and cls.__qualname__.rpartition(".")[2] in named:  # not of the top level
        bodies = _class_bodies(cls.__module__).get(cls.__qualname__)  # alone: the whole tree
    candidates = [body for body in bodies or [] if _annotated(body) == own]
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


def _source(module_name: str) -> tuple[str, list[str]]:
    module = sys.modules.get(module_name)
    filename = getattr(module, "__file__", None)
    lines = linecache.getlines(filename, module.__dict__) if module and filename else []
    return str(filename), lines


_CLASS_LINE = re.compile(r"(\s*)class\s+(\w+)")


@cache
def _top_level_bodies(module_name: str) -> tuple[dict[str, list[list[ast.stmt]]], set[str]]:
    """The body of each class statement of a module's top level, parsed from its own lines
    (from `class` to the next line that starts at the margin, not a comment), by name: only
    names no indented class statement binds too, and no lines that parse as anything but one
    class statement (a cut in a string or in brackets), so that each is what the whole tree
    holds; `_class_bodies` finds the others. (A line at the margin inside a string literal that
    reads as a statement of a class of the module would be taken for one; none here does.) And
    every name a class statement binds: a class of none (made by `create_model`) has no body
    to look for."""
    filename, lines = _source(module_name)
    starts: dict[str, list[int]] = {}
    indented: set[str] = set()
    for number, line in enumerate(lines):
        found = _CLASS_LINE.match(line)
        if found and found[1]:
            indented.add(found[2])
        elif found:
            starts.setdefault(found[2], []).append(number)
    bodies: dict[str, list[list[ast.stmt]]] = {}
    for name, numbers in starts.items():
        if name in indented:
            continue
        try:
            found_all = [_one_class(lines, start, filename) for start in numbers]
        except SyntaxError:
            continue
        if all(stmt is not None and stmt.name == name for stmt in found_all):
            bodies[name] = [stmt.body for stmt in found_all if stmt is not None]
    return bodies, {*starts, *indented}


def _one_class(lines: list[str], start: int, filename: str) -> ast.ClassDef | None:
    """The class statement starting at line `start`, alone; None if its lines hold more."""
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or lines[end][0] in " \t#"):
        end += 1
    tree = ast.parse("".join(lines[start:end]), filename)
    return tree.body[0] if len(tree.body) == 1 and isinstance(tree.body[0], ast.ClassDef) else None


@cache
def _class_bodies(module_name: str) -> dict[str, list[list[ast.stmt]]]:
    """The body of every class statement in a module's source, by qualified name (several
    where a name is bound twice, as in the branches of an `if`)."""
    filename, lines = _source(module_name)
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
