"""Every backend's name and what it supports: the one place a backend is spelled.

A backend is how a plan's nodes get started: by `dfl-launch` itself (`--transport NAME`
picks one of the LOCAL backends, the plan records the name), or by someone else from what
`dfl-launch` writes (a compose file, a plan for one `dfl-node` per host), with
`dfl-launch collect` gathering the results. The implementations live in launcher/backends/,
which runs plans and so sits above this package; what configuration must know before any of
them runs (the names a run may give, the default, whether a backend can run a `--secure`
mesh) is here, so that resolving a plan never reaches up. launcher/backends/registry.py pairs
each LOCAL entry with its implementation, and checks that none is missing.
"""

from __future__ import annotations

from dataclasses import dataclass

from launcher.errors import LaunchError


@dataclass(frozen=True)
class BackendEntry:
    """What the launcher may know of a backend without running it."""

    name: str  # how a run names it: the `--transport` value of a local backend
    transport: str  # the runtime transport its nodes speak (dfl_node/transports/)
    summary: str  # one line for --help and the docs
    secure: bool  # can run a --secure mesh (CURVE on every socket)
    in_process: bool  # every node is a thread of the launcher's own process
    local: bool  # dfl-launch starts and watches the nodes itself


PROCESSES = BackendEntry("zmq", "zmq", "one OS process per node, over ZeroMQ sockets",
                         secure=True, in_process=False, local=True)
THREADS = BackendEntry("inproc", "inproc", "every node a thread of the launcher, over in-memory "
                       "queues (the exactness reference)", secure=False, in_process=True,
                       local=True)
COMPOSE = BackendEntry("compose", PROCESSES.transport, "a docker-compose file: one container "
                       "per node", secure=False, in_process=False, local=False)
HOSTS = BackendEntry("hosts", PROCESSES.transport, "a plan for one dfl-node per host, "
                     "started by hand", secure=True, in_process=False, local=False)

SLURM = BackendEntry("slurm", PROCESSES.transport, "a Slurm batch job: one task per node, "
                     "addresses discovered at start-up", secure=False, in_process=False,
                     local=False)

BACKENDS: dict[str, BackendEntry] = {s.name: s for s in (PROCESSES, THREADS, COMPOSE, HOSTS,
                                                         SLURM)}
# The backends `--transport` may name, in the order --help lists them.
LOCAL: dict[str, BackendEntry] = {n: s for n, s in BACKENDS.items() if s.local}
DEFAULT_LOCAL = PROCESSES.name


def local_spec(name: object) -> BackendEntry:
    """The local backend a run's `transport` names; a LaunchError listing the choices else."""
    spec = LOCAL.get(name) if isinstance(name, str) else None
    if spec is None:
        raise LaunchError(f"transport: must be {' or '.join(LOCAL)}, got {name!r}")
    return spec


def check_hosts_transport(asked: object) -> None:
    """Nodes started elsewhere (one dfl-node per host, a Slurm job's tasks) speak the hosts'
    transport: a run that asks for another (`--transport inproc`) is refused, before a job is
    queued for it (launcher/slurm/queue.py) as when a host resolves its plan."""
    if asked is not None and local_spec(asked).transport != HOSTS.transport:
        raise LaunchError(f"--transport: dfl-node runs over {HOSTS.transport}")


def transport_help() -> str:
    """`--transport`'s help: every local backend and what it is."""
    return "How the launcher runs the nodes: " + "; ".join(
        f"{s.name}: {s.summary}" + (" (default)" if s.name == DEFAULT_LOCAL else "")
        for s in LOCAL.values()) + "."
