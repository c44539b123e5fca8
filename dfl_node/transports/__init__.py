"""Transports move whole messages between nodes: ZeroMQ (ROUTER/DEALER, one
process per node, CURVE encryption, ZMTP heartbeats for liveness) and in-process queues.

May import `dfl_node.wire`. A new transport implements `base.Transport`.
"""
