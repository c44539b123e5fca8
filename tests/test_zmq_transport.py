"""The ZeroMQ transport on real sockets: identities, timeouts, limits and lossless close."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import zmq

from dfl_node.transports.base import UNKNOWN_PEER, TransportError
from dfl_node.transports.zeromq import ZmqTransport, peer_of, routing_id

MAX_FRAME = 1 << 20
LOCAL = "tcp://127.0.0.1:0"


def pair(**options) -> tuple[ZmqTransport, ZmqTransport]:
    """Nodes 0 and 1 on free ports, connected both ways."""
    a = ZmqTransport(0, LOCAL, {}, max_message_bytes=MAX_FRAME, **options)
    b = ZmqTransport(1, LOCAL, {0: a.bound_address}, max_message_bytes=MAX_FRAME, **options)
    a.add_peer(1, b.bound_address)
    return a, b


@pytest.fixture
def nodes():
    a, b = pair()
    yield a, b
    a.close()
    b.close()


def recv_within(transport: ZmqTransport, seconds: float = 5.0) -> tuple[int, list]:
    arrival = transport.recv(seconds)
    assert arrival is not None, "nothing arrived in time"
    return arrival


def test_routing_ids_are_four_byte_big_endian_node_ids() -> None:
    assert routing_id(258) == b"\x00\x00\x01\x02"
    assert peer_of(routing_id(7)) == 7
    assert peer_of(b"\x00\x12\x34\x56\x78") == UNKNOWN_PEER  # ZeroMQ's own 5-byte ids
    assert peer_of(b"") == UNKNOWN_PEER


def test_port_zero_resolves_to_the_bound_port(nodes) -> None:
    a, b = nodes
    for transport in (a, b):
        host, port = transport.bound_address.rsplit(":", 1)
        assert host == "tcp://127.0.0.1" and int(port) > 0
    assert a.bound_address != b.bound_address


def test_frames_arrive_whole_with_the_connection_identity(nodes) -> None:
    a, b = nodes
    a.send(1, [b"header", memoryview(b"x" * 100_000), b""])
    b.send(0, [b"reply"])
    peer, frames = recv_within(b)
    assert peer == 0
    assert [bytes(frame) for frame in frames] == [b"header", b"x" * 100_000, b""]
    assert all(isinstance(frame, memoryview) for frame in frames)
    peer, frames = recv_within(a)
    assert (peer, [bytes(f) for f in frames]) == (1, [b"reply"])


class PollRecorder:
    """A poller whose polls are recorded: how long a transport chose to block, in ms."""

    def __init__(self, poller: zmq.Poller) -> None:
        self.poller, self.polls = poller, []

    def poll(self, timeout: int) -> list[tuple[object, int]]:
        self.polls.append(timeout)
        return self.poller.poll(timeout)


def test_recv_times_out_within_the_bound(nodes, monkeypatch) -> None:
    a, _ = nodes
    poller = PollRecorder(a._poller)
    monkeypatch.setattr(a, "_poller", poller)
    assert a.recv(0.2) is None
    assert a.recv(0) is None
    assert poller.polls == [200, 0]  # one wait on the socket each, for the bound


def test_a_queued_message_is_taken_without_waiting(nodes, monkeypatch) -> None:
    a, b = nodes
    b.send(0, [b"first", b"second"])
    assert a._router.poll(5000, zmq.POLLIN)  # here, not yet read
    poller = PollRecorder(a._poller)
    monkeypatch.setattr(a, "_poller", poller)
    peer, frames = recv_within(a)
    assert (peer, [bytes(f) for f in frames]) == (1, [b"first", b"second"])
    assert poller.polls == []


def test_strangers_are_reported_by_their_connection_identity(nodes) -> None:
    a, _ = nodes
    context = zmq.Context()
    sockets = []
    try:
        for identity in (None, routing_id(7), b"abc"):
            socket = context.socket(zmq.DEALER)
            sockets.append(socket)
            if identity is not None:
                socket.setsockopt(zmq.ROUTING_ID, identity)
            socket.connect(a.bound_address)
            socket.send(b"hello")
            peer, frames = recv_within(a)
            assert bytes(frames[0]) == b"hello"
            assert peer == (7 if identity == routing_id(7) else UNKNOWN_PEER)
    finally:
        for socket in sockets:
            socket.close(0)
        context.term()


def test_misuse_raises_transport_error() -> None:
    a, b = pair()
    with pytest.raises(TransportError, match="not a peer"):
        a.send(5, [b"x"])
    with pytest.raises(TransportError, match="already connected"):
        a.add_peer(1, b.bound_address)
    with pytest.raises(TransportError, match="cannot set up"):
        ZmqTransport(2, a.bound_address, {}, max_message_bytes=MAX_FRAME)
    b.close()
    a.close()
    a.close()  # idempotent
    with pytest.raises(TransportError, match="closed"):
        a.send(1, [b"x"])
    with pytest.raises(TransportError, match="closed"):
        a.recv(0)


def test_oversized_frames_are_dropped_by_the_socket_and_the_link_recovers() -> None:
    a = ZmqTransport(0, LOCAL, {}, max_message_bytes=1000)
    b = ZmqTransport(1, LOCAL, {0: a.bound_address}, max_message_bytes=MAX_FRAME)
    try:
        b.send(0, [b"h", b"x" * 2000])
        assert a.recv(0.5) is None
        b.send(0, [b"small"])
        peer, frames = recv_within(a)
        assert (peer, bytes(frames[0])) == (1, b"small")
    finally:
        a.close()
        b.close()


def test_send_to_a_full_queue_times_out(tmp_path: Path) -> None:
    lonely = ZmqTransport(
        0, LOCAL, {1: f"ipc://{tmp_path}/nobody"}, max_message_bytes=MAX_FRAME, hwm=2,
        linger_ms=0, send_timeout_s=0.2,
    )  # fmt: skip
    try:
        queued = 0
        with pytest.raises(TransportError, match="timed out"):
            for _ in range(100):
                lonely.send(1, [b"queued"])
                queued += 1
        assert queued == 2  # hwm=2 queued two; the next send waited out its timeout, then failed
        assert lonely._dealers[1].getsockopt(zmq.SNDTIMEO) == 200
    finally:
        lonely.close()


def test_close_delivers_everything_queued_even_to_a_late_receiver(tmp_path: Path) -> None:
    """Messages sent to a peer that binds only later all arrive, in order, after close()."""
    address = f"ipc://{tmp_path}/late"
    count, payload = 300, 64 * 1024
    received: list[tuple[int, int, bytes]] = []

    def late_receiver() -> None:
        receiver = ZmqTransport(1, address, {}, max_message_bytes=MAX_FRAME)
        try:
            while len(received) < count and (arrival := receiver.recv(5.0)) is not None:
                peer, frames = arrival
                received.append((peer, int(bytes(frames[0])), bytes(frames[1])))
        finally:
            receiver.close()

    thread = threading.Thread(target=late_receiver)
    sender = ZmqTransport(0, LOCAL, {1: address}, max_message_bytes=MAX_FRAME)
    for i in range(count):
        sender.send(1, [str(i).encode(), bytes([i % 256]) * payload])
    thread.start()  # the receiver binds once everything is queued
    sender.close()  # returns once everything queued is out (linger)
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert [(peer, i) for peer, i, _ in received] == [(0, i) for i in range(count)]
    assert all(body == bytes([i % 256]) * payload for _, i, body in received)


def test_flush_waits_for_zero_copy_frames_and_discard_lets_go_of_them(tmp_path: Path) -> None:
    """A large frame is read by ZeroMQ after send(); flush says which peers still hold one, and
    discard drops a queue that would never drain (nobody listens) yet keeps the peer usable."""
    nobody = f"ipc://{tmp_path}/nobody"
    a = ZmqTransport(0, LOCAL, {1: nobody}, max_message_bytes=MAX_FRAME, linger_ms=0)
    try:
        a.send(1, [b"header", bytes(MAX_FRAME // 2)])  # above pyzmq's copy threshold
        assert a.flush(0.2) == (1,)
        a.discard(1)
        assert a.flush(0) == ()
        a.send(1, [b"small"])  # copied by pyzmq: nothing to wait for
        assert a.flush(0) == ()
    finally:
        a.close()
