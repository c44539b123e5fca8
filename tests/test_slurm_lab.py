"""The private Slurm cluster of tests/slurm_lab.py, before anything of ours runs on it: a real
slurmctld schedules a two-node job on two slurmd that are two hosts (two network namespaces, two
hostnames), scancel stops a running job on both, `sacct -c` reads back what finished, and
nothing of a lab survives it: not after a clean exit, not after an exception in the block, not
after the process holding it is interrupted or terminated.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import slurm_lab
from tests.conftest import require
from tests.harness import ENV_ROOT, ROOT
from tests.proc_util import alive, wait_for

pytestmark = pytest.mark.slow

WAIT_S = 120  # a bound on a state change of an idle two-node cluster, not an estimate
STACKS_S = 10  # a bound on faulthandler's dump of a stuck process's stacks
# What each task reports: the hostname it sees, the node Slurm says it is on, its addresses.
WHO = 'echo "$(hostname) $SLURMD_NODENAME $(ip -4 -o addr show dev eth0)"'


@pytest.fixture(scope="module")
def lab() -> Iterator[slurm_lab.Cluster]:
    reason = slurm_lab.unavailable()
    require(reason is None, reason or "")
    with slurm_lab.cluster(nodes=2) as made:
        daemons = [proc.pid for proc in made.procs.values()]
        yield made
    assert slurm_lab.leftovers(made.root, made.net.prefix) == [], "the lab was not removed"
    assert not any(alive(pid) for pid in daemons)


def sacct(lab: slurm_lab.Cluster, job: str) -> dict[str, str]:
    """The job's record from `sacct -c` (jobcomp/filetxt; no slurmdbd), {} before it has one."""
    out = lab.run(["sacct", "-c", "-j", job, "-P", "-n", "-o", "JobID,State,NNodes,NodeList"])
    rows = [line.split("|") for line in out.stdout.splitlines() if line.startswith(f"{job}|")]
    return dict(zip(("id", "state", "nodes", "nodelist"), rows[0], strict=True)) if rows else {}


def test_two_node_job_runs_one_task_on_each_host(lab: slurm_lab.Cluster) -> None:
    assert lab.node_states() == {"n1": "idle", "n2": "idle"}
    out = lab.root / "who.out"
    submitted = lab.run(["sbatch", "--wait", "--parsable", "-N2", "--ntasks-per-node=1",
                         "-o", str(out), "--wrap", f"srun sh -c '{WHO}'"])
    job = submitted.stdout.strip().split(";")[0]
    seen = {}
    for line in out.read_text().splitlines():
        words = line.split()
        seen[words[0]] = (words[1], words[words.index("inet") + 1].split("/")[0])
    # Each node's task saw that node's hostname and only that node's address.
    assert seen == {name: (name, lab.address(name)) for name in lab.nodes}, out.read_text()
    wait_for(lambda: sacct(lab, job), WAIT_S, f"a record of job {job} in sacct -c")
    assert sacct(lab, job) == {"id": job, "state": "COMPLETED", "nodes": "2",
                               "nodelist": "n[1-2]"}


def test_scancel_stops_a_running_job_on_both_hosts(lab: slurm_lab.Cluster) -> None:
    marks = lab.root / "marks"
    marks.mkdir()
    # Each task marks that it runs, then waits on a pipe no one writes: only a kill ends it.
    task = f"touch {marks}/$(hostname); exec tail -f /dev/null"
    job = lab.run(["sbatch", "--parsable", "-N2", "--ntasks-per-node=1", "-o",
                   str(lab.root / "cancelled.out"), "--wrap", f"srun sh -c '{task}'"]
                  ).stdout.strip().split(";")[0]
    wait_for(lambda: sorted(p.name for p in marks.iterdir()) == lab.nodes, WAIT_S,
             f"job {job}'s task running on both nodes")
    assert lab.job_state(job) == "RUNNING"
    assert lab.strays(), "no task process in the nodes' namespaces"

    lab.run(["scancel", job])
    wait_for(lambda: sacct(lab, job).get("state") == "CANCELLED", WAIT_S,
             f"job {job} recorded as cancelled")
    wait_for(lambda: not lab.strays(), WAIT_S, "the job's processes gone from both nodes")
    wait_for(lambda: lab.node_states() == {"n1": "idle", "n2": "idle"}, WAIT_S,
             "both nodes idle again")


def test_lab_is_removed_when_the_block_raises() -> None:
    reason = slurm_lab.unavailable()
    require(reason is None, reason or "")
    with pytest.raises(RuntimeError, match="the test failed"), \
            slurm_lab.cluster(nodes=1) as made:
        assert made.node_states() == {"n1": "idle"}
        raise RuntimeError("the test failed")
    assert slurm_lab.leftovers(made.root, made.net.prefix) == []


HOLDER = """\
import faulthandler, json, signal, sys
from tests import slurm_lab
faulthandler.register(signal.SIGUSR1)  # where a slow teardown is, should the test time out
# Ctrl-C in a terminal raises KeyboardInterrupt; a process started in the background by a
# shell without job control (a CI job's, say) inherits SIGINT ignored, and Python keeps it so.
signal.signal(signal.SIGINT, signal.default_int_handler)
with slurm_lab.cluster(nodes=1) as made:
    print(json.dumps({"root": str(made.root), "prefix": made.net.prefix}), flush=True)
    sys.stdin.read()
"""


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_lab_is_removed_when_its_process_is_stopped(sig: signal.Signals) -> None:
    """A lab in another process, which gets Ctrl-C (SIGINT) or a runner's kill (SIGTERM)
    while it holds the lab."""
    reason = slurm_lab.unavailable()
    require(reason is None, reason or "")
    proc = subprocess.Popen([sys.executable, "-c", HOLDER], env=ENV_ROOT, cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    made: dict[str, str] = {}
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, f"the lab did not start: {proc.communicate(timeout=WAIT_S)[1][-3000:]}"
        made = json.loads(line)
        proc.send_signal(sig)
        try:
            proc.wait(WAIT_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the lab's process outlived {sig.name} by {WAIT_S} s; its stacks:\n"
                        f"{stacks(proc)}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
            if made:  # killed outright: nothing of its own removed the lab
                slurm_lab.remove_leftovers(Path(made["root"]), made["prefix"])
    assert proc.returncode != 0
    assert slurm_lab.leftovers(Path(made["root"]), made["prefix"]) == []


def stacks(proc: subprocess.Popen[str]) -> str:
    """What a stuck holder is doing: faulthandler's dump of its threads (SIGUSR1), then its
    stderr once it is killed."""
    proc.send_signal(signal.SIGUSR1)
    try:
        return proc.communicate(timeout=STACKS_S)[1][-6000:]
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.communicate()[1][-6000:]
