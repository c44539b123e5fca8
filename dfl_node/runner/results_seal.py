"""The seal on every record between a node and the collector: an HMAC of the run's results key.

Why: the collector listens on a real port, and in a run without --secure any local process could
connect and push a record: add rows to metrics.jsonl, or end the run with a forged `error`. Every
plan therefore carries a results key, drawn per run (`RunPlan.results_key`, 32 random bytes as
hex; plan.json is written readable by its owner only), and a record counts only when it carries
HMAC-SHA256 of that key. HMAC and not CURVE: on this project's 2-core machine a record's HMAC
(sign and check) cost less CPU than CURVE's encryption of the same record at every size measured,
and needs no key pair per node and no handshake (docs/security.md has the numbers); under
--secure CURVE still authenticates each node's own key on top.

A sealed message is three frames:

    HEADER  node id (u32), sequence (u64), kind (u8: RECORD, HELLO, VERDICT); big-endian
    BODY    the msgpack map
    TAG     HMAC-SHA256(key, HEADER + BODY)

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
from collections.abc import Mapping, Sequence
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
    """A message whose tag matched the key."""

    node: int
    seq: int
    kind: int
    body: bytes


def _tag(key: bytes, header: bytes, body: bytes) -> bytes:
    mac = hmac.new(key, header, hashlib.sha256)
    mac.update(body)  # no copy of a large body to join it to the header
    return mac.digest()


def seal(key: bytes, node: int, seq: int, kind: int, body: bytes) -> list[bytes]:
    header = HEADER.pack(node, seq, kind)
    return [header, body, _tag(key, header, body)]


def unseal(key: bytes, frames: Sequence[bytes | memoryview]) -> Unsealed | None:
    """The message if `frames` carry the seal of `key`, else None (whatever they hold)."""
    if len(frames) != 3 or len(frames[0]) != HEADER.size or len(frames[2]) != TAG_BYTES:
        return None
    header, body, tag = (bytes(f) for f in frames)
    if not hmac.compare_digest(tag, _tag(key, header, body)):
        return None
    node, seq, kind = HEADER.unpack(header)
    return Unsealed(node, seq, kind, body)


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
