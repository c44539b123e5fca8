"""What the launcher's forkserver imports before it forks any node.

Importing torch and the node code once, in the forkserver, saves every node that cost. So does
warming torch up: the first model a process builds and the first step it takes pay about 0.3 s
of one-time initialisation (operator dispatch, allocator, kernels), which every node would
otherwise repeat. Freezing the garbage collector afterwards moves all of it out of the
collector's reach, so a node's collections never write to (and so never copy) the pages it
shares with its siblings.
"""

import gc

import numpy as np
import torch

import dfl_node.cli  # noqa: F401
from dfl_node.models import build_model
from dfl_node.training import compute_gradients, evaluate


def warm_up() -> None:
    for name, shape in (("cnn", (1, 28, 28)), ("mlp", (32,))):
        model = build_model({"name": name}, shape, 10, seed=0)
        x = np.zeros((8, *shape), dtype=np.float32)
        y = np.zeros(8, dtype=np.int64)
        compute_gradients(model, torch.from_numpy(x), torch.from_numpy(y))
        evaluate(model, x, y, torch.device("cpu"))


torch.set_num_threads(1)
warm_up()
gc.freeze()
