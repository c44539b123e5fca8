"""DSC: communication-while-aggregation for heterogeneous multi-task DFL (paper Alg. 1;
docs/protocols/dsc.md).

Per round r, node i:
1. LOCAL: E epochs of multi-task training (SGD on weights, Adam on routing logits, §5);
2. CONTROL FRAME (one TDMA frame): POLICY{U = its |T_i| binary policies, K float32 each} to every
   neighbour; the frame's links carry 4 K |T_n| bytes from each sender n;
3. WEIGHTS: S_{m,i} by Eq. 8 for m in N_i + i (S_{i,i} = 1) and its own *sender-side column* of
   Eq. 18, w_{m,i} = softmax_m(S_{m,i} / tau), rounded to float32 (the value on the wire);
4. MIX: psi <- theta_{i,r,E} (the `shared` group only, one flat fp32 vector in the model's fixed
   order); J steps, each one TDMA frame, W fixed in the round: to each neighbour n the message
   PARAMS{psi, w = w_{n,i}}, then psi <- w_{i,i} psi + sum_n w_{i,n} psi_n (Eq. 17; w_{i,n} read
   from n's message; sums in ascending node id, accumulated in float64);
5. theta_{i,r+1,0} <- psi; decoders, policy logits and BN running statistics stay local.

`mixing` (docs/protocols/dsc.md#a1): `column_softmax` is the paper (column-stochastic,
mean-preserving, rows
not summing to 1); `push_sum` carries a scalar y (1 at the start of the round) mixed with the same
W and takes psi / y, a row-normalised W^J; `row_softmax` normalises Eq. 18 over the receiver's row
instead (S is symmetric, so the row is the node's own softmax and no weight travels).

Time: local compute is `compute_ms` per mini-batch step (0 for pure communication time); under
`schedule: tdma` each exchange is one frame of the link schedule, so a round costs the control
frame plus J parameter frames. Formula bits per message (components): `params` 32 |theta|,
`weight` 32, `push_sum` 32, `policy` 32 K |T_i| (paper §V: 44.71 MB and 96 B for ResNet-18).

Options (docs/protocols/dsc.md#configuration): `policy_scope: task` adds, after step 3, a control
frame LOGITS{L = its K x 2 logits per task} and averages each task's logits over the neighbours
holding it (#a19); `warmup_rounds` freezes the logits, every block run, for the first rounds
(#a4); `payload_bytes` charges psi at a nominal size on the clock and in the formula while the
real psi travels (#payload-override).

The baselines (`protocols/dsc/baselines.py`) reuse this round and change only the weights and
what travels. What the launcher reads of the family (settings, checks, datasets, report, run-level
keys) is its specs' (`protocols/dsc/declarations.py`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch

from protocols.dsc.declarations import DSC_SPEC, is_reference
from protocols.dsc.hyper import DSCHyper
from protocols.dsc.mixing_weights import Affinity, Policies, Weights, affinity, softmax_weights
from protocols.dsc.multitask_training import LocalTrainer
from protocols.dsc.multitask_training import evaluate as evaluate_tasks
from protocols.dsc.routed_model import RoutedMultiTaskNet, build_multitask_model
from protocols.dsc.taskdata import TASKS
from protocols.dsc.workload import SceneData, plan_portfolios, routed_config, scene_data, task_score
from protocols.sdk import (
    ComputeStep,
    Exchange,
    Link,
    LinkModel,
    LinkStats,
    NodeContext,
    Payload,
    ProtocolNode,
    Received,
    RunPlan,
    flatten,
    unflatten_into,
)

PHASE_POLICY = "dsc/policy"
PHASE_LOGITS = "dsc/logits"
PHASE_PARAMS = "dsc/params"
FP32_BITS = 32
# The formula component of each tensor of a PARAMS message.
COMPONENTS = {"psi": "params", "y": "push_sum", "w": "weight"}


class DSC(ProtocolNode[DSCHyper]):
    """The proposed method: Eq. 7 -> Eq. 8 -> Eq. 18, sender-side columns."""

    spec = DSC_SPEC
    affinity_kind: ClassVar[Affinity] = "similarity"
    uses_eq18: ClassVar[bool] = True  # the weights come from Eq. 18 after a policy frame

    # the channel's noise stream is not in the model's state_dict
    checkpoint_fields = ("trainer", "model.channel.gen", "rows", "loss", "last_eval")

    def __init__(self, ctx: NodeContext) -> None:
        super().__init__(ctx)
        model, data = ctx.model, ctx.data
        if not (isinstance(model, RoutedMultiTaskNet) and isinstance(data, SceneData)):
            raise TypeError(f"{type(self).__name__}: the node's workload is not build_workload's")
        self.model, self.data = model, data
        self.me = ctx.node_id
        self.trainer = LocalTrainer(self.model, self.data.train, self.hyper.training(),
                                    ctx.plan.seed, self.me, ctx.device)
        self.steps_per_epoch = math.ceil(len(self.data.train) / self.hyper.batch_size)
        self.shared = list(self.model.named_group("shared").values())
        self.portfolios = plan_portfolios(ctx.plan)
        self.push_sum = self.uses_eq18 and self.hyper.mixing == "push_sum"
        self.attach_weight = self.uses_eq18 and self.hyper.mixing != "row_softmax"
        size = sum(p.numel() for p in self.shared)
        if self.hyper.payload_bytes is not None:
            extras = 4 * (int(self.attach_weight) + int(self.push_sum))  # w, y: their real size
            ctx.clock.model = NominalPayload.over(
                ctx.clock.model, {4 * size + extras: self.hyper.payload_bytes + extras})
        # The local epochs are a step of their own; every frame then charges its messages' formula
        # bits (the nominal psi's where `payload_bytes` is set) on the clock too.
        self.local_epochs = ComputeStep(ctx)
        self.policy_frame = Exchange(ctx, PHASE_POLICY, validator=self.check_policies)
        self.shares_policies = self.hyper.policy_scope == "task" and not is_reference(self.spec)
        self.logit_frame = Exchange(ctx, PHASE_LOGITS, validator=self.check_logits)
        self.params_frame = Exchange(ctx, PHASE_PARAMS, clock="formula")
        self.column: Weights | None = None  # sender-side weights w_{n,i}, attached per message
        self.row: Weights | None = None  # receiver-side weights w_{i,n}, known before mixing
        self.rows: list[Weights] = []  # the row of W actually used, per round
        self.loss = math.nan
        self.last_eval: dict[str, dict[str, float]] = {}

    @classmethod
    def build_workload(cls, plan: RunPlan, node_id: int) -> tuple[torch.nn.Module, Any]:
        """Built here, not in workload.py beside the data, because only a node imports torch."""
        data = scene_data(plan, node_id)
        model = build_multitask_model(routed_config(plan.model), plan_portfolios(plan)[node_id],
                                      data.train.seg_classes, plan.seed, node_id)
        return model, data

    @property
    def depth(self) -> int:
        return self.hyper.depth

    def check_policies(self, tensors: Mapping[str, np.ndarray]) -> None:
        """A POLICY message: U of shape (|T_n|, K), float32 zeros and ones."""
        u = tensors.get("U")
        if set(tensors) != {"U"} or u is None or u.dtype != np.float32 or u.ndim != 2 \
                or not 1 <= u.shape[0] <= len(TASKS) or u.shape[1] != self.model.blocks \
                or not np.isin(u, (0.0, 1.0)).all():
            raise ValueError("expected U: (tasks, K) float32 zeros and ones")

    def check_logits(self, tensors: Mapping[str, np.ndarray]) -> None:
        """A LOGITS message: L of shape (|T_n|, K, 2), finite float32."""
        lg = tensors.get("L")
        if set(tensors) != {"L"} or lg is None or lg.dtype != np.float32 or lg.ndim != 3 \
                or not 1 <= lg.shape[0] <= len(TASKS) or lg.shape[1:] != (self.model.blocks, 2) \
                or not np.isfinite(lg).all():
            raise ValueError("expected L: (tasks, K, 2) finite float32")

    def run_round(self, r: int) -> dict[str, float]:
        self.loss = self.trainer.run_epochs(self.hyper.epochs)
        self.local_epochs(self.hyper.epochs * self.steps_per_epoch)
        self.prepare_round(r)
        if self.shares_policies:
            self.share_task_policies(r)
        row = self.mix(r) if self.depth else {self.me: 1.0}
        self.rows.append(row)
        return {"train_loss": self.loss, "self_weight": row[self.me],
                "row_sum": math.fsum(row.values())}

    # The weights of a round.

    def prepare_round(self, r: int) -> None:
        """Control frame, then this node's column (or row) of Eq. 18 for the round."""
        policies = self.exchange_policies(r)
        scores = {m: 1.0 if m == self.me else affinity(self.affinity_kind, policies[m],
                                                       policies[self.me])
                  for m in sorted(policies)}
        weights = {m: float(np.float32(w))
                   for m, w in softmax_weights(scores, self.hyper.tau).items()}
        # S is symmetric, so the receiver's row softmax has the same numbers as its column.
        self.column, self.row = (weights, None) if self.attach_weight else (None, weights)

    def exchange_policies(self, r: int) -> dict[int, Policies]:
        """POLICY{U} to and from every neighbour: one frame whose senders differ in size."""
        mine = self.model.policies()
        u = torch.stack([mine[t] for t in self.model.tasks])
        # Under TDMA the frame's other senders put their own policy sizes on their links.
        theirs = self.policy_frame(r, Payload({"U": u}, {"policy": FP32_BITS * u.numel()}),
                                   senders_bytes={n: self.policy_bytes(n)
                                                  for n in self.ctx.plan.clients})
        policies: dict[int, Policies] = {self.me: {t: v.numpy() for t, v in mine.items()}}
        for n, msg in theirs.items():
            tasks = self.portfolios[n]
            if msg["U"].shape[0] != len(tasks):
                raise ValueError(f"node {self.me}: node {n} sent {msg['U'].shape[0]} policies "
                                 f"for its {len(tasks)} tasks")
            policies[n] = {t: msg["U"][k].numpy() for k, t in enumerate(tasks)}
        return policies

    def policy_bytes(self, node: int) -> int:
        return FP32_BITS // 8 * self.model.blocks * len(self.portfolios[node])

    def share_task_policies(self, r: int) -> None:
        """`policy_scope: task`: one control frame LOGITS{L = the K x 2 logits of each task} to
        every neighbour, then the logits of each task t <- their mean over this node and the
        neighbours holding t (ascending id, float64). After the weights of the round, so that
        Eq. 18 sees the policies the clients learned; every round, so that the holders of t
        keep one policy per task (docs/protocols/dsc.md#a19)."""
        logits = self.model.policy_logits
        mine = torch.stack([logits[t].detach() for t in self.model.tasks])
        theirs = self.logit_frame(r, Payload({"L": mine},
                                             {"policy_logits": FP32_BITS * mine.numel()}),
                                  senders_bytes={n: 2 * self.policy_bytes(n)
                                                 for n in self.ctx.plan.clients})
        held: dict[str, dict[int, torch.Tensor]] = {t: {self.me: logits[t].detach()}
                                                    for t in self.model.tasks}
        for n, msg in theirs.items():
            tasks = self.portfolios[n]
            if msg["L"].shape[0] != len(tasks):
                raise ValueError(f"node {self.me}: node {n} sent {msg['L'].shape[0]} policy "
                                 f"logits for its {len(tasks)} tasks")
            for k, t in enumerate(tasks):
                if t in held:
                    held[t][n] = msg["L"][k]
        with torch.no_grad():
            for t, values in held.items():
                acc = torch.zeros(logits[t].shape, dtype=torch.float64)
                for n in sorted(values):
                    acc.add_(values[n].to(torch.float64))
                logits[t].copy_((acc / len(values)).to(torch.float32))

    def step_row(self, row: Weights | None, psi: torch.Tensor,
                 theirs: Mapping[int, Received]) -> Weights:
        """Row i of W for this step: known beforehand, or w_{i,n} read from the messages."""
        if self.column is None:
            assert row is not None
            return row
        incoming = {n: float(msg["w"][0]) for n, msg in theirs.items()}
        return dict(sorted({**incoming, self.me: self.column[self.me]}.items()))

    # The J mixing steps.

    def mix(self, r: int) -> Weights:
        psi = flatten(self.shared)
        y = torch.ones(1)
        row = self.row
        for j in range(self.depth):
            theirs = self.send_step(r, j, psi, y)
            row = self.step_row(row, psi, theirs)
            psi = combine(row, self.me, psi, theirs, "psi")
            if self.push_sum:
                y = combine(row, self.me, y, theirs, "y")
        unflatten_into(self.shared, psi / y if self.push_sum else psi)
        assert row is not None
        return row

    def send_step(self, r: int, j: int, psi: torch.Tensor, y: torch.Tensor) -> dict[int, Received]:
        """Step j, one frame: PARAMS{psi (, y) (, w_{n,i})} to every neighbour n, theirs back;
        each message charged (formula and clock) what it carries, 32 bits a value."""
        base = {"psi": psi, **({"y": y} if self.push_sum else {})}
        nominal = self.hyper.payload_bytes
        if self.column is None:
            return self.params_frame(r, params(base, nominal), step=j)
        column = self.column
        return self.params_frame.each(
            r, {n: params({**base, "w": torch.tensor([column[n]])}, nominal)
                for n in self.params_frame.out_neighbours}, step=j)

    # Reporting.

    def evaluate(self) -> dict[str, Any]:
        self.last_eval = evaluate_tasks(self.model, self.data.test, self.ctx.device)
        return {"accuracy": task_score(self.last_eval), "loss": self.loss,
                "task_metrics": self.last_eval, "policies": self.binary_policies()}

    def binary_policies(self) -> dict[str, list[int]]:
        return {t: [int(x) for x in u.tolist()] for t, u in self.model.policies().items()}

    def node_report(self) -> dict[str, Any]:
        return {"tasks": list(self.model.tasks), "policies": self.binary_policies(),
                "task_metrics": self.last_eval,
                "rows": [{str(n): w for n, w in row.items()} for row in self.rows]}


