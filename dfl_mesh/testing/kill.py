"""A real run cut short after a known round: `dfl-launch` in its own process group, killed
once every node has saved that round's checkpoint, and every node process gone before the
caller goes on.

The cut needs no sleep and no luck: node 0 stalls at the start of the next round (the
runtime's fault injection, dfl_node/transports/liveness.py), so however fast the machine, the
run cannot end before the kill, and the kill waits for the checkpoint files themselves.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from dfl_mesh.testing.processes import children, node_pids, wait_for, wait_gone
from dfl_node.state import checkpoint_layout as layout
from dfl_node.transports.liveness import STALL_ENV

# How a run is cut short: SIGKILL of the launcher, the zygote and every node at once (what a
# plugin author's check uses); SIGTERM to the launcher, which stops the run in order (exit
# 143); SIGKILL of the zygote alone, which ends the run (exit 1). The value: the launcher's
# exit status.
FAULTS = {"sigkill": -signal.SIGKILL, "sigterm": 143, "zygote": 1}


def node_ids(run_dir: Path) -> list[int]:
    return [n["id"] for n in json.loads((run_dir / "plan.json").read_text())["nodes"]]


def kill_after_checkpoint(out: Path, round_: int, argv: Sequence[str], timeout_s: float = 300,
                          python: str = sys.executable, fault: str = "sigkill",
                          cwd: Path | None = None, env: Mapping[str, str] | None = None) -> None:
    """Start `dfl-launch ARGV --out OUT` with `python`, wait until every node has saved round
    `round_`, then cut the run short by `fault` (FAULTS) and wait until its nodes are gone."""
    cmd = [python, "-m", "launcher.cli", "--out", str(out), "--quiet", "--no-plots", *argv]
    stalled = {**(env if env is not None else os.environ), STALL_ENV: f"0:{round_}:{timeout_s}"}
    proc = subprocess.Popen(cmd, cwd=cwd, env=stalled, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)

    def saved() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"the run to be killed ended before round {round_} "
                                 f"(exit {proc.returncode}): " + _tail(proc))
        try:
            ids = node_ids(out)
        except FileNotFoundError:  # not written yet (RunPlan.dump renames it into place whole)
            return False
        return layout.last_complete_round(out, ids) >= round_

    try:
        wait_for(saved, timeout_s, f"a complete checkpoint of round {round_} in {out}")
        if fault == "sigterm":
            proc.send_signal(signal.SIGTERM)
        elif fault == "zygote":
            [zygote] = children(proc.pid)  # the launcher forks the zygote, the zygote the nodes
            os.kill(zygote, signal.SIGKILL)
        if fault != "sigkill":
            proc.wait(timeout_s)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if proc.returncode != FAULTS[fault]:
        raise AssertionError(f"the killed run exited {proc.returncode}, not "
                             f"{FAULTS[fault]}: " + _tail(proc))
    wait_until_gone(out)


def wait_until_gone(run_dir: Path, timeout_s: float = 30) -> None:
    """Every node process of the killed run has exited (their pids are in their logs)."""
    left = wait_gone(list(node_pids(run_dir).values()), timeout_s)
    if left:
        raise AssertionError(f"nodes {left} outlived their killed launcher")


def _tail(proc: subprocess.Popen[bytes]) -> str:
    assert proc.stderr is not None
    return proc.stderr.read().decode(errors="replace")[-2000:].strip()
