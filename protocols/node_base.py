"""The protocol interface: one object per node, driven round by round by the runtime.

A protocol speaks only through the SDK's shapes (protocols/sdk/exchange.py), which send on
`ctx.comm`, charge `ctx.formula` and advance `ctx.clock` for it; it never touches a socket, a
file or the collector.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar, Generic, cast, get_args, get_origin

import numpy as np
import torch
from torch import nn

from dfl_node.comm.channel import Comm
from dfl_node.learning.models import build_model
from dfl_node.learning.shards import load_node_data
from dfl_node.learning.training import evaluate
from dfl_node.plan import RunPlan
from dfl_node.runner.context import NodeContext
from dfl_node.state.checkpoint_codec import capture, capture_fields, restore, restore_fields
from dfl_node.state.checkpoint_file import State
from protocols.backdoor_probe import backdoor_keys, with_backdoor_probe
from protocols.declaration import H, ProtocolDeclaration
from protocols.robust.adversary import AdversarialComm, Adversary, poisoned

# Samples per forward pass when a node evaluates. A pass's activations are the largest buffers a
# node ever holds: 256 CIFAR/Fashion-MNIST samples through dmflsq-cnn took its PSS from about
# 65 MB in the rounds to 130 MB while it evaluated; 64 keep evaluation within the rounds' memory.
EVAL_BATCH = 64


class ProtocolNode(ABC, Generic[H]):
    """One node's algorithm: the node class of a protocol. It names its declaration, `spec`
    (protocols/declaration.py: the settings, capabilities and all the launcher reads), and
    implements the node's half of each declared capability (protocols/capabilities.py); the building
    blocks of a round are in protocols/sdk. `H`, the type of `self.hyper`, is for the type
    checker: the settings are the spec's `Hyper`, which must be an `H` (checked here)."""

    spec: ClassVar[ProtocolDeclaration[Any]]

    # Attributes (dotted paths reach inside) whose state the next round reads beside the model:
    # samplers, copies, trackers, counters. A checkpoint saves them
    # (dfl_node/state/checkpoint_codec.py); dfl_mesh.testing's state audit and resume check
    # fail when one is missing.
    checkpoint_fields: tuple[str, ...] = ()

    def __init_subclass__(cls, **declared: Any) -> None:
        """A node class names its spec (`spec = DPSGD_SPEC`, from the module the launcher
        reads), or, as a plugin's single class may, declares it inline with the spec's other
        fields as class keywords, its settings being the type parameter:
        `class PushSum(ProtocolNode[TrainingHyper], capabilities=(DynamicGraphs(),))`. The type
        parameter, where a class gives one, must be a base of the spec's `Hyper`."""
        super().__init_subclass__()
        typed = next((args[0] for base in cls.__dict__.get("__orig_bases__", ())
                      if _is_protocol(get_origin(base)) and (args := get_args(base))
                      and isinstance(args[0], type)), None)
        if declared or (typed is not None and getattr(cls, "spec", None) is None):
            if typed is None or "spec" in cls.__dict__:
                raise TypeError(f"{cls.__name__}: an inline spec takes its Hyper from "
                                "ProtocolNode[Hyper], and no `spec` besides")
            cls.spec = ProtocolDeclaration(typed, **declared)
        spec = getattr(cls, "spec", None)
        if spec is None:  # a base that several node classes share (SSD-FL's cycle)
            return
        if not isinstance(spec, ProtocolDeclaration):
            raise TypeError(f"{cls.__name__}.spec is not a "
                            "protocols.declaration.ProtocolDeclaration")
        if typed is not None and not issubclass(spec.Hyper, typed):
            raise TypeError(f"{cls.__name__}: its spec's Hyper, {spec.Hyper.__name__}, is no "
                            f"{typed.__name__}")

    def __init__(self, ctx: NodeContext) -> None:
        self.ctx = ctx
        self.hyper: H = self.spec.settings(ctx.hyper)
        # An adversarial node (ctx.adversary, from the plan) runs this same code with its
        # messages rewritten on their way out (protocols/robust/adversary.py); its state is
        # saved with the checkpoint, under `adversary`.
        self.adversary: Adversary | None = None
        if ctx.adversary is not None:
            self.adversary = Adversary(ctx.adversary, ctx.plan, ctx.node_id, ctx.model)
            ctx.comm = cast(Comm, AdversarialComm(ctx.comm, self.adversary))
            if self.adversary.silent:  # it never trains: its model stays the round-0 one
                setattr(self, "run_round", self._silent_round)  # noqa: B010

    def _silent_round(self, r: int) -> dict[str, float]:
        info = type(self).run_round(self, r)
        if self.adversary is not None:
            self.adversary.freeze(self.ctx.model)
        return info

    @property
    def needs_prephase(self) -> bool:
        """Read by the runtime, which knows no spec."""
        return self.spec.needs_prephase

    def checkpoint_state(self) -> State:
        """Everything the next round reads: the model (parameters and buffers) and the
        `checkpoint_fields`. Override where state lives elsewhere."""
        state = capture_fields(self)
        state.put("model", capture(self.ctx.model))
        if self.adversary is not None:
            state.put("adversary", capture(self.adversary))
        return state

    def restore_state(self, state: State) -> None:
        """Put back what `checkpoint_state` saved, into a freshly constructed protocol."""
        restore(self.ctx.model, state.part("model"))
        restore_fields(self, state)
        if self.adversary is not None:
            restore(self.adversary, state.part("adversary"))

    @classmethod
    def build_workload(cls, plan: RunPlan, node_id: int) -> tuple[nn.Module, Any]:
        """The node's model (on the CPU) and data, before the protocol object exists.

        Default: the plan's classification shard and model. A protocol with another learning
        problem (DSC's multi-task dense prediction) brings its own; raise ValueError (one line)
        on a plan it cannot serve."""
        data = load_node_data(plan.data, plan.clients, node_id)
        behaviours = plan.adversaries.get(node_id)
        if behaviours:  # label flipping, a backdoor: the node's own poisoned copy
            data = poisoned(data, behaviours, plan.seed, node_id)
        model = build_model(plan.model, data.input_shape, data.classes, plan.seed)
        return model, with_backdoor_probe(plan, node_id, data)  # an honest node's triggers

    @abstractmethod
    def run_round(self, r: int) -> dict[str, float]:
        """Run round `r`; return protocol metrics for this round (e.g. `train_loss`)."""

    def evaluate(self) -> dict[str, Any]:
        """The evaluation keys of a metrics record: `accuracy` and `loss`, plus any others."""
        data = self.ctx.data
        acc, loss = evaluate(self.eval_model(), data.x_eval, data.y_eval, self.ctx.device,
                             batch=EVAL_BATCH)
        out = {"accuracy": acc, "loss": loss}
        both: tuple[np.ndarray, np.ndarray] | None = getattr(data, "global_eval", None)
        if both is not None:  # eval_split: both
            acc, loss = evaluate(self.eval_model(), both[0], both[1], self.ctx.device,
                                 batch=EVAL_BATCH)
            out |= {"global_accuracy": acc, "global_loss": loss}
        return out | backdoor_keys(self.eval_model(), data, self.ctx.device, EVAL_BATCH)

    def eval_model(self) -> nn.Module:
        """The model that evaluation and `final/` report (personalised protocols may differ)."""
        return self.ctx.model

    def summary(self) -> dict[str, float | dict[str, float]]:
        """Protocol keys for summary.json; the launcher averages them over nodes."""
        return {}

    def extra_state(self) -> dict[str, torch.Tensor]:
        """Tensors beside the model worth keeping (e.g. neighbour copies), saved in final/."""
        return {}


def _is_protocol(origin: object) -> bool:
    return isinstance(origin, type) and issubclass(origin, ProtocolNode)
