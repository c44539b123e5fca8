"""The runtime's config sections as typed models (dfl_node/settings/, MODEL_SPECS): each default
is the one the run config declared, a misspelt key is refused with the key the user meant, a
bool is not a number, and YAML's reading of `1e3` as text still gives a float."""

from __future__ import annotations

import inspect
from dataclasses import dataclass, fields
from typing import Any

import pytest
import torch
import yaml
from pydantic import ValidationError

from dfl_config.problems import one_line
from dfl_config.section import Section
from dfl_node.learning import torch_settings
from dfl_node.learning.models import BUILDERS, build_model
from dfl_node.learning.synthetic import SyntheticTask
from dfl_node.netsim.tdma import plan_section
from dfl_node.netsim.virtual_clock import LinkModel
from dfl_node.settings.data import SyntheticSettings
from dfl_node.settings.link import LinkSettings
from dfl_node.settings.model import MODEL_SPECS, ModelConfig, ModelError
from dfl_node.settings.runtime import RuntimeHyper
from dfl_node.settings.tdma import TdmaSettings
from dfl_node.settings.wire import ON_FAILURE, WireSettings, rendezvous_seconds
from dfl_node.transports.liveness import Heartbeat


@dataclass(frozen=True)
class Case:
    """One model: where it sits in the config, a misspelling of one of its keys and the key
    meant, where a number goes (a key, or a list's item), and a float key (None: none)."""

    model: type[Section]
    prefix: str
    typo: str
    meant: str
    number: str
    real: str | None
    given: dict[str, Any]  # what every validation of the case starts from (a model's name)

    def with_bool(self) -> dict[str, Any]:
        key, _, item = self.number.partition("[")
        return {key: [True] if item else True}


CASES = [
    Case(LinkSettings, "link", "latency", "latency_ms", "packet_bytes", "bandwidth_mbps", {}),
    Case(TdmaSettings, "tdma", "interference_factr", "interference_factor",
         "interference_range", "interference_factor", {}),
    Case(WireSettings, "wire", "deadline", "deadline_s", "hwm", "recv_timeout_s", {}),
    Case(SyntheticSettings, "synthetic", "clases", "classes", "features", "noise", {}),
    Case(RuntimeHyper, "hyper", "torch_thread", "torch_threads", "torch_threads", None, {}),
    Case(MODEL_SPECS["mlp"], "model", "hiden", "hidden", "hidden[0]", None, {"name": "mlp"}),
    Case(MODEL_SPECS["cnn"], "model", "kernal", "kernel", "kernel", None, {"name": "cnn"}),
]
IDS = [case.model.__name__ for case in CASES]

# The defaults the run config declared before these models (launcher/config/layers.py's BASE
# for link, tdma, wire and hyper; SyntheticTask's dataclass for synthetic; each builder's
# signature for a model's options), as literals: the models must not have changed a run.
BASE: dict[str, dict[str, Any]] = {
    "link": {"latency_ms": 1.0, "bandwidth_mbps": 100.0, "compute_ms": 10.0,
             "packet_bytes": 1500, "loss_model": "fixed", "loss": 0.0, "snr0_db": 20.0,
             "d0": None, "path_loss_exponent": 3.0, "spectral_efficiency": 2.0,
             "retransmissions": "expected"},
    "tdma": {"interference_range": None, "interference_factor": 1.0},
    # max_message_bytes was 1 << 30; None now derives it from the plan's model (issue 43)
    "wire": {"hwm": 1000, "recv_timeout_s": 300.0, "max_tensors": 4096,
             "max_message_bytes": None, "rendezvous_s": None, "deadline_s": 10.0,
             "on_failure": "stop"},
    "hyper": {"torch_threads": 1, "deterministic": False},
}
SYNTHETIC = {"classes": 10, "features": 32, "train_size": 4000, "test_size": 2000, "noise": 2.0}
MODEL_OPTIONS: dict[str, dict[str, Any]] = {
    "linear": {}, "mlp": {"hidden": [64]},
    "cnn": {"channels": [16, 32], "kernel": 5, "padding": 0, "hidden": None},
    "ssdfl-cnn": {}, "dmflsq-cnn": {},
}


