"""Every default is said once: in a model's field, or in a protocol's declaration where its runs
start elsewhere. No reader repeats one (`.get("key", <the default>)`), no declaration or shipped
preset restates one, and the manual's page of them (docs/defaults.md) is made from them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, get_args

import pytest
import yaml
from pydantic import BaseModel
from pydantic_core import PydanticUndefined, to_jsonable_python

from bench.reproduce.paperdata import Paper
from dfl_node.plan import TYPED_SECTIONS
from launcher.config.defaults_page import (
    PAGE,
    declared_in,
    flat,
    model_defaults,
    presets,
    render,
    shipped,
)
from launcher.config.layers import resolve_config
from launcher.config.run_settings import node_attributes_model, run_config_model
from launcher.config.run_spec import RunSpec
from launcher.errors import LaunchError
from launcher.sweep.spec import SweepSpec
from protocols.registry import PROTOCOLS
from tests.source_walk import literal_gets

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("dfl_config", "topologies", "dfl_node", "protocols", "launcher", "dfl_mesh", "bench")


def nested_models(annotation: Any, seen: set[type[BaseModel]]) -> Iterator[type[BaseModel]]:
    """`annotation`'s models and theirs, through unions, Annotated and containers."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if annotation in seen:
            return
        seen.add(annotation)
        yield annotation
        for info in annotation.model_fields.values():
            yield from nested_models(info.annotation, seen)
    else:
        for arg in get_args(annotation):
            yield from nested_models(arg, seen)


def every_model() -> list[type[BaseModel]]:
    """The config models (every protocol's run config with its Hyper and sections, the node
    attributes), the plan's sections, and the request, sweep and paper files. (The node's
    records are tests/test_plan_sections.py's: their keys name other things in summary.json.)"""
    roots: list[Any] = [run_config_model(None), node_attributes_model(), RunSpec, SweepSpec,
                        Paper, *TYPED_SECTIONS.values()]
    roots += [run_config_model(name) for name in PROTOCOLS]
    seen: set[type[BaseModel]] = set()
    return [model for root in roots for model in nested_models(root, seen)]


def field_defaults(models: list[type[BaseModel]]) -> dict[str, dict[str, Any]]:
    """key -> {the model declaring it: its default as JSON} for every field with a default."""
    out: dict[str, dict[str, Any]] = {}
    for model in models:
        for key, info in model.model_fields.items():
            if info.default is not PydanticUndefined:
                default = info.default
            elif info.default_factory is not None:
                default = info.default_factory()  # type: ignore[call-arg]
            else:
                continue
            out.setdefault(key, {})[declared_in(model, key)] = to_jsonable_python(default)
    return out


def repeated(path: Path, source: str, defaults: dict[str, dict[str, Any]]) -> list[str]:
    out = []
    for line, key, literal in literal_gets(source):
        value = to_jsonable_python(literal)
        models = [model for model, default in defaults.get(key, {}).items() if default == value]
        if models:
            out.append(f"{path}:{line}: .get({key!r}, {value!r}) repeats the default of "
                       f"{' and '.join(f'{m}.{key}' for m in models)}: read the model's field")
    return out


def test_the_check_finds_a_model_default_repeated_at_a_reader() -> None:
    defaults = field_defaults(every_model())
    source = ('a = config.get("eval_every", 1)\nb = hyper.get("theta0", 0.5)\n'
              'c = config.get("eval_every", 7)\nd = x.get("not-a-field", 1)\n')
    found = repeated(Path("reader.py"), source, defaults)
    assert [line.split(":")[1] for line in found] == ["1", "2"], found
    assert "RunSettings.eval_every" in found[0] and "DMFLSQHyper.theta0" in found[1]


def test_no_reader_anywhere_repeats_a_model_default() -> None:
    defaults = field_defaults(every_model())
    # every kind of model: run keys, a Hyper's, a runtime section's, a protocol's dataset
    # options, a nested compressor's, the plan's, a sweep's, a paper file's
    assert {"rounds", "theta0", "tau_a", "latency_ms", "test_size", "bits", "params_every",
            "parallel", "why_not"} <= set(defaults)
    found = [problem for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))
             for problem in repeated(path.relative_to(ROOT), path.read_text(), defaults)]
    assert found == []


@pytest.mark.parametrize("protocol", sorted(shipped()))
def test_a_declaration_states_only_run_defaults_that_differ_from_the_models(
        protocol: str) -> None:
    model = dict(flat(model_defaults(protocol)))
    declared = dict(flat(PROTOCOLS[protocol].run_defaults))
    assert declared, f"{protocol} runs with the models' defaults alone: nothing to test"
    same = {key: v for key, v in declared.items() if to_jsonable_python(v) == model.get(key)}
    assert same == {}
    run_config_model(protocol).model_validate(PROTOCOLS[protocol].run_defaults)


@pytest.mark.parametrize("preset", presets(), ids=lambda path: path.name)
def test_a_preset_holds_only_keys_that_differ_from_its_protocols_defaults(preset: Path) -> None:
    keys = dict(flat(yaml.safe_load(preset.read_text())))
    usable = 0
    for protocol in shipped():
        try:
            resolve_config(protocol, preset, {}, ())
        except LaunchError:
            continue
        usable += 1
        defaults = dict(flat(resolve_config(protocol, None, {}, ())))
        assert {k: v for k, v in keys.items() if defaults.get(k) == v} == {}, protocol
    assert usable


def test_the_manual_page_of_defaults_is_made_from_the_models_and_declarations() -> None:
    assert PAGE.read_text() == render(), "python -m launcher.config.defaults_page --write"
