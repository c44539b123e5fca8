"""The address book of a discover plan: where its nodes report their addresses and get
everyone's.

It runs beside the collector (the one process the plan's address is known for in advance) and
answers no node before every node of the plan has reported, so each node gets the same table
and computes the same plan from it (their section hashes agree at start-up). Reports come from a
port on the network, so one is used only when it is a msgpack map from the node its routing id
names, with a `tcp://` address and a host name; anything else is dropped and counted. A node
that reports again after the table is out (its DEALER reconnected and resent) gets the table
again if its address is unchanged, and a refusal otherwise: the others already connect to the
first one.

The sockets live in a thread of their own so that the collector's loop needs no change; bind
errors surface in the caller's thread, before the thread starts.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import msgpack
import zmq

from dfl_node.plan import RunPlan
from dfl_node.transports.zeromq import peer_of
from launcher.errors import LaunchError

POLL_MS = 100
MAX_REPORT_BYTES = 4096
Entry = tuple[str, str]


def valid_report(identity: bytes, raw: bytes, ids: set[int]) -> tuple[int, Entry] | None:
    """(node, (address, host)) of a well-formed report from the node it names, else None."""
    try:
        record = msgpack.unpackb(raw, raw=False, strict_map_key=True)
    except Exception:  # msgpack raises several unrelated types on garbage
        return None
    if not isinstance(record, dict):
        return None
    node, address, host = record.get("node"), record.get("address"), record.get("host")
    if type(node) is not int or node not in ids or peer_of(identity) != node:
        return None
    if not (isinstance(address, str) and address.startswith("tcp://") and len(address) < 300
            and isinstance(host, str) and 0 < len(host) < 256):
        return None
    return node, (address, host)


class AddressBook:
    """The plan's address book, serving until `close`; `table` is what every node was told."""

    def __init__(self, plan: RunPlan) -> None:
        section = plan.discovery
        if section is None:
            raise LaunchError("directory: the plan has no discovery section (its nodes have "
                              "addresses)")
        self.ids = set(plan.ids)
        self.table: dict[int, Entry] = {}
        self.rejected: Counter[str] = Counter()
        self._waiting: dict[int, bytes] = {}  # node -> routing id, until the table is out
        self._complete = False
        self._context = zmq.Context()
        self._sock = self._context.socket(zmq.ROUTER)
        self._sock.setsockopt(zmq.MAXMSGSIZE, MAX_REPORT_BYTES)
        self._sock.setsockopt(zmq.LINGER, 1000)
        try:
            self._sock.bind(section.bind)
        except zmq.ZMQError as exc:
            self._sock.close()
            self._context.term()
            raise LaunchError(f"directory: cannot listen on {section.bind} (the "
                              f"plan's directory {section.address}): {exc}") from None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="directory", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        try:
            while not self._stop.is_set():
                if self._sock.poll(POLL_MS, zmq.POLLIN):
                    self._handle(self._sock.recv_multipart())
        finally:
            self._sock.close()
            self._context.term()

    def _handle(self, frames: list[bytes]) -> None:
        if len(frames) != 2:
            self.rejected["bad_report"] += 1
            return
        identity, raw = frames
        got = valid_report(identity, raw, self.ids)
        if got is None:
            self.rejected["bad_report"] += 1
            return
        node, entry = got
        if not self._complete:
            self.table[node] = entry
            self._waiting[node] = identity
            if self.table.keys() == self.ids:
                self._complete = True
                for waiting in self._waiting.values():
                    self._answer(waiting, self._table_answer())
        elif self.table[node] == entry:
            self._answer(identity, self._table_answer())
        else:
            self.rejected["moved_after_table"] += 1
            self._answer(identity, {"error": f"node {node} reported {entry[0]} after the table "
                                             f"went out with {self.table[node][0]}"})

    def _table_answer(self) -> dict[str, Any]:
        return {"nodes": [[i, *self.table[i]] for i in sorted(self.table)]}

    def _answer(self, identity: bytes, answer: dict[str, Any]) -> None:
        self._sock.send_multipart([identity, msgpack.packb(answer)])

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
