"""The run directory of DESIGN: config, plan, metrics, summary, final/, logs/."""

from __future__ import annotations

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
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)
