"""Which of this host's addresses another host reaches it at.

Kept apart, with nothing but the standard library, because the launcher asks it before
importing the runtime: `dfl-launch slurm --submit` picks the address its collector listens at
before it submits the job, and submits before the seconds of imports the rest of a run needs.
"""

from __future__ import annotations

import socket


def route_source(host: str, port: int) -> str:
    """The address of this host's interface that routes to `host` (an OSError when none
    does). A UDP connect sends nothing; it only asks the kernel for the route."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        probe.connect((host, port))
        return str(probe.getsockname()[0])
