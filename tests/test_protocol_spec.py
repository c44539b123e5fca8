"""A protocol's declaration is a part of its node class, never a base (protocols/declaration.py): a
node class names it, or a plugin's single class declares it inline, and the registry refuses a
node class that names another spec or lacks a method its spec's capabilities need."""

from __future__ import annotations

import pytest

from dfl_node.runner.membership import SurvivingGraph
from protocols.capabilities import SurvivesFailures
from protocols.declaration import ProtocolDeclaration
from protocols.gossip.declarations import DPSGDHyper
from protocols.hyper import TrainingHyper
from protocols.node_base import ProtocolNode
from protocols.registry import node_problem


class Surviving(ProtocolNode[TrainingHyper], capabilities=(SurvivesFailures(),)):
    def run_round(self, r: int) -> dict[str, float]:
        return {}

    def on_graph_change(self, graph: SurvivingGraph) -> None:
        pass


class Forgetful(ProtocolNode[TrainingHyper], capabilities=(SurvivesFailures(),)):
    def run_round(self, r: int) -> dict[str, float]:
        return {}


def test_an_inline_spec_takes_its_settings_from_the_type_parameter() -> None:
    assert Surviving.spec.Hyper is TrainingHyper and Surviving.spec.survives_failures
    assert not Surviving.spec.dynamic_graphs
    assert node_problem(Surviving, Surviving.spec) is None


def test_a_node_class_without_a_method_its_capabilities_need_is_refused() -> None:
    assert "lacks on_graph_change" in str(node_problem(Forgetful, Forgetful.spec))


def test_a_node_class_that_names_another_spec_is_refused() -> None:
    assert "does not name" in str(node_problem(Surviving, ProtocolDeclaration(TrainingHyper)))


def test_the_type_parameter_must_be_a_base_of_the_specs_settings() -> None:
    with pytest.raises(TypeError, match="TrainingHyper, is no DPSGDHyper"):
        class Wrong(ProtocolNode[DPSGDHyper]):
            spec = ProtocolDeclaration(TrainingHyper)


def test_a_class_declares_its_spec_one_way() -> None:
    with pytest.raises(TypeError, match="no `spec` besides"):
        class Both(ProtocolNode[TrainingHyper], capabilities=(SurvivesFailures(),)):
            spec = ProtocolDeclaration(TrainingHyper)
