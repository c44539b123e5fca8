"""Which device each node runs on, checked before anything starts."""

from __future__ import annotations

from launcher.errors import LaunchError


def visible_gpus() -> int:
    """CUDA devices this host sees. torch is imported here, only when a node asks for a GPU: a
    CPU mesh is planned without it (and a Slurm job without it on the submit host)."""
    import torch

    return torch.cuda.device_count()


def resolve_devices(requested: list[tuple[int, str | None]], gpus: int | None = None) -> list[str]:
    """`cpu`, `cuda` (= cuda:0), `cuda:K`, `auto` (round-robin over visible GPUs, else cpu).

    A named GPU that is not visible is bad input: exit 2 before any node starts.
    """
    out, auto_next = [], 0
    for node_id, device in requested:
        if device in (None, "cpu"):
            out.append("cpu")
            continue
        count = visible_gpus() if gpus is None else gpus
        if device == "auto":
            out.append(f"cuda:{auto_next % count}" if count else "cpu")
            auto_next += count > 0
        else:
            ordinal = 0 if device == "cuda" else int(device.split(":")[1])
            if ordinal >= count:
                raise LaunchError(f"node {node_id}: device {device!r} does not exist "
                                  f"({count} CUDA device(s) visible)")
            out.append(f"cuda:{ordinal}")
    return out
