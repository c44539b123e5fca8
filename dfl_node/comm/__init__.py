"""Comm: the only interface a protocol sees (tagged send, receive, exchange, barrier),
the placement of received tensors, and the rendezvous of nodes started in any order.

May import `dfl_node.wire`, `dfl_node.transports`, `dfl_node.ledgers`, `dfl_node.netsim` and
`dfl_config`.
"""
