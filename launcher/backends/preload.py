"""What the launcher's forkserver imports before it forks any node.

Importing torch and the node code once, in the forkserver, saves every node that cost. So does
warming torch up: the first model a process builds and the first step it takes pay about 0.3 s
of one-time initialisation (operator dispatch, allocator, kernels), which every node would
otherwise repeat. Freezing the garbage collector afterwards moves all of it out of the
collector's reach, so a node's collections never write to (and so never copy) the pages it
shares with its siblings.

No backward pass when a node may use CUDA (the launcher sets WARM_UP_ENV to "forward"): torch's
autograd engine, on its first backward, counts the GPUs to start a thread per device, which
initialises the CUDA driver in the forkserver and marks every child as a bad autograd fork; a
node forked from it then fails its first CUDA call ("initialization error"). The forward pass
touches no driver, so GPU meshes keep that part of the warm-up.
"""

import gc
import os
import warnings

import numpy as np
import torch

import launcher.node_cli  # noqa: F401
from dfl_node.learning.models import build_model
from dfl_node.learning.torch_settings import WARM_UP_ENV
from dfl_node.learning.training import compute_gradients, evaluate


def warm_up(backward: bool) -> None:
    for name, shape in (("cnn", (1, 28, 28)), ("mlp", (32,))):
        model = build_model({"name": name}, shape, 10, seed=0)
        x = np.zeros((8, *shape), dtype=np.float32)
        y = np.zeros(8, dtype=np.int64)
        if backward:
            compute_gradients(model, torch.from_numpy(x), torch.from_numpy(y))
        evaluate(model, x, y, torch.device("cpu"))


# A node forked from here first re-runs the launcher's main module (multiprocessing's fixup of
# `python -m launcher.cli`), which the forkserver has already imported to spare every node that
# import; runpy warns about exactly that, once per node, and nothing is wrong.
warnings.filterwarnings("ignore", message=r"'launcher\.cli' found in sys\.modules",
                        category=RuntimeWarning)
torch.set_num_threads(1)
warm_up(backward=os.environ.get(WARM_UP_ENV, "full") != "forward")
gc.freeze()
