"""The seal on every record between a node and the collector: an HMAC of the run's results key.

Why: the collector listens on a real port, and in a run without --secure any local process could
connect and push a record: add rows to metrics.jsonl, or end the run with a forged `error`. Every
plan therefore carries a results key, drawn per run (`RunPlan.results_key`, 32 random bytes as
hex; plan.json is written readable by its owner only), and a record counts only when it carries
HMAC-SHA256 of that key. HMAC and not CURVE with a per-run key pair: measured on this project's
2-core machine, CURVE is cheaper for a small record once connected, HMAC for large records and
for every shipped protocol's default run once CURVE's handshake is counted; HMAC also needs no
handshake, no ZAP thread and no second code path beside --secure's CURVE with each node's own
key, which still applies on top (docs/security.md has the numbers).

A sealed message is one frame, HEADER + BODY + TAG:

    HEADER  node id (u32), sequence (u64), kind (u8: RECORD, HELLO, VERDICT); big-endian
    BODY    the msgpack map
    TAG     HMAC-SHA256(key, HEADER + BODY), 32 bytes

(one frame and a one-shot HMAC: a metrics row's seal and check cost a third of what three frames
and an incremental HMAC did, measured)

The sequence grows with every message a node sends (its clock in nanoseconds, and at least one
more than the last), so the collector refuses a sealed record read off the network and sent
again (`replayed`), also once the node has restarted. A node's first message is HELLO: its
plan's section hashes and a nonce; the collector answers VERDICT, sealed the same way, naming
the sections in which its plan differs (none: the plan agreed) and echoing the nonce. A node
sends no record before an agreeing verdict and stops on a differing one, so results never go to
a collector of another plan.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import struct
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dfl_node.plan import PlanError, RunPlan

MAX_RECORD_BYTES = 64 << 20  # the collector's cap on one record (a node's `done` is the largest)
KEY_BYTES = 32
TAG_BYTES = hashlib.sha256().digest_size
NONCE_BYTES = 16
RECORD, HELLO, VERDICT = 0, 1, 2
HEADER = struct.Struct(">IQB")
_HEX_KEY = re.compile(rf"[0-9a-f]{{{2 * KEY_BYTES}}}")


def new_results_key() -> str:
    """A fresh results key, as the plan holds it (hex)."""
    return secrets.token_hex(KEY_BYTES)


def valid_results_key(text: object) -> bool:
    return isinstance(text, str) and bool(_HEX_KEY.fullmatch(text))


def results_key(plan: RunPlan) -> bytes:
    """The plan's results key; a PlanError (one line) for a plan without a usable one."""
    if not valid_results_key(plan.results_key):
        raise PlanError(f"plan: results_key must be {2 * KEY_BYTES} hex digits (a plan written "
                        "before results were sealed? make the plan again)")
    return bytes.fromhex(plan.results_key)


@dataclass(frozen=True)
class Unsealed:
    """A message whose tag matched the key; `body` is a view of the received frame."""

    node: int
    seq: int
    kind: int
    body: memoryview


def seal(key: bytes, node: int, seq: int, kind: int, body: bytes) -> bytes:
    signed = HEADER.pack(node, seq, kind) + body
    return signed + hmac.digest(key, signed, "sha256")


def unseal(key: bytes, frame: bytes | memoryview) -> Unsealed | None:
    """The message if `frame` carries the seal of `key`, else None (whatever it holds)."""
    view = memoryview(frame)
    if view.nbytes < HEADER.size + TAG_BYTES or view.ndim != 1 or view.itemsize != 1:
        return None
    signed = view[:-TAG_BYTES]
    if not hmac.compare_digest(view[-TAG_BYTES:], hmac.digest(key, signed, "sha256")):
        return None
    node, seq, kind = HEADER.unpack_from(view)
    return Unsealed(node, seq, kind, signed[HEADER.size:])


class SequenceClock:
    """The sequence numbers of one sender: nanoseconds of its clock, strictly growing."""

    def __init__(self) -> None:
        self._last = 0

    def next(self) -> int:
        self._last = max(self._last + 1, time.time_ns())
        return self._last


def differing(mine: Mapping[str, str], theirs: Any) -> list[str]:
    """The sections (sorted) in which the hashes `theirs` (as received) differ from `mine`."""
    if not isinstance(theirs, dict):
        return sorted(mine)
    return sorted(name for name in {*mine, *theirs} if mine.get(name) != theirs.get(name))
