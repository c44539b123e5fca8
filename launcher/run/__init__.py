"""The machinery of one run: the collector of node records, the address book of a discover
plan's nodes, failure handling, live progress, the run directory and its files, summary and
ledgers, resume, the pre-phase coordinator.

May import `launcher.config`, `launcher.results`, the protocols' registry and the runtime;
never a backend.
"""
