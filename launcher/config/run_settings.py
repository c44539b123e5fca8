"""The run's configuration as one typed model, composed for the chosen protocol.

Sections are declared where they are used: the runtime's (link, tdma, wire, synthetic data,
models) in dfl_node/settings and dfl_node/learning/models.py, each protocol's `hyper`, the
models and dataset options it brings on its class, and the launcher's own keys here. A default
therefore lives in exactly one model; the shipped YAML files are overrides that these models
validate, and `dfl-launch schema` prints the same model as JSON Schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Annotated, Any, Literal, Union, cast, get_args

from pydantic import BeforeValidator, ConfigDict, Field, create_model

from dfl_config.section import Count, Flag, Integer, NonNegativeInt, Section
from dfl_node.learning.generated import generated_datasets
from dfl_node.settings.cycle_metrics import CycleMetricsSettings
from dfl_node.settings.data_section import DEFAULT_EVAL_SIZE, EvalSplit
from dfl_node.settings.link import LinkSettings
from dfl_node.settings.model import MODEL_SPECS, model_plugins
from dfl_node.settings.node import NodeRuntimeAttributes
from dfl_node.settings.partition import Partition
from dfl_node.settings.tdma import TdmaSettings
from dfl_node.settings.wire import WireSettings
from dfl_node.state.checkpoint_check import OnCorrupt
from launcher.config.backend_catalog import DEFAULT_LOCAL
from protocols.hyper import ProtocolHyper
from protocols.registry import PROTOCOLS, protocol_spec
from protocols.robust.adversary_settings import AdversariesSection, AdversaryAttributes
from topologies.mixing_schemes import MixingScheme

# `model: {name: auto}` picks the dataset's default model (resolved before validation).
DEFAULT_MODELS = {"synthetic": "mlp", "fmnist": "cnn", "cifar10": "cnn"}
AUTO = "auto"


class AutoModel(Section):
    """`model: {name: auto}`: the dataset's default model (DEFAULT_MODELS)."""

    name: Literal["auto"] = "auto"


class Endpoints(Section):
    """host:port of the run's services when nodes run on several hosts (None: a local port)."""

    collector: str | None = None
    coordinator: str | None = None
    aggregator: str | None = None
    nodes: Literal["topology", "discover"] = "topology"
    """Where the nodes' addresses come from: the topology (its host and port, free local ports
    else), or discover: each node listens on a port of its own host and learns the others'
    addresses from the directory at start-up (hosts not known in advance, e.g. a Slurm job)."""
    directory: str | None = None
    """host:port of the directory of a discover run (None: the collector's host, a free port)."""


class RunSettings(Section):
    """The keys every run has, whatever its protocol."""

    seed: Integer = 0
    transport: str = DEFAULT_LOCAL
    """How nodes run and talk: a local backend (zmq, inproc) or a placement (docker, hosts)."""
    rounds: Count = 20
    eval_every: Count = 1
    eval_at_start: Flag = False
    """Evaluate once before round 1 too (a metrics row of round 0): a curve against rounds or
    bits then starts at the untrained models, at 0 bits (a paper's accuracy-versus-bits figure
    compares methods whose first round costs differ by orders of magnitude)."""
    checkpoint_every: NonNegativeInt = 10
    """Every node saves its full state every k rounds (0: never)."""
    on_corrupt: OnCorrupt = "fallback"
    """What `--resume` does when it refuses a checkpoint file (its bytes do not match its digest,
    it is cut or unreadable, or it holds another round): fallback resumes from the newest round
    every node holds intact, saying so; stop refuses to resume (exit 2). Not part of the plan:
    `--resume RUN_DIR --on-corrupt ...` may change it."""
    dataset: str = "synthetic"
    data_root: str | None = None
    # The default is the spelling, which `validate_default` parses: a parsed default would show
    # in the JSON Schema and docs/defaults.md as its fields, not as the string a user writes.
    partition: Partition = cast(Any, "iid")
    eval_split: EvalSplit = "global"
    eval_size: Count = DEFAULT_EVAL_SIZE
    mixing: MixingScheme = "metropolis"
    """The mixing matrix W over the topology's edges (topologies/mixing.py)."""
    cycle_metrics: CycleMetricsSettings = CycleMetricsSettings()
    link: LinkSettings = LinkSettings()
    schedule: Literal["sync", "tdma"] = "sync"
    """sync, or tdma: exchanges follow the link-colouring slots (dfl_node/netsim/tdma.py)."""
    tdma: TdmaSettings = TdmaSettings()
    wire: WireSettings = WireSettings()
    endpoints: Endpoints = Endpoints()
    secure: Flag = False
    """CURVE on every socket of the run."""
    keys: str | None = None
    """The directory of the run's key files (a local launch uses RUN_DIR/keys when None)."""
    adversaries: AdversariesSection = AdversariesSection()
    """Adversarial nodes by id or by a drawn fraction, and what they do
    (docs/protocols/robust.md); a topology may declare them per node instead (`adversary:`)."""


