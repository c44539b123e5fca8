"""Whether there is a CUDA device to measure, asked before anything else is done.

    python -m bench.cuda_check [DEVICE]      (default cuda:0)

Silent with exit 0 when torch sees DEVICE; otherwise one line on stderr and exit NO_DEVICE (77,
the code test harnesses read as "skipped": automake, meson, ctest's SKIP_RETURN_CODE), so that
`bash bench/gpu.sh` on a machine without a GPU is neither a failure (1) nor a success that
measured something (0). It imports torch alone (an interpreter without torch has no device
either): bench/gpu.sh asks it before installing the wheels the measurement needs, and
bench/gpu.py asks it before its first step.
"""

from __future__ import annotations

import sys

NO_DEVICE = 77


def missing(device: str) -> str | None:
    """Why `device` cannot be measured here, in one line; None when it can (or is the CPU)."""
    try:
        import torch
    except ImportError:
        return f"no CUDA device here ({sys.executable} has no torch): nothing measured"
    wanted = torch.device(device)
    if wanted.type != "cuda":
        return None
    if not torch.cuda.is_available():
        return f"no CUDA device here (torch {torch.__version__} sees none): nothing measured"
    index = wanted.index or 0
    if index >= torch.cuda.device_count():
        return (f"no CUDA device {device} here (torch sees {torch.cuda.device_count()}): "
                "nothing measured")
    return None


def require(device: str, who: str) -> None:
    """Exit NO_DEVICE with `who: <reason>` when `device` is missing."""
    reason = missing(device)
    if reason is not None:
        print(f"{who}: {reason}", file=sys.stderr, flush=True)
        sys.exit(NO_DEVICE)


if __name__ == "__main__":
    require(sys.argv[1] if len(sys.argv) > 1 else "cuda:0", "bench/gpu.sh")
