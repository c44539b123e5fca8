"""What a node takes in from one peer before it reads: the plan's largest legitimate message,
and how many of those a peer may have waiting in the node's socket.

Why: ZeroMQ receives what a connection sends and holds it until the node reads it, and a node
does not read while it trains. ZeroMQ's caps are per frame (MAXMSGSIZE: a frame announced
larger drops the connection before a byte of it is stored) and per connection in messages
(RCVHWM: at the mark ZeroMQ stops reading that connection, and the rest waits in the sender's
queue), never in bytes. With the frame cap at the old fixed 1 GiB, a stranger's four 256 MB
frames grew a node by 1 GB. So:

- the frame cap is the plan's largest legitimate message: `wire.max_message_bytes` when the
  plan sets it, else MODEL_COPIES times the bytes of the plan's model (no shipped protocol sends
  more in one message: DSGT sends two copies, a compressor at most every value with its int32
  position), at least MIN_MESSAGE_BYTES (control messages, small models); a model its protocol
  builds itself (DSC's) has no size here, and its plans keep FALLBACK_MESSAGE_BYTES;
- a peer may have PEER_MESSAGES messages waiting: a neighbour is at most a round ahead, and a
  round is a few messages per link (the hostile test's insider sends ten).

One peer therefore holds at most `peer_buffer_bytes` of the node: PEER_MESSAGES frames of the
cap, and the one ZeroMQ is reading in. That holds for messages of one frame each. ZeroMQ keeps
a message of several frames whole until its last frame, and bounds neither the frames of one
message nor their sum: a stranger who sends one message of many frames, each under the cap, is
held in full. Only `--secure` closes that: a stranger's connection delivers nothing at all.

A protocol whose messages outgrow the derived cap fails on its first send, naming the cap
(a sender checks its message as its receivers will, dfl_node/wire/session.py); set
`wire.max_message_bytes` for it.
"""

from __future__ import annotations

from dfl_node.learning.models import model_bytes
from dfl_node.plan import RunPlan
from dfl_node.wire.message import WireLimits

MODEL_COPIES = 4
MIN_MESSAGE_BYTES = 1 << 20
FALLBACK_MESSAGE_BYTES = 1 << 30
PEER_MESSAGES = 64


def largest_message(plan: RunPlan) -> int:
    """The most tensor bytes one message of the plan may carry."""
    fixed = plan.wire.max_message_bytes
    if fixed is not None:
        return int(fixed)
    size = model_bytes(plan.model, plan.data.shape, plan.data.num_classes)
    if size is None:
        return FALLBACK_MESSAGE_BYTES
    return max(MIN_MESSAGE_BYTES, MODEL_COPIES * size)


def wire_limits(plan: RunPlan) -> WireLimits:
    """The caps every message to a node of the plan is checked against."""
    return WireLimits(max_tensors=plan.wire.max_tensors,
                      max_message_bytes=largest_message(plan))


def peer_buffer_bytes(limits: WireLimits) -> int:
    """The most one peer's messages of one frame each occupy in a node before it reads them."""
    return (PEER_MESSAGES + 1) * limits.max_frame_bytes
