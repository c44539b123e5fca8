"""Transports move whole messages between nodes: ZeroMQ (ROUTER/DEALER, one
process per node, CURVE encryption, ZMTP heartbeats for liveness) and in-process queues.

May import `dfl_node.wire`, `dfl_node.settings`, the plan (`dfl_node.plan`) and `dfl_config`.
A new transport implements `base.Transport`.
"""
