"""The plan's classification model in the launcher, for per-cycle metrics of runs whose nodes
send their parameters (cycle_metrics.py): the layout `params` records must have, and the
accuracy of the network-average model on the global test split.

Its own module because it needs torch, which a run without `params` records never imports here.
"""

from __future__ import annotations

import numpy as np
import torch

from dfl_node.learning.models import build_model
from dfl_node.learning.shards import load_node_data
from dfl_node.learning.training import evaluate
from dfl_node.plan import RunPlan


class ReferenceModel:
    def __init__(self, plan: RunPlan) -> None:
        data = load_node_data(plan.data, plan.clients, plan.clients[0])
        self.model = build_model(plan.model, data.input_shape, data.classes, plan.seed)
        self.eval: tuple[np.ndarray, np.ndarray] | None = None
        if plan.data.eval_split == "global":
            self.eval = (data.x_eval, data.y_eval)
        elif data.global_eval is not None:
            self.eval = data.global_eval

    def layout(self) -> dict[str, tuple[int, ...]]:
        """Name -> shape of every floating-point tensor of the model's state."""
        return {n: tuple(t.shape) for n, t in self.model.state_dict().items()
                if t.is_floating_point()}

    def accuracy(self, params: dict[str, np.ndarray]) -> tuple[float, float] | None:
        """(accuracy, loss) of the model holding `params` (float64 means, taken as float32) on
        the global test split; None without one."""
        if self.eval is None:
            return None
        state = {n: torch.from_numpy(v.astype(np.float32)) for n, v in params.items()}
        self.model.load_state_dict(state, strict=False)
        return evaluate(self.model, *self.eval, torch.device("cpu"))
