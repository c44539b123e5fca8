"""The plan's `discovery` section: where the nodes of a plan without addresses
(`endpoints.nodes: discover`) report their own and learn the others' (dfl_node/runner/
discovery.py, launcher/run/address_book.py); a plan that holds every address has none."""

from __future__ import annotations

from dfl_config.section import Section


class DiscoverySection(Section):
    bind: str
    """The directory's ZeroMQ bind address (the process that collects serves it)."""
    address: str
    """Where the nodes reach the directory."""
