"""The `hyper` keys that belong to the process running nodes, not to a protocol.

They sit in `hyper` because a user sets them like any hyper-parameter; every protocol's hyper
model extends this one, so they are accepted (and checked) for every protocol alike.
"""

from __future__ import annotations

from dfl_config.section import Count, Flag, Section


class RuntimeHyper(Section):
    torch_threads: Count = 1
    """CPU threads of each node's torch (a launched node process, or the inproc pool)."""
    deterministic: Flag = False
    """Deterministic kernels (GPU exactness; dfl_node/learning/torch_settings.py)."""
