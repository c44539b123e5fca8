"""Algorithm building blocks that protocols compose: compressors C(v) and their
position coding, public model copies, event triggers and scalar max-consensus.

May import `dfl_node` and `topologies`; never a protocol family.
"""
