"""A plugin written before the rename of issue 45 (item 7) still loads and runs: the old names
`Protocol`, `ProtocolSpec` and `ModelSpec` of protocols.sdk, `protocols.base.Protocol`,
`dfl_node.settings.model.ModelSpec` and the compressor classes of
`protocols.toolkit.compressor_specs` are the new classes, and each import of one says it is
deprecated."""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
import pytest

import dfl_mesh
from protocols.sdk import ProtocolDeclaration, ProtocolNode


def test_an_old_style_plugin_loads_runs_and_is_warned(tmp_path: Path) -> None:
    with pytest.warns(DeprecationWarning, match=r"protocols\.sdk\.Protocol is deprecated"):
        from protocols.sdk import Protocol
    with pytest.warns(DeprecationWarning, match=r"protocols\.sdk\.ProtocolSpec is deprecated"):
        from protocols.sdk import ProtocolSpec
    with pytest.warns(DeprecationWarning, match=r"protocols\.base\.Protocol is deprecated"):
        from protocols.base import Protocol as OldBase
    assert Protocol is OldBase is ProtocolNode and ProtocolSpec is ProtocolDeclaration

    from protocols.sdk import LocalSGD, NodeContext, TrainingHyper

    class LocalOnly(Protocol[TrainingHyper]):  # an inline spec through the old generic base
        checkpoint_fields = ("sgd",)

        def __init__(self, ctx: NodeContext) -> None:
            super().__init__(ctx)
            self.sgd = LocalSGD(ctx, self.hyper.batch_size)

        def run_round(self, r: int) -> dict[str, float]:
            return {"train_loss": self.sgd.step(self.hyper.lr)}

    assert isinstance(LocalOnly.spec, ProtocolSpec) and LocalOnly.spec.Hyper is TrainingHyper
    dfl_mesh.run(nx.cycle_graph(3), LocalOnly, dataset="synthetic", rounds=1, transport="inproc",
                 out=tmp_path / "run", progress=False, plots=False)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert (summary["status"], summary["rounds"]) == ("ok", 1)


def test_a_model_plugins_old_base_is_the_model_config() -> None:
    from dfl_node.settings.model import ModelConfig

    with pytest.warns(DeprecationWarning, match=r"dfl_node\.settings\.model\.ModelSpec is dep"):
        from dfl_node.settings.model import ModelSpec
    with pytest.warns(DeprecationWarning, match=r"protocols\.sdk\.ModelSpec is deprecated"):
        from protocols.sdk import ModelSpec as FromSdk
    assert ModelSpec is FromSdk is ModelConfig


def test_a_compressor_plugins_old_base_is_the_sparsifier_config() -> None:
    from protocols.toolkit.compressor_configs import SparsifierConfig

    with pytest.warns(DeprecationWarning, match=r"compressor_specs\.SparsifierSpec is deprecated"):
        from protocols.toolkit.compressor_specs import SparsifierSpec
    assert SparsifierSpec is SparsifierConfig
