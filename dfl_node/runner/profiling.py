"""Opt-in profile of a node's rounds: `DFL_MESH_PROFILE=0,3` (node ids, or `all`).

Where a round's time goes can only be seen inside a real mesh, whose neighbours set a node's
pace, so the named nodes run their rounds (not start-up or the final save) under cProfile and
write `profile/node-<id>.prof` into the run directory, for `pstats` or bench/overhead.py.
"""

from __future__ import annotations

import cProfile
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PROFILE_ENV = "DFL_MESH_PROFILE"
# "cpu": time the profiled thread's CPU (time.thread_time) instead of the wall clock, so that a
# profile taken on a machine with fewer cores than nodes attributes the node's own work, not the
# time it spent descheduled while its siblings ran.
PROFILE_CLOCK_ENV = "DFL_MESH_PROFILE_CLOCK"


@contextmanager
def profiled(node_id: int, out_dir: Path) -> Iterator[None]:
    """Run the block under cProfile when $DFL_MESH_PROFILE names this node; else just run it."""
    wanted = os.environ.get(PROFILE_ENV, "").split(",")
    if "all" not in wanted and str(node_id) not in wanted:
        yield
        return
    cpu = os.environ.get(PROFILE_CLOCK_ENV) == "cpu"
    profile = cProfile.Profile(time.thread_time) if cpu else cProfile.Profile()
    profile.enable()
    try:
        yield
    finally:
        profile.disable()
        path = out_dir / "profile" / f"node-{node_id}.prof"
        path.parent.mkdir(parents=True, exist_ok=True)
        profile.dump_stats(path)