def refusal(case: Case, given: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as info:
        case.model.model_validate({**case.given, **given})
    return one_line(info.value, case.model, (case.prefix,))


@pytest.mark.parametrize("section", ["link", "tdma", "wire"])
def test_defaults_are_the_run_configs(section: str) -> None:
    model = {"link": LinkSettings, "tdma": TdmaSettings, "wire": WireSettings}[section]
    assert model().as_dict() == BASE[section]


def test_runtime_and_data_defaults() -> None:
    assert RuntimeHyper().as_dict() == BASE["hyper"]
    assert SyntheticSettings().as_dict() == SYNTHETIC
    spec = SyntheticTask()
    assert {f.name: getattr(spec, f.name) for f in fields(spec) if f.name != "seed"} == SYNTHETIC


@pytest.mark.parametrize("name", sorted(MODEL_OPTIONS))
def test_model_defaults(name: str) -> None:
    assert MODEL_SPECS[name].model_validate({"name": name}).as_dict() \
        == {"name": name, **MODEL_OPTIONS[name]}


def test_every_builder_has_its_spec_and_takes_exactly_its_options() -> None:
    assert MODEL_SPECS.keys() == BUILDERS.keys()
    for name, spec in MODEL_SPECS.items():
        assert issubclass(spec, ModelConfig)
        spec.model_validate({"name": name})
        with pytest.raises(ValidationError):
            spec.model_validate({"name": "another"})
        options = list(inspect.signature(BUILDERS[name]).parameters)[2:]
        assert options == list(spec.model_validate({"name": name}).options()), name


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_misspelt_key_is_refused_with_the_key_meant(case: Case) -> None:
    assert refusal(case, {case.typo: 1}) \
        == f"{case.prefix}.{case.typo}: unknown key (did you mean {case.meant}?)"


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_bool_is_not_a_number(case: Case) -> None:
    message = refusal(case, case.with_bool())
    assert message.startswith(f"{case.prefix}.{case.number}")
    assert "valid integer" in message or "not true/false" in message


@pytest.mark.parametrize("case", [c for c in CASES if c.real is not None],
                         ids=[i for c, i in zip(CASES, IDS, strict=True) if c.real is not None])
def test_yaml_text_1e3_is_a_float(case: Case) -> None:
    assert case.real is not None
    given = yaml.safe_load(f"{case.real}: 1e3")
    assert given == {case.real: "1e3"}  # YAML 1.1 reads it as text
    assert getattr(case.model.model_validate({**case.given, **given}), case.real) == 1000.0


@pytest.mark.parametrize(("case", "given", "reason"), [
    (CASES[0], {"loss": 1.0}, "link.loss: must be < 1, got 1"),
    (CASES[0], {"loss_model": "magic"}, "link.loss_model: input should be 'fixed', 'outage'"),
    (CASES[0], {"d0": 0}, "link.d0: must be > 0"),
    (CASES[1], {"interference_range": -1}, "tdma.interference_range: must be >= 0"),
    (CASES[2], {"max_message_bytes": -1}, "wire.max_message_bytes: must be a positive integer"),
    (CASES[2], {"recv_timeout_s": 0}, "wire.recv_timeout_s: must be > 0"),
    (CASES[2], {"rendezvous_s": 0}, "wire.rendezvous_s: must be > 0"),
    (CASES[2], {"on_failure": "retry"}, "wire.on_failure: input should be 'stop' or 'continue'"),
    (CASES[6], {"channels": [8, 0]}, "model.channels[1]: must be a positive integer"),
])
def test_bad_values_are_one_line_reasons(case: Case, given: dict[str, Any], reason: str) -> None:
    assert refusal(case, given).startswith(reason)


def test_wire_rendezvous_and_failure_policy() -> None:
    assert ON_FAILURE == ("stop", "continue")
    assert WireSettings().rendezvous_seconds == 300.0
    assert WireSettings(rendezvous_s=90).rendezvous_seconds == 90.0
    assert rendezvous_seconds(WireSettings(recv_timeout_s=7)) == 7.0
    assert Heartbeat.of(WireSettings(deadline_s=4)).grace_s == 2.0
    with pytest.raises(ValueError, match=r"^wire\.deadline_s: must be > 0"):
        Heartbeat.of({"deadline_s": 0})


def test_the_section_functions_take_the_model_or_its_dict() -> None:
    topo = {"nodes": [{"id": 0}, {"id": 1}], "edges": [[0, 1]]}
    settings = LinkSettings(latency_ms=2.0)
    assert LinkModel.from_plan(topo, settings).cfg is settings
    assert LinkModel.from_plan(topo, settings.as_dict()).cfg == settings
    assert plan_section(topo, "tdma", TdmaSettings()) == plan_section(topo, "tdma", {})
    with pytest.raises(ValueError, match=r"^tdma\.interference_factor: must be a number"):
        plan_section(topo, "tdma", {"interference_factor": False})


def test_a_model_spec_is_checked_by_the_model_it_names() -> None:
    with pytest.raises(ModelError, match=r"^model\.kernel: unknown key$"):
        build_model({"name": "mlp", "kernel": 3}, (32,), 10, 0)  # a cnn option
    with pytest.raises(ModelError, match=r"unknown model 'mpl' \(did you mean mlp\?\)"):
        build_model({"name": "mpl"}, (32,), 10, 0)
    full = MODEL_SPECS["cnn"].model_validate({"name": "cnn"}).as_dict()  # a plan's full spec
    assert sum(p.numel() for p in build_model(full, (1, 28, 28), 10, 0).parameters()) == 18_378


def test_runtime_settings_fill_their_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    threads: list[int] = []
    monkeypatch.setattr(torch, "set_num_threads", threads.append)
    torch_settings.apply_runtime({"lr": 0.1})  # a protocol's key is not the runtime's business
    assert threads == [1]
    with pytest.raises(ValueError, match=r"^torch_threads: must be a positive integer, got 0$"):
        torch_settings.check_runtime({"torch_threads": 0, "lr": 0.1})
