"""Will the run's files fit? A preflight (exit 2) against the free space of the run directory.

A disk that fills mid-run stops the run (docs/failures.md), so a run whose checkpoints alone
cannot fit is refused before it starts, with the estimate. The estimate is an upper bound made
from the plan alone, without running a node:

- A checkpoint file holds the node's model and the protocol's state (dfl_node/state). Of
  model-sized tensors it holds at most 3 + 2 x degree: the model, an optimizer buffer, a
  gradient tracker, and for a protocol that keeps copies a public copy of its own and one of
  each neighbour, with room to spare (on a 4-ring, degree 2, with a 2,762-parameter MLP, a
  checkpoint's tensors came to 1.1 to 5.6 models over the shipped protocols, the most for
  those that keep copies, against the 7 allowed). The model's parameters are counted on
  torch's meta device (no memory), 4 bytes each. A model that a protocol builds itself for
  each node cannot be counted from the plan; such a run is not checked.
- Its JSON part grows with the run: the node's ledgers hold a cell per round and link, about
  570 bytes per round on a 6-ring (degree 2); the bound is 512 bytes per round per link and per
  node (its own cells), and a fixed 512 KiB per file for the rest (its sample order, generator
  states), the size of a whole Fashion-MNIST order.
- A node keeps its newest checkpoint that every node has plus the newer ones it wrote since;
  nodes drift apart by at most the graph's diameter in rounds, so it holds at most
  2 + ceil(diameter / checkpoint_every) files at once.
- Its final model (and its copies' file): 2 + degree models.

A resumed run's own checkpoints count as free: they are among the files the bound allows.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

from dfl_node.plan import RunPlan
from dfl_node.state.checkpoint_layout import checkpoints_dir
from launcher.errors import LaunchError

FLOAT_BYTES = 4
META_PER_ROUND_LINK = 512
FILE_ALLOWANCE = 512 << 10
MB = 1 << 20


def parameter_count(plan: RunPlan) -> int | None:
    """The parameters of the plan's model, built on the meta device (nothing allocated); None
    for a model the runtime cannot build from the plan alone."""
    import torch  # a local launch has it imported already; nothing else needs it here

    from dfl_node.learning.models import module_of
    from dfl_node.settings.model import ModelError, model_spec

    try:
        with torch.device("meta"):
            model = module_of(model_spec(plan.model), plan.data.shape,
                              plan.data.num_classes)
    except (ModelError, NotImplementedError):
        return None
    return sum(p.numel() for p in model.parameters())


def estimate_bytes(plan: RunPlan, parameters: int) -> int:
    """The most bytes the run's checkpoints and final models take at once (see above)."""
    model = FLOAT_BYTES * parameters
    files = (2 + math.ceil(plan.diameter() / plan.checkpoint_every)
             if plan.checkpoint_every > 0 else 0)
    total = 0
    for degree in (len(peers) for peers in plan.adjacency().values()):
        checkpoint = (model * (3 + 2 * degree)
                      + META_PER_ROUND_LINK * plan.rounds * (degree + 1) + FILE_ALLOWANCE)
        total += files * checkpoint + model * (2 + degree)
    return total


def check_disk_space(plan: RunPlan, run_dir: Path) -> None:
    """LaunchError (exit 2) when the estimate exceeds what the run directory's file system has
    free, counting the run's own checkpoints as free (a resumed run replaces them)."""
    parameters = parameter_count(plan)
    if parameters is None:
        return
    needed = estimate_bytes(plan, parameters)
    own = sum(p.stat().st_size for p in checkpoints_dir(run_dir).glob("node-*/*.safetensors"))
    free = shutil.disk_usage(run_dir).free
    if needed > free + own:
        raise LaunchError(
            f"--out {run_dir}: its file system has {free / MB:.1f} MB free, and the run's "
            f"checkpoints and final models may need up to {needed / MB:.1f} MB ("
            f"{len(plan.ids)} nodes, checkpoint_every {plan.checkpoint_every}); free space, "
            "checkpoint less often (--checkpoint-every, 0: never), or choose another --out")
