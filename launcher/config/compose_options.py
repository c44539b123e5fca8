"""What `dfl-launch compose` adds to the run options, with its defaults: apart from the compose
backend (launcher/backends/compose.py), which imports the runtime, so that the CLI can declare
the options without it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DEFAULT_IMAGE = "dfl-mesh"
DEFAULT_SUBNET = "172.29.13.0/24"


@dataclass(frozen=True)
class ComposeOptions:
    """What `dfl-launch compose` adds to the run options."""

    out: Path
    image: str = DEFAULT_IMAGE
    subnet: str = DEFAULT_SUBNET
