"""A node's ZeroMQ routing id: its node id as 4 bytes, big-endian.

Apart from the transport (dfl_node/transports/zeromq.py), which imports ZeroMQ and the wire
codec (numpy): the launcher checks a topology's ids against the routing id's range before
anything runs, and a request it refuses should not pay for those imports (issue 45)."""

from __future__ import annotations

import struct

ROUTING_ID = struct.Struct("!I")
MAX_NODE_ID = 2 ** (8 * ROUTING_ID.size) - 1  # the largest id a routing id carries
