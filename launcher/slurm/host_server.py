"""Nodes of a Slurm job forked from one warm process per host, each still its own Slurm task.

A node's interpreter spends about 4 CPU-seconds importing torch, the runtime and the protocols
before it does anything. Fifty fresh interpreters on a host pay that fifty times over, all at
once, on the way to round 1; the local launcher pays it once, in the zygote its nodes are
forked from (launcher/backends/zygote.py). This is that zygote for a Slurm allocation:

- `serve`: one task per host of the job (one step over all hosts, `--overlap`, so it takes no
  CPU away from the nodes' steps) imports everything, warms torch and the plan's data up, and
  listens on a Unix socket local to the host;
- each node's task runs a small client that never imports torch (task_client.py, which says
  what the two exchange): it asks the host's server to fork its node, hands over its stdout
  and stderr, relays the signals Slurm sends the task and exits with the node's status. The
  server kills a node whose client is gone (SIGKILL of the task), so a node never outlives its
  task.

Slurm still places, cancels and accounts every node as a task (of the nodes' step, or of its own
step); only the CPU time shows under the host step. GPU jobs do not use this
(launcher/slurm/job.py): Slurm binds GPUs to a step's own processes, so each node there
runs in its task, a fresh interpreter.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import socket
import sys
import time
from pathlib import Path
from typing import NoReturn

from launcher.slurm.task_client import INT_BYTES, PACKET_BYTES, socket_path

PLAN_EVERY_S = 0.05


# --- the server: one per host -------------------------------------------------------------------

def serve(sock_path: str, plan_path: Path, run_dir: Path) -> None:
    """Warm up, listen, fork a node per client and report its exit; until Slurm ends the step."""
    began = time.monotonic()
    import launcher.node_cli  # noqa: F401  (everything a node imports, before the first fork)
    from dfl_node.plan import RunPlan
    from launcher.backends import preload
    from launcher.data.prepare import ensure_host_data
    from launcher.slurm.job import ready_file

    preload.one_blas_thread()
    preload.warm_forward()
    preload.warm_backward()
    wait_for(ready_file(run_dir))
    try:  # this host's data, decoded once for all its nodes; a failure is each node's to report
        ensure_host_data(RunPlan.load(plan_path), None)
        preload.warm_data(plan_path)
    except Exception as exc:
        print(f"dfl-mesh host server: no data warm-up: {type(exc).__name__}: {exc}",
              file=sys.stderr, flush=True)

    with contextlib.suppress(FileNotFoundError):
        os.unlink(sock_path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(sock_path)
    os.chmod(sock_path, 0o600)
    listener.listen(128)
    preload.freeze()
    print(f"dfl-mesh host server on {socket.gethostname()}: ready after "
          f"{time.monotonic() - began:.1f} s", file=sys.stderr, flush=True)
    try:
        Server(listener, plan_path, run_dir).loop()
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(sock_path)


def wait_for(ready: Path) -> None:
    """The plan's go-ahead (launcher/slurm/job.py's ready_file), which `dfl-launch slurm
    --submit` gives only after it queued the job and wrote the plan, so that this server's
    imports above overlap its own."""
    from launcher.slurm.job import PLAN_WAIT_S

    deadline = time.monotonic() + PLAN_WAIT_S
    while not ready.exists():
        if time.monotonic() > deadline:
            print(f"dfl-mesh host server: no {ready} within {PLAN_WAIT_S:g} s",
                  file=sys.stderr, flush=True)
            sys.exit(1)
        time.sleep(PLAN_EVERY_S)


class Server:
    """The accept loop: a client per node, the node's pid per client."""

    def __init__(self, listener: socket.socket, plan_path: Path, run_dir: Path) -> None:
        self.listener = listener
        self.plan_path, self.run_dir = plan_path, run_dir
        self.nodes: dict[int, socket.socket] = {}  # node pid -> its client
        self.selector = selectors.DefaultSelector()
        self.wake_r, self.wake_w = os.pipe()
        for fd in (self.wake_r, self.wake_w):
            os.set_blocking(fd, False)

    def loop(self) -> None:
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so SIGCHLD wakes select
        stop = False

        def end(*_: object) -> None:
            nonlocal stop
            stop = True

        # SIGUSR1: the batch script's "every node has ended" (srun forwards it to the
        # tasks as it is; a SIGTERM to srun would cancel the step instead, which Slurm then
        # records as killed). SIGTERM, SIGINT: the job cancelled.
        for sig in (signal.SIGUSR1, signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, end)
        self.selector.register(self.listener, selectors.EVENT_READ)
        self.selector.register(self.wake_r, selectors.EVENT_READ)
        while not stop:
            for key, _ in self.selector.select():
                if key.fd == self.wake_r:
                    os.read(self.wake_r, 4096)
                    self.reap()
                elif key.fileobj is self.listener:
                    self.accept()
                else:
                    self.hung_up(key.fileobj)  # type: ignore[arg-type]
        for pid in self.nodes:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def accept(self) -> None:
        client, _ = self.listener.accept()
        raw, ancdata, _, _ = client.recvmsg(PACKET_BYTES, socket.CMSG_SPACE(2 * INT_BYTES))
        fds = [int.from_bytes(data[i:i + INT_BYTES], sys.byteorder)
               for level, kind, data in ancdata
               if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS
               for i in range(0, len(data) - INT_BYTES + 1, INT_BYTES)]
        words = raw.decode(errors="replace").split()
        if len(words) != 2 or words[0] != "start" or not words[1].isdigit() or len(fds) != 2:
            for fd in fds:
                os.close(fd)
            with contextlib.suppress(OSError):
                client.send(b"error expected 'start NODE_ID' with stdout and stderr")
            client.close()
            return
        node_id = int(words[1])
        pid = os.fork()
        if pid == 0:
            self.node(node_id, fds)
        for fd in fds:
            os.close(fd)
        self.nodes[pid] = client
        self.selector.register(client, selectors.EVENT_READ)
        client.send(f"pid {pid}".encode())

    def node(self, node_id: int, fds: list[int]) -> NoReturn:
        """In the fork: stdio to the client's step output, then `dfl-node --plan ... --node-id`."""
        from launcher import node_cli
        from launcher.backends.zygote import node_main

        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGUSR1, signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_DFL)
        self.selector.close()
        self.listener.close()
        for client in self.nodes.values():
            client.close()
        os.close(self.wake_r)
        os.close(self.wake_w)
        for target, fd in zip((1, 2), fds, strict=True):
            os.dup2(fd, target)
            os.close(fd)
        sys.argv = ["dfl-node", "--plan", str(self.plan_path), "--out", str(self.run_dir),
                    "--node-id", str(node_id)]
        node_main(node_cli.main, [])

    def reap(self) -> None:
        while self.nodes:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                return
            client = self.nodes.pop(pid, None)
            if client is None:
                continue
            with contextlib.suppress(OSError):  # the client may be gone
                client.send(f"exit {os.waitstatus_to_exitcode(status)}".encode())
            self.drop(client)

    def hung_up(self, client: socket.socket) -> None:
        """A client said something or went away; either way its node goes (SIGKILL of the
        step leaves the server no other sign). It is reaped, and reported to nobody, later."""
        self.drop(client)
        for pid, owner in self.nodes.items():
            if owner is client:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    def drop(self, client: socket.socket) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(client)
        client.close()


def main(argv: list[str] | None = None) -> None:
    """`python -m launcher.slurm.host_server serve PLAN RUN_DIR KEY` on each host (KEY:
    task_client.socket_path's)."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["serve"] and len(args) == 4:
        serve(socket_path(args[3]), Path(args[1]), Path(args[2]))
    else:
        print("usage: python -m launcher.slurm.host_server serve PLAN RUN_DIR KEY",
              file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