def params(tensors: Mapping[str, torch.Tensor], psi_bytes: int | None = None) -> Payload:
    """A PARAMS message with its formula bits by component (`COMPONENTS`); `psi_bytes`: the
    nominal size charged for psi instead of its own (`hyper.payload_bytes`)."""
    bits = {COMPONENTS[name]: FP32_BITS * t.numel() for name, t in tensors.items()}
    if psi_bytes is not None:
        bits["params"] = 8 * psi_bytes
    return Payload(tensors, bits)


@dataclass(frozen=True)
class NominalPayload(LinkModel):
    """The node's link model, charging a PARAMS message of the real size as the nominal one.

    Under TDMA the clock is told the sizes that really crossed the sockets (by `Comm`, below
    the protocol), so the nominal size of `hyper.payload_bytes` can only enter where a size
    becomes time: here. Sizes are matched exactly; no other message of a DSC run has the size
    of a PARAMS message (a POLICY or LOGITS message is at most 8 K |T| bytes)."""

    sizes: Mapping[int, int] = field(default_factory=dict)

    @classmethod
    def over(cls, base: LinkModel, sizes: Mapping[int, int]) -> NominalPayload:
        return cls(cfg=base.cfg, links=base.links, compute_seconds=base.compute_seconds,
                   seed=base.seed, sizes=dict(sizes))

    def carry(self, link: Link, message_bytes: int, frame: int) -> LinkStats:
        return super().carry(link, self.sizes.get(message_bytes, message_bytes), frame)


def combine(row: Weights, me: int, mine: torch.Tensor, theirs: Mapping[int, Received],
            key: str) -> torch.Tensor:
    """Eq. 17 for one node: sum_n w_{i,n} psi_n over N_i + i in ascending id, in float64."""
    acc = torch.zeros(mine.shape, dtype=torch.float64)
    for n, w in row.items():
        acc.add_((mine if n == me else theirs[n][key]).to(torch.float64), alpha=w)
    return acc.to(torch.float32)
