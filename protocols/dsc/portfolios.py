"""Task portfolios T_i: which tasks each node learns (docs/protocols/dsc.md#a8).

A topology file may fix a node's portfolio with the node attribute `tasks: [seg, dep]`
(`DSCNodeAttributes`); every other node's portfolio is drawn from the run seed, so all processes
agree on it:
- `nyu` (docs/protocols/dsc.md#a8): the N = 10 multiset 2x{Seg,Sn,Dep}, 2x{Seg,Sn}, 3x{Seg,Dep},
  3x{Sn,Dep},
  cycled to N entries and placed on the nodes by a seeded permutation;
- `taskonomy` (docs/protocols/dsc.md#a8): each node draws a uniform subset of {Seg, Sn, KP, Edge}
  of size 2-3.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, get_args

from pydantic import AfterValidator, ValidationError

from dfl_config.problems import one_line
from dfl_config.section import Section
from protocols.dsc.taskdata import TASKS, Task
from protocols.sdk import numpy_stream

Portfolio = tuple[str, ...]
PortfolioScheme = Literal["nyu", "taskonomy"]

NYU_GROUPS: tuple[Portfolio, ...] = (
    ("seg", "sn", "dep"), ("seg", "sn", "dep"), ("seg", "sn"), ("seg", "sn"),
    ("seg", "dep"), ("seg", "dep"), ("seg", "dep"), ("sn", "dep"), ("sn", "dep"), ("sn", "dep"),
)
TASKONOMY_TASKS = ("seg", "sn", "kp", "edge")
TASKONOMY_SUBSETS: tuple[Portfolio, ...] = tuple(
    c for k in (2, 3) for c in itertools.combinations(TASKONOMY_TASKS, k))
SCHEMES: tuple[str, ...] = get_args(PortfolioScheme)


def canonical(tasks: Sequence[str]) -> Portfolio:
    """The tasks in the global order of `TASKS`, so that every process lists a portfolio (and
    stacks its policies on the wire) alike; a repeat or an empty list is refused."""
    if not tasks or len(set(tasks)) != len(tasks):
        raise ValueError(f"must be distinct task names, at least one, got {list(tasks)}")
    return tuple(t for t in TASKS if t in tasks)


class DSCNodeAttributes(Section):
    """The topology node attributes the DSC family reads."""

    tasks: Annotated[tuple[Task, ...], AfterValidator(canonical)] | None = None
    """The node's portfolio T_i (e.g. `[seg, dep]`); absent: drawn by the `scenes.portfolios`
    scheme."""


def draw_portfolios(node_ids: Sequence[int], seed: int,
                    scheme: PortfolioScheme) -> dict[int, Portfolio]:
    rng = numpy_stream(seed, -1, f"portfolios/{scheme}")
    if scheme == "nyu":
        groups = [NYU_GROUPS[k % len(NYU_GROUPS)] for k in range(len(node_ids))]
        order = rng.permutation(len(node_ids))
        return {node: groups[k] for node, k in zip(node_ids, order, strict=True)}
    if scheme == "taskonomy":
        picks = rng.integers(0, len(TASKONOMY_SUBSETS), len(node_ids))
        return {node: TASKONOMY_SUBSETS[k] for node, k in zip(node_ids, picks, strict=True)}
    raise ValueError(f"unknown portfolio scheme {scheme!r} (known: {', '.join(SCHEMES)})")


def node_portfolios(attrs: Mapping[int, Mapping[str, Any]], seed: int,
                    scheme: PortfolioScheme) -> dict[int, Portfolio]:
    """Portfolio per node id: the node's `tasks` attribute where set, else the seeded draw.
    Other attributes (another family's) are not this family's to check."""
    drawn = draw_portfolios(sorted(attrs), seed, scheme)
    out = {}
    for node, given in sorted(attrs.items()):
        try:
            tasks = DSCNodeAttributes.model_validate({"tasks": given.get("tasks")}).tasks
        except ValidationError as exc:
            raise ValueError(f"node {node}: {one_line(exc, DSCNodeAttributes)}") from None
        out[node] = drawn[node] if tasks is None else tasks
    return out
