"""Layer 1: the per-process runtime. One node's life (connect, build, run rounds, send its
records, save), the Comm API and wire format, transports, the virtual network, ledgers and
state.

May import `topologies` and `dfl_config` only. It knows no protocol (the launcher hands
`run_node` the protocol class) and no launcher; nothing here is used by a single protocol
family alone.
"""
