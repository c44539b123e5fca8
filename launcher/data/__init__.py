"""All of data preparation: find a real dataset and decode it into the prepared-data cache
that nodes open read-only, once per run before any node starts, or on a host given a plan made
elsewhere. Nodes read the cache through the runtime (dfl_node/learning/datacache.py).

May import `launcher.errors`, the protocols' registry and the runtime.
"""
