"""The client each node's Slurm task runs: it asks its host's server (host_server.py) to fork the
node, and ends as the node ends.

One runs per node, fifty to a job of fifty, all on the way to round 1, so its start is what it
costs: run by path with `python -S -I`, it imports only what the interpreter has built in
(`_socket` and `_signal`, not their wrappers `socket` and `signal`, which import enum, selectors
and more) and speaks plain words, not JSON (whose import pulls in `re`). 21 against 73 ms of
CPU a client here, measured over 20 starts each.

The words, in SOCK_SEQPACKET packets: the client sends `start NODE_ID` with its stdout and
stderr descriptors (SCM_RIGHTS), so the node writes where the task's output goes; the server
answers `pid P`, later `exit CODE` (as the local zygote gives it: the exit status, or minus
the signal), or `error WHY`. The client relays the signals Slurm sends the task (scancel, the
time limit) to the node; a client killed outright (SIGKILL) hangs up, and the server kills its
node, so no node outlives its task.
"""

from __future__ import annotations

import _socket
import os
import sys
import time

TYPE_CHECKING = False  # typing's own flag, without importing typing
if TYPE_CHECKING:  # typeshed describes _signal's functions and numbers as signal's
    import signal as _signal
    from typing import NoReturn
else:
    import _signal

PACKET_BYTES = 1 << 16
CONNECT_S = 900.0  # how long a client waits for its host's server (it imports torch meanwhile)
CONNECT_EVERY_S = 0.05
LOST = 255  # a client's exit status when its server vanished without reporting the node's
RELAYED = ("SIGTERM", "SIGINT", "SIGHUP", "SIGUSR1", "SIGUSR2", "SIGCONT")
INT_BYTES = 4  # a descriptor in SCM_RIGHTS: a C int


def socket_path(key: str) -> str:
    """The server's socket on each host: in /tmp, one per job (`key`: its id and its run
    directory's digest, launcher/slurm/job.py's server_key) and host. Named by the host too,
    because /tmp may be shared between hosts (a diskless node's, or containers'), where a
    socket file of another host is a different server."""
    return f"/tmp/dfl-mesh-{key}-{_socket.gethostname()}.sock"


def descriptors(fds: list[int]) -> bytes:
    return b"".join(fd.to_bytes(INT_BYTES, sys.byteorder) for fd in fds)


def run(sock_path: str, node_id: int) -> NoReturn:
    """Start node `node_id` through the host's server and end as it ends."""
    sock = connect(sock_path)
    sock.sendmsg([f"start {node_id}".encode()],
                 [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, descriptors([1, 2]))])
    word, value = receive(sock)
    if word != "pid":
        print(f"dfl-mesh host server: {value if word == 'error' else 'hung up'}",
              file=sys.stderr)
        os._exit(LOST)
    pid = int(value)

    def relay(signum: int, _: object) -> None:
        try:  # noqa: SIM105  (contextlib.suppress: an import of contextlib per task)
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    for name in RELAYED:
        _signal.signal(getattr(_signal, name), relay)
    while True:
        try:
            word, value = receive(sock)
        except InterruptedError:
            continue
        if word == "exit":
            code = int(value)
            os._exit(128 - code if code < 0 else code)
        if not word:
            os._exit(LOST)


def connect(sock_path: str) -> _socket.socket:
    """The server's socket, once it listens (its host's server may still be importing)."""
    deadline = time.monotonic() + CONNECT_S
    while True:
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
        try:
            sock.connect(sock_path)
            return sock
        except (FileNotFoundError, ConnectionRefusedError):
            sock.close()
            if time.monotonic() > deadline:
                print(f"dfl-mesh: no host server at {sock_path} within {CONNECT_S:g} s",
                      file=sys.stderr)
                os._exit(LOST)
            time.sleep(CONNECT_EVERY_S)


def receive(sock: _socket.socket) -> tuple[str, str]:
    """(word, value) of the next packet; ("", "") once the server hung up."""
    word, _, value = sock.recv(PACKET_BYTES).decode().partition(" ")
    return word, value


def main(argv: list[str] | None = None) -> None:
    """`python -S -I .../task_client.py KEY NODE_ID` in each node's task (KEY: socket_path's)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or not args[1].isdigit():
        print("usage: python -S -I task_client.py KEY NODE_ID", file=sys.stderr)
        sys.exit(2)
    run(socket_path(args[0]), int(args[1]))


if __name__ == "__main__":
    main()
