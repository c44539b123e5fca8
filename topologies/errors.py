"""The one error type of the topologies package.

Every user-facing failure (a bad file, a bad generator parameter, an unknown shipped name) is a
`TopologyError` whose message is a single line naming the file, the field and the node or edge at
fault, so that a CLI can print it as is, with no traceback, and exit 2.
"""

from dfl_config.errors import DflMeshError


class TopologyError(DflMeshError):
    """A topology that cannot be used; `str(error)` is one line fit for stderr."""
