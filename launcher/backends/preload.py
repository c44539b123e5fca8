"""How the processes backend's zygote (launcher/backends/zygote.py) warms torch up before it
forks any node.

The first model a process builds and the first step it takes pay one-time initialisation:
operator dispatch, the allocator, kernels, modules torch imports on first use (15 ms here since
models are materialised without torch's sympy-importing path: models.py's `on_cpu`; 0.35 s
before). Done once in the zygote, every node forked from it inherits the result instead of
repeating it. Freezing the garbage collector afterwards moves all of it out of the collector's
reach, so a node's collections never write to (and so never copy) the pages it shares with its
siblings.

The warm-up comes in two parts because the zygote starts before the plan is known: the forward
pass at once (while the launcher resolves the plan), the backward pass only once the launcher
says every node is on the CPU. torch's autograd engine, on its first backward, counts the GPUs
to start a thread per device, which initialises the CUDA driver in the zygote and marks every
child as a bad autograd fork; a node forked from it then fails its first CUDA call
("initialization error"). The forward pass touches no driver, so GPU meshes keep that part.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
from pathlib import Path

import numpy.random  # noqa: F401  # every node's seeded streams; imported lazily by numpy
import torch

from dfl_node.learning.datacache import DataError
from dfl_node.learning.models import build_model
from dfl_node.learning.shards import plan_data
from dfl_node.learning.torch_settings import runtime_settings
from dfl_node.learning.training import compute_gradients, evaluate
from dfl_node.plan import RunPlan
from dfl_node.settings.model import ModelError
from protocols.registry import node_class

# The models warmed up: the default CNN for images and an MLP, with an input of each kind.
WARM_MODELS = (("cnn", (1, 28, 28)), ("mlp", (32,)))
BATCH = 8
# OpenBLAS's thread setter by the names its builds export (numpy's wheels prefix and suffix it)
OPENBLAS_SETTERS = ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_",
                    "openblas_set_num_threads")


def one_blas_thread() -> None:
    """numpy's BLAS down to one thread, as torch is (`torch_threads`). OpenBLAS sized its thread
    pool from the machine's cores when the launcher imported numpy, and the nodes forked from
    here would keep that size (the multiprocessing forkserver this replaced started with
    OMP_NUM_THREADS=1 for this). Every OpenBLAS this process has loaded, found in its memory
    map and set by any of the names its builds export; another BLAS is left as it is."""
    with open("/proc/self/maps", encoding="utf-8") as maps:
        paths = sorted({line.split()[-1] for line in maps
                        if "openblas" in line.lower() and line.split()[-1].startswith("/")})
    for path in paths:
        library = ctypes.CDLL(path)
        setter = next((getattr(library, name) for name in OPENBLAS_SETTERS
                       if hasattr(library, name)), None)
        if setter is not None:
            setter(1)


def batches() -> list[tuple[torch.nn.Module, torch.Tensor, torch.Tensor]]:
    out = []
    for name, shape in WARM_MODELS:
        model = build_model({"name": name}, shape, 10, seed=0)
        out.append((model, torch.zeros((BATCH, *shape)), torch.zeros(BATCH, dtype=torch.int64)))
    return out


def warm_forward() -> None:
    """Build each model and evaluate it: safe whatever device the nodes will use."""
    torch.set_num_threads(1)
    for model, x, y in batches():
        evaluate(model, x.numpy(), y.numpy(), torch.device("cpu"))


def warm_backward() -> None:
    """One gradient of each model: only for a mesh whose every node is on the CPU."""
    for model, x, y in batches():
        compute_gradients(model, x, y)


def warm_data(plan_path: Path) -> None:
    """What every node of the plan derives alike from its data (the partition, the global
    evaluation split: dfl_node/learning/shards.py's PlanData) and its initial model, computed
    here once and shared by the nodes forked after it instead of computed and held by each. A
    protocol that brings its own data has no prepared dataset here, and nothing to share. The
    plan's protocol is imported here too (the registry loads one by name), so that no node
    imports it for itself. So is the plan itself, with what every node computes from it on
    its way to round 1 (its section hashes, its diameter, the validator of its runtime
    settings): each node reads the plan file again and, finding the same bytes, gets this
    plan object (RunPlan.load)."""
    plan = RunPlan.load(plan_path)
    plan.section_hashes()
    plan.diameter()
    runtime_settings(plan.hyper)
    node_class(plan.protocol)
    with contextlib.suppress(DataError, ModelError):
        arrays = plan_data(plan.data, len(plan.clients)).arrays
        build_model(plan.model, arrays.x_train.shape[1:], arrays.classes, plan.seed)


def freeze() -> None:
    """Everything allocated so far leaves the garbage collector's reach (see above)."""
    gc.freeze()

