"""Process-wide torch settings a plan asks for: CPU threads and deterministic kernels.

They sit in `hyper` (RuntimeHyper, dfl_node/settings/runtime.py, declares them and their
defaults) because a user sets them like any other hyper-parameter, but they belong to the
process that runs nodes, not to a protocol: a launched node process applies them before it
builds its model, and the inproc transport applies them once for all its node threads.

`deterministic: true` is for GPU runs. On the CPU every kernel dfl-mesh uses is already
deterministic, which is why the zmq and inproc transports agree bit for bit there; on CUDA,
cuBLAS and cuDNN may pick kernels whose reductions depend on the workspace or the launch, so a
GPU run equals itself (and the other transport) only with
`torch.use_deterministic_algorithms(True)` and `CUBLAS_WORKSPACE_CONFIG` set before cuBLAS
starts. It is off by default because it costs speed and because torch raises on an operation
that has no deterministic kernel, which a user should meet only on asking for exactness.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import torch
from pydantic import ValidationError

from dfl_config.problems import one_line
from dfl_node.settings.runtime import RuntimeHyper

# torch's documented setting for deterministic cuBLAS (CUDA >= 10.2); one user-given wins.
CUBLAS_WORKSPACE = ":4096:8"


def runtime_settings(hyper: Mapping[str, Any]) -> RuntimeHyper:
    """The runtime keys of a `hyper` block (the protocol's own keys are its model's concern),
    with RuntimeHyper's defaults for the ones it lacks; ValueError (one line) on a bad value."""
    mine = {key: value for key, value in hyper.items() if key in RuntimeHyper.model_fields}
    try:
        return RuntimeHyper.model_validate(mine)
    except ValidationError as exc:
        raise ValueError(one_line(exc, RuntimeHyper)) from None


def check_runtime(hyper: Mapping[str, Any]) -> None:
    """Raise ValueError (one line) on a bad runtime setting, before any node starts."""
    runtime_settings(hyper)


def apply_runtime(hyper: Mapping[str, Any]) -> None:
    """Set this process's torch threads and, if asked, deterministic kernels (call it before
    the process touches CUDA: cuBLAS reads its workspace setting once)."""
    settings = runtime_settings(hyper)
    torch.set_num_threads(settings.torch_threads)
    if settings.deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE)
        torch.use_deterministic_algorithms(True)
