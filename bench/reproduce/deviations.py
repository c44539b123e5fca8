"""Every setting the paper states for an experiment, beside the value a budget runs and why it
differs: made from the runs' own resolved configs, so the page cannot drift from what ran.

A recipe says what the paper states (`Stated`: its words and, where they are a number or a
name of ours, that value) and, per budget, why a value differs (`Recipe.why`). The value used
is read from the config each arm resolves to (the launcher's own resolution: protocol
defaults, config file, the arm's settings), per method where methods differ (each method's lr).
A used value that differs from the paper's stated value with no reason given is a defect that
tests/test_reproduce.py finds, so a budget cannot quietly change a setting.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from bench.reproduce.arms import Arm
from bench.reproduce.graphs import materialize
from dfl_node.settings.data import SyntheticSettings
from launcher.api.settings import keyword_spec
from launcher.config.inputs import resolve_inputs
from protocols.registry import protocol_spec

SETTINGS = ("rounds", "epochs", "local steps", "model", "P", "lr", "batch", "N", "graph",
            "split", "test set", "seeds")
"""The rows of every table, in this order (a setting the paper does not state says so)."""


@dataclass(frozen=True)
class Stated:
    """What the paper states for one setting."""

    text: str
    """Its words ("T = 500", "not stated")."""
    value: Any = None
    """The same in our terms, to compare with what runs: one value, or {method: value}; None
    when the paper gives none to compare (not stated, or words only)."""


@dataclass(frozen=True)
class Row:
    setting: str
    paper: str
    used: str
    """The value of every arm, `method value` per method when they differ."""
    differs: bool
    """From the paper's stated value, or said by the recipe (a reason for it)."""
    why: str


Resolved = dict[str, Any]
"""An arm's resolved config plus `N` and `graph` (its topology's)."""


def resolved(arm: Arm, common: Mapping[str, Any]) -> Resolved:
    """The config `arm` runs with, as the launcher resolves it (seed 0: seeds do not change
    settings)."""
    materialize(arm.topology)  # a generated graph is written where its runs will read it
    variant = arm.variant(common)
    settings = {k: v for k, v in variant.settings.items() if k != "seed"}
    return dict(_resolve(arm.topology, arm.protocol,
                         str(variant.config) if variant.config else None,
                         _frozen(settings)))


def _frozen(value: Any) -> Any:
    """A hashable stand-in for settings, for the cache (JSON-like values only)."""
    if isinstance(value, Mapping):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, list | tuple):
        return ("__list__", *(_frozen(v) for v in value))
    return value


def _thawed(value: Any) -> Any:
    if isinstance(value, tuple):
        if value and value[0] == "__list__":
            return [_thawed(v) for v in value[1:]]
        return {k: _thawed(v) for k, v in value}
    return value


@lru_cache(maxsize=512)
def _resolve(topology: str, protocol: str, config: str | None,
             settings: Any) -> tuple[tuple[str, Any], ...]:
    req = keyword_spec(topology, protocol, config, _thawed(settings), {})
    topo, config_ = resolve_inputs(req)
    return tuple({**config_, "N": len(topo.nodes), "graph": topo.name}.items())


def used_value(setting: str, config: Resolved, seeds: Sequence[int],
               parameters: Callable[[Resolved], int | None]) -> Any:
    """One setting's value in a resolved config (None: the protocol has no such setting)."""
    hyper = config.get("hyper", {})
    if setting == "rounds":
        return config["rounds"]
    if setting == "epochs":
        return hyper.get("epochs")
    if setting == "local steps":
        return hyper.get("local_steps")
    if setting == "model":
        return config.get("model", {}).get("name")
    if setting == "P":
        return parameters(config)
    if setting == "lr":
        return step_size(config["protocol"], hyper)
    if setting == "batch":
        return hyper.get("batch_size", hyper.get("batch_grad"))
    if setting in ("N", "graph"):
        return config[setting]
    if setting == "split":
        return config.get("partition")
    if setting == "test set":
        split, size = str(config.get("eval_split")), config.get("eval_size")
        return {"local": "own split", "global": f"global subset of {size}",
                "both": f"own split and global subset of {size}"}.get(split, split)
    if setting == "seeds":
        return ", ".join(map(str, seeds))
    raise ValueError(f"unknown setting {setting!r}")


