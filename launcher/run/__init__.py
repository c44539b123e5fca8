"""The machinery of one run: the collector of node records, the directory of a discover plan's
node addresses, failure handling, live progress, the run directory, summary and ledgers, resume,
the pre-phase coordinator.

May import `launcher.config` and the runtime; never a backend.
"""