def model_union(protocols: list[str]) -> Any:
    """The `model:` section: one spec per model the runtime and these protocols know."""
    specs: dict[str, type[Section]] = {AUTO: AutoModel, **MODEL_SPECS}
    for name in protocols:
        for spec in protocol_spec(name).model_specs:
            (tag,) = get_args(spec.model_fields["name"].annotation)
            specs[str(tag)] = spec
    kinds = tuple(specs.values())
    refuse = BeforeValidator(_refuse_unavailable_model)
    if len(kinds) == 1:
        return Annotated[kinds[0], refuse]
    return Annotated[Union[kinds], Field(discriminator="name"), refuse]  # noqa: UP007


def _refuse_unavailable_model(value: Any) -> Any:
    """A model a plugin registers but that failed to load (or two register) is refused with
    the reason, naming the package, rather than as an unknown name."""
    name = value.get("name") if isinstance(value, Mapping) else None
    if isinstance(name, str) and model_plugins().unavailable(name):
        raise ValueError(model_plugins().why_not(name, "model"))
    return value


@cache
def run_config_model(protocol: str | None) -> type[RunSettings]:
    """The whole run config for `protocol`; None: any protocol (`hyper` then is the runtime's
    keys plus any other key, as one JSON Schema for every config file)."""
    names = [protocol] if protocol else list(PROTOCOLS)
    fields: dict[str, Any] = {"model": (model_union(names), AutoModel())}
    for dataset, generated in generated_datasets().items():
        fields[dataset] = (generated.options, generated.options())
    for name in names:
        for section, options in protocol_spec(name).dataset_options.items():
            fields[section] = (options, options())
    if protocol:
        hyper = protocol_spec(protocol).Hyper
        fields["hyper"] = (hyper, hyper())
    else:
        fields["hyper"] = (AnyHyper, AnyHyper())
    title = f"dfl-mesh run config ({protocol})" if protocol else "dfl-mesh run config"
    return create_model(title.replace(" ", "_"), __base__=RunSettings, **fields)


class AnyHyper(ProtocolHyper):
    """`hyper` when the protocol is not known: the runtime keys and the protocol's own."""

    model_config = ConfigDict(extra="allow")


@cache
def node_attributes_model(protocol: str | None = None) -> type[Section]:
    """Every topology node attribute something reads: the runtime's, the adversaries' and each
    protocol's (only `protocol`'s where given). A node key outside these is a typo (`dfl_mesh`
    validates topology files against this model)."""
    fields: dict[str, Any] = {}
    sources: list[type[Section]] = [NodeRuntimeAttributes, AdversaryAttributes]
    specs = [protocol_spec(protocol)] if protocol else PROTOCOLS.values()
    sources += [spec.node_attributes for spec in specs if spec.node_attributes]
    for source in sources:
        for name, info in source.model_fields.items():
            fields.setdefault(name, (info.annotation, info))
    return create_model("NodeAttributes", __base__=Section, **fields)


def dataset_sections() -> list[str]:
    """The config sections of every generated dataset and every dataset a protocol brings
    (each run's plan carries them all, empty where its protocol has none, so that plans of all
    protocols look alike)."""
    brought = {section for spec in PROTOCOLS.values() for section in spec.dataset_options}
    return sorted({*generated_datasets(), *brought})
