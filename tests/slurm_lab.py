"""A private Slurm cluster on this machine, for tests that must meet a real scheduler.

A mock of sbatch would only tell us what we believe Slurm does; `dfl-launch slurm --submit`
has to be judged by slurmctld and slurmd themselves. So `cluster()` starts the real daemons on
the network namespaces of tests/netns.py: the controller (slurmctld, munged) in host 0, which
is also the login node where every client command runs, and one slurmd per further host, each
in a UTS namespace of its own whose hostname is its node's name. Two slurmd therefore answer
on two addresses and report two hostnames, as on two machines, and every port they open is in
a namespace of the lab's own, so nothing can collide with the machine's services or another
lab. Daemons and clients enter the namespaces with nsenter rather than `ip netns exec`, whose
fresh /sys would hide the cgroup mounts slurmd looks for (CGROUP_ROOT).

Nothing of the machine's Slurm or munge is used or touched: the munge key, munged's socket,
slurm.conf, state, spool and logs all live in one fresh directory. On the way out, also when
the test fails or is interrupted (the context manager, and an atexit hook for a block that
never reached its `finally`), every process still in a lab namespace is killed (slurmstepd and
job tasks included, which are not children of anything we started), the namespaces are deleted
and the directory removed; `leftovers()` says what survived.

Accounting: Slurm 22.05 keeps full job and step records for `sacct` only through slurmdbd,
which needs a MySQL server (the filetxt accounting storage plugin is gone), and a plain `sacct`
says "Slurm accounting storage is disabled". The lab records every finished job with
jobcomp/filetxt instead, which `sacct -c` (--completion) reads: one line per job (JobID,
State, NNodes, NodeList, End, ...; no steps, no --json). `completed()` parses the same file.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests import netns
from tests.proc_util import alive, poll

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "srun", "scontrol", "sinfo", "squeue", "scancel", "sacct")
CONTROLLER = "ctl"
# slurmd 22.05 initialises its cgroup plugin at start whatever plugins slurm.conf names, and
# gives up when no cgroup file system is mounted here; it creates nothing in it.
CGROUP_ROOT = "/sys/fs/cgroup"
START_TIMEOUT_S = 120  # a bound, not an estimate: two slurmd register within seconds when idle
STOP_TIMEOUT_S = 20
COMMAND_TIMEOUT_S = 120
# Runs argv[2:] with the hostname argv[1], in the UTS namespace `unshare --uts` just made.
SET_HOSTNAME = "import os, socket, sys; socket.sethostname(sys.argv[1]); " \
               "os.execvp(sys.argv[2], sys.argv[2:])"


class SlurmLabError(RuntimeError):
    """A daemon did not come up or a command failed; the message carries its log or stderr."""


def unavailable() -> str | None:
    """Why no lab can run here (a skip reason), or None."""
    reason = netns.unavailable()
    if reason:
        return reason
    missing = [tool for tool in (*DAEMONS, *CLIENTS, "nsenter", "unshare")
               if shutil.which(tool) is None]
    if missing:
        return f"missing {', '.join(missing)} (apt-get install slurm-wlm munge)"
    if not os.path.ismount(CGROUP_ROOT):
        return f"nothing mounted on {CGROUP_ROOT}: slurmd 22.05 will not start without it"
    return None


@dataclass
class Cluster:
    """A running lab: node k (named `nodes[k]`) is netns host k+1, the controller host 0."""

    root: Path
    net: netns.Lab
    nodes: list[str]
    cpus: int
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """What a client needs: the lab's slurm.conf (it names munged's socket)."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    @property
    def controller_address(self) -> str:
        return self.net.address(0)

    def address(self, node: str) -> str:
        return self.net.address(self.nodes.index(node) + 1)

    def login_prefix(self) -> list[str]:
        """The argv prefix of a command on the login node: only there is slurmctld reachable,
        and only from there can slurmd reach back to srun."""
        return hostname_prefix(self.net, 0, CONTROLLER)

    def start(self, argv: Sequence[str], log: Path, cwd: Path | None = None,
              env: dict[str, str] | None = None) -> subprocess.Popen:
        """A long-running client (an `srun` to cancel, say) on the login node, with `env`
        added to the lab's environment (sbatch passes it on to the job's tasks)."""
        with log.open("wb") as out:
            return subprocess.Popen([*self.login_prefix(), *argv], env={**self.env, **(env or {})},
                                    cwd=cwd or self.root, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)

    def run(self, argv: Sequence[str], check: bool = True, cwd: Path | None = None,
            timeout: float = COMMAND_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        """A command on the login node with the lab's environment; SlurmLabError when `check`
        and it fails."""
        proc = subprocess.run([*self.login_prefix(), *argv], env=self.env, cwd=cwd or self.root,
                              capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise SlurmLabError(f"{' '.join(argv)}: exit {proc.returncode}: "
                                f"{proc.stderr.strip()[-3000:]}")
        return proc

    def node_states(self) -> dict[str, str]:
        """Node name -> its state as sinfo abbreviates it (idle, alloc, down*, ...)."""
        out = self.run(["sinfo", "-h", "-N", "-o", "%N %t"], check=False).stdout
        return dict(line.split() for line in out.splitlines() if len(line.split()) == 2)

    def job_state(self, job: str) -> str | None:
        """The job's state while slurmctld still lists it (PENDING, RUNNING, ...), else None."""
        out = self.run(["squeue", "-h", "-j", job, "-o", "%T"], check=False).stdout.strip()
        return out or None

    def completed(self) -> list[dict[str, str]]:
        """The finished jobs jobcomp/filetxt recorded, one dict of its KEY=VALUE fields each:
        what `sacct -c` prints, without a client to run on the login node."""
        path = self.root / "jobcomp.txt"
        if not path.exists():
            return []
        return [dict(word.split("=", 1) for word in line.split() if "=" in word)
                for line in path.read_text().splitlines() if line.strip()]

    def strays(self) -> list[int]:
        """Live processes on the nodes other than slurmd itself: a job's slurmstepd and
        tasks, none once every job has ended."""
        daemons = {self.procs[name].pid for name in self.nodes}
        pids: list[int] = []
        for k in range(1, len(self.nodes) + 1):
            with contextlib.suppress(netns.LabError, OSError):
                pids += [int(p) for p in netns.ip("netns", "pids", self.net.hosts[k]).split()]
        return [p for p in pids if p not in daemons and alive(p)]

    def logs(self, chars: int = 3000) -> str:
        """The tail of every daemon's log: what a failed start or job is explained by."""
        parts = []
        for log in sorted(self.root.rglob("*.log")):
            parts.append(f"--- {log.relative_to(self.root)}\n{tail(log, chars)}")
        return "\n".join(parts)


def hostname_prefix(net: netns.Lab, host: int, name: str) -> list[str]:
    """The argv prefix that runs a command in netns host `host` under the hostname `name`."""
    return [*net.enter_prefix(host), "unshare", "--uts", sys.executable, "-c", SET_HOSTNAME, name]


def tail(path: Path, chars: int = 3000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else ""


def slurm_conf(cluster: Cluster) -> str:
    """The lab's slurm.conf. Every daemon runs as root (SlurmUser, SlurmdUser): the test runs
    as root and needs no user of its own. No plugin that uses cgroups (proctrack/linuxproc,
    task/none, jobacct_gather/none): the machine's cgroup tree is not the lab's to change.
    SlurmdParameters=config_overrides lets every node claim `cpus` whatever the machine has, so
    two nodes fit on one small machine. The ports are Slurm's defaults: each daemon listens in
    a namespace of its own. Short timeouts bound how long a dead node or a killed job can stall a
    test; they do not change what a healthy cluster does."""
    root = cluster.root
    nodes = "\n".join(
        f"NodeName={name} NodeAddr={cluster.address(name)} NodeHostname={name} "
        f"CPUs={cluster.cpus} State=UNKNOWN" for name in cluster.nodes)
    return f"""\
ClusterName=dfllab
SlurmctldHost={CONTROLLER}({cluster.controller_address})
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={root}/munge/munge.socket
CredType=cred/munge
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation={root}/ctld/state
SlurmctldPidFile={root}/ctld/slurmctld.pid
SlurmctldLogFile={root}/ctld/slurmctld.log
SlurmdSpoolDir={root}/nodes/%n/spool
SlurmdPidFile={root}/nodes/%n/slurmd.pid
SlurmdLogFile={root}/nodes/%n/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={root}/jobcomp.txt
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
SlurmdParameters=config_overrides
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=300
{nodes}
PartitionName=lab Nodes={','.join(cluster.nodes)} Default=YES MaxTime=INFINITE State=UP
"""


def write_munge_key(root: Path) -> Path:
    """A fresh key of the lab's own: munged refuses a key others can read."""
    folder = root / "munge"
    folder.mkdir(mode=0o700)
    key = folder / "munge.key"
    key.write_bytes(secrets.token_bytes(1024))
    key.chmod(0o400)
    return key


def spawn(cluster: Cluster, name: str, prefix: list[str], argv: list[str]) -> None:
    log = cluster.root / "logs" / f"{name}.out"
    log.parent.mkdir(exist_ok=True)
    with log.open("wb") as out:
        cluster.procs[name] = subprocess.Popen([*prefix, *argv], env=cluster.env,
                                               cwd=cluster.root, stdout=out,
                                               stderr=subprocess.STDOUT, start_new_session=True)


def wait_up(cluster: Cluster, what: str, predicate: Callable[[], object]) -> None:
    """Wait for `predicate`, failing early, with the logs, when a daemon has died."""

    def ready() -> bool:
        dead = {n: p.returncode for n, p in cluster.procs.items() if p.poll() is not None}
        if dead:
            raise SlurmLabError(f"{dead} exited while waiting for {what}:\n{cluster.logs()}")
        return bool(predicate())

    if not poll(ready, START_TIMEOUT_S):
        raise SlurmLabError(f"no {what} after {START_TIMEOUT_S} s:\n{cluster.logs()}")


def start_daemons(cluster: Cluster) -> None:
    """munged, then slurmctld, then every slurmd; returns when every node is idle."""
    root = cluster.root
    key = write_munge_key(root)
    munge = root / "munge"
    login = hostname_prefix(cluster.net, 0, CONTROLLER)
    spawn(cluster, "munged", login, [
        "munged", "--foreground", "--force", f"--key-file={key}",
        f"--socket={munge}/munge.socket", f"--pid-file={munge}/munged.pid",
        f"--log-file={munge}/munged.log", f"--seed-file={munge}/munged.seed"])
    wait_up(cluster, "munged socket", (munge / "munge.socket").exists)

    (root / "ctld" / "state").mkdir(parents=True)
    for name in cluster.nodes:
        (root / "nodes" / name / "spool").mkdir(parents=True)
    cluster.conf.write_text(slurm_conf(cluster))
    spawn(cluster, "slurmctld", login, ["slurmctld", "-D", "-i"])
    wait_up(cluster, "slurmctld answering",
            lambda: "UP" in cluster.run(["scontrol", "ping"], check=False).stdout)
    for k, name in enumerate(cluster.nodes, start=1):
        spawn(cluster, name, hostname_prefix(cluster.net, k, name), ["slurmd", "-D", "-N", name])
    wait_up(cluster, "every node idle",
            lambda: cluster.node_states() == dict.fromkeys(cluster.nodes, "idle"))


def lab_pids(namespaces: Sequence[str]) -> list[int]:
    """Every process in the lab's namespaces: daemons, slurmstepd, job tasks."""
    pids: list[int] = []
    for name in namespaces:
        with contextlib.suppress(netns.LabError, OSError):
            pids += [int(p) for p in netns.ip("netns", "pids", name).split()]
    return pids


def signal_all(pids: Sequence[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def stop(cluster: Cluster) -> None:
    """SIGTERM to everything of the lab, SIGKILL to what outlives STOP_TIMEOUT_S; then reap
    our own children, so none lingers as a zombie."""

    def remaining() -> list[int]:
        pids = {*lab_pids(cluster.net.made), *lab_processes(cluster.root)}
        return [p for p in pids if alive(p)]

    signal_all(remaining(), signal.SIGTERM)
    if not poll(lambda: not remaining(), STOP_TIMEOUT_S):
        signal_all(remaining(), signal.SIGKILL)
        poll(lambda: not remaining(), STOP_TIMEOUT_S)
    for proc in cluster.procs.values():
        if proc.poll() is None:
            proc.kill()
        proc.wait(STOP_TIMEOUT_S)


def lab_processes(root: Path) -> list[int]:
    """Processes anywhere on the machine whose command line or environment names the lab's
    directory: the daemons (their config paths, SLURM_CONF) and every job task (sbatch passes
    SLURM_CONF on), found even after their namespaces are gone."""
    mark = str(root).encode()
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        if int(proc.name) == os.getpid():
            continue
        try:
            text = (proc / "cmdline").read_bytes() + (proc / "environ").read_bytes()
        except OSError:
            continue
        if mark in text and alive(int(proc.name)):
            found.append(int(proc.name))
    return found


def leftovers(root: Path, prefix: str) -> list[str]:
    """What of a lab (its directory, its namespaces' prefix) is still there: processes,
    namespaces and links, the directory. Needs no live Cluster, so a test can check a lab
    that another process made and was killed in."""
    found = [f"pid {pid}: {Path(f'/proc/{pid}/cmdline').read_bytes()!r}"
             for pid in lab_processes(root)]
    found += netns.leftovers(prefix)
    if root.exists():
        found.append(str(root))
    return found


def remove_leftovers(root: Path, prefix: str) -> None:
    """Remove what a lab whose process was killed outright (SIGKILL runs no `finally` and no
    atexit hook) left: its processes, its namespaces (their links go with them), its
    directory. For a test that had to kill a lab's holder, so that its daemons do not
    outlive the test."""
    names = [line.split()[0] for line in netns.ip("netns", "list").splitlines()
             if line.startswith(prefix)]

    def remaining() -> list[int]:
        return [p for p in {*lab_pids(names), *lab_processes(root)} if alive(p)]

    signal_all(remaining(), signal.SIGKILL)
    poll(lambda: not remaining(), STOP_TIMEOUT_S)
    netns.teardown(names)
    shutil.rmtree(root, ignore_errors=True)


@contextlib.contextmanager
def terminate_unwinds() -> Iterator[None]:
    """SIGTERM raises SystemExit for the block, so that a test runner's kill (a CI job's
    timeout, say) still unwinds the lab; by default Python dies on SIGTERM without running
    a `finally`. Only the main thread can set a handler, and one set by someone else is
    kept."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL):
        yield
        return

    def leave(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, leave)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


@contextlib.contextmanager
def cluster(nodes: int = 2, cpus: int = 2) -> Iterator[Cluster]:
    """A running Slurm cluster of `nodes` nodes with `cpus` cpus each, for the block; gone
    afterwards, whatever happened. The directory is short and under /tmp: munged's socket path
    must fit in 108 bytes."""
    root = Path(tempfile.mkdtemp(prefix="dfl-slurm-", dir="/tmp"))
    with terminate_unwinds(), contextlib.ExitStack() as stack:
        stack.callback(shutil.rmtree, root, ignore_errors=True)
        net = stack.enter_context(netns.lab(nodes + 1))
        made = Cluster(root, net, [f"n{k}" for k in range(1, nodes + 1)], cpus)
        stack.callback(stop, made)
        # Closed by atexit when the block never unwinds (a generator left unclosed when the
        # interpreter exits); closing twice is a no-op.
        hook = stack.pop_all()
        atexit.register(hook.close)
        try:
            start_daemons(made)
            yield made
        finally:
            atexit.unregister(hook.close)
            hook.close()