def step_size(protocol: str, hyper: Mapping[str, Any]) -> Any:
    """The protocol's lr, or its law where it varies over rounds (DSGT's lr/sqrt(t+1))."""
    law = protocol_spec(protocol).Hyper.model_validate(hyper).step_size_law()
    return law if law is not None else hyper.get("lr")


def same_value(a: Any, b: Any) -> bool:
    if isinstance(a, int | float) and isinstance(b, int | float) and \
            not isinstance(a, bool) and not isinstance(b, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-9)
    return str(a) == str(b)


def show(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10_000:
        return f"{value:,}"
    return f"{value:g}" if isinstance(value, float) else str(value)


def rows(arms: Sequence[Arm], common: Mapping[str, Any], seeds: Sequence[int],
         stated: Mapping[str, Stated], why: Mapping[str, str],
         parameters: Callable[[Resolved], int | None]) -> list[Row]:
    """The table: one row per setting of SETTINGS."""
    configs = {arm: resolved(arm, common) for arm in arms}
    out = []
    for setting in SETTINGS:
        values = {arm: used_value(setting, config, seeds, parameters)
                  for arm, config in configs.items()}
        first = next(iter(values.values()))
        if all(same_value(v, first) for v in values.values()):
            used = show(first)
        else:  # one entry per distinct (method, value): an axis's arms name their point
            by_label: dict[str, Any] = {}
            for arm, v in values.items():
                shared = [a for a in values if a.method == arm.method]
                label = arm.method if all(same_value(values[a], v) for a in shared) \
                    else arm.label()
                by_label.setdefault(label, v)
            used = "; ".join(f"{label} {show(v)}" for label, v in by_label.items())
        paper = stated.get(setting, Stated("not stated"))
        differs = any(not same_value(v, expected) for arm, v in values.items()
                      if (expected := paper_value(paper, arm.method)) is not None)
        # a reason given marks a difference the paper's words state but no value can show
        out.append(Row(setting, paper.text, used, differs or setting in why,
                       why.get(setting, "")))
    return out


def paper_value(stated: Stated, method: str) -> Any:
    if isinstance(stated.value, Mapping):
        return stated.value.get(method)
    return stated.value


def to_markdown(tables: Mapping[str, list[Row]]) -> list[str]:
    """One table, a column of used values per budget: `tables` is {budget: rows}."""
    budgets = list(tables)
    lines = ["| setting | the paper | " + " | ".join(
        f"{b} budget" if b == "paper" else b for b in budgets) + " | why it differs |",
        "|---" * (len(budgets) + 3) + "|"]
    for i, setting in enumerate(SETTINGS):
        cells = [tables[b][i] for b in budgets]
        reasons: dict[str, list[str]] = {}
        for budget, cell in zip(budgets, cells, strict=True):
            if cell.differs and cell.why:
                reasons.setdefault(cell.why, []).append(budget)
        why = "; ".join(f"{'every budget' if len(bs) == len(budgets) else ', '.join(bs)}: {w}"
                        for w, bs in reasons.items())
        used = [("**" + c.used + "**") if c.differs else c.used for c in cells]
        lines.append(f"| {setting} | {cells[0].paper} | " + " | ".join(used) + f" | {why} |")
    return lines


# One sample's shape and the classes of the datasets whose models a table counts.
IMAGE_DATASETS: dict[str, tuple[tuple[int, ...], int]] = {
    "cifar10": ((3, 32, 32), 10), "fmnist": ((1, 28, 28), 10)}


def classifier_parameters(config: Resolved) -> int | None:
    """P of the classification model a config builds (None: not a classifier of a known
    dataset: a recipe whose protocol brings its own model counts it itself)."""
    dataset = str(config.get("dataset"))
    shape: tuple[int, ...]
    if dataset in IMAGE_DATASETS:
        shape, classes = IMAGE_DATASETS[dataset]
    elif dataset == "synthetic":
        section = SyntheticSettings(**(config.get("synthetic") or {}))
        shape, classes = (section.features,), section.classes
    else:
        return None
    return _parameters(repr(_frozen(config.get("model") or {})), shape, classes)


@lru_cache(maxsize=64)
def _parameters(model: str, shape: tuple[int, ...], classes: int) -> int:
    import ast

    from dfl_node.learning.models import build_model

    spec = _thawed(ast.literal_eval(model))
    return sum(p.numel() for p in build_model(spec, shape, classes, 0).parameters())
