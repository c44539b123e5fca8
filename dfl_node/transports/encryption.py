"""ZeroMQ CURVE for one process of a `--secure` run: its key pair, the run's public keys, and
the ZAP handler that admits only the keys a listening socket expects.

Why: without CURVE, a connection's node id is whatever its DEALER declares (its ROUTING_ID), so
any host that can reach a port can pose as a neighbour. With `--secure` every socket of the run
does a CURVE handshake (the side that binds is the server, and its clients must know its public
key), and the binding side's context runs a ZAP handler: libzmq asks it, once per connection,
whether to admit the client's key. An unknown key is refused, so that connection never delivers
a message. An admitted key is answered with its node id as the ZAP User-Id, which libzmq then
attaches to every frame of that connection: the receiver learns which key sent a message, and
`authenticated_peer` (dfl_node/transports/zeromq.py) checks it against the id the connection claims.

Key files are ZeroMQ certificates (`zmq.auth.load_certificate` reads them; `dfl-launch keys`
writes them): `<name>.key` holds a public key, `<name>.key_secret` the pair. Names: `node-<id>`,
`aggregator` (a server-based protocol's hub), `collector`, `coordinator`. The plan carries the
public keys (its `secure` section); secret keys stay in their files.

The ZAP endpoint is one per context, so a secure listening socket needs a context of its own.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import zmq
import zmq.auth
import zmq.utils.z85

from dfl_node.plan import PlanError, RunPlan
from dfl_node.settings.secure import SecureSection

COLLECTOR, COORDINATOR, AGGREGATOR = "collector", "coordinator", "aggregator"
SERVICES = (COLLECTOR, COORDINATOR)
ZAP_ENDPOINT = "inproc://zeromq.zap.01"  # fixed by the ZAP specification (RFC 27)
ZAP_DOMAIN = b"dfl-mesh"
ZAP_POLL_MS = 100
KEY_CHARS = 40  # a 32-byte key in Z85


class CurveError(PlanError):
    """Keys that cannot be used (missing, unreadable, malformed, not the plan's); one line."""


def node_key_name(node_id: int) -> str:
    return f"node-{node_id}"


def key_name(plan: RunPlan, node_id: int) -> str:
    """The file name (without suffix) of a node's key pair."""
    return AGGREGATOR if node_id == plan.aggregator else node_key_name(node_id)


def valid_key(key: bytes) -> bool:
    return len(key) == KEY_CHARS and all(c in zmq.utils.z85.Z85CHARS for c in key)


def read_certificate(path: Path, secret: bool) -> tuple[bytes, bytes | None]:
    """(public, secret) from a key file; `secret`: the pair must be there and agree."""
    try:
        path.open("rb").close()  # for the system's own reason when the file cannot be read
        public, secret_key = zmq.auth.load_certificate(path)
    except OSError as exc:
        raise CurveError(f"{path}: cannot read the key file: {exc.strerror or exc}") from None
    except ValueError:
        raise CurveError(f"{path}: holds no public-key") from None
    if not valid_key(public):
        raise CurveError(f"{path}: public-key is not a 40-character Z85 key")
    if secret and (secret_key is None or not valid_key(secret_key)
                   or zmq.curve_public(secret_key) != public):
        raise CurveError(f"{path}: holds no secret-key that matches its public-key")
    return public, secret_key


def plan_keys(secure: SecureSection) -> dict[str, bytes]:
    """The plan's public keys by name; a CurveError if one is not a Z85 key."""
    keys = {name: value.encode() for name, value in secure.public_keys.items()}
    if not all(valid_key(key) for key in keys.values()):
        raise CurveError("plan: secure.public_keys must map key names to Z85 public keys")
    return keys


@dataclass(frozen=True)
class Curve:
    """One process's CURVE material: its own pair and the public keys of the run."""

    public: bytes
    secret: bytes
    nodes: Mapping[int, bytes]  # every node's public key, by node id
    services: Mapping[str, bytes]  # the collector's and (with a pre-phase) the coordinator's

    def client(self, socket: zmq.Socket, server_key: bytes) -> None:
        """Make `socket` (before it connects) a CURVE client of the server holding `server_key`."""
        socket.curve_serverkey = server_key
        socket.curve_publickey = self.public
        socket.curve_secretkey = self.secret

    def serve(self, socket: zmq.Socket, clients: Mapping[int, bytes]) -> ZapHandler:
        """Make `socket` (before it binds) a CURVE server that admits only `clients` (node id ->
        public key). Close the returned handler before terminating the socket's context."""
        handler = ZapHandler(socket.context, clients)
        socket.curve_server = True
        socket.curve_secretkey = self.secret
        socket.zap_domain = ZAP_DOMAIN
        socket.setsockopt(zmq.ZAP_ENFORCE_DOMAIN, 1)  # no handler: refuse, never admit
        return handler


def load_curve(plan: RunPlan, who: int | str, keys_dir: Path | None = None) -> Curve | None:
    """The CURVE material of node `who` (an id) or service `who` (a name) of a secure plan, its
    pair read from `keys_dir` (default: the plan's `keys_dir`); None for a plan without
    `--secure`. A CurveError says which file or key is wrong."""
    if plan.secure is None:
        if keys_dir is not None:
            raise CurveError("--keys: the plan is not --secure, so it uses no keys")
        return None
    keys = plan_keys(plan.secure)
    name = who if isinstance(who, str) else key_name(plan, who)
    path = Path(keys_dir or plan.secure.keys_dir) / f"{name}.key_secret"
    public, secret = read_certificate(path, secret=True)
    if keys.get(name) != public:
        raise CurveError(f"{path}: is not the plan's {name} key (another key set?)")
    missing = [key_name(plan, i) for i in plan.ids if key_name(plan, i) not in keys]
    if missing:
        raise CurveError(f"plan: secure.public_keys lacks {missing[0]}")
    return Curve(public, secret or b"", {i: keys[key_name(plan, i)] for i in plan.ids},
                 {s: keys[s] for s in SERVICES if s in keys})


def key_owner(frame: zmq.Frame) -> int:
    """The node whose key the connection of a received frame authenticated with (its ZAP
    User-Id)."""
    return int(frame.get("User-Id"))


class ZapHandler:
    """Answers libzmq's authentication requests for the CURVE servers of one context: a client
    whose key is admitted gets its node id as User-Id; any other key, or any other mechanism,
    is refused, and that connection's handshake fails."""

    def __init__(self, context: zmq.Context, clients: Mapping[int, bytes]) -> None:
        self._users = {key: str(node).encode() for node, key in clients.items()}
        self._socket = context.socket(zmq.REP)
        self._socket.linger = 0
        self._socket.bind(ZAP_ENDPOINT)
        self._stop = threading.Event()
        # The socket moves to the thread: Thread.start is the memory barrier ZeroMQ asks for.
        self._thread = threading.Thread(target=self._serve, name="zap", daemon=True)
        self._thread.start()

    def admit(self, node: int, key: bytes) -> None:
        """Admit one more client (a peer added after start)."""
        self._users[key] = str(node).encode()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()

    def _serve(self) -> None:
        try:
            while not self._stop.is_set():
                if self._socket.poll(ZAP_POLL_MS):
                    self._socket.send_multipart(self._answer(self._socket.recv_multipart()))
        finally:
            self._socket.close()

    def _answer(self, request: list[bytes]) -> list[bytes]:
        """The ZAP reply (RFC 27): version, request id, status, reason, user id, metadata."""
        version, request_id, *_, mechanism = request[:6]
        credentials = request[6:]
        user = None
        if mechanism == b"CURVE" and credentials and len(credentials[0]) == 32:
            user = self._users.get(zmq.utils.z85.encode(credentials[0]))
        if user is None:
            return [version, request_id, b"400", b"key not admitted", b"", b""]
        return [version, request_id, b"200", b"OK", user, b""]
