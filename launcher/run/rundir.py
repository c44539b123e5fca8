"""The run directory of DESIGN: config, plan, metrics, summary, final/, logs/."""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Any

import yaml


def default_run_dir(protocol: str, topology: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{stamp}-{protocol}-{topology}"


def prepare(run_dir: Path, config: dict[str, Any]) -> None:
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    (run_dir / "final").mkdir(exist_ok=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=True))


def write_json(path: Path, data: Any) -> None:
    """`data` as `path`, whole or not at all: written beside it, then renamed; a write the
    file system refuses leaves no temporary file."""
    tmp = path.with_suffix(".tmp")
    try:
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        tmp.replace(path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise
