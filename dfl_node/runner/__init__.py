"""One node's run: `run_node`, the structural interface it drives a protocol through
(`algorithm.py`), the context a protocol receives, failure agreement among survivors, the node
side of a pre-phase and of address discovery, the sink of its records (the launcher's collector),
checkpoints of a whole node and profiling.

The top of the runtime: may import every other `dfl_node` sub-package.
"""
